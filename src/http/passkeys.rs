//! Passkeys (WebAuthn) for answers that need one (`step_up` on a route or an ask rule).
//!
//! A person registers a passkey in the inbox: `POST /v1/passkeys/register` gives the
//! browser a challenge, `POST /v1/passkeys` takes the new credential. The person is the
//! operator token's (a labelled token's person, or the label; the administrator's token is
//! `ADMINISTRATOR`). The credentials are kept in the store as one small named value
//! ([`KEY`]): memory, SQLite and PostgreSQL alike, at most [`MAX_PER_PERSON`] a person and
//! [`MAX_ALL`] in all. Only the public key, its id, counter and label are kept.
//!
//! To answer an interaction that needs a passkey, the inbox asks for a challenge bound to that
//! interaction and that person (`POST /v1/interactions/{id}/passkey`), has the browser sign it
//! (`navigator.credentials.get`), and sends the assertion with the answer
//! (`"passkey": {"challenge", "credential"}`). The challenge is used up by the first attempt,
//! right or wrong, so a replayed assertion finds no challenge and is refused. Challenges live
//! in this process's memory (at most [`MAX_CHALLENGES`], each for [`CHALLENGE_TTL`]): with
//! several replicas, both steps must reach the same one (sticky sessions), or the second says
//! so (`passkey_challenge_unknown`) and the inbox starts again.
//!
//! A person who has a passkey adds another only with an assertion made by one they have
//! (`POST /v1/passkeys/assert` gives the challenge, `"passkey": {"challenge", "credential"}`
//! in the body of `POST /v1/passkeys/register` carries it): a stolen operator token alone
//! cannot add the thief's passkey to a person who has one. An administrator's token needs
//! none (it removes a lost passkey, after which the person registers a first one again).
//!
//! A person's first passkey needs, besides their labelled token, a single-use enrolment code
//! an administrator issued for them (`"code"` in `POST /v1/passkeys/register`; see
//! [`super::enrolment`]), unless `passkeys.first_passkey = "token"`.
//!
//! Every registration, assertion, refusal and removal is in the audit trail
//! ([`crate::interaction::ports::audit::Action::Passkey`]). An administrator's token lists
//! and removes anyone's passkeys (`imrelay passkeys`); a person lists and removes their own.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use webauthn_rs::prelude::{
    Passkey, PasskeyAuthentication, PasskeyRegistration, PublicKeyCredential,
    RegisterPublicKeyCredential, Webauthn, WebauthnBuilder,
};

use super::AppState;
use super::error::ApiError;
use super::extract::{ApiJson, ApiPath};
use super::operator::person;
use crate::config::phone::FirstPasskey;
use crate::interaction::{InteractionId, Via};
use crate::sync::LockExt;
use crate::wire::Principal;
use crate::wire::answer::{PasskeyBody, path_id};

/// The store key of the registered credentials (a JSON list).
pub const KEY: &str = "passkeys.credentials";
/// Most passkeys one person may have.
pub const MAX_PER_PERSON: usize = 10;
/// Most passkeys in all.
pub const MAX_ALL: usize = 1000;
/// Most challenges waiting for their second step at once; the oldest goes first.
pub const MAX_CHALLENGES: usize = 1024;
/// How long a challenge waits for its second step.
pub const CHALLENGE_TTL: Duration = Duration::from_secs(300);
/// The error code of an answer whose passkey assertion was refused.
pub const PASSKEY_REFUSED: &str = "passkey_refused";

/// One registered passkey, as kept.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Stored {
    /// The credential's id (base64url), as the browser names it.
    pub id: String,
    /// Whose it is.
    pub person: String,
    /// What its owner called it ("laptop").
    pub label: String,
    /// When it was registered (ms since the epoch).
    pub created_at: i64,
    /// When it last made an assertion (ms), if ever.
    #[serde(default)]
    pub last_used_at: Option<i64>,
    /// The public key and counter.
    pub passkey: Passkey,
}

impl Stored {
    /// What a listing shows of it (no key material).
    fn summary(&self) -> Value {
        json!({
            "id": self.id,
            "person": self.person,
            "label": self.label,
            "created_at": self.created_at,
            "last_used_at": self.last_used_at,
        })
    }
}

/// A challenge waiting for its second step.
enum Pending {
    Register {
        person: String,
        label: String,
        /// The digest of the enrolment code this first passkey is allowed by, to use up
        /// when the credential is kept.
        code: Option<String>,
        state: Box<PasskeyRegistration>,
    },
    Assert {
        person: String,
        /// The interaction it answers; `None`: it proves a passkey to register another.
        interaction: Option<InteractionId>,
        state: Box<PasskeyAuthentication>,
    },
}

