//! Enrolment codes: what a person's first passkey needs besides their labelled operator token
//! (`passkeys.first_passkey = "code"`, the default), so that a stolen token alone cannot
//! register the thief's passkey for a person who has none and then answer their `step_up`
//! approvals.
//!
//! An administrator (an operator token without a label) issues a code for one person
//! (`POST /v1/passkeys/enrolment`, `imrelay passkeys enrol NAME`, the inbox's Passkeys view)
//! and gives it to them by another way than the token travelled. The code is 16 characters
//! of Crockford's base32 (80 random bits, shown `ABCD-EFGH-JKMN-PQRS`), good for
//! `passkeys.enrolment_code_ttl_secs` (15 minutes by default), bound to that person, and kept
//! only as its SHA-256 (found by comparing digests in constant time). The inbox sends it with
//! the first step of the registration (`"code"` in `POST /v1/passkeys/register`), which
//! checks it; the second step (`POST /v1/passkeys`) uses it up once the browser's new
//! credential is verified, so a cancelled browser prompt does not waste it. Using it is
//! written to the kept codes only over the list as it was read (`kept::update`), so of two
//! replicas racing, one wins.
//!
//! Refused, each with its own message (`403 enrolment_code_required` or
//! `enrolment_code_refused`, `field` `code`): no code, a wrong one, one issued for another
//! person, one used already, replaced by a newer one, or expired. A new code for a person
//! replaces their earlier one. At most [`MAX_PER_PERSON`] codes are kept a person and
//! [`MAX_ALL`] in all (used, replaced and expired ones for a day, to say so when they are
//! tried). Issuing, using and every refusal are in the audit trail (`passkey`, outcomes
//! `code_issued`, `code_used`, `code_refused`).
//!
//! A person's typed codes that imrelay never issued are counted: after [`MAX_WRONG`] in
//! [`WRONG_WINDOW`] (15 minutes), their further tries are refused at once (`429
//! too_many_enrolment_codes`, saying when they may try again) without being compared, so a
//! token's holder cannot guess codes at the speed of the network. The count is this server's
//! (each replica keeps its own), bounded to [`MAX_TRACKED`] people.
//!
//! An administrator's own first passkey needs no code: the administrator's token is the root
//! of trust that issues codes.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use rand::RngCore;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::AppState;
use super::error::ApiError;
use crate::config::phone::FirstPasskey;
use crate::interaction::{ValidationError, Via};
use crate::sync::LockExt;
use crate::wire::Principal;

/// The store key of the issued codes (a JSON list).
pub const KEY: &str = "passkeys.enrolment";
/// Most codes kept for one person (one good at a time; the others say why they are not).
pub const MAX_PER_PERSON: usize = 4;
/// Most codes kept in all.
pub const MAX_ALL: usize = 1000;
/// How long a used, replaced or expired code is kept to say so (ms).
const KEPT_AFTER_MS: i64 = 24 * 3600 * 1000;
/// Crockford's base32 alphabet: no I, L, O or U to misread.
const ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
/// Characters in a code.
const CODE_CHARS: usize = 16;
/// The error code of a first passkey without an enrolment code.
pub const CODE_REQUIRED: &str = "enrolment_code_required";
/// The error code of an enrolment code that was refused.
pub const CODE_REFUSED: &str = "enrolment_code_refused";

/// The error code of a person who has typed too many codes never issued lately.
pub const TOO_MANY: &str = "too_many_enrolment_codes";
/// Codes never issued a person may type in [`WRONG_WINDOW`] before further tries are refused.
pub const MAX_WRONG: usize = 5;
/// The window of [`MAX_WRONG`].
pub const WRONG_WINDOW: Duration = Duration::from_secs(15 * 60);
/// Most people whose refused codes are counted at once (the oldest counts go first).
pub const MAX_TRACKED: usize = 1024;

/// The codes never issued that each person typed lately, on this server.
#[derive(Debug, Default)]
pub struct Tries {
    // A std mutex: a map update, never held across an await.
    refused: Mutex<HashMap<String, Vec<Instant>>>,
}

impl Tries {
    /// When `who` may type a code again, if they have typed [`MAX_WRONG`] never issued within
    /// [`WRONG_WINDOW`] of `now`.
    fn barred_until(&self, who: &str, now: Instant) -> Option<Instant> {
        // A person's list holds their last MAX_WRONG at most, the oldest first.
        let map = self.refused.locked();
        let oldest = *map.get(who).filter(|ts| ts.len() >= MAX_WRONG)?.first()?;
        (now.duration_since(oldest) < WRONG_WINDOW).then(|| oldest + WRONG_WINDOW)
    }

