//! The one inbound path every chat channel runs a tap, a click or a typed answer through,
//! and the one set of messages that tells the person what became of it.
//!
//! A channel does what only it can: authenticate the platform's request, decode its
//! button's token (see [`super::token`]), which binds the tap to one interaction, and read
//! what the click or reply means ([`Decision`]). From there every channel takes the same
//! steps, here:
//!
//! 1. [`Pipeline::verified`]: a token that failed its check is refused and recorded, bound
//!    to no interaction (the id in forged data proves nothing); [`replayed`] tells a
//!    platform's re-delivery of a callback from a new one.
//! 2. [`Pipeline::admit`]: the tapper must be an approver; the interaction must exist and be
//!    the incarnation the button was made for; it must still be pending; the action must fit
//!    its kind. A refusal is recorded in the audit trail.
//! 3. The channel turns the tap into a [`Decision`] (a button's meaning, a card's form, a
//!    typed reply).
//! 4. [`Pipeline::decide`]: the answer, "Allow similar" with its session grant, or "Edit &
//!    approve" with the edited command; the registry's first answer wins.
//! 5. [`Pipeline::count`]: every outcome counted under one label set ([`ResultLabels`]).
//!
//! [`Pipeline::answer`] runs steps 2 to 5 for the channels whose button answers at once.
//! Each step ends in a [`Feedback`], and [`Feedback::text`] is the toast for it, in English or
//! Chinese: every outcome, every [`RegistryError`] included, has one message on every
//! channel.

use std::sync::Arc;

use crate::interaction::{
    Answer, Interaction, InteractionId, Kind, Outcome, Registry, RegistryError, Responder, Via,
};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use crate::interaction::quorum::Vote;
use crate::interaction::routes::{Admission, admission};
use crate::present::render::{self, Locale};

/// What became of a tap, a click or a typed answer, as the person who gave it is told.
#[derive(Clone, Debug)]
pub(crate) enum Feedback {
    /// This answer resolved the interaction (shown as it now is).
    Resolved(Arc<Interaction>),
    /// It was resolved before this answer came (by someone, by expiry, by the agent).
    Already(Arc<Interaction>),
    /// The button failed its check, was sent from a message showing another interaction, or
    /// does not fit the interaction. Nothing changed.
    BadButton,
    /// The interaction is gone, or the button was made for an earlier one with its id.
    NotFound,
    /// The person is not on the channel's approver list. Nothing changed.
    NotApprover,
    /// The interaction's route names its approvers, and the person is not one of them: the
    /// route's name. Nothing changed.
    OtherRoute(String),
    /// The answer does not fit the interaction; the text says why. Nothing changed.
    Invalid(String),
    /// The store could not read or record it; trying again later may work.
    StoreDown,
    /// The answer was recorded as a vote, and more votes are needed (shown as it now is,
    /// with the votes so far).
    Voted(Arc<Interaction>),
    /// This person voted on it already, from this or another channel: their vote. Nothing
    /// changed.
    AlreadyVoted(Box<Vote>, Arc<Interaction>),
    /// The platform stopped waiting while the answer is still being recorded.
    StillWorking,
    /// The interaction needs a passkey: it is answered in the inbox, not here. Nothing
    /// changed.
    StepUp(Arc<Interaction>),
}

