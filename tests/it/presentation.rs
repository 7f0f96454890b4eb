//! Every kind of tool call, with hostile content, as each channel shows it: Telegram (HTML the
//! fake parses as Telegram does, within 4,096 characters), Feishu (a card within the request
//! size limit), the inbox's display API and `imrelay show`. What a person must see to decide
//! is there on each; markup from the agent is shown as text; control and reordering
//! characters never reach a screen.

use std::sync::Arc;

use imrelay::channels::telegram::Mode;
use imrelay::store::{MemoryStore, Store};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::feishu::fake::{FakeFeishu, MAX_CARD_BODY};
use crate::feishu::{card_for, card_text, enable};
use crate::support::*;
use crate::telegram::fake::parse_html;

/// Markup, an entity, a right-to-left override and a terminal escape.
const HOSTILE: &str = "<b>&amp;</b>\u{202e}gnp.exe\u{1b}[31m";

/// Each tool call, and a piece of it every channel must show as it is.
fn calls() -> Vec<(&'static str, Value, &'static str)> {
    let huge = format!("{HOSTILE}\n").repeat(3_000);
    vec![
        (
            "Bash",
            json!({"command": format!("echo '<script>' && rm -rf /tmp/x # {HOSTILE}"), "description": "<i>clean</i>"}),
            "echo '<script>' && rm -rf /tmp/x",
        ),
        (
            "Edit",
            json!({"file_path": "/srv/<app>/main.rs", "old_string": format!("let a = 1; {HOSTILE}"), "new_string": "let a = \"<2>\";"}),
            "let a = \"<2>\";",
        ),
        (
            "MultiEdit",
            json!({"file_path": "/srv/app/lib.rs", "edits": [
                {"old_string": "fn a() {}", "new_string": format!("fn a() -> &'static str {{ \"{HOSTILE}\" }}")},
                {"old_string": "x < y", "new_string": "x > y && y < z"}]}),
            "x > y && y < z",
        ),
        (
            "Write",
            json!({"file_path": "/srv/app/<notes>.md", "content": format!("# Title & <intro>\n{huge}")}),
            "# Title & <intro>",
        ),
        (
            "Read",
            json!({"file_path": "/etc/<passwd>"}),
            "/etc/<passwd>",
        ),
        ("Glob", json!({"pattern": "**/*<x>.rs"}), "**/*<x>.rs"),
        (
            "Grep",
            json!({"pattern": "<(a|b)> & c", "path": "/srv"}),
            "<(a|b)> & c",
        ),
        (
            "WebFetch",
            json!({"url": "https://example.com/?q=<x>&y=1", "prompt": HOSTILE}),
            "https://example.com/?q=<x>&y=1",
        ),
        (
            "WebSearch",
            json!({"query": "rust <generics> & traits"}),
            "rust <generics> & traits",
        ),
        (
            "NotebookEdit",
            json!({"notebook_path": "/srv/<nb>.ipynb", "new_source": format!("print('<hi>') {HOSTILE}"), "cell_id": "c1"}),
            "print('<hi>')",
        ),
        (
            "Task",
            json!({"description": "Review <PR>", "prompt": huge}),
            "Review <PR>",
        ),
        (
            "ExitPlanMode",
            json!({"plan": format!("1. Migrate <db> & test\n{huge}")}),
            "1. Migrate <db> & test",
        ),
        (
            "mcp__github__create_issue",
            json!({"title": "Crash in <parser> & lexer", "body": huge}),
            "Crash in <parser> & lexer",
        ),
        (
            "SomethingElse",
            json!({"nested": {"a": [1, "<x> & y"]}, "text": HOSTILE}),
            "<x> & y",
        ),
    ]
}

/// Every string in `v`, depth first.
fn strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        Value::Object(m) => m.values().for_each(|x| strings(x, out)),
        _ => {}
    }
}

fn no_hidden_characters(what: &str, shown: &str) {
    for c in ['\u{1b}', '\u{202e}', '\u{0}'] {
        assert!(!shown.contains(c), "{what} shows {c:?}: {shown:?}");
    }
}

#[tokio::test]
async fn every_tool_call_reads_right_on_every_channel() {
    let (mut settings, tg) = crate::telegram::setup(Mode::Webhook, |_| {}).await;
    let feishu = FakeFeishu::start().await;
    enable(&mut settings, &feishu);
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let app = spawn_on(settings, store).await;
    let db = tempfile::tempdir().unwrap();
    for (n, (tool, input, must_show)) in calls().into_iter().enumerate() {
        let id = format!("toolu_p{n}");
        let (status, body) = app
            .post(
                "/v1/interactions",
                &json!({"id": id, "tool_name": tool, "input": input, "title": format!("{tool} {HOSTILE}")}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{tool}: {body}");

        // Telegram: HTML Telegram accepts, within its limit, showing the content as text.
        let prompt = eventually(&format!("the {tool} prompt"), || async {
            tg.calls("sendMessage").into_iter().find(|c| {
                parse_html(c.params["text"].as_str().unwrap_or(""))
                    .is_ok_and(|t| t.contains(must_show))
            })
        })
        .await;
        let html = prompt.params["text"].as_str().unwrap();
        assert!(html.encode_utf16().count() <= 4096, "{tool}: too long");
        let shown = parse_html(html).unwrap();
        no_hidden_characters(&format!("telegram {tool}"), &shown);
        assert!(!html.contains("<script>"), "{tool}: markup passed through");

        // Feishu: a card within the size limit, showing the content.
        let (_, card) = card_for(&feishu, &id).await;
        let text = card_text(&card);
        assert!(text.contains(must_show), "feishu {tool}: {text}");
        no_hidden_characters(&format!("feishu {tool}"), &text);
        assert!(
            feishu
                .state
                .sends()
                .iter()
                .filter(|s| s.card.to_string().contains(&id))
                .all(|s| s.body_len <= MAX_CARD_BODY),
            "feishu {tool}: over the size limit"
        );

        // The inbox's display: a summary and blocks, nothing hidden.
        let (status, display) = app.get(&format!("/v1/interactions/{id}/display")).await;
        assert_eq!(status, StatusCode::OK, "{display}");
        let summary = display["summary"].as_str().unwrap();
        assert!(!summary.is_empty(), "{tool}");
        let mut texts = Vec::new();
        strings(&display, &mut texts);
        let texts = texts.join("\n");
        no_hidden_characters(&format!("display {tool}"), &texts);
        assert!(texts.contains(must_show), "display {tool}: {texts}");

        // The terminal: `imrelay show` through the API, plain text.
        let (db_path, url, show_id) = (db.path().join("unused.db"), app.url(""), id.clone());
        let (ok, out, err) =
            tokio::task::spawn_blocking(move || cli(&db_path, &["show", &show_id, "--url", &url]))
                .await
                .unwrap();
        assert!(ok, "show {tool}: {err}");
        assert!(out.contains(must_show), "terminal {tool}: {out}");
        no_hidden_characters(&format!("terminal {tool}"), &out);
    }
    assert_eq!(tg.take_refusals(), Vec::<(String, String)>::new());
    app.stop().await;
}
