//! What imrelay remembers about each Telegram message it posted (kept in the store's
//! `ChannelMessage::state`): prompts with their partly answered questions or the form filled
//! in so far (the core's [`FormDraft`], kept as its fields and toggles), and the "reply to
//! this message" requests behind "Deny with reason…" and "Other…".

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::interaction::{Form, FormDraft, Question};

/// A recorded message's state, stored as an object whose `role` says which kind it is.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum MessageState {
    /// A prompt showing the interaction, with its keyboard.
    Prompt(PromptState),
    /// A ForceReply request whose reply carries text for the interaction.
    Reply(ReplyState),
}

impl MessageState {
    /// Reads a stored state; anything unreadable counts as a fresh prompt.
    pub(crate) fn from_stored(v: Option<&Value>) -> Self {
        // Not a serde-tagged enum: that route cannot read the integer map keys back.
        let Some(v) = v else {
            return MessageState::Prompt(PromptState::default());
        };
        let parsed = match v.get("role").and_then(Value::as_str) {
            Some("reply") => serde_json::from_value(v.clone()).map(MessageState::Reply),
            _ => serde_json::from_value(v.clone()).map(MessageState::Prompt),
        };
        parsed.unwrap_or_else(|_| MessageState::Prompt(PromptState::default()))
    }

    /// The state as stored.
    pub(crate) fn to_stored(&self) -> Value {
        let (role, inner) = match self {
            MessageState::Prompt(p) => ("prompt", serde_json::to_value(p)),
            MessageState::Reply(r) => ("reply", serde_json::to_value(r)),
        };
        let mut v = inner.unwrap_or_else(|_| Value::Object(Map::new()));
        if let Some(obj) = v.as_object_mut() {
            obj.insert("role".into(), Value::String(role.into()));
        }
        v
    }

    /// Whether the message already shows the final outcome.
    pub(crate) fn is_final(&self) -> bool {
        match self {
            MessageState::Prompt(p) => p.done,
            MessageState::Reply(r) => r.done,
        }
    }

    /// Marks the message as showing the final outcome.
    pub(crate) fn set_final(&mut self) {
        match self {
            MessageState::Prompt(p) => p.done = true,
            MessageState::Reply(r) => r.done = true,
        }
    }
}

/// A prompt's state: which outbox job posted it, and the answers given on it so far.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct PromptState {
    /// The key of the outbox job that posted it (so a redelivered job does not post twice).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    /// Answered questions: index → chosen labels or free text.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub answers: BTreeMap<u8, Vec<String>>,
    /// Multi-select questions: index → toggled option indices.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub toggled: BTreeMap<u8, Vec<u8>>,
    /// Multi-select questions: index → free "Other" text chosen but not yet submitted.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub other: BTreeMap<u8, String>,
    /// A form's fields filled in so far: index → value (`null`: left empty). Fields are
    /// filled in order, so the first index missing here is the one being asked.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub fields: BTreeMap<u8, Value>,
    /// Whether the message was edited to its final state.
    #[serde(default)]
    pub done: bool,
    /// The forum topic it was posted in (`message_thread_id`), with a topic per session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic: Option<i32>,
}

impl PromptState {
    /// A fresh prompt posted by outbox job `job`.
    pub(crate) fn posted_by(job: &str) -> Self {
        Self {
            job: Some(job.to_string()),
            ..Self::default()
        }
    }

    /// Whether question `q` has been answered on this message.
    pub(crate) fn answered(&self, q: u8) -> bool {
        self.answers.contains_key(&q)
    }

    /// Whether option `o` of question `q` is toggled on.
    pub(crate) fn is_toggled(&self, q: u8, o: u8) -> bool {
        self.toggled.get(&q).is_some_and(|v| v.contains(&o))
    }

    /// Flips option `o` of question `q`; returns whether it is now on.
    pub(crate) fn toggle(&mut self, q: u8, o: u8) -> bool {
        let set = self.toggled.entry(q).or_default();
        let on = if let Some(pos) = set.iter().position(|x| *x == o) {
            set.remove(pos);
            false
        } else {
            set.push(o);
            set.sort_unstable();
            true
        };
        if set.is_empty() {
            self.toggled.remove(&q);
        }
        on
    }

    /// The current multi-select choice for question `q`: toggled labels in option order,
    /// then the free text.
    pub(crate) fn selection(&self, q: u8, question: &Question) -> Vec<String> {
        let mut out: Vec<String> = question
            .options
            .iter()
            .enumerate()
            .filter(|(o, _)| self.is_toggled(q, *o as u8))
            .map(|(_, opt)| opt.label.clone())
            .collect();
        if let Some(text) = self.other.get(&q) {
            out.push(text.clone());
        }
        out
    }

    /// The form filled in on this message so far, as a draft: the fields done in order, and
    /// the options toggled on for the field being asked.
    pub(crate) fn form_draft(&self, form: &Form) -> FormDraft {
        let values: Vec<Value> = (0..form.fields.len())
            .map_while(|n| self.fields.get(&(n as u8)).cloned())
            .collect();
        let toggled = self
            .toggled
            .get(&(values.len() as u8))
            .into_iter()
            .flatten()
            .map(|o| usize::from(*o));
        FormDraft::resume(values, toggled)
    }

