//! Actions and their lifecycle (DESIGN §4): submitting a validated request as a pending action
//! (with idempotency), reading, listing, withdrawing and expiring actions. Every transition is one
//! `action.<state>` journal row in the same transaction as the state change. Nothing here executes.
mod authorized;
mod decide;
mod dispatch;
pub mod signing;
mod state;

pub use authorized::AuthorizedAction;
pub use decide::{decide, pause, paused, resume, Verdict};
pub use dispatch::{claim, effective_approval, finish, gate, reap_orphans, Claim};
pub use state::State;

use crate::audit;
use crate::credentials::Credential;
use crate::policy::{action_hash, ValidatedRequest};
use crate::store::{Store, StoreError};
use rusqlite::{params, OptionalExtension, Row, Transaction};
use serde_json::{json, Value};
use std::time::Duration;

/// Errors of the action service.
#[derive(Debug, thiserror::Error)]
pub enum ApprovalError {
    #[error("no action {0} in this profile")]
    NotFound(String),
    #[error("action {id} is {state}, not pending")]
    NotPending { id: String, state: State },
    #[error("this passphrase unlocks a different approver key than the one this vault was created with; use the vault's own vault.key.age")]
    WrongApprover,
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Audit(#[from] audit::AuditError),
}

impl From<rusqlite::Error> for ApprovalError {
    fn from(e: rusqlite::Error) -> Self {
        ApprovalError::Store(StoreError::Sql(e))
    }
}

/// An action as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Action {
    pub id: String,
    pub session_id: String,
    pub client: String,
    pub profile: String,
    pub tool: String,
    pub credential_id: String,
    pub credential_name: String,
    pub credential_version: i64,
    pub state: State,
    pub summary: String,
    pub action_hash: String,
    pub created_at: String,
    pub updated_at: String,
    pub expires_at: String,
    pub reason: Option<String>,
    pub result: Option<Value>,
}

const COLUMNS: &str = "id, session_id, client, profile, tool, credential_id, credential_name, credential_version, \
                       state, summary, action_hash, created_at, updated_at, expires_at, reason, result";

fn from_row(r: &Row<'_>) -> rusqlite::Result<Action> {
    let state: String = r.get(8)?;
    let result: Option<String> = r.get(15)?;
    Ok(Action {
        id: r.get(0)?,
        session_id: r.get(1)?,
        client: r.get(2)?,
        profile: r.get(3)?,
        tool: r.get(4)?,
        credential_id: r.get(5)?,
        credential_name: r.get(6)?,
        credential_version: r.get(7)?,
        state: State::parse(&state).unwrap_or(State::Indeterminate),
        summary: r.get(9)?,
        action_hash: r.get(10)?,
        created_at: r.get(11)?,
        updated_at: r.get(12)?,
        expires_at: r.get(13)?,
        reason: r.get(14)?,
        result: result.and_then(|s| serde_json::from_str(&s).ok()),
    })
}

/// Who asks, and for what.
#[derive(Debug)]
pub struct Submission<'a> {
    pub session_id: &'a str,
    pub client: &'a str,
    pub profile: &'a str,
    pub credential: &'a Credential,
    pub request: &'a ValidatedRequest,
    pub idempotency_key: Option<&'a str>,
    pub expiry: Duration,
    pub replay_window: Duration,
}

/// What `submit` did.
#[derive(Debug, Clone, PartialEq)]
pub enum Submitted {
    /// A new action: `pending` (one approval card) or `received` (its policy needs none).
    Created(Action),
    /// The same call is already waiting or running: that action, no second card.
    Existing(Action),
    /// The same call completed within the replay window: its stored result, nothing runs.
    Replayed(Action),
}

/// Queues a validated request as a pending action, unless the same client already asked for the
/// same thing (same tool, canonical arguments and idempotency key).
pub fn submit(store: &mut Store, s: Submission<'_>) -> Result<Submitted, ApprovalError> {
    let normalized = s.request.normalized(s.credential);
    let hash = action_hash(&normalized);
    let fingerprint = blake3::hash(
        crate::canonical::to_string(&json!({
            "client": s.client, "profile": s.profile, "tool": s.request.tool(),
            "action": normalized, "idempotency_key": s.idempotency_key,
        }))
        .as_bytes(),
    )
    .to_hex()
    .to_string();
    let now = jiff::Timestamp::now();
    let tx = store.write()?;
    let previous = tx
        .query_row(
            &format!("SELECT {COLUMNS} FROM actions WHERE fingerprint = ?1 ORDER BY created_at DESC LIMIT 1"),
            [&fingerprint],
            from_row,
        )
        .optional()?;
    if let Some(prev) = previous {
        if !prev.state.is_terminal() {
            return Ok(Submitted::Existing(prev));
        }
        let fresh = prev
            .updated_at
            .parse::<jiff::Timestamp>()
            .is_ok_and(|t| now.duration_since(t).as_secs_f64() <= s.replay_window.as_secs_f64());
        if prev.state == State::Completed && fresh {
            return Ok(Submitted::Replayed(prev));
        }
    }
    let sig = crate::store::CredentialRow::policy_sig(&tx, &s.credential.id)?;
    let initial = gate(&tx, s.credential, sig.as_deref(), s.request, s.session_id)?;
    let id = crate::credentials::new_id("act");
    let created = crate::time::format_utc(now);
    let expires = crate::time::format_utc(now + s.expiry);
    let summary = s.request.summary(&s.credential.name);
    tx.execute(
        "INSERT INTO actions (id, session_id, client, profile, tool, credential_id, credential_name, credential_version, \
         state, summary, normalized, action_hash, body, fingerprint, idempotency_key, owner_pid, created_at, updated_at, expires_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?18, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?16, ?17)",
        params![
            id, s.session_id, s.client, s.profile, s.request.tool(), s.credential.id, s.credential.name,
            s.credential.version, summary, crate::canonical::to_string(&normalized), hash, s.request.body(),
            fingerprint, s.idempotency_key, std::process::id(), created, expires, initial.as_str()
        ],
    )?;
    let action = load(&tx, &id)?;
    journal(&tx, &action, None)?;
    tx.commit().map_err(StoreError::from)?;
    Ok(Submitted::Created(action))
}