impl Feedback {
    /// The feedback for the registry's reply to an answer.
    pub(crate) fn of(result: Result<Arc<Interaction>, RegistryError>) -> Self {
        match result {
            Ok(i) => Feedback::Resolved(i),
            Err(RegistryError::AlreadyResolved(i)) => Feedback::Already(i),
            Err(
                RegistryError::NotFound(_)
                | RegistryError::GrantNotFound(_)
                | RegistryError::SessionNotFound(_),
            ) => Feedback::NotFound,
            Err(RegistryError::Invalid(v)) => Feedback::Invalid(v.message),
            Err(RegistryError::Forbidden(why)) => Feedback::Invalid(why),
            // An id in use by another request: the button cannot act on it.
            Err(RegistryError::Conflict(_) | RegistryError::Taken(_)) => Feedback::BadButton,
            // Logged where the answer was given (`Pipeline::respond`).
            Err(RegistryError::Store(_)) => Feedback::StoreDown,
            // Only creating an interaction can meet a full budget, never an answer.
            Err(RegistryError::Full(_)) => Feedback::StoreDown,
            // Refused, and the refusal could not be recorded: try again.
            Err(RegistryError::Unrecorded(_)) => Feedback::StoreDown,
            Err(RegistryError::Voted(i)) => Feedback::Voted(i),
            Err(RegistryError::AlreadyVoted(v, i)) => Feedback::AlreadyVoted(v, i),
            Err(RegistryError::StepUpRequired(i)) => Feedback::StepUp(i),
        }
    }

    /// The toast: "Allowed", "Already denied by Bob via telegram", "This button is not
    /// valid.", in `locale`.
    pub(crate) fn text(&self, locale: Locale) -> String {
        let zh = locale == Locale::ZhCn;
        let t = |zh_text: &str, en: &str| if zh { zh_text } else { en }.to_string();
        match self {
            Feedback::Resolved(i) => match i.resolution.as_ref().map(|r| r.outcome) {
                Some(Outcome::Allowed) => t("已批准", "Allowed"),
                Some(Outcome::Answered) => t("已提交回答", "Answered"),
                Some(Outcome::Denied) => match i.kind {
                    Kind::Approval => t("已拒绝", "Denied"),
                    Kind::Question => t("已拒绝回答", "Question declined"),
                    Kind::Form => t("已拒绝填写", "Declined"),
                },
                // An answer never expires or cancels; said plainly should it ever.
                Some(o @ (Outcome::Expired | Outcome::Cancelled)) => {
                    render::outcome_label_in(o, locale).to_string()
                }
                None => t("已保存", "Saved"),
            },
            Feedback::Already(i) => render::already_toast_in(i, locale),
            Feedback::BadButton => t("此按钮无效，未做任何更改", "This button is not valid."),
            Feedback::NotFound => t("该请求已不存在", "This request no longer exists"),
            Feedback::NotApprover => t(
                "你不在审批人名单中，无法处理此请求",
                "You are not an approver for this",
            ),
            Feedback::OtherRoute(route) => {
                if zh {
                    format!("此请求属于路由「{route}」，只有该路由的审批人可以处理")
                } else {
                    format!(
                        "This request came through route \"{route}\": only its approvers can answer it"
                    )
                }
            }
            Feedback::Invalid(why) => format!("{}{why}", t("回答无效：", "Not accepted: ")),
            Feedback::StoreDown => t(
                "imrelay 暂时无法记录你的回答，请稍后重试",
                "imrelay cannot record this right now. Try again shortly.",
            ),
            Feedback::Voted(i) => voted_text(i, zh),
            Feedback::AlreadyVoted(v, _) => {
                let via = v.via.as_str();
                if zh {
                    let what = if v.allow { "批准" } else { "拒绝" };
                    format!("你已经投过票（经 {via} {what}），每人只计一票")
                } else {
                    let what = if v.allow { "allow" } else { "deny" };
                    format!("You already voted on this ({what} via {via}): each person counts once")
                }
            }
            Feedback::StillWorking => t(
                "仍在处理这次点击，完成后卡片会显示结果",
                "Still working on this: the message will show the outcome when it is done",
            ),
            Feedback::StepUp(i) => render::step_up_text(i, locale),
        }
    }

