//! Sending pushes through the durable outbox, on the shared delivery skeleton
//! (`channels::messages`): each device is one "chat", its notification one recorded copy
//! (under the notification's tag), so a retried job notifies only the devices not yet
//! notified and an outcome goes to every device that got the prompt.
//!
//! A push is encrypted to the device (RFC 8291, `aes128gcm`) and signed with the server's
//! VAPID key (RFC 8292). `TTL` is the time left to the deadline (a push service drops it
//! after that), `Urgency` is `high` when less than five minutes are left. A push service's
//! `404` or `410` means the subscription is gone: the device is removed. `429` waits as
//! asked, `5xx` and network failures are retried, anything else is final and says why.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::CHANNEL;
use super::TOKENS;
use super::devices::{self, Device};
use super::plan::Job;
use super::render::{self, PushAction};
use super::settings::PushSettings;
use super::vapid::Vapid;
use crate::channels::actions::Action;
use crate::channels::digest::{DigestAction, Digests, Edited, Sheet};
use crate::channels::digest_links::DigestLinks;
use crate::channels::digest_texts::Texts;
use crate::channels::messages::{Failure, Messages, Pacer, Platform, Posted};
use crate::channels::notification;
use crate::interaction::quorum::OPERATOR;
use crate::interaction::routes::{Admission, admission};
use crate::interaction::{Interaction, Registry};
use crate::outbox::{ChannelJob, Delivery, OutboxHandler};
use crate::store::{ChannelMessage, ClaimedJob, OutboxJob, Store};
use crate::sync::LockExt;

/// The most actions Chromium shows on a notification (`kWebNotificationMaxActions = 2`,
/// Blink's `web_notification_constants.h`; `Notification.maxActions`).
const MAX_ACTIONS: usize = 2;
/// The longest TTL asked of a push service (four weeks, what the largest keep).
const MAX_TTL_SECS: i64 = 28 * 24 * 3600;

/// Web Push as the delivery skeleton sees it.
pub(crate) struct Push {
    /// The section.
    pub settings: Arc<PushSettings>,
    /// The HTTP client (no redirects).
    pub client: reqwest::Client,
    /// Devices and action tokens.
    pub store: Arc<dyn Store>,
    /// The server's VAPID key.
    pub vapid: Vapid,
    /// The VAPID contact.
    pub contact: String,
    /// The digest notifications' single-use links.
    pub links: DigestLinks,
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

/// What a push service's answer means.
fn failure(status: reqwest::StatusCode, headers: &reqwest::header::HeaderMap) -> Failure {
    let error = format!("the push service answered HTTP {status}");
    match status.as_u16() {
        429 => Failure::Throttled {
            after: retry_after(headers),
            error,
        },
        408 | 500..=599 => Failure::Transient(error),
        401 | 403 => Failure::Permanent(format!(
            "{error}: it refused imrelay's VAPID signature; check push.subject (a mailto: or \
             https: contact) and that the device subscribed with this server's key (it changes \
             only with a new store): subscribe the device again from the inbox"
        )),
        413 => Failure::Permanent(format!("{error}: the payload is too large")),
        _ => Failure::Permanent(format!("{error}: the push was refused as it is")),
    }
}

/// The seconds left until `i`'s deadline, as a push's TTL (at least 0).
fn ttl(i: &Interaction) -> i64 {
    (i.deadline.as_second() - jiff::Timestamp::now().as_second()).clamp(0, MAX_TTL_SECS)
}

/// What a push is sent with: who signs it and how long a push service may take.
pub(super) struct Sender<'a> {
    /// The HTTP client (no redirects).
    pub client: &'a reqwest::Client,
    /// The server's VAPID key.
    pub vapid: &'a Vapid,
    /// The VAPID contact.
    pub contact: &'a str,
    /// Per push.
    pub timeout: Duration,
}

/// How a push is to be kept by the push service.
pub(super) struct Posting<'a> {
    /// Seconds it may wait for the device.
    pub ttl: i64,
    /// `high` or `normal`.
    pub urgency: &'a str,
    /// What a newer push with the same topic replaces.
    pub topic: &'a str,
}

