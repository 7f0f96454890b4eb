//! A homeserver on loopback for the channel's own tests: it notes every request it gets
//! (method and path) and answers each as a homeserver would for the few calls those tests
//! make; a test asks it how many requests came.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::deliver::Matrix;
use super::inbound::Inbound;
use super::render::Render;
use super::session::Session;
use super::settings::MatrixSettings;
use crate::channels::digest::{Digests, Sheet};
use crate::channels::pipeline::Pipeline;
use crate::interaction::{Registry, RegistryConfig, Via};
use crate::store::{MemoryStore, Store};
use crate::sync::LockExt;

/// The bot's user id on the fake.
pub(super) const BOT: &str = "@bot:fake";
/// The room the tests post in.
pub(super) const ROOM: &str = "!room:fake";
/// An approver.
pub(super) const ALICE: &str = "@alice:fake";

/// The fake's state: the requests so far, and the content of the event it returns.
#[derive(Clone, Default)]
pub(super) struct Homeserver {
    requests: Arc<Mutex<Vec<String>>>,
    event: Arc<Mutex<Value>>,
}

impl Homeserver {
    /// The requests so far, as `METHOD path`.
    pub(super) fn requests(&self) -> Vec<String> {
        self.requests.locked().clone()
    }

    /// Makes every event read back from it the bot's, with `content`.
    pub(super) fn event_is(&self, content: Value) {
        *self.event.locked() = json!({"sender": BOT, "type": "m.room.message", "content": content});
    }
}

/// Notes the request and answers it: a room's encryption state is not found (unencrypted),
/// an event is the one set, a send is event `$sent:fake`, anything else `{}`.
async fn answer(State(hs): State<Homeserver>, req: Request) -> Response {
    let path = req.uri().path().to_string();
    hs.requests
        .locked()
        .push(format!("{} {path}", req.method()));
    if path.contains("/state/m.room.encryption") {
        let body = json!({"errcode": "M_NOT_FOUND", "error": "no encryption"});
        return (StatusCode::NOT_FOUND, axum::Json(body)).into_response();
    }
    if path.contains("/event/") {
        return axum::Json(hs.event.locked().clone()).into_response();
    }
    if path.contains("/send/") {
        return axum::Json(json!({"event_id": "$sent:fake"})).into_response();
    }
    axum::Json(json!({})).into_response()
}

/// A fake homeserver on a port of its own, and the channel's parts over it: its delivery
/// platform and its `/sync` handler (sharing that platform), on a memory store.
pub(super) async fn channel() -> (Homeserver, Matrix, Inbound) {
    let hs = Homeserver::default();
    let app = Router::new().fallback(answer).with_state(hs.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let settings = MatrixSettings {
        enabled: true,
        api_url: base,
        access_token: crate::settings::Secret::new("token"),
        chats: vec![ROOM.into()],
        approvers: vec![ALICE.into()],
        ..MatrixSettings::default()
    };
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let registry = Registry::new(store.clone(), RegistryConfig::default());
    let session = Arc::new(Session::new(&settings).unwrap());
    let render = Render {
        locale: settings.locale,
        inbox: None,
    };
    let digests = Digests::new(store.clone(), super::CHANNEL, 1, settings.chats.clone());
    let matrix =
        Matrix::new(session.clone(), render.clone(), store.clone()).with_digests(digests.clone());
    let inbound = Inbound {
        matrix: matrix.clone(),
        digests,
        session,
        pipeline: Pipeline::new(registry, Via::new(super::CHANNEL)),
        store,
        settings: Arc::new(settings),
        render,
        health: Arc::default(),
        shutdown: tokio_util::sync::CancellationToken::new(),
    };
    (hs, matrix, inbound)
}

/// A digest sheet of `session` at [`ROOM`] listing `set`, its first member `first` (an
/// incarnation).
pub(super) fn sheet(session: &str, set: &str, first: &str) -> Sheet {
    Sheet {
        address: ROOM.into(),
        session: session.into(),
        set: set.into(),
        first: first.into(),
        title: String::new(),
        count: 1,
        lines: Vec::new(),
        listed: Vec::new(),
        more: None,
        question: None,
        rows: Vec::new(),
    }
}
