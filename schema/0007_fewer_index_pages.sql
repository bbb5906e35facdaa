-- 0007: two journal indexes hold only the rows their one question asks for, so an auto-approved
-- call writes three pages fewer (each page a commit touches is encrypted, MACed and written as a
-- WAL frame: ARCHITECTURE.md, "What a call costs").
-- * `audit_session` put every row of a session in a second place, but only one query reads it:
--   a session's `session.start` row, for the approval card. `audit_session_start` holds only
--   those rows, so an action's rows no longer touch it (one page in each of a call's commits).
-- * `audit_dispatch_nonce` took an entry, with a NULL key, for every dispatch, though only a
--   dispatch on a signed decision names a nonce; one by a policy or a session grant takes none.
-- Each query repeats its index's condition exactly, which is how SQLite knows it may use it (a
-- test asks SQLite for the plans).
-- Never edit this file after it lands; add a new numbered file instead.

DROP INDEX audit_session;
CREATE INDEX audit_session_start ON audit (session_id) WHERE kind = 'session.start';
DROP INDEX audit_dispatch_nonce;
CREATE INDEX audit_dispatch_nonce ON audit (json_extract(body, '$.basis.nonce'))
    WHERE kind = 'action.dispatched' AND json_extract(body, '$.basis.nonce') IS NOT NULL;
