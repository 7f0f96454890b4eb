//! The parity suite for the channels tested against a real server ([`suite::EXTERNAL`]):
//! the same rows, written once in `tests/parity/suite.rs`, that `tests/it/parity.rs` drives
//! through the loopback fakes, driven here through Matrix against Synapse (started once for
//! this binary by `matrix.rs`). Each run gets a new room; the accounts are this suite's own
//! (`parity-bot`, `parity-alice`, `parity-mallory`), so the servers of the Matrix tests
//! running beside it, which share the `imrelay` bot account, never see its rooms.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use imrelay::config::teams::PersonSettings;
use imrelay::config::{Secret, Settings};
use imrelay::store::MemoryStore;
use libtest_mimic::Trial;
use serde_json::json;

use crate::matrix::{Account, Person, Synapse, edit_of, message_from, synapse, until};
use crate::support::{TestApp, spawn_on};
use crate::trial;

#[path = "../parity/suite.rs"]
mod suite;

use suite::{Button, Copy, Harness, Who};

/// This suite's accounts on the homeserver.
struct Accounts {
    bot: Account,
    alice: Account,
    mallory: Account,
}

/// This suite's accounts, once [`register`] has made them.
static ACCOUNTS: OnceLock<Accounts> = OnceLock::new();

/// The accounts [`register`] made.
fn accounts() -> &'static Accounts {
    ACCOUNTS
        .get()
        .expect("the parity accounts are registered first")
}

/// Registers this suite's accounts on `hs` (its one trial does, once).
async fn register(hs: &Synapse) {
    let made = Accounts {
        bot: hs.account("parity-bot").await.expect("parity-bot"),
        alice: hs.account("parity-alice").await.expect("parity-alice"),
        mallory: hs.account("parity-mallory").await.expect("parity-mallory"),
    };
    assert!(ACCOUNTS.set(made).is_ok(), "registered twice");
}

/// Matrix on a new room of the real homeserver: `parity-alice` the approver, `parity-mallory`
/// in the room but no approver.
struct Matrix {
    hs: &'static Synapse,
    room: String,
}

impl Matrix {
    fn alice(&self) -> Person<'static> {
        Person::new(self.hs, &accounts().alice)
    }

    fn bot(&self) -> &'static str {
        &accounts().bot.user_id
    }

    /// The bot's notice in reply to event `event` in `room`, once sent.
    async fn notice_to(&self, room: &str, event: &str) -> String {
        crate::matrix::notice_from(&self.alice(), self.bot(), room, event).await
    }

    /// Waits until the bot is in `room`.
    async fn joined(&self, room: &str) {
        let alice = self.alice();
        let bot = self.bot().to_string();
        until("the bot joins the room", || {
            let (alice, bot) = (&alice, &bot);
            async move { alice.members(room).await.contains(bot).then_some(()) }
        })
        .await;
    }
}

impl Harness for Matrix {
    const PATIENCE: Duration = crate::matrix::WAIT;

    async fn start(name: &str, more: fn(&mut Settings)) -> (Self, TestApp) {
        assert_eq!(
            name, "matrix",
            "no harness in tests/external/parity.rs for channel {name:?}, which suite::EXTERNAL names"
        );
        let hs = synapse().expect("synapse");
        let a = accounts();
        let alice = Person::new(hs, &a.alice);
        let room = alice
            .create_room(&[&a.bot.user_id, &a.mallory.user_id])
            .await;
        Person::new(hs, &a.mallory).join(&room).await;
        let mut s = crate::support::settings();
        s.matrix.enabled = true;
        s.matrix.api_url = hs.url.clone();
        // A device of its own: each run's notices are its own.
        s.matrix.user = a.bot.user_id.clone();
        s.matrix.password = Secret::new(a.bot.password.clone());
        s.matrix.chats = vec![room.clone()];
        s.matrix.approvers = vec![a.alice.user_id.clone()];
        s.people = vec![PersonSettings::named("alice").on("matrix", [a.alice.user_id.clone()])];
        more(&mut s);
        let app = spawn_on(s, Arc::new(MemoryStore::new())).await;
        let run = Matrix { hs, room };
        run.joined(&run.room).await;
        (run, app)
    }

