-- imrelay's tables in PostgreSQL: the SQLite schema (versions 1 to 5) in one step.
--
-- Runs with `search_path` set to the configured schema, so names are unqualified here.
-- Times are unix milliseconds in bigint columns, as in SQLite: the audit chain hashes
-- milliseconds, and listing cursors compare them. Keys and ids sort bytewise (COLLATE "C"),
-- as in SQLite and the memory store, so pages and prefix searches agree across backends.
-- Documents are `json` (not `jsonb`): a tool input keeps the key order the agent sent.

CREATE TABLE interactions (
    id          text COLLATE "C" PRIMARY KEY,
    created_at  bigint NOT NULL,
    deadline    bigint NOT NULL,
    status      text NOT NULL CHECK (status IN ('pending', 'resolved')),
    resolved_at bigint,
    doc         json NOT NULL,
    resolution  json
);
CREATE INDEX interactions_by_created ON interactions (created_at, id);
CREATE INDEX interactions_by_status ON interactions (status, created_at, id);
CREATE INDEX interactions_by_resolved ON interactions (resolved_at) WHERE resolved_at IS NOT NULL;

CREATE TABLE channel_messages (
    channel        text COLLATE "C" NOT NULL,
    address        text COLLATE "C" NOT NULL,
    message_ref    text COLLATE "C" NOT NULL,
    interaction_id text COLLATE "C" NOT NULL,
    state          json,
    created_at     bigint NOT NULL,
    PRIMARY KEY (channel, address, message_ref)
);
CREATE INDEX channel_messages_by_interaction ON channel_messages (interaction_id, channel);

-- Claims take due rows with FOR UPDATE SKIP LOCKED; `lease_token` fences results: only the
-- newest claim of a job records how it ended.
CREATE TABLE outbox (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    key            text COLLATE "C" NOT NULL UNIQUE,
    channel        text COLLATE "C" NOT NULL,
    kind           text NOT NULL,
    interaction_id text COLLATE "C",
    payload        json NOT NULL,
    attempts       integer NOT NULL DEFAULT 0,
    next_at        bigint NOT NULL,
    horizon_at     bigint NOT NULL,
    lease_until    bigint,
    lease_token    bigint NOT NULL DEFAULT 0,
    state          text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'done', 'failed')),
    last_error     text,
    created_at     bigint NOT NULL,
    updated_at     bigint NOT NULL
);
CREATE INDEX outbox_due_by_channel ON outbox (channel, next_at) WHERE state = 'pending';
CREATE INDEX outbox_leased ON outbox (channel, lease_until)
    WHERE state = 'pending' AND lease_until IS NOT NULL;
CREATE INDEX outbox_finished ON outbox (updated_at) WHERE state <> 'pending';

CREATE TABLE secrets (
    name  text COLLATE "C" PRIMARY KEY,
    value bytea NOT NULL
);

CREATE TABLE seen (
    scope      text COLLATE "C" NOT NULL,
    key        text COLLATE "C" NOT NULL,
    expires_at bigint NOT NULL,
    PRIMARY KEY (scope, key)
);
CREATE INDEX seen_by_expiry ON seen (expires_at);

-- The hash-chained audit trail; its head (`audit.head`) is a row of kv, moved by every
-- append in the same transaction.
CREATE TABLE audit (
    seq            bigint PRIMARY KEY,
    at             bigint NOT NULL,
    action         text NOT NULL,
    interaction_id text,
    actor          text,
    channel        text NOT NULL,
    outcome        text NOT NULL,
    input_hash     text,
    detail         text,
    prev_hash      text NOT NULL,
    hash           text NOT NULL
);
CREATE INDEX audit_by_at ON audit (at);

CREATE TABLE kv (
    key   text COLLATE "C" PRIMARY KEY,
    value text NOT NULL
);
