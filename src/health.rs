//! Health of long-running components (a channel's connection, its polling loop), reported by
//! `/healthz` next to the store's own check.

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde_json::{Value, json};

use crate::interaction::{Millis, now};
use crate::sync::LockExt;

/// The latest reported state of each component.
#[derive(Default)]
pub struct Health {
    // A std mutex: updates and snapshots are short and synchronous.
    components: Mutex<BTreeMap<String, Value>>,
}

impl Health {
    /// Records `component`'s state (e.g. `"connected"`) with details.
    pub fn set(&self, component: &str, state: &str, detail: Value) {
        let mut entry = json!({ "state": state, "since": Millis(now()) });
        if let (Some(obj), Value::Object(extra)) = (entry.as_object_mut(), detail) {
            obj.extend(extra);
        }
        self.components
            .locked()
            .insert(component.to_string(), entry);
    }

    /// Every component's state.
    pub fn snapshot(&self) -> Value {
        let map = self.components.locked();
        Value::Object(map.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
    }
}
