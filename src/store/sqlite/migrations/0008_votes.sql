-- 8: votes on approvals that need several people (a quorum). One row per person and
-- interaction (its id and creation time name it); the interaction's `doc` carries the same
-- votes for reading. Times are unix milliseconds. A vote goes when its interaction does.
CREATE TABLE IF NOT EXISTS votes (
    interaction_id TEXT NOT NULL,
    created_at     INTEGER NOT NULL,
    person         TEXT NOT NULL,
    allow          INTEGER NOT NULL,
    via            TEXT NOT NULL,
    at             INTEGER NOT NULL,
    doc            TEXT NOT NULL,
    PRIMARY KEY (interaction_id, created_at, person)
);
CREATE TRIGGER IF NOT EXISTS votes_go_with_their_interaction AFTER DELETE ON interactions
BEGIN
    DELETE FROM votes WHERE interaction_id = OLD.id;
END;