/// The relying party and the challenges waiting for their second step.
pub struct Passkeys {
    webauthn: Result<Webauthn, String>,
    /// The origin passkeys are made for (`https://imrelay.example.com`), when configured.
    origin: Option<String>,
    /// The relying party's id (`localhost`), when passkeys can be used.
    rp_id: Option<String>,
    pending: Mutex<HashMap<String, (Instant, Pending)>>,
    /// The enrolment codes never issued that each person typed lately.
    pub(super) enrolment_tries: super::enrolment::Tries,
}

impl Passkeys {
    /// Passkeys for the inbox at `origin` (the relying party is its host name); `Err`
    /// carries why passkeys cannot work (an IP address), which every passkey request then
    /// answers with.
    pub fn new(origin: Result<crate::config::phone::PasskeyOrigin, String>) -> Self {
        let shown = origin
            .as_ref()
            .ok()
            .filter(|o| !o.any_port)
            .map(|o| o.origin.origin().ascii_serialization());
        let rp_id = origin.as_ref().ok().map(|o| o.rp_id.clone());
        let webauthn = origin.and_then(|o| {
            WebauthnBuilder::new(&o.rp_id, &o.origin)
                .map(|b| b.rp_name("imrelay").allow_any_port(o.any_port))
                .and_then(|b| b.build())
                .map_err(|e| format!("passkeys cannot use {}: {e}", o.origin))
        });
        Self {
            webauthn,
            origin: shown,
            rp_id,
            pending: Mutex::new(HashMap::new()),
            enrolment_tries: super::enrolment::Tries::default(),
        }
    }

    fn webauthn(&self) -> Result<&Webauthn, ApiError> {
        self.webauthn
            .as_ref()
            .map_err(|why| ApiError::new(StatusCode::CONFLICT, "passkeys_unavailable", why.clone()))
    }

    /// Keeps `p` under a fresh id, dropping expired challenges and, past the bound, the oldest.
    fn hold(&self, p: Pending) -> String {
        let mut bytes = [0u8; 32];
        rand::RngCore::fill_bytes(&mut rand::rng(), &mut bytes);
        let id = URL_SAFE_NO_PAD.encode(bytes);
        let now = Instant::now();
        let mut pending = self.pending.locked();
        pending.retain(|_, (at, _)| now.duration_since(*at) < CHALLENGE_TTL);
        while pending.len() >= MAX_CHALLENGES {
            let Some(oldest) = pending
                .iter()
                .min_by_key(|(_, (at, _))| *at)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            pending.remove(&oldest);
        }
        pending.insert(digest(&id), (now, p));
        id
    }

    /// The challenge `id`, taken out (used once, whatever comes of it).
    fn take(&self, id: &str) -> Result<Pending, ApiError> {
        let found = self.pending.locked().remove(&digest(id));
        match found {
            Some((at, p)) if at.elapsed() < CHALLENGE_TTL => Ok(p),
            _ => Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "passkey_challenge_unknown",
                "this passkey challenge is unknown, used already or expired (a replayed \
                 assertion, or one made on another replica): start again",
            )),
        }
    }
}

/// The challenge's id as it is kept: its SHA-256 (found by that, which no timing turns into
/// an id).
fn digest(id: &str) -> String {
    hex::encode(Sha256::digest(id.as_bytes()))
}

async fn load(state: &AppState) -> Result<Vec<Stored>, ApiError> {
    super::kept::load(state, KEY, "passkeys").await
}

/// `POST /v1/passkeys/enrolment` (`{"person": "alice"}`): an administrator issues a
/// single-use code for the first passkey of a person who has none (see
/// [`super::enrolment`]): `{"person","code","expires_at","expires_in_secs"}`.
pub async fn enrol(
    State(state): State<AppState>,
    principal: Principal,
    ApiJson(body): ApiJson<super::enrolment::IssueBody>,
) -> Result<Response, ApiError> {
    let who = super::enrolment::may_issue(&state, &principal, &body)?;
    if load(&state).await?.iter().any(|p| p.person == who) {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "has_passkey",
            format!(
                "{who} has a passkey already, and adds another with an assertion by it; if they \
                 lost it, remove it first (imrelay passkeys remove ID), then issue the code"
            ),
        )
        .with("field", "person"));
    }
    let issued = super::enrolment::issue(&state, &person(&state, &principal), &who).await?;
    Ok((StatusCode::CREATED, axum::Json(issued)).into_response())
}

