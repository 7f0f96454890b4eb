//! The prompt's words, in English and Chinese, written once for the chat channels that have
//! no texts of their own (Slack, Discord, Telegram) and the phone notifications (ntfy, Web
//! Push): the buttons, the deadline, the "Allow similar" note, the note under a cut tool
//! call, a form asked step by step, the requests for a typed reply, the commands' answers
//! and a notification's title. A channel draws them in its own markup (mrkdwn on Slack,
//! markdown on Discord, HTML on Telegram: a word that takes a value takes it drawn and
//! escaped); `locale` in its section picks the language.
//! (The outcome, the votes, the escalation line, the notices after a tap and the digests
//! have their texts in [`crate::present::render`], [`super::pipeline`] and
//! [`super::digest_texts`].)

use crate::interaction::Kind;
use crate::present::render::Locale;

/// The words of a prompt in one locale.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Words(pub Locale);

impl Words {
    fn zh(self) -> bool {
        self.0 == Locale::ZhCn
    }

    /// `zh` in Chinese, `en` in English.
    pub(crate) fn pick(self, zh: &'static str, en: &'static str) -> &'static str {
        if self.zh() { zh } else { en }
    }

    /// The button that allows: "Approve".
    pub(crate) fn approve(self) -> &'static str {
        self.pick("批准", "Approve")
    }

    /// The button that denies: "Deny".
    pub(crate) fn deny(self) -> &'static str {
        self.pick("拒绝", "Deny")
    }

    /// The button that asks a reason before denying: "Deny with reason…".
    pub(crate) fn deny_with_reason(self) -> &'static str {
        self.pick("附理由拒绝…", "Deny with reason…")
    }

    /// The button that opens the command to edit: "Edit & approve…".
    pub(crate) fn edit_approve(self) -> &'static str {
        self.pick("改写后批准…", "Edit & approve…")
    }

    /// The button that allows and grants the proposed rule: "Allow similar (this session)".
    pub(crate) fn allow_similar(self) -> &'static str {
        self.pick("批准同类（本会话）", "Allow similar (this session)")
    }

    /// The button that declines a question or a form: "Decline".
    pub(crate) fn decline(self) -> &'static str {
        self.pick("拒绝回答", "Decline")
    }

    /// The button that opens a form: "Fill in…".
    pub(crate) fn fill_in(self) -> &'static str {
        self.pick("填写…", "Fill in…")
    }

    /// The button that takes a typed answer instead of an option: "Other…".
    pub(crate) fn other(self) -> &'static str {
        self.pick("其他…", "Other…")
    }

    /// The button that opens typed answers to several questions: "Answer…".
    pub(crate) fn answer(self) -> &'static str {
        self.pick("回答…", "Answer…")
    }

    /// The deadline of a prompt: "Deadline (denied automatically after): 14:05 UTC".
    pub(crate) fn deadline(self, time: &str) -> String {
        if self.zh() {
            format!("截止时间（超时自动拒绝）：{time}")
        } else {
            format!("Deadline (denied automatically after): {time}")
        }
    }

    /// What "Allow similar" adds, before the rule as the channel draws it: "Allow similar
    /// also allows, for this session: ".
    pub(crate) fn similar_note(self) -> &'static str {
        self.pick(
            "「批准同类」同时允许本会话中的：",
            "Allow similar also allows, for this session: ",
        )
    }

    /// "Allow similar" offered as reaction `key` (a chat without buttons, Matrix), before
    /// the rule: "React 🔁 to allow it and, for this session, calls like it: ".
    pub(crate) fn react_similar(self, key: &str) -> String {
        if self.zh() {
            format!("回应 {key} 批准，并在本会话中允许同类调用：")
        } else {
            format!("React {key} to allow it and, for this session, calls like it: ")
        }
    }

    /// Said after the rule when the agent keeps its own suggestion too.
    pub(crate) fn also_remembers(self) -> &'static str {
        self.pick(
            "（智能体也会在本会话中记住它自己的建议）",
            " (the agent also remembers its own suggestion for this session)",
        )
    }

    /// [`Words::also_remembers`] where `i`'s suggestions are applied along with a grant
    /// (`interaction::applied_with_a_grant`), and nothing elsewhere.
    pub(crate) fn also_remembers_for(self, i: &crate::interaction::Interaction) -> &'static str {
        if i.suggestions
            .as_deref()
            .is_some_and(crate::interaction::applied_with_a_grant)
        {
            self.also_remembers()
        } else {
            ""
        }
    }

    /// A note under a tool call cut short: "Input truncated: 1,234 more characters not
    /// shown", the inbox's phrase after it.
    pub(crate) fn input_truncated(self, note: &str) -> String {
        if self.zh() {
            format!("输入过长已截断：{note}")
        } else {
            format!("Input truncated: {note}")
        }
    }

    /// The link to all of a cut tool call: "See all of it in the imrelay inbox".
    pub(crate) fn see_all(self) -> &'static str {
        self.pick(
            "在 imrelay 收件箱查看全部",
            "See all of it in the imrelay inbox",
        )
    }
}

