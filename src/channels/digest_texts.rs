//! A digest's texts (see [`super::digest`]), in English and Chinese: its title, its lines, its
//! buttons, the confirmation of an "all" answer and what the person is told after a tap.

use std::sync::Arc;

use crate::interaction::{Interaction, Kind};
use crate::present::render::Locale;

/// How many members a digest lists by name; the rest are counted.
pub(crate) const LISTED: usize = 8;

/// What answering all the listed interactions did, one count per result.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    /// Answered by this tap.
    pub answered: usize,
    /// Answered before (by someone, anywhere), expired or gone.
    pub already: usize,
    /// Not for this person (another route's approvers).
    pub refused: usize,
    /// Left for Review: a question or a form "Approve all" cannot answer.
    pub skipped: usize,
    /// Not recorded (the store); trying again may work.
    pub failed: usize,
}

/// Characters of one member's line.
const LINE_CHARS: usize = 80;

/// A digest's texts in one locale.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Texts(pub Locale);

impl Texts {
    fn zh(self) -> bool {
        self.0 == Locale::ZhCn
    }

    /// A title that names neither session nor folder, for a notification in the privacy mode:
    /// "5 requests waiting" ("Requests: all answered" once `n` is 0, the digest closed).
    pub(crate) fn private_title(self, n: usize) -> String {
        match (n, self.zh()) {
            (0, true) => self.done("请求"),
            (0, false) => self.done("Requests"),
            (n, true) => format!("{n} 个待处理请求"),
            (1, false) => "1 request waiting".to_string(),
            (n, false) => format!("{n} requests waiting"),
        }
    }

    /// "5 requests from session s-1 in ~/shop" (session and folder of its first member).
    pub(crate) fn title(self, n: usize, first: Option<&Interaction>) -> String {
        let session = first
            .and_then(|i| i.session.as_deref())
            .map(|s| crate::present::visible_line(&crate::interaction::clip(s, 24)));
        let cwd = first
            .and_then(|i| i.cwd.as_deref())
            .map(|c| crate::present::visible_line(&crate::interaction::clip(c, 60)));
        if self.zh() {
            let from = match (&session, &cwd) {
                (Some(s), Some(c)) => format!("会话 {s}（{c}）"),
                (Some(s), None) => format!("会话 {s}"),
                (None, Some(c)) => format!("{c} 中无会话的请求"),
                (None, None) => "无会话的请求".to_string(),
            };
            return format!("{from}：{n} 个待处理请求");
        }
        let what = if n == 1 { "request" } else { "requests" };
        match (session, cwd) {
            (Some(s), Some(c)) => format!("{n} {what} from session {s} in {c}"),
            (Some(s), None) => format!("{n} {what} from session {s}"),
            (None, Some(c)) => format!("{n} {what} without a session in {c}"),
            (None, None) => format!("{n} {what} without a session"),
        }
    }

    /// One line per listed member ("Run: cargo test"), and how many more are not listed.
    pub(crate) fn lines(self, members: &[Arc<Interaction>]) -> (Vec<String>, usize) {
        let lines = members.iter().take(LISTED).map(|i| self.line(i)).collect();
        (lines, members.len().saturating_sub(LISTED))
    }

    fn line(self, i: &Interaction) -> String {
        let text = match i.kind {
            Kind::Approval => {
                crate::present::present(
                    &i.tool_name,
                    &i.input.map(),
                    i.cwd.as_deref(),
                    crate::present::Budget::TERMINAL,
                )
                .summary
            }
            Kind::Question | Kind::Form => {
                let label = crate::channels::words::Words(self.0).kind_label(i.kind);
                match i.title() {
                    Some(t) => format!("{label}: {}", crate::present::visible_line(t)),
                    None => label.to_string(),
                }
            }
        };
        crate::interaction::clip(&text, LINE_CHARS)
    }

    /// "… and 3 more".
    pub(crate) fn more(self, n: usize) -> String {
        if self.zh() {
            format!("…… 另有 {n} 个")
        } else {
            format!("… and {n} more")
        }
    }

