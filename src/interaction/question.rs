//! `AskUserQuestion` input: validation against the SDK's schema, and turning a person's
//! answers into the `answers` map the SDK expects.
//!
//! The SDK's schema: 1–4 questions, each with a non-empty `question` and `header`, 2–4
//! `options` each with a non-empty `label` (and an optional `description`), and a
//! `multiSelect` flag. Every question also accepts free "Other" text.

use serde_json::{Map, Value};

use super::ValidationError;

/// Longest free-text answer accepted, in characters.
pub const MAX_ANSWER_CHARS: usize = 4096;

/// One option of a question.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuestionOption {
    /// The label shown on the button, and the value the agent receives.
    pub label: String,
    /// An explanation shown beside the label.
    pub description: Option<String>,
}

/// One question of an `AskUserQuestion` call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Question {
    /// The full question text; answers are keyed by it.
    pub question: String,
    /// A short chip label.
    pub header: String,
    /// The listed choices (2 to 4).
    pub options: Vec<QuestionOption>,
    /// Whether several options may be chosen.
    pub multi_select: bool,
}

impl Question {
    /// Whether `label` is one of the listed options.
    pub fn has_label(&self, label: &str) -> bool {
        self.options.iter().any(|o| o.label == label)
    }
}

fn non_empty_string(v: Option<&Value>, field: &str) -> Result<String, ValidationError> {
    match v {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.clone()),
        Some(Value::String(_)) => Err(ValidationError::new(field, "must not be empty")),
        Some(other) => Err(ValidationError::new(
            field,
            format!("expected a string, got {}", json_type(other)),
        )),
        None => Err(ValidationError::new(field, "is required")),
    }
}

/// The JSON type name of a value, for error messages.
pub fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The options of question `i`: 2 to 4, each an object with a unique, non-empty label and
/// an optional description.
fn parse_options(
    i: usize,
    options: Option<&Value>,
) -> Result<Vec<QuestionOption>, ValidationError> {
    let at = |f: &str| format!("questions[{i}].{f}");
    let options = match options {
        Some(Value::Array(o)) => o,
        Some(other) => {
            return Err(ValidationError::new(
                at("options"),
                format!("expected an array, got {}", json_type(other)),
            ));
        }
        None => return Err(ValidationError::new(at("options"), "is required")),
    };
    if !(2..=4).contains(&options.len()) {
        return Err(ValidationError::new(
            at("options"),
            format!("expected 2 to 4 options, got {}", options.len()),
        ));
    }
    let mut parsed = Vec::with_capacity(options.len());
    for (j, o) in options.iter().enumerate() {
        let field = |f: &str| format!("questions[{i}].options[{j}].{f}");
        let Value::Object(o) = o else {
            return Err(ValidationError::new(
                format!("questions[{i}].options[{j}]"),
                format!("expected an object, got {}", json_type(o)),
            ));
        };
        let label = non_empty_string(o.get("label"), &field("label"))?;
        if parsed.iter().any(|p: &QuestionOption| p.label == label) {
            return Err(ValidationError::new(
                field("label"),
                format!("duplicates another option's label {label:?}"),
            ));
        }
        let description = match o.get("description") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(other) => {
                return Err(ValidationError::new(
                    field("description"),
                    format!("expected a string, got {}", json_type(other)),
                ));
            }
        };
        parsed.push(QuestionOption { label, description });
    }
    Ok(parsed)
}

/// Validates `AskUserQuestion` input and returns its questions.
///
/// Errors name the offending field, e.g. `questions[1].options: expected 2 to 4 options,
/// got 1`.
pub fn parse_questions(input: &Map<String, Value>) -> Result<Vec<Question>, ValidationError> {
    let list = match input.get("questions") {
        Some(Value::Array(list)) => list,
        Some(other) => {
            return Err(ValidationError::new(
                "questions",
                format!("expected an array, got {}", json_type(other)),
            ));
        }
        None => return Err(ValidationError::new("questions", "is required")),
    };
    if !(1..=4).contains(&list.len()) {
        return Err(ValidationError::new(
            "questions",
            format!("expected 1 to 4 questions, got {}", list.len()),
        ));
    }
    let mut out: Vec<Question> = Vec::with_capacity(list.len());
    for (i, q) in list.iter().enumerate() {
        let at = |f: &str| format!("questions[{i}].{f}");
        let Value::Object(q) = q else {
            return Err(ValidationError::new(
                format!("questions[{i}]"),
                format!("expected an object, got {}", json_type(q)),
            ));
        };
        let question = non_empty_string(q.get("question"), &at("question"))?;
        let header = non_empty_string(q.get("header"), &at("header"))?;
        let multi_select = match q.get("multiSelect") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(other) => {
                return Err(ValidationError::new(
                    at("multiSelect"),
                    format!("expected a boolean, got {}", json_type(other)),
                ));
            }
        };
        let parsed = parse_options(i, q.get("options"))?;
        if let Some(prev) = out.iter().position(|p| p.question == question) {
            return Err(ValidationError::new(
                at("question"),
                format!("duplicates questions[{prev}].question (answers are keyed by the text)"),
            ));
        }
        out.push(Question {
            question,
            header,
            options: parsed,
            multi_select,
        });
    }
    Ok(out)
}