impl Sender<'_> {
    /// Encrypts `payload` to `d` (RFC 8291), signs the request (RFC 8292) and posts it: the
    /// push service's answer, or why none came (a network failure, retryable).
    pub(super) async fn post(
        &self,
        d: &Device,
        payload: Vec<u8>,
        how: &Posting<'_>,
    ) -> Result<reqwest::Response, Failure> {
        let endpoint = url::Url::parse(&d.endpoint)
            .map_err(|_| Failure::Permanent("the device's endpoint is not a URL".into()))?;
        let key = URL_SAFE_NO_PAD
            .decode(d.p256dh.trim_end_matches('='))
            .ok()
            .and_then(|k| web_push_native::p256::PublicKey::from_sec1_bytes(&k).ok())
            .ok_or_else(|| Failure::Permanent("the device's p256dh key is not valid".into()))?;
        let auth = URL_SAFE_NO_PAD
            .decode(d.auth.trim_end_matches('='))
            .ok()
            .filter(|a| a.len() == 16)
            .ok_or_else(|| Failure::Permanent("the device's auth secret is not valid".into()))?;
        let auth = web_push_native::Auth::clone_from_slice(&auth);
        let body = web_push_native::encrypt(payload, &key, &auth)
            .map_err(|e| Failure::Permanent(format!("cannot encrypt the payload: {e}")))?;
        let authorization = self
            .vapid
            .authorization(&endpoint, self.contact)
            .ok_or_else(|| Failure::Permanent("the device's endpoint has no host".into()))?;
        self.client
            .post(endpoint)
            .timeout(self.timeout)
            .header("TTL", how.ttl.to_string())
            .header("Urgency", how.urgency)
            .header("Topic", how.topic)
            .header(reqwest::header::CONTENT_ENCODING, "aes128gcm")
            .header(reqwest::header::CONTENT_TYPE, "application/octet-stream")
            .header(reqwest::header::AUTHORIZATION, authorization)
            .body(body)
            .send()
            .await
            .map_err(|e| {
                if e.is_timeout() {
                    Failure::Transient(format!(
                        "the push service did not answer within {} s",
                        self.timeout.as_secs()
                    ))
                } else {
                    Failure::Transient(format!("push request failed: {e}"))
                }
            })
    }
}

impl Push {
    /// Encrypts `payload` to `d` and sends it with `ttl` and `urgency`.
    async fn send(
        &self,
        d: &Device,
        payload: Vec<u8>,
        ttl: i64,
        urgency: &str,
        topic: &str,
    ) -> Result<(), Failure> {
        let sender = Sender {
            client: &self.client,
            vapid: &self.vapid,
            contact: &self.contact,
            timeout: Duration::from_secs(self.settings.timeout_secs),
        };
        let how = Posting {
            ttl,
            urgency,
            topic,
        };
        let r = sender.post(d, payload, &how).await?;
        match r.status() {
            s if s.is_success() => Ok(()),
            s if matches!(s.as_u16(), 404 | 410) => {
                devices::remove(self.store.as_ref(), &d.id)
                    .await
                    .map_err(Failure::store)?;
                tracing::info!(device = %d.id, person = %d.person.escape_debug(), status = %s, "push: the subscription is gone; device removed");
                Err(Failure::Permanent(format!(
                    "the push service answered HTTP {s}: the subscription is gone, so the device \
                     was removed; it is notified again once it subscribes again from the inbox"
                )))
            }
            _ => Err(failure(r.status(), r.headers())),
        }
    }

    /// The Approve and Deny actions of approval `i` for device `d`: fresh single-use tokens,
    /// good until the sooner of `push.action_ttl_secs` and the deadline.
    async fn actions(&self, i: &Interaction, d: &Device) -> Result<Vec<PushAction>, Failure> {
        let until = (jiff::Timestamp::now().as_second()
            + i64::try_from(self.settings.action_ttl_secs).unwrap_or(900))
        .min(i.deadline.as_second())
        .to_string();
        let mut out = Vec::with_capacity(2);
        let w = crate::channels::words::Words(self.settings.locale);
        for (action, title) in [(Action::Allow, w.approve()), (Action::Deny, w.deny())] {
            let token = TOKENS
                .issue(self.store.as_ref(), i, action, &[&until, &d.id])
                .await
                .map_err(Failure::store)?;
            out.push(PushAction {
                action: action.as_str(),
                title: title.into(),
                url: format!("/v1/push/{}/{token}", action.as_str()),
            });
        }
        Ok(out)
    }
}

