//! `imrelay acp`, the real command, between a test playing the editor (the proxy's standard
//! input and output) and a fake ACP agent on loopback: a shell that joins its standard input
//! and output to a TCP connection to the test (`bash`'s `/dev/tcp`), so the test plays the
//! agent too. The permission request is the one captured from the real Gemini CLI
//! (`tests/fixtures/gemini-cli`).

use std::process::Stdio;
use std::time::Duration;

use imrelay::config::OnTimeout;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::net::TcpListener;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::process::{Child, ChildStdin, ChildStdout};

use crate::support::*;

/// How long one message may take to arrive.
pub(crate) const LIMIT: Duration = Duration::from_secs(20);

/// One side of the conversation: lines in, lines out.
pub(crate) struct Side<R, W> {
    lines: Lines<BufReader<R>>,
    out: W,
}

impl<R: tokio::io::AsyncRead + Unpin, W: tokio::io::AsyncWrite + Unpin> Side<R, W> {
    /// Writes `text` and a line break, exactly.
    pub(crate) async fn write_raw(&mut self, text: &str) {
        self.out.write_all(text.as_bytes()).await.expect("write");
        self.out.write_all(b"\n").await.expect("write");
        self.out.flush().await.expect("flush");
    }

    pub(crate) async fn send(&mut self, m: Value) {
        self.write_raw(&m.to_string()).await;
    }

    /// The next line, exactly as written.
    pub(crate) async fn recv_raw(&mut self) -> String {
        match tokio::time::timeout(LIMIT, self.lines.next_line()).await {
            Ok(Ok(Some(line))) => line,
            Ok(Ok(None)) => panic!("closed before the next message"),
            Ok(Err(e)) => panic!("read: {e}"),
            Err(_) => panic!("no message within {LIMIT:?}"),
        }
    }

    pub(crate) async fn recv(&mut self) -> Value {
        let line = self.recv_raw().await;
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    }

    /// Nothing arrives for a moment.
    pub(crate) async fn quiet(&mut self) {
        if let Ok(Ok(Some(line))) =
            tokio::time::timeout(Duration::from_millis(300), self.lines.next_line()).await
        {
            panic!("unexpected message: {line}");
        }
    }
}

pub(crate) type Editor = Side<ChildStdout, ChildStdin>;
pub(crate) type Agent = Side<OwnedReadHalf, OwnedWriteHalf>;

/// The proxy, the editor's side of it and the agent's, and the agent's process group.
pub(crate) struct Proxied {
    proxy: Child,
    pub(crate) editor: Editor,
    pub(crate) agent: Agent,
    pgid: i32,
    _dir: tempfile::TempDir,
}

/// `imrelay acp --url url -- <fake agent>`, connected.
pub(crate) async fn proxied(url: &str) -> Proxied {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let dir = tempfile::tempdir().expect("tempdir");
    let pidfile = dir.path().join("agent.pid");
    // The shell's pid is the agent's process group; after `exec` it is the `cat` that writes
    // what the test sends as the agent. (A background command's input is /dev/null unless
    // given: the proxy's end is kept as fd 4 for it.)
    let script = format!(
        "echo $$ > {}; exec 3<>/dev/tcp/127.0.0.1/{port} 4<&0; cat <&4 >&3 & exec cat <&3 4<&-",
        pidfile.display()
    );
    let mut proxy = tokio::process::Command::new(env!("CARGO_BIN_EXE_imrelay"))
        .args(["acp", "--url", url, "--", "bash", "-c", &script])
        .env_remove("IMRELAY_URL")
        .env_remove("IMRELAY_AGENT_TOKEN")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("imrelay acp runs");
    let (socket, _) = tokio::time::timeout(LIMIT, listener.accept())
        .await
        .expect("the fake agent connects")
        .expect("accept");
    let (r, w) = socket.into_split();
    let pgid = eventually("the agent's pid", || async {
        std::fs::read_to_string(&pidfile)
            .ok()?
            .trim()
            .parse::<i32>()
            .ok()
    })
    .await;
    let editor = Side {
        lines: BufReader::new(proxy.stdout.take().expect("stdout")).lines(),
        out: proxy.stdin.take().expect("stdin"),
    };
    let agent = Side {
        lines: BufReader::new(r).lines(),
        out: w,
    };
    Proxied {
        proxy,
        editor,
        agent,
        pgid,
        _dir: dir,
    }
}

