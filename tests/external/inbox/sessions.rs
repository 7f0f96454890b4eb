//! The inbox's Sessions section: the agent sessions a run's hooks told, with their states,
//! what a finished one said, a route filter, and a message sent from a card, at desktop and
//! phone widths.

use super::*;

/// Posts a Claude Code hook input of `event` for session `id` in `cwd`.
async fn hook(app: &TestApp, event: &str, id: &str, cwd: &str, more: Value) {
    let mut body = json!({"hook_event_name": event, "session_id": id, "cwd": cwd});
    for (k, v) in more.as_object().cloned().unwrap_or_default() {
        body[k] = v;
    }
    let (status, out) = app.post("/v1/hooks/claude-code", &body).await;
    assert_eq!(status, StatusCode::OK, "{out}");
}

fn session_card(id: &str) -> String {
    format!("document.querySelector('#sessions [data-session=\"claude-code/{id}\"]')")
}

pub(super) async fn the_sessions_show_their_state_and_take_a_message() {
    let bin = chromium().expect("Chromium (checked before the test)");
    let app = spawn_with(|s| {
        s.routes = vec![imrelay::config::teams::RouteSettings {
            name: "shop".into(),
            cwd: vec!["/srv/shop".into()],
            ..Default::default()
        }];
    })
    .await;
    hook(
        &app,
        "UserPromptSubmit",
        "s-work",
        "/srv/shop",
        json!({"prompt": "go"}),
    )
    .await;
    hook(
        &app,
        "UserPromptSubmit",
        "s-done",
        "/tmp/other",
        json!({"prompt": "go"}),
    )
    .await;
    let said = "All <b>42</b> tests pass.";
    hook(
        &app,
        "Stop",
        "s-done",
        "/tmp/other",
        json!({"last_assistant_message": said}),
    )
    .await;

    let mut b = Browser::launch(&bin).await;
    b.call("Page.navigate", json!({"url": app.url("/")})).await;
    give_name(&mut b, "Dana").await;
    for (width, mobile) in [(1280, false), (390, true)] {
        b.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": 800, "deviceScaleFactor": 1, "mobile": mobile}),
        )
        .await;
        let done = session_card("s-done");
        b.until("the finished session", &format!("{done} !== null"))
            .await;
        assert_eq!(
            b.eval(&format!("{done}.querySelector('.kind').textContent"))
                .await,
            json!("finished")
        );
        // The agent's words as text, never as markup.
        assert_eq!(
            b.eval(&format!("{done}.querySelector('.said').textContent"))
                .await,
            json!(said)
        );
        assert_eq!(
            b.eval(&format!("{done}.querySelector('.said b')")).await,
            Value::Null
        );
        let work = session_card("s-work");
        assert_eq!(
            b.eval(&format!("{work}.querySelector('.kind').textContent"))
                .await,
            json!("working")
        );
        // Nothing spills sideways on a phone.
        assert_eq!(
            b.eval("document.documentElement.scrollWidth <= window.innerWidth")
                .await,
            json!(true),
            "at {width} px"
        );
    }
    b.call("Emulation.clearDeviceMetricsOverride", json!({}))
        .await;
    b.screenshots("sessions").await;

    // Two routes: the filter shows one route's sessions.
    b.until(
        "the route filter",
        "!document.getElementById('s-route').hidden",
    )
    .await;
    b.eval(
        "(() => { const s = document.getElementById('s-route'); s.value = 'shop'; \
          s.dispatchEvent(new Event('change')); })()",
    )
    .await;
    b.until(
        "only the shop's session",
        &format!(
            "{} === null && {} !== null",
            session_card("s-done"),
            session_card("s-work")
        ),
    )
    .await;

    // A message from the card reaches the session's queue, under the name given.
    let work = session_card("s-work");
    b.eval(&format!(
        "(() => {{ const c = {work}; c.querySelector('input.reason').value = 'Use the staging database'; \
          c.querySelector('.actions button').click(); }})()"
    ))
    .await;
    let (message, by) = eventually("the message is queued", || async {
        let (_, s) = app.get("/v1/sessions/claude-code/s-work").await;
        let m = s["messages"].as_array()?.first()?.clone();
        Some((m["text"].clone(), m["by"].clone()))
    })
    .await;
    assert_eq!(message, json!("Use the staging database"));
    assert_eq!(by, json!("Dana"));
    b.until(
        "the queued message on the card",
        &format!("{work}?.textContent.includes('Use the staging database (queued)')"),
    )
    .await;
    app.stop().await;
}
