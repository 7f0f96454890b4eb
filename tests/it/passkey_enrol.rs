//! A person's first passkey needs an enrolment code an administrator issued for them, over
//! HTTP against the real server: refused without one, with a wrong one, one for another
//! person, one replaced, expired or used already; a good one registers the passkey once. The
//! credential is made by a small software authenticator (an ES256 key, "none" attestation,
//! as WebAuthn Level 2 § 6.5 lays out the authenticator data), checked by the server's real
//! WebAuthn crate. (The inbox's own form, with Chromium's virtual authenticator, is in
//! `tests/external/inbox/phone.rs`.)

use axum::http::StatusCode;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use imrelay::config::OperatorToken;
use imrelay::config::phone::FirstPasskey;
use imrelay::config::teams::PersonSettings;
use p256::ecdsa::SigningKey;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::support::{TestApp, spawn_with};

const ANN: &str = "ann-token-0123456789abcdef";
const BOB: &str = "bob-token-0123456789abcdef";
const ADMIN: &str = "admin-token-0123456789abcdef";

fn person(name: &str, label: &str) -> PersonSettings {
    PersonSettings {
        name: name.into(),
        operator: vec![label.into()],
        ..Default::default()
    }
}

async fn start(f: impl FnOnce(&mut imrelay::config::Settings)) -> TestApp {
    let mut app = spawn_with(|s| {
        s.auth.operator_tokens = vec![
            OperatorToken::labelled(ANN, "ann-laptop"),
            OperatorToken::labelled(BOB, "bob-laptop"),
            OperatorToken::new(ADMIN),
        ];
        s.people = vec![person("ann", "ann-laptop"), person("bob", "bob-laptop")];
        f(s);
    })
    .await;
    app.token = Some(ADMIN.into());
    app
}

/// `body`'s error, checked to be `status` with `code`: its message.
fn error(status: StatusCode, body: &Value, want: StatusCode, code: &str) -> String {
    assert_eq!(status, want, "{body}");
    assert_eq!(body["error"]["code"], code, "{body}");
    body["error"]["message"].as_str().unwrap().to_string()
}

/// A CBOR byte string's head (RFC 8949 § 3.1, major type 2) and the bytes.
fn cbor_bytes(b: &[u8]) -> Vec<u8> {
    let mut out = match b.len() {
        n @ 0..=23 => vec![0x40 | n as u8],
        n @ 24..=255 => vec![0x58, n as u8],
        n => vec![0x59, (n >> 8) as u8, n as u8],
    };
    out.extend_from_slice(b);
    out
}

/// A CBOR text string (major type 3) of at most 23 bytes.
fn cbor_text(s: &str) -> Vec<u8> {
    let mut out = vec![0x60 | s.len() as u8];
    out.extend_from_slice(s.as_bytes());
    out
}

/// What `navigator.credentials.create` gives for `options` (the server's `publicKey`), made
/// with `key` at `origin`: "none" attestation, user present and verified.
fn create_credential(options: &Value, key: &SigningKey, origin: &str, id: &[u8]) -> Value {
    let pk = &options["publicKey"];
    let client_data = json!({
        "type": "webauthn.create",
        "challenge": pk["challenge"],
        "origin": origin,
        "crossOrigin": false,
    })
    .to_string();
    let point = key.verifying_key().to_encoded_point(false);
    // COSE_Key (RFC 9053 § 7.1.1): kty EC2, alg ES256, crv P-256, x, y.
    let mut cose = vec![0xa5, 0x01, 0x02, 0x03, 0x26, 0x20, 0x01, 0x21];
    cose.extend(cbor_bytes(point.x().unwrap()));
    cose.push(0x22);
    cose.extend(cbor_bytes(point.y().unwrap()));
    let rp_id = pk["rp"]["id"].as_str().unwrap();
    let mut auth_data = Sha256::digest(rp_id.as_bytes()).to_vec();
    auth_data.push(0x01 | 0x04 | 0x40); // UP, UV, AT
    auth_data.extend([0, 0, 0, 0]); // signCount
    auth_data.extend([0; 16]); // AAGUID
    auth_data.extend((id.len() as u16).to_be_bytes());
    auth_data.extend(id);
    auth_data.extend(cose);
    let mut attestation = vec![0xa3];
    attestation.extend(cbor_text("fmt"));
    attestation.extend(cbor_text("none"));
    attestation.extend(cbor_text("attStmt"));
    attestation.push(0xa0);
    attestation.extend(cbor_text("authData"));
    attestation.extend(cbor_bytes(&auth_data));
    json!({
        "id": URL_SAFE_NO_PAD.encode(id),
        "rawId": URL_SAFE_NO_PAD.encode(id),
        "type": "public-key",
        "response": {
            "clientDataJSON": URL_SAFE_NO_PAD.encode(client_data),
            "attestationObject": URL_SAFE_NO_PAD.encode(attestation),
            "transports": ["internal"],
        },
        "extensions": {},
    })
}

