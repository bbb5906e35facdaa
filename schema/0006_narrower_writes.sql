-- 0006: fewer pages written per action. Every journal row and every new action updated each
-- index of its table, and each page an update touches is encrypted, MACed and written at commit
-- (an auto-approved call writes three journal rows and one action).
-- * `audit_action` (action_id) is the prefix of `audit_action_seq` (action_id, seq), which
--   serves every lookup by action.
-- * `audit_kind` (kind, seq) put every row in a second place by kind, and three rows of one
--   action in three places, but only two questions are asked by kind: the last pause or resume,
--   and a credential's changes. Each gets a partial index holding only its rare rows; the query
--   text repeats the index's condition exactly, which is how SQLite knows it may use it (a test
--   asks SQLite for each query's plan).
-- * No query reads actions by profile; `list_actions` reads a session's actions newest first,
--   which had no index and walked the whole table.
-- Never edit this file after it lands; add a new numbered file instead.

DROP INDEX audit_action;
DROP INDEX audit_kind;
CREATE INDEX audit_pause ON audit (seq) WHERE kind IN ('vault.pause', 'vault.resume');
CREATE INDEX audit_credential_changes ON audit (seq)
    WHERE kind IN ('credential.add', 'credential.edit');
DROP INDEX actions_profile_created;
CREATE INDEX actions_session_created ON actions (session_id, created_at);
