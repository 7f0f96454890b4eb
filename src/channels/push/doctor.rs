//! `imrelay doctor`'s checks of the Web Push channel, in a person's words: the contact push
//! services are given, the VAPID key (made at the first start and kept in the store) is there
//! and signs, how many devices are subscribed and whose, and each push service those devices
//! use answers this machine (one request to its origin with a short timeout; no push is sent,
//! so no phone buzzes). With `--send-test`, each device gets one test notification through
//! the real push path, and each push service's answer is reported per device.

use std::collections::BTreeMap;
use std::time::Duration;

use super::PushSettings;
use super::deliver::{Posting, Sender};
use super::devices::{Device, MAX_DEVICES, PREFIX};
use super::render::Payload;
use super::vapid::{SECRET, Vapid, audience};
use crate::channels::registry::{Check, Doctor, Kept};

/// How long a push service has to answer doctor.
const REACH_TIMEOUT: Duration = Duration::from_secs(5);

/// The checks, in order.
pub(super) async fn checks(s: &PushSettings, run: &Doctor) -> Vec<Check> {
    let mut checks = Vec::new();
    match s.contact(&run.public_url) {
        Some(c) => checks.push(Check::pass(format!(
            "push: push services are given {c} as whom to contact"
        ))),
        None => checks.push(Check::fail(
            "push: no contact for the push services, so `imrelay serve` will not start",
            "set push.subject = \"mailto:you@example.com\" (or server.public_url to imrelay's https:// address)",
        )),
    }
    let Some(kept) = &run.kept else {
        checks.push(Check::pass(
            "push: the store is in memory, so the VAPID key is made again at every start and every device must subscribe again after a restart",
        ));
        return checks;
    };
    let key = vapid_check(kept.as_ref()).await;
    let no_key = !key.ok;
    checks.push(key);
    let devices = match kept.values_under(PREFIX, MAX_DEVICES).await {
        Ok(v) => v,
        Err(e) => {
            checks.push(Check::fail(
                format!("push: the subscribed devices cannot be read from the store: {e}"),
                "check the store (above), then run doctor again",
            ));
            return checks;
        }
    };
    let devices: Vec<Device> = devices
        .iter()
        .filter_map(|(_, v)| serde_json::from_str(v).ok())
        .collect();
    checks.push(count_check(&devices));
    if no_key && !devices.is_empty() {
        return checks;
    }
    checks.extend(reach_checks(&devices).await);
    if run.send_test && !devices.is_empty() {
        checks.extend(send_tests(s, run, kept.as_ref(), &devices).await);
    }
    checks
}

/// `--send-test`: one test notification to each subscribed device, through the real push
/// path (encrypted to the device, signed with the stored VAPID key), and what each push
/// service answered. A device the service says is gone (`404`, `410`) is named with its fix:
/// doctor changes nothing in the store, and the server removes it at its next push.
async fn send_tests(
    s: &PushSettings,
    run: &Doctor,
    kept: &dyn Kept,
    devices: &[Device],
) -> Vec<Check> {
    let (Some(contact), Ok(Some(secret))) = (s.contact(&run.public_url), kept.secret(SECRET).await)
    else {
        return vec![Check::fail(
            "push: no test notification sent: there is no contact or no VAPID key yet",
            "fix the checks above (start `imrelay serve` once to make the key), then run `imrelay doctor --send-test` again",
        )];
    };
    let vapid = Vapid::from_secret(&secret);
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap_or_default();
    let sender = Sender {
        client: &client,
        vapid: &vapid,
        contact: &contact,
        timeout: Duration::from_secs(s.timeout_secs.max(1)),
    };
    let payload = || Payload {
        v: 1,
        kind: "prompt",
        id: "doctor-test".into(),
        tag: "imrelay-doctor-test".into(),
        title: "imrelay doctor".into(),
        body: "A test notification: imrelay can reach this device.".into(),
        url: "/".into(),
        deadline: None,
        quiet: false,
        actions: Vec::new(),
    };
    let how = Posting {
        ttl: 300,
        urgency: "normal",
        topic: "imrelay-doctor-test",
    };
    let mut out = Vec::new();
    for d in devices {
        let which = format!("device {} ({}, {:?})", d.id, d.person, d.name);
        out.push(match sender.post(d, payload().bytes(), &how).await {
            Ok(r) if r.status().is_success() => Check::pass(format!(
                "push: a test notification was sent to {which}: the push service answered {}",
                r.status()
            )),
            Ok(r) if matches!(r.status().as_u16(), 404 | 410) => Check::fail(
                format!("push: {which}: the push service answered {}: the subscription is gone", r.status()),
                format!("the server removes it at its next push to it; or remove it now (`imrelay devices remove {}`) and subscribe the device again from the inbox", d.id),
            ),
            Ok(r) => Check::fail(
                format!("push: {which}: the push service answered {}", r.status()),
                match r.status().as_u16() {
                    429 => "the push service is throttling this server: the outbox retries as it asks; try doctor again later".to_string(),
                    401 | 403 => "it refused the VAPID signature: check push.subject, and that the device subscribed with this store's key (subscribe it again from the inbox)".to_string(),
                    _ => "see what the push service documents for that status".to_string(),
                },
            ),
            Err(e) => Check::fail(
                format!("push: no test notification reached {which}: {}", e.error()),
                "this machine must reach the push services over https: check its firewall, DNS and proxy (HTTPS_PROXY)",
            ),
        });
    }
    out
}

