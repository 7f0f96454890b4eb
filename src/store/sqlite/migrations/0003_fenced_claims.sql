-- 3: fenced outbox claims, claims per channel, and the audit chain's recorded head.
ALTER TABLE outbox ADD COLUMN lease_token INTEGER NOT NULL DEFAULT 0;
DROP INDEX outbox_due;
CREATE INDEX outbox_due_by_channel ON outbox (channel, next_at) WHERE state = 'pending';
CREATE INDEX outbox_leased ON outbox (channel, lease_until)
    WHERE state = 'pending' AND lease_until IS NOT NULL;
INSERT OR IGNORE INTO kv (key, value)
    SELECT 'audit.head', seq || ':' || hash FROM audit ORDER BY seq DESC LIMIT 1;
