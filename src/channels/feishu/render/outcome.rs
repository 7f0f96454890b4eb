//! A resolved card: its header colour, the outcome in words, and the lines that say who
//! decided, when, what was answered and why it was denied.

use serde_json::{Value, json};

use super::budget::Budget;
use super::{Cards, div};
use crate::interaction::clip;
use crate::interaction::{
    Interaction, Kind, Outcome, PermissionResult, Resolution, parse_questions,
};
use crate::present;
use crate::present::render::{self, format_time};

fn is_open_id(s: &str) -> bool {
    s.starts_with("ou_") && s.len() > 3 && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl Cards {
    /// The header's colour: orange while pending, then by outcome.
    pub(super) fn template(i: &Interaction) -> &'static str {
        match &i.resolution {
            None => "orange",
            Some(r) => match r.outcome {
                Outcome::Allowed | Outcome::Answered => "green",
                Outcome::Denied => "red",
                Outcome::Expired | Outcome::Cancelled => "grey",
            },
        }
    }

    /// "Allowed", "已批准", ...
    pub(crate) fn outcome_word(&self, o: Outcome) -> &'static str {
        if !self.zh() {
            return match o {
                Outcome::Expired => "Expired",
                other => render::outcome_label(other),
            };
        }
        match o {
            Outcome::Allowed => "已批准",
            Outcome::Denied => "已拒绝",
            Outcome::Answered => "已回答",
            Outcome::Expired => "已过期",
            Outcome::Cancelled => "已取消",
        }
    }

    /// "Allowed by alice via telegram", "由 alice 通过 telegram 批准", ...
    pub(crate) fn outcome_phrase(&self, r: &Resolution) -> String {
        render::outcome_phrase_in(r, self.locale)
    }

    /// Who decided and when, the answers given, and the reason for a denial.
    pub(super) fn resolution_lines(
        &self,
        i: &Interaction,
        r: &Resolution,
        b: Budget,
        out: &mut Vec<Value>,
    ) {
        let at = format_time(r.at);
        match r.by.as_deref() {
            Some(by) if is_open_id(by) && !matches!(r.outcome, Outcome::Expired | Outcome::Cancelled) => {
                // A platform user: a mention shows their name. Everything else here is ours.
                let phrase = self.outcome_phrase(r).replace(by, &format!("<at id={by}></at>"));
                out.push(json!({"tag": "markdown", "content": format!("**{phrase}** · {at}")}));
            }
            _ => out.push(json!({"tag": "div", "text": {"tag": "plain_text", "content": present::visible_text(&format!("{} · {at}", self.outcome_phrase(r))), "text_size": "normal_v2"}})),
        }
        if render::single_text_form(i).is_some() {
            // The answer to a single question, without the field's label.
            for (_, value) in render::form_answers(i) {
                out.push(div(format!("→ {}", clip(&value, b.question))));
            }
        } else if i.kind == Kind::Form {
            for (label, value) in render::form_answers(i) {
                out.push(div(format!(
                    "{} → {}",
                    clip(&label, 60),
                    clip(&value, b.question)
                )));
            }
        }
        match (r.result.permission(), r.outcome) {
            (_, Outcome::Denied | Outcome::Expired) if i.kind == Kind::Form => {
                if let Some(message) = r.message() {
                    out.push(div(format!(
                        "{}{}",
                        self.t("原因：", "Reason: "),
                        clip(message, b.text)
                    )));
                }
            }
            (Some(PermissionResult::Deny { message, .. }), Outcome::Denied | Outcome::Expired) => {
                out.push(div(format!(
                    "{}{}",
                    self.t("原因：", "Reason: "),
                    clip(message, b.text)
                )));
            }
            (Some(PermissionResult::Allow { updated_input, .. }), Outcome::Answered) => {
                if let (Some(Value::Object(answers)), Ok(qs)) = (
                    updated_input.map().get("answers"),
                    parse_questions(&i.input.map()),
                ) {
                    for q in &qs {
                        if let Some(a) = answers.get(&q.question).and_then(Value::as_str) {
                            out.push(div(format!(
                                "{} → {}",
                                clip(&q.header, 40),
                                clip(a, b.question)
                            )));
                        }
                    }
                }
            }
            _ => {}
        }
    }
}