fn load(tx: &rusqlite::Connection, id: &str) -> Result<Action, ApprovalError> {
    tx.query_row(
        &format!("SELECT {COLUMNS} FROM actions WHERE id = ?1"),
        [id],
        from_row,
    )
    .optional()?
    .ok_or_else(|| ApprovalError::NotFound(id.to_owned()))
}

/// One `action.<state>` journal row for the action's current state.
fn journal(tx: &Transaction<'_>, a: &Action, reason: Option<&str>) -> Result<(), ApprovalError> {
    let mut body = json!({
        "state": a.state.as_str(), "tool": a.tool, "credential": a.credential_name,
        "summary": a.summary, "hash": a.action_hash,
    });
    if let Some(r) = reason {
        body["reason"] = json!(r);
    }
    audit::append(
        tx,
        &format!("action.{}", a.state.as_str()),
        Some(&a.session_id),
        Some(&a.id),
        &body,
    )?;
    Ok(())
}

/// Moves an action from one of `from` to `to`, with its journal row; returns the updated action.
fn transition(
    store: &mut Store,
    id: &str,
    from: &[State],
    to: State,
    reason: Option<&str>,
) -> Result<Action, ApprovalError> {
    let tx = store.write()?;
    let current = load(&tx, id)?;
    if !from.contains(&current.state) {
        return Err(ApprovalError::NotPending {
            id: id.to_owned(),
            state: current.state,
        });
    }
    tx.execute(
        "UPDATE actions SET state = ?2, updated_at = ?3, reason = coalesce(?4, reason) WHERE id = ?1",
        params![id, to.as_str(), crate::time::now_utc(), reason],
    )?;
    let action = load(&tx, id)?;
    journal(&tx, &action, reason)?;
    tx.commit().map_err(StoreError::from)?;
    Ok(action)
}

/// An action of `profile` by id (another profile's action is `NotFound`).
pub fn get(store: &Store, profile: &str, id: &str) -> Result<Action, ApprovalError> {
    store
        .conn()
        .query_row(
            &format!("SELECT {COLUMNS} FROM actions WHERE id = ?1 AND profile = ?2"),
            [id, profile],
            from_row,
        )
        .optional()?
        .ok_or_else(|| ApprovalError::NotFound(id.to_owned()))
}

/// The newest actions of `profile` (and `client`, when given).
pub fn list_recent(
    store: &Store,
    profile: &str,
    client: Option<&str>,
    limit: u32,
) -> Result<Vec<Action>, ApprovalError> {
    let mut stmt = store.conn().prepare_cached(&format!(
        "SELECT {COLUMNS} FROM actions WHERE profile = ?1 AND (?2 IS NULL OR client = ?2) ORDER BY created_at DESC, rowid DESC LIMIT ?3"
    ))?;
    let rows = stmt.query_map(params![profile, client, limit], from_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Every action still waiting for a person.
pub fn list_pending(store: &Store) -> Result<Vec<Action>, ApprovalError> {
    let mut stmt = store.conn().prepare_cached(&format!(
        "SELECT {COLUMNS} FROM actions WHERE state = 'pending' ORDER BY created_at"
    ))?;
    let rows = stmt.query_map([], from_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Withdraws a pending action of `profile` (the client cancelled or went away).
pub fn withdraw(
    store: &mut Store,
    profile: &str,
    id: &str,
    reason: &str,
) -> Result<Action, ApprovalError> {
    get(store, profile, id)?;
    transition(store, id, &[State::Pending], State::Withdrawn, Some(reason))
}

/// Withdraws every pending action a session asked for (stdin EOF, shutdown). Returns how many.
pub fn withdraw_session(
    store: &mut Store,
    session_id: &str,
    reason: &str,
) -> Result<usize, ApprovalError> {
    let ids: Vec<String> = store
        .conn()
        .prepare("SELECT id FROM actions WHERE session_id = ?1 AND state = 'pending'")?
        .query_map([session_id], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    let mut n = 0;
    for id in ids {
        if transition(
            store,
            &id,
            &[State::Pending],
            State::Withdrawn,
            Some(reason),
        )
        .is_ok()
        {
            n += 1;
        }
    }
    Ok(n)
}

/// Marks pending actions past their expiry as `expired`. Returns them.
pub fn expire_due(store: &mut Store) -> Result<Vec<Action>, ApprovalError> {
    let now = crate::time::now_utc();
    let ids: Vec<String> = store
        .conn()
        .prepare_cached("SELECT id FROM actions WHERE state = 'pending' AND expires_at <= ?1")?
        .query_map([&now], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    let mut out = Vec::new();
    for id in ids {
        if let Ok(a) = transition(
            store,
            &id,
            &[State::Pending],
            State::Expired,
            Some("nobody decided before it expired"),
        ) {
            out.push(a);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
