//! The parity suite's channel-independent half: docs/channels.md's table of what each channel
//! offers, the rows it drives ([`Feature`]), each written once ([`drive`]), and what a
//! channel's harness does ([`Harness`]: start the server on the channel, find a prompt's
//! copy, press its buttons, see it change, ask `whoami`, edit a command).
//!
//! Shared by path by the two test binaries that hold harnesses: `tests/it/parity.rs` (every
//! channel with a loopback fake) and `tests/external/parity.rs` (the channels in
//! [`EXTERNAL`], tested against a real server: Matrix against Synapse). Each drives the ✅
//! cells of its channels; a channel with neither harness fails `tests/it/parity.rs`.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use imrelay::config::Settings;

use crate::support::TestApp;

/// The table: one row per feature, one column per registered channel (by its `platform`).
pub(crate) fn table() -> (Vec<String>, Vec<(String, Vec<String>)>) {
    let doc = include_str!("../../docs/channels.md");
    let lines: Vec<&str> = doc
        .split("## What each channel offers today")
        .nth(1)
        .expect("docs/channels.md has its table")
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .collect();
    let cells = |l: &str| -> Vec<String> {
        l.trim_matches('|')
            .split('|')
            .map(|c| c.trim().to_string())
            .collect()
    };
    let header = cells(lines[0]);
    let rows = lines[2..]
        .iter()
        .map(|l| {
            let c = cells(l);
            (c[0].clone(), c[1..].to_vec())
        })
        .collect();
    (header[1..].to_vec(), rows)
}

/// A row this suite drives through every channel that claims it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Feature {
    /// An approver allows one request and denies another from the prompt.
    ApproveDeny,
    /// Someone not allowed to answer is told the kit's one refusal text, and nothing changes.
    RefusalText,
    /// "Allow similar" allows and grants the proposed rule for the session.
    AllowSimilar,
    /// "Edit & approve" allows with the command as the person changed it.
    EditApprove,
    /// `whoami` from a chat not configured answers with the chat's and the sender's ids.
    Whoami,
    /// A vote that does not decide an approval yet shows on the channel's copy.
    VoteTally,
    /// With `locale = "zh_cn"`, the prompt is in Chinese: its deadline or Deny says 拒绝, and
    /// no English "Deny" or "Deadline" is left on it.
    Locale,
    /// Past `digest_after` (1) pending, a session's next requests are one digest, and its
    /// Approve all, confirmed, allows what it lists (and not the one posted on its own).
    Digest,
    /// A reply to a session's answered prompt is a message to the session, queued for it.
    Steer,
    /// With no place to post to (an empty `chats`), the channel starts, and `whoami` still
    /// tells a newcomer the ids to fill it with.
    EmptyChats,
    /// With `thread_replies`, the outcome is also said in reply to the prompt, in its thread.
    OutcomeInThread,
    /// With `thread_per = "session"`, two prompts of one session land in one thread, and
    /// another session's in another.
    ThreadPerSession,
    /// A burst the place's pace cannot post before the deadlines is gathered into the
    /// session's digest (with `digest_after` off), and the digest's Approve all allows it.
    Burst,
}

impl Feature {
    /// The feature a row of the table stands for, if the suite drives it.
    fn of_row(row: &str) -> Option<Self> {
        Some(match row {
            "Approve, deny" => Feature::ApproveDeny,
            "The same refusal text" => Feature::RefusalText,
            "\"Allow similar\"" => Feature::AllowSimilar,
            "Edit & approve" => Feature::EditApprove,
            "`whoami` tells the chat's and the sender's ids" => Feature::Whoami,
            "The vote tally on every copy" => Feature::VoteTally,
            "`locale` (English and Chinese)" => Feature::Locale,
            "Digests (`digest_after`)" => Feature::Digest,
            "A reply to a session's message steers it" => Feature::Steer,
            "Starts with an empty `chats` (learn ids first)" => Feature::EmptyChats,
            "The outcome in the message's thread" => Feature::OutcomeInThread,
            "One thread per agent session (`thread_per`)" => Feature::ThreadPerSession,
            "A burst gathered into a digest" => Feature::Burst,
            _ => return None,
        })
    }
}