#[async_trait]
impl Platform for Push {
    type Target = Device;
    type Job = super::plan::DeviceJob;

    fn texts(&self) -> Texts {
        Texts(self.settings.locale)
    }

    async fn post_digest(&self, d: &Device, sheet: &Sheet) -> Result<String, Failure> {
        let tag = render::digest_tag(&d.id, &sheet.session, &sheet.first);
        let Some(d) = devices::get(self.store.as_ref(), &d.id)
            .await
            .map_err(Failure::store)?
        else {
            return Err(Failure::Permanent("the device was removed".into()));
        };
        self.push_digest(&d, &tag, sheet, false).await?;
        Ok(tag)
    }

    /// Pushes the digest again under its tag, so the notification is replaced quietly (a
    /// digest that grows, or a confirmation after a press, does not ring again), with fresh
    /// links.
    async fn edit_digest(&self, device: &str, tag: &str, sheet: &Sheet) -> Result<Edited, Failure> {
        match devices::get(self.store.as_ref(), device)
            .await
            .map_err(Failure::store)?
        {
            Some(d) => self.push_digest(&d, tag, sheet, true).await?,
            // Removed since: nothing left to replace.
            None => {
                tracing::debug!(device = %device, "push: digest not shown again; the device was removed")
            }
        }
        Ok(Edited::Done)
    }

    fn channel(&self) -> &'static str {
        CHANNEL
    }

    fn address(&self, d: &Device) -> String {
        d.id.clone()
    }

    async fn post(&self, i: &Interaction, d: &Device, _job: &OutboxJob) -> Result<Posted, Failure> {
        let tag = self.push_prompt(i, d, false).await?;
        Ok(Posted {
            message_ref: tag,
            state: None,
        })
    }

    /// Pushes the prompt again under its tag, quietly, with the votes so far and fresh
    /// actions (only hashes of the first ones are kept), so the notification is replaced.
    async fn show(&self, i: &Interaction, m: &ChannelMessage) -> Result<(), Failure> {
        match self.device_of(m).await? {
            Some(d) => self.push_prompt(i, &d, true).await.map(|_| ()),
            // Removed since: nothing left to replace.
            None => Ok(()),
        }
    }

    async fn edit(&self, i: &Interaction, m: &ChannelMessage) -> Result<(), Failure> {
        let Some(d) = self.device_of(m).await? else {
            // Removed since: nothing left to replace.
            return Ok(());
        };
        let payload = render::outcome(i, self.settings.include_command, self.settings.locale);
        let tag = payload.tag.clone();
        // Kept a day: a phone that was off still learns the prompt is settled.
        self.send(&d, payload.bytes(), 86_400, "normal", &tag[8..])
            .await
    }
}

impl Push {
    /// Pushes digest `sheet` to device `d` under `tag` (`quiet`: replacing one already
    /// shown): Approve all and Deny all (a confirmation's Yes and Cancel) as actions with
    /// single-use links, two at most (Chromium's `kWebNotificationMaxActions`); Review is the
    /// tap, which opens the inbox.
    async fn push_digest(
        &self,
        d: &Device,
        tag: &str,
        sheet: &Sheet,
        quiet: bool,
    ) -> Result<(), Failure> {
        let mut actions = Vec::new();
        for b in sheet.rows.iter().flatten() {
            let action = match b.action {
                DigestAction::Review => continue,
                DigestAction::AllowAll => "allow_all",
                DigestAction::DenyAll => "deny_all",
                DigestAction::ConfirmAllow | DigestAction::ConfirmDeny => "yes",
                DigestAction::Cancel => "cancel",
            };
            let link = self.links.make(sheet, b.action, tag);
            actions.push(PushAction {
                action,
                title: b.label.clone(),
                url: format!("/v1/push/digest/{link}"),
            });
        }
        actions.truncate(MAX_ACTIONS);
        let s = &self.settings;
        let mut payload = render::digest(sheet, tag, s.include_command, actions, s.locale);
        payload.quiet = quiet;
        let ttl = i64::try_from(s.action_ttl_secs).unwrap_or(900);
        self.send(d, payload.bytes(), ttl, "normal", &tag[8..])
            .await
    }

