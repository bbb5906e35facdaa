-- 0004: indexes that let the vault decide from the journal itself, not from mutable columns
-- (a decision nonce is single use when no `action.dispatched` row names it; the pause switch is
-- the last `vault.pause` / `vault.resume` row; an action's state is its last `action.*` row).
-- Indexes are derived from the rows, so they add no state anyone could edit on its own.
-- Never edit this file after it lands; add a new numbered file instead.

CREATE INDEX audit_kind ON audit (kind, seq);
CREATE INDEX audit_action_seq ON audit (action_id, seq) WHERE action_id IS NOT NULL;
CREATE INDEX audit_dispatch_nonce ON audit (json_extract(body, '$.basis.nonce'))
    WHERE kind = 'action.dispatched';