/// Channels whose cells are driven by `tests/external/parity.rs` (a real server, which the
/// loopback fakes of `tests/it` do not stand in for), with that test's name.
pub(crate) const EXTERNAL: &[(&str, &str)] = &[(
    "matrix",
    "parity::matrix_every_claimed_cell_shows_through_a_real_synapse (tests/external/parity.rs)",
)];

/// Rows the suite does not drive yet, and the tests that check them channel by channel.
const CHECKED_ELSEWHERE: &[(&str, &str)] = &[
    (
        "The one settings vocabulary",
        "tests/it/config_checks.rs (aliases and their warnings)",
    ),
    (
        "A `step_up` approval links to its inbox card",
        "tests/it/{telegram,slack,discord,wecom,dingtalk}/passkey.rs, tests/it/ntfy.rs, feishu's, matrix's and push's unit tests",
    ),
    (
        "`connect_timeout_secs`",
        "each long-connection channel's settings tests",
    ),
];

/// Who presses a button.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Who {
    /// A configured approver.
    Approver,
    /// Someone the channel does not let answer.
    Stranger,
}

/// A button of a prompt, by what it does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Button {
    Allow,
    Deny,
    Similar,
}

/// A channel's copy of a prompt, as its fake holds it.
pub(crate) struct Copy {
    /// What a person reads on it.
    pub(crate) text: String,
    /// Everything the harness needs to press its buttons.
    pub(crate) raw: Value,
}

/// One channel running against its fake or its real server: what [`drive`] does with it.
pub(crate) trait Harness: Sized {
    /// How long an answer may take to reach the server.
    const PATIENCE: Duration = Duration::from_secs(10);

    /// The server with the channel named `name` on, pointed at a new fake (or a new room of
    /// the real server), and `more` settings.
    async fn start(name: &str, more: fn(&mut Settings)) -> (Self, TestApp);

    /// The first copy of the prompt of interaction `id`, whose text shows `command`.
    async fn copy(&self, id: &str, command: &str) -> Copy;

    /// Presses `button` on `copy` as `who`; returns what the person is told ("" when the
    /// message itself shows it).
    async fn press(&self, app: &TestApp, copy: &Copy, button: Button, who: Who) -> String;

    /// Waits until the channel's copy of interaction `id` (first seen as `copy`) shows
    /// `phrase`.
    async fn shows(&self, id: &str, copy: &Copy, phrase: &str);

    /// `whoami` sent from a chat no setting names: the answer, the chat's id and the
    /// sender's id it must tell.
    async fn whoami(&self, app: &TestApp) -> (String, String, String);

    /// "Edit & approve" on `copy` as the approver, with `command` in place of the agent's.
    async fn edit(&self, app: &TestApp, copy: &Copy, command: &str);

    /// The digest whose text shows `phrase` ("2 requests from session s-parity"), once it
    /// does (a channel that cannot change a message it sent waits for the session's digest).
    async fn digest(&self, phrase: &str) -> Copy;

    /// "Approve all" on `digest`, and its confirmation, as the approver.
    async fn approve_all(&self, app: &TestApp, digest: &Copy);

    /// The approver's reply to `copy` (a prompt of agent session `s-parity`), saying `text`.
    async fn steer(&self, app: &TestApp, copy: &Copy, text: &str);

    /// Waits until the outcome is said in reply to `copy`, in its thread, showing `phrase`.
    async fn outcome_in_thread(&self, copy: &Copy, phrase: &str);

    /// With `thread_per = "session"`: the thread the prompt of interaction `id` (whose text
    /// shows `command`) is posted in, in the first place the channel posts to, once it is.
    async fn thread(&self, id: &str, command: &str) -> String;

