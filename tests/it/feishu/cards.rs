//! Card JSON as the fake platform receives it: approval, question and resolved states, in
//! both locales.

use imrelay::channels::feishu::settings::Locale;
use serde_json::{Value, json};

use super::fake::{FakeFeishu, MAX_CARD_BODY};
use super::{CHAT, DM, button_value, card_for, card_text, enable, tagged};
use crate::support::{spawn_with, wait_until};

#[tokio::test]
async fn approval_card_has_context_input_deadline_buttons_and_a_reason_form() {
    let fake = FakeFeishu::start().await;
    let app = spawn_with(|s| enable(s, &fake)).await;
    let (status, _) = app
        .post(
            "/v1/interactions",
            &json!({"id": "toolu_card1", "tool_name": "Bash", "input": {"command": "rm -rf build"},
                    "agent": "claude-code", "session": "sess-42", "cwd": "/srv/shop"}),
        )
        .await;
    assert_eq!(status, 201);
    let (_, card) = card_for(&fake, "toolu_card1").await;

    assert_eq!(card["schema"], "2.0");
    assert_eq!(card["config"]["update_multi"], true);
    assert_eq!(card["header"]["template"], "orange");
    assert_eq!(card["header"]["title"]["tag"], "plain_text");
    assert!(
        card["header"]["title"]["content"]
            .as_str()
            .unwrap()
            .contains("Bash")
    );
    let text = card_text(&card);
    for needle in ["claude-code", "session sess-42", "/srv/shop", "Deadline"] {
        assert!(text.contains(needle), "{needle:?} missing from {text}");
    }
    let md = tagged(&card, "markdown");
    assert!(
        md.iter().any(|m| {
            let c = m["content"].as_str().unwrap();
            c.starts_with("```") && c.contains("rm -rf build")
        }),
        "the input is shown in a code block"
    );
    let approve = button_value(&card, "approve");
    assert_eq!(approve["id"], "toolu_card1");
    assert_eq!(approve["action"], "allow");
    assert!(approve["mac"].as_str().unwrap().len() >= 20);
    assert_eq!(button_value(&card, "deny")["action"], "deny");
    let forms = tagged(&card, "form");
    assert_eq!(forms.len(), 1);
    let inputs = tagged(forms[0], "input");
    assert_eq!(inputs[0]["name"], "reason");
    let submit = tagged(forms[0], "button");
    assert_eq!(submit[0]["form_action_type"], "submit");
    assert_eq!(submit[0]["behaviors"][0]["value"]["action"], "deny");

    // One card per receiver, each to its own id type.
    wait_until("two cards", || fake.state.delivered().len() == 2).await;
    let mut targets: Vec<(String, String)> = fake
        .state
        .delivered()
        .iter()
        .map(|s| (s.receive_id_type.clone(), s.receive_id.clone()))
        .collect();
    targets.sort();
    assert_eq!(
        targets,
        vec![
            ("chat_id".to_string(), CHAT.to_string()),
            ("open_id".to_string(), DM.to_string())
        ]
    );
    app.stop().await;
}

/// The first 4,000 characters of `s` (the API takes up to 16 KB of title, description, cwd).
fn short(s: &str) -> String {
    s.chars().take(4000).collect()
}

/// The request bodies of every send that reached the fake for interaction `id`.
fn body_sizes(fake: &FakeFeishu, id: &str) -> Vec<usize> {
    fake.state
        .sends()
        .iter()
        .filter(|s| s.card.to_string().contains(id))
        .map(|s| s.body_len)
        .collect()
}

