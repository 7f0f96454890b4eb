-- 7: the agent token a session grant is bound to (`token:` and the start of its SHA-256, or
-- `local`; also in `doc`): another token naming the same session id is not allowed by it.
-- Session grants recorded before owners were cannot be bound to one: they run out now.
ALTER TABLE grants ADD COLUMN owner TEXT;
UPDATE grants SET expires_at = CAST(strftime('%s', 'now') AS INTEGER) * 1000
 WHERE revoked_at IS NULL AND expires_at IS NOT NULL
   AND expires_at > CAST(strftime('%s', 'now') AS INTEGER) * 1000;