    /// The device copy `m` was pushed to, unless it was removed since.
    async fn device_of(&self, m: &ChannelMessage) -> Result<Option<Device>, Failure> {
        devices::get(self.store.as_ref(), &m.address)
            .await
            .map_err(Failure::store)
    }

    /// Pushes the prompt of pending `i` to `d` (`quiet`: replacing one already shown); its
    /// tag.
    async fn push_prompt(
        &self,
        i: &Interaction,
        d: &Device,
        quiet: bool,
    ) -> Result<String, Failure> {
        let actions = if notification::answers_here(i) {
            self.actions(i, d).await?
        } else {
            Vec::new()
        };
        let mut payload = render::prompt(
            i,
            self.settings.include_command,
            actions,
            self.settings.locale,
        );
        payload.quiet = quiet;
        let tag = payload.tag.clone();
        let left = ttl(i);
        let urgency = if left < 300 { "high" } else { "normal" };
        self.send(d, payload.bytes(), left, urgency, &tag[8..])
            .await?;
        Ok(tag)
    }
}

/// Delivers the channel's jobs.
pub(crate) struct Deliverer {
    /// The skeleton over [`Push`] (shared with the actions' endpoint, which shows a digest
    /// again after a press).
    pub messages: Arc<Messages<Push>>,
    /// Who may answer what (the devices' people).
    pub registry: Registry,
    /// The devices last listed, by id: their labels (what the digests' reach reads).
    labels: Labels,
}

/// The subscribed devices' labels by device id, as last listed.
type Labels = Arc<std::sync::Mutex<std::collections::HashMap<String, Option<String>>>>;

/// The delivery skeleton over `push`, its digests held past `push.digest_after` pending per
/// device; what goes to a device is what its person may answer (`labels`: the devices).
fn messages(
    push: Push,
    store: Arc<dyn Store>,
    registry: Registry,
    labels: Labels,
) -> Messages<Push> {
    let after = push.settings.digest_after;
    let known = labels.clone();
    let reach: crate::channels::digest::Reach = Arc::new(move |i: &Interaction, device: &str| {
        let label = known.locked().get(device).cloned().flatten();
        let teams = registry.teams();
        label
            .is_some_and(|l| admission(i, &teams.people, OPERATOR, &l, true) == Admission::Admitted)
    });
    Messages {
        platform: push,
        digests: Digests::new(store.clone(), CHANNEL, after, Vec::new()).with_reach(reach),
        store,
        pacer: Pacer::new(Duration::ZERO, Duration::from_secs(30)),
        health: None,
    }
}

impl Deliverer {
    /// The deliverer of `push`'s jobs, and its skeleton (for the actions' endpoint).
    pub(super) fn new(push: Push, store: Arc<dyn Store>, registry: Registry) -> Self {
        let labels = Labels::default();
        let messages = Arc::new(messages(push, store, registry.clone(), labels.clone()));
        Deliverer {
            messages,
            registry,
            labels,
        }
    }

    /// Whether device `d`'s person may answer `i` now.
    fn admitted(&self, i: &Interaction, d: &Device) -> bool {
        let Some(label) = &d.label else {
            return false;
        };
        let teams = self.registry.teams();
        admission(i, &teams.people, OPERATOR, label, true) == Admission::Admitted
    }

