//! The devices people subscribed for Web Push, kept as named values in the store (one each,
//! under [`PREFIX`], so every replica sees the same list): the push service's endpoint and
//! the browser's keys, whose operator token subscribed it and so whose person it notifies.
//!
//! A device is named by the hash of its endpoint, so the same browser subscribing again
//! replaces its entry. A person keeps at most `push.max_devices_per_person`: one more
//! subscribing removes their oldest.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::store::{Store, StoreError};

/// Where devices are kept.
pub(crate) const PREFIX: &str = "push.device.";

/// The most devices listed at once, all people together.
pub(crate) const MAX_DEVICES: usize = 10_000;

/// One subscribed device.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Device {
    /// Its id: the start of its endpoint's SHA-256, hex.
    pub id: String,
    /// The person it notifies: the labelled token's person (or the label), or the name the
    /// administrator's inbox gave.
    pub person: String,
    /// The label of the operator token that subscribed it; `None`: the administrator's token
    /// (or this machine without tokens).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// What the person calls it ("Pixel 8", "work laptop").
    pub name: String,
    /// The push service's URL for it.
    pub endpoint: String,
    /// The browser's P-256 public key (`keys.p256dh`, base64url).
    pub p256dh: String,
    /// The browser's auth secret (`keys.auth`, base64url).
    pub auth: String,
    /// When it subscribed.
    pub created_at: Timestamp,
}

impl Device {
    /// A device named by its id alone (what a digest's job carries; the rest is read from
    /// the store when it is delivered).
    pub(crate) fn named(id: &str) -> Self {
        Device {
            id: id.to_string(),
            person: String::new(),
            label: None,
            name: String::new(),
            endpoint: String::new(),
            p256dh: String::new(),
            auth: String::new(),
            created_at: Timestamp::UNIX_EPOCH,
        }
    }
}

/// What is wrong with a subscription as a browser sent it.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum Invalid {
    /// The endpoint is no http(s) URL.
    #[error("endpoint must be the push service's https:// URL (http:// only on loopback)")]
    Endpoint,
    /// `keys.p256dh` is not a P-256 public key.
    #[error("keys.p256dh must be the browser's P-256 public key, base64url, uncompressed")]
    P256dh,
    /// `keys.auth` is not 16 bytes.
    #[error("keys.auth must be the browser's 16-byte auth secret, base64url")]
    Auth,
    /// The name is too long.
    #[error("name must be at most 100 characters")]
    Name,
}

impl Invalid {
    /// The field it is about.
    pub(super) fn field(&self) -> &'static str {
        match self {
            Invalid::Endpoint => "endpoint",
            Invalid::P256dh => "keys.p256dh",
            Invalid::Auth => "keys.auth",
            Invalid::Name => "name",
        }
    }
}

/// The id of the device at `endpoint`.
pub(crate) fn id_of(endpoint: &str) -> String {
    hex::encode(&Sha256::digest(endpoint.as_bytes())[..12])
}

/// Checks what a browser sent.
pub(crate) fn check(endpoint: &str, p256dh: &str, auth: &str, name: &str) -> Result<(), Invalid> {
    let url = url::Url::parse(endpoint).map_err(|_| Invalid::Endpoint)?;
    let loopback = match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(d)) => d == "localhost",
        None => false,
    };
    if !(url.scheme() == "https" || (url.scheme() == "http" && loopback)) || endpoint.len() > 2048 {
        return Err(Invalid::Endpoint);
    }
    let key = URL_SAFE_NO_PAD
        .decode(p256dh.trim_end_matches('='))
        .map_err(|_| Invalid::P256dh)?;
    if p256::PublicKey::from_sec1_bytes(&key).is_err() || key.len() != 65 {
        return Err(Invalid::P256dh);
    }
    let auth = URL_SAFE_NO_PAD
        .decode(auth.trim_end_matches('='))
        .map_err(|_| Invalid::Auth)?;
    if auth.len() != 16 {
        return Err(Invalid::Auth);
    }
    if name.chars().count() > 100 {
        return Err(Invalid::Name);
    }
    Ok(())
}

/// Every device, oldest first (all people's, or `person`'s).
pub(crate) async fn list(
    store: &dyn Store,
    person: Option<&str>,
) -> Result<Vec<Device>, StoreError> {
    let mut out: Vec<Device> = store
        .values_under(PREFIX, MAX_DEVICES)
        .await?
        .into_iter()
        .filter_map(|(_, v)| serde_json::from_str::<Device>(&v).ok())
        .filter(|d| person.is_none_or(|p| d.person == p))
        .collect();
    out.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
    Ok(out)
}