    /// Counts a code never issued, typed by `who` at `now`.
    fn refused(&self, who: &str, now: Instant) {
        let mut map = self.refused.locked();
        map.retain(|_, ts| {
            ts.retain(|t| now.duration_since(*t) < WRONG_WINDOW);
            !ts.is_empty()
        });
        if !map.contains_key(who) && map.len() >= MAX_TRACKED {
            let oldest = map
                .iter()
                .min_by_key(|(_, ts)| ts.last().copied())
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                map.remove(&k);
            }
        }
        let ts = map.entry(who.to_string()).or_default();
        ts.push(now);
        // Only the last MAX_WRONG decide: a person's list stays that short.
        if ts.len() > MAX_WRONG {
            ts.remove(0);
        }
    }
}

/// One issued code, as kept.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Code {
    /// Whose first passkey it allows.
    person: String,
    /// Its SHA-256 (hex) over [`normal`]'s form.
    digest: String,
    /// Who issued it.
    issued_by: String,
    /// When (ms since the epoch).
    issued_at: i64,
    /// Until when it is good (ms).
    expires_at: i64,
    /// When it was used (ms), if it was.
    #[serde(default)]
    used_at: Option<i64>,
    /// When a newer code for the same person replaced it (ms), if one did.
    #[serde(default)]
    replaced_at: Option<i64>,
}

impl Code {
    fn live(&self, now: i64) -> bool {
        self.used_at.is_none() && self.replaced_at.is_none() && now < self.expires_at
    }

    /// When it stopped being good (or will).
    fn ended(&self) -> i64 {
        self.used_at
            .or(self.replaced_at)
            .unwrap_or(self.expires_at)
            .min(self.expires_at)
    }
}

/// A fresh code: 16 characters of [`ALPHABET`], in groups of four.
fn make() -> String {
    let mut bytes = [0u8; CODE_CHARS];
    rand::rng().fill_bytes(&mut bytes);
    let chars: Vec<char> = bytes
        .iter()
        .map(|b| char::from(ALPHABET[usize::from(b & 31)]))
        .collect();
    chars
        .chunks(4)
        .map(|c| c.iter().collect::<String>())
        .collect::<Vec<_>>()
        .join("-")
}

/// A typed code in its one form: upper case, no dashes or spaces, `O` read as `0` and `I`,
/// `L` as `1` (as Crockford's base32 reads them); `None` when it cannot be a code.
fn normal(typed: &str) -> Option<String> {
    let out: String = typed
        .chars()
        .filter(|c| !matches!(c, '-' | ' '))
        .map(|c| match c.to_ascii_uppercase() {
            'O' => '0',
            'I' | 'L' => '1',
            c => c,
        })
        .collect();
    (out.len() == CODE_CHARS && out.bytes().all(|b| ALPHABET.contains(&b))).then_some(out)
}

fn digest(normal: &str) -> String {
    let mut h = Sha256::new();
    h.update(b"imrelay passkey enrolment code\n");
    h.update(normal.as_bytes());
    hex::encode(h.finalize())
}

async fn load(state: &AppState) -> Result<Vec<Code>, ApiError> {
    super::kept::load(state, KEY, "enrolment codes").await
}

/// Changes the kept codes with `change` (see [`super::kept::update`]).
async fn update<R, E>(
    state: &AppState,
    change: impl FnMut(&mut Vec<Code>) -> Result<R, E>,
) -> Result<Result<R, E>, ApiError> {
    super::kept::update(state, KEY, "enrolment codes", change).await
}

/// The names people sign in to the inbox as: each labelled operator token's person (or its
/// label).
fn people(state: &AppState) -> BTreeSet<String> {
    state
        .settings
        .auth
        .operator_tokens
        .iter()
        .filter_map(|t| t.label.as_deref())
        .map(|label| super::operator::label_name(state, label))
        .collect()
}

fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

fn rfc3339(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default()
}

