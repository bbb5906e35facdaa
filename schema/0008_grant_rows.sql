-- 0008: session grants that cover what the card said (issue 30). A grant is journaled when it is
-- recorded (`grant.add`: its id, session, scope and expiry) and when it is revoked
-- (`grant.revoke`, by the approver's signed revocation); the agent reads both before a grant
-- covers a call, and counts a grant's uses from the `action.dispatched` rows whose basis names
-- it. Three partial indexes hold only those rows, so an ordinary call writes no page more:
-- * `audit_grant`: a grant's add and revoke rows, by grant id (asked at every call a grant may
--   cover, and by `vault grants`);
-- * `audit_grant_revoke_nonce`: a revocation is single use by its nonce;
-- * `audit_dispatch_grant`: the dispatches on a grant, for its uses so far.
-- Each query repeats its index's condition exactly, which is how SQLite knows it may use it (a
-- test asks SQLite for the plans). The `grants` table is unchanged: a grant signed before this
-- (payload version 2, no scope) no longer opens, so it covers nothing.
-- Never edit this file after it lands; add a new numbered file instead.

CREATE INDEX audit_grant ON audit (json_extract(body, '$.grant'))
    WHERE kind IN ('grant.add', 'grant.revoke');
CREATE INDEX audit_grant_revoke_nonce ON audit (json_extract(body, '$.nonce'))
    WHERE kind = 'grant.revoke';
CREATE INDEX audit_dispatch_grant ON audit (json_extract(body, '$.basis.grant'))
    WHERE kind = 'action.dispatched' AND json_extract(body, '$.basis.grant') IS NOT NULL;
