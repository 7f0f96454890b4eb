//! What a listing says of each interaction: the interaction as `GET /v1/interactions/{id}`
//! gives it, bounded in size. An input (or an allow's `updatedInput`, suggestions, a form's
//! answers) of at most [`WHOLE_MAX`] bytes of JSON is listed whole, as the agent sent it; a
//! bigger one is replaced by a preview of its start (the same object, its strings cut and its
//! later members left out) and the item says `"truncated": true`. Titles, descriptions and
//! working directories are cut to [`TEXT_MAX_CHARS`]. Every item carries `input_bytes`, the
//! size of its whole input. The whole interaction is at its own endpoint.
//!
//! So a page of 500 interactions is at most a few megabytes whatever the agents sent, and a
//! typical one (a command, a file path) is listed exactly as before.

use serde::Serialize;
use serde::ser::SerializeStruct;
use serde_json::{Map, Value};

use crate::interaction::{AgentResult, Interaction, Millis, PermissionResult, Resolution};

/// The most bytes of JSON an input (or a resolution's input or answers, or suggestions) is
/// listed whole with.
pub(crate) const WHOLE_MAX: usize = 2 * 1024;
/// About how many bytes of JSON text a preview takes.
const PREVIEW_BYTES: usize = 2 * 1024;
/// The most characters of one string in a preview.
const PREVIEW_STRING_CHARS: usize = 512;
/// The most characters of a title, description or working directory in a listing.
const TEXT_MAX_CHARS: usize = 1024;

/// An interaction as a listing shows it.
pub(crate) struct Summary<'a>(pub &'a Interaction);

/// A value listed whole, or its preview.
enum Shown<'a, T: Serialize> {
    Whole(&'a T),
    Preview(Value),
}

impl<T: Serialize> Serialize for Shown<'_, T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Shown::Whole(v) => v.serialize(s),
            Shown::Preview(v) => v.serialize(s),
        }
    }
}

/// `json`, whole when it is at most [`WHOLE_MAX`] bytes, else its preview; and whether it
/// was cut.
fn shown<'a, T: Serialize>(value: &'a T, json: impl FnOnce() -> String) -> (Shown<'a, T>, bool) {
    let text = json();
    if text.len() <= WHOLE_MAX {
        return (Shown::Whole(value), false);
    }
    // What a value serializes to is JSON.
    let parsed: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    drop(text);
    let mut room = PREVIEW_BYTES;
    (Shown::Preview(preview(&parsed, &mut room)), true)
}

/// The start of `v` in about `room` bytes of JSON: strings cut to [`PREVIEW_STRING_CHARS`]
/// (with `…`), containers cut where the room runs out.
fn preview(v: &Value, room: &mut usize) -> Value {
    match v {
        Value::String(s) => {
            let limit = PREVIEW_STRING_CHARS.min(*room);
            let kept: String = s.chars().take(limit).collect();
            *room = room.saturating_sub(kept.len() + 2);
            if kept.len() < s.len() {
                Value::String(kept + "…")
            } else {
                Value::String(kept)
            }
        }
        Value::Array(items) => {
            let mut out = Vec::new();
            for item in items {
                if *room == 0 {
                    break;
                }
                out.push(preview(item, room));
            }
            Value::Array(out)
        }
        Value::Object(members) => {
            let mut out = Map::new();
            for (k, item) in members {
                if *room == 0 {
                    break;
                }
                *room = room.saturating_sub(k.len() + 4);
                out.insert(k.clone(), preview(item, room));
            }
            Value::Object(out)
        }
        other => {
            *room = room.saturating_sub(other.to_string().len());
            other.clone()
        }
    }
}

/// `text` cut to [`TEXT_MAX_CHARS`], and whether it was.
fn cut_text(text: Option<&str>) -> (Option<String>, bool) {
    match text {
        Some(t) if t.chars().count() > TEXT_MAX_CHARS => {
            let kept: String = t.chars().take(TEXT_MAX_CHARS).collect();
            (Some(kept + "…"), true)
        }
        other => (other.map(str::to_string), false),
    }
}

/// The resolution with its input or answers previewed when they are big, and whether they
/// were.
fn resolution(r: &Resolution) -> (Shown<'_, Resolution>, bool) {
    let big = match &r.result {
        AgentResult::Permission(PermissionResult::Allow {
            updated_input,
            updated_permissions,
        }) => {
            updated_input.as_json().len() > WHOLE_MAX
                || updated_permissions
                    .as_ref()
                    .is_some_and(|p| p.to_string().len() > WHOLE_MAX)
        }
        AgentResult::Permission(PermissionResult::Deny { message, .. }) => {
            message.len() > WHOLE_MAX
        }
        AgentResult::Elicit(e) => {
            e.content
                .as_ref()
                .is_some_and(|c| serde_json::to_string(c).map_or(0, |t| t.len()) > WHOLE_MAX)
                || e.message.as_ref().is_some_and(|m| m.len() > WHOLE_MAX)
        }
    };
    if !big {
        return (Shown::Whole(r), false);
    }
    let mut v = serde_json::to_value(r).unwrap_or(Value::Null);
    if let Some(result) = v.get_mut("result").and_then(Value::as_object_mut) {
        for key in ["updatedInput", "updatedPermissions", "content", "message"] {
            if let Some(member) = result.get_mut(key) {
                let mut room = PREVIEW_BYTES;
                *member = preview(member, &mut room);
            }
        }
    }
    (Shown::Preview(v), true)
}