    /// The label it is counted under: `resolved`, `already_resolved`, `refused`,
    /// `not_found`, `invalid`, `error` or `slow`.
    pub(crate) fn result(&self) -> &'static str {
        match self {
            Feedback::Resolved(_) => "resolved",
            Feedback::Already(_) => "already_resolved",
            Feedback::BadButton | Feedback::NotApprover | Feedback::OtherRoute(_) => "refused",
            Feedback::NotFound => "not_found",
            Feedback::Invalid(_) => "invalid",
            Feedback::StoreDown => "error",
            Feedback::StillWorking => "slow",
            Feedback::Voted(_) => "voted",
            Feedback::AlreadyVoted(..) => "already_voted",
            Feedback::StepUp(_) => "step_up",
        }
    }

    /// The interaction as it now is, when the feedback shows it.
    pub(crate) fn interaction(&self) -> Option<&Arc<Interaction>> {
        match self {
            Feedback::Resolved(i)
            | Feedback::Already(i)
            | Feedback::Voted(i)
            | Feedback::AlreadyVoted(_, i) => Some(i),
            _ => None,
        }
    }
}

/// "Vote recorded: 1 of 2: alice via telegram", in English or Chinese.
fn voted_text(i: &Interaction, zh: bool) -> String {
    let need = i.quorum().map_or(1, |q| q.allow);
    let allows: Vec<String> = i
        .votes()
        .iter()
        .filter(|v| v.allow)
        .map(|v| format!("{} via {}", v.by, v.via))
        .collect();
    if zh {
        format!(
            "已记录你的投票：需 {need} 人批准，已有 {} 人（{}）",
            allows.len(),
            allows.join("、")
        )
    } else {
        format!(
            "Vote recorded: {}",
            crate::interaction::quorum::tally(i).unwrap_or_default()
        )
    }
}

/// A tap whose platform request was authenticated and whose button verified.
#[derive(Clone, Debug)]
pub(crate) struct Tap<'a> {
    /// The interaction the button is bound to.
    pub id: &'a InteractionId,
    /// The creation time (ms) the button was made for, when it carries one; `None` when the
    /// channel bound the tap to the incarnation itself.
    pub created: Option<i64>,
    /// Who tapped, as the audit trail names them.
    pub actor: &'a str,
    /// The tapper's id on the channel (a Telegram user id, a Feishu open_id or user_id, a
    /// Slack user id): the configured people know them by it.
    pub identity: &'a str,
    /// Whether the tapper is on the channel's approver list.
    pub approver: bool,
    /// Whether a refusal is recorded in the audit trail (not when a platform delivers a tap
    /// that was already refused once again).
    pub audit: bool,
}

/// Why `Pipeline::admit` stopped a tap.
#[derive(Clone, Debug)]
pub(crate) struct Stop {
    /// What the person is told.
    pub feedback: Feedback,
    /// The refusal's label (`not_approver`, `other_route`, `bad_data`) when the tap was refused rather than
    /// merely late; the audit trail has it already.
    pub refused: Option<&'static str>,
}

impl From<Feedback> for Stop {
    fn from(feedback: Feedback) -> Self {
        Stop {
            feedback,
            refused: None,
        }
    }
}

impl Stop {
    /// The label the stop is counted under: `refused` for a refusal, otherwise the
    /// feedback's (a refusal that could not be recorded is still a refusal).
    pub(crate) fn result(&self) -> &'static str {
        match self.refused {
            Some(_) => "refused",
            None => self.feedback.result(),
        }
    }
}

/// Labels of a channel's answer counter: one per outcome (`resolved`, `already_resolved`,
/// `refused`, `invalid`, `voted`, `duplicate`, `ignored`, `whoami`, ...).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    /// What became of it.
    pub result: String,
}

/// What a verified click or reply asks for, once its platform has read it.
#[derive(Clone, Debug)]
pub(crate) enum Decision {
    /// This answer, as it is.
    Answer(Answer),
    /// Approve, and grant the rule imrelay proposes for the session's similar calls
    /// ([`render::similar_rule`]).
    AllowSimilar,
    /// Approve with the command changed to this one ("Edit & approve", on an approval whose
    /// command [`render::editable_command`] offers).
    Edit(String),
}