/// Drops what is no longer worth keeping: ended more than a day ago, then past the bounds
/// (the oldest that are no longer good first).
fn prune(all: &mut Vec<Code>, now: i64) {
    all.retain(|c| c.live(now) || now - c.ended() < KEPT_AFTER_MS);
    all.sort_by_key(|c| c.issued_at);
    let mut by_person: HashMap<String, usize> = Default::default();
    for c in all.iter().rev() {
        *by_person.entry(c.person.clone()).or_default() += 1;
    }
    let mut k = 0;
    while k < all.len() {
        let n = by_person.get(&all[k].person).copied().unwrap_or(0);
        if !all[k].live(now) && (n > MAX_PER_PERSON || all.len() > MAX_ALL) {
            by_person.insert(all[k].person.clone(), n - 1);
            all.remove(k);
        } else {
            k += 1;
        }
    }
}

/// The body of `POST /v1/passkeys/enrolment`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IssueBody {
    /// Whose first passkey the code allows (a `[[people]]` name, or a token's label).
    pub person: String,
}

/// Whether `principal` may issue a code for `body`'s person now: an administrator's token,
/// codes in use (`passkeys.first_passkey = "code"`), and someone who signs in to the inbox
/// as that person. The person's name, trimmed.
pub fn may_issue(
    state: &AppState,
    principal: &Principal,
    body: &IssueBody,
) -> Result<String, ApiError> {
    if principal.label().is_some() {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "administrator_only",
            "only an administrator's token (an operator token without a label) issues \
             enrolment codes",
        ));
    }
    if state.settings.passkeys.first_passkey != FirstPasskey::Code {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "enrolment_codes_off",
            "passkeys.first_passkey = \"token\": a first passkey needs no enrolment code here \
             (the operator token alone registers it); set it to \"code\" to require one",
        ));
    }
    let who = body.person.trim().to_string();
    if who.is_empty() || who.chars().count() > 128 || who.chars().any(char::is_control) {
        return Err(ValidationError::new(
            "person",
            "a person's name: 1 to 128 characters, no control characters",
        )
        .into());
    }
    let known = people(state);
    if known.contains(&who) {
        return Ok(who);
    }
    let listed: Vec<&str> = known.iter().map(String::as_str).collect();
    let those = if listed.is_empty() {
        "there are none".to_string()
    } else {
        format!("those who do: {}", listed.join(", "))
    };
    Err(ApiError::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "unknown_person",
        format!(
            "nobody signs in to the inbox as {who:?}: no labelled operator token answers as \
             them ({those}). Give them a token with a label in auth.operator_tokens and list \
             the label on their [[people]] entry (operator = [\"{who}-laptop\"])"
        ),
    )
    .with("field", "person"))
}

/// Issues a code for `who`'s first passkey, by `admin`, replacing their earlier one:
/// `{"person","code","expires_at","expires_in_secs"}`. Audited.
pub async fn issue(state: &AppState, admin: &str, who: &str) -> Result<Value, ApiError> {
    let ttl_secs = state.settings.passkeys.enrolment_code_ttl_secs;
    let now = now_ms();
    let code = make();
    let ttl_ms = i64::try_from(ttl_secs.saturating_mul(1000)).unwrap_or(i64::MAX);
    let expires_at = now.saturating_add(ttl_ms);
    let replaced = update(state, |all| {
        prune(all, now);
        if all.iter().filter(|c| c.live(now)).count() >= MAX_ALL {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "too_many_codes",
                format!(
                    "{MAX_ALL} enrolment codes are waiting to be used: wait until some expire \
                     ({ttl_secs} s at most)"
                ),
            ));
        }
        let mut replaced = false;
        for c in all.iter_mut().filter(|c| c.person == who && c.live(now)) {
            c.replaced_at = Some(now);
            replaced = true;
        }
        all.push(Code {
            person: who.to_string(),
            digest: digest(&normal(&code).unwrap_or_default()),
            issued_by: admin.to_string(),
            issued_at: now,
            expires_at,
            used_at: None,
            replaced_at: None,
        });
        prune(all, now);
        Ok(replaced)
    })
    .await??;
    let mut detail = format!(
        "enrolment code for {who}'s first passkey, good until {}",
        rfc3339(expires_at)
    );
    if replaced {
        detail.push_str("; it replaces their earlier one");
    }
    state
        .registry
        .audit_passkey(None, admin, &Via::api(), "code_issued", &detail)
        .await?;
    Ok(json!({
        "person": who,
        "code": code,
        "expires_at": rfc3339(expires_at),
        "expires_in_secs": ttl_secs,
    }))
}

