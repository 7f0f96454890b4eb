//! Answers typed as text, for chats whose people answer by writing (a reply, a text box):
//! a question's option by its number, or the person's own words; a form as `name: value`
//! lines; an approval's command changed ("Edit & approve") as `edit: <command>`. Every
//! channel that takes typed answers reads them here, the same way.

use serde_json::{Map, Value, json};

use crate::interaction::{Form, Interaction, clip, parse_questions};

/// The words a typed "Edit & approve" starts with, before a colon: `edit: <command>`
/// (`改写：<命令>` in Chinese).
pub(crate) const EDIT_WORDS: [&str; 2] = ["edit", "改写"];

/// The command of a typed "Edit & approve": the text after `edit:` (any case, a full-width
/// colon too) or `改写：` at the start of `text`; `None` for any other text (a reason to
/// deny, say, which may well start with the word "edit" but not with "edit:").
pub(crate) fn edited_command(text: &str) -> Option<&str> {
    let t = text.trim_start();
    EDIT_WORDS.iter().find_map(|w| {
        let head = t.get(..w.len())?;
        let rest = t.get(w.len()..)?.trim_start();
        let after = rest.strip_prefix(':').or_else(|| rest.strip_prefix('：'));
        head.eq_ignore_ascii_case(w).then_some(after?.trim())
    })
}

/// Answers to every question from typed text: one line per question, each an option's
/// number (several, comma-separated, where several may be chosen) or the person's own words.
pub(crate) fn question_answers(i: &Interaction, text: &str) -> Result<Map<String, Value>, String> {
    let questions = parse_questions(&i.input.map()).map_err(|e| e.to_string())?;
    let lines: Vec<&str> = if questions.len() == 1 {
        vec![text]
    } else {
        text.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect()
    };
    if lines.len() != questions.len() {
        return Err(format!(
            "answer each of the {} questions on its own line",
            questions.len()
        ));
    }
    let mut out = Map::new();
    for (n, (q, line)) in questions.iter().zip(lines).enumerate() {
        let numbers: Option<Vec<usize>> = line
            .split([',', '，'])
            .map(|p| p.trim().parse::<usize>().ok())
            .collect();
        let picked: Option<Vec<String>> = numbers.and_then(|ns| {
            ns.iter()
                .map(|k| k.checked_sub(1).and_then(|j| q.options.get(j)))
                .map(|o| o.map(|o| o.label.clone()))
                .collect()
        });
        let value = match picked {
            Some(labels) if q.multi_select => json!(labels),
            Some(labels) if labels.len() == 1 => json!(labels[0]),
            Some(_) => return Err(format!("{}: choose one option", q.header)),
            None if q.multi_select => json!([line]),
            None => json!(line),
        };
        out.insert(n.to_string(), value);
    }
    Ok(out)
}

/// A form's content from typed text: the whole text for a form of one text field,
/// otherwise one `name: value` line per field (a field's label works as its name). Each
/// value is read as its field's type; the form's own checks run on the result.
pub(crate) fn form_content(i: &Interaction, text: &str) -> Result<Map<String, Value>, String> {
    let form = Form::from_input(&i.input.map()).map_err(|e| e.to_string())?;
    let mut content = Map::new();
    if let Some(f) = form.fields.first().filter(|_| form.is_single_text()) {
        content.insert(f.name.clone(), f.parse_text(text)?);
    } else {
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
            let (name, value) = line
                .split_once([':', '：', '='])
                .ok_or_else(|| format!("{line:?}: write name: value"))?;
            let name = name.trim();
            let f = form
                .fields
                .iter()
                .find(|f| f.name == name || f.label() == name)
                .ok_or_else(|| format!("there is no field {:?}", clip(name, 60)))?;
            let v = f
                .parse_text(value.trim())
                .map_err(|e| format!("{}: {e}", f.label()))?;
            content.insert(f.name.clone(), v);
        }
    }
    form.accept(&content).map_err(|e| {
        let name = e.field.trim_start_matches("content.");
        let label = form.field(name).map_or(name, |f| f.label());
        format!("{label}: {}", e.message)
    })?;
    Ok(content)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interaction::InteractionId;
    use jiff::Timestamp;

    fn pending(tool: &str, input: Value) -> Interaction {
        Interaction::pending(
            InteractionId::parse("t1").unwrap(),
            tool,
            input.as_object().unwrap().clone(),
            Timestamp::from_millisecond(1_700_000_000_000).unwrap(),
            300,
        )
    }

    #[test]
    fn an_edit_is_read_only_after_its_word_and_a_colon() {
        assert_eq!(edited_command(" Edit: make test "), Some("make test"));
        assert_eq!(edited_command("edit：ls"), Some("ls"));
        assert_eq!(edited_command("改写：ls -la"), Some("ls -la"));
        assert_eq!(edited_command("edit the file instead"), None);
        assert_eq!(edited_command("editor: vim"), None);
        assert_eq!(edited_command("不行"), None);
        assert_eq!(edited_command("edit:"), Some(""));
    }

    #[test]
    fn typed_answers_read_numbers_as_options_and_words_as_themselves() {
        let q = pending(
            "AskUserQuestion",
            json!({"questions": [
                {"question": "Which db?", "header": "DB", "multiSelect": false,
                 "options": [{"label": "sqlite"}, {"label": "postgres"}]},
                {"question": "Which parts?", "header": "Parts", "multiSelect": true,
                 "options": [{"label": "api"}, {"label": "ui"}]}]}),
        );
        let a = question_answers(&q, "2\n1, 2").unwrap();
        assert_eq!(a["0"], "postgres");
        assert_eq!(a["1"], json!(["api", "ui"]));
        let a = question_answers(&q, "mysql\n ui only ").unwrap();
        assert_eq!(a["0"], "mysql");
        assert_eq!(a["1"], json!(["ui only"]));
        assert!(
            question_answers(&q, "1")
                .unwrap_err()
                .contains("2 questions")
        );
    }
}
