-- Votes on approvals that need several people (a quorum), shared by every replica. One row
-- per person and interaction (its id and creation time name it); the interaction's `doc`
-- carries the same votes for reading. A vote is recorded under a lock on its interaction's
-- row, so votes from several replicas are counted one after the other. Times are unix
-- milliseconds. A vote goes when its interaction does.

CREATE TABLE votes (
    interaction_id text COLLATE "C" NOT NULL REFERENCES interactions (id) ON DELETE CASCADE,
    created_at     bigint NOT NULL,
    person         text NOT NULL,
    allow          boolean NOT NULL,
    via            text NOT NULL,
    at             bigint NOT NULL,
    doc            json NOT NULL,
    PRIMARY KEY (interaction_id, created_at, person)
);

-- Every copy is edited to show the votes so far: an event of its own.
ALTER TABLE events DROP CONSTRAINT events_kind_check;
ALTER TABLE events ADD CONSTRAINT events_kind_check
    CHECK (kind IN ('created', 'resolved', 'voted'));