    /// A burst the channel's place cannot post in time at its pace (and so gathers into the
    /// session's digest with `digest_after` off): how many requests, made at once, and their
    /// `timeout_secs`. Few and short, with about a second of margin either way: each of them
    /// alone would be shown with the ten seconds of notice a request needs
    /// (`channels::digest_flow::MIN_NOTICE`), and the last ones, queued behind the others at
    /// the place's pace, would not.
    fn burst(&self) -> (usize, u64);

    /// Whether the harness finds a button on a Chinese copy too (the others' by its English
    /// label): with `locale` it is pressed, and what the person is told is checked.
    fn presses_in_chinese(&self) -> bool;
}

/// `make parity-votes` needs two people (a policy rule's quorum: no route, so every channel
/// posts it where it posts everything and lets its own approvers answer).
fn two_people_needed(s: &mut Settings) {
    s.policy = vec![imrelay::config::policy::PolicyRuleSettings {
        quorum: Some(2),
        ..imrelay::config::policy::PolicyRuleSettings::new(
            "pairs",
            imrelay::interaction::policy::Decision::Ask,
            &["Bash(make parity-votes)"],
        )
    }];
}

/// Every channel's `digest_after` set to 1: past one pending, a session's requests are
/// gathered; and in English (DingTalk's default is Chinese), for the digest's title.
fn digests_after_one(s: &mut Settings) {
    in_english(s);
    s.telegram.digest_after = 1;
    s.feishu.digest_after = 1;
    s.slack.digest_after = 1;
    s.wecom.digest_after = 1;
    s.dingtalk.digest_after = 1;
    s.ntfy.digest_after = 1;
    s.discord.digest_after = 1;
    s.matrix.digest_after = 1;
    s.push.digest_after = 1;
}

/// Every channel's `thread_replies` on.
fn thread_replies(s: &mut Settings) {
    s.telegram.thread_replies = true;
    s.feishu.thread_replies = true;
    s.slack.thread_replies = true;
    s.discord.thread_replies = true;
    s.matrix.thread_replies = true;
}

/// Every channel's `thread_per` set to one thread per agent session.
fn thread_per_session(s: &mut Settings) {
    use imrelay::channels::threads::ThreadPer;
    s.telegram.thread_per = ThreadPer::Session;
    s.feishu.thread_per = ThreadPer::Session;
    s.slack.thread_per = ThreadPer::Session;
    s.discord.thread_per = ThreadPer::Session;
    s.matrix.thread_per = ThreadPer::Session;
}

/// Every chat channel's list of places to post to emptied.
fn no_places(s: &mut Settings) {
    s.telegram.chats.clear();
    s.feishu.receivers.clear();
    s.slack.channels.clear();
    s.wecom.chats.clear();
    s.dingtalk.conversations.clear();
    s.discord.chats.clear();
    s.matrix.chats.clear();
}

/// Every channel's `locale` set to Chinese.
fn in_chinese(s: &mut Settings) {
    every_locale(s, imrelay::present::render::Locale::ZhCn);
}

/// Every channel's `locale` set to English.
fn in_english(s: &mut Settings) {
    every_locale(s, imrelay::present::render::Locale::EnUs);
}

/// Every channel's `locale` set to `locale`.
fn every_locale(s: &mut Settings, locale: imrelay::present::render::Locale) {
    s.slack.locale = locale;
    s.discord.locale = locale;
    s.feishu.locale = locale;
    s.dingtalk.locale = locale;
    s.wecom.locale = locale;
    s.matrix.locale = locale;
    s.telegram.locale = locale;
    s.ntfy.locale = locale;
    s.push.locale = locale;
}

/// Checks resolution `r` allowed the request through channel `name`.
fn allowed_via(name: &str, r: &Value) {
    assert_eq!(r["outcome"], "allowed", "{name}: {r}");
    assert!(
        r["via"]
            .as_str()
            .unwrap_or_default()
            .starts_with(name.trim_end_matches('s')),
        "{name}: {r}"
    );
}