    /// The form field being asked: the first one not filled in, `None` once all are.
    pub(crate) fn current_field(&self, form: &Form) -> Option<u8> {
        self.form_draft(form).current(form).map(|n| n as u8)
    }

    /// Keeps `draft` as the form filled in on this message: its fields done, and the
    /// options toggled on for the field being asked.
    pub(crate) fn keep_form_draft(&mut self, draft: &FormDraft) {
        self.fields = (0u8..).zip(draft.values().iter().cloned()).collect();
        self.toggled.clear();
        if !draft.toggled().is_empty() {
            let asked = draft.values().len() as u8;
            let toggled = draft.toggled().iter().map(|o| *o as u8).collect();
            self.toggled.insert(asked, toggled);
        }
    }

    /// Whether every question has an answer.
    pub(crate) fn complete(&self, questions: &[Question]) -> bool {
        (0..questions.len()).all(|q| self.answered(q as u8))
    }

    /// The answers in the shape [`crate::interaction::Answer::Answers`] takes: question
    /// text → label or free text, or a list for multi-select questions.
    pub(crate) fn answer_map(&self, questions: &[Question]) -> Map<String, Value> {
        let mut map = Map::new();
        for (q, question) in questions.iter().enumerate() {
            if let Some(given) = self.answers.get(&(q as u8)) {
                let value = if question.multi_select {
                    Value::Array(given.iter().cloned().map(Value::String).collect())
                } else {
                    Value::String(given.first().cloned().unwrap_or_default())
                };
                map.insert(question.question.clone(), value);
            }
        }
        map
    }
}

/// What a reply to a ForceReply request means.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum ReplyKind {
    /// The reply is the reason for a deny.
    DenyReason,
    /// The reply is free "Other" text for question `q`.
    Other {
        /// Question index.
        q: u8,
    },
    /// The reply is the value of form field `q`.
    Field {
        /// Field index.
        q: u8,
    },
}

/// A ForceReply request's state.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct ReplyState {
    /// What the reply means.
    #[serde(flatten)]
    pub kind: ReplyKind,
    /// The prompt message it belongs to.
    pub parent: i32,
    /// Who asked for it (by tapping the button): only their reply is taken.
    pub user: u64,
    /// Whether the message was edited to its final state.
    #[serde(default)]
    pub done: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interaction::parse_questions;
    use serde_json::json;

    #[test]
    fn states_round_trip_through_the_store_format() {
        let mut p = PromptState::posted_by("telegram:post:x:1700000000000:1");
        p.toggle(1, 2);
        p.toggle(1, 0);
        p.answers.insert(0, vec!["Red".into()]);
        p.other.insert(1, "Pineapple".into());
        let s = MessageState::Prompt(p);
        assert_eq!(MessageState::from_stored(Some(&s.to_stored())), s);
        let r = MessageState::Reply(ReplyState {
            kind: ReplyKind::Other { q: 2 },
            parent: 17,
            user: 42,
            done: false,
        });
        assert_eq!(
            r.to_stored(),
            json!({"role":"reply","kind":"other","q":2,"parent":17,"user":42,"done":false})
        );
        assert_eq!(MessageState::from_stored(Some(&r.to_stored())), r);
        assert!(matches!(
            MessageState::from_stored(Some(&json!("junk"))),
            MessageState::Prompt(_)
        ));
    }

    #[test]
    fn a_form_draft_is_kept_as_it_is_read() {
        let input = Form::input(
            "Deploy?",
            json!({"type":"object","properties":{
                "env":{"type":"string","enum":["prod","dev"]},
                "tags":{"type":"array","items":{"enum":["a","b","c"]}}}}),
        );
        let form = Form::from_input(&input).unwrap();
        let mut p = PromptState::default();
        let mut draft = p.form_draft(&form);
        draft.pick(&form, 0, 1).unwrap();
        draft.toggle(&form, 1, 2).unwrap();
        draft.toggle(&form, 1, 0).unwrap();
        p.keep_form_draft(&draft);
        assert_eq!(p.fields, BTreeMap::from([(0, json!("dev"))]));
        assert_eq!(p.toggled, BTreeMap::from([(1, vec![0, 2])]));
        assert_eq!(p.current_field(&form), Some(1));
        assert_eq!(p.form_draft(&form), draft);
        draft.back(&form, 0).unwrap();
        p.keep_form_draft(&draft);
        assert_eq!(p, PromptState::default());
    }

    #[test]
    fn toggles_build_the_selection_in_option_order() {
        let qs = parse_questions(
            json!({"questions":[{"question":"Which?","header":"H","multiSelect":true,
                "options":[{"label":"A"},{"label":"B"},{"label":"C"}]}]})
            .as_object()
            .unwrap(),
        )
        .unwrap();
        let mut p = PromptState::default();
        assert!(p.toggle(0, 2));
        assert!(p.toggle(0, 0));
        assert!(p.toggle(0, 1));
        assert!(!p.toggle(0, 1));
        p.other.insert(0, "D".into());
        assert_eq!(p.selection(0, &qs[0]), vec!["A", "C", "D"]);
        assert!(!p.complete(&qs));
        p.answers.insert(0, p.selection(0, &qs[0]));
        assert!(p.complete(&qs));
        assert_eq!(
            Value::Object(p.answer_map(&qs)),
            json!({"Which?":["A","C","D"]})
        );
    }
}