/// Keeps `device` (replacing the entry of the same endpoint) and removes its person's oldest
/// beyond `max`: the removed ones.
pub(crate) async fn add(
    store: &dyn Store,
    device: &Device,
    max: usize,
) -> Result<Vec<Device>, StoreError> {
    let value = serde_json::to_string(device).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    store
        .set_value(&format!("{PREFIX}{}", device.id), Some(value))
        .await?;
    let theirs = list(store, Some(&device.person)).await?;
    let extra = theirs.len().saturating_sub(max);
    let mut removed = Vec::new();
    for d in theirs.into_iter().filter(|d| d.id != device.id).take(extra) {
        remove(store, &d.id).await?;
        removed.push(d);
    }
    Ok(removed)
}

/// Device `id`, if there is one.
pub(crate) async fn get(store: &dyn Store, id: &str) -> Result<Option<Device>, StoreError> {
    if !id.chars().all(|c| c.is_ascii_hexdigit()) || id.len() > 64 {
        return Ok(None);
    }
    let v = store.get_value(&format!("{PREFIX}{id}")).await?;
    Ok(v.and_then(|v| serde_json::from_str(&v).ok()))
}

/// Removes device `id`.
pub(crate) async fn remove(store: &dyn Store, id: &str) -> Result<(), StoreError> {
    store.set_value(&format!("{PREFIX}{id}"), None).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryStore;

    fn device(person: &str, endpoint: &str, at: i64) -> Device {
        Device {
            id: id_of(endpoint),
            person: person.into(),
            label: Some(format!("{person}-phone")),
            name: "phone".into(),
            endpoint: endpoint.into(),
            p256dh: String::new(),
            auth: String::new(),
            created_at: Timestamp::from_second(at).unwrap(),
        }
    }

    #[tokio::test]
    async fn a_person_keeps_their_newest_devices_and_a_resubscription_replaces_its_entry() {
        let store = MemoryStore::new();
        for (n, at) in [(1, 10), (2, 20), (3, 30)] {
            let removed = add(&store, &device("ann", &format!("https://p/{n}"), at), 2)
                .await
                .unwrap();
            assert_eq!(removed.len(), usize::from(n == 3), "{n}");
        }
        add(&store, &device("bob", "https://p/b", 5), 2)
            .await
            .unwrap();
        let ann: Vec<String> = list(&store, Some("ann"))
            .await
            .unwrap()
            .into_iter()
            .map(|d| d.endpoint)
            .collect();
        assert_eq!(ann, ["https://p/2", "https://p/3"]);
        add(&store, &device("ann", "https://p/3", 40), 2)
            .await
            .unwrap();
        assert_eq!(list(&store, None).await.unwrap().len(), 3);
        let id = id_of("https://p/b");
        assert_eq!(get(&store, &id).await.unwrap().unwrap().person, "bob");
        remove(&store, &id).await.unwrap();
        assert_eq!(get(&store, &id).await.unwrap(), None);
        assert_eq!(get(&store, "../x").await.unwrap(), None);
    }

    #[test]
    fn a_subscription_is_checked_field_by_field() {
        let key = URL_SAFE_NO_PAD.encode(
            p256::SecretKey::from_slice(&[3u8; 32])
                .unwrap()
                .public_key()
                .to_sec1_bytes(),
        );
        let auth = URL_SAFE_NO_PAD.encode([1u8; 16]);
        assert_eq!(check("https://fcm.example/x", &key, &auth, "p"), Ok(()));
        assert_eq!(check("http://127.0.0.1:9/x", &key, &auth, "p"), Ok(()));
        assert_eq!(
            check("http://push.example/x", &key, &auth, "p"),
            Err(Invalid::Endpoint)
        );
        assert_eq!(
            check("https://p/x", "AAAA", &auth, "p"),
            Err(Invalid::P256dh)
        );
        assert_eq!(check("https://p/x", &key, "AAAA", "p"), Err(Invalid::Auth));
        assert_eq!(
            check("https://p/x", &key, &auth, &"n".repeat(101)),
            Err(Invalid::Name)
        );
    }
}
