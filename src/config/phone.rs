//! The phone's settings checked across sections: passkeys (`step_up` on a route or an ask
//! rule) need an inbox origin WebAuthn accepts as its relying party and people who answer
//! from the inbox with their own token; "desk first" (`desk_first_secs`) holds phones for
//! less than the deadline. Refused or warned at start-up and by `imrelay check-config`, each
//! with its fix.

use serde::{Deserialize, Serialize};

use super::Settings;
use super::teams::OPERATOR;

/// The shortest and longest an enrolment code may be good for (`enrolment_code_ttl_secs`).
pub const ENROLMENT_TTL_RANGE: std::ops::RangeInclusive<u64> = 60..=86_400;

/// `[passkeys]`
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct PasskeySettings {
    /// How a person's first passkey may be registered.
    pub first_passkey: FirstPasskey,
    /// How long an enrolment code is good, in seconds.
    pub enrolment_code_ttl_secs: u64,
}

impl Default for PasskeySettings {
    fn default() -> Self {
        Self {
            first_passkey: FirstPasskey::Code,
            enrolment_code_ttl_secs: 900,
        }
    }
}

/// What a person's first passkey needs besides their labelled operator token.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FirstPasskey {
    /// A single-use enrolment code an administrator issued for that person.
    #[default]
    Code,
    /// Nothing: the operator token alone (a stolen token registers the thief's passkey).
    Token,
}

/// The relying party passkeys are made for: its id (the inbox's host name) and the origin
/// the inbox is opened at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PasskeyOrigin {
    /// The relying party's id: the origin's host name (`localhost`, `imrelay.example.com`).
    pub rp_id: String,
    /// The origin the inbox is opened at (`http://localhost:8787`).
    pub origin: url::Url,
    /// Derived, not configured (`server.public_url` empty): `localhost` on any port is
    /// this machine, so the port is not checked (a server listening on port 0 learns its
    /// port only when it binds).
    pub any_port: bool,
}

/// Where passkeys are made and used: `server.public_url`, or `http://localhost:<port>` when
/// it is empty. An address that is an IP is refused: WebAuthn takes a domain name only.
pub fn passkey_origin(s: &Settings) -> Result<PasskeyOrigin, String> {
    let configured = s.server.public_url.trim().trim_end_matches('/');
    let port = s.server.listen.port();
    let text = if configured.is_empty() {
        format!("http://localhost:{port}")
    } else {
        configured.to_string()
    };
    let fix = format!(
        "set server.public_url = \"http://localhost:{port}\" (people on this machine) or the \
         server's DNS name (\"https://imrelay.example.com\"), and open the inbox there"
    );
    let origin = url::Url::parse(&text).map_err(|e| {
        format!("server.public_url = {configured:?} is not a URL ({e}): passkeys need the inbox's address; {fix}")
    })?;
    match origin.host() {
        Some(url::Host::Domain(d)) => Ok(PasskeyOrigin {
            rp_id: d.to_ascii_lowercase(),
            origin: url::Url::parse(&origin.origin().ascii_serialization())
                .map_err(|e| e.to_string())?,
            any_port: configured.is_empty(),
        }),
        _ => Err(format!(
            "server.public_url = {configured:?} names an IP address, and WebAuthn refuses an IP \
             as a passkey's relying party (browsers say \"This is an invalid domain\"); {fix}"
        )),
    }
}

/// Where `step_up` is asked for: `routes[0] ("prod")`, `policy[2] ("force-push")`.
fn step_up_places(s: &Settings) -> Vec<String> {
    let routes = s.routes.iter().enumerate().filter(|(_, r)| r.step_up);
    let rules = s.policy.iter().enumerate().filter(|(_, r)| r.step_up);
    routes
        .map(|(k, r)| format!("routes[{k}] ({:?}).step_up", r.name))
        .chain(rules.map(|(k, r)| format!("policy[{k}] ({:?}).step_up", r.name)))
        .collect()
}

/// The problems (refused), each a complete message.
pub(super) fn problems(s: &Settings) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(first) = step_up_places(s).first()
        && let Err(why) = passkey_origin(s)
    {
        out.push(format!(
            "{first} needs passkeys, which cannot work here: {why}"
        ));
    }
    let ttl = s.passkeys.enrolment_code_ttl_secs;
    if !ENROLMENT_TTL_RANGE.contains(&ttl) {
        out.push(format!(
            "passkeys.enrolment_code_ttl_secs = {ttl} is out of range: an enrolment code is good \
             for {} to {} seconds (900, 15 minutes, is usual)",
            ENROLMENT_TTL_RANGE.start(),
            ENROLMENT_TTL_RANGE.end()
        ));
    }
    for (k, r) in s.routes.iter().enumerate() {
        if r.desk_first_chats && r.desk_first_secs.is_none() {
            out.push(format!(
                "routes[{k}] ({:?}).desk_first_chats goes with desk_first_secs (how long the \
                 phones wait while an approver is at the desk): add desk_first_secs = 20",
                r.name
            ));
        }
    }
    out
}

