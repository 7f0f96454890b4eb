//! AskUserQuestion prompts and forms: options, toggles, Other, typed replies, field by field.

use super::*;

// ---- questions ----------------------------------------------------------------------------

#[tokio::test]
async fn multi_select_toggles_rerender_then_submit_answers() {
    let (app, tg) = start(Mode::Webhook).await;
    let id = create(
        &app,
        json!({"tool_name": "AskUserQuestion", "input": {"questions": [
            {"question": "Which toppings?", "header": "Toppings", "multiSelect": true,
             "options": [{"label": "Cheese"}, {"label": "Ham"}, {"label": "Olives"}]}]}}),
    )
    .await;
    let p = prompt(&tg, PRIVATE, "Which toppings?").await;
    // Submit with nothing chosen is refused, politely.
    let t = tap_on(&app, &tg, ALICE, &p, &p.button("📨 Submit")).await;
    assert!(t.contains("Choose at least one"), "{t}");

    assert_eq!(
        tap_on(&app, &tg, ALICE, &p, &p.button("☐ Cheese")).await,
        "☑ Cheese"
    );
    let e = edited(&tg, PRIVATE, p.message_id, "Which toppings?").await;
    let texts: Vec<String> = e["reply_markup"]["inline_keyboard"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r.as_array().unwrap().clone())
        .map(|b| b["text"].as_str().unwrap().to_string())
        .collect();
    assert!(texts.contains(&"☑ Cheese".to_string()), "{texts:?}");
    assert!(texts.contains(&"☐ Ham".to_string()), "{texts:?}");
    assert_eq!(
        tap_on(&app, &tg, ALICE, &p, &p.button("☐ Ham")).await,
        "☑ Ham"
    );
    assert_eq!(
        tap_on(&app, &tg, ALICE, &p, &p.button("☐ Olives")).await,
        "☑ Olives"
    );
    // The same button again turns it off (the data on the old keyboard is still valid).
    assert_eq!(
        tap_on(&app, &tg, ALICE, &p, &p.button("☐ Olives")).await,
        "☐ Olives"
    );
    assert_eq!(status(&app, &id).await["status"], "pending");

    assert_eq!(
        tap_on(&app, &tg, ALICE, &p, &p.button("📨 Submit")).await,
        "Answered"
    );
    let body = status(&app, &id).await;
    assert_eq!(
        body["resolution"]["result"]["updatedInput"]["answers"],
        json!({"Which toppings?": "Cheese, Ham"})
    );
    let e = edited(&tg, PRIVATE, p.message_id, "Answered by Alice via telegram").await;
    assert!(e["text"].as_str().unwrap().contains("Cheese, Ham"));
    app.stop().await;
}

// Several worker threads, so that updates handled concurrently could really swap places.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_polled_batch_is_handled_in_order_and_each_update_once() {
    let (app, tg) = start(Mode::Polling).await;
    let id = create(
        &app,
        json!({"tool_name": "AskUserQuestion", "input": {"questions": [
            {"question": "Which toppings?", "header": "Toppings", "multiSelect": true,
             "options": [{"label": "Cheese"}, {"label": "Ham"}, {"label": "Olives"}]}]}}),
    )
    .await;
    let p = prompt(&tg, PRIVATE, "Which toppings?").await;
    let on = |u: i64, label: &str| tap(u, ALICE, PRIVATE, p.message_id, &p.button(label));
    let ids: Vec<i64> = (0..5).map(|_| tg.next_update_id()).collect();
    let first = on(ids[0], "☐ Cheese");
    // One getUpdates answer: toggles, a re-delivered update, an untoggle, then Submit.
    tg.push_updates(vec![
        first.clone(),
        on(ids[1], "☐ Ham"),
        first,
        on(ids[2], "☐ Olives"),
        on(ids[3], "☐ Olives"),
        on(ids[4], "📨 Submit"),
    ]);
    assert_eq!(toast(&tg, ids[4]).await, "Answered");
    assert_eq!(
        status(&app, &id).await["resolution"]["result"]["updatedInput"]["answers"],
        json!({"Which toppings?": "Cheese, Ham"})
    );
    assert_eq!(toast(&tg, ids[2]).await, "☑ Olives");
    assert_eq!(toast(&tg, ids[3]).await, "☐ Olives");
    // A re-delivery in a later batch (a poll after a crash) is ignored too.
    tg.push_update(on(ids[1], "☐ Ham"));
    app.metrics_with("imrelay_telegram_updates_total{kind=\"duplicate\"} 2")
        .await;
    let answers_to = |u: i64| {
        tg.calls("answerCallbackQuery")
            .iter()
            .filter(|c| c.params["callback_query_id"] == format!("cq-{u}").as_str())
            .count()
    };
    assert_eq!(answers_to(ids[0]), 1);
    assert_eq!(answers_to(ids[1]), 1);
    app.stop().await;
}

