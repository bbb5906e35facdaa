-- 0005: the card asks, for every pending action, which version of its credential the person last
-- approved an action of (services/changes.rs). Without this index that read walked every
-- `action.approved` journal row, a cost that grows with the vault's whole history.
-- Never edit this file after it lands; add a new numbered file instead.

CREATE INDEX actions_credential ON actions (credential_id, credential_version);