/// The words of a chat that asks step by step and takes typed replies (Telegram): its
/// buttons, its headlines, a form's instructions, the requests for a reply and the notices
/// after a tap or a reply.
impl Words {
    /// The button that allows: "Allow" (Telegram's word for [`Words::approve`]).
    pub(crate) fn allow(self) -> &'static str {
        self.pick("批准", "Allow")
    }

    /// The button that allows and applies the agent's own suggestion: "Always allow".
    pub(crate) fn always_allow(self) -> &'static str {
        self.pick("始终允许", "Always allow")
    }

    /// The button that sends a choice: "Submit".
    pub(crate) fn submit(self) -> &'static str {
        self.pick("提交", "Submit")
    }

    /// The button that ends a multi-select field: "Done".
    pub(crate) fn done(self) -> &'static str {
        self.pick("完成", "Done")
    }

    /// The button that leaves a field empty: "Skip".
    pub(crate) fn skip(self) -> &'static str {
        self.pick("跳过", "Skip")
    }

    /// The button that leaves a field to its default: "Skip (use the default)".
    pub(crate) fn skip_to_default(self) -> &'static str {
        self.pick("跳过（使用默认值）", "Skip (use the default)")
    }

    /// The button that goes back to the field before: "Back".
    pub(crate) fn back(self) -> &'static str {
        self.pick("返回", "Back")
    }

    /// A yes-or-no field's buttons: "Yes", "No".
    pub(crate) fn yes_no(self) -> [&'static str; 2] {
        if self.zh() {
            ["是", "否"]
        } else {
            ["Yes", "No"]
        }
    }

    /// The button that asks for a field's typed answer: "Type the answer…".
    pub(crate) fn type_answer(self) -> &'static str {
        self.pick("输入答案…", "Type the answer…")
    }

    /// The button showing a multi-select's typed answer, `text`: "Other: text".
    pub(crate) fn other_is(self, text: &str) -> String {
        if self.zh() {
            format!("其他：{text}")
        } else {
            format!("Other: {text}")
        }
    }

    /// What a message is about, by its kind: "Question", "Form" (an approval says its tool).
    pub(crate) fn kind_label(self, kind: Kind) -> &'static str {
        match kind {
            Kind::Question => self.pick("提问", "Question"),
            Kind::Form => self.pick("表单", "Form"),
            Kind::Approval => self.pick("审批", "Approval"),
        }
    }

    /// The headline of a pending approval of `tool` (drawn): "Bash needs approval".
    pub(crate) fn needs_approval(self, tool: &str) -> String {
        if self.zh() {
            format!("{tool} 需要审批")
        } else {
            format!("{tool} needs approval")
        }
    }

    /// The headline of a resolved approval of `tool` (drawn): "Approval for Bash".
    pub(crate) fn approval_for(self, tool: &str) -> String {
        if self.zh() {
            format!("{tool} 的审批")
        } else {
            format!("Approval for {tool}")
        }
    }

    /// How long a prompt waits, and until when: "Answer within 5 min — by 2026-11-22
    /// 08:41:26 UTC".
    pub(crate) fn answer_within(self, secs: u64, by: &str) -> String {
        let wait = crate::present::render::duration_words_in(secs, self.0);
        if self.zh() {
            format!("请在 {wait} 内回答（截止 {by}）")
        } else {
            format!("Answer within {wait} — by {by}")
        }
    }

    /// A form that cannot be shown, and why: "This form cannot be shown: …".
    pub(crate) fn form_unshowable(self, why: &str) -> String {
        if self.zh() {
            format!("无法显示此表单：{why}")
        } else {
            format!("This form cannot be shown: {why}")
        }
    }

    /// What "Allow similar" adds, named as the channel draws the button's name (`name`,
    /// from [`Words::similar_name`]), before the rule.
    pub(crate) fn similar_note_of(self, name: &str) -> String {
        if self.zh() {
            format!("{name}同时允许本会话中的：")
        } else {
            format!("{name} also allows, for this session: ")
        }
    }

    /// The name [`Words::similar_note_of`] gives "Allow similar".
    pub(crate) fn similar_name(self) -> &'static str {
        self.pick("「批准同类」", "Allow similar")
    }

    /// How to change the command before it runs, `edit` being the word to reply with
    /// (drawn): "To run it changed, reply to this message: edit and the command.".
    pub(crate) fn edit_by_reply(self, edit: &str) -> String {
        if self.zh() {
            format!("如需改写后运行，请回复此消息：{edit} 加上改写后的命令。")
        } else {
            format!("To run it changed, reply to this message: {edit} and the command.")
        }
    }

    /// How much of a tool call was cut: "1,234 more characters not shown".
    pub(crate) fn not_shown(self, cut: usize) -> String {
        if self.zh() {
            format!("另有 {cut} 个字符未显示")
        } else {
            crate::present::render::cut_note(cut)
        }
    }

    /// The link to all of a cut tool call, after [`Words::not_shown`]: "all of it in the
    /// inbox".
    pub(crate) fn all_in_inbox(self) -> &'static str {
        self.pick("在收件箱查看全部", "all of it in the inbox")
    }

    /// How to answer a single-choice question: "Choose one (or Other… to type).".
    pub(crate) fn choose_one(self) -> &'static str {
        self.pick(
            "选择一项（或点“其他…”输入）。",
            "Choose one (or Other… to type).",
        )
    }

    /// How to answer a multi-select question: "Choose any, then Submit (or Other… to type).".
    pub(crate) fn choose_any(self) -> &'static str {
        self.pick(
            "可多选，然后点“提交”（或点“其他…”输入）。",
            "Choose any, then Submit (or Other… to type).",
        )
    }

    /// A form's field the person left empty: "(left empty)".
    pub(crate) fn left_empty(self) -> &'static str {
        self.pick("（留空）", "(left empty)")
    }

    /// A form field's default: "Default: 3".
    pub(crate) fn default_is(self, value: &str) -> String {
        if self.zh() {
            format!("默认：{value}")
        } else {
            format!("Default: {value}")
        }
    }

    /// What to do with the field being asked, by its kind (`choice`: chosen with a button,
    /// `multi`: several of them, otherwise typed); with none asked and some given, to check
    /// and submit.
    pub(crate) fn form_instruction(self, asked: Option<FieldInput>) -> &'static str {
        match asked {
            Some(FieldInput::Choice) => self.pick("请点选你的回答。", "Tap your answer."),
            Some(FieldInput::Multi) => self.pick(
                "点选任意几项，然后点“完成”。",
                "Tap to choose any, then Done.",
            ),
            Some(FieldInput::Typed) => self.pick(
                "回复此消息填写答案，或点 ✏️ 输入答案。",
                "Reply to this message with the answer, or tap ✏️ Type the answer.",
            ),
            None => self.pick(
                "已全部填写：请核对后点“提交”。",
                "All filled in: check the answers, then Submit.",
            ),
        }
    }

    /// How to answer a single free-text question: "Reply to this message with your answer.".
    pub(crate) fn reply_with_answer(self) -> &'static str {
        self.pick(
            "请回复此消息作答。",
            "Reply to this message with your answer.",
        )
    }

    /// The request for a deny reason, to `who`, for the tool `tool` (both drawn).
    pub(crate) fn ask_reason(self, who: &str, tool: &str) -> String {
        if self.zh() {
            format!("{who}，请回复此消息，说明拒绝 {tool} 的理由。")
        } else {
            format!("{who}, reply to this message with the reason for denying {tool}.")
        }
    }

    /// The request for a typed answer to `question`, to `who` (both drawn).
    pub(crate) fn ask_answer(self, who: &str, question: &str) -> String {
        if self.zh() {
            format!("{who}，请回复此消息，回答：{question}")
        } else {
            format!("{who}, reply to this message with your answer to: {question}")
        }
    }

    /// The request for a form field's value, `label` (`hint`: what it takes), to `who`
    /// (all drawn).
    pub(crate) fn ask_field(self, who: &str, label: &str, hint: &str) -> String {
        if self.zh() {
            format!("{who}，请回复此消息，填写 {label}（{hint}）。")
        } else {
            format!("{who}, reply to this message with {label} ({hint}).")
        }
    }

    /// What a request names when the field or question is not known: "the answer", "the
    /// question".
    pub(crate) fn unknown_field(self) -> [&'static str; 2] {
        if self.zh() {
            ["答案", "该问题"]
        } else {
            ["the answer", "the question"]
        }
    }

    /// The toast that points at a reply request, and the placeholder of its field: for a deny
    /// reason (`reason`) or an answer.
    pub(crate) fn reply_below(self, reason: bool) -> [&'static str; 2] {
        match (self.zh(), reason) {
            (true, true) => ["请回复下方消息，说明理由。", "拒绝理由"],
            (true, false) => ["请回复下方消息作答。", "你的回答"],
            (false, true) => [
                "Reply to the message below with your reason.",
                "Reason for denying",
            ],
            (false, false) => [
                "Reply to the message below with your answer.",
                "Your answer",
            ],
        }
    }

    /// A reply request once its interaction is resolved, with how (`outcome`, drawn):
    /// "No reply needed any more: Allowed by alice via telegram".
    pub(crate) fn no_reply_needed(self, outcome: Option<&str>) -> String {
        match (self.zh(), outcome) {
            (true, Some(o)) => format!("无需再回复：{o}"),
            (true, None) => "无需再回复。".into(),
            (false, Some(o)) => format!("No reply needed any more: {o}"),
            (false, None) => "No reply needed any more.".into(),
        }
    }

    /// A reply request once its answer was taken (drawn): "Noted: yes".
    pub(crate) fn noted(self, text: &str) -> String {
        if self.zh() {
            format!("已记下：{text}")
        } else {
            format!("Noted: {text}")
        }
    }

    /// A reply to a request made for someone else.
    pub(crate) fn not_your_request(self) -> &'static str {
        self.pick(
            "此请求是给点按钮的那个人的。要回答，请自己点“附理由拒绝…”或“其他…”。",
            "This request is for the person who tapped the button. To answer, tap “Deny with reason…” or “Other…” yourself.",
        )
    }

    /// A tap or reply for a question answered already.
    pub(crate) fn question_answered(self) -> &'static str {
        self.pick("该问题已回答。", "That question is already answered.")
    }

    /// A reply for a field other than the one being asked.
    pub(crate) fn not_the_field_asked(self) -> &'static str {
        self.pick(
            "现在询问的不是这一项。",
            "That field is not the one being asked now.",
        )
    }

    /// A reply once every field is filled in.
    pub(crate) fn all_filled_in(self) -> &'static str {
        self.pick(
            "所有项都已填写：请点“提交”（或“返回”）。",
            "Every field is filled in: tap Submit (or Back).",
        )
    }

    /// A typed reply for field `label`, which is answered with a button.
    pub(crate) fn tap_a_button(self, label: &str) -> String {
        if self.zh() {
            format!("{label}：请点选一个按钮。")
        } else {
            format!("{label}: tap one of the buttons.")
        }
    }

    /// A typed reply that does not fit its field, and why.
    pub(crate) fn reply_again(self, why: &str) -> String {
        if self.zh() {
            format!("{why}。请重新回复。")
        } else {
            format!("{why}. Reply again.")
        }
    }

    /// A step on a form or a question, as its toast says it: field (or "Chosen",
    /// "Submitted") and value.
    pub(crate) fn step(self, label: &str, value: &str) -> String {
        if self.zh() {
            format!("{label}：{value}")
        } else {
            format!("{label}: {value}")
        }
    }

    /// The toast after a field was skipped.
    pub(crate) fn skipped(self, label: &str) -> String {
        self.step(label, self.pick("已跳过", "skipped"))
    }

    /// The toast after Back.
    pub(crate) fn back_to(self, label: &str) -> String {
        if self.zh() {
            format!("返回到 {label}")
        } else {
            format!("Back to {label}")
        }
    }

    /// The toasts after an option was chosen, and after a multi-select was submitted:
    /// "Chosen", "Submitted" (before [`Words::step`]'s value).
    pub(crate) fn chosen_submitted(self) -> [&'static str; 2] {
        if self.zh() {
            ["已选择", "已提交"]
        } else {
            ["Chosen", "Submitted"]
        }
    }

    /// The toast after a multi-select's typed answer was removed.
    pub(crate) fn other_removed(self) -> &'static str {
        self.pick("已移除其他答案", "Other answer removed")
    }

    /// A multi-select submitted with nothing chosen.
    pub(crate) fn choose_first(self) -> &'static str {
        self.pick(
            "请先至少选择一项（或点“其他…”）。",
            "Choose at least one option first (or Other…).",
        )
    }

    /// The text fallback's answer to `allow` on a question or a form.
    pub(crate) fn allow_a_question(self) -> &'static str {
        self.pick(
            "这是一个提问：请点选一项（或点“其他…”），或回复“deny [理由]”拒绝回答。",
            "This is a question: tap an option (or Other…), or reply “deny [reason]” to decline it.",
        )
    }

    /// How to answer `kind` by a typed reply (`editable`: an approval whose command may be
    /// changed).
    pub(crate) fn how_to_reply(self, kind: Kind, editable: bool) -> &'static str {
        match kind {
            Kind::Approval if editable => self.pick(
                "用文字回答：回复提示消息“allow”或“deny [理由]”，或回复“edit <命令>”运行改写后的命令。",
                "To answer by text, reply “allow” or “deny [reason]” to the prompt, or “edit <command>” to run a changed command.",
            ),
            Kind::Approval => self.pick(
                "用文字回答：回复提示消息“allow”或“deny [理由]”。",
                "To answer by text, reply “allow” or “deny [reason]” to the prompt.",
            ),
            Kind::Question => self.pick(
                "要回答，请点选一项（或点“其他…”），或回复“deny [理由]”拒绝回答。",
                "To answer, tap an option (or Other…), or reply “deny [reason]” to decline.",
            ),
            Kind::Form => self.pick(
                "要回答，请点按钮，或回复“deny [理由]”拒绝填写。",
                "To answer, tap the buttons, or reply “deny [reason]” to decline.",
            ),
        }
    }
}

