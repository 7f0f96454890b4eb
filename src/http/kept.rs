//! Small lists the HTTP layer keeps in the store as one named JSON value each (passkeys,
//! enrolment codes): read whole, changed with [`update`], which writes the list back only if
//! nobody changed it since it was read (on this process or another replica), and otherwise
//! reads it again and makes the change again, so no change is lost. A value that does not
//! read is logged and taken as empty, so nothing it held is trusted.

use axum::http::StatusCode;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::AppState;
use super::error::ApiError;

/// How many times a change is made again after another writer got there first.
const TRIES: usize = 16;

/// The list kept under `key` (empty when there is none, or it does not read: `what` names it
/// in the log).
pub async fn load<T: DeserializeOwned>(
    state: &AppState,
    key: &str,
    what: &str,
) -> Result<Vec<T>, ApiError> {
    let raw = state.registry.store().get_value(key).await?;
    Ok(read(raw.as_deref(), what))
}

/// `raw` as the list, empty when there is none or it does not read.
fn read<T: DeserializeOwned>(raw: Option<&str>, what: &str) -> Vec<T> {
    raw.and_then(|r| match serde_json::from_str(r) {
        Ok(v) => Some(v),
        Err(e) => {
            tracing::error!(error = %e, "the stored {what} cannot be read; none are used");
            None
        }
    })
    .unwrap_or_default()
}

/// Changes the list kept under `key` with `change`, which says what became of it: `Ok` to
/// keep the changed list (written back, and its `R` returned), `Err` to leave it as it was
/// (its `E` returned, nothing written). `change` may run more than once (each time on the
/// list as another writer left it), so it does nothing but change the list.
pub async fn update<T, R, E>(
    state: &AppState,
    key: &str,
    what: &str,
    mut change: impl FnMut(&mut Vec<T>) -> Result<R, E>,
) -> Result<Result<R, E>, ApiError>
where
    T: Serialize + DeserializeOwned,
{
    let store = state.registry.store();
    for _ in 0..TRIES {
        let raw = store.get_value(key).await?;
        let mut all = read(raw.as_deref(), what);
        let made = match change(&mut all) {
            Ok(made) => made,
            Err(e) => return Ok(Err(e)),
        };
        let text = serde_json::to_string(&all).map_err(|e| {
            ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string())
        })?;
        if store.swap_value(key, raw.as_deref(), Some(text)).await? {
            return Ok(Ok(made));
        }
        tracing::debug!(
            key,
            "{what} changed by another writer meanwhile; changing again"
        );
    }
    Err(ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "busy",
        format!("the {what} are being changed by many requests at once: try again"),
    ))
}