/// Registers a passkey as the app's token's person with `code`: the status and body of the
/// second step (`POST /v1/passkeys`), or of the first when it is refused.
async fn register(app: &TestApp, code: Option<&str>, n: u8) -> (StatusCode, Value) {
    let (status, start) = app
        .post(
            "/v1/passkeys/register",
            &json!({"label": format!("key {n}"), "code": code}),
        )
        .await;
    if status != StatusCode::OK {
        return (status, start);
    }
    let key = SigningKey::from_slice(&[n + 1; 32]).unwrap();
    let origin = format!("http://localhost:{}", app.addr.port());
    let credential = create_credential(&start["options"], &key, &origin, &[n; 16]);
    app.post(
        "/v1/passkeys",
        &json!({"challenge": start["challenge"], "credential": credential}),
    )
    .await
}

async fn issue(app: &mut TestApp, for_person: &str) -> (StatusCode, Value) {
    let token = app.token.replace(ADMIN.into());
    let r = app
        .post("/v1/passkeys/enrolment", &json!({"person": for_person}))
        .await;
    app.token = token;
    r
}

async fn code_for(app: &mut TestApp, for_person: &str) -> String {
    let (status, body) = issue(app, for_person).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["person"], for_person, "{body}");
    body["code"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn a_first_passkey_needs_a_code_issued_for_that_person_and_good_once() {
    let mut app = start(|_| {}).await;
    // Only an administrator issues codes, for someone who signs in as a person.
    app.token = Some(ANN.into());
    let (s, b) = app
        .post("/v1/passkeys/enrolment", &json!({"person": "ann"}))
        .await;
    error(s, &b, StatusCode::FORBIDDEN, "administrator_only");
    let (s, b) = issue(&mut app, "nobody").await;
    let m = error(s, &b, StatusCode::UNPROCESSABLE_ENTITY, "unknown_person");
    assert!(m.contains("those who do: ann, bob"), "{m}");
    assert_eq!(b["error"]["field"], "person", "{b}");

    // Ann's token alone (a thief's too) registers nothing, and the inbox is told to ask.
    let (_, listed) = app.get("/v1/passkeys").await;
    assert_eq!(listed["needs_code"], true, "{listed}");
    let (s, b) = register(&app, None, 1).await;
    let m = error(s, &b, StatusCode::FORBIDDEN, "enrolment_code_required");
    assert!(m.contains("imrelay passkeys enrol ann"), "{m}");
    assert_eq!(b["error"]["field"], "code", "{b}");
    let (s, b) = register(&app, Some("ABCD-EFGH-JKMN-PQRS"), 1).await;
    let m = error(s, &b, StatusCode::FORBIDDEN, "enrolment_code_refused");
    assert!(m.contains("not one imrelay issued"), "{m}");
    let (s, b) = register(&app, Some("not a code"), 1).await;
    error(s, &b, StatusCode::FORBIDDEN, "enrolment_code_refused");

    // Bob's code is Bob's; an earlier code of Ann's is replaced by her newer one.
    let bobs = code_for(&mut app, "bob").await;
    let (s, b) = register(&app, Some(&bobs), 1).await;
    let m = error(s, &b, StatusCode::FORBIDDEN, "enrolment_code_refused");
    assert!(m.contains("issued for another person"), "{m}");
    let earlier = code_for(&mut app, "ann").await;
    let code = code_for(&mut app, "ann").await;
    let (s, b) = register(&app, Some(&earlier), 1).await;
    let m = error(s, &b, StatusCode::FORBIDDEN, "enrolment_code_refused");
    assert!(m.contains("replaced by a newer one"), "{m}");

    // The administrator sees whose codes wait (never the codes).
    app.token = Some(ADMIN.into());
    let (_, listed) = app.get("/v1/passkeys").await;
    let waiting: Vec<&str> = listed["enrolment"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["person"].as_str().unwrap())
        .collect();
    assert_eq!(waiting, ["bob", "ann"], "{listed}");
    assert!(!listed.to_string().contains(&code), "{listed}");

    // Typed loosely (lower case, spaces) it registers Ann's first passkey, once.
    app.token = Some(ANN.into());
    let typed = code.to_lowercase().replace('-', " ");
    let (s, b) = register(&app, Some(&typed), 1).await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    assert_eq!(b["person"], "ann", "{b}");
    let (_, listed) = app.get("/v1/passkeys").await;
    assert_eq!(listed["needs_code"], false, "{listed}");
    // A code for someone who has a passkey is refused: they add one with it.
    let (s, b) = issue(&mut app, "ann").await;
    error(s, &b, StatusCode::CONFLICT, "has_passkey");

    // The passkey is lost and removed: the used code does not register another.
    app.token = Some(ADMIN.into());
    let id = b64_id(&listed);
    let (s, b) = app.delete(&format!("/v1/passkeys/{id}")).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    app.token = Some(ANN.into());
    let (s, b) = register(&app, Some(&code), 2).await;
    let m = error(s, &b, StatusCode::FORBIDDEN, "enrolment_code_refused");
    assert!(m.contains("used already"), "{m}");

    // Two first steps with one code: only one registration uses it.
    let fresh = code_for(&mut app, "ann").await;
    let mut starts = Vec::new();
    for n in [3, 4] {
        let (s, start) = app
            .post(
                "/v1/passkeys/register",
                &json!({"label": "race", "code": fresh}),
            )
            .await;
        assert_eq!(s, StatusCode::OK, "{start}");
        starts.push((n, start));
    }
    let origin = format!("http://localhost:{}", app.addr.port());
    let mut outcomes = Vec::new();
    for (n, start) in starts {
        let key = SigningKey::from_slice(&[n + 1; 32]).unwrap();
        let credential = create_credential(&start["options"], &key, &origin, &[n; 16]);
        let (s, b) = app
            .post(
                "/v1/passkeys",
                &json!({"challenge": start["challenge"], "credential": credential}),
            )
            .await;
        outcomes.push((s, b["error"]["code"].clone()));
    }
    assert_eq!(
        outcomes,
        [
            (StatusCode::CREATED, Value::Null),
            (StatusCode::FORBIDDEN, json!("enrolment_code_refused"))
        ]
    );

    // Issued, refused and used: all in the audit trail, never the code.
    app.token = Some(ADMIN.into());
    let (_, audit) = app.get("/v1/audit?limit=1000").await;
    let outcomes: Vec<&str> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "passkey")
        .map(|e| e["outcome"].as_str().unwrap())
        .collect();
    for o in ["code_issued", "code_refused", "code_used", "registered"] {
        assert!(outcomes.contains(&o), "{o} in {outcomes:?}");
    }
    assert!(!audit.to_string().contains(&code), "the code is never kept");
    app.stop().await;
}

