//! Start-up: the grants, the shared events' head, and every pending interaction reloaded
//! with its deadline, or expired at once when its deadline passed while imrelay was down.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use futures_util::StreamExt;

use super::deadlines::{EXPIRY_RETRY, instant_in};
use super::records::log_resolution;
use super::{EventKind, Registry, RegistryError};
use crate::interaction::answer;
use crate::interaction::model::{Interaction, now};
use crate::interaction::ports::ResolveOutcome;

impl Registry {
    /// Loads pending interactions from the store with their original deadlines, and expires
    /// at once those whose deadline passed while imrelay was down. Returns (reloaded, expired).
    /// They are read a page at a time ([`Registry::pending_page`]), so start-up holds at once
    /// only what the slots keep (big inputs stay in the store) and one page.
    pub async fn recover(&self) -> Result<(usize, usize), RegistryError> {
        self.load_grants().await?;
        if self.inner.shared_events {
            // Read before the pending interactions: every change after this is read later.
            self.load_recent_events().await?;
        }
        let at = now();
        let (mut reloaded, mut expired) = (0, 0);
        let mut after = None;
        loop {
            let page = self.pending_page(after).await?;
            let mut overdue = Vec::new();
            for i in page.interactions {
                if i.deadline <= at {
                    overdue.push(i);
                } else {
                    self.track(self.share_texts(i));
                    reloaded += 1;
                }
            }
            expired += overdue.len();
            self.expire_overdue(overdue, at).await;
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        // What changes from here on is in the shared events after the head read above.
        self.inner
            .recovered
            .store(self.inner.shared_events, Ordering::SeqCst);
        Ok((reloaded, expired))
    }

    /// `interaction` with its tool's name, agent, session and directory texts pointing to the shared
    /// copies, as a fresh interaction's do (one read back from the store has copies of its
    /// own).
    fn share_texts(&self, mut interaction: Arc<Interaction>) -> Arc<Interaction> {
        if let Some(i) = Arc::get_mut(&mut interaction) {
            let [tool_name, session, agent, cwd] = self.inner.texts.share_each([
                Some(i.tool_name.as_str()),
                i.session.as_deref(),
                i.agent.as_deref(),
                i.cwd.as_deref(),
            ]);
            i.tool_name = tool_name.unwrap_or_default();
            [i.session, i.agent, i.cwd] = [session, agent, cwd];
        }
        interaction
    }

    /// Expires interactions whose deadline passed while imrelay was down; one that cannot
    /// be recorded now is held and tried again shortly.
    async fn expire_overdue(&self, overdue: Vec<Arc<Interaction>>, at: jiff::Timestamp) {
        futures_util::stream::iter(overdue)
            .for_each_concurrent(256, |i| async move {
                let resolved = Arc::new(i.resolved(answer::expired(&i, at)));
                let effects = self.resolution_effects(&resolved, None);
                let has_jobs = !effects.jobs.is_empty();
                match self.inner.store.resolve(resolved.clone(), effects).await {
                    Ok(ResolveOutcome::Resolved) => {
                        self.publish(EventKind::Resolved, resolved.clone());
                        log_resolution(&resolved, "interaction expired while imrelay was down");
                        for h in self.hooks().iter() {
                            h.resolved(&resolved);
                            if has_jobs {
                                h.jobs_recorded();
                            }
                        }
                    }
                    Ok(_) => {}
                    Err(e) => {
                        tracing::error!(id = %resolved.id, error = %e, "could not record an overdue expiry; retrying shortly");
                        let slot = self.track(i.clone());
                        self.schedule(slot, instant_in(EXPIRY_RETRY));
                    }
                }
            })
            .await;
    }
}
