//! The inbox opened with a labelled operator token: the token form says where a token comes
//! from; the inbox says whose name its answers go under (the token's person, from the server)
//! and never asks for one; the answer is recorded under that name.

use imrelay::config::OperatorToken;
use imrelay::config::teams::PersonSettings;

use super::*;

const TOKEN: &str = "alice-token-0123456789abcdef";

pub(super) async fn a_labelled_token_answers_as_its_person_without_asking_a_name() {
    let bin = chromium().expect("Chromium (checked before the test)");
    let mut app = spawn_with(|s| {
        s.auth.operator_tokens = vec![OperatorToken::labelled(TOKEN, "alice-laptop")];
        s.people = vec![PersonSettings {
            name: "alice".into(),
            operator: vec!["alice-laptop".into()],
            ..Default::default()
        }];
    })
    .await;
    app.create_bash("inbox-me", "make release").await;
    app.token = Some(TOKEN.into());

    let mut b = Browser::launch(&bin).await;
    b.call("Page.navigate", json!({"url": app.url("/")})).await;
    b.until(
        "the token form",
        "document.getElementById('login')?.hidden === false",
    )
    .await;
    // It says where a token comes from.
    let said = b.eval("document.getElementById('login').textContent").await;
    assert!(
        said.as_str()
            .unwrap()
            .contains("one of those in auth.operator_tokens"),
        "{said}"
    );
    b.screenshots("inbox-login").await;
    b.eval(&format!(
        "document.getElementById('token').value = {}; \
         document.querySelector('#login-form button[type=submit]').click()",
        json!(TOKEN)
    ))
    .await;
    let pending = card("pending", "inbox-me");
    b.until("the pending card", &format!("{pending} !== null"))
        .await;
    // The header says who answers, from the token; there is no name to set or change.
    b.until(
        "the token's person in the header",
        "document.getElementById('who-name').textContent === 'alice'",
    )
    .await;
    assert_eq!(
        b.eval(
            "[document.getElementById('who-named').hidden, document.getElementById('who-change').hidden, \
              document.getElementById('who-token').textContent]"
        )
        .await,
        json!([false, true, "(token alice-laptop)"])
    );
    b.screenshots("inbox-labelled-token").await;
    // Answering asks nothing: the answer goes at once, under the token's person.
    b.eval(COUNT_ANSWERS).await;
    b.eval(&format!(
        "{pending}.querySelector('button.primary').click()"
    ))
    .await;
    let recent = card("recent", "inbox-me");
    b.until("the answered card", &format!("{recent} !== null"))
        .await;
    assert_eq!(visible(&mut b).await, "main");
    let sent = b.eval("window.__sent").await;
    let sent: Value = serde_json::from_str(sent[0].as_str().unwrap()).unwrap();
    assert!(sent.get("by").is_none(), "no name is sent: {sent}");
    let (_, done) = app.get("/v1/interactions/inbox-me").await;
    assert_eq!(done["resolution"]["by"], "alice", "{done}");
    assert_eq!(done["resolution"]["via"], "desktop", "{done}");
    app.stop().await;
}
