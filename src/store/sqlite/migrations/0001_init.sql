-- 1: interactions, channel bookkeeping, outbox, server secrets, deduplication keys.
CREATE TABLE interactions (
    id          TEXT PRIMARY KEY,
    created_at  INTEGER NOT NULL,
    deadline    INTEGER NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('pending', 'resolved')),
    resolved_at INTEGER,
    doc         TEXT NOT NULL,
    resolution  TEXT
);
CREATE INDEX interactions_by_created ON interactions (created_at, id);
CREATE INDEX interactions_by_status ON interactions (status, created_at, id);
CREATE INDEX interactions_by_resolved ON interactions (resolved_at) WHERE resolved_at IS NOT NULL;

CREATE TABLE channel_messages (
    channel        TEXT NOT NULL,
    address        TEXT NOT NULL,
    message_ref    TEXT NOT NULL,
    interaction_id TEXT NOT NULL,
    state          TEXT,
    created_at     INTEGER NOT NULL,
    PRIMARY KEY (channel, address, message_ref)
);
CREATE INDEX channel_messages_by_interaction ON channel_messages (interaction_id, channel);

CREATE TABLE outbox (
    id             INTEGER PRIMARY KEY,
    key            TEXT NOT NULL UNIQUE,
    channel        TEXT NOT NULL,
    kind           TEXT NOT NULL,
    interaction_id TEXT,
    payload        TEXT NOT NULL,
    attempts       INTEGER NOT NULL DEFAULT 0,
    next_at        INTEGER NOT NULL,
    horizon_at     INTEGER NOT NULL,
    lease_until    INTEGER,
    state          TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'done', 'failed')),
    last_error     TEXT,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL
);
CREATE INDEX outbox_due ON outbox (next_at) WHERE state = 'pending';
CREATE INDEX outbox_finished ON outbox (updated_at) WHERE state <> 'pending';

CREATE TABLE secrets (
    name  TEXT PRIMARY KEY,
    value BLOB NOT NULL
);

CREATE TABLE seen (
    scope      TEXT NOT NULL,
    key        TEXT NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (scope, key)
);