fn b64_id(listed: &Value) -> String {
    listed["passkeys"][0]["id"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn an_administrator_needs_no_code_and_token_mode_is_the_old_way() {
    // The administrator's own first passkey: the root of trust needs no code.
    let app = start(|_| {}).await;
    let (s, b) = register(&app, None, 1).await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    assert_eq!(b["person"], "administrator", "{b}");
    app.stop().await;

    // `first_passkey = "token"`: the token alone, as before; no codes are issued.
    let mut app = start(|s| s.passkeys.first_passkey = FirstPasskey::Token).await;
    let (s, b) = issue(&mut app, "ann").await;
    error(s, &b, StatusCode::CONFLICT, "enrolment_codes_off");
    app.token = Some(ANN.into());
    let (_, listed) = app.get("/v1/passkeys").await;
    assert_eq!(listed["needs_code"], false, "{listed}");
    let (s, b) = register(&app, None, 1).await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    app.stop().await;
}

#[tokio::test]
async fn an_expired_code_says_so() {
    // Below the configured range (60 s at least), which only settings made in code reach:
    // the code is expired as soon as it is issued.
    let mut app = start(|s| s.passkeys.enrolment_code_ttl_secs = 0).await;
    let code = code_for(&mut app, "ann").await;
    app.token = Some(ANN.into());
    let (s, b) = register(&app, Some(&code), 1).await;
    let m = error(s, &b, StatusCode::FORBIDDEN, "enrolment_code_refused");
    assert!(m.contains("expired at"), "{m}");
    app.stop().await;
}

#[tokio::test]
async fn guessing_codes_is_stopped_after_five_that_were_never_issued() {
    let mut app = start(|_| {}).await;
    let code = code_for(&mut app, "ann").await;
    app.token = Some(ANN.into());
    // Four guesses and a malformed one: each refused as not issued.
    for guess in [
        "ABCD-EFGH-JKMN-PQRS",
        "ABCD-EFGH-JKMN-PQRT",
        "ABCD-EFGH-JKMN-PQRV",
        "ABCD-EFGH-JKMN-PQRW",
        "not a code",
    ] {
        let (s, b) = register(&app, Some(guess), 1).await;
        error(s, &b, StatusCode::FORBIDDEN, "enrolment_code_refused");
    }
    // Now even the code Ann was given waits: it is not compared at all.
    let (s, b) = register(&app, Some(&code), 1).await;
    let m = error(
        s,
        &b,
        StatusCode::TOO_MANY_REQUESTS,
        "too_many_enrolment_codes",
    );
    assert!(m.contains("try again in 15 minute(s)"), "{m}");
    assert_eq!(b["error"]["field"], "code", "{b}");
    // Another person is not held up by Ann's guesses.
    let bobs = code_for(&mut app, "bob").await;
    app.token = Some(BOB.into());
    let (s, b) = register(&app, Some(&bobs), 1).await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    // The refusal is audited like the others.
    app.token = Some(ADMIN.into());
    let (_, audit) = app.get("/v1/audit?limit=1000").await;
    let bar = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "passkey" && e["outcome"] == "code_refused")
        .count();
    assert_eq!(bar, 6, "{audit}");
    app.stop().await;
}

/// Codes issued for many people at once are all kept: each issue changes the kept list only
/// as it was read, whichever request writes first (no code is lost to another's write).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codes_issued_at_once_for_many_people_are_all_kept() {
    let names: Vec<String> = (0..8).map(|k| format!("p{k}")).collect();
    let people = names.clone();
    // SQLite, whose writes wait on their own thread: the requests' reads and writes
    // interleave as they would across replicas.
    let dir = tempfile::tempdir().unwrap();
    let mut s = crate::support::settings();
    s.store.backend = imrelay::config::Backend::Sqlite;
    s.store.path = dir.path().join("codes.db");
    let store: std::sync::Arc<dyn imrelay::store::Store> = std::sync::Arc::new(
        imrelay::store::SqliteStore::open(&s.store.path, imrelay::store::Synchronous::Normal)
            .unwrap(),
    );
    s.passkeys.first_passkey = FirstPasskey::Code;
    s.auth.operator_tokens = people
        .iter()
        .map(|p| {
            OperatorToken::labelled(format!("{p}-token-0123456789abcdef"), format!("{p}-laptop"))
        })
        .chain([OperatorToken::new(ADMIN)])
        .collect();
    s.people = people
        .iter()
        .map(|p| person(p, &format!("{p}-laptop")))
        .collect();
    let mut app = crate::support::spawn_on(s, store).await;
    app.token = Some(ADMIN.into());
    let bodies: Vec<Value> = names.iter().map(|p| json!({"person": p})).collect();
    let issued = futures_util::future::join_all(
        bodies.iter().map(|b| app.post("/v1/passkeys/enrolment", b)),
    )
    .await;
    for (s, body) in &issued {
        assert_eq!(*s, StatusCode::CREATED, "{body}");
    }
    let (_, listed) = app.get("/v1/passkeys").await;
    let mut waiting: Vec<&str> = listed["enrolment"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["person"].as_str().unwrap())
        .collect();
    waiting.sort_unstable();
    assert_eq!(waiting, names, "{listed}");
    let at = listed["enrolment"][0]["expires_at"]
        .as_str()
        .unwrap_or_default();
    assert!(
        at.parse::<jiff::Timestamp>().is_ok(),
        "not RFC 3339: {listed}"
    );
}