/// Interaction `id` as the API shows it.
async fn status(app: &TestApp, id: &str) -> Value {
    let (s, body) = app.get(&format!("/v1/interactions/{id}")).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    body
}

/// Waits until interaction `id` is resolved, for at most `patience`; its resolution.
async fn resolved(app: &TestApp, id: &str, patience: Duration) -> Value {
    crate::support::eventually_within(&format!("{id} resolved"), patience, || async {
        let i = status(app, id).await;
        (i["status"] != "pending").then(|| i["resolution"].clone())
    })
    .await
}

/// A Bash call of a session (so "Allow similar" has a rule to offer).
fn call(id: &str, command: &str) -> Value {
    call_of("s-parity", id, command)
}

/// A Bash call of agent session `session`.
fn call_of(session: &str, id: &str, command: &str) -> Value {
    json!({"id": id, "tool_name": "Bash", "input": {"command": command},
           "session": session, "agent": "claude-code", "cwd": "/srv/shop"})
}

/// Creates `body`; its id.
async fn create(app: &TestApp, body: Value) -> String {
    let (s, created) = app.post("/v1/interactions", &body).await;
    assert_eq!(s, StatusCode::CREATED, "{created}");
    created["id"].as_str().unwrap().to_string()
}

/// Drives `feature` through channel `name`'s harness `H`; panics with what its fake (or
/// server) did not show.
pub(crate) async fn drive<H: Harness>(name: &str, feature: Feature) {
    let more: fn(&mut Settings) = match feature {
        Feature::VoteTally => two_people_needed,
        Feature::Locale => in_chinese,
        Feature::Digest => digests_after_one,
        Feature::EmptyChats => no_places,
        Feature::OutcomeInThread => thread_replies,
        Feature::ThreadPerSession => thread_per_session,
        Feature::Burst => in_english,
        _ => |_| {},
    };
    let (run, app) = H::start(name, more).await;
    match feature {
        Feature::ApproveDeny => {
            let id = create(&app, call("p-allow", "make parity-allow")).await;
            let copy = run.copy(&id, "make parity-allow").await;
            run.press(&app, &copy, Button::Allow, Who::Approver).await;
            allowed_via(name, &resolved(&app, &id, H::PATIENCE).await);
            let id = create(&app, call("p-deny", "make parity-deny")).await;
            let copy = run.copy(&id, "make parity-deny").await;
            run.press(&app, &copy, Button::Deny, Who::Approver).await;
            let r = resolved(&app, &id, H::PATIENCE).await;
            assert_eq!(r["outcome"], "denied", "{name}: {r}");
        }
        Feature::RefusalText => {
            let id = create(&app, call("p-refuse", "make parity-refuse")).await;
            let copy = run.copy(&id, "make parity-refuse").await;
            let told = run.press(&app, &copy, Button::Allow, Who::Stranger).await;
            // The kit's one text, in the channel's language.
            assert!(
                told.contains("You are not an approver for this")
                    || told.contains("你不在审批人名单中，无法处理此请求"),
                "{name}: told {told:?}"
            );
            assert_eq!(status(&app, &id).await["status"], "pending", "{name}");
        }
        Feature::AllowSimilar => {
            let id = create(&app, call("p-similar", "npm run test -- --watch")).await;
            let copy = run.copy(&id, "npm run test -- --watch").await;
            assert!(
                copy.text.contains("Bash(npm run test:*)"),
                "{name}: the rule is not shown: {}",
                copy.text
            );
            run.press(&app, &copy, Button::Similar, Who::Approver).await;
            let r = resolved(&app, &id, H::PATIENCE).await;
            assert_eq!(r["outcome"], "allowed", "{name}: {r}");
            let (_, grants) = app.get("/v1/grants").await;
            let g = &grants["grants"][0];
            assert_eq!(
                (g["rule"].as_str(), g["scope"].as_str(), g["via"].as_str()),
                (Some("Bash(npm run test:*)"), Some("session"), Some(name)),
                "{name}: {grants}"
            );
        }
        Feature::VoteTally => {
            let id = create(&app, call("p-votes", "make parity-votes")).await;
            let copy = run.copy(&id, "make parity-votes").await;
            let (s, body) = app
                .post(
                    &format!("/v1/interactions/{id}/respond"),
                    &json!({"decision": "allow", "by": "vera"}),
                )
                .await;
            assert_eq!(
                s,
                StatusCode::ACCEPTED,
                "{name}: a vote, not a decision: {body}"
            );
            run.shows(&id, &copy, "1 of 2").await;
        }
        Feature::Locale => {
            let id = create(&app, call("p-zh", "make parity-zh")).await;
            let copy = run.copy(&id, "make parity-zh").await;
            assert!(
                copy.text.contains("拒绝")
                    && !copy.text.contains("Deadline")
                    && !copy.text.contains("\"Deny\""),
                "{name}: not in Chinese: {}",
                copy.text
            );
            // What the person is told after a tap, where the channel tells them (the
            // harnesses that press a Chinese copy's buttons).
            if run.presses_in_chinese() {
                let told = run.press(&app, &copy, Button::Deny, Who::Approver).await;
                assert!(
                    told.is_empty() || !told.is_ascii(),
                    "{name}: told in English: {told:?}"
                );
                assert_eq!(
                    resolved(&app, &id, H::PATIENCE).await["outcome"],
                    "denied",
                    "{name}"
                );
            }
        }
        Feature::Whoami | Feature::EmptyChats => {
            let (reply, chat, sender) = run.whoami(&app).await;
            assert!(
                reply.contains(&chat) && reply.contains(&sender),
                "{name}: whoami told {reply:?}, not the chat {chat} and the sender {sender}"
            );
        }
        Feature::Digest => {
            let mut ids = Vec::new();
            for k in 0..3 {
                let command = format!("make parity-dg-{k}");
                ids.push(create(&app, call(&format!("p-dg{k}"), &command)).await);
            }
            // The first is posted on its own; the two past `digest_after` are one digest.
            run.copy(&ids[0], "make parity-dg-0").await;
            app.outbox_idle().await;
            let digest = run.digest("2 requests from session s-parity").await;
            run.approve_all(&app, &digest).await;
            for id in &ids[1..] {
                allowed_via(name, &resolved(&app, id, H::PATIENCE).await);
            }
            assert_eq!(
                status(&app, &ids[0]).await["status"],
                "pending",
                "{name}: the one posted on its own is not in the digest"
            );
        }
        Feature::Steer => {
            crate::support::claude_session_start(&app, "s-parity").await;
            let id = create(&app, call("p-steer", "make parity-steer")).await;
            let copy = run.copy(&id, "make parity-steer").await;
            // Answered first: a reply to a pending prompt may be its answer (a reason to deny).
            run.press(&app, &copy, Button::Allow, Who::Approver).await;
            allowed_via(name, &resolved(&app, &id, H::PATIENCE).await);
            run.steer(&app, &copy, "and then the linter").await;
            let queued =
                crate::support::eventually_within("the message queued", H::PATIENCE, || async {
                    let m = crate::support::queued_messages(&app, "s-parity").await;
                    (!m.is_empty()).then_some(m)
                })
                .await;
            assert_eq!(
                queued[0]["text"], "and then the linter",
                "{name}: {queued:?}"
            );
            assert!(
                queued[0]["via"]
                    .as_str()
                    .is_some_and(|v| v.starts_with(name)),
                "{name}: {queued:?}"
            );
        }
        Feature::OutcomeInThread => {
            let id = create(&app, call("p-thread", "make parity-thread")).await;
            let copy = run.copy(&id, "make parity-thread").await;
            run.press(&app, &copy, Button::Allow, Who::Approver).await;
            allowed_via(name, &resolved(&app, &id, H::PATIENCE).await);
            run.outcome_in_thread(&copy, "Allowed").await;
        }
        Feature::Burst => {
            let (n, timeout) = run.burst();
            // At once, as an agent's parallel calls come; `digest_after` is off.
            let made = (0..n).map(|k| {
                let mut body = call(&format!("p-burst{k}"), &format!("make parity-burst-{k}"));
                body["timeout_secs"] = json!(timeout);
                create(&app, body)
            });
            let ids = futures_util::future::join_all(made).await;
            let digest = run.digest(" from session s-parity").await;
            run.approve_all(&app, &digest).await;
            // What it listed is allowed through the channel.
            let allowed = crate::support::eventually_within(
                "the digest's requests allowed",
                H::PATIENCE,
                || async {
                    let mut allowed = Vec::new();
                    for id in &ids {
                        let i = status(&app, id).await;
                        if i["resolution"]["outcome"] == "allowed" {
                            allowed.push(i["resolution"].clone());
                        }
                    }
                    (!allowed.is_empty()).then_some(allowed)
                },
            )
            .await;
            for r in &allowed {
                allowed_via(name, r);
            }
        }
        Feature::ThreadPerSession => {
            let mut threads = Vec::new();
            for (k, session) in ["s-parity", "s-other", "s-parity"].iter().enumerate() {
                let command = format!("make parity-th-{k}");
                let id = create(&app, call_of(session, &format!("p-th{k}"), &command)).await;
                threads.push(run.thread(&id, &command).await);
            }
            assert_eq!(
                threads[0], threads[2],
                "{name}: a session's prompts share its thread"
            );
            assert_ne!(
                threads[0], threads[1],
                "{name}: another session's prompt is in a thread of its own"
            );
        }
        Feature::EditApprove => {
            let id = create(&app, call("p-edit", "rm -rf parity-build")).await;
            let copy = run.copy(&id, "rm -rf parity-build").await;
            run.edit(&app, &copy, "rm -rf parity-build/tmp").await;
            let r = resolved(&app, &id, H::PATIENCE).await;
            assert_eq!(r["outcome"], "allowed", "{name}: {r}");
            assert_eq!(
                r["result"]["updatedInput"]["command"], "rm -rf parity-build/tmp",
                "{name}: {r}"
            );
        }
    }
    app.stop().await;
}

