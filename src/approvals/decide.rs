//! The person's side: signed decisions (approve once, approve for the session, deny) and the
//! pause switch. Everything here needs the approver key, i.e. the passphrase — except `pause`,
//! which anyone may pull.
use super::signing::{self, DECISION, GRANT};
use super::{journal, load, Action, ApprovalError, State};
use crate::audit;
use crate::keys::ApproverKey;
use crate::store::{get_meta, set_meta, Store, StoreError};
use rusqlite::params;
use serde_json::json;
use std::time::Duration;

/// What the person decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Approve,
    /// Approve, and let this session use the same credential without asking until the grant ends.
    ApproveSession,
    Deny(Option<String>),
}

/// Signs and records a decision on a pending action, and moves it to `approved` or `denied`.
pub fn decide(
    store: &mut Store,
    key: &ApproverKey,
    action_id: &str,
    verdict: Verdict,
    grant_ttl: Duration,
) -> Result<Action, ApprovalError> {
    let public = signing::approver_public_key(store.conn())?;
    if public != key.public() {
        return Err(ApprovalError::WrongApprover);
    }
    let vault_id = get_meta(store.conn(), "vault_id")?.unwrap_or_default();
    let now = jiff::Timestamp::now();
    let tx = store.write()?;
    let action = load(&tx, action_id)?;
    if action.state != State::Pending {
        return Err(ApprovalError::NotPending {
            id: action.id,
            state: action.state,
        });
    }
    if action
        .expires_at
        .parse::<jiff::Timestamp>()
        .is_ok_and(|t| t <= now)
    {
        tx.execute(
            "UPDATE actions SET state = 'expired', updated_at = ?2 WHERE id = ?1",
            params![action.id, crate::time::format_utc(now)],
        )?;
        let expired = load(&tx, action_id)?;
        journal(&tx, &expired, Some("nobody decided before it expired"))?;
        tx.commit().map_err(StoreError::from)?;
        return Err(ApprovalError::NotPending {
            id: expired.id,
            state: State::Expired,
        });
    }
    let (decision, reason) = match &verdict {
        Verdict::Approve | Verdict::ApproveSession => ("approve", None),
        Verdict::Deny(r) => ("deny", r.clone()),
    };
    let nonce = random_hex();
    let issued = crate::time::format_utc(now);
    let payload = json!({
        "v": 1, "vault_id": vault_id, "action_id": action.id, "action_hash": action.action_hash,
        "decision": decision, "reason": reason, "expires_at": action.expires_at, "nonce": nonce, "issued_at": issued,
    });
    let (text, sig) = signing::sign(key, DECISION, &payload);
    let decision_id = crate::credentials::new_id("dec");
    tx.execute(
        "INSERT INTO decisions (id, action_id, decision, nonce, payload, signature, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![decision_id, action.id, decision, nonce, text, sig, issued],
    )?;
    if verdict == Verdict::ApproveSession {
        let expires = crate::time::format_utc(now + grant_ttl);
        let gnonce = random_hex();
        let gpayload = json!({
            "v": 1, "vault_id": vault_id, "session_id": action.session_id, "credential_id": action.credential_id,
            "credential_version": action.credential_version, "expires_at": expires, "nonce": gnonce,
        });
        let (gtext, gsig) = signing::sign(key, GRANT, &gpayload);
        tx.execute(
            "INSERT INTO grants (id, session_id, credential_id, credential_version, nonce, payload, signature, expires_at, created_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            params![crate::credentials::new_id("grt"), action.session_id, action.credential_id, action.credential_version, gnonce, gtext, gsig, expires, issued],
        )?;
    }
    let state = if decision == "approve" {
        State::Approved
    } else {
        State::Denied
    };
    tx.execute(
        "UPDATE actions SET state = ?2, updated_at = ?3, reason = ?4 WHERE id = ?1",
        params![action.id, state.as_str(), issued, reason],
    )?;
    let decided = load(&tx, action_id)?;
    let note = match &verdict {
        Verdict::Approve => "approved once".to_owned(),
        Verdict::ApproveSession => format!("approved for this session ({}s)", grant_ttl.as_secs()),
        Verdict::Deny(r) => format!(
            "denied{}",
            r.as_ref().map(|r| format!(": {r}")).unwrap_or_default()
        ),
    };
    journal(&tx, &decided, Some(&note))?;
    tx.commit().map_err(StoreError::from)?;
    Ok(decided)
}

fn random_hex() -> String {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).expect("the OS random number generator failed");
    hex::encode(b)
}

/// Whether the vault is paused, and why.
pub fn paused(conn: &rusqlite::Connection) -> Result<Option<String>, StoreError> {
    get_meta(conn, "paused")
}

/// `vault pause`: every tool call fails at once, and every pending action is denied.
pub fn pause(store: &mut Store, reason: &str) -> Result<usize, ApprovalError> {
    let tx = store.write()?;
    set_meta(&tx, "paused", reason)?;
    audit::append(&tx, "vault.pause", None, None, &json!({"reason": reason}))?;
    let ids: Vec<String> = tx
        .prepare("SELECT id FROM actions WHERE state IN ('pending', 'received', 'approved')")?
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    let why = format!("the vault was paused: {reason}");
    for id in &ids {
        tx.execute(
            "UPDATE actions SET state = 'denied', updated_at = ?2, reason = ?3 WHERE id = ?1",
            params![id, crate::time::now_utc(), why],
        )?;
        let a = load(&tx, id)?;
        journal(&tx, &a, Some(&why))?;
    }
    tx.commit().map_err(StoreError::from)?;
    Ok(ids.len())
}

/// `vault resume`: needs the approver key, so an agent cannot lift the switch.
pub fn resume(store: &mut Store, key: &ApproverKey) -> Result<bool, ApprovalError> {
    if signing::approver_public_key(store.conn())? != key.public() {
        return Err(ApprovalError::WrongApprover);
    }
    let tx = store.write()?;
    let was = tx.execute("DELETE FROM meta WHERE key = 'paused'", [])? > 0;
    if was {
        audit::append(&tx, "vault.resume", None, None, &json!({}))?;
    }
    tx.commit().map_err(StoreError::from)?;
    Ok(was)
}