    /// The buttons' labels: Review, Approve all, Deny all.
    pub(crate) fn buttons(self) -> [&'static str; 3] {
        if self.zh() {
            ["逐个查看", "全部批准", "全部拒绝"]
        } else {
            ["Review", "Approve all", "Deny all"]
        }
    }

    /// The confirmation: "Approve 5 requests? Each is answered on its own."
    pub(crate) fn confirm(self, allow: bool, members: &[Arc<Interaction>]) -> String {
        let n = members.len();
        let others = members.iter().filter(|i| i.kind != Kind::Approval).count();
        if self.zh() {
            let verb = if allow { "批准" } else { "拒绝" };
            let mut s = format!("确认{verb}这 {n} 个请求？每个请求分别处理，已被处理的保持不变。");
            if allow && others > 0 {
                s.push_str(&format!(
                    "其中 {others} 个是提问或表单，需逐个回答，不会被批准。"
                ));
            }
            return s;
        }
        let verb = if allow { "Approve" } else { "Deny" };
        let what = if n == 1 { "request" } else { "requests" };
        let mut s = format!(
            "{verb} {n} {what}? Each is answered on its own; any already answered stays as it is."
        );
        if allow && others > 0 {
            s.push_str(&format!(
                " {others} of them {} questions or forms: they are left for Review.",
                if others == 1 { "is one of the" } else { "are" }
            ));
        }
        s
    }

    /// The confirmation's buttons: "Yes, approve 5", "Cancel".
    pub(crate) fn confirm_buttons(self, allow: bool, n: usize) -> [String; 2] {
        if self.zh() {
            let verb = if allow { "批准" } else { "拒绝" };
            [format!("确认{verb} {n} 个"), "取消".into()]
        } else {
            let verb = if allow { "approve" } else { "deny" };
            [format!("Yes, {verb} {n}"), "Cancel".into()]
        }
    }

    /// The toast after answering all: "Approved 4 · 1 already answered · 1 not yours".
    pub(crate) fn tally(self, allow: bool, t: Tally) -> String {
        let zh = self.zh();
        let mut parts = vec![match (zh, allow) {
            (true, true) => format!("已批准 {} 个", t.answered),
            (true, false) => format!("已拒绝 {} 个", t.answered),
            (false, true) => format!("Approved {}", t.answered),
            (false, false) => format!("Denied {}", t.answered),
        }];
        let mut add = |n: usize, zh_text: &str, en: &str| {
            if n > 0 {
                parts.push(if zh {
                    format!("{n} 个{zh_text}")
                } else {
                    format!("{n} {en}")
                });
            }
        };
        add(t.already, "已被处理", "already answered");
        add(t.refused, "无权处理", "not yours to answer");
        add(t.skipped, "需逐个回答", "left for Review");
        add(t.failed, "未能记录，请重试", "not recorded (try again)");
        parts.join(" · ")
    }

    /// A tap on a list that changed since it was shown: nothing was answered.
    pub(crate) fn stale(self, now: usize) -> String {
        if self.zh() {
            format!("列表已变化（现有 {now} 个请求），未做任何处理。请查看更新后的列表再点击。")
        } else {
            format!(
                "This list changed since you saw it (now {now}): nothing was answered. Look again and tap once more."
            )
        }
    }

    /// A tap on a digest that no longer exists.
    pub(crate) fn closed(self) -> String {
        if self.zh() {
            "该汇总已结束：其中的请求均已处理".into()
        } else {
            "This digest is closed: its requests were all answered".into()
        }
    }

    /// The text of an emptied digest.
    pub(crate) fn done(self, first_title: &str) -> String {
        if self.zh() {
            format!("{first_title}——均已处理")
        } else {
            format!("{first_title}: all answered")
        }
    }

    /// Review posted member `n` of `of` on its own.
    pub(crate) fn reviewing(self, n: usize, of: usize) -> String {
        if self.zh() {
            format!("已在下方单独显示第 {n} 个（共 {of} 个）")
        } else {
            format!("Request {n} of {of} is posted below on its own")
        }
    }

