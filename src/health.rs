//! Health of long-running components (a channel's connection, its polling loop), reported by
//! `/healthz` next to the store's own check. A component in one of the [`FAILING`] states
//! makes the server's status "degraded", named in `failing`.

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde_json::{Value, json};

use crate::interaction::{Millis, now};
use crate::sync::LockExt;

/// The states in which a component does not work: it cannot reach its platform and keeps
/// trying (`retrying`, `disconnected`), was refused for good (`error`, `failed`), or its
/// deliveries fail (`failing`). Every other state (`starting`, `connecting`, `polling`,
/// `webhook`, `connected`, `standby`, `ok`, ...) is working or on its way.
pub const FAILING: &[&str] = &["retrying", "disconnected", "error", "failed", "failing"];

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

    /// The components in a [`FAILING`] state, by name.
    pub fn failing(&self) -> Vec<String> {
        self.components
            .locked()
            .iter()
            .filter(|(_, v)| {
                v["state"]
                    .as_str()
                    .is_some_and(|state| FAILING.contains(&state))
            })
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Every component's state.
    pub fn snapshot(&self) -> Value {
        let map = self.components.locked();
        Value::Object(map.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_components_in_a_failing_state_are_failing() {
        let h = Health::default();
        h.set("telegram", "starting", json!({}));
        h.set("feishu", "connected", json!({}));
        assert!(h.failing().is_empty());
        h.set("telegram", "retrying", json!({"last_error": "getMe: 502"}));
        h.set("feishu_api", "failing", json!({}));
        assert_eq!(h.failing(), ["feishu_api", "telegram"]);
        h.set("telegram", "polling", json!({}));
        assert_eq!(h.failing(), ["feishu_api"]);
    }
}