#[tokio::test]
async fn a_429_on_a_rerender_or_a_reply_request_is_waited_out() {
    let (app, tg) = start_with(Mode::Webhook, |s| s.telegram.chats = vec![PRIVATE]).await;
    let id = create(
        &app,
        json!({"tool_name": "AskUserQuestion", "input": {"questions": [
            {"question": "Which toppings?", "header": "Toppings", "multiSelect": true,
             "options": [{"label": "Cheese"}, {"label": "Ham"}]}]}}),
    )
    .await;
    let p = prompt(&tg, PRIVATE, "Which toppings?").await;
    // The re-render after a toggle meets a 429 once: it is sent again after retry_after,
    // so the keyboard does not keep showing ☐.
    tg.fail("editMessageText", Fail::RetryAfter(1), 1);
    assert_eq!(
        tap_on(&app, &tg, ALICE, &p, &p.button("☐ Cheese")).await,
        "☑ Cheese"
    );
    let edits = tg.wait_n("editMessageText", 2).await;
    assert!(edits[1].at - edits[0].at >= Duration::from_millis(990));
    let keyboard = edits[1].params["reply_markup"].to_string();
    assert!(keyboard.contains("☑ Cheese"), "{keyboard}");
    // The reply request promised by the toast meets a 429 once: it still comes.
    tg.fail("sendMessage", Fail::RetryAfter(1), 1);
    let t = tap_on(&app, &tg, ALICE, &p, &p.button("✏️ Other…")).await;
    assert!(t.contains("Reply"), "{t}");
    let asks = tg
        .wait_for("sendMessage", |c| {
            c.iter()
                .filter(|c| c.params["reply_markup"]["force_reply"] == true)
                .count()
                == 2
        })
        .await;
    let ask = asks.last().unwrap();
    deliver(
        &app,
        &text(
            tg.next_update_id(),
            ALICE,
            PRIVATE,
            "Pineapple",
            ask.message_id,
        ),
    )
    .await;
    tap_on(&app, &tg, ALICE, &p, &p.button("📨 Submit")).await;
    assert_eq!(
        status(&app, &id).await["resolution"]["result"]["updatedInput"]["answers"],
        json!({"Which toppings?": "Cheese, Pineapple"})
    );
    app.stop().await;
}

#[tokio::test]
async fn other_takes_free_text_by_reply() {
    let (app, tg) = start(Mode::Webhook).await;
    let id = create(
        &app,
        json!({"tool_name": "AskUserQuestion", "input": {"questions": [
            {"question": "Which color?", "header": "Color",
             "options": [{"label": "Red"}, {"label": "Blue"}]}]}}),
    )
    .await;
    let p = prompt(&tg, GROUP, "Which color?").await;
    let t = tap_on(&app, &tg, BOB, &p, &p.button("✏️ Other…")).await;
    assert!(t.contains("Reply"), "{t}");
    let asks = tg
        .wait_for("sendMessage", |c| {
            c.iter()
                .any(|c| c.params["reply_markup"]["force_reply"] == true)
        })
        .await;
    let ask = asks
        .iter()
        .find(|c| c.params["reply_markup"]["force_reply"] == true)
        .unwrap();
    assert!(
        ask.params["text"]
            .as_str()
            .unwrap()
            .contains("Which color?")
    );
    deliver(
        &app,
        &text(
            tg.next_update_id(),
            BOB,
            GROUP,
            "Green, please",
            ask.message_id,
        ),
    )
    .await;
    let body = status(&app, &id).await;
    assert_eq!(
        body["resolution"]["result"]["updatedInput"]["answers"],
        json!({"Which color?": "Green, please"})
    );
    assert_eq!(body["resolution"]["by"], "Bob");
    app.stop().await;
}

