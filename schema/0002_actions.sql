-- 0002: actions the agent asked for, and their lifecycle (DESIGN §4).
-- Never edit this file after it lands; add a new numbered file instead.

CREATE TABLE actions (
    id                 TEXT PRIMARY KEY,           -- act_<hex>
    session_id         TEXT NOT NULL,              -- the `vault mcp` session that asked
    client             TEXT NOT NULL,              -- client name from initialize / _meta clientInfo
    profile            TEXT NOT NULL,
    tool               TEXT NOT NULL CHECK (tool IN ('http_request', 'ssh_exec')),
    credential_id      TEXT NOT NULL,
    credential_name    TEXT NOT NULL,
    credential_version INTEGER NOT NULL,
    state              TEXT NOT NULL CHECK (state IN ('received', 'pending', 'approved', 'denied',
                           'expired', 'withdrawn', 'dispatched', 'completed', 'failed_before_send',
                           'indeterminate')),
    summary            TEXT NOT NULL,              -- server-written, shown to the approver
    normalized         TEXT NOT NULL,              -- canonical JSON of the normalized action
    action_hash        TEXT NOT NULL,              -- blake3 hex of `normalized`
    body               BLOB,                       -- request body the agent supplied (not a secret)
    fingerprint        TEXT NOT NULL,              -- idempotency: client + tool + canonical arguments
    idempotency_key    TEXT,
    owner_pid          INTEGER NOT NULL,           -- the process that dispatches it
    created_at         TEXT NOT NULL,
    updated_at         TEXT NOT NULL,
    expires_at         TEXT NOT NULL,
    reason             TEXT,                       -- denial reason or failure cause, for the agent
    result             TEXT                        -- scrubbed result JSON once finished
) STRICT;

CREATE INDEX actions_state ON actions (state);
CREATE INDEX actions_profile_created ON actions (profile, created_at);
CREATE INDEX actions_fingerprint ON actions (fingerprint);
