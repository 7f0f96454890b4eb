//! The prompt's words, in English and Chinese, written once for the chat channels that have
//! no texts of their own (Slack, Discord): the buttons, the deadline, the "Allow similar"
//! note, the note under a cut tool call. A channel draws them in its own markup (mrkdwn on
//! Slack, markdown on Discord); `locale` in its section picks the language.
//! (The outcome, the votes, the escalation line, the notices after a tap and the digests
//! have their texts in [`crate::present::render`], [`super::pipeline`] and
//! [`super::digest_texts`].)

use crate::present::render::Locale;

/// The words of a prompt in one locale.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Words(pub Locale);

impl Words {
    fn zh(self) -> bool {
        self.0 == Locale::ZhCn
    }

    /// `zh` in Chinese, `en` in English.
    pub fn pick(self, zh: &'static str, en: &'static str) -> &'static str {
        if self.zh() { zh } else { en }
    }

    /// The button that allows: "Approve".
    pub fn approve(self) -> &'static str {
        self.pick("批准", "Approve")
    }

    /// The button that denies: "Deny".
    pub fn deny(self) -> &'static str {
        self.pick("拒绝", "Deny")
    }

    /// The button that asks a reason before denying: "Deny with reason…".
    pub fn deny_with_reason(self) -> &'static str {
        self.pick("附理由拒绝…", "Deny with reason…")
    }

    /// The button that opens the command to edit: "Edit & approve…".
    pub fn edit_approve(self) -> &'static str {
        self.pick("改写后批准…", "Edit & approve…")
    }

    /// The button that allows and grants the proposed rule: "Allow similar (this session)".
    pub fn allow_similar(self) -> &'static str {
        self.pick("批准同类（本会话）", "Allow similar (this session)")
    }

    /// The button that declines a question or a form: "Decline".
    pub fn decline(self) -> &'static str {
        self.pick("拒绝回答", "Decline")
    }

    /// The button that opens a form: "Fill in…".
    pub fn fill_in(self) -> &'static str {
        self.pick("填写…", "Fill in…")
    }

    /// The button that takes a typed answer instead of an option: "Other…".
    pub fn other(self) -> &'static str {
        self.pick("其他…", "Other…")
    }

    /// The button that opens typed answers to several questions: "Answer…".
    pub fn answer(self) -> &'static str {
        self.pick("回答…", "Answer…")
    }

    /// The deadline of a prompt: "Deadline (denied automatically after): 14:05 UTC".
    pub fn deadline(self, time: &str) -> String {
        if self.zh() {
            format!("截止时间（超时自动拒绝）：{time}")
        } else {
            format!("Deadline (denied automatically after): {time}")
        }
    }

    /// What "Allow similar" adds, before the rule as the channel draws it: "Allow similar
    /// also allows, for this session: ".
    pub fn similar_note(self) -> &'static str {
        self.pick(
            "「批准同类」同时允许本会话中的：",
            "Allow similar also allows, for this session: ",
        )
    }

    /// Said after the rule when the agent keeps its own suggestion too.
    pub fn also_remembers(self) -> &'static str {
        self.pick(
            "（智能体也会在本会话中记住它自己的建议）",
            " (the agent also remembers its own suggestion for this session)",
        )
    }

    /// A note under a tool call cut short: "Input truncated: 1,234 more characters not
    /// shown", the inbox's phrase after it.
    pub fn input_truncated(self, note: &str) -> String {
        if self.zh() {
            format!("输入过长已截断：{note}")
        } else {
            format!("Input truncated: {note}")
        }
    }

    /// The link to all of a cut tool call: "See all of it in the imrelay inbox".
    pub fn see_all(self) -> &'static str {
        self.pick(
            "在 imrelay 收件箱查看全部",
            "See all of it in the imrelay inbox",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_has_its_chinese() {
        let (en, zh) = (Words(Locale::EnUs), Words(Locale::ZhCn));
        assert_eq!((en.approve(), zh.approve()), ("Approve", "批准"));
        assert_eq!(
            en.deadline("14:05"),
            "Deadline (denied automatically after): 14:05"
        );
        for w in [
            Words::approve,
            Words::deny,
            Words::deny_with_reason,
            Words::edit_approve,
            Words::allow_similar,
            Words::decline,
            Words::fill_in,
            Words::other,
            Words::answer,
            Words::similar_note,
            Words::see_all,
        ] {
            assert_ne!(w(en), w(zh));
            assert!(!w(zh).is_ascii(), "{}", w(zh));
        }
    }
}
