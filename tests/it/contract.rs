//! The store contract: behaviour every backend keeps, as one async function run against
//! each (the memory and SQLite stores in the `it` tests, PostgreSQL in the `external` ones).

use std::sync::Arc;
use std::time::Duration;

use imrelay::audit::Action;
use imrelay::interaction::{Interaction, InteractionId, NewInteraction, Registry, RegistryConfig};
use imrelay::store::{
    AuditQuery, AuditRecord, ChannelMessage, ClaimQuota, CreateOutcome, Effects, EscalateOutcome,
    JobUpdate, ListQuery, OutboxJob, Page, ResolveOutcome, StatusFilter, Store,
};
use jiff::Timestamp;
use serde_json::json;

pub(crate) fn job(key: &str, channel: &str) -> OutboxJob {
    OutboxJob {
        key: key.into(),
        channel: channel.into(),
        kind: "test".into(),
        interaction_id: None,
        payload: json!({"k": key}),
        not_before: Timestamp::now(),
        horizon: Timestamp::now() + jiff::SignedDuration::from_hours(1),
    }
}

pub(crate) async fn created(reg: &Registry, id: &str) -> Arc<Interaction> {
    let input = json!({"command": id}).as_object().cloned().unwrap();
    reg.create(NewInteraction {
        id: Some(id.into()),
        ..NewInteraction::new("Bash", input)
    })
    .await
    .unwrap()
    .interaction
}

