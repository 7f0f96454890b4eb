//! Small lists the HTTP layer keeps in the store as one named JSON value each (passkeys,
//! enrolment codes): read whole, written whole. A value that does not read is logged and
//! taken as empty, so nothing it held is trusted.

use axum::http::StatusCode;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::AppState;
use super::error::ApiError;

/// The list kept under `key` (empty when there is none, or it does not read: `what` names it
/// in the log).
pub async fn load<T: DeserializeOwned>(
    state: &AppState,
    key: &str,
    what: &str,
) -> Result<Vec<T>, ApiError> {
    let raw = state.registry.store().get_value(key).await?;
    Ok(raw
        .and_then(|r| match serde_json::from_str(&r) {
            Ok(v) => Some(v),
            Err(e) => {
                tracing::error!(error = %e, "the stored {what} cannot be read; none are used");
                None
            }
        })
        .unwrap_or_default())
}

/// Keeps `all` under `key`.
pub async fn save<T: Serialize>(state: &AppState, key: &str, all: &[T]) -> Result<(), ApiError> {
    let text = serde_json::to_string(all)
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()))?;
    state.registry.store().set_value(key, Some(text)).await?;
    Ok(())
}
