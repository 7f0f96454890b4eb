//! The bot's session with its homeserver: the configured access token, or one got by logging
//! in with the configured user and password when first needed (and again when the
//! homeserver forgets it), shared by delivery, the `/sync` loop and the doctor.

use std::future::Future;
use std::time::Duration;

use tokio::sync::Mutex;

use super::api::{self, ApiError, Client};
use super::settings::MatrixSettings;
use crate::settings::Secret;

/// A session; calls go through [`Session::call`].
pub(crate) struct Session {
    http: reqwest::Client,
    base: String,
    /// The configured token, or none to log in.
    token: Option<Secret>,
    user: String,
    /// The device a login asks for.
    device: String,
    password: Secret,
    /// Per-request timeout.
    pub timeout: Duration,
    client: Mutex<Option<Client>>,
}

impl Session {
    /// The session `settings` describe, logging in (when it does) as device `device` (nothing
    /// is sent yet).
    pub(super) fn new(settings: &MatrixSettings, device: String) -> anyhow::Result<Self> {
        let http = api::http(Duration::from_secs(settings.connect_timeout_secs))?;
        let token = (!settings.access_token.is_empty()).then(|| settings.access_token.clone());
        let client = match &token {
            Some(t) => Some(Client::new(http.clone(), settings.base(), t.clone())?),
            None => None,
        };
        Ok(Self {
            http,
            base: settings.base().to_string(),
            token,
            user: settings.user.trim().to_string(),
            device,
            password: settings.password.clone(),
            timeout: Duration::from_secs(settings.timeout_secs),
            client: Mutex::new(client),
        })
    }

    /// The client, logging in first when there is no token yet.
    pub(super) async fn client(&self) -> Result<Client, ApiError> {
        let mut held = self.client.lock().await;
        if let Some(c) = held.as_ref() {
            return Ok(c.clone());
        }
        let (token, user_id) = api::login(
            &self.http,
            &self.base,
            (&self.user, &self.device),
            &self.password,
            self.timeout,
        )
        .await?;
        tracing::info!(user = %user_id.escape_debug(), "matrix: logged in");
        let c =
            Client::new(self.http.clone(), &self.base, token).map_err(|e| ApiError::Network {
                what: "login",
                error: e.to_string(),
            })?;
        *held = Some(c.clone());
        Ok(c)
    }

    /// Runs `f` with the client and the request timeout. A token the homeserver no longer
    /// knows is dropped when it was got by logging in, so the next call logs in again.
    pub(super) async fn call<T, F, Fut>(&self, f: F) -> Result<T, ApiError>
    where
        F: FnOnce(Client, Duration) -> Fut,
        Fut: Future<Output = Result<T, ApiError>>,
    {
        let client = self.client().await?;
        let r = f(client, self.timeout).await;
        if let Err(e) = &r
            && e.errcode() == "M_UNKNOWN_TOKEN"
            && self.token.is_none()
        {
            *self.client.lock().await = None;
        }
        r
    }
}
