//! A route's escalation: where its unanswered interactions go after a while, who may
//! answer them from then on, and the checks a configured one passes.

use serde::{Deserialize, Serialize};

use super::{Interaction, People, RouteError, RouteStamp, Target};

/// A route's escalation: after `after_secs` unanswered, its interactions are posted to
/// `targets` as well (the first copies stay live), and `approvers` may answer them too.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Escalation {
    /// Seconds after creation.
    pub after_secs: u64,
    /// The places it is posted to then (already resolved to addresses).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<Target>,
    /// The people and groups who may answer from then on, besides the route's own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvers: Vec<String>,
}

impl Escalation {
    /// When interaction `i` escalates: `after_secs` after its creation.
    pub fn due(&self, i: &Interaction) -> jiff::Timestamp {
        i64::try_from(self.after_secs)
            .ok()
            .and_then(|s| {
                i.created_at
                    .checked_add(jiff::SignedDuration::from_secs(s))
                    .ok()
            })
            .unwrap_or(jiff::Timestamp::MAX)
    }

    /// The addresses on `channel` it is posted to.
    pub fn addresses<'a>(&'a self, channel: &'a str) -> impl Iterator<Item = &'a str> {
        self.targets
            .iter()
            .filter(move |t| t.channel == channel)
            .map(|t| t.to.as_str())
    }

    /// The wait as people read it: `5 min`, `90 s`, `2 h`, `1 h 30 min`.
    pub fn wait_text(&self) -> String {
        let s = self.after_secs;
        match (s / 3600, s % 3600 / 60, s % 60) {
            (0, 0, s) => format!("{s} s"),
            (0, m, 0) => format!("{m} min"),
            (h, 0, 0) => format!("{h} h"),
            (h, m, 0) if h > 0 => format!("{h} h {m} min"),
            _ => format!("{s} s"),
        }
    }
}

impl RouteStamp {
    /// The addresses on `channel` its escalation posts to, leaving out those the route posted
    /// to already (their copies are live): empty when it does not escalate.
    pub fn escalation_addresses<'a>(&'a self, channel: &'a str) -> Vec<&'a str> {
        let Some(e) = &self.escalation else {
            return Vec::new();
        };
        let posted: Vec<&str> = self
            .addresses(channel)
            .map(Iterator::collect)
            .unwrap_or_default();
        e.addresses(channel)
            .filter(|a| !posted.contains(a))
            .collect()
    }
}

/// Whether `i` has escalated under `e`: marked so, or past the time it is due (the mark may
/// not have reached this process's copy yet; every process reads the same stamp and time).
pub(super) fn escalated(i: &Interaction, e: &Escalation) -> bool {
    i.escalated_at.is_some() || crate::interaction::model::now() >= e.due(i)
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
    use super::super::{Admission, RouteSpec, Routes, admission};
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
        i.escalated_at = Some(now());
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
