//! The webhook channel's outbox jobs, planned in the registry's transactions: one signed
//! event per target that wants it (`interaction.created`, `interaction.resolved`), the
//! payload fixed when planned, each in the target's own outbox queue.

use std::borrow::Cow;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{CHANNEL_IDENTITY, Target, Webhooks, channel_name};
use crate::interaction::{Interaction, Kind, Lifecycle, Millis};
use crate::outbox::ChannelJob;
use crate::store::OutboxJob;

use super::settings::WebhookEvent;

/// One delivery to one target: the signed event, in the target's own outbox queue.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
pub(super) struct Job {
    /// The event delivered: the job's kind.
    pub kind: WebhookEvent,
    /// The target's name.
    pub target: String,
    /// The event's `webhook-id`, the same on every attempt so the target can deduplicate.
    pub msg_id: String,
    /// The event's JSON text, fixed when it was planned: what is signed and sent.
    pub body: String,
}

impl ChannelJob for Job {
    fn channel(&self) -> Cow<'static, str> {
        channel_name(&self.target).into()
    }
}

/// Plans each target's deliveries inside the registry's transactions.
pub(super) struct Planner(pub std::sync::Arc<Webhooks>);

impl Lifecycle for Planner {
    fn plan_created(&self, i: &Interaction, jobs: &mut Vec<OutboxJob>) {
        self.0.plan(WebhookEvent::Created, i, jobs);
    }

    fn plan_resolved(&self, i: &Interaction, jobs: &mut Vec<OutboxJob>) {
        self.0.plan(WebhookEvent::Resolved, i, jobs);
    }

    fn plan_escalated(&self, i: &Interaction, jobs: &mut Vec<OutboxJob>) {
        self.0.plan_escalated(i, jobs);
    }

    fn plan_voted(&self, i: &Interaction, jobs: &mut Vec<OutboxJob>) {
        self.0.plan(WebhookEvent::Voted, i, jobs);
    }
}