/// Changes the kept passkeys with `change` (see [`super::kept::update`]).
async fn update<R, E>(
    state: &AppState,
    change: impl FnMut(&mut Vec<Stored>) -> Result<R, E>,
) -> Result<Result<R, E>, ApiError> {
    super::kept::update(state, KEY, "passkeys", change).await
}

/// `GET /v1/passkeys`: the administrator's token lists everyone's, a person's their own.
pub async fn list(
    State(state): State<AppState>,
    principal: Principal,
) -> Result<Response, ApiError> {
    let all = load(&state).await?;
    let me = principal.label().map(|_| person(&state, &principal));
    let shown: Vec<Value> = all
        .iter()
        .filter(|p| me.as_deref().is_none_or(|m| p.person == m))
        .map(Stored::summary)
        .collect();
    let by_code = state.settings.passkeys.first_passkey == FirstPasskey::Code;
    let mut out = json!({
        "passkeys": shown,
        "person": person(&state, &principal),
        "origin": state.passkeys.origin,
        "rp_id": state.passkeys.rp_id,
        "first_passkey": state.settings.passkeys.first_passkey,
        "needs_code": by_code && me.is_some() && shown.is_empty(),
    });
    if me.is_none() && by_code {
        out["enrolment"] = Value::Array(super::enrolment::waiting(&state).await?);
    }
    Ok(axum::Json(out).into_response())
}

/// The body of `POST /v1/passkeys/register`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegisterBody {
    /// What to call the passkey ("laptop"); default "passkey".
    label: Option<String>,
    /// An assertion by one of the person's passkeys (from `POST /v1/passkeys/assert`):
    /// needed when they have one, unless the token is an administrator's.
    passkey: Option<PasskeyBody>,
    /// The enrolment code an administrator issued for this person: needed for their first
    /// passkey with a labelled token (`passkeys.first_passkey = "code"`).
    code: Option<String>,
}

/// `POST /v1/passkeys/register`: the options for `navigator.credentials.create`.
pub async fn register(
    State(state): State<AppState>,
    principal: Principal,
    ApiJson(body): ApiJson<RegisterBody>,
) -> Result<Response, ApiError> {
    let webauthn = state.passkeys.webauthn()?;
    let label = body.label.unwrap_or_default();
    let label = label.trim();
    if label.chars().count() > 64 || label.chars().any(char::is_control) {
        return Err(crate::interaction::ValidationError::new(
            "label",
            "at most 64 characters, no control characters",
        )
        .into());
    }
    let label = if label.is_empty() { "passkey" } else { label }.to_string();
    let who = person(&state, &principal);
    let all = load(&state).await?;
    let mine: Vec<&Stored> = all.iter().filter(|p| p.person == who).collect();
    if mine.len() >= MAX_PER_PERSON || all.len() >= MAX_ALL {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "too_many_passkeys",
            format!(
                "{who} has {} passkeys ({} in all; at most {MAX_PER_PERSON} a person, \
                 {MAX_ALL} in all): remove one first",
                mine.len(),
                all.len()
            ),
        ));
    }
    if !mine.is_empty() && principal.label().is_some() {
        let Some(proof) = body.passkey else {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "passkey_required",
                format!(
                    "{who} has a passkey already: adding another needs an assertion with one \
                     of them (POST /v1/passkeys/assert), or an administrator's token"
                ),
            ));
        };
        check_assertion(&state, &who, None, proof).await?;
    }
    let code = if mine.is_empty()
        && principal.label().is_some()
        && state.settings.passkeys.first_passkey == FirstPasskey::Code
    {
        Some(super::enrolment::check(&state, &who, body.code.as_deref()).await?)
    } else {
        None
    };
    // The person's stable WebAuthn user handle: derived from their name.
    let handle = uuid::Uuid::from_slice(&Sha256::digest(who.as_bytes())[..16])
        .map_err(|e| internal(e.to_string()))?;
    let exclude = mine.iter().map(|p| p.passkey.cred_id().clone()).collect();
    let (options, reg) = webauthn
        .start_passkey_registration(handle, &who, &who, Some(exclude))
        .map_err(|e| internal(format!("passkey registration: {e}")))?;
    let challenge = state.passkeys.hold(Pending::Register {
        person: who,
        label,
        code,
        state: Box::new(reg),
    });
    Ok(axum::Json(json!({ "challenge": challenge, "options": options })).into_response())
}

