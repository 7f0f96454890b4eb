//! A route's escalation: where its unanswered interactions go after a while, who may
//! answer them from then on, and the checks a configured one passes.

use super::{Escalation, Interaction, People, RouteError};

/// Whether `i` has escalated under `e`: marked so, or past the time it is due (the mark may
/// not have reached this process's copy yet; every process reads the same stamp and time).
pub(super) fn escalated(i: &Interaction, e: &Escalation) -> bool {
    i.escalated_at().is_some() || crate::interaction::model::now() >= e.due(i)
}

/// Checks a route's escalation: a wait of at least a second and below the route's timeout,
/// somewhere to go or someone more to answer, and approvers who exist.
pub(super) fn check_escalation(
    e: &Escalation,
    timeout_secs: Option<u64>,
    people: &People,
    at: &dyn Fn(&str) -> String,
) -> Result<(), RouteError> {
    let err = |field: String, message: String| Err(RouteError { field, message });
    if e.after_secs == 0 {
        return err(at("escalate_after_secs"), "must be at least 1".into());
    }
    if let Some(t) = timeout_secs.filter(|t| e.after_secs >= *t) {
        return err(
            at("escalate_after_secs"),
            format!(
                "{} is not below the route's timeout_secs ({t}): it would expire before it escalates",
                e.after_secs
            ),
        );
    }
    if e.targets.is_empty() && e.approvers.is_empty() {
        return err(
            at("escalate_to"),
            "names no chat, receiver, channel, webhook, person or approver to escalate to".into(),
        );
    }
    for (j, a) in e.approvers.iter().enumerate() {
        if !people.knows(a) {
            return err(
                at(&format!("escalate_to.approvers[{j}]")),
                format!(
                    "{a:?} is neither a person nor a group: add it to [[people]] or [[groups]]"
                ),
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::tests::{call, people};
    use super::super::{Admission, RouteSpec, RouteStamp, Routes, Target, admission};
    use super::*;
    use crate::interaction::model::now;

    #[test]
    fn escalation_approvers_may_answer_once_it_escalated() {
        let p = people();
        let r = Routes::new(
            vec![RouteSpec {
                name: "shop".into(),
                targets: vec![Target::new("telegram", "-100")],
                approvers: vec!["alice".into()],
                escalation: Some(Escalation {
                    after_secs: 300,
                    targets: vec![
                        Target::new("telegram", "-100"),
                        Target::new("feishu", "chat_id:oc_2"),
                    ],
                    approvers: vec!["bob".into()],
                    through_quiet: false,
                }),
                ..Default::default()
            }],
            &p,
        )
        .unwrap();
        let mut i = call("Bash", "claude-code", "/srv/shop");
        i.route = r.stamp_for(&i);
        assert_eq!(
            admission(&i, &p, "feishu", "ou_b", true),
            Admission::OtherRoute
        );
        assert_eq!(
            admission(&i, &p, "telegram", "111", false),
            Admission::Admitted
        );
        // Past its time (whether or not this copy carries the mark yet): Bob may too.
        i.created_at = now() - jiff::SignedDuration::from_secs(301);
        assert_eq!(
            admission(&i, &p, "feishu", "ou_b", false),
            Admission::Admitted
        );
        i.created_at = now();
        i.set_escalated_at(Some(now()));
        assert_eq!(
            admission(&i, &p, "feishu", "ou_b", false),
            Admission::Admitted
        );
        // A stranger still may not, and Alice still may.
        assert_eq!(
            admission(&i, &p, "feishu", "ou_x", true),
            Admission::OtherRoute
        );
        assert_eq!(
            admission(&i, &p, "telegram", "111", false),
            Admission::Admitted
        );
        // The chat the route posts to already is not posted to again.
        let stamp = i.route.as_deref().unwrap();
        assert!(stamp.escalation_addresses("telegram").is_empty());
        assert_eq!(stamp.escalation_addresses("feishu"), ["chat_id:oc_2"]);
        assert_eq!(stamp.escalation.as_ref().unwrap().wait_text(), "5 min");
        // It is stored with the interaction.
        let json = serde_json::to_value(stamp).unwrap();
        assert_eq!(json["escalation"]["after_secs"], 300);
        let back: RouteStamp = serde_json::from_value(json).unwrap();
        assert_eq!(&back, stamp);
    }

    #[test]
    fn escalations_that_cannot_work_are_refused() {
        let p = people();
        let route = |e: Escalation, timeout: Option<u64>| {
            Routes::new(
                vec![RouteSpec {
                    name: "r".into(),
                    timeout_secs: timeout,
                    escalation: Some(e),
                    ..Default::default()
                }],
                &p,
            )
            .map(|_| ())
        };
        let e = |after_secs: u64, approvers: &[&str], targets: Vec<Target>| Escalation {
            after_secs,
            targets,
            approvers: approvers.iter().map(|a| a.to_string()).collect(),
            through_quiet: false,
        };
        let to = || vec![Target::new("telegram", "-1")];
        assert!(route(e(60, &[], to()), Some(600)).is_ok());
        let err = route(e(0, &[], to()), None).unwrap_err();
        assert_eq!(err.field, "routes[0].escalate_after_secs");
        let err = route(e(600, &[], to()), Some(600)).unwrap_err();
        assert!(err.message.contains("before it escalates"), "{err}");
        let err = route(e(60, &[], vec![]), None).unwrap_err();
        assert_eq!(err.field, "routes[0].escalate_to");
        let err = route(e(60, &["mallory"], vec![]), None).unwrap_err();
        assert_eq!(err.field, "routes[0].escalate_to.approvers[0]");
    }
}