impl Webhooks {
    /// The event payload's text: type, timestamp, id, and data with the interaction and links.
    /// Written straight from the interaction (its input as kept, not through a
    /// [`serde_json::Value`]).
    fn payload(&self, target: &str, event: WebhookEvent, i: &Interaction, msg_id: &str) -> String {
        #[derive(Serialize)]
        struct Payload<'a> {
            r#type: &'static str,
            id: &'a str,
            timestamp: Millis,
            data: Data<'a>,
        }
        #[derive(Serialize)]
        struct Data<'a> {
            interaction: &'a Interaction,
            resolution: &'a Option<Box<crate::interaction::Resolution>>,
            respond_url: String,
            interaction_url: String,
            /// The votes so far on an approval that needs several people, as every chat
            /// copy shows them ("1 of 2: alice via telegram").
            #[serde(skip_serializing_if = "Option::is_none")]
            votes: Option<String>,
            /// An approval's tool call as a person reads it (a command, a diff).
            #[serde(skip_serializing_if = "Option::is_none")]
            display: Option<Display>,
        }
        #[derive(Serialize)]
        struct Display {
            summary: String,
            text: String,
        }
        let at = match (event, &i.resolution) {
            (WebhookEvent::Resolved, Some(r)) => r.at,
            _ => i.created_at,
        };
        let payload = Payload {
            r#type: event.name(),
            id: msg_id,
            timestamp: Millis(at),
            data: Data {
                interaction: i,
                resolution: &i.resolution,
                respond_url: format!("{}/v1/webhooks/{target}/respond", self.public_url),
                interaction_url: format!("{}/v1/interactions/{}", self.public_url, i.id),
                votes: crate::interaction::quorum::tally(i),
                display: (i.kind == Kind::Approval).then(|| {
                    let shown = crate::present::present(
                        &i.tool_name,
                        &i.input.map(),
                        i.cwd.as_deref(),
                        crate::present::Budget::ALL,
                    );
                    Display {
                        text: shown.plain_text(),
                        summary: shown.summary,
                    }
                }),
            },
        };
        // Plain data always serializes.
        serde_json::to_string(&payload).unwrap_or_default()
    }

    fn plan(&self, event: WebhookEvent, i: &Interaction, jobs: &mut Vec<OutboxJob>) {
        for (name, t) in &self.targets {
            if !t.settings.wants(event, i) || self.is_disabled(name) {
                continue;
            }
            // A routed interaction goes to its route's webhooks only, and, once escalated,
            // its resolution and votes to those it escalated to as well.
            if let Some(stamp) = i.route.as_deref()
                && let Some(mut to) = stamp.addresses(CHANNEL_IDENTITY)
                && !to.any(|n| n == name.as_str())
                && !(matches!(event, WebhookEvent::Resolved | WebhookEvent::Voted)
                    && i.escalated_at().is_some()
                    && stamp
                        .escalation_addresses(CHANNEL_IDENTITY)
                        .contains(&name.as_str()))
            {
                continue;
            }
            self.plan_one(name, t, event, i, jobs);
        }
    }

    /// An escalated interaction, as `interaction.created` (it is new to them, and carries
    /// `escalated_at`), to the webhooks its route escalates to.
    fn plan_escalated(&self, i: &Interaction, jobs: &mut Vec<OutboxJob>) {
        let Some(stamp) = i.route.as_deref() else {
            return;
        };
        for name in stamp.escalation_addresses(CHANNEL_IDENTITY) {
            if let Some((name, t)) = self.targets.get_key_value(name)
                && t.settings.wants(WebhookEvent::Created, i)
                && !self.is_disabled(name)
            {
                self.plan_one(name, t, WebhookEvent::Created, i, jobs);
            }
        }
    }

    /// The delivery of `event` about `i` to target `name`.
    fn plan_one(
        &self,
        name: &str,
        t: &Target,
        event: WebhookEvent,
        i: &Interaction,
        jobs: &mut Vec<OutboxJob>,
    ) {
        // The creation time tells apart two interactions that had the same id (an id
        // can be used again once the first one was pruned).
        let mut incarnation = format!("{}:{}", event.name(), i.incarnation());
        // Each vote is an event of its own.
        let votes = i.votes().len().to_string();
        let more: &[&str] = match event {
            WebhookEvent::Voted => {
                incarnation.push_str(&format!(":{votes}"));
                &[&votes]
            }
            _ => &[],
        };
        let msg_id = format!(
            "msg_{}",
            &hex::encode(Sha256::digest(incarnation.as_bytes()))[..32]
        );
        let body = self.payload(name, event, i, &msg_id);
        let now = crate::interaction::now();
        let horizon = Duration::from_secs(t.settings.horizon_hours.saturating_mul(3600));
        let job = Job {
            kind: event,
            target: name.to_string(),
            msg_id,
            body,
        };
        // Keyed `webhook:<target>:<event>:<incarnation>` (and the vote's number).
        jobs.push(job.plan(i, more, now, crate::interaction::after(now, horizon)));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::interaction::InteractionId;
    use crate::outbox::Delivery;

    #[test]
    fn a_delivery_is_queued_on_its_target_and_reads_back_as_stored() {
        let i = Interaction::pending(
            InteractionId::parse("t1").unwrap(),
            "Bash",
            crate::interaction::Input::default(),
            jiff::Timestamp::from_millisecond(1_700_000_000_000).unwrap(),
            60,
        );
        let job = Job {
            kind: WebhookEvent::Resolved,
            target: "ci".into(),
            msg_id: "msg_1".into(),
            body: "{}".into(),
        };
        let (at, until) = (i.created_at, i.deadline);
        let stored = job.plan(&i, &[], at, until);
        assert_eq!(
            stored.key,
            "webhook:ci:interaction.resolved:t1:1700000000000"
        );
        assert_eq!(
            (stored.channel.as_str(), stored.kind.as_str()),
            ("webhook:ci", "interaction.resolved")
        );
        // The payload is what earlier versions stored, so their queued jobs still deliver.
        assert_eq!(
            stored.payload,
            json!({"target": "ci", "msg_id": "msg_1", "body": "{}"})
        );
        assert_eq!(Job::read(&stored).ok(), Some(job));

        let mut unknown = stored.clone();
        unknown.kind = "interaction.renamed".into();
        assert!(
            matches!(Job::read(&unknown), Err(Delivery::Failed(why)) if why.contains("webhook:ci"))
        );
    }
}
