//! `[hooks.acp]`: the settings of the endpoint `imrelay acp` talks to.

use serde::{Deserialize, Serialize};

use crate::agents::OnTimeout;

/// `[hooks.acp]`
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AcpHookSettings {
    /// The deadline of each request, seconds, at most `interactions.max_timeout_secs` (an ACP
    /// agent itself waits for its permission requests as long as it takes).
    pub timeout_secs: u64,
    /// What the agent is answered when nobody answered in time: `deny` gives it the reject
    /// option; `ask` hands the request to the editor's own prompt.
    pub on_timeout: OnTimeout,
}