#[tokio::test]
async fn several_questions_resolve_only_when_all_are_answered() {
    let (app, tg) = start(Mode::Webhook).await;
    let id = create(
        &app,
        json!({"tool_name": "AskUserQuestion", "input": questions_input()}),
    )
    .await;
    let p = prompt(&tg, PRIVATE, "Which color?").await;

    assert_eq!(
        tap_on(&app, &tg, ALICE, &p, &p.button("1· Red")).await,
        "Chosen: Red"
    );
    assert_eq!(status(&app, &id).await["status"], "pending");
    // Re-rendered: the answer shows, the first question's buttons are gone.
    let e = edited(&tg, PRIVATE, p.message_id, "✔ <b>Red</b>").await;
    let rows = e["reply_markup"]["inline_keyboard"].to_string();
    assert!(!rows.contains("1· Blue"), "{rows}");
    assert!(rows.contains("2· ☐ Cheese"), "{rows}");
    // A second tap on the answered question changes nothing.
    let t = tap_on(&app, &tg, BOB, &p, &p.button("1· Blue")).await;
    assert!(t.contains("already answered"), "{t}");

    // Other text for a multi-select question joins the toggles.
    tap_on(&app, &tg, ALICE, &p, &p.button("2· ☐ Olives")).await;
    tap_on(&app, &tg, ALICE, &p, &p.button("2· ✏️ Other…")).await;
    let asks = tg
        .wait_for("sendMessage", |c| {
            c.iter()
                .any(|c| c.params["reply_markup"]["force_reply"] == true)
        })
        .await;
    let ask = asks
        .iter()
        .find(|c| c.params["reply_markup"]["force_reply"] == true)
        .unwrap();
    deliver(
        &app,
        &text(
            tg.next_update_id(),
            ALICE,
            PRIVATE,
            "Pineapple",
            ask.message_id,
        ),
    )
    .await;
    edited(&tg, PRIVATE, p.message_id, "Which toppings?").await;
    assert_eq!(status(&app, &id).await["status"], "pending");
    assert_eq!(
        tap_on(&app, &tg, ALICE, &p, &p.button("2· 📨 Submit")).await,
        "Answered"
    );
    let body = status(&app, &id).await;
    assert_eq!(
        body["resolution"]["result"]["updatedInput"]["answers"],
        json!({"Which color?": "Red", "Which toppings?": "Olives, Pineapple"})
    );
    app.stop().await;
}

// ---- forms --------------------------------------------------------------------------------

/// The keyboard of the latest edit of `p`, as a prompt to tap on.
fn as_edited(p: &Posted, edit: Value) -> Posted {
    Posted {
        chat: p.chat,
        message_id: p.message_id,
        text: edit["text"].as_str().unwrap().to_string(),
        params: edit,
    }
}

