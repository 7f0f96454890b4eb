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
    /// What a finished turn does (docs/steering.md): `off`, or `tell` / `ask`: a "finished"
    /// question reaches the session's route, and a reply is sent to the agent as its next
    /// prompt (`ask`: when given within `finish_wait_secs`; `tell`: when the next turn ends).
    pub on_finish: crate::agents::steer::OnFinish,
    /// How long the proxy waits for a reply to a finished turn with `on_finish = "ask"`,
    /// seconds.
    pub finish_wait_secs: u64,
}
