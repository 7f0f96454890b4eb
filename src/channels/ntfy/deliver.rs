//! Publishing prompts and outcomes through the durable outbox, on the shared delivery
//! skeleton (`channels::messages`): a prompt is published with its single-use action URLs
//! (their hashes stored first), recorded under its notification id (`sequence_id`); an
//! outcome is published under the same id, so ntfy 2.16 and newer replace the prompt with it.
//! A session's digest (the kit's, `channels::digest`) is one notification under an id of
//! its own, published again under that id whenever it changes, its actions single-use links
//! (`channels::digest_links`). A `429` waits for the time the server asks (or the outbox's
//! backoff), `5xx` and network failures are retried, any other refusal is final and says
//! what to check.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sha2::{Digest, Sha256};

use super::CHANNEL;
use super::Job;
use super::TOKENS;
use super::render::{self, HttpAction, PromptParts, Publish, Urls};
use super::settings::NtfySettings;
use crate::channels::actions::Action;
use crate::channels::digest::{DigestAction, Digests, Edited, Sheet};
use crate::channels::digest_links::DigestLinks;
use crate::channels::digest_texts::Texts;
use crate::channels::messages::{Failure, Messages, Pacer, Platform, Posted};
use crate::channels::notification;
use crate::interaction::Interaction;
use crate::outbox::{Delivery, OutboxHandler};
use crate::store::{ChannelMessage, ClaimedJob, OutboxJob, Store};

/// The most action buttons ntfy takes on one notification (`actionsMax` in ntfy's
/// `server/actions.go`: "only 3 actions allowed").
const MAX_ACTIONS: usize = 3;
/// Smallest gap between two messages to one topic.
const TOPIC_GAP: Duration = Duration::from_millis(500);
/// How long a throttled topic is kept quiet when the server does not say.
const THROTTLE_PAUSE: Duration = Duration::from_secs(30);

/// ntfy as the delivery skeleton sees it.
pub(crate) struct Ntfy {
    /// The section.
    pub settings: Arc<NtfySettings>,
    /// The HTTP client (no redirects).
    pub client: reqwest::Client,
    /// Where action tokens are kept.
    pub store: Arc<dyn Store>,
    /// The base of the action URLs (no trailing slash).
    pub actions_base: String,
    /// The web inbox, when known: what a tap on a notification opens.
    pub inbox: Option<String>,
    /// The digest notifications' single-use links.
    pub links: DigestLinks,
}

/// The notification id of the digest of `session` on `topic` whose first member is `first`
/// (ntfy takes up to 64 of `A-Za-z0-9_-`).
fn digest_sequence_id(topic: &str, session: &str, first: &str) -> String {
    let h = Sha256::digest(format!("digest\n{topic}\n{session}\n{first}").as_bytes());
    format!("imrelay-digest-{}", &hex::encode(h)[..32])
}

/// A notification's id on `topic` for interaction `i` (ntfy takes up to 64 of
/// `A-Za-z0-9_-`).
fn sequence_id(i: &Interaction, topic: &str) -> String {
    let h = Sha256::digest(format!("{}\n{topic}", i.incarnation()).as_bytes());
    format!("imrelay-{}", &hex::encode(h)[..32])
}

fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()
        .map(|s| Duration::from_secs(s.min(3600)))
}

/// What ntfy's answer means for the job.
fn failure(status: reqwest::StatusCode, headers: &reqwest::header::HeaderMap) -> Failure {
    let error = format!("ntfy answered HTTP {status}");
    match status.as_u16() {
        429 => Failure::Throttled {
            after: retry_after(headers),
            error,
        },
        408 | 500..=599 => Failure::Transient(error),
        401 | 403 => Failure::Permanent(format!(
            "{error}: the server refused imrelay's credentials for this topic; check ntfy.token \
             (or ntfy.username and ntfy.password) and the user's access to the topic, then run \
             `imrelay doctor --send-test`"
        )),
        _ => Failure::Permanent(format!("{error}: the publish was refused as it is")),
    }
}

