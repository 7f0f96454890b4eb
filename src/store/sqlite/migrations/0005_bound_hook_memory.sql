-- 5: the Claude Code hook's memory of the latest generation of each derived id moves
-- under the prefix of values bound to an interaction (`bound:`, see
-- `store::BOUND_VALUE_PREFIX`), holding that generation's id, so pruning removes it with
-- the interaction instead of keeping one entry per command ever seen.
INSERT OR REPLACE INTO kv (key, value)
    SELECT 'bound:hooks.claude_code.latest:' || substr(key, 30),
           CASE value WHEN '1' THEN substr(key, 30) ELSE substr(key, 30) || '.' || value END
    FROM kv WHERE substr(key, 1, 29) = 'hooks.claude_code.generation:';
DELETE FROM kv WHERE substr(key, 1, 29) = 'hooks.claude_code.generation:';
