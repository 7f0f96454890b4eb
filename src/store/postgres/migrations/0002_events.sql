-- The lifecycle events of every replica, in one order: what /v1/events serves on any of
-- them. An event's id is taken from `event_ids` under a transaction-level advisory lock held
-- until the commit, so ids are given in commit order: a reader that has seen id N has seen
-- every committed event below it. Each event keeps the interaction as it was then.

CREATE SEQUENCE event_ids AS bigint;

CREATE TABLE events (
    id             bigint PRIMARY KEY,
    at             bigint NOT NULL,
    kind           text NOT NULL CHECK (kind IN ('created', 'resolved')),
    interaction_id text COLLATE "C" NOT NULL,
    doc            json NOT NULL,
    resolution     json
);
CREATE INDEX events_by_at ON events (at);