    async fn copy(&self, _id: &str, command: &str) -> Copy {
        let bot = self.bot();
        let prompt = self
            .alice()
            .wait_for(&self.room, "the prompt", |e| {
                message_from(e, bot, command) && e["content"]["m.relates_to"]["rel_type"].is_null()
            })
            .await;
        Copy {
            text: prompt["content"]["body"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            raw: json!({"event": prompt["event_id"]}),
        }
    }

    async fn press(&self, _app: &TestApp, copy: &Copy, button: Button, who: Who) -> String {
        let key = match button {
            Button::Allow => "✅",
            Button::Deny => "❌",
            Button::Similar => "🔁",
        };
        let a = accounts();
        let person = match who {
            Who::Approver => &a.alice,
            Who::Stranger => &a.mallory,
        };
        let event = copy.raw["event"].as_str().unwrap();
        let theirs = Person::new(self.hs, person)
            .react(&self.room, event, key)
            .await;
        match who {
            // The prompt itself is edited to the outcome.
            Who::Approver => String::new(),
            // Told in a notice in reply to the reaction.
            Who::Stranger => self.notice_to(&self.room, &theirs).await,
        }
    }

    async fn shows(&self, _id: &str, copy: &Copy, phrase: &str) {
        let (bot, event) = (self.bot(), copy.raw["event"].as_str().unwrap());
        self.alice()
            .wait_for(&self.room, &format!("the prompt showing {phrase:?}"), |e| {
                edit_of(e, bot, event, phrase)
            })
            .await;
    }

    async fn whoami(&self, _app: &TestApp) -> (String, String, String) {
        // A room no setting names, which the bot joins on the approver's invitation; the one
        // asking is no one configured.
        let a = accounts();
        let room = self
            .alice()
            .create_room(&[&a.bot.user_id, &a.mallory.user_id])
            .await;
        let mallory = Person::new(self.hs, &a.mallory);
        mallory.join(&room).await;
        self.joined(&room).await;
        let asked = mallory
            .send(
                &room,
                "m.room.message",
                json!({"msgtype": "m.text", "body": "!whoami"}),
            )
            .await;
        let told = self.notice_to(&room, &asked).await;
        (told, room, a.mallory.user_id.clone())
    }

    async fn edit(&self, _app: &TestApp, copy: &Copy, command: &str) {
        let event = copy.raw["event"].as_str().unwrap();
        self.alice()
            .reply(&self.room, event, &format!("edit: {command}"))
            .await;
    }

    async fn digest(&self, phrase: &str) -> Copy {
        let (alice, bot) = (self.alice(), self.bot());
        // The session's digest message, edited in place as requests join it.
        let session = phrase.split_once(" requests ").map_or(phrase, |(_, s)| s);
        let digest = alice
            .wait_for(&self.room, "the digest", |e| {
                message_from(e, bot, session) && e["content"]["m.relates_to"]["rel_type"].is_null()
            })
            .await;
        let event = digest["event_id"].as_str().unwrap().to_string();
        let text = until(&format!("the digest showing {phrase:?}"), || {
            let (alice, room, event) = (&alice, &self.room, &event);
            async move {
                let t = crate::matrix::reads_now(alice, room, event).await;
                t.contains(phrase).then_some(t)
            }
        })
        .await;
        Copy {
            text,
            raw: json!({"event": event}),
        }
    }

    async fn approve_all(&self, _app: &TestApp, digest: &Copy) {
        let (alice, bot) = (self.alice(), self.bot());
        let event = digest.raw["event"].as_str().unwrap();
        // ✅ asks to confirm, in a message of its own in reply to the digest; ✅ on it answers.
        alice.react(&self.room, event, "✅").await;
        let confirm = alice
            .wait_for(&self.room, "the confirmation", |e| {
                message_from(e, bot, "React ✅ on this message to confirm")
                    && e["content"]["m.relates_to"]["m.in_reply_to"]["event_id"] == event
            })
            .await;
        alice
            .react(&self.room, confirm["event_id"].as_str().unwrap(), "✅")
            .await;
    }

    async fn steer(&self, _app: &TestApp, copy: &Copy, text: &str) {
        let event = copy.raw["event"].as_str().unwrap();
        self.alice().reply(&self.room, event, text).await;
    }

    async fn outcome_in_thread(&self, copy: &Copy, phrase: &str) {
        let (bot, prompt) = (self.bot(), copy.raw["event"].as_str().unwrap());
        self.alice()
            .wait_for(&self.room, "the outcome in reply to the prompt", |e| {
                e["sender"] == bot
                    && e["content"]["m.relates_to"]["m.in_reply_to"]["event_id"] == prompt
                    && e["content"]["body"]
                        .as_str()
                        .is_some_and(|b| b.contains(phrase))
            })
            .await;
    }

    async fn thread(&self, _id: &str, command: &str) -> String {
        let bot = self.bot();
        let prompt = self
            .alice()
            .wait_for(&self.room, "the prompt in a thread", |e| {
                message_from(e, bot, command)
                    && e["content"]["m.relates_to"]["rel_type"] == "m.thread"
            })
            .await;
        prompt["content"]["m.relates_to"]["event_id"]
            .as_str()
            .unwrap_or_else(|| panic!("a thread without a root: {prompt}"))
            .to_string()
    }

    fn burst(&self) -> (usize, u64) {
        // 200 ms a room (`ROOM_GAP`), four jobs in flight at once.
        (20, 12)
    }

    fn presses_in_chinese(&self) -> bool {
        // A reaction is the same in every language.
        true
    }
}

/// Every ✅ cell of the channels in [`suite::EXTERNAL`], driven against their real servers.
async fn every_claimed_cell_of_the_external_channels() {
    let hs = synapse().expect("synapse");
    register(hs).await;
    for (name, feature) in suite::claimed() {
        if !suite::EXTERNAL.iter().any(|(n, _)| *n == name) {
            continue;
        }
        let began = std::time::Instant::now();
        suite::drive::<Matrix>(name, feature).await;
        eprintln!("parity: {name} · {feature:?} in {:.1?}", began.elapsed());
    }
}

pub(crate) fn trials() -> Vec<Trial> {
    vec![trial(
        "parity::matrix_every_claimed_cell_shows_through_a_real_synapse",
        crate::matrix::need,
        every_claimed_cell_of_the_external_channels,
    )]
}
