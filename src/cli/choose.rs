//! Reading a person's answer to a question: what they type at `imrelay watch`'s prompt (one
//! number, several separated by commas, or their own text) and `imrelay answer`'s
//! `--answer QUESTION=ANSWER` arguments. Both end as the `answers` map of `/respond`, checked
//! with the same rules the server applies before anything is sent.

use serde_json::{Map, Value};

use crate::interaction::{MAX_ANSWER_CHARS, Question, normalise_answers};

/// An answer to one question.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Choice {
    /// Listed options, by label.
    Labels(Vec<String>),
    /// The person's own text ("Other").
    Other(String),
}

impl Choice {
    /// The answer's value in a `/respond` `answers` map.
    pub fn value(&self, q: &Question) -> Value {
        match self {
            Choice::Labels(labels) if q.multi_select => {
                Value::Array(labels.iter().cloned().map(Value::String).collect())
            }
            Choice::Labels(labels) => Value::String(labels.join(", ")),
            Choice::Other(text) if q.multi_select => {
                Value::Array(vec![Value::String(text.clone())])
            }
            Choice::Other(text) => Value::String(text.clone()),
        }
    }

    /// The answer in words: "Postgres", "Auth, Docs", "“something else” (your own answer)".
    pub fn words(&self) -> String {
        match self {
            Choice::Labels(labels) => labels.join(", "),
            Choice::Other(text) => format!("“{text}” (your own answer)"),
        }
    }
}

/// Reads what was typed at question `q`'s prompt: one option number, several separated by
/// commas (multi-select), or free text. Text that is only a number is read as an option
/// number; in quotes it is text.
pub(crate) fn parse_choice(q: &Question, typed: &str) -> Result<Choice, String> {
    let typed = typed.trim();
    if typed.is_empty() {
        return Err(if q.multi_select {
            "Type the numbers of your choices (e.g. 1,3), or your own answer.".into()
        } else {
            "Type the number of your choice, or your own answer.".into()
        });
    }
    if let Some(inner) = typed
        .strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .filter(|_| typed.len() >= 2)
    {
        return other(inner.trim());
    }
    let parts: Vec<&str> = typed.split(',').map(str::trim).collect();
    let numbers: Option<Vec<usize>> = parts.iter().map(|p| p.parse::<usize>().ok()).collect();
    let Some(numbers) = numbers else {
        return other(typed);
    };
    let n = q.options.len();
    if numbers.len() > 1 && !q.multi_select {
        return Err(format!(
            "This question takes one answer: type one number from 1 to {n}."
        ));
    }
    let mut numbers = numbers;
    // In the options' order, whatever order they were typed in.
    numbers.sort_unstable();
    numbers.dedup();
    let mut labels: Vec<String> = Vec::with_capacity(numbers.len());
    for k in numbers {
        let Some(o) = k.checked_sub(1).and_then(|i| q.options.get(i)) else {
            return Err(format!(
                "There is no option {k}: choose from 1 to {n}, or type your own answer (a number as your own answer goes in quotes: \"{k}\")."
            ));
        };
        if !labels.contains(&o.label) {
            labels.push(o.label.clone());
        }
    }
    Ok(Choice::Labels(labels))
}

fn other(text: &str) -> Result<Choice, String> {
    if text.is_empty() {
        return Err("Your own answer is empty.".into());
    }
    if text.chars().count() > MAX_ANSWER_CHARS {
        return Err(format!(
            "Your own answer is longer than {MAX_ANSWER_CHARS} characters."
        ));
    }
    Ok(Choice::Other(text.to_string()))
}