/// Whether a callback with `key` in `scope` was handled before (here or by another
/// replica) within `hours`: a platform's re-delivery, which is answered without being
/// audited or counted again. A store that cannot say is taken as "new": the registry still
/// lets only one answer win.
pub(crate) async fn replayed(
    store: &dyn crate::store::Store,
    scope: &str,
    key: &str,
    hours: i64,
) -> bool {
    if key.is_empty() {
        return false;
    }
    let expires = jiff::Timestamp::now()
        .checked_add(jiff::SignedDuration::from_hours(hours))
        .unwrap_or(jiff::Timestamp::MAX);
    match store.first_sighting(scope, key, expires).await {
        Ok(first) => !first,
        Err(e) => {
            tracing::warn!(error = %e, scope, "cannot check a callback for re-delivery; handling it as new");
            false
        }
    }
}

/// The steps from a verified tap to the registry, for one channel.
#[derive(Clone, Debug)]
pub(crate) struct Pipeline {
    registry: Registry,
    via: Via,
    results: Family<ResultLabels, Counter>,
    /// The channel whose ids the tappers' are, as `[[people]]` lists them: the channel's own
    /// name, unless said ([`Pipeline::known_as`]).
    identities: String,
}

impl Pipeline {
    /// The pipeline of the channel named `via`, answering through `registry`.
    pub(crate) fn new(registry: Registry, via: Via) -> Self {
        let identities = via.as_str().to_string();
        Self {
            registry,
            via,
            results: Family::default(),
            identities,
        }
    }

    /// The per-result counter, for registration with the server's metrics.
    pub(crate) fn results_metric(&self) -> Family<ResultLabels, Counter> {
        self.results.clone()
    }

    /// Counts one callback, click or reply under `result`.
    pub(crate) fn count(&self, result: &str) {
        self.results
            .get_or_create(&ResultLabels {
                result: result.into(),
            })
            .inc();
    }

    /// `verified`, or, when the platform's token failed its check (`None`), the refusal:
    /// recorded in the audit trail bound to no interaction (the id `claimed` in forged data
    /// proves nothing and is only named), unless `audit` is off for a re-delivery. The
    /// feedback is then a bad button, or a store failure when the refusal could not be
    /// recorded.
    pub(crate) async fn verified<T>(
        &self,
        verified: Option<T>,
        actor: &str,
        what: &str,
        claimed: &str,
        audit: bool,
    ) -> Result<T, Feedback> {
        if let Some(v) = verified {
            return Ok(v);
        }
        if !audit {
            return Err(Feedback::BadButton);
        }
        let reason = if claimed.is_empty() {
            format!("{what} failed its integrity check")
        } else {
            format!(
                "{what} failed its integrity check (claimed id {:?})",
                crate::interaction::clip(claimed, 80)
            )
        };
        match self.registry.refused(None, actor, &self.via, &reason).await {
            Ok(()) => Err(Feedback::BadButton),
            // Not recorded: try again.
            Err(_) => Err(Feedback::StoreDown),
        }
    }

    /// The one path from a verified tap to its outcome: admits `tap` for an action that
    /// `fits`, reads the interaction's [`Decision`] with `read` (its `Err` says why the
    /// answer does not fit), decides it as `by`, and counts the outcome.
    pub(crate) async fn answer(
        &self,
        tap: &Tap<'_>,
        fits: impl FnOnce(&Interaction) -> bool,
        read: impl FnOnce(&Interaction) -> Result<Decision, String>,
        by: Responder,
    ) -> Feedback {
        let current = match self.admit(tap, fits).await {
            Ok(i) => i,
            Err(stop) => {
                self.count(stop.result());
                return stop.feedback;
            }
        };
        let feedback = match read(&current) {
            Ok(decision) => self.decide(&current, decision, by).await,
            Err(why) => Feedback::Invalid(why),
        };
        self.count(feedback.result());
        feedback
    }