/// Whether any live process is in process group `pgid`.
fn group_alive(pgid: i32) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return false;
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .any(|stat| {
            // pid (comm) state ppid pgrp ...: comm may hold spaces, so read after its `)`.
            let Some((_, rest)) = stat.rsplit_once(')') else {
                return false;
            };
            let fields: Vec<&str> = rest.split_whitespace().collect();
            fields.first().is_some_and(|s| *s != "Z")
                && fields.get(2).and_then(|g| g.parse::<i32>().ok()) == Some(pgid)
        })
}

/// The proxy's exit status, within [`LIMIT`].
async fn exited(proxy: &mut Child) -> std::process::ExitStatus {
    tokio::time::timeout(LIMIT, proxy.wait())
        .await
        .expect("the proxy exits")
        .expect("wait")
}

/// The captured Gemini CLI permission request, for session `session`, with id `id`.
fn gemini_request(id: Value, session: &str) -> Value {
    let text = std::fs::read_to_string(format!(
        "{}/tests/fixtures/gemini-cli/acp_allow.jsonl",
        env!("CARGO_MANIFEST_DIR")
    ))
    .expect("fixture");
    let mut m = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|l| l["msg"].clone())
        .find(|m| m["method"] == "session/request_permission")
        .expect("a permission request in the fixture");
    m["id"] = id;
    m["params"]["sessionId"] = json!(session);
    m
}

