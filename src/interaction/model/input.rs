//! A tool input kept as its compact JSON text, and the scanner that reads its members without
//! building the whole tree.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::interaction::ValidationError;

/// A tool input: a JSON object, kept as its compact JSON text.
///
/// Pending interactions stay in memory until they are answered; as text an input takes a
/// fraction of the room of its parsed tree, is written out by copying, and a resolved copy
/// of an interaction clones it cheaply. Readers parse it with [`Input::map`].
///
/// An input that arrived as text ([`Input::from_json`]) keeps it as written, so the agent
/// gets back exactly what it sent: a parsed tree would turn `1e2` into `100.0`, `-0` into
/// `-0.0` and an integer beyond 64 bits into a rounded float. Everything that writes an
/// input out copies its text ([`Input`]'s `Serialize` writes it as raw JSON) rather than
/// going through [`Value`].
#[derive(Clone)]
pub struct Input(Box<str>);

impl Input {
    /// The input holding `map`.
    pub fn from_map(map: &Map<String, Value>) -> Self {
        // A map of JSON values always serializes; the empty object is never needed.
        Input(
            serde_json::to_string(map)
                .unwrap_or_else(|_| "{}".into())
                .into_boxed_str(),
        )
    }

    /// The input an agent sent as JSON text, exactly as written less the whitespace between
    /// its tokens. Anything but an object is refused (`field`: `input`).
    pub fn from_json(raw: &RawValue) -> Result<Self, ValidationError> {
        let text = raw.get();
        if !text.starts_with('{') {
            let found = serde_json::from_str::<Value>(text)
                .map(|v| crate::interaction::json_type(&v))
                .unwrap_or("something else");
            return Err(ValidationError::new(
                "input",
                format!("expected a JSON object, got {found}"),
            ));
        }
        Ok(Input(compact(text).into_boxed_str()))
    }

    /// The same input with member `key` set to `value`: replaced where it stands, or added
    /// at the end. Every other member keeps its text as it is.
    pub fn with_member(&self, key: &str, value: &Value) -> Input {
        let Some(members) = members(&self.0) else {
            let mut map = self.map();
            map.insert(key.to_string(), value.clone());
            return Input::from_map(&map);
        };
        let value = value.to_string();
        let mut out = String::with_capacity(self.0.len() + key.len() + value.len() + 4);
        let mut placed = false;
        let push = |out: &mut String, k: &str, v: &str| {
            out.push(if out.is_empty() { '{' } else { ',' });
            // Writing a string into a String cannot fail.
            out.push_str(&serde_json::to_string(k).unwrap_or_default());
            out.push(':');
            out.push_str(v);
        };
        for (k, v) in &members {
            if k != key {
                push(&mut out, k, v.get());
            } else if !placed {
                placed = true;
                push(&mut out, k, &value);
            }
        }
        if !placed {
            push(&mut out, key, &value);
        }
        if out.is_empty() {
            out.push('{');
        }
        out.push('}');
        Input(out.into_boxed_str())
    }

    /// The object, parsed.
    pub fn map(&self) -> Map<String, Value> {
        // The text was written from a map (or checked to be an object when read back).
        serde_json::from_str(&self.0).unwrap_or_default()
    }

    /// The compact JSON text.
    pub fn as_json(&self) -> &str {
        &self.0
    }
}

/// `json` (valid JSON) without the whitespace between its tokens.
fn compact(json: &str) -> String {
    let mut out = Vec::with_capacity(json.len());
    let (mut in_string, mut escaped) = (false, false);
    for &b in json.as_bytes() {
        if in_string {
            out.push(b);
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
        } else if !matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
            in_string = b == b'"';
            out.push(b);
        }
    }
    // Only ASCII whitespace was left out, so the rest is still UTF-8.
    String::from_utf8(out).unwrap_or_else(|_| json.to_string())
}

/// The members of a JSON object, each value as its text; `None` if `json` is not an object.
fn members(json: &str) -> Option<Vec<(String, &RawValue)>> {
    struct Members;
    impl<'de> serde::de::Visitor<'de> for Members {
        type Value = Vec<(String, &'de RawValue)>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut m: A,
        ) -> Result<Self::Value, A::Error> {
            let mut out = Vec::with_capacity(m.size_hint().unwrap_or(4));
            while let Some(member) = m.next_entry()? {
                out.push(member);
            }
            Ok(out)
        }
    }
    let mut de = serde_json::Deserializer::from_str(json);
    serde::Deserializer::deserialize_map(&mut de, Members).ok()
}

impl Default for Input {
    fn default() -> Self {
        Input("{}".into())
    }
}

impl From<Map<String, Value>> for Input {
    fn from(map: Map<String, Value>) -> Self {
        Input::from_map(&map)
    }
}

/// Equal when they hold the same object, whatever the order of its keys.
impl PartialEq for Input {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0 || self.map() == other.map()
    }
}

impl fmt::Debug for Input {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for Input {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match serde_json::from_str::<&serde_json::value::RawValue>(&self.0) {
            Ok(raw) => raw.serialize(s),
            Err(_) => Map::new().serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Input {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = Box::<serde_json::value::RawValue>::deserialize(d)?;
        if !raw.get().trim_start().starts_with('{') {
            return Err(serde::de::Error::custom("input: expected a JSON object"));
        }
        Ok(Input(raw.into()))
    }
}