impl Ntfy {
    /// Publishes one message.
    async fn publish(&self, body: &Publish<'_>) -> Result<(), Failure> {
        let s = &self.settings;
        let req = self
            .client
            .post(format!("{}/", s.base()))
            .timeout(Duration::from_secs(s.timeout_secs))
            .json(body);
        match s.authorize(req).send().await {
            Ok(r) if r.status().is_success() => Ok(()),
            Ok(r) => Err(failure(r.status(), r.headers())),
            Err(e) if e.is_timeout() => Err(Failure::Transient(format!(
                "ntfy did not answer within {} s",
                s.timeout_secs
            ))),
            Err(e) => Err(Failure::Transient(format!("ntfy request failed: {e}"))),
        }
    }

    /// Makes and stores the tokens of approval `i`'s buttons: their URLs. "Allow similar"
    /// is offered when imrelay proposes a rule for it and the prompt may show that rule
    /// (not in the privacy mode: nobody grants a rule they cannot read).
    async fn action_urls(&self, i: &Interaction) -> Result<Urls, Failure> {
        let similar = self.settings.include_command && render::similar_rule(i).is_some();
        let url = async |action: Action| -> Result<String, Failure> {
            let token = TOKENS
                .issue(self.store.as_ref(), i, action, &[])
                .await
                .map_err(Failure::store)?;
            Ok(format!(
                "{}/v1/ntfy/{}/{token}",
                self.actions_base,
                action.as_str()
            ))
        };
        Ok(Urls {
            allow: url(Action::Allow).await?,
            deny: url(Action::Deny).await?,
            similar: match similar {
                true => Some(url(Action::Similar).await?),
                false => None,
            },
        })
    }
}

#[async_trait]
impl Platform for Ntfy {
    type Target = String;
    type Job = Job;

    fn texts(&self) -> Texts {
        Texts(self.settings.locale)
    }

    async fn post_digest(&self, topic: &String, sheet: &Sheet) -> Result<String, Failure> {
        let seq = digest_sequence_id(topic, &sheet.session, &sheet.first);
        self.publish_digest(&seq, sheet).await?;
        Ok(seq)
    }

    /// Publishes the digest again under its notification id (ntfy 2.16 and newer replace
    /// it in place), with fresh links.
    async fn edit_digest(&self, _a: &str, message: &str, sheet: &Sheet) -> Result<Edited, Failure> {
        self.publish_digest(message, sheet).await?;
        Ok(Edited::Done)
    }

    fn channel(&self) -> &'static str {
        CHANNEL
    }

    fn address(&self, topic: &String) -> String {
        topic.clone()
    }

    async fn post(
        &self,
        i: &Interaction,
        topic: &String,
        _job: &OutboxJob,
    ) -> Result<Posted, Failure> {
        let seq = sequence_id(i, topic);
        self.publish_prompt(i, topic, &seq).await?;
        Ok(Posted {
            message_ref: seq,
            state: None,
        })
    }

    /// Publishes the prompt again under its notification id, with the votes so far (and
    /// fresh single-use URLs: only hashes of the first ones are kept), so ntfy replaces it.
    async fn show(&self, i: &Interaction, m: &ChannelMessage) -> Result<(), Failure> {
        self.publish_prompt(i, &m.address, &m.message_ref).await
    }

    async fn edit(&self, i: &Interaction, m: &ChannelMessage) -> Result<(), Failure> {
        let s = &self.settings;
        let body = render::outcome(i, &m.address, &m.message_ref, s.include_command, s.locale);
        self.publish(&body).await
    }
}

impl Ntfy {
    /// Publishes digest `sheet` under notification id `seq`: its Approve all and Deny all
    /// (and a confirmation's Yes and Cancel) as `http` actions with single-use links, its
    /// Review as a `view` action opening the inbox (an `http` one posting the next member on
    /// its own when the inbox's address is not known): three actions at most, ntfy's limit.
    async fn publish_digest(&self, seq: &str, sheet: &Sheet) -> Result<(), Failure> {
        let s = &self.settings;
        let mut actions = Vec::new();
        for b in sheet.rows.iter().flatten() {
            let action = match (&self.inbox, b.action) {
                (Some(inbox), DigestAction::Review) => {
                    HttpAction::view(&b.label, format!("{inbox}/"))
                }
                _ => {
                    let link = self.links.make(sheet, b.action, seq);
                    let url = format!("{}/v1/ntfy/digest/{link}", self.actions_base);
                    HttpAction::post(&b.label, url, false)
                }
            };
            actions.push(action);
        }
        actions.truncate(MAX_ACTIONS);
        let click = self.inbox.as_ref().map(|b| format!("{b}/"));
        let how = (s.priority, s.include_command, s.locale);
        let body = render::digest(sheet, seq, how, click, actions);
        self.publish(&body).await
    }