#[tokio::test]
async fn a_huge_input_is_truncated_with_a_note_and_the_request_fits() {
    let fake = FakeFeishu::start().await;
    let app = spawn_with(|s| enable(s, &fake)).await;
    // Quotes grow fourfold on the way (escaped in the card, then again in `content`), emoji
    // take four bytes: the card alone would look small enough.
    for (id, command) in [
        ("toolu_big", "x".repeat(100_000)),
        ("toolu_quotes", "\"".repeat(50_000)),
        ("toolu_emoji", "🦀\"中".repeat(20_000)),
    ] {
        // Title and description are untrusted text too, and of the same kind.
        let (status, _) = app
            .post(
                "/v1/interactions",
                &json!({"id": id, "tool_name": "Bash", "input": {"command": command},
                        "title": short(&command), "description": short(&command), "cwd": short(&command)}),
            )
            .await;
        assert_eq!(status, 201);
        let (_, card) = card_for(&fake, id).await;
        assert!(card_text(&card).contains("Input truncated"), "{id}");
        let sizes = body_sizes(&fake, id);
        assert!(
            !sizes.is_empty() && sizes.iter().all(|n| *n <= MAX_CARD_BODY),
            "{id}: {sizes:?}"
        );
    }
    // The card is cut no more than it has to be: the quotes still fill most of the request.
    assert!(body_sizes(&fake, "toolu_quotes")[0] > MAX_CARD_BODY / 2);
    app.stop().await;
}