/// What a form's field being asked takes, for [`Words::form_instruction`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FieldInput {
    /// One choice among buttons (a yes-or-no, a choice).
    Choice,
    /// Several choices among buttons.
    Multi,
    /// Typed text or a number.
    Typed,
}

/// The answers of a chat's commands (`/whoami`, `/sessions`, `/pending`, a message the bot
/// does not take as an answer).
impl Words {
    /// Who may list the sessions.
    pub(crate) fn only_approvers_list(self) -> &'static str {
        self.pick(
            "只有审批人可以查看会话。",
            "Only approvers can list the sessions.",
        )
    }

    /// The sessions cannot be read (the store).
    pub(crate) fn sessions_unreadable(self) -> &'static str {
        self.pick(
            "暂时无法读取会话，请稍后再试。",
            "The sessions cannot be read right now; try again later.",
        )
    }

    /// No session to list.
    pub(crate) fn no_sessions(self) -> &'static str {
        self.pick(
            "本会话的路由还没有已知的智能体会话。",
            "No agent session of this chat's routes is known.",
        )
    }

    /// The listing's header: "Sessions".
    pub(crate) fn sessions(self) -> &'static str {
        self.pick("会话", "Sessions")
    }

    /// The greeting of `/start`, `imrelay` drawn as `name`.
    pub(crate) fn greeting(self, name: &str) -> String {
        if self.zh() {
            format!("{name} 会把智能体的工具审批和提问发到这里，点按钮即可回答。")
        } else {
            format!("{name} posts your agents' tool approvals and questions here; tap to answer.")
        }
    }

    /// `/whoami`'s line on the chat: its id (drawn), and whether prompts are posted there
    /// (`setting`, drawn: where to add it).
    pub(crate) fn chat_id_line(self, id: &str, posted: bool, setting: &str) -> String {
        match (self.zh(), posted) {
            (true, true) => format!("本聊天的 id：{id} — 请求会发到这里。"),
            (true, false) => {
                format!("本聊天的 id：{id} — 不在 {setting} 中，请求不会发到这里。")
            }
            (false, true) => format!("Chat id: {id} — prompts are posted here."),
            (false, false) => {
                format!("Chat id: {id} — not in {setting}, so prompts are not posted here.")
            }
        }
    }

    /// `/whoami`'s line on the sender: their id and name (drawn), and whether they are an
    /// approver (`setting`, drawn: where to add them).
    pub(crate) fn user_id_line(
        self,
        id: &str,
        name: &str,
        approver: bool,
        setting: &str,
    ) -> String {
        match (self.zh(), approver) {
            (true, true) => format!("你的用户 id：{id}（{name}）— 你是审批人。"),
            (true, false) => {
                format!("你的用户 id：{id}（{name}）— 你不是审批人（把此 id 加入 {setting}）。")
            }
            (false, true) => format!("Your user id: {id} ({name}) — you are an approver."),
            (false, false) => format!(
                "Your user id: {id} ({name}) — you are not an approver (add this id to {setting})."
            ),
        }
    }

    /// The warning when the approver list (`setting`, drawn) is empty.
    pub(crate) fn nobody_answers(self, setting: &str, channel: &str) -> String {
        if self.zh() {
            format!("{setting} 为空：没有人能从 {channel} 回答。")
        } else {
            format!("{setting} is empty: nobody can answer from {channel}.")
        }
    }

    /// A command the bot does not know.
    pub(crate) fn unknown_command(self) -> &'static str {
        self.pick(
            "未知命令。试试 /whoami、/pending 或 /sessions。",
            "Unknown command. Try /whoami, /pending or /sessions.",
        )
    }

    /// `/pending` in a chat prompts are not posted in: `id` and `setting` drawn.
    pub(crate) fn not_posted_here(self, id: &str, setting: &str) -> String {
        if self.zh() {
            format!("请求不会发到这个聊天：请先把 {id} 加入 {setting}。")
        } else {
            format!("Prompts are not posted in this chat: add {id} to {setting} first.")
        }
    }

    /// `/pending` from someone who is not an approver.
    pub(crate) fn only_approvers_pending(self) -> &'static str {
        self.pick(
            "只有审批人可以查看待处理的请求。",
            "Only approvers can ask for the pending prompts.",
        )
    }

    /// `/pending` with nothing pending.
    pub(crate) fn nothing_pending(self) -> &'static str {
        self.pick("没有待处理的请求。", "Nothing is pending.")
    }

    /// `/pending`'s answer: "Re-posting 3 pending interactions.".
    pub(crate) fn reposting(self, n: usize) -> String {
        if self.zh() {
            format!("正在重新发送 {n} 个待处理请求。")
        } else {
            let what = if n == 1 {
                "interaction"
            } else {
                "interactions"
            };
            format!("Re-posting {n} pending {what}.")
        }
    }

    /// The hint an approver gets for a message that is no command nor answer.
    pub(crate) fn hello(self) -> &'static str {
        self.pick(
            "你好！我会发送来自 imrelay 的审批请求。发送 /whoami 查看你的 id，发送 /pending 查看待处理的请求。",
            "Hello! I post approval prompts from imrelay. Send /whoami to see your ids, /pending to see what is waiting.",
        )
    }
}

