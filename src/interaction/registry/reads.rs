//! Reading interactions: one by id (from memory where it is held whole), pages of them, the
//! pending ones, and waiting for one to be resolved.

use std::sync::Arc;
use std::time::Duration;

use super::{LongPoll, Registry, RegistryError};
use crate::interaction::model::{Interaction, InteractionId};
use crate::interaction::ports::{Cursor, ListQuery, Page, StatusFilter};
use crate::interaction::quorum;
use crate::sync::LockExt;

/// The most pending interactions read at once when going through all of them
/// ([`Registry::pending_page`]).
const PENDING_PAGE: usize = 500;

/// About the most bytes of stored interactions (their JSON text) read at once when going
/// through every pending one ([`Registry::pending_page`]): a page of big inputs holds fewer.
const PENDING_PAGE_BYTES: usize = 8 * 1024 * 1024;

impl Registry {
    /// The current state of an interaction, whole: from memory where it is held there,
    /// else from the store.
    pub async fn get(&self, id: &InteractionId) -> Result<Option<Arc<Interaction>>, RegistryError> {
        let local = self.inner.slots.locked().get(id).cloned();
        // A pending interaction with votes changes as people vote: the store has the votes.
        if let Some(slot) = local
            && let Some(i) = slot
                .resolved()
                .or_else(|| slot.held().filter(|w| !quorum::is_voted(w)))
        {
            return Ok(Some(i));
        }
        Ok(self.inner.store.get(id).await?)
    }

    /// A page of interactions, newest first.
    pub async fn list(&self, query: &ListQuery) -> Result<Page, RegistryError> {
        Ok(self.inner.store.list(query).await?)
    }

    /// One page of a walk through every pending interaction, newest first, holding about
    /// 8 MiB of them at most (at least one): start with `None`, go on with
    /// each page's `next` until it is `None`. For whoever must see each pending interaction
    /// whole (start-up, a re-check, a re-post) without holding all of them at once.
    pub async fn pending_page(&self, after: Option<Cursor>) -> Result<Page, RegistryError> {
        let query = ListQuery {
            status: StatusFilter::Pending,
            limit: PENDING_PAGE,
            after,
            max_bytes: Some(PENDING_PAGE_BYTES),
        };
        Ok(self.inner.store.list(&query).await?)
    }

    /// The ids of every pending interaction, oldest first (read each with
    /// [`Registry::get`] when it is needed, rather than all at once).
    pub async fn pending_ids(&self) -> Result<Vec<InteractionId>, RegistryError> {
        Ok(self.inner.store.pending_ids().await?)
    }

    /// Waits up to `timeout` for an interaction to be resolved: `Some` with the resolved
    /// interaction (at once if it already is), `None` if it is still pending.
    pub async fn wait(
        &self,
        id: &InteractionId,
        timeout: Duration,
    ) -> Result<Option<Arc<Interaction>>, RegistryError> {
        let local = self.inner.slots.locked().get(id).cloned();
        let slot = match local {
            Some(s) => s,
            None => match self.inner.store.get(id).await? {
                None => return Err(RegistryError::NotFound(id.clone())),
                Some(i) if !i.is_pending() => {
                    self.report_long_poll(LongPoll::Ready);
                    return Ok(Some(i));
                }
                Some(i) => self.adopt(i).await?,
            },
        };
        if let Some(resolved) = slot.resolved() {
            self.report_long_poll(LongPoll::Ready);
            return Ok(Some(resolved));
        }
        let (outcome, waited) = match tokio::time::timeout(timeout, slot.resolution()).await {
            Ok(resolved) => (LongPoll::Woken, Some(resolved)),
            Err(_) => (LongPoll::TimedOut, None),
        };
        self.report_long_poll(outcome);
        Ok(waited)
    }

    pub(super) fn report_long_poll(&self, outcome: LongPoll) {
        for h in self.hooks().iter() {
            h.long_poll(outcome);
        }
    }
}