#[tokio::test]
async fn a_two_field_form_is_filled_in_with_a_typed_reply_and_a_button() {
    let (app, tg) = start(Mode::Webhook).await;
    let id = create(
        &app,
        json!({"kind": "form", "message": "Book the <team> offsite", "schema": {
            "type": "object",
            "properties": {
                "people": {"type": "integer", "title": "How many people", "minimum": 2, "maximum": 40},
                "city": {"type": "string", "title": "City", "oneOf": [
                    {"const": "ber", "title": "Berlin"}, {"const": "lis", "title": "Lisbon"}]}
            },
            "required": ["people", "city"]}}),
    )
    .await;
    let p = prompt(&tg, PRIVATE, "Book the &lt;team&gt; offsite").await;
    // A person reads: what is asked, every field, the one being asked with what it takes.
    assert!(p.text.starts_with("📝 <b>Form</b>"), "{}", p.text);
    assert!(
        p.text.contains("▶ 1. <b>How many people</b> *"),
        "{}",
        p.text
    );
    assert!(p.text.contains("a whole number from 2 to 40"), "{}", p.text);
    assert!(p.text.contains("2. <b>City</b> *"), "{}", p.text);
    let labels: Vec<String> = p.buttons().into_iter().map(|(t, _)| t).collect();
    assert_eq!(labels, ["✏️ Type the answer…", "❌ Decline"]);

    // A reply to the prompt itself is taken for the field being asked, and checked.
    deliver(
        &app,
        &text(
            tg.next_update_id(),
            ALICE,
            PRIVATE,
            "99",
            Some(p.message_id),
        ),
    )
    .await;
    let said = tg
        .wait_for("sendMessage", |c| {
            c.iter().any(|c| {
                c.params["text"]
                    .as_str()
                    .is_some_and(|t| t.contains("must be at most 40"))
            })
        })
        .await;
    let complaint = said
        .iter()
        .find(|c| c.params["text"].as_str().unwrap().contains("at most 40"))
        .unwrap();
    assert_eq!(
        complaint.params["text"],
        "How many people: must be at most 40. Reply again."
    );
    assert_eq!(status(&app, &id).await["status"], "pending");

    // "Type the answer…" asks for a reply, bound to the person who tapped.
    tap_on(&app, &tg, ALICE, &p, &p.button("✏️ Type the answer…")).await;
    let ask = reply_request(&tg, 1).await;
    assert!(
        ask.params["text"].as_str().unwrap().contains(
            "reply to this message with <b>How many people</b> (a whole number from 2 to 40)"
        ),
        "{}",
        ask.params["text"]
    );
    deliver(
        &app,
        &text(tg.next_update_id(), ALICE, PRIVATE, " 12 ", ask.message_id),
    )
    .await;
    let e = edited(&tg, PRIVATE, p.message_id, "→ <b>12</b>").await;
    let now = as_edited(&p, e);
    assert!(now.text.contains("▶ 2. <b>City</b> *"), "{}", now.text);
    let labels: Vec<String> = now.buttons().into_iter().map(|(t, _)| t).collect();
    assert_eq!(labels, ["Berlin", "Lisbon", "↩ Back", "❌ Decline"]);

    // The choice is a button; then a summary with Submit.
    assert_eq!(
        tap_on(&app, &tg, BOB, &now, &now.button("Lisbon")).await,
        "City: Lisbon"
    );
    let e = edited(&tg, PRIVATE, p.message_id, "→ <b>Lisbon</b>").await;
    let ready = as_edited(&p, e);
    assert!(ready.text.contains("All filled in"), "{}", ready.text);
    assert_eq!(status(&app, &id).await["status"], "pending");
    assert_eq!(
        tap_on(&app, &tg, ALICE, &ready, &ready.button("📨 Submit")).await,
        "Answered"
    );
    let body = status(&app, &id).await;
    assert_eq!(
        body["resolution"]["result"],
        json!({"action": "accept", "content": {"people": 12, "city": "lis"}})
    );
    assert_eq!(body["resolution"]["via"], "telegram");
    // Every copy ends showing what was answered, by label, and who answered.
    let done = edited(&tg, PRIVATE, p.message_id, "Answered by Alice").await;
    let text = done["text"].as_str().unwrap();
    assert!(
        text.contains("→ <b>12</b>") && text.contains("→ <b>Lisbon</b>"),
        "{text}"
    );
    assert_eq!(
        done["reply_markup"]["inline_keyboard"],
        json!([]),
        "no buttons left: {done}"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_form_on_telegram_goes_back_skips_and_declines() {
    let (app, tg) = start(Mode::Webhook).await;
    let id = create(
        &app,
        json!({"kind": "form", "message": "Release checklist", "schema": {
            "type": "object",
            "properties": {
                "tested": {"type": "boolean", "title": "Tests pass"},
                "notes": {"type": "string", "title": "Notes"},
                "areas": {"type": "array", "title": "Areas", "items": {"enum": ["api", "ui", "db"]}, "minItems": 1}
            },
            "required": ["tested", "areas"]}}),
    )
    .await;
    let p = prompt(&tg, PRIVATE, "Release checklist").await;
    tap_on(&app, &tg, ALICE, &p, &p.button("✅ Yes")).await;
    let now = as_edited(&p, edited(&tg, PRIVATE, p.message_id, "→ <b>Yes</b>").await);
    // An optional field can be skipped; Back forgets it again.
    assert_eq!(
        tap_on(&app, &tg, ALICE, &now, &now.button("⏭ Skip")).await,
        "Notes: skipped"
    );
    let now = as_edited(&p, edited(&tg, PRIVATE, p.message_id, "(left empty)").await);
    // Multiple choice: toggles, then Done, checked against minItems.
    assert_eq!(
        tap_on(&app, &tg, ALICE, &now, &now.button("📨 Done")).await,
        "Areas: choose at least 1"
    );
    assert_eq!(
        tap_on(&app, &tg, ALICE, &now, &now.button("☐ ui")).await,
        "☑ ui"
    );
    // A tap for a field that is not being asked is refused.
    let t = tap_on(&app, &tg, ALICE, &p, &p.button("✅ Yes")).await;
    assert_eq!(t, "That field is not the one being asked now.");
    let decline = now.button("❌ Decline");
    assert_eq!(tap_on(&app, &tg, ALICE, &now, &decline).await, "Declined");
    let body = status(&app, &id).await;
    assert_eq!(body["resolution"]["result"]["action"], "decline");
    assert_eq!(body["resolution"]["outcome"], "denied");
    app.stop().await;
}

#[tokio::test]
async fn a_free_text_prompt_is_a_question_answered_by_the_reply_itself() {
    let (app, tg) = start(Mode::Webhook).await;
    let id = create(
        &app,
        json!({"kind": "prompt", "message": "What is your favorite color?"}),
    )
    .await;
    let p = prompt(&tg, PRIVATE, "What is your favorite color?").await;
    // It reads as a question: no form, no field, no "text" hint, no Submit.
    assert!(p.text.starts_with("❓ <b>Question</b>"), "{}", p.text);
    assert!(
        p.text.contains(
            "<b>What is your favorite color?</b>\n\n<i>Reply to this message with your answer.</i>\n\n⏳ Answer within"
        ),
        "{}",
        p.text
    );
    for form_word in ["Form", "Answer *", "<i>text</i>", "Submit"] {
        assert!(!p.text.contains(form_word), "{form_word:?} in {}", p.text);
    }
    let labels: Vec<String> = p.buttons().into_iter().map(|(t, _)| t).collect();
    assert_eq!(labels, ["✏️ Answer…", "❌ Decline"]);

    // The reply is the answer: nothing more to tap. Even a reply starting with "deny".
    deliver(
        &app,
        &text(
            tg.next_update_id(),
            ALICE,
            PRIVATE,
            " Deny nothing: teal ",
            Some(p.message_id),
        ),
    )
    .await;
    let done = edited(&tg, PRIVATE, p.message_id, "Answered by Alice via telegram").await;
    let body = status(&app, &id).await;
    assert_eq!(
        body["resolution"]["result"],
        json!({"action": "accept", "content": {"answer": "Deny nothing: teal"}})
    );
    // The message shows the question, the answer, who gave it and when.
    let shown = done["text"].as_str().unwrap();
    assert!(shown.starts_with("❓ <b>Question</b>"), "{shown}");
    assert!(
        shown.contains("<b>What is your favorite color?</b>\n\n→ <b>Deny nothing: teal</b>\n\n✅ <b>Answered by Alice via telegram</b>\n🕑 "),
        "{shown}"
    );
    assert!(!shown.contains("Reply to this message"), "{shown}");
    assert_eq!(done["reply_markup"]["inline_keyboard"], json!([]));

    // "✏️ Answer…" asks the tapper for a reply, which answers at once as well.
    let id = create(
        &app,
        json!({"kind": "prompt", "message": "Release name?", "multiline": true}),
    )
    .await;
    let p = prompt(&tg, PRIVATE, "Release name?").await;
    tap_on(&app, &tg, BOB, &p, &p.button("✏️ Answer…")).await;
    let ask = reply_request(&tg, 1).await;
    assert!(
        ask.params["text"]
            .as_str()
            .unwrap()
            .ends_with(", reply to this message with your answer to: <b>Release name?</b>"),
        "{}",
        ask.params["text"]
    );
    deliver(
        &app,
        &text(tg.next_update_id(), BOB, PRIVATE, "Nimbus", ask.message_id),
    )
    .await;
    edited(&tg, PRIVATE, p.message_id, "→ <b>Nimbus</b>").await;
    assert_eq!(
        status(&app, &id).await["resolution"]["result"]["content"],
        json!({"answer": "Nimbus"})
    );
    // Nothing ever offered a Submit.
    for c in tg
        .calls("sendMessage")
        .iter()
        .chain(tg.calls("editMessageText").iter())
    {
        assert!(!c.params.to_string().contains("Submit"), "{}", c.params);
    }
    app.stop().await;
}