/// `initialize` and `session/new` through the proxy, unchanged both ways; the session id.
pub(crate) async fn open_session(p: &mut Proxied, cwd: &str) -> String {
    // Odd spacing and key order: the agent must get the very bytes.
    let init = r#"{ "id":1, "jsonrpc":"2.0","method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}} }"#;
    p.editor.write_raw(init).await;
    assert_eq!(p.agent.recv_raw().await, init);
    let result = r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentInfo":{"name":"fake-agent","title":"Fake Agent","version":"1.0"}}}"#;
    p.agent.write_raw(result).await;
    assert_eq!(p.editor.recv_raw().await, result);
    p.editor
        .send(json!({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": cwd, "mcpServers": []}}))
        .await;
    assert_eq!(p.agent.recv().await["method"], "session/new");
    p.agent
        .send(json!({"jsonrpc": "2.0", "id": 2, "result": {"sessionId": "sess-1"}}))
        .await;
    assert_eq!(p.editor.recv().await["result"]["sessionId"], "sess-1");
    "sess-1".to_string()
}

#[tokio::test]
async fn permission_requests_are_asked_on_every_channel_and_answered_by_option_kind() {
    let app = spawn_app().await;
    let mut p = proxied(&app.url("")).await;
    let session = open_session(&mut p, "/home/dev/shop").await;
    // Notifications pass untouched.
    let update = r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"On it."}}}}"#;
    p.agent.write_raw(update).await;
    assert_eq!(p.editor.recv_raw().await, update);

    // The permission request goes to imrelay, not to the editor.
    p.agent.send(gemini_request(json!(0), &session)).await;
    let listed = pending_one(&app).await;
    let id = listed["id"].as_str().unwrap().to_string();
    assert!(id.starts_with("acp-"), "{id}");
    let (_, i) = app.get(&format!("/v1/interactions/{id}")).await;
    assert_eq!(i["agent"], "fake-agent");
    assert_eq!(i["session"], "sess-1");
    assert_eq!(i["cwd"], "/home/dev/shop");
    assert_eq!(i["title"], "echo ok > acp-proof.txt");
    assert_eq!(i["tool_name"], "acp:execute");
    assert_eq!(i["input_fixed"], true);
    // The agent waits as long as it takes: `hooks.acp.timeout_secs` is the deadline.
    assert_eq!(i["timeout_secs"], 3600);
    assert!(i["suggestions"].is_array(), "{i}");
    let description = i["description"].as_str().unwrap();
    assert!(
        description.contains("Always allow answers “Allow for this session”")
            && description.contains("A reason given with a deny does not reach Fake Agent"),
        "{description}"
    );
    p.editor.quiet().await;

    // An edited input cannot reach the agent: refused where it is made, and still pending.
    let (status, body) = app
        .respond(
            &id,
            &json!({"decision": "allow", "updated_input": {"content": "rm -rf /"}}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"]["field"], "updated_input");
    // "Always allow" is the agent's allow_always option.
    let (status, body) = app
        .respond(
            &id,
            &json!({"decision": "allow", "always": true, "by": "alice"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        p.agent.recv().await,
        json!({"jsonrpc": "2.0", "id": 0, "result": {"outcome": {"outcome": "selected", "optionId": "proceed_always"}}})
    );

    // A second request (a string id): a deny is its reject option, the reason stays here.
    let mut second = gemini_request(json!("p-2"), &session);
    second["params"]["toolCall"]["toolCallId"] = json!("run_shell_command__2");
    p.agent.send(second).await;
    let j = pending_one(&app).await;
    let (status, _) = app
        .respond(
            j["id"].as_str().unwrap(),
            &json!({"decision": "deny", "message": "Not today"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        p.agent.recv().await,
        json!({"jsonrpc": "2.0", "id": "p-2", "result": {"outcome": {"outcome": "selected", "optionId": "cancel"}}})
    );
    // A plain allow is allow_once.
    let mut third = gemini_request(json!(5), &session);
    third["params"]["toolCall"]["toolCallId"] = json!("run_shell_command__3");
    p.agent.send(third).await;
    let k = pending_one(&app).await;
    app.respond(k["id"].as_str().unwrap(), &json!({"decision": "allow"}))
        .await;
    assert_eq!(
        p.agent.recv().await["result"]["outcome"]["optionId"],
        "proceed_once"
    );
    p.editor.quiet().await;
}

#[tokio::test]
async fn a_cancelled_prompt_or_a_withdrawn_request_is_answered_cancelled_and_withdrawn_everywhere()
{
    let app = spawn_app().await;
    let mut p = proxied(&app.url("")).await;
    let session = open_session(&mut p, "/home/dev/shop").await;
    p.agent.send(gemini_request(json!(0), &session)).await;
    let id = pending_one(&app).await["id"].as_str().unwrap().to_string();
    // The editor cancels the turn: the agent gets the cancel, then `cancelled` for the request.
    let cancel =
        json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}});
    p.editor.send(cancel.clone()).await;
    assert_eq!(p.agent.recv().await, cancel);
    assert_eq!(
        p.agent.recv().await,
        json!({"jsonrpc": "2.0", "id": 0, "result": {"outcome": {"outcome": "cancelled"}}})
    );
    let withdrawn = eventually("the interaction is withdrawn", || async {
        let (_, i) = app.get(&format!("/v1/interactions/{id}")).await;
        (i["status"] == "resolved").then_some(i)
    })
    .await;
    assert_eq!(
        withdrawn["resolution"]["outcome"], "cancelled",
        "{withdrawn}"
    );
    assert_eq!(withdrawn["resolution"]["by"], "acp");

    // The agent withdraws a request itself (`$/cancel_request`): the same, and the editor
    // never hears of either.
    let mut again = gemini_request(json!(9), &session);
    again["params"]["toolCall"]["toolCallId"] = json!("run_shell_command__9");
    p.agent.send(again).await;
    let id = pending_one(&app).await["id"].as_str().unwrap().to_string();
    p.agent
        .send(json!({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 9}}))
        .await;
    assert_eq!(
        p.agent.recv().await["result"]["outcome"]["outcome"],
        "cancelled"
    );
    eventually("the second interaction is withdrawn", || async {
        let (_, i) = app.get(&format!("/v1/interactions/{id}")).await;
        (i["resolution"]["outcome"] == "cancelled").then_some(())
    })
    .await;
    p.editor.quiet().await;
}

#[tokio::test]
async fn without_imrelay_the_request_goes_to_the_editor_unchanged() {
    // Nothing listens there.
    let url = format!("http://127.0.0.1:{}", free_port());
    let mut p = proxied(&url).await;
    let session = open_session(&mut p, "/home/dev/shop").await;
    let asked = gemini_request(json!(0), &session);
    p.agent.send(asked.clone()).await;
    assert_eq!(p.editor.recv().await, asked);
    let answer = r#"{"jsonrpc":"2.0","id":0,"result":{"outcome":{"outcome":"selected","optionId":"proceed_once"}}}"#;
    p.editor.write_raw(answer).await;
    assert_eq!(p.agent.recv_raw().await, answer);
}

#[tokio::test]
async fn malformed_and_unknown_messages_pass_unchanged_and_change_nothing() {
    let app = spawn_app().await;
    let mut p = proxied(&app.url("")).await;
    let session = open_session(&mut p, "/home/dev/shop").await;
    for junk in ["not json at all", "[1,2,3]", r#"{"id": 3}"#] {
        p.editor.write_raw(junk).await;
        assert_eq!(p.agent.recv_raw().await, junk);
        p.agent.write_raw(junk).await;
        assert_eq!(p.editor.recv_raw().await, junk);
    }
    // A permission request that cannot be read goes to the editor as it is.
    let bad = json!({"jsonrpc": "2.0", "id": 4, "method": "session/request_permission", "params": {"sessionId": session, "options": "all"}});
    p.agent.send(bad.clone()).await;
    assert_eq!(p.editor.recv().await, bad);
    // Requests the proxy does not handle pass both ways, with their results.
    let read = json!({"jsonrpc": "2.0", "id": 5, "method": "fs/read_text_file", "params": {"sessionId": session, "path": "/home/dev/shop/a"}});
    p.agent.send(read.clone()).await;
    assert_eq!(p.editor.recv().await, read);
    let ext = json!({"jsonrpc": "2.0", "id": 6, "method": "_zed/custom", "params": {}});
    p.editor.send(ext.clone()).await;
    assert_eq!(p.agent.recv().await, ext);
    // An unknown option kind is never offered; the known ones still work.
    let mut odd = gemini_request(json!(7), &session);
    odd["params"]["options"]
        .as_array_mut()
        .unwrap()
        .push(json!({"optionId": "defer", "name": "Ask me later", "kind": "defer"}));
    p.agent.send(odd).await;
    let i = pending_one(&app).await;
    let (_, full) = app
        .get(&format!("/v1/interactions/{}", i["id"].as_str().unwrap()))
        .await;
    assert!(
        full["description"]
            .as_str()
            .unwrap()
            .contains("“Ask me later”"),
        "{full}"
    );
    app.respond(i["id"].as_str().unwrap(), &json!({"decision": "allow"}))
        .await;
    assert_eq!(
        p.agent.recv().await["result"]["outcome"]["optionId"],
        "proceed_once"
    );
    let (_, all) = app.get("/v1/interactions").await;
    assert_eq!(all["interactions"].as_array().unwrap().len(), 1, "{all}");
}

#[tokio::test]
async fn the_proxy_exits_with_the_agent() {
    let app = spawn_app().await;
    let mut p = proxied(&app.url("")).await;
    let session = open_session(&mut p, "/home/dev/shop").await;
    p.agent.send(gemini_request(json!(0), &session)).await;
    let id = pending_one(&app).await["id"].as_str().unwrap().to_string();
    // The agent's last words reach the editor, then it ends.
    let last = json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session, "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "bye"}}}});
    p.agent.send(last.clone()).await;
    drop(p.agent);
    assert_eq!(p.editor.recv().await, last);
    let status = exited(&mut p.proxy).await;
    assert_eq!(status.code(), Some(0));
    wait_until("nothing of the agent runs", || !group_alive(p.pgid)).await;
    // Its waiting request is withdrawn.
    eventually("the interaction is withdrawn", || async {
        let (_, i) = app.get(&format!("/v1/interactions/{id}")).await;
        (i["resolution"]["outcome"] == "cancelled").then_some(())
    })
    .await;
}

#[tokio::test]
async fn the_agent_never_outlives_the_proxy() {
    let app = spawn_app().await;
    // The editor closes its end: the agent's input is closed; this one does not exit by
    // itself, so it is killed a few seconds later.
    let mut p = proxied(&app.url("")).await;
    assert!(group_alive(p.pgid));
    drop(p.editor.out);
    exited(&mut p.proxy).await;
    wait_until("the agent is gone", || !group_alive(p.pgid)).await;

    // The proxy is asked to stop: so is the agent.
    let mut p = proxied(&app.url("")).await;
    let pid = nix::unistd::Pid::from_raw(p.proxy.id().unwrap() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    exited(&mut p.proxy).await;
    wait_until("the agent is gone", || !group_alive(p.pgid)).await;

    // The proxy is killed outright: the kernel ends the agent (PR_SET_PDEATHSIG), and its
    // input closes.
    let mut p = proxied(&app.url("")).await;
    p.proxy.start_kill().unwrap();
    exited(&mut p.proxy).await;
    wait_until("the agent is gone", || !group_alive(p.pgid)).await;
}

#[tokio::test]
async fn at_the_deadline_the_agent_is_denied_or_with_ask_the_editor_asks() {
    for on_timeout in [OnTimeout::Deny, OnTimeout::Ask] {
        let app = spawn_with(|s| {
            s.hooks.acp.timeout_secs = 1;
            s.hooks.acp.on_timeout = on_timeout;
        })
        .await;
        let mut p = proxied(&app.url("")).await;
        let session = open_session(&mut p, "/home/dev/shop").await;
        let asked = gemini_request(json!(0), &session);
        p.agent.send(asked.clone()).await;
        let i = pending_one(&app).await;
        assert_eq!(i["timeout_secs"], 1);
        match on_timeout {
            OnTimeout::Deny => assert_eq!(
                p.agent.recv().await["result"]["outcome"]["optionId"],
                "cancel"
            ),
            OnTimeout::Ask => {
                // The editor's own prompt asks, with the request as the agent wrote it.
                assert_eq!(p.editor.recv().await, asked);
                p.agent.quiet().await;
            }
        }
    }
}