    /// Publishes the prompt of pending `i` to `topic` under notification id `seq`.
    async fn publish_prompt(&self, i: &Interaction, topic: &str, seq: &str) -> Result<(), Failure> {
        let urls = if notification::answers_here(i) {
            Some(self.action_urls(i).await?)
        } else {
            None
        };
        let route = i.route.as_ref().map(|r| r.name.as_str());
        let body = render::prompt(
            i,
            PromptParts {
                topic,
                sequence_id: seq,
                priority: self.settings.priority_for(route),
                include_command: self.settings.include_command,
                click: self.inbox.as_ref().map(|b| format!("{b}/#{}", i.id)),
                urls,
                locale: self.settings.locale,
            },
        );
        self.publish(&body).await
    }
}

/// Delivers the channel's jobs.
pub(crate) struct Deliverer {
    /// The skeleton over [`Ntfy`] (shared with the buttons' endpoint, which shows a
    /// digest again after a press).
    pub messages: Arc<Messages<Ntfy>>,
    /// People (the person's quiet hours).
    pub registry: crate::interaction::Registry,
    /// The `[[people]]` name whose phone the topics reach.
    pub person: String,
}

impl Deliverer {
    /// The deliverer of `messages`' jobs, to `person`'s phone.
    pub(super) fn new(
        messages: Arc<Messages<Ntfy>>,
        registry: crate::interaction::Registry,
        person: String,
    ) -> Self {
        Deliverer {
            messages,
            registry,
            person,
        }
    }
}

/// The delivery skeleton over `ntfy`, its digests held past `ntfy.digest_after` pending per
/// topic.
pub(super) fn messages(ntfy: Ntfy, store: Arc<dyn Store>) -> Messages<Ntfy> {
    let topics = ntfy.settings.topics.clone();
    let after = ntfy.settings.digest_after;
    Messages {
        platform: ntfy,
        digests: Digests::new(store.clone(), super::CHANNEL, after, topics),
        store,
        pacer: Pacer::new(TOPIC_GAP, THROTTLE_PAUSE),
        health: None,
    }
}

impl Deliverer {
    /// Until when a post job waits for the person's quiet hours, if it does.
    async fn held(&self, job: &OutboxJob) -> Option<jiff::Timestamp> {
        if job.kind != "post" {
            return None;
        }
        let id = job.interaction_id.as_ref()?;
        let i = self.messages.store.get(id).await.ok()??;
        let escalation = job.key.starts_with(&format!("{CHANNEL}:escalate:"));
        let teams = self.registry.teams();
        let now = jiff::Timestamp::now();
        let end = notification::held_until(&teams.people, &self.person, &i, escalation, now)?;
        (i.is_pending() && end < i.deadline).then_some(end)
    }
}

#[async_trait]
impl OutboxHandler for Deliverer {
    async fn deliver(&self, job: &ClaimedJob) -> Delivery {
        match self.held(&job.job).await {
            Some(end) => notification::hold(end, jiff::Timestamp::now()),
            None => self.messages.deliver(&job.job).await,
        }
    }

    fn concurrency(&self) -> usize {
        4
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::StatusCode;
    use reqwest::header::HeaderMap;

    #[test]
    fn throttling_waits_server_errors_retry_and_refusals_say_what_to_check() {
        let mut h = HeaderMap::new();
        h.insert(reqwest::header::RETRY_AFTER, "7".parse().unwrap());
        assert_eq!(
            failure(StatusCode::TOO_MANY_REQUESTS, &h),
            Failure::Throttled {
                after: Some(Duration::from_secs(7)),
                error: "ntfy answered HTTP 429 Too Many Requests".into()
            }
        );
        let none = HeaderMap::new();
        assert!(matches!(
            failure(StatusCode::BAD_GATEWAY, &none),
            Failure::Transient(_)
        ));
        let f = failure(StatusCode::FORBIDDEN, &none);
        assert!(
            matches!(&f, Failure::Permanent(e) if e.contains("ntfy.token")),
            "{f:?}"
        );
    }
}