/// The words of a phone notification (ntfy, Web Push).
impl Words {
    /// What waits, by its kind: "An approval", "A question", "A form".
    fn a_kind(self, kind: Kind) -> &'static str {
        match kind {
            Kind::Approval => self.pick("审批请求", "An approval"),
            Kind::Question => self.pick("提问", "A question"),
            Kind::Form => self.pick("表单", "A form"),
        }
    }

    /// The privacy mode's title: "An approval is waiting in shop".
    pub(crate) fn waiting_in(self, kind: Kind, place: &str) -> String {
        let what = self.a_kind(kind);
        if self.zh() {
            format!("{place} 有待处理的{what}")
        } else {
            format!("{what} is waiting in {place}")
        }
    }

    /// A question's or a form's title: "A question from shop".
    pub(crate) fn kind_from(self, kind: Kind, place: &str) -> String {
        let what = self.a_kind(kind);
        if self.zh() {
            format!("来自 {place} 的{what}")
        } else {
            format!("{what} from {place}")
        }
    }

    /// The privacy mode's text: "Open imrelay to see what is asked.".
    pub(crate) fn open_to_see(self) -> &'static str {
        self.pick(
            "打开 imrelay 查看请求内容。",
            "Open imrelay to see what is asked.",
        )
    }

    /// The text of a question or a form that has no title: "Open imrelay to answer.".
    pub(crate) fn open_to_answer(self) -> &'static str {
        self.pick("打开 imrelay 回答。", "Open imrelay to answer.")
    }

    /// An outcome that could not be said more precisely: "Resolved".
    pub(crate) fn resolved(self) -> &'static str {
        self.pick("已处理", "Resolved")
    }

    /// A notification's button imrelay did not make, or made for another action.
    pub(crate) fn button_not_valid(self) -> &'static str {
        self.pick(
            "此按钮无效：它不是 imrelay 生成的，或不是为此操作生成的",
            "this button is not valid: it was not made by imrelay, or not for this action",
        )
    }

    /// A notification's button pressed after the request's deadline.
    pub(crate) fn request_expired(self) -> &'static str {
        self.pick(
            "此请求已过期：未做任何更改",
            "this request has expired: nothing changed",
        )
    }

    /// A notification's button pressed a second time.
    pub(crate) fn button_used(self) -> &'static str {
        self.pick(
            "此按钮已用过：每个按钮只能回答一次",
            "this button was already used: each one answers once",
        )
    }

    /// A notification's button on a device removed since.
    pub(crate) fn device_removed(self) -> &'static str {
        self.pick(
            "此设备已移除：它的通知不再能回答",
            "this device was removed: its notifications no longer answer",
        )
    }

    /// A notification's button on a device that names no person.
    pub(crate) fn device_without_person(self) -> &'static str {
        self.pick(
            "此设备没有可代表其回答的人",
            "this device has no person to answer as",
        )
    }

    /// A notification's buttons past their own time.
    pub(crate) fn buttons_expired(self) -> &'static str {
        self.pick(
            "此通知的按钮已过期：请打开收件箱回答",
            "this notification's buttons have expired: open the inbox to answer",
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
            Words::allow,
            Words::always_allow,
            Words::submit,
            Words::done,
            Words::skip,
            Words::skip_to_default,
            Words::back,
            Words::type_answer,
            Words::similar_name,
            Words::all_in_inbox,
            Words::choose_one,
            Words::choose_any,
            Words::left_empty,
            Words::reply_with_answer,
            Words::not_your_request,
            Words::question_answered,
            Words::not_the_field_asked,
            Words::all_filled_in,
            Words::other_removed,
            Words::choose_first,
            Words::allow_a_question,
            Words::only_approvers_list,
            Words::sessions_unreadable,
            Words::no_sessions,
            Words::sessions,
            Words::unknown_command,
            Words::only_approvers_pending,
            Words::nothing_pending,
            Words::hello,
            Words::open_to_see,
            Words::open_to_answer,
            Words::resolved,
            Words::button_not_valid,
            Words::request_expired,
            Words::button_used,
            Words::device_removed,
            Words::device_without_person,
            Words::buttons_expired,
        ] {
            assert_ne!(w(en), w(zh));
            assert!(!w(zh).is_ascii(), "{}", w(zh));
        }
        for kind in [Kind::Approval, Kind::Question, Kind::Form] {
            assert!(!en.kind_label(kind).is_empty() && !zh.kind_label(kind).is_ascii());
            assert!(!zh.how_to_reply(kind, true).is_empty());
            assert_ne!(en.waiting_in(kind, "shop"), zh.waiting_in(kind, "shop"));
        }
        assert_eq!(
            en.waiting_in(Kind::Approval, "shop"),
            "An approval is waiting in shop"
        );
        assert_eq!(en.kind_from(Kind::Question, "shop"), "A question from shop");
        assert_eq!(
            en.answer_within(300, "then"),
            "Answer within 5 min — by then"
        );
        assert_eq!(
            zh.answer_within(300, "then"),
            "请在 5 分钟 内回答（截止 then）"
        );
        assert_eq!(en.not_shown(1234), "1,234 more characters not shown");
        assert_eq!(en.reposting(1), "Re-posting 1 pending interaction.");
    }
}
