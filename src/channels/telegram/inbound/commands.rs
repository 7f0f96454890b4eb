//! The commands: `/start`, `/whoami` and `/help` (the ids to configure), `/pending`
//! (re-post what is waiting), `/sessions` (the agent sessions of this chat's routes), and how
//! the bot answers any message, rate limited for strangers.

use std::time::Instant;

use jiff::Timestamp;
use teloxide::types::{Message, User};

use crate::channels::pipeline::Feedback;
use crate::channels::plan::repost_job;
use crate::channels::telegram::render::escape;
use crate::channels::telegram::{CHANNEL, Job, Telegram, actor, display_name};

impl Telegram {
    /// Answers `m` in its chat. Answers to non-approvers are rate limited ([`ReplyLimit`]).
    pub(super) async fn reply(&self, m: &Message, html: String) {
        let chat = m.chat.id.0;
        let approver = m.from.as_ref().is_some_and(|u| self.is_approver(u));
        if !approver && !self.reply_limit.allow(chat, Instant::now()) {
            tracing::debug!(
                chat,
                "telegram: not answering a non-approver (rate limited)"
            );
            return;
        }
        if let Err(f) = self.client.send(chat, html, None, Some(m.id.0)).await {
            tracing::warn!(chat, error = %f.describe(), "telegram: could not reply");
        }
    }

    /// The command in `text` if it is addressed to this bot (`/cmd` or `/cmd@thisbot`).
    fn command(&self, text: &str) -> Option<String> {
        let first = text.split_whitespace().next()?.strip_prefix('/')?;
        let (cmd, to) = match first.split_once('@') {
            Some((c, bot)) => (c, Some(bot)),
            None => (first, None),
        };
        if let Some(bot) = to {
            let mine = self.username.get()?;
            if !bot.eq_ignore_ascii_case(mine) {
                return None;
            }
        }
        Some(cmd.to_ascii_lowercase())
    }

    /// A command (`/start`, `/whoami`, `/help`, `/pending`) addressed to this bot.
    pub(super) async fn on_command(&self, m: &Message, from: &User, text: &str) {
        let Some(cmd) = self.command(text) else {
            return;
        };
        match cmd.as_str() {
            "start" | "whoami" | "help" => self.whoami(m, from, cmd == "start").await,
            "pending" => self.pending(m, from).await,
            "sessions" => self.sessions(m, from).await,
            _ if m.chat.is_private() => self.reply(m, escape(self.words().unknown_command())).await,
            _ => {}
        }
    }

    /// `/whoami` (and `/start`, `/help`): the chat's and the sender's ids, and what they
    /// mean for prompts here.
    async fn whoami(&self, m: &Message, from: &User, greeting: bool) {
        let chat = m.chat.id.0;
        let w = self.words();
        let mut s = String::new();
        if greeting {
            s.push_str(&format!("👋 {}\n\n", w.greeting("<b>imrelay</b>")));
        }
        s.push_str(&w.chat_id_line(
            &format!("<code>{chat}</code>"),
            self.is_chat(chat),
            "<code>telegram.chats</code>",
        ));
        s.push('\n');
        s.push_str(&w.user_id_line(
            &format!("<code>{}</code>", from.id.0),
            &escape(&display_name(from)),
            self.is_approver(from),
            "<code>telegram.approvers</code>",
        ));
        if self.settings.approvers.is_empty() {
            let warning = w.nobody_answers("<code>telegram.approvers</code>", "Telegram");
            s.push_str(&format!("\n\n⚠️ {warning}"));
        }
        self.reply(m, s).await;
    }

    /// `/sessions`: the agent sessions whose route posts to this chat (approvers only).
    async fn sessions(&self, m: &Message, from: &User) {
        let chat = m.chat.id.0;
        if !self.is_approver(from) {
            tracing::info!(user = %actor(from), chat, "telegram: /sessions from a non-approver");
            self.reply(m, escape(self.words().only_approvers_list()))
                .await;
            return;
        }
        let address = chat.to_string();
        let listed = self.is_chat(chat);
        let sessions =
            match crate::channels::sessions::of_chat(&self.registry, "telegram", &address, listed)
                .await
            {
                Ok(s) => s,
                Err(e) => {
                    tracing::error!(error = %e, "telegram: cannot list the sessions");
                    self.reply(m, self.say(Feedback::StoreDown)).await;
                    return;
                }
            };
        if sessions.is_empty() {
            self.reply(m, escape(self.words().no_sessions())).await;
            return;
        }
        let lines: Vec<String> = crate::channels::sessions::lines(&sessions)
            .iter()
            .map(|l| escape(l))
            .collect();
        let header = self.words().sessions();
        self.reply(m, format!("<b>{header}</b>\n{}", lines.join("\n")))
            .await;
    }

    /// `/pending`: re-posts in this chat every interaction still pending (approvers only).
    async fn pending(&self, m: &Message, from: &User) {
        let chat = m.chat.id.0;
        if !self.is_chat(chat) {
            let told = self.words().not_posted_here(
                &format!("<code>{chat}</code>"),
                "<code>telegram.chats</code>",
            );
            self.reply(m, told).await;
            return;
        }
        if !self.is_approver(from) {
            tracing::info!(user = %actor(from), chat, "telegram: /pending from a non-approver");
            self.reply(m, escape(self.words().only_approvers_pending()))
                .await;
            return;
        }
        let now = Timestamp::now();
        let nonce = m.id.0.to_string();
        // A page at a time (a re-post needs each interaction only to plan its job), newest
        // first; re-posted oldest first, as they were asked.
        let (mut jobs, mut after) = (Vec::new(), None);
        loop {
            let page = match self.registry.pending_page(after).await {
                Ok(p) => p,
                Err(e) => {
                    tracing::error!(error = %e, "telegram: cannot list pending interactions");
                    self.reply(m, self.say(Feedback::StoreDown)).await;
                    return;
                }
            };
            jobs.extend(
                page.interactions
                    .iter()
                    .filter(|i| i.deadline > now)
                    .map(|i| repost_job::<Job>(CHANNEL, i, chat.to_string(), "repost", &nonce)),
            );
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        if jobs.is_empty() {
            self.reply(m, escape(self.words().nothing_pending())).await;
            return;
        }
        jobs.reverse();
        let n = jobs.len();
        if let Err(e) = self.store.enqueue(jobs).await {
            tracing::error!(error = %e, "telegram: cannot queue re-posts");
            self.reply(m, self.say(Feedback::StoreDown)).await;
            return;
        }
        self.reply(m, escape(&self.words().reposting(n))).await;
    }
}
