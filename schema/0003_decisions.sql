-- 0003: signed decisions and session grants (DESIGN §3-4), the signature that lets a credential
-- run with less than per-action approval, and the pause switch lives in `meta` (key 'paused').
-- Never edit this file after it lands; add a new numbered file instead.

CREATE TABLE decisions (
    id         TEXT PRIMARY KEY,                   -- dec_<hex>
    action_id  TEXT NOT NULL,
    decision   TEXT NOT NULL CHECK (decision IN ('approve', 'deny')),
    nonce      TEXT NOT NULL UNIQUE,               -- single use
    payload    TEXT NOT NULL,                      -- canonical JSON that was signed
    signature  TEXT NOT NULL,                      -- ed25519 by the approver key, hex
    created_at TEXT NOT NULL,
    used_at    TEXT                                -- set when a dispatch consumed it
) STRICT;
CREATE INDEX decisions_action ON decisions (action_id);

CREATE TABLE grants (
    id                 TEXT PRIMARY KEY,           -- grt_<hex>: "approve for this session"
    session_id         TEXT NOT NULL,
    credential_id      TEXT NOT NULL,
    credential_version INTEGER NOT NULL,
    nonce              TEXT NOT NULL UNIQUE,
    payload            TEXT NOT NULL,
    signature          TEXT NOT NULL,
    expires_at         TEXT NOT NULL,
    created_at         TEXT NOT NULL
) STRICT;
CREATE INDEX grants_session ON grants (session_id, credential_id);

-- A credential whose approval is not 'each' must carry the approver's signature over its id,
-- version, approval and target; without a valid one it is treated as 'each'.
ALTER TABLE credentials ADD COLUMN policy_sig TEXT;