/// Turns a person's answers into the SDK's `answers` map: question text → answer string.
///
/// Keys may be the question text or its index (`"0"`). A value is a label, free "Other"
/// text, or for multi-select questions a list of labels (at most one free-text item) or
/// `", "`-joined labels. Every question must be answered exactly once.
pub fn normalise_answers(
    questions: &[Question],
    given: &Map<String, Value>,
) -> Result<Map<String, Value>, ValidationError> {
    let mut slots: Vec<Option<String>> = vec![None; questions.len()];
    for (key, value) in given {
        let field = format!("answers[{key:?}]");
        let index = questions
            .iter()
            .position(|q| &q.question == key)
            .or_else(|| {
                key.parse::<usize>()
                    .ok()
                    .filter(|i| *i < questions.len() && key == &i.to_string())
            })
            .ok_or_else(|| {
                ValidationError::new(
                    field.clone(),
                    "does not match any question text or index".to_string(),
                )
            })?;
        if slots[index].is_some() {
            return Err(ValidationError::new(
                field,
                format!("answers questions[{index}] a second time"),
            ));
        }
        slots[index] = Some(answer_value(&questions[index], value, &field)?);
    }
    let mut out = Map::new();
    for (q, slot) in questions.iter().zip(slots) {
        match slot {
            Some(a) => {
                out.insert(q.question.clone(), Value::String(a));
            }
            None => {
                return Err(ValidationError::new(
                    format!("answers[{:?}]", q.question),
                    "is missing: every question needs an answer",
                ));
            }
        }
    }
    Ok(out)
}

fn check_text(text: &str, field: &str) -> Result<(), ValidationError> {
    if text.trim().is_empty() {
        return Err(ValidationError::new(field, "must not be empty"));
    }
    if text.chars().count() > MAX_ANSWER_CHARS {
        return Err(ValidationError::new(
            field,
            format!("is longer than {MAX_ANSWER_CHARS} characters"),
        ));
    }
    Ok(())
}

