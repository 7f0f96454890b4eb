//! The Matrix channel against a real homeserver: Synapse, installed from PyPI by
//! `tests/external/synapse/install.sh` into `target/synapse-venv`, started once for this test
//! binary on loopback with SQLite and federation off, its accounts made with
//! `register_new_matrix_user` and a shared secret. The people's side is plain client-server
//! HTTP calls (an independent client): they create rooms, invite the bot, react and reply;
//! imrelay runs in-process with the channel pointed at the homeserver.
//!
//! When Synapse cannot be installed or started, the tests are reported as ignored with the
//! reason; with `IMRELAY_TEST_MATRIX=require` (`.ci/run` sets it) they fail instead.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use base64::Engine as _;
use imrelay::config::teams::PersonSettings;
use imrelay::config::{Secret, Settings};
use libtest_mimic::Trial;
use serde_json::{Value, json};

use std::sync::Arc;

use imrelay::store::MemoryStore;

use crate::support::{TestApp, reopen_sqlite, spawn_on};
use crate::{Need, trial};

/// The shared secret accounts are registered with.
const SHARED_SECRET: &str = "imrelay-test-registration";
/// The homeserver's name (ids end in `:imrelay.test`).
const SERVER_NAME: &str = "imrelay.test";
/// How long anything the tests wait for may take (a loaded machine is slow, not broken).
pub(crate) const WAIT: Duration = Duration::from_secs(60);

/// A running homeserver and the accounts on it.
pub(crate) struct Synapse {
    pub(crate) url: String,
    /// Where Synapse is installed (its `register_new_matrix_user`).
    venv: PathBuf,
    bot: Account,
    alice: Account,
    mallory: Account,
}

/// An account and its access token.
#[derive(Clone)]
pub(crate) struct Account {
    pub(crate) user_id: String,
    pub(crate) password: String,
    pub(crate) token: String,
}

fn target_dir() -> PathBuf {
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    tmp.parent().map(Path::to_path_buf).unwrap_or(tmp)
}

/// Synapse, started once for this binary, or why it could not be.
pub(crate) fn synapse() -> Result<&'static Synapse, String> {
    static STARTED: OnceLock<Result<Synapse, String>> = OnceLock::new();
    STARTED.get_or_init(start).as_ref().map_err(Clone::clone)
}

/// Whether the homeserver is here (started now if need be).
pub(crate) fn need() -> Need {
    match synapse() {
        Ok(_) => Need::Here,
        Err(reason) if std::env::var("IMRELAY_TEST_MATRIX").as_deref() == Ok("require") => {
            Need::Required(format!("{reason} (IMRELAY_TEST_MATRIX=require)"))
        }
        Err(reason) => Need::Missing(reason),
    }
}

fn install() -> Result<PathBuf, String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/external/synapse/install.sh");
    let target = target_dir();
    let out = Command::new("bash")
        .arg(&script)
        .arg("--target")
        .arg(&target)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let reason = err
            .lines()
            .rfind(|l| !l.trim().is_empty())
            .unwrap_or("the installer failed");
        return Err(format!(
            "Synapse could not be installed from PyPI: {reason}"
        ));
    }
    Ok(target.join("synapse-venv"))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(18008)
}

/// The homeserver's configuration: loopback, SQLite, no federation, registration by shared
/// secret only, rate limits out of the tests' way.
fn config(dir: &Path, port: u16) -> String {
    let d = dir.display();
    let limit = "{per_second: 1000, burst_count: 1000}";
    format!(
        r#"server_name: "{SERVER_NAME}"
pid_file: {d}/homeserver.pid
listeners:
  - port: {port}
    bind_addresses: ['127.0.0.1']
    type: http
    tls: false
    x_forwarded: false
    resources:
      - names: [client]
        compress: false
database:
  name: sqlite3
  args:
    database: {d}/homeserver.db
media_store_path: {d}/media
signing_key_path: {d}/signing.key
registration_shared_secret: "{SHARED_SECRET}"
enable_registration: false
report_stats: false
trusted_key_servers: []
federation_domain_whitelist: []
suppress_key_server_warning: true
presence:
  enabled: false
url_preview_enabled: false
rc_message: {limit}
rc_login:
  address: {limit}
  account: {limit}
  failed_attempts: {limit}
rc_joins:
  local: {limit}
  remote: {limit}
rc_room_creation: {limit}
rc_invites:
  per_room: {limit}
  per_user: {limit}
  per_issuer: {limit}
"#
    )
}