/// Warnings: settings that may be meant but probably do not do what was meant.
pub(super) fn warnings(s: &Settings) -> Vec<String> {
    let mut out = Vec::new();
    if s.passkeys.first_passkey == FirstPasskey::Token
        && let Some(first) = step_up_places(s).first()
    {
        out.push(format!(
            "passkeys.first_passkey = \"token\" while {first} asks for a passkey: a person's \
             first passkey is registered with their operator token alone, so whoever steals a \
             labelled token registers their own passkey for a person who has none and answers \
             that person's step_up approvals. Set passkeys.first_passkey = \"code\" (the \
             default): an administrator then issues a single-use code for each person's first \
             passkey (imrelay passkeys enrol NAME)"
        ));
    }
    for (k, r) in s.routes.iter().enumerate() {
        let at = format!("routes[{k}] ({:?})", r.name);
        if let Some(hold) = r.desk_first_secs {
            let deadline = r
                .timeout_secs
                .unwrap_or(s.interactions.approval_timeout_secs);
            if hold >= deadline {
                out.push(format!(
                    "{at}.desk_first_secs = {hold} is not less than the deadline ({deadline} s): \
                     while an approver is at the desk, phones would hear of it only when it \
                     ends (a hold never runs past the deadline). Lower desk_first_secs (20 is \
                     usual)"
                ));
            }
        }
        if r.step_up && !r.approvers.is_empty() && !any_labelled(s, &r.approvers) {
            out.push(format!(
                "{at} has step_up, but none of its approvers has an operator token label \
                 ([[people]] operator = [\"alice-laptop\"]): nobody can register a passkey in \
                 the inbox as them, so nobody can answer it. Give each approver a labelled \
                 token (auth.operator_tokens) and list its label on them"
            ));
        }
    }
    out
}

/// Whether one of `approvers` (people or groups) answers from the inbox with a labelled token.
fn any_labelled(s: &Settings, approvers: &[String]) -> bool {
    let Ok(teams) = s.teams() else {
        return true;
    };
    let Ok(people) = teams.people.expand(approvers) else {
        return true;
    };
    people
        .names()
        .filter_map(|n| teams.people.person(n))
        .any(|p| p.ids_on(OPERATOR).next().is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(public_url: &str) -> Settings {
        let mut s = Settings::defaults().expect("the defaults load");
        s.server.public_url = public_url.into();
        s
    }

    #[test]
    fn a_passkey_origin_is_a_domain_name_never_an_ip() {
        let o = passkey_origin(&settings("")).unwrap();
        assert_eq!(o.rp_id, "localhost");
        assert_eq!(o.origin.as_str(), "http://localhost:8787/");
        let s = settings("https://Relay.example.com/inbox/");
        assert_eq!(passkey_origin(&s).unwrap().rp_id, "relay.example.com");
        let mut s = settings("http://127.0.0.1:8787");
        let e = passkey_origin(&s).unwrap_err();
        assert!(
            e.contains("IP address") && e.contains("http://localhost:8787"),
            "{e}"
        );
        assert!(problems(&s).is_empty(), "no route asks for a passkey");
        s.routes.push(super::super::teams::RouteSettings {
            name: "prod".into(),
            step_up: true,
            desk_first_secs: Some(900),
            ..Default::default()
        });
        let p = problems(&s);
        assert!(
            p[0].starts_with("routes[0] (\"prod\").step_up needs passkeys"),
            "{p:?}"
        );
        let w = warnings(&s);
        assert!(
            w[0].contains("desk_first_secs = 900 is not less than the deadline (300 s)"),
            "{w:?}"
        );
    }

    #[test]
    fn the_first_passkey_by_token_alone_is_warned_about_only_where_step_up_is_used() {
        let mut s = settings("http://localhost:8787");
        s.passkeys.first_passkey = FirstPasskey::Token;
        assert!(warnings(&s).is_empty(), "no step_up: nothing to warn of");
        s.routes.push(super::super::teams::RouteSettings {
            name: "prod".into(),
            step_up: true,
            ..Default::default()
        });
        let w = warnings(&s).join("\n");
        assert!(
            w.contains("passkeys.first_passkey = \"token\" while routes[0] (\"prod\").step_up")
                && w.contains("Set passkeys.first_passkey = \"code\""),
            "{w}"
        );
        s.passkeys.first_passkey = FirstPasskey::Code;
        assert!(warnings(&s).is_empty());
        s.passkeys.enrolment_code_ttl_secs = 30;
        let p = problems(&s).join("\n");
        assert!(
            p.contains("passkeys.enrolment_code_ttl_secs = 30 is out of range"),
            "{p}"
        );
    }
}
