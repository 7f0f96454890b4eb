//! The two-person rule in the inbox: a pending card shows the votes so far, from its own
//! answers and from answers anywhere else; the page's own vote is said on the card, and its
//! second vote refused there, in a person's words.

use imrelay::config::teams::RouteSettings;
use imrelay::interaction::{Answer, InteractionId, Responder, Via};

use super::*;

pub(super) async fn a_card_shows_the_votes_so_far_from_everywhere() {
    let bin = chromium().expect("Chromium (checked before the test)");
    let app = spawn_with(|s| {
        s.routes = vec![RouteSettings {
            name: "deploy".into(),
            cwd: vec!["/srv/deploy/**".into()],
            quorum: Some(3),
            ..Default::default()
        }];
    })
    .await;
    let (s, body) = app
        .post(
            "/v1/interactions",
            &json!({"id": "inbox-q", "tool_name": "Bash", "input": {"command": "make deploy"},
                    "cwd": "/srv/deploy"}),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
    let mut b = Browser::launch(&bin).await;
    b.call("Page.navigate", json!({"url": app.url("/")})).await;
    give_name(&mut b, "Dana").await;
    let pending = card("pending", "inbox-q");
    b.until(
        "the card's votes",
        &format!(
            "{pending}?.querySelector('.votes')?.textContent === 'Needs 3 people · votes: 0 of 3'"
        ),
    )
    .await;
    // Without a labelled token the page is one voter, and the card says so.
    b.until(
        "the note under the votes",
        &format!(
            "{pending}?.querySelector('.votes-note')?.textContent.startsWith('Answers from this page count as one person (the administrator)') === true"
        ),
    )
    .await;
    // Each approves it as it is: no editor, no "allow similar".
    assert_eq!(
        b.eval(&format!(
            "[...{pending}.querySelectorAll('button')].filter(x => x.offsetParent !== null).map(x => x.textContent)"
        ))
        .await,
        json!(["Approve", "Deny"])
    );
    let approve = format!(
        "[...{pending}.querySelectorAll('button')].find(x => x.textContent === 'Approve').click()"
    );
    b.eval(&approve).await;
    b.until(
        "the vote to be said",
        &format!("{pending}?.querySelector('.notice')?.textContent === 'Vote recorded: 1 of 3: administrator via desktop'"),
    )
    .await;
    // Bob votes on another channel: the card follows.
    let id = InteractionId::parse("inbox-q").unwrap();
    let bob = Responder::new("bob", Via::new("telegram")).with_identity("telegram", "2");
    assert!(
        app.registry
            .respond(&id, Answer::allow(), bob)
            .await
            .is_err()
    );
    b.until(
        "the other vote on the card",
        &format!("{pending}?.querySelector('.votes')?.textContent === 'Needs 3 people · votes: 2 of 3: administrator via desktop, bob via telegram'"),
    )
    .await;
    // The page votes again: refused, said on the card, nothing changed.
    b.eval(&approve).await;
    b.until(
        "the second vote refused",
        &format!("{pending}?.querySelector('.notice.error')?.textContent.includes('each person counts once')"),
    )
    .await;
    // Said as a person would, not as the server's record has it.
    let said = b
        .eval(&format!(
            "{pending}.querySelector('.notice.error').textContent"
        ))
        .await;
    let said = said.as_str().unwrap();
    assert!(
        said.starts_with("You already voted on this (allowed by administrator via desktop at "),
        "{said}"
    );
    assert!(!said.contains("interaction inbox-q"), "{said}");
    b.screenshots("inbox-quorum").await;
    // Carol decides: the card moves to the recent list with every vote.
    let carol = Responder::new("carol", Via::new("feishu")).with_identity("feishu", "ou_c");
    let done = app
        .registry
        .respond(&id, Answer::allow(), carol)
        .await
        .unwrap();
    assert_eq!(done.votes().len(), 3);
    let recent = card("recent", "inbox-q");
    b.until(
        "the resolved card with its votes",
        &format!("{recent}?.querySelector('.votes')?.textContent.includes('3 of 3: administrator via desktop, bob via telegram, carol via feishu')"),
    )
    .await;
    app.stop().await;
}