fn start() -> Result<Synapse, String> {
    let venv = install()?;
    let dir = target_dir().join(format!("synapse-run-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
    let port = free_port();
    let cfg = dir.join("homeserver.yaml");
    std::fs::write(&cfg, config(&dir, port)).map_err(|e| e.to_string())?;
    // A signing key of our own making (Synapse's format: algorithm, version, unpadded
    // base64 seed) saves a start of Python to generate one.
    let seed: [u8; 32] = rand::random();
    let key = base64::engine::general_purpose::STANDARD_NO_PAD.encode(seed);
    std::fs::write(dir.join("signing.key"), format!("ed25519 a_test {key}\n"))
        .map_err(|e| e.to_string())?;
    let log = std::fs::File::create(dir.join("homeserver.log")).map_err(|e| e.to_string())?;
    let python = venv.join("bin/python");
    // Started from a thread that lives as long as this process, with the parent-death
    // signal: Synapse ends when the test binary does, however it ends.
    let (tx, rx) = std::sync::mpsc::channel();
    let cfg2 = cfg.clone();
    std::thread::spawn(move || {
        use std::os::unix::process::CommandExt as _;
        let mut cmd = Command::new(&python);
        cmd.args(["-m", "synapse.app.homeserver", "-c"])
            .arg(&cfg2)
            .stdin(Stdio::null())
            .stdout(log.try_clone().map(Stdio::from).unwrap_or(Stdio::null()))
            .stderr(Stdio::from(log));
        // The homeserver ends with this test binary (see Cargo.toml's [lints]). SAFETY: the
        // closure runs in the child between fork and exec, and calls only prctl, which is
        // async-signal-safe.
        #[allow(unsafe_code)]
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        match cmd.spawn() {
            Ok(mut child) => {
                let _ = tx.send(Ok(()));
                let _ = child.wait();
            }
            Err(e) => {
                let _ = tx.send(Err(format!("cannot start Synapse: {e}")));
            }
        }
        // Keep the thread (the child's parent) alive until the process ends.
        loop {
            std::thread::park();
        }
    });
    rx.recv().map_err(|e| e.to_string())??;
    let url = format!("http://127.0.0.1:{port}");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a runtime: {e}"))?;
    let http = reqwest::Client::new();
    rt.block_on(healthy(&http, &url, &dir))?;
    let account = |name: &str| rt.block_on(register(&venv, &url, name));
    let synapse = Synapse {
        bot: account("imrelay")?,
        alice: account("alice")?,
        mallory: account("mallory")?,
        url: url.clone(),
        venv: venv.clone(),
    };
    let _ = writeln!(std::io::stderr(), "synapse: running at {}", synapse.url);
    Ok(synapse)
}

impl Synapse {
    /// A new account `name` on this homeserver (for a test that must not share the
    /// accounts every other test uses).
    pub(crate) async fn account(&self, name: &str) -> Result<Account, String> {
        register(&self.venv, &self.url, name).await
    }
}

/// Registers account `name` on the homeserver at `url` with `register_new_matrix_user`
/// (from the installation `venv`) and the shared secret, and logs it in.
async fn register(venv: &Path, url: &str, name: &str) -> Result<Account, String> {
    let password = format!("{name}-password");
    let out = Command::new(venv.join("bin/register_new_matrix_user"))
        .args([
            "-u",
            name,
            "-p",
            &password,
            "--no-admin",
            "-k",
            SHARED_SECRET,
            url,
        ])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run register_new_matrix_user: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "register_new_matrix_user {name}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let v: Value = async {
        reqwest::Client::new()
            .post(format!("{url}/_matrix/client/v3/login"))
            .json(&json!({"type": "m.login.password",
            "identifier": {"type": "m.id.user", "user": name}, "password": password}))
            .send()
            .await?
            .json()
            .await
    }
    .await
    .map_err(|e: reqwest::Error| format!("login as {name}: {e}"))?;
    Ok(Account {
        user_id: v["user_id"].as_str().unwrap_or_default().to_string(),
        password,
        token: v["access_token"].as_str().unwrap_or_default().to_string(),
    })
}

/// Waits until the homeserver at `url` answers its health check, or says why it did not.
async fn healthy(http: &reqwest::Client, url: &str, dir: &Path) -> Result<(), String> {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let ok = http
            .get(format!("{url}/health"))
            .timeout(Duration::from_secs(2))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success());
        if ok {
            return Ok(());
        }
        if std::time::Instant::now() > deadline {
            let log = std::fs::read_to_string(dir.join("homeserver.log")).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(5).collect();
            return Err(format!(
                "Synapse did not become healthy within {WAIT:?}: {}",
                tail.join(" | ")
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Polls `probe` every quarter second until it gives a value, for at most [`WAIT`]; panics
/// naming `what` if it never does.
pub(crate) async fn until<T, F>(what: &str, mut probe: impl FnMut() -> F) -> T
where
    F: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if let Some(v) = probe().await {
            return v;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!("not reached within {WAIT:?}: {what}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A person's client: plain client-server calls.
pub(crate) struct Person<'a> {
    hs: &'a Synapse,
    who: &'a Account,
    http: reqwest::Client,
}

impl<'a> Person<'a> {
    pub(crate) fn new(hs: &'a Synapse, who: &'a Account) -> Self {
        Person {
            hs,
            who,
            http: reqwest::Client::new(),
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}/_matrix/client/v3{path}", self.hs.url)
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut req = self
            .http
            .request(method.clone(), self.url(path))
            .bearer_auth(&self.who.token);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.expect("the homeserver answers");
        let status = resp.status();
        let v: Value = resp.json().await.unwrap_or(Value::Null);
        assert!(status.is_success(), "{method} {path}: {status} {v}");
        v
    }

    /// A new room of theirs with `invite` invited; its id.
    pub(crate) async fn create_room(&self, invite: &[&str]) -> String {
        let v = self
            .call(
                reqwest::Method::POST,
                "/createRoom",
                Some(json!({"preset": "private_chat", "invite": invite, "name": "imrelay test"})),
            )
            .await;
        v["room_id"].as_str().expect("room_id").to_string()
    }

    pub(crate) async fn join(&self, room: &str) {
        self.call(
            reqwest::Method::POST,
            &format!("/join/{}", enc(room)),
            Some(json!({})),
        )
        .await;
    }

    /// Sends an event; its id.
    pub(crate) async fn send(&self, room: &str, kind: &str, content: Value) -> String {
        let txn = format!("t{}", rand::random::<u64>());
        let v = self
            .call(
                reqwest::Method::PUT,
                &format!("/rooms/{}/send/{kind}/{txn}", enc(room)),
                Some(content),
            )
            .await;
        v["event_id"].as_str().expect("event_id").to_string()
    }

    pub(crate) async fn react(&self, room: &str, event: &str, key: &str) -> String {
        self.send(
            room,
            "m.reaction",
            json!({"m.relates_to": {"rel_type": "m.annotation", "event_id": event, "key": key}}),
        )
        .await
    }

    /// Takes back event `event` (a reaction, say).
    async fn redact(&self, room: &str, event: &str) {
        let txn = format!("r{}", rand::random::<u64>());
        self.call(
            reqwest::Method::PUT,
            &format!("/rooms/{}/redact/{}/{txn}", enc(room), enc(event)),
            Some(json!({})),
        )
        .await;
    }

    pub(crate) async fn reply(&self, room: &str, event: &str, text: &str) -> String {
        self.send(
            room,
            "m.room.message",
            json!({"msgtype": "m.text", "body": text,
                "m.relates_to": {"m.in_reply_to": {"event_id": event}}}),
        )
        .await
    }

    /// The room's latest events, newest first.
    async fn recent(&self, room: &str) -> Vec<Value> {
        let v = self
            .call(
                reqwest::Method::GET,
                &format!("/rooms/{}/messages?dir=b&limit=200", enc(room)),
                None,
            )
            .await;
        v["chunk"].as_array().cloned().unwrap_or_default()
    }

    /// The first event in the room's recent history that `pick` accepts, once there is one.
    pub(crate) async fn wait_for(
        &self,
        room: &str,
        what: &str,
        pick: impl Fn(&Value) -> bool,
    ) -> Value {
        let pick = &pick;
        until(what, || async move {
            self.recent(room).await.into_iter().find(|e| pick(e))
        })
        .await
    }

    pub(crate) async fn members(&self, room: &str) -> Vec<String> {
        let v = self
            .call(
                reqwest::Method::GET,
                &format!("/rooms/{}/joined_members", enc(room)),
                None,
            )
            .await;
        v["joined"]
            .as_object()
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default()
    }
}

/// A path segment, percent-encoded.
fn enc(s: &str) -> String {
    s.replace('%', "%25")
        .replace('#', "%23")
        .replace('?', "%3F")
        .replace('/', "%2F")
}

/// Settings with the Matrix channel in `room`, `alice` the approver.
fn configured(hs: &Synapse, room: &str, with_login: bool) -> Settings {
    let mut s = crate::support::settings();
    s.matrix.enabled = true;
    s.matrix.api_url = hs.url.clone();
    if with_login {
        s.matrix.user = hs.bot.user_id.clone();
        s.matrix.password = Secret::new(hs.bot.password.clone());
    } else {
        s.matrix.access_token = Secret::new(hs.bot.token.clone());
    }
    s.matrix.chats = vec![room.to_string()];
    s.matrix.approvers = vec![hs.alice.user_id.clone()];
    s.people = vec![PersonSettings::named("alice").on("matrix", [hs.alice.user_id.clone()])];
    s
}

/// Waits until the bot is in `room` and `app` listens: its first `/sync` has answered, so
/// whatever is said in the room from now on reaches it. The bot being in the room is not
/// enough: the servers of the tests running beside this one share the bot account and
/// accept alice's invitations too, so the bot may have joined before this server polled at
/// all, and what is said before its first poll is history to it (answered by nobody).
async fn bot_joined(app: &TestApp, hs: &Synapse, room: &str) {
    let person = Person::new(hs, &hs.alice);
    let bot = hs.bot.user_id.clone();
    until("the bot joins the room", || {
        let (person, bot) = (&person, &bot);
        async move { person.members(room).await.contains(bot).then_some(()) }
    })
    .await;
    until("the server's first sync", || async {
        let (_, health) = app.get("/healthz").await;
        (health["components"]["matrix"]["state"] == "connected").then_some(())
    })
    .await;
}

/// imrelay with the Matrix channel in `room`, `alice` the approver; returns once the bot has
/// joined the room (by the invitation).
async fn relay(hs: &Synapse, room: &str, with_login: bool) -> TestApp {
    let settings = configured(hs, room, with_login);
    let app = spawn_on(settings, Arc::new(MemoryStore::new())).await;
    bot_joined(&app, hs, room).await;
    app
}

/// Whether `e` is a message from `sender` whose body contains `text`.
pub(crate) fn message_from(e: &Value, sender: &str, text: &str) -> bool {
    e["type"] == "m.room.message"
        && e["sender"] == sender
        && e["content"]["body"]
            .as_str()
            .is_some_and(|b| b.contains(text))
}

/// Whether `e` is the bot's edit of `prompt` whose new text contains `text`.
pub(crate) fn edit_of(e: &Value, bot: &str, prompt: &str, text: &str) -> bool {
    e["sender"] == bot
        && e["content"]["m.relates_to"]["rel_type"] == "m.replace"
        && e["content"]["m.relates_to"]["event_id"] == prompt
        && e["content"]["m.new_content"]["body"]
            .as_str()
            .is_some_and(|b| b.contains(text))
}

async fn interaction(app: &TestApp, id: &str) -> Value {
    app.get(&format!("/v1/interactions/{id}")).await.1
}

/// A room with alice, mallory and the bot, and imrelay running on it.
async fn setup(hs: &Synapse, with_login: bool) -> (TestApp, String) {
    let alice = Person::new(hs, &hs.alice);
    let room = alice
        .create_room(&[&hs.bot.user_id, &hs.mallory.user_id])
        .await;
    Person::new(hs, &hs.mallory).join(&room).await;
    let app = relay(hs, &room, with_login).await;
    (app, room)
}

async fn an_approvers_reaction_allows_and_a_strangers_is_refused_with_a_notice() {
    let hs = synapse().expect("synapse");
    let (app, room) = setup(hs, false).await;
    let (alice, mallory) = (Person::new(hs, &hs.alice), Person::new(hs, &hs.mallory));
    let bot = hs.bot.user_id.as_str();
    let id = app.create_bash("mx-allow", "cargo publish --dry-run").await;
    let prompt = alice
        .wait_for(&room, "the prompt", |e| {
            message_from(e, bot, "cargo publish --dry-run")
        })
        .await;
    let prompt_id = prompt["event_id"].as_str().unwrap().to_string();
    let html = prompt["content"]["formatted_body"].as_str().unwrap_or("");
    assert_eq!(prompt["content"]["format"], "org.matrix.custom.html");
    assert!(html.contains("<pre><code"), "{html}");
    assert!(
        prompt["content"]["body"]
            .as_str()
            .unwrap()
            .contains("React ✅ to allow"),
        "{prompt}"
    );

    // A stranger's ✅ changes nothing, and they are told why, in reply to their reaction.
    let theirs = mallory.react(&room, &prompt_id, "✅").await;
    let notice = alice
        .wait_for(&room, "the notice to mallory", |e| {
            e["sender"] == bot
                && e["content"]["msgtype"] == "m.notice"
                && e["content"]["m.relates_to"]["m.in_reply_to"]["event_id"] == theirs.as_str()
        })
        .await;
    assert!(
        notice["content"]["body"]
            .as_str()
            .unwrap()
            .contains("You are not an approver for this"),
        "{notice}"
    );
    assert_eq!(interaction(&app, &id).await["status"], "pending");

    // The approver's ✅ (with the emoji variation selector, as Element sends it) allows.
    alice.react(&room, &prompt_id, "✅\u{fe0f}").await;
    let i = until("the answer", || {
        let app = &app;
        let id = &id;
        async move {
            let i = interaction(app, id).await;
            (i["status"] != "pending").then_some(i)
        }
    })
    .await;
    let r = &i["resolution"];
    assert_eq!(
        (r["outcome"].as_str(), r["by"].as_str(), r["via"].as_str()),
        (Some("allowed"), Some("alice"), Some("matrix")),
        "{i}"
    );
    alice
        .wait_for(&room, "the prompt edited to the outcome", |e| {
            edit_of(e, bot, &prompt_id, "Allowed by alice via matrix")
        })
        .await;
    app.stop().await;
}

async fn a_reply_denies_with_its_text_as_the_reason() {
    let hs = synapse().expect("synapse");
    let (app, room) = setup(hs, true).await;
    let alice = Person::new(hs, &hs.alice);
    let bot = hs.bot.user_id.as_str();
    let id = app.create_bash("mx-deny", "terraform apply").await;
    let prompt = alice
        .wait_for(&room, "the prompt", |e| {
            message_from(e, bot, "terraform apply")
        })
        .await;
    let prompt_id = prompt["event_id"].as_str().unwrap().to_string();
    alice
        .reply(
            &room,
            &prompt_id,
            "> <@imrelay:imrelay.test> 🔐 Bash\n\nnot before the freeze ends",
        )
        .await;
    let i = until("the answer", || {
        let (app, id) = (&app, &id);
        async move {
            let i = interaction(app, id).await;
            (i["status"] != "pending").then_some(i)
        }
    })
    .await;
    let r = &i["resolution"];
    assert_eq!(r["outcome"], "denied", "{i}");
    assert!(
        i.to_string().contains("not before the freeze ends"),
        "the reason reaches the agent: {i}"
    );
    alice
        .wait_for(&room, "the prompt edited to the outcome", |e| {
            edit_of(e, bot, &prompt_id, "Denied by alice via matrix")
        })
        .await;
    app.stop().await;
}

async fn a_question_is_answered_by_an_options_number() {
    let hs = synapse().expect("synapse");
    let (app, room) = setup(hs, false).await;
    let alice = Person::new(hs, &hs.alice);
    let bot = hs.bot.user_id.as_str();
    let (status, body) = app
        .post(
            "/v1/interactions",
            &json!({"id": "mx-q", "tool_name": "AskUserQuestion", "input": {"questions": [
                {"question": "Which database?", "header": "DB", "multiSelect": false,
                 "options": [{"label": "sqlite", "description": "embedded"},
                             {"label": "postgres", "description": "a server"}]}]}}),
        )
        .await;
    assert!(status.is_success(), "{body}");
    let id = body["id"].as_str().unwrap().to_string();
    let prompt = alice
        .wait_for(&room, "the question", |e| {
            message_from(e, bot, "Which database?")
        })
        .await;
    let prompt_id = prompt["event_id"].as_str().unwrap().to_string();
    let text = prompt["content"]["body"].as_str().unwrap();
    assert!(text.contains("2) postgres"), "{text}");
    alice.reply(&room, &prompt_id, "2").await;
    let i = until("the answer", || {
        let (app, id) = (&app, &id);
        async move {
            let i = interaction(app, id).await;
            (i["status"] != "pending").then_some(i)
        }
    })
    .await;
    assert_eq!(i["resolution"]["outcome"], "answered", "{i}");
    assert!(i.to_string().contains("postgres"), "{i}");
    alice
        .wait_for(&room, "the question edited to the answer", |e| {
            edit_of(e, bot, &prompt_id, "postgres")
        })
        .await;
    app.stop().await;
}

async fn a_stranger_cannot_deny_and_a_bad_answer_is_explained() {
    let hs = synapse().expect("synapse");
    let (app, room) = setup(hs, false).await;
    let (alice, mallory) = (Person::new(hs, &hs.alice), Person::new(hs, &hs.mallory));
    let bot = hs.bot.user_id.as_str();
    let id = app.create_bash("mx-refuse", "rm -rf build").await;
    let prompt = alice
        .wait_for(&room, "the prompt", |e| {
            message_from(e, bot, "rm -rf build")
        })
        .await;
    let prompt_id = prompt["event_id"].as_str().unwrap().to_string();
    // A stranger's ❌ and reply: refused, each with a notice; nothing changes.
    let deny = mallory.react(&room, &prompt_id, "❌").await;
    let reply = mallory.reply(&room, &prompt_id, "no").await;
    for theirs in [&deny, &reply] {
        alice
            .wait_for(&room, "a notice to mallory", |e| {
                e["sender"] == bot
                    && e["content"]["m.relates_to"]["m.in_reply_to"]["event_id"] == theirs.as_str()
                    && e["content"]["body"]
                        .as_str()
                        .is_some_and(|b| b.contains("You are not an approver for this"))
            })
            .await;
    }
    assert_eq!(interaction(&app, &id).await["status"], "pending");
    // The approver's ❌ denies.
    alice.react(&room, &prompt_id, "❌").await;
    alice
        .wait_for(&room, "the prompt edited to the outcome", |e| {
            edit_of(e, bot, &prompt_id, "Denied by alice via matrix")
        })
        .await;
    assert_eq!(
        interaction(&app, &id).await["resolution"]["outcome"],
        "denied"
    );
    // A late ✅ is told the outcome.
    let late = alice.react(&room, &prompt_id, "✅").await;
    alice
        .wait_for(&room, "the late answer's notice", |e| {
            e["sender"] == bot
                && e["content"]["m.relates_to"]["m.in_reply_to"]["event_id"] == late.as_str()
                && e["content"]["body"]
                    .as_str()
                    .is_some_and(|b| b.contains("Already denied by alice"))
        })
        .await;
    app.stop().await;
}

async fn a_restart_neither_answers_again_nor_misses_what_came_meanwhile() {
    let hs = synapse().expect("synapse");
    let alice = Person::new(hs, &hs.alice);
    let bot = hs.bot.user_id.as_str();
    let room = alice.create_room(&[bot]).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("imrelay.db");
    let first = spawn_on(
        configured(hs, &room, false),
        Arc::new(reopen_sqlite(&path).await),
    )
    .await;
    bot_joined(&first, hs, &room).await;
    let a = first.create_bash("mx-before", "make before").await;
    let b = first.create_bash("mx-during", "make during").await;
    let prompt = |text: &'static str| {
        let alice = &alice;
        let room = &room;
        async move {
            let p = alice
                .wait_for(room, text, |e| message_from(e, bot, text))
                .await;
            p["event_id"].as_str().unwrap().to_string()
        }
    };
    let (pa, pb) = (prompt("make before").await, prompt("make during").await);
    let reaction_a = alice.react(&room, &pa, "✅").await;
    alice
        .wait_for(&room, "the first prompt edited", |e| {
            edit_of(e, bot, &pa, "Allowed by alice via matrix")
        })
        .await;
    first.stop().await;

    // While imrelay is down, alice denies the second prompt.
    alice.react(&room, &pb, "❌").await;
    let second = spawn_on(
        configured(hs, &room, false),
        Arc::new(reopen_sqlite(&path).await),
    )
    .await;
    alice
        .wait_for(&room, "the second prompt edited after the restart", |e| {
            edit_of(e, bot, &pb, "Denied by alice via matrix")
        })
        .await;
    assert_eq!(
        interaction(&second, &b).await["resolution"]["outcome"],
        "denied"
    );
    assert_eq!(
        interaction(&second, &a).await["resolution"]["outcome"],
        "allowed"
    );
    // The ✅ answered before the restart was not taken again: no "Already allowed" notice.
    let again = alice.recent(&room).await.into_iter().find(|e| {
        e["sender"] == bot
            && e["content"]["m.relates_to"]["m.in_reply_to"]["event_id"] == reaction_a.as_str()
    });
    assert!(again.is_none(), "answered twice: {again:?}");
    second.stop().await;
}

async fn the_doctor_checks_the_rooms_and_an_encrypted_room_gets_no_prompt() {
    use imrelay::channels::{Channel as _, Doctor};
    let hs = synapse().expect("synapse");
    let alice = Person::new(hs, &hs.alice);
    let bot = hs.bot.user_id.as_str();
    let plain = alice.create_room(&[bot]).await;
    let secret = alice.create_room(&[bot]).await;
    alice
        .call(
            reqwest::Method::PUT,
            &format!("/rooms/{}/state/m.room.encryption/", enc(&secret)),
            Some(json!({"algorithm": "m.megolm.v1.aes-sha2"})),
        )
        .await;
    let mut settings = configured(hs, &plain, false);
    settings.matrix.chats = vec![plain.clone(), secret.clone()];
    let run = Doctor {
        send_test: true,
        public_url: String::new(),
        kept: None,
    };
    let checks = settings.matrix.doctor(&run).await;
    let said: Vec<String> = checks.iter().map(ToString::to_string).collect();
    let said = said.join("\n");
    assert!(
        said.contains(&format!("signed in to {} as {bot}", hs.url)),
        "{said}"
    );
    assert!(
        said.contains(&format!(
            "✓ matrix: a test message was posted to room {plain}"
        )),
        "{said}"
    );
    assert!(
        said.contains(&format!("✗ matrix: room {secret} is end-to-end encrypted")),
        "{said}"
    );
    assert!(
        said.contains(&format!("no test message sent to room {secret}")),
        "{said}"
    );
    alice
        .wait_for(&plain, "the doctor's test message", |e| {
            message_from(e, bot, "A test message from imrelay doctor")
        })
        .await;

    // A prompt goes to the plain room, and never into the encrypted one.
    let app = spawn_on(settings, Arc::new(MemoryStore::new())).await;
    app.create_bash("mx-enc", "make secret").await;
    alice
        .wait_for(&plain, "the prompt in the plain room", |e| {
            message_from(e, bot, "make secret")
        })
        .await;
    app.outbox_idle().await;
    let leaked = alice
        .recent(&secret)
        .await
        .into_iter()
        .find(|e| message_from(e, bot, "make secret"));
    assert!(
        leaked.is_none(),
        "posted into the encrypted room: {leaked:?}"
    );
    app.stop().await;
}

/// What relates event `e` to a thread: its root, if it is in one.
fn thread_root(e: &Value) -> Option<String> {
    let r = &e["content"]["m.relates_to"];
    (r["rel_type"] == "m.thread")
        .then(|| r["event_id"].as_str().map(str::to_string))
        .flatten()
}

async fn two_sessions_prompts_land_in_two_threads_and_an_answer_in_either_resolves_its_own() {
    let hs = synapse().expect("synapse");
    let alice = Person::new(hs, &hs.alice);
    let bot = hs.bot.user_id.as_str();
    let room = alice.create_room(&[bot]).await;
    let mut settings = configured(hs, &room, false);
    settings.matrix.thread_per = imrelay::channels::threads::ThreadPer::Session;
    settings.matrix.thread_replies = true;
    let app = spawn_on(settings, Arc::new(MemoryStore::new())).await;
    bot_joined(&app, hs, &room).await;
    let ask = |id: &str, command: &str, session: &str, cwd: &str| {
        json!({"id": id, "tool_name": "Bash", "input": {"command": command},
            "session": session, "agent": "claude-code", "cwd": cwd})
    };
    let mut prompts = Vec::new();
    for (id, command, session, cwd) in [
        ("mx-th1", "echo one", "s-one", "/srv/shop"),
        ("mx-th2", "echo two", "s-two", "/srv/blog"),
        ("mx-th3", "echo three", "s-one", "/srv/shop"),
    ] {
        let (status, body) = app
            .post("/v1/interactions", &ask(id, command, session, cwd))
            .await;
        assert_eq!(status, reqwest::StatusCode::CREATED, "{body}");
        let p = alice
            .wait_for(&room, "the prompt", |e| message_from(e, bot, command))
            .await;
        prompts.push(p);
    }
    let roots: Vec<String> = prompts
        .iter()
        .map(|p| thread_root(p).unwrap_or_else(|| panic!("not in a thread: {p}")))
        .collect();
    assert_ne!(roots[0], roots[1], "two sessions, two threads");
    assert_eq!(roots[0], roots[2], "a session's prompts share its thread");
    // Each thread's root names the agent, the session and the directory.
    for (root, session, dir) in [
        (&roots[0], "s-one", "/srv/shop"),
        (&roots[1], "s-two", "/srv/blog"),
    ] {
        let e = alice
            .call(
                reqwest::Method::GET,
                &format!("/rooms/{}/event/{}", enc(&room), enc(root)),
                None,
            )
            .await;
        let body = e["content"]["body"].as_str().unwrap_or_default();
        assert!(
            body.contains("Agent session: claude-code")
                && body.contains(&format!("Session: {session}"))
                && body.contains(&format!("Directory: {dir}")),
            "{e}"
        );
    }
    // The homeserver itself lists both threads.
    let threads: Value = alice
        .http
        .get(format!(
            "{}/_matrix/client/v1/rooms/{}/threads",
            hs.url,
            enc(&room)
        ))
        .bearer_auth(&alice.who.token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let listed: Vec<&str> = threads["chunk"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["event_id"].as_str())
        .collect();
    assert!(
        listed.contains(&roots[0].as_str()) && listed.contains(&roots[1].as_str()),
        "{threads}"
    );
    // ✅ in the second thread allows the second session's request only.
    let prompt_id = |n: usize| prompts[n]["event_id"].as_str().unwrap().to_string();
    alice.react(&room, &prompt_id(1), "✅").await;
    let two = until("the second answered", || async {
        let i = interaction(&app, "mx-th2").await;
        (i["status"] != "pending").then_some(i)
    })
    .await;
    assert_eq!(two["resolution"]["outcome"], "allowed", "{two}");
    assert_eq!(interaction(&app, "mx-th1").await["status"], "pending");
    // A reply in the first thread, as a threaded client sends it, denies the first one.
    alice
        .send(
            &room,
            "m.room.message",
            json!({"msgtype": "m.text", "body": "not now",
                "m.relates_to": {"rel_type": "m.thread", "event_id": roots[0],
                    "is_falling_back": false, "m.in_reply_to": {"event_id": prompt_id(0)}}}),
        )
        .await;
    let one = until("the first answered", || async {
        let i = interaction(&app, "mx-th1").await;
        (i["status"] != "pending").then_some(i)
    })
    .await;
    assert_eq!(one["resolution"]["outcome"], "denied", "{one}");
    assert_eq!(interaction(&app, "mx-th3").await["status"], "pending");
    // The outcome is replied to the prompt in its thread (`thread_replies`).
    let p2 = prompt_id(1);
    alice
        .wait_for(&room, "the outcome in the thread", |e| {
            e["sender"] == bot
                && thread_root(e).as_deref() == Some(roots[1].as_str())
                && e["content"]["m.relates_to"]["m.in_reply_to"]["event_id"] == p2.as_str()
                && e["content"]["body"]
                    .as_str()
                    .is_some_and(|b| b.contains("Allowed"))
        })
        .await;
    app.stop().await;
}

async fn whoami_and_sessions_are_answered_in_the_room() {
    let hs = synapse().expect("synapse");
    // Logged in with a device of its own: the servers of the tests running beside this one
    // share the bot account and answer commands in every room, and under the shared access
    // token their notice (same transaction id: the event answered) was taken by the
    // homeserver as this server's, so this server's listing never appeared.
    let (app, room) = setup(hs, true).await;
    let (alice, mallory) = (Person::new(hs, &hs.alice), Person::new(hs, &hs.mallory));
    let bot = hs.bot.user_id.as_str();
    let said = |body: &str| json!({"msgtype": "m.text", "body": body});
    alice.send(&room, "m.room.message", said("!whoami")).await;
    let alice_id = hs.alice.user_id.clone();
    alice
        .wait_for(&room, "whoami's answer", |e| {
            message_from(e, bot, &format!("(for matrix.chats): {room}"))
                && message_from(e, bot, &format!("(for matrix.approvers): {alice_id}"))
        })
        .await;
    // A session Claude Code reported is listed to an approver; anyone else is told no.
    crate::support::claude_session_start(&app, "s-mx").await;
    alice.send(&room, "m.room.message", said("/sessions")).await;
    alice
        .wait_for(&room, "the listing", |e| {
            message_from(e, bot, "Sessions") && message_from(e, bot, "/srv/shop")
        })
        .await;
    mallory
        .send(&room, "m.room.message", said("sessions"))
        .await;
    alice
        .wait_for(&room, "the refusal", |e| {
            message_from(e, bot, "Only approvers can list the sessions.")
        })
        .await;
    app.stop().await;
}

/// The bot's notice in reply to event `event`, once sent.
async fn notice_to(person: &Person<'_>, room: &str, event: &str) -> String {
    notice_from(person, &person.hs.bot.user_id, room, event).await
}

/// The notice `bot` sent in reply to event `event`, once sent, as `person` sees it.
pub(crate) async fn notice_from(person: &Person<'_>, bot: &str, room: &str, event: &str) -> String {
    let e = person
        .wait_for(room, "the bot's notice", |e| {
            e["sender"] == bot
                && e["content"]["msgtype"] == "m.notice"
                && e["content"]["m.relates_to"]["m.in_reply_to"]["event_id"] == event
        })
        .await;
    e["content"]["body"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

async fn a_reply_to_a_sessions_message_or_in_its_thread_reaches_the_session() {
    let hs = synapse().expect("synapse");
    let (alice, mallory) = (Person::new(hs, &hs.alice), Person::new(hs, &hs.mallory));
    let bot = hs.bot.user_id.as_str();
    let room = alice.create_room(&[bot, &hs.mallory.user_id]).await;
    mallory.join(&room).await;
    // Logged in with a device of its own, so its notices are its own (see
    // `whoami_and_sessions_are_answered_in_the_room`).
    let mut settings = configured(hs, &room, true);
    settings.matrix.thread_per = imrelay::channels::threads::ThreadPer::Session;
    let app = spawn_on(settings, Arc::new(MemoryStore::new())).await;
    bot_joined(&app, hs, &room).await;
    crate::support::claude_session_start(&app, "s-mxsteer").await;
    let ask = json!({"id": "mx-steer1", "tool_name": "Bash", "input": {"command": "make deploy"},
        "session": "s-mxsteer", "agent": "claude-code", "cwd": "/srv/shop"});
    let (status, body) = app.post("/v1/interactions", &ask).await;
    assert_eq!(status, reqwest::StatusCode::CREATED, "{body}");
    let prompt = alice
        .wait_for(&room, "the prompt", |e| message_from(e, bot, "make deploy"))
        .await;
    let prompt_id = prompt["event_id"].as_str().unwrap().to_string();
    let root = thread_root(&prompt).expect("the prompt is in the session's thread");
    alice.react(&room, &prompt_id, "✅").await;
    until("the approval answered", || async {
        (interaction(&app, "mx-steer1").await["status"] != "pending").then_some(())
    })
    .await;
    // A reply to the answered prompt is a message to the session, queued; alice is told.
    let mine = alice.reply(&room, &prompt_id, "and then the linter").await;
    let told = notice_to(&alice, &room, &mine).await;
    assert!(
        told.contains("Queued for the claude-code session: it reaches the agent at its next step"),
        "{told}"
    );
    // A message in the session's thread, as a threaded client sends it, too.
    let threaded = alice
        .send(
            &room,
            "m.room.message",
            json!({"msgtype": "m.text", "body": "use the staging database",
                "m.relates_to": {"rel_type": "m.thread", "event_id": root,
                    "is_falling_back": true, "m.in_reply_to": {"event_id": prompt_id}}}),
        )
        .await;
    notice_to(&alice, &room, &threaded).await;
    let texts: Vec<Value> = crate::support::queued_messages(&app, "s-mxsteer")
        .await
        .iter()
        .map(|m| m["text"].clone())
        .collect();
    assert_eq!(
        texts,
        [
            json!("and then the linter"),
            json!("use the staging database")
        ]
    );
    // Mallory, no approver, is refused and told so; nothing more is queued.
    let theirs = mallory.reply(&room, &prompt_id, "drop the table").await;
    let told = notice_to(&alice, &room, &theirs).await;
    assert!(told.contains("may not message this session"), "{told}");
    assert_eq!(
        crate::support::queued_messages(&app, "s-mxsteer")
            .await
            .len(),
        2
    );
    app.stop().await;
}

pub(crate) fn trials() -> Vec<Trial> {
    vec![
        trial(
            "matrix::an_approvers_reaction_allows_and_a_strangers_is_refused_with_a_notice",
            need,
            an_approvers_reaction_allows_and_a_strangers_is_refused_with_a_notice,
        ),
        trial(
            "matrix::a_reply_denies_with_its_text_as_the_reason",
            need,
            a_reply_denies_with_its_text_as_the_reason,
        ),
        trial(
            "matrix::a_question_is_answered_by_an_options_number",
            need,
            a_question_is_answered_by_an_options_number,
        ),
        trial(
            "matrix::a_stranger_cannot_deny_and_a_bad_answer_is_explained",
            need,
            a_stranger_cannot_deny_and_a_bad_answer_is_explained,
        ),
        trial(
            "matrix::a_restart_neither_answers_again_nor_misses_what_came_meanwhile",
            need,
            a_restart_neither_answers_again_nor_misses_what_came_meanwhile,
        ),
        trial(
            "matrix::the_doctor_checks_the_rooms_and_an_encrypted_room_gets_no_prompt",
            need,
            the_doctor_checks_the_rooms_and_an_encrypted_room_gets_no_prompt,
        ),
        trial(
            "matrix::two_sessions_prompts_land_in_two_threads_and_an_answer_in_either_resolves_its_own",
            need,
            two_sessions_prompts_land_in_two_threads_and_an_answer_in_either_resolves_its_own,
        ),
        trial(
            "matrix::a_reply_to_a_sessions_message_or_in_its_thread_reaches_the_session",
            need,
            a_reply_to_a_sessions_message_or_in_its_thread_reaches_the_session,
        ),
        trial(
            "matrix::whoami_and_sessions_are_answered_in_the_room",
            need,
            whoami_and_sessions_are_answered_in_the_room,
        ),
        trial(
            "matrix::the_votes_so_far_show_on_the_prompt_and_the_second_decides",
            need,
            the_votes_so_far_show_on_the_prompt_and_the_second_decides,
        ),
        trial(
            "matrix::a_repeat_reaction_allows_similar_calls_and_a_stranger_cannot",
            need,
            a_repeat_reaction_allows_similar_calls_and_a_stranger_cannot,
        ),
        trial(
            "matrix::a_reply_starting_edit_runs_the_changed_command_and_a_plain_reply_still_denies",
            need,
            a_reply_starting_edit_runs_the_changed_command_and_a_plain_reply_still_denies,
        ),
        trial(
            "matrix::a_digest_is_answered_by_reactions_each_bound_to_what_it_listed",
            need,
            a_digest_is_answered_by_reactions_each_bound_to_what_it_listed,
        ),
        trial(
            "matrix::a_burst_the_room_cannot_take_in_time_is_gathered_into_a_digest",
            need,
            a_burst_the_room_cannot_take_in_time_is_gathered_into_a_digest,
        ),
    ]
}

/// Waits until interaction `id` is no longer pending; returns it.
async fn settled(app: &TestApp, id: &str) -> Value {
    until("the answer", || async move {
        let i = interaction(app, id).await;
        (i["status"] != "pending").then_some(i)
    })
    .await
}

/// A room with alice, mallory and the bot, and imrelay running on it with `change` made to
/// its settings (a device of its own: the bot logs in).
async fn setup_with(hs: &Synapse, change: impl FnOnce(&mut Settings)) -> (TestApp, String) {
    let alice = Person::new(hs, &hs.alice);
    let room = alice
        .create_room(&[&hs.bot.user_id, &hs.mallory.user_id])
        .await;
    Person::new(hs, &hs.mallory).join(&room).await;
    let mut settings = configured(hs, &room, true);
    change(&mut settings);
    let app = spawn_on(settings, Arc::new(MemoryStore::new())).await;
    bot_joined(&app, hs, &room).await;
    (app, room)
}

/// `make mx-votes` needs two people (a policy rule's quorum).
fn two_people_needed(s: &mut Settings) {
    s.policy = vec![imrelay::config::policy::PolicyRuleSettings {
        quorum: Some(2),
        ..imrelay::config::policy::PolicyRuleSettings::new(
            "pairs",
            imrelay::interaction::policy::Decision::Ask,
            &["Bash(make mx-votes)"],
        )
    }];
}

async fn the_votes_so_far_show_on_the_prompt_and_the_second_decides() {
    let hs = synapse().expect("synapse");
    let (app, room) = setup_with(hs, two_people_needed).await;
    let alice = Person::new(hs, &hs.alice);
    let bot = hs.bot.user_id.as_str();
    let id = app.create_bash("mx-votes", "make mx-votes").await;
    let prompt = alice
        .wait_for(&room, "the prompt", |e| {
            message_from(e, bot, "make mx-votes")
        })
        .await;
    let prompt_id = prompt["event_id"].as_str().unwrap().to_string();
    // A vote from elsewhere (the API) does not decide: the room's copy shows it.
    let (s, body) = app
        .post(
            &format!("/v1/interactions/{id}/respond"),
            &json!({"decision": "allow", "by": "vera"}),
        )
        .await;
    assert_eq!(s, reqwest::StatusCode::ACCEPTED, "a vote: {body}");
    let edit = alice
        .wait_for(&room, "the prompt edited to show the vote", |e| {
            edit_of(e, bot, &prompt_id, "1 of 2")
        })
        .await;
    let shown = edit["content"]["m.new_content"]["body"].as_str().unwrap();
    assert!(
        shown.contains("Needs 2 people · votes: 1 of 2: administrator via api")
            && shown.contains("React ✅"),
        "the vote, and still how to answer: {shown}"
    );
    assert_eq!(interaction(&app, &id).await["status"], "pending");
    // Alice's ✅ is the second vote: allowed.
    alice.react(&room, &prompt_id, "✅").await;
    let i = settled(&app, &id).await;
    assert_eq!(i["resolution"]["outcome"], "allowed", "{i}");
    alice
        .wait_for(&room, "the prompt edited to the outcome", |e| {
            edit_of(e, bot, &prompt_id, "Allowed by")
        })
        .await;
    app.stop().await;
}

/// A Bash call of agent session `s-mx` (so "Allow similar" has a rule to offer).
async fn session_call(app: &TestApp, id: &str, command: &str) -> String {
    let (s, body) = app
        .post(
            "/v1/interactions",
            &json!({"id": id, "tool_name": "Bash", "input": {"command": command},
                    "session": "s-mx", "agent": "claude-code", "cwd": "/srv/shop"}),
        )
        .await;
    assert_eq!(s, reqwest::StatusCode::CREATED, "{body}");
    body["id"].as_str().unwrap().to_string()
}

async fn a_repeat_reaction_allows_similar_calls_and_a_stranger_cannot() {
    let hs = synapse().expect("synapse");
    let (app, room) = setup(hs, true).await;
    let (alice, mallory) = (Person::new(hs, &hs.alice), Person::new(hs, &hs.mallory));
    let bot = hs.bot.user_id.as_str();
    let id = session_call(&app, "mx-similar", "npm run test -- --watch").await;
    let prompt = alice
        .wait_for(&room, "the prompt", |e| {
            message_from(e, bot, "npm run test -- --watch")
        })
        .await;
    let prompt_id = prompt["event_id"].as_str().unwrap().to_string();
    let text = prompt["content"]["body"].as_str().unwrap();
    assert!(
        text.contains(
            "React 🔁 to allow it and, for this session, calls like it: Bash(npm run test:*)"
        ),
        "the reaction and the rule it grants: {text}"
    );
    // A stranger's 🔁 is refused like any answer of theirs.
    let theirs = mallory.react(&room, &prompt_id, "🔁").await;
    assert!(
        notice_to(&alice, &room, &theirs)
            .await
            .contains("You are not an approver for this")
    );
    assert_eq!(interaction(&app, &id).await["status"], "pending");
    alice.react(&room, &prompt_id, "🔁").await;
    let i = settled(&app, &id).await;
    assert_eq!(i["resolution"]["outcome"], "allowed", "{i}");
    let (_, grants) = app.get("/v1/grants").await;
    let g = &grants["grants"][0];
    assert_eq!(
        (g["rule"].as_str(), g["scope"].as_str(), g["via"].as_str()),
        (
            Some("Bash(npm run test:*)"),
            Some("session"),
            Some("matrix")
        ),
        "{grants}"
    );
    alice
        .wait_for(&room, "the prompt edited to the outcome", |e| {
            edit_of(e, bot, &prompt_id, "Allowed by alice via matrix")
        })
        .await;
    // The session's next similar call is allowed by the rule: never posted.
    let (s, next) = app
        .post(
            "/v1/interactions",
            &json!({"id": "mx-similar-2", "tool_name": "Bash",
                    "input": {"command": "npm run test -- --ci"},
                    "session": "s-mx", "agent": "claude-code", "cwd": "/srv/shop"}),
        )
        .await;
    assert!(s.is_success(), "{next}");
    let next = interaction(&app, "mx-similar-2").await;
    assert_eq!(next["resolution"]["outcome"], "allowed", "{next}");
    app.stop().await;
}

async fn a_reply_starting_edit_runs_the_changed_command_and_a_plain_reply_still_denies() {
    let hs = synapse().expect("synapse");
    let (app, room) = setup(hs, true).await;
    let alice = Person::new(hs, &hs.alice);
    let bot = hs.bot.user_id.as_str();
    let id = session_call(&app, "mx-edit", "rm -rf mx-build").await;
    let prompt = alice
        .wait_for(&room, "the prompt", |e| {
            message_from(e, bot, "rm -rf mx-build")
        })
        .await;
    let prompt_id = prompt["event_id"].as_str().unwrap().to_string();
    let text = prompt["content"]["body"].as_str().unwrap();
    assert!(
        text.contains("reply to this message: “edit:” and the command"),
        "how to edit: {text}"
    );
    alice
        .reply(
            &room,
            &prompt_id,
            "> <@imrelay:imrelay.test> 🔐 Bash\n\nedit: rm -rf mx-build/tmp",
        )
        .await;
    let i = settled(&app, &id).await;
    let r = &i["resolution"];
    assert_eq!(r["outcome"], "allowed", "{i}");
    assert_eq!(
        r["result"]["updatedInput"]["command"], "rm -rf mx-build/tmp",
        "the agent runs the edited command: {i}"
    );
    alice
        .wait_for(&room, "the prompt edited to the outcome", |e| {
            edit_of(e, bot, &prompt_id, "Allowed by alice via matrix")
        })
        .await;
    // A reply that only mentions editing is a reason to deny, as before.
    let id = session_call(&app, "mx-edit-2", "rm -rf mx-dist").await;
    let prompt = alice
        .wait_for(&room, "the second prompt", |e| {
            message_from(e, bot, "rm -rf mx-dist")
        })
        .await;
    let prompt_id = prompt["event_id"].as_str().unwrap().to_string();
    alice
        .reply(&room, &prompt_id, "edit the Makefile instead")
        .await;
    let i = settled(&app, &id).await;
    assert_eq!(i["resolution"]["outcome"], "denied", "{i}");
    assert!(i.to_string().contains("edit the Makefile instead"), "{i}");
    app.stop().await;
}

/// What event `event` in `room` reads now: its newest edit's text, or its own.
pub(crate) async fn reads_now(person: &Person<'_>, room: &str, event: &str) -> String {
    let recent = person.recent(room).await;
    let newest_edit = recent.iter().find(|e| {
        e["content"]["m.relates_to"]["rel_type"] == "m.replace"
            && e["content"]["m.relates_to"]["event_id"] == event
    });
    let body = match newest_edit {
        Some(e) => &e["content"]["m.new_content"]["body"],
        None => recent
            .iter()
            .find(|e| e["event_id"] == event)
            .map_or(&Value::Null, |e| &e["content"]["body"]),
    };
    body.as_str().unwrap_or_default().to_string()
}

async fn a_digest_is_answered_by_reactions_each_bound_to_what_it_listed() {
    let hs = synapse().expect("synapse");
    let (app, room) = setup_with(hs, |s| s.matrix.digest_after = 1).await;
    let (alice, mallory) = (Person::new(hs, &hs.alice), Person::new(hs, &hs.mallory));
    let bot = hs.bot.user_id.as_str();
    let mut ids = Vec::new();
    for k in 0..4 {
        ids.push(session_call(&app, &format!("mx-dg-{k}"), &format!("make dg-{k}")).await);
    }
    app.outbox_idle().await;
    let digest = alice
        .wait_for(&room, "the digest", |e| {
            message_from(e, bot, "requests from session s-mx")
        })
        .await;
    let digest_id = digest["event_id"].as_str().unwrap().to_string();
    let listed: Vec<String> = {
        let text = until("the digest lists every held request", || {
            let (alice, room, digest_id) = (&alice, &room, &digest_id);
            async move {
                let t = reads_now(alice, room, digest_id).await;
                // With digest_after = 1, at most the first is posted on its own.
                (t.contains("make dg-3") && t.contains("make dg-2")).then_some(t)
            }
        })
        .await;
        assert!(
            text.contains("React ✅ to approve all or ❌ to deny all"),
            "how to answer it: {text}"
        );
        ids.iter()
            .enumerate()
            .filter(|(k, _)| text.contains(&format!("make dg-{k}")))
            .map(|(_, id)| id.clone())
            .collect()
    };
    // A stranger's ✅ on the digest is refused, and nothing is answered.
    let theirs = mallory.react(&room, &digest_id, "✅").await;
    assert!(
        notice_to(&alice, &room, &theirs)
            .await
            .contains("You are not an approver for this")
    );
    // 👀 posts the first listed on its own.
    let review = alice.react(&room, &digest_id, "👀").await;
    assert!(
        notice_to(&alice, &room, &review)
            .await
            .contains("is posted below on its own")
    );
    // ✅ asks to confirm, in a message of its own listing what it answers.
    let first_yes = alice.react(&room, &digest_id, "✅").await;
    let confirm = alice
        .wait_for(&room, "the confirmation", |e| {
            message_from(e, bot, "React ✅ on this message to confirm")
        })
        .await;
    let confirm_id = confirm["event_id"].as_str().unwrap().to_string();
    assert_eq!(
        confirm["content"]["m.relates_to"]["m.in_reply_to"]["event_id"],
        digest_id.as_str()
    );
    for id in &ids {
        assert_eq!(interaction(&app, id).await["status"], "pending", "{id}");
    }
    // A request that joins the digest meanwhile: the confirmation answers nothing (it
    // listed another set), and the digest shows the list as it now is.
    ids.push(session_call(&app, "mx-dg-4", "make dg-4").await);
    until("the digest lists the newcomer", || {
        let (alice, room, digest_id) = (&alice, &room, &digest_id);
        async move {
            let t = reads_now(alice, room, digest_id).await;
            t.contains("make dg-4").then_some(())
        }
    })
    .await;
    alice.react(&room, &confirm_id, "✅").await;
    alice
        .wait_for(&room, "the stale confirmation told so", |e| {
            edit_of(e, bot, &confirm_id, "nothing was answered")
        })
        .await;
    for id in &ids {
        assert_eq!(interaction(&app, id).await["status"], "pending", "{id}");
    }
    let mut listed = listed;
    listed.push(ids[4].clone());
    // Asked again (Matrix keeps one ✅ per person on a message: taken back, then given
    // again) and confirmed on the list as it is: every listed request is allowed.
    alice.redact(&room, &first_yes).await;
    alice.react(&room, &digest_id, "✅").await;
    let confirm = alice
        .wait_for(&room, "the second confirmation", |e| {
            message_from(e, bot, "React ✅ on this message to confirm")
                && e["event_id"] != confirm_id.as_str()
        })
        .await;
    let confirm_id = confirm["event_id"].as_str().unwrap().to_string();
    alice.react(&room, &confirm_id, "✅").await;
    for id in &listed {
        let i = settled(&app, id).await;
        let r = &i["resolution"];
        assert_eq!(
            (r["outcome"].as_str(), r["by"].as_str(), r["via"].as_str()),
            (Some("allowed"), Some("alice"), Some("matrix")),
            "{i}"
        );
    }
    alice
        .wait_for(&room, "the confirmation edited to what it did", |e| {
            edit_of(e, bot, &confirm_id, &format!("Approved {}", listed.len()))
        })
        .await;
    alice
        .wait_for(&room, "the digest closed", |e| {
            edit_of(e, bot, &digest_id, "all answered")
        })
        .await;
    app.stop().await;
}

async fn a_burst_the_room_cannot_take_in_time_is_gathered_into_a_digest() {
    let hs = synapse().expect("synapse");
    let (app, room) = setup_with(hs, |_| {}).await;
    let alice = Person::new(hs, &hs.alice);
    let bot = hs.bot.user_id.as_str();
    let n = 40;
    let created = futures_util::future::join_all((0..n).map(|k| {
        let app = &app;
        async move {
            app.post(
                "/v1/interactions",
                &json!({"tool_name": "Bash", "input": {"command": format!("burst-{k}-end")},
                        "session": "s-burst", "cwd": "/srv/shop", "timeout_secs": 14}),
            )
            .await
        }
    }))
    .await;
    assert!(created.iter().all(|(s, _)| s.is_success()), "{created:?}");
    // Every request is in a message of its own or in the digest, and some are in each.
    let title = regex::Regex::new(r"(\d+) requests? from session s-burst").unwrap();
    let (posted, listed) = until("every request shown", || {
        let (alice, room, title) = (&alice, &room, &title);
        async move {
            let recent = alice.recent(room).await;
            let posted = recent
                .iter()
                .filter(|e| message_from(e, bot, "burst-") && !message_from(e, bot, "from session"))
                .filter(|e| e["content"]["m.relates_to"]["rel_type"] != "m.replace")
                .count();
            let listed = recent
                .iter()
                .filter(|e| e["sender"] == bot)
                .filter_map(|e| {
                    let body = e["content"]["m.new_content"]["body"]
                        .as_str()
                        .or(e["content"]["body"].as_str())?;
                    title.captures(body).map(|m| m[1].parse::<usize>().unwrap())
                })
                .max()
                .unwrap_or(0);
            (posted + listed >= n).then_some((posted, listed))
        }
    })
    .await;
    assert!(
        posted > 0 && listed > 0 && posted + listed == n,
        "{posted} posted, {listed} in the digest"
    );
    app.stop().await;
}