#[tokio::test]
async fn a_cut_tool_call_links_to_its_inbox_item_when_the_public_url_is_set() {
    let fake = FakeFeishu::start().await;
    let app = spawn_with(|s| {
        enable(s, &fake);
        s.server.public_url = "https://relay.example.com/".into();
    })
    .await;
    app.create_bash("toolu_long", &"make all && ".repeat(2_000))
        .await;
    app.create_bash("toolu_short", "ls").await;
    let (_, card) = card_for(&fake, "toolu_long").await;
    let links: Vec<String> = tagged(&card, "markdown")
        .iter()
        .filter_map(|m| m["content"].as_str().map(str::to_string))
        .filter(|c| c.contains("inbox"))
        .collect();
    assert_eq!(links.len(), 1, "{links:?}");
    assert!(
        links[0].starts_with("Input truncated: ")
            && links[0].contains("more characters not shown")
            && links[0].ends_with(
                ". [See all of it in the imrelay inbox](https://relay.example.com/#toolu_long)"
            ),
        "{links:?}"
    );
    let (_, short_card) = card_for(&fake, "toolu_short").await;
    assert!(
        !card_text(&short_card).contains("inbox"),
        "nothing cut, no link"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_question_with_long_descriptions_is_cut_to_fit_and_still_answerable() {
    let fake = FakeFeishu::start().await;
    let app = spawn_with(|s| {
        enable(s, &fake);
        s.feishu.locale = Locale::ZhCn;
    })
    .await;
    let desc = "这个选项的说明很长，还带着“引号”、\"转义\"和表情🦀。".repeat(20);
    let questions: Vec<Value> = (0..4)
        .map(|q| {
            json!({
                "question": format!("第{q}个问题：{}", "请先读完这段很长的说明🦀。".repeat(40)),
                "header": format!("问题{q}"),
                "multiSelect": q % 2 == 1,
                "options": (0..4).map(|o| json!({
                    "label": format!("选项{o}{}", "“长”".repeat(30)),
                    "description": desc,
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    let (status, body) = app
        .post(
            "/v1/interactions",
            &json!({"id": "toolu_bigq", "tool_name": "AskUserQuestion", "input": {"questions": questions}}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let (_, card) = card_for(&fake, "toolu_bigq").await;
    let sizes = body_sizes(&fake, "toolu_bigq");
    assert!(sizes.iter().all(|n| *n <= MAX_CARD_BODY), "{sizes:?}");
    let form = tagged(&card, "form")[0];
    assert_eq!(
        tagged(form, "select_static").len() + tagged(form, "multi_select_static").len(),
        4
    );
    assert_eq!(tagged(form, "input").len(), 4);
    assert_eq!(button_value(&card, "submit")["action"], "answer");
    // The resolved card, with a long reason, fits its update request too.
    let (status, _) = app
        .delete(&format!(
            "/v1/interactions/toolu_bigq?reason={}",
            "%22".repeat(2000)
        ))
        .await;
    assert_eq!(status, 200);
    wait_until("the card is updated", || !fake.state.patches().is_empty()).await;
    assert!(fake.state.patches()[0].body_len <= MAX_CARD_BODY);
    app.stop().await;
}

fn question_input() -> Value {
    json!({"questions": [
        {"question": "Which color?", "header": "Color", "multiSelect": false,
         "options": [{"label": "Red", "description": "warm"}, {"label": "Blue"}]},
        {"question": "Which toppings?", "header": "Toppings", "multiSelect": true,
         "options": [{"label": "Cheese"}, {"label": "Ham"}, {"label": "Olives"}]}
    ]})
}

#[tokio::test]
async fn question_card_is_one_form_with_selects_other_inputs_and_submit() {
    let fake = FakeFeishu::start().await;
    let app = spawn_with(|s| enable(s, &fake)).await;
    let (status, _) = app
        .post(
            "/v1/interactions",
            &json!({"id": "toolu_q1", "tool_name": "AskUserQuestion", "input": question_input()}),
        )
        .await;
    assert_eq!(status, 201);
    let (_, card) = card_for(&fake, "toolu_q1").await;
    assert_eq!(card["header"]["template"], "orange");
    let forms = tagged(&card, "form");
    assert_eq!(forms.len(), 1, "one form for the whole interaction");
    let form = forms[0];
    let single = tagged(form, "select_static");
    let multi = tagged(form, "multi_select_static");
    assert_eq!(single.len(), 1);
    assert_eq!(multi.len(), 1);
    assert_eq!(single[0]["name"], "q0");
    assert_eq!(multi[0]["name"], "q1");
    let labels: Vec<&str> = multi[0]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["text"]["content"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["Cheese", "Ham", "Olives"]);
    let inputs: Vec<&str> = tagged(form, "input")
        .iter()
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    assert_eq!(inputs, ["q0_other", "q1_other"]);
    let buttons = tagged(form, "button");
    assert_eq!(buttons.len(), 1, "one Submit");
    assert_eq!(buttons[0]["form_action_type"], "submit");
    assert_eq!(buttons[0]["behaviors"][0]["value"]["action"], "answer");
    let text = card_text(&card);
    assert!(text.contains("Which color?") && text.contains("Color") && text.contains("warm"));
    // Declining is a separate button outside the form.
    assert_eq!(button_value(&card, "decline")["action"], "deny");
    app.stop().await;
}

#[tokio::test]
async fn zh_cn_is_the_default_locale() {
    let fake = FakeFeishu::start().await;
    let app = spawn_with(|s| {
        enable(s, &fake);
        s.feishu.locale = Locale::ZhCn;
    })
    .await;
    app.create_bash("toolu_zh", "ls").await;
    let (_, card) = card_for(&fake, "toolu_zh").await;
    assert!(
        card["header"]["title"]["content"]
            .as_str()
            .unwrap()
            .contains("审批")
    );
    let buttons: Vec<&str> = tagged(&card, "button")
        .iter()
        .map(|b| b["text"]["content"].as_str().unwrap())
        .collect();
    assert!(
        buttons.contains(&"批准") && buttons.contains(&"拒绝"),
        "{buttons:?}"
    );
    assert_eq!(
        imrelay::config::Settings::defaults().unwrap().feishu.locale,
        Locale::ZhCn
    );
    app.stop().await;
}

#[tokio::test]
async fn resolved_card_has_no_buttons_and_says_who_how_and_when() {
    let fake = FakeFeishu::start().await;
    let app = spawn_with(|s| enable(s, &fake)).await;
    app.create_bash("toolu_res", "ls").await;
    let (message_id, _) = card_for(&fake, "toolu_res").await;
    let (status, _) = app
        .post(
            "/v1/interactions/toolu_res/respond",
            &json!({"decision": "deny", "message": "not today", "by": "alice", "via": "desktop"}),
        )
        .await;
    assert_eq!(status, 200);
    wait_until("the card is updated", || {
        fake.state
            .patches()
            .iter()
            .any(|p| p.message_id == message_id)
    })
    .await;
    let patch = fake
        .state
        .patches()
        .into_iter()
        .find(|p| p.message_id == message_id)
        .unwrap();
    let card = patch.card;
    assert_eq!(card["config"]["update_multi"], true);
    assert_eq!(card["header"]["template"], "red");
    assert!(tagged(&card, "button").is_empty());
    assert!(tagged(&card, "form").is_empty());
    let text = card_text(&card);
    assert!(text.contains("Denied by alice via desktop"), "{text}");
    assert!(text.contains("not today"), "{text}");
    assert!(text.contains("UTC"), "the time is shown: {text}");
    app.stop().await;
}