fn answer_value(q: &Question, value: &Value, field: &str) -> Result<String, ValidationError> {
    match value {
        Value::String(s) => {
            check_text(s, field)?;
            // A label, ", "-joined labels, or free "Other" text: all travel as the string.
            Ok(s.trim().to_string())
        }
        Value::Array(items) => {
            if items.is_empty() {
                return Err(ValidationError::new(
                    field,
                    "must choose at least one option",
                ));
            }
            if !q.multi_select && items.len() > 1 {
                return Err(ValidationError::new(
                    field,
                    format!(
                        "this question is single-select: expected one answer, got {}",
                        items.len()
                    ),
                ));
            }
            let mut labels: Vec<&str> = Vec::with_capacity(items.len());
            let mut free = 0;
            for (k, item) in items.iter().enumerate() {
                let Value::String(s) = item else {
                    return Err(ValidationError::new(
                        format!("{field}[{k}]"),
                        format!("expected a string, got {}", json_type(item)),
                    ));
                };
                check_text(s, &format!("{field}[{k}]"))?;
                let s = s.trim();
                if labels.contains(&s) {
                    return Err(ValidationError::new(
                        format!("{field}[{k}]"),
                        format!("{s:?} is chosen twice"),
                    ));
                }
                if !q.has_label(s) {
                    free += 1;
                    if free > 1 {
                        return Err(ValidationError::new(
                            format!("{field}[{k}]"),
                            format!(
                                "{s:?} is not an option, and only one free-text \"Other\" answer is allowed"
                            ),
                        ));
                    }
                }
                labels.push(s);
            }
            Ok(labels.join(", "))
        }
        other => Err(ValidationError::new(
            field,
            format!(
                "expected a string or a list of strings, got {}",
                json_type(other)
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn input(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    fn two_questions() -> Vec<Question> {
        parse_questions(&input(json!({"questions":[
            {"question":"Which color?","header":"Color","multiSelect":false,
             "options":[{"label":"Red","description":"warm"},{"label":"Blue"}]},
            {"question":"Which toppings?","header":"Toppings","multiSelect":true,
             "options":[{"label":"Cheese"},{"label":"Ham"},{"label":"Olives"}]}
        ]})))
        .unwrap()
    }

    #[test]
    fn parses_valid_questions() {
        let qs = two_questions();
        assert_eq!(qs.len(), 2);
        assert!(!qs[0].multi_select);
        assert_eq!(qs[0].options[0].description.as_deref(), Some("warm"));
        assert!(qs[1].multi_select);
    }

    #[test]
    fn errors_name_the_field() {
        let one_option = input(json!({"questions":[
            {"question":"a","header":"h","options":[{"label":"x"},{"label":"y"}]},
            {"question":"b","header":"h","options":[{"label":"x"}]}
        ]}));
        let e = parse_questions(&one_option).unwrap_err();
        assert_eq!(
            e.to_string(),
            "questions[1].options: expected 2 to 4 options, got 1"
        );

        let five = input(json!({"questions": (0..5).map(|i| json!({
            "question": format!("q{i}"), "header":"h",
            "options":[{"label":"x"},{"label":"y"}]})).collect::<Vec<_>>()}));
        assert_eq!(
            parse_questions(&five).unwrap_err().to_string(),
            "questions: expected 1 to 4 questions, got 5"
        );
        let empty_header = input(json!({"questions":[
            {"question":"a","header":"","options":[{"label":"x"},{"label":"y"}]}]}));
        assert_eq!(
            parse_questions(&empty_header).unwrap_err().field,
            "questions[0].header"
        );
        let bad_multi = input(json!({"questions":[
            {"question":"a","header":"h","multiSelect":"yes","options":[{"label":"x"},{"label":"y"}]}]}));
        assert_eq!(
            parse_questions(&bad_multi).unwrap_err().field,
            "questions[0].multiSelect"
        );
        let no_label = input(json!({"questions":[
            {"question":"a","header":"h","options":[{"label":"x"},{"description":"y"}]}]}));
        assert_eq!(
            parse_questions(&no_label).unwrap_err().field,
            "questions[0].options[1].label"
        );
        assert_eq!(
            parse_questions(&input(json!({}))).unwrap_err().field,
            "questions"
        );
    }

    #[test]
    fn answers_by_text_index_list_joined_and_other() {
        let qs = two_questions();
        let a = normalise_answers(
            &qs,
            &input(json!({"Which color?":"Blue","1":["Cheese","Ham"]})),
        )
        .unwrap();
        assert_eq!(
            Value::Object(a),
            json!({"Which color?":"Blue","Which toppings?":"Cheese, Ham"})
        );
        let b = normalise_answers(
            &qs,
            &input(json!({"0":"Green, please","Which toppings?":"Cheese, Ham"})),
        )
        .unwrap();
        assert_eq!(b["Which color?"], json!("Green, please"));
        assert_eq!(b["Which toppings?"], json!("Cheese, Ham"));
        let c = normalise_answers(&qs, &input(json!({"0":"Red","1":["Ham","Pineapple"]}))).unwrap();
        assert_eq!(c["Which toppings?"], json!("Ham, Pineapple"));
    }

    #[test]
    fn answers_that_do_not_fit_are_refused() {
        let qs = two_questions();
        let cases = [
            json!({"Which color?":"Blue"}),
            json!({"Which color?":["Red","Blue"],"1":"Ham"}),
            json!({"Which color?":"Blue","Which toppings?":[]}),
            json!({"Which color?":"Blue","Which toppings?":["a","b"]}),
            json!({"Which color?":"Blue","Which toppings?":7}),
            json!({"Which color?":"Blue","1":"Ham","Nope?":"x"}),
            json!({"Which color?":"Blue","0":"Red","1":"Ham"}),
            json!({"Which color?":"  ","1":"Ham"}),
            json!({"2":"Blue","1":"Ham"}),
            json!({"01":"Blue","1":"Ham"}),
        ];
        for case in cases {
            assert!(
                normalise_answers(&qs, &input(case.clone())).is_err(),
                "accepted {case}"
            );
        }
    }
}