/// The body of `POST /v1/passkeys`: the challenge's id and the new credential.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateBody {
    challenge: String,
    credential: Value,
}

/// `POST /v1/passkeys`: keeps the credential `navigator.credentials.create` made.
pub async fn create(
    State(state): State<AppState>,
    principal: Principal,
    ApiJson(body): ApiJson<CreateBody>,
) -> Result<Response, ApiError> {
    let webauthn = state.passkeys.webauthn()?;
    let who = person(&state, &principal);
    let Pending::Register {
        person,
        label,
        code,
        state: reg,
    } = state.passkeys.take(&body.challenge)?
    else {
        return Err(bad_challenge());
    };
    if person != who {
        return Err(bad_challenge());
    }
    let credential: RegisterPublicKeyCredential = serde_json::from_value(body.credential)
        .map_err(|e| crate::interaction::ValidationError::new("credential", e.to_string()))?;
    let via = Via::desktop();
    let passkey = match webauthn.finish_passkey_registration(&credential, &reg) {
        Ok(p) => p,
        Err(e) => {
            state
                .registry
                .audit_passkey(None, &who, &via, "refused", &format!("registration: {e}"))
                .await?;
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                PASSKEY_REFUSED,
                format!("the new passkey was refused: {e}"),
            ));
        }
    };
    let id = URL_SAFE_NO_PAD.encode(passkey.cred_id());
    let exists = || {
        ApiError::new(
            StatusCode::CONFLICT,
            "passkey_exists",
            "this passkey is registered already",
        )
    };
    if load(&state).await?.iter().any(|p| p.id == id) {
        return Err(exists());
    }
    if let Some(code) = &code {
        super::enrolment::redeem(&state, &who, code).await?;
    }
    let stored = Stored {
        id: id.clone(),
        person: who.clone(),
        label,
        created_at: jiff::Timestamp::now().as_millisecond(),
        last_used_at: None,
        passkey,
    };
    let summary = stored.summary();
    update(&state, |all| {
        if all.iter().any(|p| p.id == id) {
            return Err(exists());
        }
        all.push(stored.clone());
        Ok(())
    })
    .await??;
    state
        .registry
        .audit_passkey(None, &who, &via, "registered", &describe(&summary))
        .await?;
    Ok((StatusCode::CREATED, axum::Json(summary)).into_response())
}

/// `label (id abcdef12…)`, as the audit trail names a passkey.
fn describe(summary: &Value) -> String {
    let id = summary["id"].as_str().unwrap_or_default();
    format!(
        "{} (id {}…)",
        summary["label"].as_str().unwrap_or_default(),
        id.chars().take(12).collect::<String>()
    )
}

fn bad_challenge() -> ApiError {
    ApiError::new(
        StatusCode::FORBIDDEN,
        "passkey_challenge_unknown",
        "this challenge was made for another person or step: start again",
    )
}

/// `DELETE /v1/passkeys/{id}`: a person removes their own; the administrator's token anyone's
/// (a lost device).
pub async fn remove(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(id): ApiPath<String>,
) -> Result<Response, ApiError> {
    let who = person(&state, &principal);
    let admin = principal.label().is_none();
    let gone = update(&state, |all| {
        let Some(k) = all
            .iter()
            .position(|p| p.id == id && (admin || p.person == who))
        else {
            return Err(ApiError::not_found(format!(
                "no passkey with id {id:?} of yours"
            )));
        };
        Ok(all.remove(k))
    })
    .await??;
    let detail = format!("{} of {}", describe(&gone.summary()), gone.person);
    state
        .registry
        .audit_passkey(None, &who, &Via::api(), "removed", &detail)
        .await?;
    Ok(axum::Json(gone.summary()).into_response())
}

/// `POST /v1/interactions/{id}/passkey`: a challenge for answering interaction `id` with one
/// of the person's passkeys (the options for `navigator.credentials.get`).
pub async fn challenge(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(id): ApiPath<String>,
) -> Result<Response, ApiError> {
    let id = path_id(&id)?;
    if state.registry.get(&id).await?.is_none() {
        return Err(ApiError::not_found(format!("no interaction with id {id}")));
    }
    assertion_challenge(&state, &principal, Some(id)).await
}