/// Builds the `answers` map from `--answer QUESTION=ANSWER` arguments. QUESTION is a
/// question's text or its header; ANSWER an option's label or your own text; several
/// `--answer`s for one multi-select question choose several options. Every question needs an
/// answer; the map is checked as the server checks it.
pub(crate) fn answers_from_args(
    questions: &[Question],
    args: &[String],
) -> Result<Map<String, Value>, String> {
    let mut given: Vec<Vec<String>> = vec![Vec::new(); questions.len()];
    for arg in args {
        // The longest question text or header the argument starts with, then `=`: texts and
        // labels may hold `=` themselves.
        let found = questions
            .iter()
            .enumerate()
            .flat_map(|(n, q)| [(n, q.question.as_str()), (n, q.header.as_str())])
            .filter(|(_, key)| {
                arg.strip_prefix(key)
                    .is_some_and(|rest| rest.starts_with('='))
            })
            .max_by_key(|(_, key)| key.len());
        let Some((n, key)) = found else {
            let known: Vec<String> = questions
                .iter()
                .map(|q| format!("{:?} ({:?})", q.header, q.question))
                .collect();
            return Err(format!(
                "--answer {arg:?}: expected QUESTION=ANSWER, QUESTION being one of {}",
                known.join(", ")
            ));
        };
        let value = arg[key.len() + 1..].trim();
        if value.is_empty() {
            return Err(format!("--answer {arg:?}: the answer is empty"));
        }
        given[n].push(value.to_string());
    }
    let mut answers = Map::new();
    for (q, values) in questions.iter().zip(given) {
        match values.len() {
            0 => {
                return Err(format!(
                    "no answer for {:?} ({:?}): add --answer {}",
                    q.header,
                    q.question,
                    super::client::quote(&format!("{}=…", q.header))
                ));
            }
            1 if !q.multi_select => {
                answers.insert(q.question.clone(), Value::String(values[0].clone()));
            }
            _ => {
                answers.insert(
                    q.question.clone(),
                    Value::Array(values.into_iter().map(Value::String).collect()),
                );
            }
        }
    }
    normalise_answers(questions, &answers).map_err(|e| e.to_string())?;
    Ok(answers)
}

