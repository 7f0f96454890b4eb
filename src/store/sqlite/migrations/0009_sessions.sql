-- 9: agent sessions, one row each (the agent and its session id name it). `doc` is the
-- session as JSON; `last_activity` (unix milliseconds) orders them and decides which go
-- first, past the retention or past the bound on how many are kept.
CREATE TABLE IF NOT EXISTS sessions (
    agent         TEXT NOT NULL,
    id            TEXT NOT NULL,
    last_activity INTEGER NOT NULL,
    doc           TEXT NOT NULL,
    PRIMARY KEY (agent, id)
);
CREATE INDEX IF NOT EXISTS sessions_by_activity ON sessions (last_activity);