/// `POST /v1/passkeys/assert`: a challenge for proving one of the person's passkeys before
/// registering another (the options for `navigator.credentials.get`).
pub async fn prove(
    State(state): State<AppState>,
    principal: Principal,
) -> Result<Response, ApiError> {
    assertion_challenge(&state, &principal, None).await
}

/// A challenge for an assertion by one of `principal`'s person's passkeys, for answering
/// `interaction` (`None`: for registering another passkey).
async fn assertion_challenge(
    state: &AppState,
    principal: &Principal,
    interaction: Option<InteractionId>,
) -> Result<Response, ApiError> {
    let webauthn = state.passkeys.webauthn()?;
    let who = person(state, principal);
    let mine: Vec<Passkey> = load(state)
        .await?
        .into_iter()
        .filter(|p| p.person == who)
        .map(|p| p.passkey)
        .collect();
    if mine.is_empty() {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "no_passkey",
            format!("{who} has no passkey: register one in the inbox (Passkeys) first"),
        ));
    }
    let (options, auth) = webauthn
        .start_passkey_authentication(&mine)
        .map_err(|e| internal(format!("passkey assertion: {e}")))?;
    let challenge = state.passkeys.hold(Pending::Assert {
        person: who,
        interaction,
        state: Box::new(auth),
    });
    Ok(axum::Json(json!({ "challenge": challenge, "options": options })).into_response())
}

/// Checks `body`, an assertion for answering interaction `id` as `principal`'s person: the
/// challenge is used up, its interaction and person must be these, and the signature one of
/// the person's passkeys'. Success and refusal are audited.
pub async fn verify(
    state: &AppState,
    principal: &Principal,
    id: &InteractionId,
    body: PasskeyBody,
) -> Result<(), ApiError> {
    let who = person(state, principal);
    check_assertion(state, &who, Some(id), body).await
}

/// Checks `body`, an assertion by `who` for answering `id` (`None`: for registering another
/// passkey), as [`verify`] says.
async fn check_assertion(
    state: &AppState,
    who: &str,
    id: Option<&InteractionId>,
    body: PasskeyBody,
) -> Result<(), ApiError> {
    let webauthn = state.passkeys.webauthn()?;
    let who = who.to_string();
    let via = Via::desktop();
    let (owner, interaction, auth) = match state.passkeys.take(&body.challenge) {
        Ok(Pending::Assert {
            person,
            interaction,
            state,
        }) => (person, interaction, state),
        Ok(Pending::Register { .. }) => {
            return Err(refused(state, id, &who, "not an assertion's challenge").await);
        }
        Err(e) => {
            state
                .registry
                .audit_passkey(id, &who, &via, "refused", "unknown or used challenge")
                .await?;
            return Err(e);
        }
    };
    if owner != who || interaction.as_ref() != id {
        let why = "the challenge was made for another person or interaction";
        return Err(refused(state, id, &who, why).await);
    }
    let credential: PublicKeyCredential = match serde_json::from_value(body.credential) {
        Ok(c) => c,
        Err(e) => return Err(refused(state, id, &who, &format!("not a credential: {e}")).await),
    };
    let result = match webauthn.finish_passkey_authentication(&credential, &auth) {
        Ok(r) => r,
        Err(e) => return Err(refused(state, id, &who, &e.to_string()).await),
    };
    let used = URL_SAFE_NO_PAD.encode(result.cred_id());
    let now = jiff::Timestamp::now().as_millisecond();
    let kept = update(state, |all| {
        let Some(p) = all.iter_mut().find(|p| p.id == used && p.person == who) else {
            return Err("the passkey was removed");
        };
        p.passkey.update_credential(&result);
        p.last_used_at = Some(now);
        Ok(describe(&p.summary()))
    })
    .await?;
    let mut detail = match kept {
        Ok(d) => d,
        Err(why) => return Err(refused(state, id, &who, why).await),
    };
    if id.is_none() {
        detail.push_str(", to register another");
    }
    state
        .registry
        .audit_passkey(id, &who, &via, "asserted", &detail)
        .await?;
    Ok(())
}

/// An assertion refused for `why`, audited: the error to answer with.
async fn refused(state: &AppState, id: Option<&InteractionId>, who: &str, why: &str) -> ApiError {
    if let Err(e) = state
        .registry
        .audit_passkey(id, who, &Via::desktop(), "refused", why)
        .await
    {
        return e.into();
    }
    ApiError::new(
        StatusCode::FORBIDDEN,
        PASSKEY_REFUSED,
        format!("the passkey assertion was refused: {why}"),
    )
}

fn internal(message: String) -> ApiError {
    ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
}