    /// Review found every member posted already.
    pub(crate) fn all_reviewed(self) -> String {
        if self.zh() {
            "它们都已在下方单独显示".into()
        } else {
            "Each of them is posted below already".into()
        }
    }

    /// The confirmation is shown.
    pub(crate) fn confirm_below(self) -> String {
        if self.zh() {
            "请在消息中确认".into()
        } else {
            "Confirm on the message".into()
        }
    }

    /// Cancel: nothing answered.
    pub(crate) fn cancelled(self) -> String {
        if self.zh() {
            "已取消，未做任何处理".into()
        } else {
            "Cancelled: nothing was answered".into()
        }
    }

    /// How a digest is answered where answers are reactions (Matrix), `keys` being the
    /// reactions of Approve all, Deny all and Review.
    pub(crate) fn react_list(self, keys: [&str; 3]) -> String {
        let [allow, deny, review] = keys;
        if self.zh() {
            format!(
                "回应 {allow} 全部批准，{deny} 全部拒绝（都需再确认一次）；回应 {review} 逐个查看（下一个单独显示）。"
            )
        } else {
            format!(
                "React {allow} to approve all or {deny} to deny all (you are asked to confirm), or {review} to review them one at a time (the next is posted on its own)."
            )
        }
    }

    /// How a confirmation is answered where answers are reactions, `keys` being the
    /// reactions of Yes and Cancel.
    pub(crate) fn react_confirm(self, keys: [&str; 2]) -> String {
        let [yes, cancel] = keys;
        if self.zh() {
            format!("在此消息上回应 {yes} 确认，{cancel} 取消。")
        } else {
            format!("React {yes} on this message to confirm, or {cancel} to cancel.")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interaction::InteractionId;
    use jiff::Timestamp;

    fn pending(id: &str, session: Option<&str>, created_ms: i64) -> Interaction {
        Interaction {
            session: session.map(Into::into),
            cwd: Some("/home/dev/shop".into()),
            ..Interaction::pending(
                InteractionId::parse(id).unwrap(),
                "Bash",
                serde_json::json!({"command": "cargo test"})
                    .as_object()
                    .unwrap()
                    .clone(),
                Timestamp::from_millisecond(created_ms).unwrap(),
                300,
            )
        }
    }

    #[test]
    fn texts_in_both_languages() {
        let i = Arc::new(pending("a", Some("s-1"), 1));
        let members = vec![i.clone(), i.clone()];
        let en = Texts(Locale::EnUs);
        let zh = Texts(Locale::ZhCn);
        assert_eq!(
            en.title(5, Some(&i)),
            "5 requests from session s-1 in /home/dev/shop"
        );
        assert_eq!(
            zh.title(5, Some(&i)),
            "会话 s-1（/home/dev/shop）：5 个待处理请求"
        );
        assert_eq!(en.lines(&members).0, ["Run: cargo test", "Run: cargo test"]);
        let t = Tally {
            answered: 4,
            already: 1,
            refused: 1,
            ..Tally::default()
        };
        assert_eq!(
            en.tally(true, t),
            "Approved 4 · 1 already answered · 1 not yours to answer"
        );
        assert_eq!(
            zh.tally(true, t),
            "已批准 4 个 · 1 个已被处理 · 1 个无权处理"
        );
        assert!(
            en.confirm(true, &members)
                .starts_with("Approve 2 requests?")
        );
        for (e, z) in [
            (en.stale(3), zh.stale(3)),
            (en.closed(), zh.closed()),
            (en.cancelled(), zh.cancelled()),
            (en.all_reviewed(), zh.all_reviewed()),
            (en.reviewing(1, 2), zh.reviewing(1, 2)),
            (en.confirm(false, &members), zh.confirm(false, &members)),
        ] {
            assert!(e.is_ascii() && !z.is_ascii(), "{e} / {z}");
        }
    }
}