    /// Gives interaction `i` the answer `decision` stands for, from `by`: "Allow similar"
    /// allows and grants the session the proposed rule; "Edit & approve" allows with the
    /// edited command. A decision the interaction cannot take is a bad button.
    pub(crate) async fn decide(
        &self,
        i: &Interaction,
        decision: Decision,
        by: Responder,
    ) -> Feedback {
        match decision {
            Decision::Answer(answer) => self.respond(&i.id, answer, by).await,
            Decision::AllowSimilar => {
                let Some(rule) = render::similar_rule(i) else {
                    return Feedback::BadButton;
                };
                let request = crate::interaction::GrantRequest {
                    rule: Some(rule),
                    scope: crate::interaction::policy::GrantScope::Session,
                };
                self.respond_granting(&i.id, Answer::allow(), by, &request)
                    .await
            }
            Decision::Edit(command) => {
                if render::editable_command(i).is_none() {
                    return Feedback::BadButton;
                }
                let command = command.trim();
                if command.is_empty() {
                    return Feedback::Invalid("type the command to run".into());
                }
                if command.chars().count() > render::EDITABLE_CHARS {
                    return Feedback::Invalid(format!(
                        "the command is longer than {} characters",
                        render::EDITABLE_CHARS
                    ));
                }
                let mut input = i.input.map();
                input.insert(
                    "command".into(),
                    serde_json::Value::String(command.to_string()),
                );
                let answer = Answer::Allow {
                    updated_input: Some(input),
                    always: false,
                };
                self.respond(&i.id, answer, by).await
            }
        }
    }

    /// The pipeline with tappers known by their ids on `channel` (Web Push answers as the
    /// operator token that subscribed the device: `operator`).
    pub(crate) fn known_as(mut self, channel: &str) -> Self {
        self.identities = channel.to_string();
        self
    }

    /// The channel whose ids the tappers' are.
    pub(crate) fn identities(&self) -> &str {
        &self.identities
    }

    /// The registry it answers through.
    pub(crate) fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The channel's name.
    pub(crate) fn via(&self) -> &Via {
        &self.via
    }

    /// The interaction `tap` is for, when the tapper may answer it now with an action that
    /// `fits` it.
    pub(crate) async fn admit(
        &self,
        tap: &Tap<'_>,
        fits: impl FnOnce(&Interaction) -> bool,
    ) -> Result<Arc<Interaction>, Stop> {
        let teams = self.registry.teams();
        let channel = self.identities.as_str();
        let person = teams.people.name_of(channel, tap.identity).is_some();
        if !tap.approver && !person {
            let reason = format!("not in {}.approvers", self.via);
            return Err(self
                .refuse(tap, &reason, Feedback::NotApprover, "not_approver")
                .await);
        }
        let i = match self.registry.get(tap.id).await {
            Ok(Some(i)) => i,
            Ok(None) => return Err(Feedback::NotFound.into()),
            Err(e) => {
                tracing::error!(error = %e, via = %self.via, "cannot read an interaction for a tap");
                return Err(Feedback::StoreDown.into());
            }
        };
        if tap
            .created
            .is_some_and(|ms| i.created_at.as_millisecond() != ms)
        {
            return Err(Feedback::NotFound.into());
        }
        match admission(&i, &teams.people, channel, tap.identity, tap.approver) {
            Admission::Admitted => {}
            Admission::NotApprover => {
                let reason = format!("not in {}.approvers", self.via);
                return Err(self
                    .refuse(tap, &reason, Feedback::NotApprover, "not_approver")
                    .await);
            }
            Admission::OtherRoute => {
                let route = i.route.as_ref().map(|r| r.name.clone()).unwrap_or_default();
                let reason = format!("not an approver of route {route:?}");
                return Err(self
                    .refuse(tap, &reason, Feedback::OtherRoute(route), "other_route")
                    .await);
            }
        }
        if !i.is_pending() {
            return Err(Feedback::Already(i).into());
        }
        if !fits(&i) {
            return Err(self
                .refuse(
                    tap,
                    "an action that does not fit the interaction",
                    Feedback::BadButton,
                    "bad_data",
                )
                .await);
        }
        Ok(i)
    }