/// Builds a form's `content` from `--answer FIELD=VALUE` arguments. FIELD is a field's name
/// or title; VALUE is read as the field's type ([`Field::parse_text`]); several `--answer`s
/// for a multiple choice add up. Fields left out take their defaults; the content is checked
/// as the server checks it.
///
/// [`Field::parse_text`]: crate::interaction::form::Field::parse_text
pub(crate) fn form_from_args(
    form: &crate::interaction::Form,
    args: &[String],
) -> Result<Map<String, Value>, String> {
    use crate::interaction::form::FieldType;
    let mut content = Map::new();
    for arg in args {
        let found = form
            .fields
            .iter()
            .flat_map(|f| [(f, f.name.as_str()), (f, f.label())])
            .filter(|(_, key)| {
                arg.strip_prefix(key)
                    .is_some_and(|rest| rest.starts_with('='))
            })
            .max_by_key(|(_, key)| key.len());
        let Some((field, key)) = found else {
            let known: Vec<String> = form
                .fields
                .iter()
                .map(|f| format!("{:?}", f.name))
                .collect();
            return Err(format!(
                "--answer {arg:?}: expected FIELD=VALUE, FIELD being one of {}",
                known.join(", ")
            ));
        };
        let text = &arg[key.len() + 1..];
        let value = field
            .parse_text(text)
            .map_err(|e| format!("--answer {arg:?}: {}: {e}", field.label()))?;
        match (&field.ty, content.get_mut(&field.name), value) {
            (FieldType::Multi { .. }, Some(Value::Array(items)), Value::Array(more)) => {
                items.extend(more);
            }
            (_, _, value) => {
                content.insert(field.name.clone(), value);
            }
        }
    }
    form.accept(&content).map_err(|e| {
        let name = e.field.trim_start_matches("content.");
        let label = form.field(name).map_or(name, |f| f.label());
        format!(
            "{label}: {} (add --answer {})",
            e.message,
            super::client::quote(&format!("{name}=…"))
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interaction::parse_questions;
    use serde_json::json;

    fn questions() -> Vec<Question> {
        let input = json!({"questions": [
            {"question": "Which database?", "header": "DB", "options": [{"label": "Postgres"}, {"label": "SQLite"}]},
            {"question": "Which extras?", "header": "Extras", "multiSelect": true,
             "options": [{"label": "Auth"}, {"label": "Metrics"}, {"label": "Docs"}]},
            {"question": "x=y?", "header": "Eq", "options": [{"label": "a=b"}, {"label": "c"}]}]});
        parse_questions(input.as_object().unwrap()).unwrap()
    }

    #[test]
    fn numbers_choose_options_and_text_is_an_own_answer() {
        let qs = questions();
        assert_eq!(
            parse_choice(&qs[0], " 2 "),
            Ok(Choice::Labels(vec!["SQLite".into()]))
        );
        assert_eq!(
            parse_choice(&qs[1], "3, 1,3"),
            Ok(Choice::Labels(vec!["Auth".into(), "Docs".into()]))
        );
        assert_eq!(
            parse_choice(&qs[0], "MySQL, with replicas"),
            Ok(Choice::Other("MySQL, with replicas".into()))
        );
        assert_eq!(
            parse_choice(&qs[0], "\"42\""),
            Ok(Choice::Other("42".into()))
        );
        assert_eq!(
            parse_choice(&qs[1], "東京"),
            Ok(Choice::Other("東京".into()))
        );
    }

    #[test]
    fn mistakes_are_explained() {
        let qs = questions();
        assert!(parse_choice(&qs[0], "").unwrap_err().contains("number"));
        assert!(
            parse_choice(&qs[0], "1,2")
                .unwrap_err()
                .contains("one answer")
        );
        let e = parse_choice(&qs[0], "7").unwrap_err();
        assert!(e.contains("no option 7") && e.contains("\"7\""), "{e}");
        assert!(parse_choice(&qs[0], "0").is_err());
        assert!(parse_choice(&qs[0], "\"\"").is_err());
        assert!(parse_choice(&qs[0], &"x".repeat(MAX_ANSWER_CHARS + 1)).is_err());
    }

    #[test]
    fn values_fit_the_question() {
        let qs = questions();
        let both = Choice::Labels(vec!["Auth".into(), "Docs".into()]);
        assert_eq!(both.value(&qs[1]), json!(["Auth", "Docs"]));
        assert_eq!(Choice::Other("x".into()).value(&qs[1]), json!(["x"]));
        assert_eq!(Choice::Other("x".into()).value(&qs[0]), json!("x"));
        assert_eq!(
            Choice::Labels(vec!["SQLite".into()]).value(&qs[0]),
            json!("SQLite")
        );
    }

    #[test]
    fn answer_arguments_name_questions_by_text_or_header() {
        let qs = questions();
        let args: Vec<String> = [
            "DB=Postgres",
            "Which extras?=Auth",
            "Extras=Docs",
            "x=y?=a=b",
        ]
        .map(String::from)
        .to_vec();
        let answers = answers_from_args(&qs, &args).unwrap();
        assert_eq!(
            Value::Object(answers),
            json!({"Which database?": "Postgres", "Which extras?": ["Auth", "Docs"], "x=y?": "a=b"})
        );
    }

    #[test]
    fn answer_arguments_that_do_not_fit_are_refused_before_sending() {
        let qs = questions();
        let e = answers_from_args(&qs, &["DB=Postgres".into(), "Eq=c".into()]).unwrap_err();
        assert!(e.contains("no answer for \"Extras\""), "{e}");
        let e = answers_from_args(&qs, &["Nope=1".into()]).unwrap_err();
        assert!(e.contains("expected QUESTION=ANSWER"), "{e}");
        let e = answers_from_args(
            &qs,
            &[
                "DB=Postgres".into(),
                "DB=SQLite".into(),
                "Extras=Auth".into(),
                "Eq=c".into(),
            ],
        )
        .unwrap_err();
        assert!(e.contains("single-select"), "{e}");
        let e = answers_from_args(
            &qs,
            &[
                "DB=Postgres".into(),
                "Extras=mine".into(),
                "Extras=also mine".into(),
                "Eq=c".into(),
            ],
        )
        .unwrap_err();
        assert!(e.contains("only one free-text"), "{e}");
    }
}
