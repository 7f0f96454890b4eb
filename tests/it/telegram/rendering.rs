//! What prompts look like: escaping, length budgets, links, keyboards.

use super::*;

// ---- rendering ----------------------------------------------------------------------------

#[tokio::test]
async fn approval_prompts_escape_hostile_input_and_carry_bound_buttons() {
    let (app, tg) = start(Mode::Webhook).await;
    let id = create(
        &app,
        json!({"id": "toolu_html", "tool_name": "Bash", "agent": "claude-code", "session": "s-<1>",
               "cwd": "/srv/a&b", "title": "Run <b>this</b>",
               "input": {"command": "echo '<script>alert(1)</script>' && rm -rf /tmp/x"}}),
    )
    .await;
    let p = prompt(&tg, GROUP, "rm -rf /tmp/x").await;
    assert_eq!(p.params["parse_mode"], "HTML");
    assert!(
        p.text.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{}",
        p.text
    );
    assert!(p.text.contains("&amp;&amp; rm -rf /tmp/x"));
    assert!(!p.text.contains("<script>"));
    assert!(p.text.contains("Run &lt;b&gt;this&lt;/b&gt;"));
    assert!(p.text.contains("/srv/a&amp;b"));
    assert!(p.text.contains("session s-&lt;1&gt;"));
    assert!(p.text.contains("<b>Bash</b> needs approval"));
    assert!(p.text.contains("⏳ Answer within 5 min"));
    let labels: Vec<String> = p.buttons().into_iter().map(|b| b.0).collect();
    assert_eq!(labels, ["✅ Allow", "❌ Deny", "💬 Deny with reason…"]);
    for (_, data) in p.buttons() {
        assert!(data.len() <= 64, "{data}");
        assert!(!data.contains(&id), "the data carries a handle, not the id");
    }
    // Every button is distinct: one interaction, one action each.
    let mut datas: Vec<String> = p.buttons().into_iter().map(|b| b.1).collect();
    datas.sort();
    datas.dedup();
    assert_eq!(datas.len(), 3);
    app.stop().await;
}

#[tokio::test]
async fn long_input_is_cut_to_fit_with_a_note() {
    let (app, tg) = start(Mode::Webhook).await;
    let content = "<x>&".repeat(3000);
    create(
        &app,
        json!({"tool_name": "Write", "input": {"file_path": "/tmp/big", "content": content}}),
    )
    .await;
    let p = prompt(&tg, PRIVATE, "/tmp/big").await;
    assert!(p.text.encode_utf16().count() <= 4096, "{}", p.text.len());
    assert!(p.text.contains("more characters not shown"), "{}", p.text);
    app.stop().await;
}

#[tokio::test]
async fn question_prompts_show_options_descriptions_toggles_and_other() {
    let (app, tg) = start(Mode::Webhook).await;
    create(
        &app,
        json!({"tool_name": "AskUserQuestion", "input": questions_input()}),
    )
    .await;
    let p = prompt(&tg, PRIVATE, "Which color?").await;
    assert!(p.text.contains("Which toppings?"));
    assert!(p.text.contains("warm &amp; &lt;bold&gt;"), "{}", p.text);
    let labels: Vec<String> = p.buttons().into_iter().map(|b| b.0).collect();
    assert_eq!(
        labels,
        [
            "1· Red",
            "1· Blue",
            "1· ✏️ Other…",
            "2· ☐ Cheese",
            "2· ☐ Ham",
            "2· ☐ Olives",
            "2· ✏️ Other…",
            "2· 📨 Submit",
            "❌ Decline"
        ]
    );
    app.stop().await;
}

#[tokio::test]
async fn the_fake_refuses_what_telegram_refuses() {
    let tg = FakeTelegram::start().await;
    let client = reqwest::Client::new();
    let send = |method: &'static str, body: Value| {
        let req = client
            .post(format!("{}/bot{TOKEN}/{method}", tg.url))
            .json(&body);
        async move {
            let r = req.send().await.unwrap();
            (r.status(), r.json::<Value>().await.unwrap())
        }
    };
    let html = |text: &str| json!({"chat_id": 1, "text": text, "parse_mode": "HTML"});
    let fine = [
        "<b>a</b> &lt;x&gt; &amp; &quot; &#128512; <a href=\"tg://user?id=1\">A</a>",
        "<pre><code class=\"language-bash\">ls</code></pre>",
    ];
    for text in fine {
        let (s, body) = send("sendMessage", html(text)).await;
        assert_eq!(s, StatusCode::OK, "{text}: {body}");
    }
    // 4096 units of shown text are fine, though the HTML is longer.
    let (s, _) = send("sendMessage", html(&"&amp;".repeat(4096))).await;
    assert_eq!(s, StatusCode::OK);
    let bad = [
        html("<script>x</script>"),
        html("<b>unclosed"),
        html("<b><i>crossed</b></i>"),
        html("a < b"),
        html("a & b"),
        html("&lt;b&gt;&nbsp;"),
        html(&"😀".repeat(2049)),
        json!({"chat_id": 1, "text": "x".repeat(4097)}),
        json!({"chat_id": 1, "text": " "}),
        json!({"chat_id": 1, "text": "k", "reply_markup": {"inline_keyboard": [[{"text": "A", "callback_data": "x".repeat(65)}]]}}),
        json!({"chat_id": 1, "text": "k", "reply_markup": {"inline_keyboard": [[{"text": "A", "callback_data": ""}]]}}),
    ];
    for body in &bad {
        let (s, answer) = send("sendMessage", body.clone()).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
        assert!(
            answer["description"]
                .as_str()
                .unwrap()
                .starts_with("Bad Request"),
            "{answer}"
        );
    }
    let (s, _) = send(
        "answerCallbackQuery",
        json!({"callback_query_id": "q", "text": "x".repeat(201)}),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(tg.take_refusals().len(), bad.len() + 1);
    assert_eq!(tg.calls("sendMessage").len(), fine.len() + 1);
}