    /// Records that `tap` was refused for `reason` (when the tap asks for it).
    async fn refuse(
        &self,
        tap: &Tap<'_>,
        reason: &str,
        feedback: Feedback,
        label: &'static str,
    ) -> Stop {
        if tap.audit {
            // A configured person is recorded by their name, whatever channel they tapped on.
            let teams = self.registry.teams();
            let actor = match teams.people.name_of(&self.identities, tap.identity) {
                Some(name) => format!("{name} ({}:{})", self.identities, tap.identity),
                None => tap.actor.to_string(),
            };
            if self
                .registry
                .refused(Some(tap.id), &actor, &self.via, reason)
                .await
                .is_err()
            {
                // Not recorded: the person is told to try again, not that it was refused.
                return Stop {
                    feedback: Feedback::StoreDown,
                    refused: Some(label),
                };
            }
        }
        Stop {
            feedback,
            refused: Some(label),
        }
    }

    /// Gives `answer` to interaction `id` from `by` (a person on this channel).
    pub(crate) async fn respond(
        &self,
        id: &InteractionId,
        answer: Answer,
        by: Responder,
    ) -> Feedback {
        let who = by.by.clone().unwrap_or_default();
        let r = self.registry.respond(id, answer, by).await;
        match &r {
            Ok(_) => {
                tracing::info!(id = %id, via = %self.via, by = %who.escape_debug(), "answer accepted")
            }
            Err(e @ RegistryError::Store(_)) => {
                tracing::error!(id = %id, via = %self.via, by = %who.escape_debug(), error = %e, "cannot record an answer from a channel")
            }
            Err(e) => {
                tracing::info!(id = %id, via = %self.via, by = %who.escape_debug(), error = %e, "answer not accepted")
            }
        }
        Feedback::of(r)
    }

    /// Gives `answer` (an allow) to interaction `id` from `by`, and grants `request` with it.
    pub(crate) async fn respond_granting(
        &self,
        id: &InteractionId,
        answer: Answer,
        by: Responder,
        request: &crate::interaction::GrantRequest,
    ) -> Feedback {
        let who = by.by.clone().unwrap_or_default();
        let r = self
            .registry
            .respond_granting(id, answer, by, request)
            .await
            .map(|(i, grant)| {
                tracing::info!(id = %id, via = %self.via, by = %who.escape_debug(), grant = %grant.id, rule = %grant.rule, "answer accepted with a grant");
                i
            });
        if let Err(e) = &r {
            tracing::info!(id = %id, via = %self.via, by = %who.escape_debug(), error = %e, "answer with a grant not accepted");
        }
        Feedback::of(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_refusal_says_nothing_changed_in_both_languages() {
        for f in [
            Feedback::BadButton,
            Feedback::NotFound,
            Feedback::NotApprover,
            Feedback::OtherRoute("shop".into()),
            Feedback::Invalid("q0: not an option".into()),
            Feedback::StoreDown,
            Feedback::StillWorking,
        ] {
            let en = f.text(Locale::EnUs);
            let zh = f.text(Locale::ZhCn);
            assert!(!en.is_empty() && !zh.is_empty(), "{f:?}");
            assert_ne!(en, zh, "{f:?}");
            assert!(en.is_ascii(), "{en}");
            assert!(!zh.is_ascii(), "{zh}");
        }
        assert_eq!(
            Feedback::Invalid("q0: not an option".into()).text(Locale::EnUs),
            "Not accepted: q0: not an option"
        );
    }

    #[test]
    fn registry_errors_map_to_one_feedback_each() {
        use crate::store::StoreError;
        let id = InteractionId::parse("x").unwrap();
        assert!(matches!(
            Feedback::of(Err(RegistryError::NotFound(id))),
            Feedback::NotFound
        ));
        let down = Feedback::of(Err(RegistryError::Store(StoreError::Unavailable(
            "down".into(),
        ))));
        assert!(matches!(down, Feedback::StoreDown));
        assert_eq!(down.result(), "error");
    }
}
