-- Agent sessions, one row each (the agent and its session id name it), shared by every
-- replica. `doc` is the session as JSON; `last_activity` (unix milliseconds) orders them and
-- decides which go first, past the retention or past the bound on how many are kept. A
-- session is changed under a lock on its row, so replicas' changes come one after the other.

CREATE TABLE sessions (
    agent         text COLLATE "C" NOT NULL,
    id            text COLLATE "C" NOT NULL,
    last_activity bigint NOT NULL,
    doc           json NOT NULL,
    PRIMARY KEY (agent, id)
);
CREATE INDEX sessions_by_activity ON sessions (last_activity);