/// The codes still good, for an administrator's listing (never the codes themselves), their
/// times in RFC 3339 as [`issue`] gives them.
pub async fn waiting(state: &AppState) -> Result<Vec<Value>, ApiError> {
    let now = now_ms();
    Ok(load(state)
        .await?
        .iter()
        .filter(|c| c.live(now))
        .map(|c| {
            json!({
                "person": c.person,
                "issued_by": c.issued_by,
                "issued_at": rfc3339(c.issued_at),
                "expires_at": rfc3339(c.expires_at),
            })
        })
        .collect())
}

/// A refusal of `who`'s code for `why`, audited: the error to answer with.
async fn refuse(state: &AppState, who: &str, code: &'static str, why: String) -> ApiError {
    refuse_as(state, who, StatusCode::FORBIDDEN, code, why).await
}

/// [`refuse`] with the answer's `status`.
async fn refuse_as(
    state: &AppState,
    who: &str,
    status: StatusCode,
    code: &'static str,
    why: String,
) -> ApiError {
    let via = Via::desktop();
    if let Err(e) = state
        .registry
        .audit_passkey(None, who, &via, "code_refused", &why)
        .await
    {
        return e.into();
    }
    ApiError::new(status, code, why).with("field", "code")
}

/// The first step of `who`'s first passkey: checks `typed`, their enrolment code, without
/// using it up; its digest, for [`redeem`] at the second step.
pub async fn check(state: &AppState, who: &str, typed: Option<&str>) -> Result<String, ApiError> {
    let typed = typed.map(str::trim).filter(|t| !t.is_empty());
    if typed.is_some()
        && let Some(until) = state
            .passkeys
            .enrolment_tries
            .barred_until(who, Instant::now())
    {
        let wait = until.saturating_duration_since(Instant::now()).as_secs() / 60 + 1;
        let why = format!(
            "{MAX_WRONG} enrolment codes typed for {who} in the last {} minutes were not ones \
             imrelay issued: try again in {wait} minute(s), with the code exactly as an administrator gave it",
            WRONG_WINDOW.as_secs() / 60
        );
        return Err(refuse_as(state, who, StatusCode::TOO_MANY_REQUESTS, TOO_MANY, why).await);
    }
    compare(state, who, typed).await
}

/// [`check`]'s comparison of `typed` with the issued codes.
async fn compare(state: &AppState, who: &str, typed: Option<&str>) -> Result<String, ApiError> {
    let ask = "ask an administrator for a new one (imrelay passkeys enrol NAME, or the inbox's \
               Passkeys view with an administrator's token)";
    let Some(typed) = typed else {
        let why = format!(
            "{who} has no passkey yet, and the first needs an enrolment code from an \
             administrator (imrelay passkeys enrol {who}, or the inbox's Passkeys view with an \
             administrator's token): enter it with the passkey's name"
        );
        return Err(refuse(state, who, CODE_REQUIRED, why).await);
    };
    let wrong =
        format!("this enrolment code is not one imrelay issued (mistyped?): check it, or {ask}");
    // A code imrelay never issued is what guessing looks like: counted against the person.
    let guessed = || state.passkeys.enrolment_tries.refused(who, Instant::now());
    let Some(n) = normal(typed) else {
        guessed();
        return Err(refuse(state, who, CODE_REFUSED, wrong).await);
    };
    let d = digest(&n);
    let now = now_ms();
    let all = load(state).await?;
    // Every digest is compared, in constant time each.
    let found = all.iter().fold(None, |found, c| {
        if bool::from(c.digest.as_bytes().ct_eq(d.as_bytes())) {
            Some(c)
        } else {
            found
        }
    });
    let why = match found {
        None => {
            guessed();
            wrong
        }
        Some(c) if c.person != who => format!(
            "this enrolment code was issued for another person: a code registers the first \
             passkey of the person it was issued for only; {ask}"
        ),
        Some(c) if c.used_at.is_some() => format!(
            "this enrolment code was used already ({}): a code registers one passkey; {ask}",
            rfc3339(c.used_at.unwrap_or_default())
        ),
        Some(c) if c.replaced_at.is_some() => format!(
            "this enrolment code was replaced by a newer one for {who} ({}): use the newest, or {ask}",
            rfc3339(c.replaced_at.unwrap_or_default())
        ),
        Some(c) if now >= c.expires_at => format!(
            "this enrolment code expired at {}: {ask}",
            rfc3339(c.expires_at)
        ),
        Some(_) => return Ok(d),
    };
    Err(refuse(state, who, CODE_REFUSED, why).await)
}