/// The ✅ cells of the rows the suite drives, as (channel, feature), in the table's order.
/// Checks on the way that the table's columns are the registered channels and that every
/// row is driven here or named in [`CHECKED_ELSEWHERE`].
pub(crate) fn claimed() -> Vec<(&'static str, Feature)> {
    let (columns, rows) = table();
    let settings = Settings::defaults().unwrap();
    let channels: Vec<(&'static str, &'static str)> = settings
        .channels()
        .iter()
        .map(|c| (c.name(), c.platform()))
        .collect();
    let platforms: Vec<&str> = channels.iter().map(|c| c.1).collect();
    assert_eq!(columns, platforms, "docs/channels.md's columns");
    let mut driven = Vec::new();
    for (row, cells) in &rows {
        let elsewhere = CHECKED_ELSEWHERE.iter().any(|(r, _)| r == row);
        let Some(feature) = Feature::of_row(row) else {
            assert!(
                elsewhere,
                "row {row:?} is neither driven by the parity suite nor named in CHECKED_ELSEWHERE"
            );
            continue;
        };
        for ((name, _), cell) in channels.iter().zip(cells) {
            // A mark may carry a footnote ("✅ ¹").
            if cell.split_whitespace().next() == Some("✅") {
                driven.push((*name, feature));
            }
        }
    }
    assert!(driven.len() >= 15, "{driven:?}");
    driven
}
