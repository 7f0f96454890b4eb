//! The inbox as a person first meets it, on a desktop and on a phone: an approval, a question,
//! a form with untitled fields and a date, and a two-person approval with one vote, all
//! pending. Each card says what it asks in words (no tool names for a question), declines
//! the same way, labels an untitled field by its name in words, takes a date as the API
//! speaks it, and puts the votes of a two-person approval first; the filter bar stays small
//! on a phone, and empty lists say what they are or keep out of the way.

use imrelay::config::teams::RouteSettings;
use imrelay::interaction::{Answer, InteractionId, Responder, Via};

use super::*;

/// The fields of the form: two with titles, three without, one of them a date.
fn untitled_schema() -> Value {
    json!({
        "type": "object",
        "required": ["people", "start"],
        "properties": {
            "people": {"type": "integer", "title": "How many people", "minimum": 2, "maximum": 40},
            "start": {"type": "string", "format": "date"},
            "extras": {"type": "array", "items": {"enum": ["dinner", "boat"]}},
            "room_size": {"type": "string", "enum": ["small", "large"]},
            "notes": {"type": "string", "title": "Notes"}
        }
    })
}

pub(super) async fn what_a_person_meets_first_is_said_in_words() {
    let bin = chromium().expect("Chromium (checked before the test)");
    let app = spawn_with(|s| {
        s.routes = vec![RouteSettings {
            name: "deploy".into(),
            cwd: vec!["/srv/deploy/**".into()],
            quorum: Some(2),
            ..Default::default()
        }];
    })
    .await;
    for body in [
        json!({"id": "fl-approval", "tool_name": "Bash", "agent": "claude-code", "session": "s-1",
               "cwd": "/home/dev/shop", "input": {"command": "cargo test --release"}}),
        json!({"id": "fl-question", "tool_name": "AskUserQuestion", "agent": "claude-code",
               "session": "s-1", "cwd": "/home/dev/shop", "input": {"questions": [
                 {"question": "Which database?", "header": "DB",
                  "options": [{"label": "Postgres"}, {"label": "SQLite"}]}]}}),
        json!({"id": "fl-form", "kind": "form", "agent": "planner",
               "message": "Book the team offsite.", "schema": untitled_schema()}),
        json!({"id": "fl-quorum", "tool_name": "Bash", "agent": "claude-code",
               "cwd": "/srv/deploy", "input": {"command": "make deploy"}}),
    ] {
        let (status, created) = app.post("/v1/interactions", &body).await;
        assert_eq!(status, StatusCode::CREATED, "{created}");
    }
    let bob = Responder::new("bob", Via::new("telegram")).with_identity("telegram", "2");
    let id = InteractionId::parse("fl-quorum").unwrap();
    assert!(
        app.registry
            .respond(&id, Answer::allow(), bob)
            .await
            .is_err(),
        "one vote of two decides nothing"
    );

    let mut b = Browser::launch(&bin).await;
    b.call("Page.navigate", json!({"url": app.url("/")})).await;
    give_name(&mut b, "Dana").await;
    b.until(
        "four pending cards, the votes on the last",
        "document.querySelectorAll('#pending .card').length === 4 && \
         !!document.querySelector('#pending [data-id=\"fl-quorum\"] .votes')",
    )
    .await;
    b.screenshots("inbox-first-look").await;

    // A question is headed "question", never by its tool's name.
    let question = card("pending", "fl-question");
    assert_eq!(
        b.eval(&format!(
            "[{question}.querySelector('.kind').textContent, {question}.querySelector('.tool').textContent, \
              {question}.textContent.includes('AskUserQuestion'), \
              {question}.querySelector('.pick').getAttribute('aria-label')]"
        ))
        .await,
        json!(["question", "", false, "Select question fl-question"])
    );
    // Decline is one button, alike on a question and a form: red, with its reason box.
    let decline = |c: &str| {
        format!(
            "(() => {{ const d = [...{c}.querySelectorAll('.actions button')].find(x => x.textContent === 'Decline'); \
               const r = d.nextElementSibling; \
               return [d.className, r && r.classList.contains('reason'), r && r.getAttribute('aria-label')]; }})()"
        )
    };
    let form = card("pending", "fl-form");
    let alike = json!([
        "danger",
        true,
        "Reason for declining (optional, shown to the agent)"
    ]);
    assert_eq!(b.eval(&decline(&question)).await, alike);
    assert_eq!(b.eval(&decline(&form)).await, alike);

    // Untitled fields are labelled by their names in words; a date is typed as the API takes it.
    assert_eq!(
        b.eval(&format!(
            "[...{form}.querySelectorAll('.field-label')].map(l => l.textContent)"
        ))
        .await,
        json!(["How many people*", "Start*", "Extras", "Room size", "Notes"])
    );
    let start = field(&form, "Start");
    assert_eq!(
        b.eval(&format!(
            "(() => {{ const i = {start}.querySelector('input'); \
               return [i.type, i.placeholder, {start}.querySelector('.field-desc').textContent]; }})()"
        ))
        .await,
        json!(["text", "YYYY-MM-DD", "A date, like 2026-11-25"])
    );

    // The votes are the line to read first on a two-person approval: in the text's own
    // colour and size, bold, not small grey print.
    let quorum = card("pending", "fl-quorum");
    assert_eq!(
        b.eval(&format!(
            "(() => {{ const v = {quorum}.querySelector('.votes'); const s = getComputedStyle(v); \
               const body = getComputedStyle(document.body); \
               return [v.textContent, Number(s.fontWeight) >= 600, s.color === body.color, \
                 s.fontSize === body.fontSize]; }})()"
        ))
        .await,
        json!([
            "Needs 2 people · votes: 1 of 2: bob via telegram",
            true,
            true,
            true
        ])
    );

    // No grants: said in words a person can act on. Nothing answered yet: no Recent heading.
    assert_eq!(
        b.eval(
            "[document.getElementById('grants-empty').textContent, \
              document.getElementById('recent-section').offsetParent === null]"
        )
        .await,
        json!([
            "None. Allow similar… on an approval makes one: calls its rule matches are then allowed without asking you.",
            true
        ])
    );

    // On a phone the filter bar takes at most two rows before the first card (it took five);
    // the answers for ticked cards show once a card is ticked.
    b.call(
        "Emulation.setDeviceMetricsOverride",
        json!({"width": 390, "height": 800, "deviceScaleFactor": 1, "mobile": true}),
    )
    .await;
    let bar = "document.getElementById('bulk').getBoundingClientRect().height";
    let height = b.eval(bar).await.as_f64().unwrap();
    assert!(height <= 100.0, "the filter bar is {height} px high");
    assert_eq!(
        b.eval("document.getElementById('bulk-actions').offsetParent === null")
            .await,
        true
    );
    b.eval(&format!(
        "const p = {question}.querySelector('.pick'); p.checked = true; p.dispatchEvent(new Event('change'))"
    ))
    .await;
    assert_eq!(
        b.eval("document.getElementById('bulk-deny').offsetParent !== null")
            .await,
        true
    );
    b.call("Emulation.clearDeviceMetricsOverride", json!({}))
        .await;

    // A date in this browser's own order is refused next to its field; ISO is taken.
    b.eval(COUNT_ANSWERS).await;
    for (name, value) in [("How many people", "12"), ("Start", "12/01/2026")] {
        assert_eq!(b.eval(&fill(&form, "fl-form", name, value)).await, true);
    }
    let submit = format!(
        "[...{form}.querySelectorAll('button')].find(x => x.textContent === 'Submit').click()"
    );
    b.eval(&submit).await;
    assert_eq!(
        b.eval(&format!(
            "[window.__sent.length, {start}.querySelector('.field-error').textContent]"
        ))
        .await,
        json!([0, "Must be a date, like 2026-11-25."])
    );
    b.eval(&fill(&form, "fl-form", "Start", "2026-12-01")).await;
    b.eval(&submit).await;
    let (status, out) = app.get("/v1/interactions/fl-form/wait").await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(out["result"]["content"]["start"], "2026-12-01", "{out}");

    // The question declined with a reason, as a form is: said as declined, with what it asked.
    b.eval(&format!(
        "(() => {{ const c = {question}; c.querySelector('.reason').value = 'Ask me after lunch'; \
           [...c.querySelectorAll('button')].find(x => x.textContent === 'Decline').click(); }})()"
    ))
    .await;
    let (_, q) = app.get("/v1/interactions/fl-question/wait").await;
    assert_eq!(q["resolution"]["outcome"], "denied", "{q}");
    assert_eq!(q["result"]["message"], "Ask me after lunch", "{q}");
    let recent = card("recent", "fl-question");
    b.until("the declined question in Recent", &format!("!!{recent}"))
        .await;
    assert_eq!(
        b.eval(&format!(
            "[{recent}.querySelector('.outcome').textContent.startsWith('Declined by Dana via desktop'), \
              [...{recent}.querySelectorAll('.answer')].map(p => p.textContent), \
              {recent}.textContent.includes('Ask me after lunch'), \
              document.getElementById('recent-section').offsetParent !== null]"
        ))
        .await,
        json!([true, ["Which database?"], true, true])
    );
    b.screenshots("inbox-first-look-answered").await;
    drop(b);
    app.stop().await;
}
