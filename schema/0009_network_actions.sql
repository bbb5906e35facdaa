-- `vault run`'s network (docs/design.md §8): a CONNECT to a host the sandbox may not reach yet
-- waits as an action of a third kind, `network`, whose normalized form names the host and port.
-- It uses no credential: credential_id and credential_name are '' and credential_version 0.
-- SQLite cannot change a CHECK constraint in place, so the table is rebuilt, same columns in the
-- same order, and its indexes made again (nothing references it).
CREATE TABLE actions_new (
    id                 TEXT PRIMARY KEY,
    session_id         TEXT NOT NULL,
    client             TEXT NOT NULL,
    profile            TEXT NOT NULL,
    tool               TEXT NOT NULL CHECK (tool IN ('http_request', 'ssh_exec', 'network')),
    credential_id      TEXT NOT NULL,
    credential_name    TEXT NOT NULL,
    credential_version INTEGER NOT NULL,
    state              TEXT NOT NULL CHECK (state IN ('received', 'pending', 'approved', 'denied',
                           'expired', 'withdrawn', 'dispatched', 'completed', 'failed_before_send',
                           'indeterminate')),
    summary            TEXT NOT NULL,
    normalized         TEXT NOT NULL,
    action_hash        TEXT NOT NULL,
    body               BLOB,
    fingerprint        TEXT NOT NULL,
    idempotency_key    TEXT,
    owner_pid          INTEGER NOT NULL,
    created_at         TEXT NOT NULL,
    updated_at         TEXT NOT NULL,
    expires_at         TEXT NOT NULL,
    reason             TEXT,
    result             TEXT
) STRICT;
INSERT INTO actions_new SELECT * FROM actions;
DROP TABLE actions;
ALTER TABLE actions_new RENAME TO actions;
CREATE INDEX actions_state ON actions (state);
CREATE INDEX actions_fingerprint ON actions (fingerprint);
CREATE INDEX actions_credential ON actions (credential_id, credential_version);
CREATE INDEX actions_session_created ON actions (session_id, created_at);