    /// Notifies every device whose person may answer the interaction now and is not in
    /// their quiet hours (unless `escalation` and its route says escalations go through):
    /// the job is retried for those in a retryable failure, and when the first quiet hours
    /// end (the others are not notified twice).
    async fn post(&self, job: &OutboxJob, escalation: bool) -> Delivery {
        let Some(id) = &job.interaction_id else {
            return Delivery::Failed("a push post job without an interaction".into());
        };
        let store = self.messages.store.as_ref();
        let i = match store.get(id).await {
            Ok(Some(i)) if job.is_for(&i) && i.is_pending() => i,
            Ok(_) => return Delivery::Done,
            Err(e) => return Delivery::store_retry(e),
        };
        let all = match devices::list(store, None).await {
            Ok(all) => all,
            Err(e) => return Delivery::store_retry(e),
        };
        *self.labels.locked() = all
            .iter()
            .map(|d| (d.id.clone(), d.label.clone()))
            .collect();
        let teams = self.registry.teams();
        let now = jiff::Timestamp::now();
        let mut retry: Option<Delivery> = None;
        let mut held: Option<jiff::Timestamp> = None;
        for d in all.iter().filter(|d| self.admitted(&i, d)) {
            if let Some(end) =
                notification::held_until(&teams.people, &d.person, &i, escalation, now)
            {
                tracing::debug!(id = %id, device = %d.id, until = %end, "push: held for quiet hours");
                held = Some(held.map_or(end, |h| h.min(end)));
                continue;
            }
            match self.messages.post(job, d).await {
                Delivery::Done => {}
                Delivery::Failed(e) => {
                    tracing::warn!(id = %id, device = %d.id, error = %e.escape_debug(), "push: a device was not notified");
                }
                r @ Delivery::Retry { .. } => retry = Some(r),
            }
        }
        match (retry, held) {
            (Some(r), _) => r,
            (None, Some(end)) if end < i.deadline => notification::hold(end, now),
            (None, _) => Delivery::Done,
        }
    }
}

#[async_trait]
impl OutboxHandler for Deliverer {
    async fn deliver(&self, job: &ClaimedJob) -> Delivery {
        match Job::read(&job.job) {
            Ok(Job::Post { escalation }) => self.post(&job.job, escalation).await,
            Ok(Job::Update) => self.messages.finalize_all(&job.job).await,
            Ok(Job::Voted) => self.messages.show_votes(&job.job).await,
            Ok(Job::Digest {}) => self.messages.deliver(&job.job).await,
            Err(failed) => failed,
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

    /// A digest shown on a device removed since (between the job's planning and its
    /// delivery) has nothing left to replace: done, and nothing is sent (the client here
    /// reaches nothing).
    #[tokio::test]
    async fn a_digest_on_a_device_removed_since_is_left_alone() {
        let store: Arc<dyn Store> = Arc::new(crate::store::MemoryStore::new());
        let push = Push {
            settings: Arc::new(PushSettings::default()),
            client: reqwest::Client::new(),
            store,
            vapid: Vapid::from_secret(&[7; 32]),
            contact: "mailto:ops@example.com".into(),
            links: DigestLinks::new(vec![1; 32], b"test", CHANNEL),
        };
        let sheet = Sheet::closed(Texts(push.settings.locale), "gone", "s-1", "2 requests");
        let edited = push.edit_digest("gone", "imrelay-dgabc", &sheet).await;
        assert!(matches!(edited, Ok(Edited::Done)), "{edited:?}");
    }

    #[test]
    fn throttling_waits_server_errors_retry_and_refusals_say_what_to_check() {
        let mut h = HeaderMap::new();
        h.insert(reqwest::header::RETRY_AFTER, "7".parse().unwrap());
        assert_eq!(
            failure(StatusCode::TOO_MANY_REQUESTS, &h),
            Failure::Throttled {
                after: Some(Duration::from_secs(7)),
                error: "the push service answered HTTP 429 Too Many Requests".into()
            }
        );
        let none = HeaderMap::new();
        assert!(matches!(
            failure(StatusCode::SERVICE_UNAVAILABLE, &none),
            Failure::Transient(_)
        ));
        let f = failure(StatusCode::FORBIDDEN, &none);
        assert!(
            matches!(&f, Failure::Permanent(e) if e.contains("push.subject")),
            "{f:?}"
        );
    }
}
