//! Votes on approvals that need several people: recorded and counted in one write
//! transaction (the writer thread runs one at a time), the vote in `votes` (one per
//! person, by its primary key) and in the interaction's `doc`, and the resolution with it
//! when the vote decides.

use std::sync::Arc;

use rusqlite::{Connection, params};

use super::{SqliteStore, apply_effects, corrupt, encode_jobs, get_in, ms, unavailable};
use crate::interaction::Interaction;
use crate::interaction::quorum::{Ballot, Count, VoteOutcome};
use crate::store::StoreError;

impl SqliteStore {
    /// [`crate::store::InteractionStore::vote`] on SQLite.
    pub(super) async fn record_vote(&self, ballot: Ballot) -> Result<VoteOutcome, StoreError> {
        self.write(move |conn| vote_in(conn, ballot)).await
    }
}

fn vote_in(conn: &Connection, ballot: Ballot) -> Result<VoteOutcome, StoreError> {
    let id = ballot.interaction.id.as_str().to_string();
    let stored = get_in(conn, &id)?;
    let (updated, effects, decided) = match ballot.count(stored.as_ref()) {
        Count::Refused(outcome) => return Ok(outcome),
        Count::Recorded(i) => (i, ballot.recorded_effects, false),
        Count::Decided(i) => (i, ballot.decided_effects, true),
    };
    let v = &ballot.vote;
    let inserted = conn
        .prepare_cached(
            "INSERT INTO votes (interaction_id, created_at, person, allow, via, at, doc)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
             ON CONFLICT DO NOTHING",
        )
        .and_then(|mut s| {
            s.execute(params![
                id,
                ms(updated.created_at),
                v.person,
                v.allow,
                v.via.as_str(),
                ms(v.at),
                serde_json::to_string(v).unwrap_or_default(),
            ])
        })
        .map_err(unavailable)?;
    if inserted == 0 {
        // The doc and the table disagree: the table is the record.
        return Err(StoreError::Corrupt(format!(
            "a vote of {:?} on {id:?} is recorded but missing from the interaction",
            v.person
        )));
    }
    let doc = serde_json::to_string(&Interaction {
        resolution: None,
        ..updated.clone()
    })
    .map_err(corrupt)?;
    let at = match (decided, updated.resolution.as_deref()) {
        (true, Some(r)) => {
            let res = serde_json::to_string(r).map_err(corrupt)?;
            conn.prepare_cached(
                "UPDATE interactions SET doc = ?2, status = 'resolved', resolved_at = ?3,
                     resolution = ?4
                 WHERE id = ?1 AND status = 'pending'",
            )
            .and_then(|mut s| s.execute(params![id, doc, ms(r.at), res]))
            .map_err(unavailable)?;
            ms(r.at)
        }
        (true, None) => {
            return Err(StoreError::Corrupt(
                "a deciding vote without a resolution".into(),
            ));
        }
        (false, _) => {
            conn.prepare_cached("UPDATE interactions SET doc = ?2 WHERE id = ?1")
                .and_then(|mut s| s.execute(params![id, doc]))
                .map_err(unavailable)?;
            ms(v.at)
        }
    };
    apply_effects(conn, &encode_jobs(effects.jobs), effects.audit, at)?;
    let updated = Arc::new(updated);
    Ok(if decided {
        VoteOutcome::Decided(updated)
    } else {
        VoteOutcome::Recorded(updated)
    })
}