/// The second step: uses up `who`'s code of digest `d` (checked by [`check`]); refused if it
/// was used (by another attempt or replica), replaced or expired meanwhile.
pub async fn redeem(state: &AppState, who: &str, d: &str) -> Result<(), ApiError> {
    let now = now_ms();
    let gone = || "the enrolment code is gone (replaced or pruned): ask for a new one".to_string();
    let meanwhile = || {
        "the enrolment code was used, replaced or expired while the passkey was made: ask \
         for a new one"
            .to_string()
    };
    // Used once, whichever attempt or replica gets here first: the list is written back only
    // over what was read, and a code used meanwhile is no longer live.
    let used = update(state, |all| {
        let Some(c) = all.iter_mut().find(|c| c.person == who && c.digest == d) else {
            return Err(gone());
        };
        if !c.live(now) {
            return Err(meanwhile());
        }
        c.used_at = Some(now);
        Ok(c.issued_by.clone())
    })
    .await?;
    let issued_by = match used {
        Ok(by) => by,
        Err(why) => return Err(refuse(state, who, CODE_REFUSED, why).await),
    };
    let detail = format!("enrolment code issued by {issued_by} for {who}'s first passkey");
    state
        .registry
        .audit_passkey(None, who, &Via::desktop(), "code_used", &detail)
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_reads_back_however_it_is_typed_and_nothing_else_does() {
        let c = make();
        assert_eq!(c.len(), 19, "{c}");
        let n = normal(&c).unwrap();
        assert_eq!(normal(&c.to_lowercase().replace('-', " ")), Some(n.clone()));
        assert_eq!(normal("ABCD-EFGH-JKMN-PQRO"), normal("abcd efgh jkmn pqr0"));
        assert_eq!(
            normal("ABCD-EFGH-JKMN-PQRU"),
            None,
            "U is not in the alphabet"
        );
        assert_eq!(normal("ABCD-EFGH-JKMN"), None);
        assert_ne!(digest(&n), digest(&normal(&make()).unwrap()));
    }

    #[test]
    fn refused_codes_bar_their_person_for_the_window_only_and_the_count_is_bounded() {
        let tries = Tries::default();
        let t0 = Instant::now();
        let at = |secs: u64| t0 + Duration::from_secs(secs);
        for k in 0..MAX_WRONG as u64 - 1 {
            tries.refused("alice", at(k * 60));
        }
        assert_eq!(
            tries.barred_until("alice", at(300)),
            None,
            "one short of the bar"
        );
        tries.refused("alice", at(300));
        let until = tries.barred_until("alice", at(301));
        assert_eq!(
            until,
            Some(at(WRONG_WINDOW.as_secs())),
            "the oldest of the five ages out"
        );
        assert_eq!(
            tries.barred_until("bob", at(301)),
            None,
            "another person is not barred"
        );
        assert_eq!(
            tries.barred_until("alice", at(WRONG_WINDOW.as_secs())),
            None
        );
        for k in 0..MAX_TRACKED + 10 {
            tries.refused(&format!("p{k}"), at(400));
        }
        let map = tries.refused.locked();
        assert!(map.len() <= MAX_TRACKED, "{}", map.len());
        assert!(map.values().all(|ts| ts.len() <= MAX_WRONG));
    }

    fn code(person: &str, issued_at: i64, used: bool) -> Code {
        Code {
            person: person.into(),
            digest: String::new(),
            issued_by: "administrator".into(),
            issued_at,
            expires_at: issued_at + 900_000,
            used_at: used.then_some(issued_at + 1),
            replaced_at: None,
        }
    }

    #[test]
    fn what_is_kept_is_bounded_a_person_and_in_all_and_good_codes_stay() {
        let now = 10 * KEPT_AFTER_MS;
        let mut all: Vec<Code> = (0..10).map(|k| code("ann", now - 10 + k, true)).collect();
        all.push(code("ann", now, false));
        all.push(code("bob", now - 2 * KEPT_AFTER_MS, true));
        prune(&mut all, now);
        assert_eq!(
            all.iter().filter(|c| c.person == "bob").count(),
            0,
            "a day old"
        );
        assert_eq!(all.len(), MAX_PER_PERSON);
        assert!(all.iter().any(|c| c.live(now)), "the good one stays");
        let mut many: Vec<Code> = (0..MAX_ALL as i64 + 5)
            .map(|k| code(&format!("p{k}"), now - 10_000 + k, k % 2 == 0))
            .collect();
        prune(&mut many, now);
        assert_eq!(many.len(), MAX_ALL);
    }
}
