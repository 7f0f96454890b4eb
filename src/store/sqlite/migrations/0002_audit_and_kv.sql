-- 2: the hash-chained audit trail, and small named values.
CREATE TABLE audit (
    seq            INTEGER PRIMARY KEY,
    at             INTEGER NOT NULL,
    action         TEXT NOT NULL,
    interaction_id TEXT,
    actor          TEXT,
    channel        TEXT NOT NULL,
    outcome        TEXT NOT NULL,
    input_hash     TEXT,
    detail         TEXT,
    prev_hash      TEXT NOT NULL,
    hash           TEXT NOT NULL
);
CREATE INDEX audit_by_at ON audit (at);
CREATE INDEX audit_by_interaction ON audit (interaction_id);

CREATE TABLE kv (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
