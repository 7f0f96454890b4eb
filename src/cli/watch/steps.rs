//! What a line typed at each step of `imrelay watch` does, apart from the terminal.
//!
//! [`Step::first`] picks the first step of an interaction by its kind, [`Step::take`] reads a
//! line at a step (changing the step's own state: the answers given so far, the form's
//! [`FormDraft`]) and says what the watch does next as an [`Act`], and [`Step::prompt`] is the
//! prompt's text. None of them prints or sends: the watch carries the act out, and the tests
//! below drive them with lines alone.

use serde_json::{Map, Value};

use crate::cli::choose::{self, Choice};
use crate::interaction::form::FieldType;
use crate::interaction::{Answer, Form, FormDraft, Interaction, Kind, Question};
use crate::present::visible_line;

/// Where the person is with the interaction shown.
#[derive(Debug)]
pub(super) enum Step {
    /// An approval: a, d, e, s or q.
    Choose,
    /// The reason for a deny (or for declining a question).
    Reason,
    /// `$EDITOR` has the terminal.
    Editing,
    /// An edited input, to allow or not.
    Edited(Map<String, Value>),
    /// An edit that is not a JSON object; its text is kept for the next edit.
    EditFailed(String),
    /// A question; `answers` holds those already given.
    Asking {
        questions: Vec<Question>,
        answers: Vec<(Choice, Value)>,
    },
    /// A form, filled in field by field; `draft` holds the fields done, `lines` the lines
    /// typed so far for a multi-line field (an empty line ends it).
    Filling {
        form: Form,
        draft: FormDraft,
        lines: Option<Vec<String>>,
    },
    /// A question whose input cannot be read: it can be declined or skipped.
    Unreadable,
    /// The answer is on its way, with the rule (and scope) of "allow similar calls".
    Sending {
        answer: Answer,
        attempt: u32,
        grant: Option<(String, &'static str)>,
    },
    /// "Allow similar calls": the rule, proposed and editable.
    Similar(String),
    /// "Allow similar calls" by this rule: for the session, or standing.
    SimilarScope(String),
}

/// A rule of "allow similar calls" and its scope (`session` or `standing`).
pub(super) type Grant = (String, &'static str);

/// What the watch does after a line was read at a step.
#[derive(Debug)]
pub(super) enum Act {
    /// Nothing changes (an empty line where one means nothing).
    Nothing,
    /// Tell the person this; the step stays.
    Error(String),
    /// Go on to this step.
    Step(Step),
    /// Show the interaction again from its start (cancel, back).
    Show,
    /// Skip it: it stays pending and comes back after the others.
    Skip,
    /// Leave `imrelay watch`.
    Quit,
    /// Open the input (this text) in `$EDITOR`.
    Edit(String),
    /// Send this answer, with a grant beside it.
    Send(Answer, Option<Grant>),
    /// A question answered or a form field filled in, shown back as `shown` (`None`: the
    /// line typed already shows it); then `then`.
    Took { shown: Option<String>, then: Then },
    /// A line of a multi-line field was kept; the prompt moves to the next line.
    Line,
}

/// What comes after a question answered or a field filled in.
#[derive(Debug)]
pub(super) enum Then {
    /// Ask the next question (the step holds which).
    NextQuestion,
    /// Ask the next field of the form (the step's draft holds which).
    NextField,
    /// Everything is answered: send this.
    Send(Answer),
}

/// The first step of `i`, by its kind; the reason it cannot be read if it cannot.
pub(super) fn first(i: &Interaction) -> Result<Step, String> {
    match i.kind {
        Kind::Approval => Ok(Step::Choose),
        Kind::Form => match Form::from_input(&i.input.map()) {
            Ok(form) => Ok(Step::Filling {
                form,
                draft: FormDraft::new(),
                lines: None,
            }),
            Err(e) => Err(e.to_string()),
        },
        Kind::Question => match crate::interaction::parse_questions(&i.input.map()) {
            Ok(questions) => Ok(Step::Asking {
                questions,
                answers: Vec::new(),
            }),
            Err(e) => Err(e.to_string()),
        },
    }
}

/// Whether `word` (trimmed, lower case) lists the agent sessions.
pub(super) fn is_sessions(word: &str) -> bool {
    matches!(word, "sessions" | "/sessions")
}

/// Whether `word` (trimmed, lower case) leaves the watch.
pub(super) fn is_quit(word: &str) -> bool {
    matches!(word, "q" | "quit" | "exit")
}

/// The input as the editor shows it: pretty JSON and a final newline.
pub(super) fn pretty(input: &Map<String, Value>) -> String {
    serde_json::to_string_pretty(&Value::Object(input.clone())).unwrap_or_default() + "\n"
}

impl Step {
    /// Reads `line`, typed at this step of `i`.
    pub(super) fn take(&mut self, i: &Interaction, line: &str) -> Act {
        let word = line.trim().to_lowercase();
        match self {
            Step::Choose => choose_approval(i, &word),
            Step::Similar(proposed) => similar_rule(proposed, line),
            Step::SimilarScope(rule) => similar_scope(rule, &word),
            Step::Reason => {
                let reason = line.trim();
                Act::Send(
                    Answer::Deny {
                        message: (!reason.is_empty()).then(|| reason.to_string()),
                        interrupt: false,
                    },
                    None,
                )
            }
            Step::Editing | Step::Sending { .. } => Act::Error("Still sending the answer…".into()),
            Step::Edited(input) => edited_input(input, &word),
            Step::EditFailed(text) => match word.as_str() {
                "e" | "edit" => Act::Edit(text.clone()),
                "c" | "cancel" => Act::Show,
                w if is_quit(w) => Act::Quit,
                "" => Act::Nothing,
                _ => Act::Error("Type e (edit again) or c (cancel).".into()),
            },
            Step::Unreadable => match word.as_str() {
                "d" | "decline" | "deny" => Act::Step(Step::Reason),
                "s" | "skip" => Act::Skip,
                w if is_quit(w) => Act::Quit,
                _ => Act::Error("Type d (decline), s (skip) or q (quit).".into()),
            },
            Step::Asking { questions, answers } => match word.as_str() {
                "s" | "skip" => Act::Skip,
                "d" | "decline" => Act::Step(Step::Reason),
                w if is_quit(w) => Act::Quit,
                _ => answer_question(questions, answers, line),
            },
            Step::Filling { form, draft, lines } => match word.as_str() {
                "s" | "skip" => Act::Skip,
                "d" | "decline" => Act::Step(Step::Reason),
                w if is_quit(w) => Act::Quit,
                _ => fill_field(form, draft, lines, line),
            },
        }
    }

    /// The prompt's text at this step of `i`; `tty` when Esc can go back.
    pub(super) fn prompt(&self, i: &Interaction, tty: bool) -> String {
        match self {
            Step::Choose => format!("{} › ", approval_letters(i)),
            // A deny's words reach the model as the person's instruction.
            Step::Reason if i.kind == Kind::Approval && tty => {
                "deny and tell the agent what to do instead (Enter for nothing, Esc goes back) › "
                    .into()
            }
            Step::Reason if i.kind == Kind::Approval => {
                "deny and tell the agent what to do instead (Enter for nothing) › ".into()
            }
            Step::Reason if tty => "reason for the agent (Enter for none, Esc goes back) › ".into(),
            Step::Reason => "reason for the agent (Enter for none) › ".into(),
            Step::Editing => "(editing…)".into(),
            Step::Edited(_) => "a allow with this input · e edit again · c cancel › ".into(),
            Step::EditFailed(_) => "e edit again · c cancel › ".into(),
            Step::Asking { questions, answers } => {
                let q = &questions[answers.len().min(questions.len() - 1)];
                if q.multi_select {
                    "numbers like 1,3, or your own answer › ".into()
                } else {
                    format!("1–{}, or your own answer › ", q.options.len())
                }
            }
            Step::Filling {
                lines: Some(typed), ..
            } => format!("line {} (an empty line ends it) › ", typed.len() + 1),
            Step::Filling { form, .. } if form.is_single_text() => "your answer › ".into(),
            Step::Filling { form, draft, .. } => match draft.asked(form).map(|(_, f)| f) {
                Some(f) if !f.options().is_empty() => {
                    format!("{}: 1–{} › ", visible_line(f.label()), f.options().len())
                }
                Some(f) => format!("{} › ", visible_line(f.label())),
                None => "› ".into(),
            },
            Step::Unreadable => "d/s/q › ".into(),
            Step::Similar(rule) if rule.is_empty() => {
                "allow similar calls by the rule (e.g. Bash(npm run test:*); c cancels) › ".into()
            }
            Step::Similar(rule) => format!(
                "allow similar calls by {} (Enter keeps it, or type another rule; c cancels) › ",
                visible_line(rule)
            ),
            Step::SimilarScope(_) => {
                "s for this session · a always (until revoked) · c cancel › ".into()
            }
            Step::Sending { attempt: 1, .. } => "sending… ".into(),
            Step::Sending { attempt, .. } => format!("sending… (attempt {attempt}) "),
        }
    }
}

/// Whether several people decide `i` (a quorum): each allows it as it is, and no grant
/// stands for them, so neither an edit nor "allow similar calls" is offered.
pub(super) fn voted(i: &Interaction) -> bool {
    i.quorum().is_some()
}

/// The keys an approval takes, as the prompt shows them: `a/d/e/g/s/q`, without `e` for an
/// agent that cannot run an edited input and without `e` and `g` when several people decide.
pub(super) fn approval_letters(i: &Interaction) -> String {
    approval_keys(i)
        .iter()
        .map(|(k, _)| *k)
        .collect::<Vec<_>>()
        .join("/")
}

/// An approval's keys and what each does.
pub(super) fn approval_keys(i: &Interaction) -> Vec<(&'static str, &'static str)> {
    let mut keys = vec![("a", "allow"), ("d", "deny")];
    if !i.input_fixed && !voted(i) {
        keys.push(("e", "edit, then allow"));
    }
    if !voted(i) {
        keys.push(("g", "allow similar calls"));
    }
    keys.extend([("s", "skip"), ("q", "quit")]);
    keys
}

/// An approval's keys.
fn choose_approval(i: &Interaction, word: &str) -> Act {
    match word {
        "a" | "allow" => Act::Send(
            Answer::Allow {
                updated_input: None,
                always: false,
            },
            None,
        ),
        "d" | "deny" => Act::Step(Step::Reason),
        "e" | "edit" if i.input_fixed => Act::Error(format!(
            "{} cannot run an edited input: type a (allow) or d (deny).",
            i.agent
                .as_deref()
                .map(visible_line)
                .unwrap_or("This agent".into())
        )),
        "e" | "edit" | "g" | "similar" if voted(i) => Act::Error(
            "Several people decide this one: each allows it as it is, and no rule allows it for \
             them. Type a (allow: your vote) or d (deny)."
                .into(),
        ),
        "e" | "edit" => Act::Edit(pretty(&i.input.map())),
        "g" | "similar" => Act::Step(Step::Similar(
            crate::interaction::policy::propose(i).unwrap_or_default(),
        )),
        "s" | "skip" => Act::Skip,
        w if is_quit(w) => Act::Quit,
        "" => Act::Nothing,
        _ => Act::Error(format!("Type {}, then Enter.", approval_words(i))),
    }
}

/// The keys an approval takes, in words: "a (allow), d (deny), … or q (quit)".
fn approval_words(i: &Interaction) -> String {
    let words: Vec<String> = approval_keys(i)
        .iter()
        .map(|(k, what)| {
            let what = match *k {
                "e" => "edit",
                _ => what,
            };
            format!("{k} ({what})")
        })
        .collect();
    match words.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => words.join(""),
    }
}

/// The rule of "allow similar calls": Enter keeps the one proposed.
fn similar_rule(proposed: &str, line: &str) -> Act {
    let typed = line.trim();
    let rule = if typed.is_empty() {
        proposed.to_string()
    } else {
        typed.to_string()
    };
    match (typed, rule.as_str()) {
        ("c" | "cancel", _) => Act::Show,
        (_, "") => Act::Error("Type the rule to allow, e.g. Bash(npm run test:*)".into()),
        _ => match crate::interaction::policy::check_rule(&rule) {
            Ok(()) => Act::Step(Step::SimilarScope(rule)),
            Err(e) => Act::Error(format!(
                "{}: {}",
                visible_line(&rule),
                visible_line(&e.message)
            )),
        },
    }
}

/// The scope of "allow similar calls" by `rule`.
fn similar_scope(rule: &str, word: &str) -> Act {
    let allow = Answer::Allow {
        updated_input: None,
        always: false,
    };
    match word {
        "s" | "session" => Act::Send(allow, Some((rule.to_string(), "session"))),
        "a" | "always" | "standing" => Act::Send(allow, Some((rule.to_string(), "standing"))),
        "c" | "cancel" => Act::Show,
        "" => Act::Nothing,
        _ => Act::Error("Type s (this session), a (always) or c (cancel).".into()),
    }
}

/// An edited input, shown: allow with it, edit again or cancel.
fn edited_input(input: &Map<String, Value>, word: &str) -> Act {
    match word {
        "a" | "allow" => Act::Send(
            Answer::Allow {
                updated_input: Some(input.clone()),
                always: false,
            },
            None,
        ),
        "e" | "edit" => Act::Edit(pretty(input)),
        "c" | "cancel" => Act::Show,
        "s" | "skip" => Act::Skip,
        w if is_quit(w) => Act::Quit,
        "" => Act::Nothing,
        _ => Act::Error("Type a (allow with this input), e (edit again) or c (cancel).".into()),
    }
}

/// A line for the question being asked: an option's number, several, or the person's own
/// text. The last question sends them all.
fn answer_question(questions: &[Question], answers: &mut Vec<(Choice, Value)>, line: &str) -> Act {
    let q = &questions[answers.len()];
    let choice = match choose::parse_choice(q, line) {
        Ok(c) => c,
        Err(e) => return Act::Error(e),
    };
    let value = choice.value(q);
    let shown = Some(choice.words());
    answers.push((choice, value));
    if answers.len() < questions.len() {
        return Act::Took {
            shown,
            then: Then::NextQuestion,
        };
    }
    let map: Map<String, Value> = questions
        .iter()
        .zip(answers.iter())
        .map(|(q, (_, v))| (q.question.clone(), v.clone()))
        .collect();
    Act::Took {
        shown,
        then: Then::Send(Answer::Answers(map)),
    }
}

/// A line for the form field being asked: its value (read as the field's type), or an
/// empty line for an optional field's default; a multi-line field takes lines until an
/// empty one. The last field sends the form.
fn fill_field(
    form: &Form,
    draft: &mut FormDraft,
    lines: &mut Option<Vec<String>>,
    line: &str,
) -> Act {
    let Some((_, field)) = draft.asked(form) else {
        return Act::Nothing;
    };
    let multiline = matches!(
        field.ty,
        FieldType::Text {
            multiline: true,
            ..
        }
    );
    let joined;
    let line = match (multiline, lines.as_mut()) {
        (true, None) if !line.trim().is_empty() => {
            *lines = Some(vec![line.to_string()]);
            return Act::Line;
        }
        (true, Some(typed)) if !line.is_empty() => {
            typed.push(line.to_string());
            return Act::Line;
        }
        (true, Some(typed)) => {
            joined = typed.join("\n");
            *lines = None;
            joined.as_str()
        }
        _ => line,
    };
    let shown = match draft.enter_text(form, line) {
        Ok(shown) => shown,
        Err(e) => return Act::Error(e.to_string()),
    };
    if draft.asked(form).is_some() {
        return Act::Took {
            shown: Some(shown),
            then: Then::NextField,
        };
    }
    // A single question's answer is on the line just typed, and shown again once taken.
    Act::Took {
        shown: (!form.is_single_text()).then_some(shown),
        then: Then::Send(Answer::Accept(draft.content(form))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn interaction(tool: &str, input: Value) -> Interaction {
        let input = input.as_object().cloned().unwrap_or_default();
        let id = crate::interaction::InteractionId::generate();
        Interaction::pending(id, tool, input, jiff::Timestamp::now(), 600)
    }

    fn bash() -> Interaction {
        interaction("Bash", json!({"command": "npm run test -- --watch"}))
    }

    fn start(i: &Interaction) -> Step {
        first(i).expect("readable")
    }

    #[test]
    fn an_approval_is_allowed_denied_with_a_reason_skipped_or_left() {
        let i = bash();
        let mut step = start(&i);
        assert!(matches!(step, Step::Choose));
        assert!(matches!(
            step.take(&i, " A "),
            Act::Send(
                Answer::Allow {
                    updated_input: None,
                    always: false
                },
                None
            )
        ));
        assert!(matches!(step.take(&i, "s"), Act::Skip));
        assert!(matches!(step.take(&i, "quit"), Act::Quit));
        assert!(matches!(step.take(&i, ""), Act::Nothing));
        assert!(matches!(step.take(&i, "x"), Act::Error(_)));
        let Act::Step(mut reason) = step.take(&i, "d") else {
            panic!("d asks for a reason")
        };
        match reason.take(&i, "  not now ") {
            Act::Send(Answer::Deny { message, interrupt }, None) => {
                assert_eq!(message.as_deref(), Some("not now"));
                assert!(!interrupt);
            }
            other => panic!("a deny with the reason, not {other:?}"),
        }
        assert!(matches!(
            reason.take(&i, ""),
            Act::Send(Answer::Deny { message: None, .. }, None)
        ));
    }

    #[test]
    fn an_edit_opens_the_input_and_an_agent_that_cannot_take_one_is_told() {
        let mut i = bash();
        match start(&i).take(&i, "e") {
            Act::Edit(text) => assert_eq!(text, pretty(&i.input.map())),
            other => panic!("the editor, not {other:?}"),
        }
        i.input_fixed = true;
        i.agent = Some("codex".into());
        assert!(start(&i).prompt(&i, true).starts_with("a/d/g/s/q"));
        match start(&i).take(&i, "e") {
            Act::Error(e) => assert!(e.starts_with("codex cannot run an edited input"), "{e}"),
            other => panic!("refused, not {other:?}"),
        }
        let edited = json!({"command": "ls"})
            .as_object()
            .cloned()
            .unwrap_or_default();
        let mut step = Step::Edited(edited.clone());
        match step.take(&i, "a") {
            Act::Send(
                Answer::Allow {
                    updated_input: Some(m),
                    ..
                },
                None,
            ) => assert_eq!(m, edited),
            other => panic!("allowed with the edit, not {other:?}"),
        }
        assert!(matches!(step.take(&i, "c"), Act::Show));
        let mut failed = Step::EditFailed("{oops".into());
        assert!(matches!(failed.take(&i, "e"), Act::Edit(t) if t == "{oops"));
    }

    #[test]
    fn an_approval_several_people_decide_takes_a_vote_and_no_more() {
        let mut i = bash();
        i.set_quorum(Some(crate::interaction::quorum::Quorum {
            allow: 2,
            deny: 1,
        }));
        let mut step = start(&i);
        assert_eq!(step.prompt(&i, true), "a/d/s/q › ");
        for key in ["e", "g"] {
            match step.take(&i, key) {
                Act::Error(e) => assert!(e.starts_with("Several people decide this one"), "{e}"),
                other => panic!("{key} is refused, not {other:?}"),
            }
        }
        assert!(matches!(step.take(&i, "a"), Act::Send(_, None)));
        match step.take(&i, "x") {
            Act::Error(e) => assert_eq!(
                e,
                "Type a (allow), d (deny), s (skip) or q (quit), then Enter."
            ),
            other => panic!("the keys said, not {other:?}"),
        }
    }

    #[test]
    fn allow_similar_proposes_a_rule_checks_another_and_asks_the_scope() {
        let i = bash();
        let Act::Step(mut similar) = start(&i).take(&i, "g") else {
            panic!("g proposes a rule")
        };
        assert!(matches!(&similar, Step::Similar(r) if r == "Bash(npm run test:*)"));
        assert!(matches!(similar.take(&i, "Bash(("), Act::Error(_)));
        let Act::Step(mut scope) = similar.take(&i, "") else {
            panic!("Enter keeps the rule")
        };
        assert!(matches!(&scope, Step::SimilarScope(r) if r == "Bash(npm run test:*)"));
        match scope.take(&i, "a") {
            Act::Send(Answer::Allow { .. }, Some((rule, "standing"))) => {
                assert_eq!(rule, "Bash(npm run test:*)")
            }
            other => panic!("a standing grant, not {other:?}"),
        }
        assert!(matches!(
            scope.take(&i, "s"),
            Act::Send(_, Some((_, "session")))
        ));
        assert!(matches!(similar.take(&i, "c"), Act::Show));
        // No rule to propose (a pipeline): the prompt asks for one, promising nothing.
        let piped = interaction("Bash", json!({"command": "ls | wc -l"}));
        let Act::Step(none) = start(&piped).take(&piped, "g") else {
            panic!("g asks for a rule")
        };
        let asked = none.prompt(&piped, true);
        assert!(
            asked.starts_with("allow similar calls by the rule (e.g. "),
            "{asked}"
        );
        assert!(!asked.contains("Enter keeps it"), "{asked}");
    }

    #[test]
    fn questions_are_answered_one_by_one_then_sent_together() {
        let i = interaction(
            "AskUserQuestion",
            json!({"questions": [
                {"question": "Which?", "header": "W", "multiSelect": false,
                 "options": [{"label": "A", "description": ""}, {"label": "B", "description": ""}]},
                {"question": "Also?", "header": "X", "multiSelect": true,
                 "options": [{"label": "C", "description": ""}, {"label": "D", "description": ""}]}
            ]}),
        );
        let mut step = start(&i);
        assert_eq!(step.prompt(&i, false), "1–2, or your own answer › ");
        assert!(matches!(step.take(&i, "7"), Act::Error(_)));
        assert!(matches!(
            step.take(&i, "2"),
            Act::Took { shown: Some(s), then: Then::NextQuestion } if s == "B"
        ));
        assert_eq!(
            step.prompt(&i, false),
            "numbers like 1,3, or your own answer › "
        );
        match step.take(&i, "1,2") {
            Act::Took {
                then: Then::Send(Answer::Answers(map)),
                ..
            } => {
                assert_eq!(map["Which?"], json!("B"));
                assert_eq!(map["Also?"], json!(["C", "D"]));
            }
            other => panic!("both answers sent, not {other:?}"),
        }
        let mut again = start(&i);
        assert!(matches!(again.take(&i, "d"), Act::Step(Step::Reason)));
    }

    #[test]
    fn a_form_is_filled_field_by_field_with_multi_line_text() {
        let i = interaction(
            "imrelay:form",
            json!({"message": "Deploy", "requestedSchema": {"type": "object", "properties": {
                "env": {"type": "string", "enum": ["staging", "prod"]},
                "notes": {"type": "string", "multiline": true},
                "count": {"type": "integer"}
            }, "required": ["env", "count"]}}),
        );
        let mut step = start(&i);
        assert!(step.prompt(&i, false).ends_with(": 1–2 › "));
        assert!(matches!(
            step.take(&i, "2"),
            Act::Took { shown: Some(s), then: Then::NextField } if s == "prod"
        ));
        assert!(matches!(step.take(&i, "first"), Act::Line));
        assert!(step.prompt(&i, false).starts_with("line 2 "));
        assert!(matches!(step.take(&i, "second"), Act::Line));
        assert!(matches!(
            step.take(&i, ""),
            Act::Took {
                then: Then::NextField,
                ..
            }
        ));
        assert!(matches!(step.take(&i, "many"), Act::Error(_)));
        match step.take(&i, "3") {
            Act::Took {
                then: Then::Send(Answer::Accept(content)),
                shown: Some(_),
            } => {
                assert_eq!(content["env"], json!("prod"));
                assert_eq!(content["count"], json!(3));
                assert_eq!(content["notes"], json!("first\nsecond"));
            }
            other => panic!("the form sent, not {other:?}"),
        }
    }

    #[test]
    fn an_unreadable_question_can_only_be_declined_or_skipped() {
        let i = interaction("AskUserQuestion", json!({"questions": "no"}));
        assert!(first(&i).is_err());
        let mut step = Step::Unreadable;
        assert!(matches!(step.take(&i, "d"), Act::Step(Step::Reason)));
        assert!(matches!(step.take(&i, "s"), Act::Skip));
        assert!(matches!(step.take(&i, "a"), Act::Error(_)));
        assert!(matches!(
            Step::Sending {
                answer: Answer::allow(),
                attempt: 2,
                grant: None
            }
            .prompt(&i, true)
            .as_str(),
            "sending… (attempt 2) "
        ));
    }
}
