-- Leases: one process at a time holds each (e.g. the one that polls Telegram). A holder
-- renews its lease well before `until`; another process takes it once `until` has passed.
-- Times are the database server's clock, so replicas' clocks do not matter here.

CREATE TABLE leases (
    name   text COLLATE "C" PRIMARY KEY,
    holder text NOT NULL,
    until  bigint NOT NULL
);
