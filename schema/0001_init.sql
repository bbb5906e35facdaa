-- 0001: the vault's metadata, its credentials, and the hash-chained audit journal.
-- Never edit this file after it lands; add 0002_*.sql instead.

CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) STRICT;

CREATE TABLE credentials (
    id         TEXT PRIMARY KEY,                 -- cred_<hex>, never reused
    profile    TEXT NOT NULL,
    name       TEXT NOT NULL,
    kind       TEXT NOT NULL CHECK (kind IN ('http', 'ssh')),
    version    INTEGER NOT NULL CHECK (version >= 1),
    approval   TEXT NOT NULL CHECK (approval IN ('each', 'session', 'writes', 'never')),
    target     TEXT NOT NULL,                    -- JSON: binding and injection; never the secret
    secret     BLOB NOT NULL,                    -- the secret itself (the file is SQLCipher-encrypted)
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (profile, name)
) STRICT;

CREATE TABLE audit (
    seq        INTEGER PRIMARY KEY CHECK (seq >= 1),
    ts         TEXT NOT NULL,                    -- UTC, milliseconds, 'Z'
    kind       TEXT NOT NULL,
    session_id TEXT,
    action_id  TEXT,
    body       TEXT NOT NULL,                    -- canonical JSON, never a secret
    prev       BLOB NOT NULL CHECK (length(prev) = 32),
    hash       BLOB NOT NULL CHECK (length(hash) = 32)
) STRICT;

CREATE INDEX audit_session ON audit (session_id) WHERE session_id IS NOT NULL;
CREATE INDEX audit_action ON audit (action_id) WHERE action_id IS NOT NULL;

-- The journal is append-only through this program. (Someone holding the key can drop these
-- triggers; `vault verify` catches what they then change.)
CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
BEGIN SELECT RAISE(ABORT, 'audit rows are append-only'); END;
CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
BEGIN SELECT RAISE(ABORT, 'audit rows are append-only'); END;
