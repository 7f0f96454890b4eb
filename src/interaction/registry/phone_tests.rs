//! The registry's part of the phone's safeguards: an answer to an interaction that needs a
//! passkey (`step_up`, from its route or an ask rule) counts only through
//! `respond_with_passkey`, and cannot grant or allow "always"; "desk first" stamps the time
//! the phones are told only while one of the route's approvers is at the desk.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::*;
use crate::interaction::people::{Identity, People, PersonSpec};
use crate::interaction::policy::{Decision, GrantScope, Policy, Rule, RuleSpec};
use crate::interaction::routes::{RouteSpec, Routes};
use crate::interaction::{GrantRequest, NewInteraction, Outcome, RegistryConfig, Teams, Via};
use crate::store::MemoryStore;

fn registry(route: RouteSpec) -> Registry {
    let reg = Registry::new(Arc::new(MemoryStore::new()), RegistryConfig::default());
    let people = People::new(
        vec![PersonSpec {
            name: "alice".into(),
            identities: vec![Identity::new("telegram", "1")],
            groups: Vec::new(),
            quiet: None,
        }],
        Vec::new(),
    )
    .unwrap();
    let routes = Routes::new(vec![route], &people).unwrap();
    reg.set_teams(Teams { people, routes });
    reg
}

fn bash(id: &str, command: &str) -> NewInteraction {
    NewInteraction {
        id: Some(id.into()),
        ..NewInteraction::new(
            "Bash",
            json!({"command": command}).as_object().cloned().unwrap(),
        )
    }
}

fn alice() -> Responder {
    Responder::new("1", Via::new("telegram")).with_identity("telegram", "1")
}

#[tokio::test]
async fn a_step_up_answer_counts_only_with_a_passkey() {
    let reg = registry(RouteSpec {
        name: "prod".into(),
        tools: vec!["Bash".into()],
        step_up: true,
        ..RouteSpec::default()
    });
    let i = reg
        .create(bash("s1", "make deploy"))
        .await
        .unwrap()
        .interaction;
    assert!(crate::interaction::routes::needs_step_up(&i));
    let tap = reg.respond(&i.id, Answer::allow(), alice()).await;
    assert!(
        matches!(tap, Err(RegistryError::StepUpRequired(_))),
        "{tap:?}"
    );
    assert!(reg.get(&i.id).await.unwrap().unwrap().is_pending());
    let grant = GrantRequest {
        rule: None,
        scope: GrantScope::Session,
    };
    let granting = reg
        .respond_granting(&i.id, Answer::allow(), alice(), &grant)
        .await;
    assert!(matches!(granting, Err(RegistryError::Invalid(ref v)) if v.field == "grant"));
    let always = Answer::Allow {
        updated_input: None,
        always: true,
    };
    let always = reg.respond_with_passkey(&i.id, always, alice()).await;
    assert!(matches!(always, Err(RegistryError::Invalid(ref v)) if v.field == "always"));
    let done = reg
        .respond_with_passkey(&i.id, Answer::allow(), alice())
        .await
        .unwrap();
    assert_eq!(done.resolution.as_ref().unwrap().outcome, Outcome::Allowed);
}

#[tokio::test]
async fn an_ask_rule_asks_for_a_passkey_on_what_it_matches_only() {
    let reg = registry(RouteSpec {
        name: "shop".into(),
        tools: vec!["Bash".into()],
        ..RouteSpec::default()
    });
    reg.set_policy(Policy::new(vec![
        Rule::new(RuleSpec {
            name: "force-push".into(),
            tools: vec!["Bash(git push --force:*)".into()],
            decision: Some(Decision::Ask),
            step_up: true,
            ..RuleSpec::default()
        })
        .unwrap(),
    ]));
    let push = reg
        .create(bash("s2", "git push --force origin main"))
        .await
        .unwrap()
        .interaction;
    let route = push.route.as_deref().unwrap();
    assert!(route.step_up && route.name == "shop");
    let plain = reg
        .create(bash("s3", "git status"))
        .await
        .unwrap()
        .interaction;
    assert!(!crate::interaction::routes::needs_step_up(&plain));
    // The route's own stamp, shared by its other interactions, is left as it is.
    assert!(!reg.routes().get("shop").unwrap().stamp().step_up);
    let allow = Rule::new(RuleSpec {
        name: "x".into(),
        decision: Some(Decision::Allow),
        step_up: true,
        ..RuleSpec::default()
    });
    assert_eq!(allow.unwrap_err().field, "step_up");
}

#[tokio::test(start_paused = true)]
async fn desk_first_holds_the_phones_only_while_an_approver_is_at_the_desk() {
    let reg = registry(RouteSpec {
        name: "desk".into(),
        tools: vec!["Bash".into()],
        approvers: vec!["alice".into()],
        timeout_secs: Some(60),
        desk_first_secs: Some(20),
        ..RouteSpec::default()
    });
    let away = reg.create(bash("d1", "ls")).await.unwrap().interaction;
    assert_eq!(away.phones_at(), None);
    // Someone who is not the route's approver does not hold it.
    reg.presence().report("bob", true);
    let bob = reg.create(bash("d2", "ls")).await.unwrap().interaction;
    assert_eq!(bob.phones_at(), None);
    reg.presence().report("alice", true);
    let held = reg.create(bash("d3", "ls")).await.unwrap().interaction;
    assert_eq!(
        held.phones_at(),
        Some(crate::interaction::after(
            held.created_at,
            Duration::from_secs(20)
        ))
    );
    // Never past the deadline.
    let short = reg
        .create(NewInteraction {
            timeout_secs: Some(5),
            ..bash("d4", "ls")
        })
        .await
        .unwrap()
        .interaction;
    assert_eq!(short.phones_at(), Some(short.deadline));
    reg.presence().report("alice", false);
    let left = reg.create(bash("d5", "ls")).await.unwrap().interaction;
    assert_eq!(left.phones_at(), None);
}
