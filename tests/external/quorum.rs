//! The two-person rule on PostgreSQL: votes given on two replicas at once are both counted
//! and only one decides; a person voting on both replicas at once counts once; the other
//! replica's inbox hears of each vote; a replica started after a vote goes on counting.

use std::sync::Arc;

use imrelay::config::Settings;
use imrelay::config::teams::{PersonSettings, RouteSettings};
use imrelay::interaction::{Answer, InteractionId, Outcome, RegistryError, Responder, Via};
use libtest_mimic::Trial;
use serde_json::json;

use crate::postgres::{in_schema, server};
use crate::replicas::{holds, replica_with};
use crate::support::*;
use crate::trial;

pub(crate) fn trials() -> Vec<Trial> {
    vec![
        trial(
            "quorum::votes_on_two_replicas_at_once_are_counted_and_decide_once",
            server,
            || in_schema(votes_on_two_replicas_at_once_are_counted_and_decide_once),
        ),
        trial(
            "quorum::a_replica_started_between_the_votes_goes_on_counting",
            server,
            || in_schema(a_replica_started_between_the_votes_goes_on_counting),
        ),
    ]
}

/// Alice and Bob; the deploy route needs three people.
fn teams(s: &mut Settings) {
    s.people = vec![
        PersonSettings {
            ids: imrelay::config::teams::PerChannel::from([
                ("telegram".into(), imrelay::config::teams::written(vec![1])),
                (
                    "feishu".into(),
                    imrelay::config::teams::written(vec!["ou_alice"]),
                ),
            ]),
            name: "alice".into(),
            ..Default::default()
        },
        PersonSettings {
            ids: imrelay::config::teams::PerChannel::from([(
                "telegram".into(),
                imrelay::config::teams::written(vec![2]),
            )]),
            name: "bob".into(),
            ..Default::default()
        },
    ];
    s.routes = vec![RouteSettings {
        name: "deploy".into(),
        cwd: vec!["/srv/deploy/**".into()],
        quorum: Some(3),
        ..Default::default()
    }];
}

fn on(channel: &str, id: &str) -> Responder {
    Responder::new(id, Via::new(channel)).with_identity(channel, id)
}

async fn create(app: &TestApp, id: &str) -> InteractionId {
    let (s, body) = app
        .post(
            "/v1/interactions",
            &json!({"id": id, "tool_name": "Bash", "input": {"command": "make deploy"},
                    "cwd": "/srv/deploy"}),
        )
        .await;
    assert_eq!(s, 201, "{body}");
    InteractionId::parse(id).unwrap()
}

async fn votes_on_two_replicas_at_once_are_counted_and_decide_once(schema: String) {
    let a = Arc::new(replica_with(&schema, teams).await);
    let b = replica_with(&schema, teams).await;
    let mut events_b = Sse::connect(&b, None).await;
    for round in 0..8 {
        let id = create(&a, &format!("pg-q-{round}")).await;
        holds(&b, 1).await;
        // The agent waits on A.
        let waiting = {
            let a = a.clone();
            let id = id.clone();
            tokio::spawn(async move {
                a.registry
                    .wait(&id, std::time::Duration::from_secs(60))
                    .await
            })
        };
        // Alice on A and Bob on B at once: both counted, neither decides (three needed).
        let (x, y) = tokio::join!(
            a.registry
                .respond(&id, Answer::allow(), on("telegram", "1")),
            b.registry
                .respond(&id, Answer::allow(), on("telegram", "2")),
        );
        assert!(matches!(x, Err(RegistryError::Voted(_))), "{x:?}");
        assert!(matches!(y, Err(RegistryError::Voted(_))), "{y:?}");
        // Alice again, on both replicas at once (on another channel on B): the same person,
        // refused on both.
        let (again_b, again_a) = tokio::join!(
            b.registry
                .respond(&id, Answer::allow(), on("feishu", "ou_alice")),
            a.registry
                .respond(&id, Answer::deny(None), on("telegram", "1")),
        );
        assert!(
            matches!(again_b, Err(RegistryError::AlreadyVoted(..))),
            "{again_b:?}"
        );
        assert!(
            matches!(again_a, Err(RegistryError::AlreadyVoted(..))),
            "{again_a:?}"
        );
        // Carol, on B, decides.
        let carol = b
            .registry
            .respond(&id, Answer::allow(), on("feishu", "ou_carol"))
            .await;
        let decided = carol.unwrap();
        assert_eq!(decided.votes().len(), 3);
        let waited = waiting.await.unwrap().unwrap().expect("resolved");
        assert_eq!(
            waited.resolution.as_ref().unwrap().outcome,
            Outcome::Allowed
        );
        holds(&b, 0).await;
    }
    // B's inbox heard of the votes given on A.
    let mut voted = 0;
    while voted < 16 {
        let e = events_b.next().await;
        if e.event == "interaction.voted" {
            voted += 1;
        }
    }
    // Each vote is in the audit trail once: 3 voted and 1 answered per round.
    let (_, audit) = b.get("/v1/audit?limit=1000").await;
    let n = |action: &str| {
        audit["entries"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["action"] == action)
            .count()
    };
    assert_eq!((n("voted"), n("answered")), (24, 8), "{audit}");
    Arc::try_unwrap(a).ok().unwrap().stop().await;
    b.stop().await;
}

async fn a_replica_started_between_the_votes_goes_on_counting(schema: String) {
    let a = replica_with(&schema, teams).await;
    let id = create(&a, "pg-q-restart").await;
    let first = a
        .registry
        .respond(&id, Answer::allow(), on("telegram", "1"))
        .await;
    assert!(matches!(first, Err(RegistryError::Voted(_))), "{first:?}");
    a.stop().await;

    let c = replica_with(&schema, teams).await;
    let again = c
        .registry
        .respond(&id, Answer::allow(), on("feishu", "ou_alice"))
        .await;
    assert!(
        matches!(again, Err(RegistryError::AlreadyVoted(..))),
        "{again:?}"
    );
    let second = c
        .registry
        .respond(&id, Answer::allow(), on("telegram", "2"))
        .await;
    let Err(RegistryError::Voted(i)) = second else {
        panic!("{second:?}")
    };
    assert_eq!(i.votes().len(), 2);
    // A deny denies at once.
    let denied = c
        .registry
        .respond(&id, Answer::deny(None), on("telegram", "3"))
        .await
        .unwrap();
    assert_eq!(denied.resolution.as_ref().unwrap().outcome, Outcome::Denied);
    assert_eq!(denied.votes().len(), 3);
    let stored = c.registry.get(&id).await.unwrap().unwrap();
    assert_eq!(stored.votes().len(), 3);
    c.stop().await;
}
