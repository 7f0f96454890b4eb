-- 6: grants ("allow this and similar calls"), kept until revoked or expired. `doc` is the
-- grant as JSON; the times are unix milliseconds.
CREATE TABLE IF NOT EXISTS grants (
    id         TEXT PRIMARY KEY,
    created_at INTEGER NOT NULL,
    expires_at INTEGER,
    revoked_at INTEGER,
    doc        TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS grants_in_force ON grants (created_at) WHERE revoked_at IS NULL;