/// The VAPID key: there and 32 bytes (what the store makes), or not made yet.
async fn vapid_check(kept: &dyn Kept) -> Check {
    match kept.secret(SECRET).await {
        Ok(Some(secret)) if secret.len() == 32 => Check::pass(format!(
            "push: the VAPID key is kept in the store (public key {}…)",
            Vapid::from_secret(&secret)
                .public_key()
                .chars()
                .take(16)
                .collect::<String>()
        )),
        Ok(Some(secret)) => Check::fail(
            format!(
                "push: the VAPID key in the store is {} bytes, not 32: pushes cannot be signed as devices expect",
                secret.len()
            ),
            "the store was changed by hand: restore it from a backup (a new key means every device subscribes again)",
        ),
        Ok(None) => Check::pass(
            "push: no VAPID key yet: `imrelay serve` makes one at its first start with push on",
        ),
        Err(e) => Check::fail(
            format!("push: the VAPID key cannot be read from the store: {e}"),
            "check the store (above), then run doctor again",
        ),
    }
}

/// How many devices are subscribed, and whose.
fn count_check(devices: &[Device]) -> Check {
    if devices.is_empty() {
        return Check::pass(
            "push: no device is subscribed yet: open the inbox on the phone, sign in with the person's token and press \"Notify me on this device\"",
        );
    }
    let mut by_person: BTreeMap<&str, usize> = BTreeMap::new();
    for d in devices {
        *by_person.entry(d.person.as_str()).or_default() += 1;
    }
    let whose: Vec<String> = by_person.iter().map(|(p, n)| format!("{p} {n}")).collect();
    Check::pass(format!(
        "push: {} subscribed ({})",
        devices_word(devices.len()),
        whose.join(", ")
    ))
}

fn devices_word(n: usize) -> String {
    if n == 1 {
        "1 device".into()
    } else {
        format!("{n} devices")
    }
}

/// Whether each push service the devices use answers this machine.
async fn reach_checks(devices: &[Device]) -> Vec<Check> {
    let mut origins: BTreeMap<String, usize> = BTreeMap::new();
    for d in devices {
        if let Some(origin) = url::Url::parse(&d.endpoint)
            .ok()
            .as_ref()
            .and_then(audience)
        {
            *origins.entry(origin).or_default() += 1;
        }
    }
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(REACH_TIMEOUT)
        .user_agent(format!("imrelay/{} doctor", env!("CARGO_PKG_VERSION")))
        .build()
        .unwrap_or_default();
    let mut out = Vec::new();
    for (origin, n) in origins {
        // Any HTTP answer says the service is reachable; what it says to `GET /` is its own.
        match client.get(format!("{origin}/")).send().await {
            Ok(_) => out.push(Check::pass(format!(
                "push: {origin} (the push service of {}) answers",
                devices_word(n)
            ))),
            Err(e) => out.push(Check::fail(
                format!(
                    "push: {origin} (the push service of {}) does not answer (waited at most {} s): {e}",
                    devices_word(n),
                    REACH_TIMEOUT.as_secs()
                ),
                "this machine must reach the push services over https: check its firewall, DNS and proxy (HTTPS_PROXY); until then those devices get nothing",
            )),
        }
    }
    out
}