/// Behaviour every backend must share.
pub(crate) async fn contract(store: Arc<dyn Store>) {
    let reg = Registry::new(store.clone(), RegistryConfig::default());
    let a = created(&reg, "c-a").await;
    // Insert-if-absent.
    match store.create(a.clone(), Effects::default()).await.unwrap() {
        CreateOutcome::Exists(e) => assert_eq!(e.id, a.id),
        CreateOutcome::Created => panic!("created twice"),
    }
    assert_eq!(store.get(&a.id).await.unwrap().unwrap().input, a.input);

    // Resolve-if-pending, with its jobs recorded in the same step.
    let resolved = Arc::new(a.resolved(imrelay::interaction::expired(&a, Timestamp::now())));
    let effects = Effects {
        jobs: vec![job("j-resolve", "test-channel")],
        audit: vec![],
    };
    assert!(matches!(
        store
            .resolve(resolved.clone(), effects.clone())
            .await
            .unwrap(),
        ResolveOutcome::Resolved
    ));
    match store.resolve(resolved.clone(), effects).await.unwrap() {
        ResolveOutcome::AlreadyResolved(w) => assert_eq!(w.resolution, resolved.resolution),
        other => panic!("unexpected {other:?}"),
    }
    let ghost = InteractionId::parse("ghost").unwrap();
    let mut g = (*resolved).clone();
    g.id = ghost.clone();
    assert!(matches!(
        store
            .resolve(Arc::new(g), Effects::default())
            .await
            .unwrap(),
        ResolveOutcome::NotFound
    ));

    // Pending listing and pagination.
    for n in 0..5 {
        created(&reg, &format!("c-p{n}")).await;
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let pending = store.pending().await.unwrap();
    assert_eq!(pending.len(), 5);
    assert_eq!(pending[0].id.as_str(), "c-p0", "oldest first");
    let Page { interactions, next } = store
        .list(&ListQuery {
            status: StatusFilter::Pending,
            limit: 3,
            after: None,
            max_bytes: None,
        })
        .await
        .unwrap();
    assert_eq!(interactions.len(), 3);
    assert_eq!(interactions[0].id.as_str(), "c-p4", "newest first");
    let page2 = store
        .list(&ListQuery {
            status: StatusFilter::Pending,
            limit: 3,
            after: next,
            max_bytes: None,
        })
        .await
        .unwrap();
    assert_eq!(page2.interactions.len(), 2);
    assert!(page2.next.is_none());
    // A page bounded in bytes holds at least one interaction and pages on after its last;
    // paging through sees each once, in order.
    let mut after = None;
    let mut by_bytes = Vec::new();
    for _ in 0..10 {
        let page = store
            .list(&ListQuery {
                status: StatusFilter::Pending,
                limit: 3,
                after: after.clone(),
                max_bytes: Some(1),
            })
            .await
            .unwrap();
        assert!(page.interactions.len() <= 3);
        if page.next.is_some() {
            assert!(
                !page.interactions.is_empty(),
                "a page with a next holds one"
            );
        }
        by_bytes.extend(page.interactions.iter().map(|i| i.id.to_string()));
        match page.next {
            Some(n) => after = Some(n),
            None => break,
        }
    }
    assert_eq!(by_bytes, ["c-p4", "c-p3", "c-p2", "c-p1", "c-p0"]);
    let resolved_only = store
        .list(&ListQuery {
            status: StatusFilter::Resolved,
            limit: 10,
            after: None,
            max_bytes: None,
        })
        .await
        .unwrap();
    assert_eq!(resolved_only.interactions.len(), 1);

    // Outbox: idempotent by key, leased claims, retry scheduling, completion.
    store
        .enqueue(vec![job("j1", "test-channel"), job("j1", "test-channel")])
        .await
        .unwrap();
    let now = imrelay::interaction::now();
    let all = ClaimQuota::any(10);
    let claimed = store
        .claim_jobs(now, &all, Duration::from_secs(60))
        .await
        .unwrap();
    let keys: Vec<&str> = claimed.iter().map(|c| c.job.key.as_str()).collect();
    assert_eq!(keys.len(), 2, "{keys:?}");
    assert!(keys.contains(&"j1") && keys.contains(&"j-resolve"));
    assert!(
        store
            .claim_jobs(now, &all, Duration::from_secs(60))
            .await
            .unwrap()
            .is_empty(),
        "leased"
    );
    let backlog = store.job_backlog().await.unwrap();
    assert_eq!(backlog, vec![("test-channel".to_string(), 2)]);
    let j1 = claimed.iter().find(|c| c.job.key == "j1").unwrap();
    let jr = claimed.iter().find(|c| c.job.key == "j-resolve").unwrap();
    let later = now + jiff::SignedDuration::from_secs(30);
    assert!(
        store
            .finish_job(
                j1,
                JobUpdate::Retry {
                    at: later,
                    error: "boom".into(),
                },
                vec![],
            )
            .await
            .unwrap()
    );
    assert!(store.finish_job(jr, JobUpdate::Done, vec![]).await.unwrap());
    assert!(
        !store.finish_job(jr, JobUpdate::Done, vec![]).await.unwrap(),
        "a finished job takes no second result"
    );
    assert_eq!(store.next_job_at(&all).await.unwrap(), Some(later));
    let again = store
        .claim_jobs(later, &all, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].attempts, 1);
    // Fencing: the lease runs out and another worker claims the job; the first worker's late
    // result is refused, its audit entry not written, and the new claimant's result stands.
    let after_lease = later + jiff::SignedDuration::from_secs(61);
    let stolen = store
        .claim_jobs(after_lease, &all, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(stolen.len(), 1);
    assert_ne!(stolen[0].lease, again[0].lease);
    let entries_before = store
        .audit(&AuditQuery {
            after_seq: 0,
            since: None,
            limit: 1000,
        })
        .await
        .unwrap()
        .len();
    let failure = AuditRecord {
        at: Timestamp::now(),
        action: Action::DeliveryFailed,
        interaction_id: None,
        actor: Some("system".into()),
        channel: "test-channel".into(),
        outcome: "failed".into(),
        input_hash: None,
        detail: Some("gone".into()),
    };
    assert!(
        !store
            .finish_job(
                &again[0],
                JobUpdate::Failed {
                    error: "gone".into(),
                },
                vec![failure.clone()],
            )
            .await
            .unwrap(),
        "a stale claim records nothing"
    );
    assert!(
        store
            .finish_job(
                &stolen[0],
                JobUpdate::Failed {
                    error: "gone".into(),
                },
                vec![failure],
            )
            .await
            .unwrap()
    );
    let entries = store
        .audit(&AuditQuery {
            after_seq: 0,
            since: None,
            limit: 1000,
        })
        .await
        .unwrap();
    assert_eq!(
        entries.len(),
        entries_before + 1,
        "one audit entry, from the current claim"
    );
    let last = entries.last().unwrap();
    assert_eq!(last.record.action, Action::DeliveryFailed);
    let head = store.audit_head().await.unwrap().unwrap();
    assert_eq!(
        (head.seq, head.hash.as_str()),
        (last.seq, last.hash.as_str())
    );
    assert!(store.next_job_at(&all).await.unwrap().is_none());

    // Claims per channel: a channel without free slots is neither claimed nor waited for,
    // and never takes the places of another.
    let mut busy: Vec<OutboxJob> = (0..5).map(|n| job(&format!("busy-{n}"), "busy")).collect();
    busy.push(job("calm-0", "calm"));
    busy.push(job("stray-0", "stray"));
    store.enqueue(busy).await.unwrap();
    let now = imrelay::interaction::now();
    let only = |channels: &[(&str, usize)], others: usize| ClaimQuota {
        channels: channels.iter().map(|(c, n)| (c.to_string(), *n)).collect(),
        others,
    };
    assert!(
        store
            .next_job_at(&only(&[("busy", 0), ("calm", 0)], 0))
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        store
            .next_job_at(&only(&[("busy", 0)], 1))
            .await
            .unwrap()
            .is_some()
    );
    let got = store
        .claim_jobs(
            now,
            &only(&[("busy", 2), ("calm", 1)], 0),
            Duration::from_secs(60),
        )
        .await
        .unwrap();
    let mut keys: Vec<&str> = got.iter().map(|c| c.job.key.as_str()).collect();
    keys.sort();
    assert_eq!(keys, ["busy-0", "busy-1", "calm-0"]);
    let got = store
        .claim_jobs(
            now,
            &only(&[("busy", 0), ("calm", 1)], 1),
            Duration::from_secs(60),
        )
        .await
        .unwrap();
    let keys: Vec<&str> = got.iter().map(|c| c.job.key.as_str()).collect();
    assert_eq!(
        keys,
        ["stray-0"],
        "a channel not listed gets the others' quota"
    );
    for j in got {
        store.finish_job(&j, JobUpdate::Done, vec![]).await.unwrap();
    }

    // Channel bookkeeping.
    let msg = ChannelMessage {
        channel: "telegram".into(),
        address: "-100123".into(),
        message_ref: "42".into(),
        interaction_id: InteractionId::parse("c-p0").unwrap(),
        state: Some(json!({"toggled": [1]})),
        created_at: Timestamp::now(),
    };
    store.record_message(msg.clone()).await.unwrap();
    assert_eq!(
        store
            .message("telegram", "-100123", "42")
            .await
            .unwrap()
            .unwrap()
            .state,
        msg.state
    );
    assert!(
        store
            .set_message_state("telegram", "-100123", "42", Some(json!({"toggled": []})))
            .await
            .unwrap()
    );
    assert!(
        !store
            .set_message_state("telegram", "x", "y", None)
            .await
            .unwrap()
    );
    let shown = store
        .messages("telegram", &msg.interaction_id)
        .await
        .unwrap();
    assert_eq!(shown.len(), 1);
    assert_eq!(shown[0].state, Some(json!({"toggled": []})));

    // Secrets are stable; first sightings deduplicate.
    let s1 = store.secret("buttons").await.unwrap();
    assert_eq!(s1.len(), 32);
    assert_eq!(store.secret("buttons").await.unwrap(), s1);
    assert_ne!(store.secret("other").await.unwrap(), s1);
    let exp = Timestamp::now() + jiff::SignedDuration::from_mins(5);
    assert!(store.first_sighting("tg", "update-1", exp).await.unwrap());
    assert!(!store.first_sighting("tg", "update-1", exp).await.unwrap());
    assert!(
        store
            .first_sighting("feishu", "update-1", exp)
            .await
            .unwrap()
    );
    store.forget_sighting("tg", "update-1").await.unwrap();
    assert!(store.first_sighting("tg", "update-1", exp).await.unwrap());

    // A value is swapped only while it is what the writer read: created only if absent,
    // changed or removed only if unchanged since; a writer that lost the race changes nothing.
    assert!(
        store
            .swap_value("list", None, Some("[1]".into()))
            .await
            .unwrap()
    );
    assert!(
        !store
            .swap_value("list", None, Some("[9]".into()))
            .await
            .unwrap()
    );
    assert!(
        !store
            .swap_value("list", Some("[]"), Some("[9]".into()))
            .await
            .unwrap()
    );
    assert_eq!(
        store.get_value("list").await.unwrap().as_deref(),
        Some("[1]")
    );
    assert!(
        store
            .swap_value("list", Some("[1]"), Some("[1,2]".into()))
            .await
            .unwrap()
    );
    assert!(!store.swap_value("list", Some("[1]"), None).await.unwrap());
    assert!(!store.swap_value("list", None, None).await.unwrap());
    assert!(store.swap_value("list", Some("[1,2]"), None).await.unwrap());
    assert_eq!(store.get_value("list").await.unwrap(), None);
    assert!(store.swap_value("list", None, None).await.unwrap());

    // Values are read by prefix, in key order, within the limit; a key that only shares a
    // prefix's start, or sorts right after it, is not one of them.
    for (k, v) in [
        ("dev.b", "2"),
        ("dev.a", "1"),
        ("dev.\u{e9}", "3"),
        ("dev", "x"),
        ("dew.a", "x"),
        ("de", "x"),
    ] {
        store.set_value(k, Some(v.into())).await.unwrap();
    }
    let under = store.values_under("dev.", 10).await.unwrap();
    assert_eq!(
        under,
        [("dev.a", "1"), ("dev.b", "2"), ("dev.\u{e9}", "3")]
            .map(|(k, v)| (k.to_string(), v.to_string()))
    );
    assert_eq!(store.values_under("dev.", 2).await.unwrap().len(), 2);
    assert!(store.values_under("nothing.", 10).await.unwrap().is_empty());

    // Values bound to an interaction live as long as it does; other values are kept.
    let pending = store.pending().await.unwrap()[0].id.to_string();
    let bound = |name: &str| format!("{}{name}", imrelay::store::BOUND_VALUE_PREFIX);
    for (key, value) in [
        (bound("to-a"), a.id.to_string()),
        (bound("to-pending"), pending.clone()),
        (bound("to-nothing"), "never-created".to_string()),
        (bound("not-an-id"), "not an id!".to_string()),
        ("plain".to_string(), a.id.to_string()),
    ] {
        store.set_value(&key, Some(value)).await.unwrap();
    }

    // Pruning removes resolved interactions past retention, with their messages.
    let pruned = store
        .prune(Timestamp::now() + jiff::SignedDuration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(pruned, 1);
    assert!(store.get(&a.id).await.unwrap().is_none());
    assert_eq!(store.pending().await.unwrap().len(), 5);
    for gone in ["to-a", "to-nothing", "not-an-id"] {
        assert_eq!(store.get_value(&bound(gone)).await.unwrap(), None, "{gone}");
    }
    assert_eq!(
        store.get_value(&bound("to-pending")).await.unwrap(),
        Some(pending)
    );
    assert_eq!(
        store.get_value("plain").await.unwrap(),
        Some(a.id.to_string())
    );
    escalation(&reg, &store).await;
    sessions(vec![store.clone()]).await;
}

fn session_at(id: &str, second: i64) -> imrelay::interaction::sessions::Session {
    use imrelay::interaction::sessions::{Session, SessionEvent, SessionUpdate};
    Session::apply(
        None,
        &SessionUpdate {
            agent: "claude-code".into(),
            id: id.into(),
            cwd: Some("/w".into()),
            route: "default".into(),
            owner: None,
            delivery: Default::default(),
            event: SessionEvent::Started,
            at: Timestamp::from_second(second).unwrap(),
        },
    )
}

/// Sessions on `stores` (one store, or replicas sharing one): changes to one session never
/// interleave, whichever replica makes them; the bound and the retention hold.
pub(crate) async fn sessions(stores: Vec<Arc<dyn Store>>) {
    use imrelay::interaction::sessions::SessionMessage;
    let first = stores[0].clone();
    // 20 changes at once, spread over the replicas, each adding a message: none is lost.
    let mut tasks = Vec::new();
    for n in 0..20 {
        let store = stores[n % stores.len()].clone();
        tasks.push(tokio::spawn(async move {
            let change = Box::new(move |s: Option<_>| {
                let mut s = s.unwrap_or_else(|| session_at("s-race", 1000));
                s.messages.push(SessionMessage {
                    id: format!("m{n}"),
                    text: format!("message {n}"),
                    by: "alice".into(),
                    via: "api".into(),
                    at: Timestamp::from_second(1000).unwrap(),
                    delivered_at: None,
                    delivered_with: None,
                });
                Some(s)
            });
            store
                .change_session("claude-code", "s-race", change, vec![], 100)
                .await
                .unwrap()
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    for store in &stores {
        let s = store
            .session("claude-code", "s-race")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(s.messages.len(), 20, "{s:?}");
    }
    // A change that keeps nothing changes nothing.
    let none = first
        .change_session("claude-code", "s-none", Box::new(|_| None), vec![], 100)
        .await
        .unwrap();
    assert!(none.is_none());
    assert!(
        first
            .session("claude-code", "s-none")
            .await
            .unwrap()
            .is_none()
    );
    // The bound: the least recently active go first.
    for (n, id) in ["s-1", "s-2", "s-3", "s-4"].iter().enumerate() {
        let s = session_at(id, 2000 + n as i64);
        let store = stores[n % stores.len()].clone();
        store
            .change_session("claude-code", id, Box::new(move |_| Some(s)), vec![], 3)
            .await
            .unwrap();
    }
    let kept: Vec<String> = first
        .sessions(10)
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(kept, ["s-4", "s-3", "s-2"]);
    // The retention: pruned with the rest.
    first
        .prune(Timestamp::from_second(2001).unwrap())
        .await
        .unwrap();
    let kept: Vec<String> = first
        .sessions(10)
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(kept, ["s-4", "s-3", "s-2"]);
    first
        .prune(Timestamp::from_second(2002).unwrap())
        .await
        .unwrap();
    assert_eq!(first.sessions(10).await.unwrap().len(), 2);
}

/// Escalate-if-pending-and-not-yet: the mark and its effects once, and the mark kept by a
/// resolution made from a copy without it.
async fn escalation(reg: &Registry, store: &Arc<dyn Store>) {
    let backlog = |store: Arc<dyn Store>| async move {
        store
            .job_backlog()
            .await
            .unwrap()
            .into_iter()
            .find(|(c, _)| c == "esc-channel")
            .map_or(0, |(_, n)| n)
    };
    let i = created(reg, "c-esc").await;
    let mut marked = (*i).clone();
    marked.set_escalated_at(Some(Timestamp::now()));
    let marked = Arc::new(marked);
    let effects = Effects {
        jobs: vec![job("j-esc", "esc-channel")],
        audit: vec![],
    };
    assert!(matches!(
        store
            .escalate(marked.clone(), effects.clone())
            .await
            .unwrap(),
        EscalateOutcome::Escalated
    ));
    let stored = store.get(&i.id).await.unwrap().unwrap();
    assert!(stored.is_pending());
    assert_eq!(
        stored.escalated_at().map(|t| t.as_millisecond()),
        marked.escalated_at().map(|t| t.as_millisecond())
    );
    assert_eq!(backlog(store.clone()).await, 1);
    // Once: a second try (another process's) records nothing.
    let mut again = (*i).clone();
    again.set_escalated_at(Some(Timestamp::now() + jiff::SignedDuration::from_secs(1)));
    let again = Arc::new(again);
    let effects = Effects {
        jobs: vec![job("j-esc-2", "esc-channel")],
        audit: vec![],
    };
    match store.escalate(again, effects).await.unwrap() {
        EscalateOutcome::Unchanged(current) => assert!(current.escalated_at().is_some()),
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(backlog(store.clone()).await, 1);
    // Resolved from a copy that never saw the mark: the mark stays.
    let resolved = Arc::new(i.resolved(imrelay::interaction::expired(&i, Timestamp::now())));
    store.resolve(resolved, Effects::default()).await.unwrap();
    let stored = store.get(&i.id).await.unwrap().unwrap();
    assert!(!stored.is_pending() && stored.escalated_at().is_some());
    // Resolved, or unknown: nothing to escalate.
    match store.escalate(marked, Effects::default()).await.unwrap() {
        EscalateOutcome::Unchanged(current) => assert!(!current.is_pending()),
        other => panic!("unexpected {other:?}"),
    }
    let mut ghost = (*i).clone();
    ghost.id = InteractionId::parse("c-esc-ghost").unwrap();
    ghost.set_escalated_at(Some(Timestamp::now()));
    assert!(matches!(
        store
            .escalate(Arc::new(ghost), Effects::default())
            .await
            .unwrap(),
        EscalateOutcome::NotFound
    ));
}