impl Serialize for Summary<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let i = self.0;
        let input_bytes = i.input.as_json().len();
        let (input, input_cut) = shown(&i.input, || i.input.as_json().to_string());
        let (title, title_cut) = cut_text(i.title());
        let (description, description_cut) = cut_text(i.description());
        let (cwd, cwd_cut) = cut_text(i.cwd.as_deref());
        let (suggestions, suggestions_cut) = match &i.suggestions {
            Some(v) => {
                let (shown, cut) = shown(&**v, || v.to_string());
                (Some(shown), cut)
            }
            None => (None, false),
        };
        let (resolution, resolution_cut) = match &i.resolution {
            Some(r) => {
                let (shown, cut) = resolution(r);
                (Some(shown), cut)
            }
            None => (None, false),
        };
        let truncated = input_cut
            || title_cut
            || description_cut
            || cwd_cut
            || suggestions_cut
            || resolution_cut;
        // Every member of `Interaction`'s own form, in its order (the test below checks).
        let mut st = s.serialize_struct("Summary", 20)?;
        st.serialize_field("id", &i.id)?;
        st.serialize_field("kind", &i.kind)?;
        st.serialize_field("status", i.status())?;
        st.serialize_field("tool_name", &i.tool_name)?;
        st.serialize_field("input", &input)?;
        st.serialize_field("input_bytes", &input_bytes)?;
        st.serialize_field("truncated", &truncated)?;
        st.serialize_field("session", &i.session)?;
        st.serialize_field("agent", &i.agent)?;
        st.serialize_field("title", &title)?;
        st.serialize_field("description", &description)?;
        st.serialize_field("cwd", &cwd)?;
        if let Some(suggestions) = &suggestions {
            st.serialize_field("suggestions", suggestions)?;
        }
        if i.input_fixed {
            st.serialize_field("input_fixed", &true)?;
        }
        // Bounded by their own limits (16 short labels; a route from the configuration).
        if !i.labels().is_empty() {
            st.serialize_field("labels", &i.labels())?;
        }
        if i.route.is_some() {
            st.serialize_field("route", &i.route)?;
        }
        st.serialize_field("created_at", &Millis(i.created_at))?;
        st.serialize_field("deadline", &Millis(i.deadline))?;
        st.serialize_field("timeout_secs", &i.timeout_secs())?;
        if let Some(at) = i.escalated_at() {
            st.serialize_field("escalated_at", &Millis(at))?;
        }
        st.serialize_field("resolution", &resolution)?;
        st.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interaction::{InteractionId, Outcome, Via, now};
    use serde_json::json;
    use std::sync::Arc;

    fn bash(command: &str) -> Interaction {
        let input = json!({"command": command, "description": "d"});
        Interaction::pending(
            InteractionId::parse("s1").unwrap(),
            "Bash",
            input.as_object().cloned().unwrap(),
            now(),
            60,
        )
    }

    #[test]
    fn a_small_interaction_is_listed_as_its_own_endpoint_gives_it() {
        let mut i = bash("cargo test");
        // Every optional member set, so that one the summary misses shows.
        i.input_fixed = true;
        i.suggestions = Some(Box::new(
            json!([{"type": "setMode", "mode": "acceptEdits"}]),
        ));
        i.session = Some("s".into());
        i.agent = Some("a".into());
        i.set_title(Some("t".into()));
        i.set_description(Some("d".into()));
        i.cwd = Some("/tmp".into());
        i.set_labels(vec!["prod".into()]);
        i.route = Some(Arc::new(
            crate::interaction::routes::RouteStamp::default_route(),
        ));
        let mut whole = serde_json::to_value(&i).unwrap();
        let listed = serde_json::to_value(Summary(&i)).unwrap();
        assert_eq!(listed["truncated"], false);
        assert_eq!(listed["input_bytes"], i.input.as_json().len());
        let listed = listed.as_object().unwrap();
        let whole = whole.as_object_mut().unwrap();
        for (k, v) in whole.iter() {
            assert_eq!(&listed[k], v, "{k}");
        }
    }

    #[test]
    fn a_big_input_and_its_allow_are_previewed_within_bounds() {
        let command = "é".repeat(450_000);
        let mut i = bash(&command);
        i.set_title(Some("t".repeat(20_000).into()));
        let allow = PermissionResult::Allow {
            updated_input: i.input.clone(),
            updated_permissions: None,
        };
        i.resolution = Some(Box::new(Resolution {
            outcome: Outcome::Allowed,
            by: Some("ann".into()),
            via: Via::api(),
            at: now(),
            result: allow.into(),
        }));
        let text = serde_json::to_string(&Summary(&i)).unwrap();
        assert!(text.len() < 8 * 1024, "{} bytes", text.len());
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["truncated"], true);
        assert_eq!(v["input_bytes"], i.input.as_json().len());
        let shown = v["input"]["command"].as_str().unwrap();
        assert!(shown.ends_with('…') && command.starts_with(shown.trim_end_matches('…')));
        assert_eq!(v["input"]["description"], "d");
        assert_eq!(v["resolution"]["outcome"], "allowed");
        assert_eq!(v["resolution"]["by"], "ann");
        assert_eq!(
            v["resolution"]["result"]["updatedInput"]["command"],
            v["input"]["command"]
        );
        assert_eq!(
            v["title"].as_str().unwrap().chars().count(),
            TEXT_MAX_CHARS + 1
        );
    }

    #[test]
    fn a_preview_of_many_members_stops_where_its_room_runs_out() {
        let many: Map<String, Value> = (0..10_000)
            .map(|n| (format!("k{n}"), json!([n, "v", {"deep": [1, 2, 3]}])))
            .collect();
        let mut room = PREVIEW_BYTES;
        let shown = preview(&Value::Object(many), &mut room);
        let len = shown.to_string().len();
        assert!(len < PREVIEW_BYTES * 2, "{len}");
        assert!(shown.as_object().unwrap().len() > 10);
    }
}
