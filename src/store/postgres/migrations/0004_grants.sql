-- Grants ("allow this and similar calls"), kept until revoked or expired, read by every
-- replica. `doc` is the grant as JSON; the times are unix milliseconds.

CREATE TABLE grants (
    id         text COLLATE "C" PRIMARY KEY,
    created_at bigint NOT NULL,
    expires_at bigint,
    revoked_at bigint,
    doc        json NOT NULL
);
CREATE INDEX grants_in_force ON grants (created_at) WHERE revoked_at IS NULL;
