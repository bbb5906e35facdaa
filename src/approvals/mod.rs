//! Actions and their lifecycle (docs/design.md §4): submitting a validated request as a pending action
//! (with idempotency), reading, listing, withdrawing and expiring actions, all scoped to the
//! session that asked. Every state change goes through `transition`, which checks the move is
//! legal, updates the row and appends its `action.<state>` journal row in the same transaction,
//! and returns the new row. Nothing here executes.
mod authorized;
mod decide;
mod dispatch;
mod grants;
mod network;
mod pause;
pub mod pin;
pub mod signing;
mod state;
pub mod touch;

pub use authorized::{AuthorizedAction, FromOpenBao};
pub use decide::{decide, resume, sign_decision, sign_resume, SignedDecision, Verdict};
pub use dispatch::{claim, effective_approval, finish, gate, reap_orphans, Claim};
pub use grants::{list_grants, revoke_grants, sign_revocation};
pub use network::{
    allowed, set_allowed, sign_allowed, submit_network, summary as network_summary, NetworkAsk,
    TOOL as NETWORK,
};
pub use pause::{pause, paused};
pub use signing::{Signed, Trust};
pub use state::{State, Tone};

use crate::audit;
use crate::credentials::Credential;
use crate::policy::ValidatedRequest;
use crate::store::{Store, StoreError};
use crate::wire::journal::{ActionRow, Basis};
use crate::wire::ApprovalMethod;
use rusqlite::{params, Connection, OptionalExtension, Row};
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
    #[error("the signed decision was refused: {0}; run `vault approve` again")]
    BadDecision(String),
    #[error("this vault has no approval PIN yet, so nothing can be approved on a card; set one with `vault pin` (or start `vault approve`, which asks for one)")]
    NoPin,
    #[error("wrong approval PIN; nothing was approved ({left} more wrong in a row and the vault pauses)")]
    WrongPin { left: u32 },
    #[error("wrong approval PIN {0} times in a row: the vault is now paused, because something may be typing into the approver's terminal. Check what can reach that terminal (`vault doctor`), then `vault resume`")]
    PinLimit(u32),
    #[error("no session grant {0} is in force (it ended, was revoked, or never was); `vault grants` lists the active ones")]
    NoGrant(String),
    #[error("the grant revocation was refused: {0}; run `vault grants revoke` again")]
    BadRevocation(String),
    #[error("the key change was refused: {0}")]
    BadKeyChange(String),
    #[error("this credential's approvals need a touch of a registered security key, and none came with this one; nothing was approved. Approve in `vault approve` with the key plugged in")]
    NoTouch,
    #[error("the security-key touch was refused: {0}; nothing was approved. Approve again in `vault approve` and touch a registered key")]
    BadTouch(String),
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

pub use crate::wire::Action;

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
    /// Team mode: why the credential's secret could not be had from OpenBao. The action is
    /// recorded, then ends `failed_before_send` with this reason at once (nothing is sent).
    pub unresolved: Option<&'a str>,
}

/// What `submit` did.
#[derive(Debug, Clone, PartialEq)]
pub enum Submitted {
    /// A new action: `pending` (one approval card) or `received` (its policy needs none).
    Created(Action),
    /// The same call is already waiting or running: that action, no second card.
    Existing(Action),
    /// The same write (not a read: `policy::scope::is_read`) completed within the replay window:
    /// its stored result, nothing runs.
    Replayed(Action),
}

/// The latest action of a session with a given fingerprint (idempotency and replay). The
/// fingerprint names the session already; `+session_id` keeps that column a filter, so that the
/// lookup goes by `actions_fingerprint` (a few rows at most) and never walks the session's
/// actions newest first through `actions_session_created`, which the planner otherwise takes
/// for its order and which costs a row per earlier call of the session.
fn previous_call_sql() -> String {
    format!(
        "SELECT {COLUMNS} FROM actions WHERE fingerprint = ?1 AND +session_id = ?2 \
         ORDER BY created_at DESC LIMIT 1"
    )
}

/// Queues a validated request as a pending action, unless the same session already asked for the
/// same thing (same tool, canonical arguments and idempotency key) and it is still waiting or
/// running, or it is a write that completed within the replay window. A read (GET or HEAD with no
/// body, rewriting header or `_method`) is never replayed: a repeated read runs again (or waits
/// for a card again), so a model that polls sees fresh data. Idempotency is per session: another
/// session, whatever name its client gives, never sees or replays this one's actions.
pub fn submit(
    store: &mut Store,
    trust: &Trust,
    s: Submission<'_>,
) -> Result<Submitted, ApprovalError> {
    let normalized = s.request.normalized(s.credential);
    let normalized_text = crate::policy::canonical_text(&normalized);
    let hash = crate::policy::hash_of_text(&normalized_text);
    let fingerprint = blake3::hash(
        crate::canonical::to_string(&json!({
            "session": s.session_id, "profile": s.profile, "tool": s.request.tool(),
            "action": normalized, "idempotency_key": s.idempotency_key,
        }))
        .as_bytes(),
    )
    .to_hex()
    .to_string();
    let now = jiff::Timestamp::now();
    let tx = store.write()?;
    let previous = tx
        .prepare_cached(&previous_call_sql())?
        .query_row([&fingerprint, s.session_id], from_row)
        .optional()?;
    if let Some(prev) = previous {
        if !prev.state.is_terminal() {
            return Ok(Submitted::Existing(prev));
        }
        let fresh = prev
            .updated_at
            .parse::<jiff::Timestamp>()
            .is_ok_and(|t| now.duration_since(t).as_secs_f64() <= s.replay_window.as_secs_f64());
        let write = !crate::policy::scope::is_read(&normalized);
        if prev.state == State::Completed && fresh && write {
            return Ok(Submitted::Replayed(prev));
        }
    }
    let sig = crate::store::CredentialRow::policy_sig(&tx, &s.credential.id)?;
    let initial = match s.unresolved {
        // It cannot run, so no card: recorded as received, then failed before sending.
        Some(_) => State::Received,
        None => gate(
            &tx,
            trust,
            s.credential,
            sig.as_deref(),
            s.request,
            &normalized,
            s.session_id,
        )?,
    };
    let id = crate::credentials::new_id("act");
    let created = crate::time::format_utc(now);
    let expires = crate::time::format_utc(now + s.expiry);
    let summary = s.request.summary(&s.credential.name);
    tx.prepare_cached("INSERT INTO actions (id, session_id, client, profile, tool, credential_id, credential_name, credential_version, \
         state, summary, normalized, action_hash, body, fingerprint, idempotency_key, owner_pid, created_at, updated_at, expires_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?18, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?16, ?17)")?.execute(params![
            id, s.session_id, s.client, s.profile, s.request.tool(), s.credential.id, s.credential.name,
            s.credential.version, summary, normalized_text, hash, s.request.body(),
            fingerprint, s.idempotency_key, std::process::id(), created, expires, initial.as_str()
        ],
    )?;
    let mut action = load(&tx, &id)?;
    journal(&tx, &action, None, None, None, (None, None))?;
    if let Some(why) = s.unresolved {
        action = transition(
            &tx,
            &id,
            State::FailedBeforeSend,
            Change {
                reason: Some(why),
                ..Change::default()
            },
        )?;
    }
    tx.commit()?;
    Ok(Submitted::Created(action))
}

pub(crate) fn load(conn: &Connection, id: &str) -> Result<Action, ApprovalError> {
    conn.prepare_cached(&format!("SELECT {COLUMNS} FROM actions WHERE id = ?1"))?
        .query_row([id], from_row)
        .optional()?
        .ok_or_else(|| ApprovalError::NotFound(id.to_owned()))
}

/// What proves a person's decision in its row: the key's touch, the approver's signature.
type Signatures = (
    Option<crate::wire::touch::TouchRecord>,
    Option<crate::wire::journal::RowSignature>,
);

/// One `action.<state>` journal row for the action's current state; `basis` (dispatch only) names
/// what allowed it: a decision or grant by id and nonce, or the signed policy.
fn journal(
    tx: &Connection,
    a: &Action,
    reason: Option<&str>,
    basis: Option<Basis>,
    method: Option<ApprovalMethod>,
    (touch, signed): Signatures,
) -> Result<(), ApprovalError> {
    let body = ActionRow {
        state: a.state,
        tool: a.tool.clone(),
        credential: a.credential_name.clone(),
        summary: a.summary.clone(),
        hash: a.action_hash.clone(),
        reason: reason.map(str::to_owned),
        basis,
        method,
        touch,
        signed,
    };
    audit::append(tx, Some(&a.session_id), Some(&a.id), &body)?;
    Ok(())
}

/// What a transition records besides the new state.
#[derive(Debug, Default)]
pub(crate) struct Change<'a> {
    /// Stored in the row (shown to the agent), and journaled unless `note` is given.
    pub reason: Option<&'a str>,
    /// Journaled instead of `reason` (e.g. "approved once" while the row keeps no reason).
    pub note: Option<&'a str>,
    /// The scrubbed result, for a finished action.
    pub result: Option<&'a Value>,
    /// What allowed a dispatch (journaled in the `action.dispatched` row).
    pub basis: Option<Basis>,
    /// How the person made the decision (journaled in the `approved`/`denied` row).
    pub method: Option<ApprovalMethod>,
    /// The security key's touch that came with an approval (journaled in its `approved` row).
    pub touch: Option<crate::wire::touch::TouchRecord>,
    /// The approver's signed decision (journaled in its `approved` or `denied` row).
    pub signed: Option<crate::wire::journal::RowSignature>,
}

/// The one way an action changes state, inside the caller's transaction: the move must be legal
/// from the current state (`State::can_go`), the row is updated and its `action.<state>` journal
/// row appended; returns the new row.
pub(crate) fn transition(
    tx: &Connection,
    id: &str,
    to: State,
    change: Change<'_>,
) -> Result<Action, ApprovalError> {
    let current = load(tx, id)?;
    if !current.state.can_go(to) {
        return Err(ApprovalError::NotPending {
            id: id.to_owned(),
            state: current.state,
        });
    }
    tx.prepare_cached(
        "UPDATE actions SET state = ?2, updated_at = ?3, reason = coalesce(?4, reason), \
         result = coalesce(?5, result), owner_pid = ?6 WHERE id = ?1",
    )?
    .execute(params![
        id,
        to.as_str(),
        crate::time::now_utc(),
        change.reason,
        change.result.map(Value::to_string),
        std::process::id()
    ])?;
    let action = load(tx, id)?;
    journal(
        tx,
        &action,
        change.note.or(change.reason),
        change.basis,
        change.method,
        (change.touch, change.signed),
    )?;
    Ok(action)
}

/// `transition` in a transaction of its own.
fn transition_one(
    store: &mut Store,
    id: &str,
    to: State,
    change: Change<'_>,
) -> Result<Action, ApprovalError> {
    let tx = store.write()?;
    let action = transition(&tx, id, to, change)?;
    tx.commit()?;
    Ok(action)
}

/// An action of `session` by id (another session's action is `NotFound`). A pending action past
/// its expiry is expired first, so what this returns is true at the time of reading.
pub fn get(store: &mut Store, session_id: &str, id: &str) -> Result<Action, ApprovalError> {
    let action = store
        .conn()
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM actions WHERE id = ?1 AND (session_id = ?2 OR ?3)"
        ))?
        .query_row(
            params![id, session_id, crate::mutation::off("session_scope")],
            from_row,
        )
        .optional()?
        .ok_or_else(|| ApprovalError::NotFound(id.to_owned()))?;
    if action.state == State::Pending && is_past(&action.expires_at) {
        return expire(store, id).or(Ok(action));
    }
    Ok(action)
}

fn is_past(ts: &str) -> bool {
    ts <= crate::time::now_utc().as_str()
}

fn expire(store: &mut Store, id: &str) -> Result<Action, ApprovalError> {
    transition_one(
        store,
        id,
        State::Expired,
        Change {
            reason: Some("nobody decided before it expired"),
            ..Change::default()
        },
    )
}

/// The newest actions of one session.
pub fn list_recent(
    store: &Store,
    session_id: &str,
    limit: u32,
) -> Result<Vec<Action>, ApprovalError> {
    let mut stmt = store.conn().prepare_cached(&format!(
        "SELECT {COLUMNS} FROM actions WHERE session_id = ?1 ORDER BY created_at DESC, rowid DESC LIMIT ?2"
    ))?;
    let rows = stmt.query_map(params![session_id, limit], from_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Every action still waiting for a person.
pub fn list_pending(store: &Store) -> Result<Vec<Action>, ApprovalError> {
    let mut stmt = store.conn().prepare_cached(&format!(
        "SELECT {COLUMNS} FROM actions WHERE state = 'pending' ORDER BY created_at, rowid"
    ))?;
    let rows = stmt.query_map([], from_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// An action by id, whatever its session (for the person's tools).
pub fn find(store: &Store, id: &str) -> Result<Action, ApprovalError> {
    load(store.conn(), id)
}

/// What the approver must see of an action to sign for it: the stored normalized action (whose
/// hash the approver re-derives) and the body the agent supplied.
pub fn stored_request(store: &Store, id: &str) -> Result<(String, Option<Vec<u8>>), ApprovalError> {
    stored_request_in(store.conn(), id)
}

pub(crate) fn stored_request_in(
    conn: &Connection,
    id: &str,
) -> Result<(String, Option<Vec<u8>>), ApprovalError> {
    conn.prepare_cached("SELECT normalized, body FROM actions WHERE id = ?1")?
        .query_row([id], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?
        .ok_or_else(|| ApprovalError::NotFound(id.to_owned()))
}

/// Withdraws a pending action of `session` (the client cancelled or went away).
pub fn withdraw(
    store: &mut Store,
    session_id: &str,
    id: &str,
    reason: &str,
) -> Result<Action, ApprovalError> {
    let current = get(store, session_id, id)?;
    if current.state != State::Pending {
        return Err(ApprovalError::NotPending {
            id: id.to_owned(),
            state: current.state,
        });
    }
    transition_one(
        store,
        id,
        State::Withdrawn,
        Change {
            reason: Some(reason),
            ..Change::default()
        },
    )
}

/// Withdraws every pending action a session asked for (stdin EOF, shutdown). Returns how many.
pub fn withdraw_session(
    store: &mut Store,
    session_id: &str,
    reason: &str,
) -> Result<usize, ApprovalError> {
    let tx = store.write()?;
    let ids: Vec<String> = tx
        .prepare("SELECT id FROM actions WHERE session_id = ?1 AND state = 'pending'")?
        .query_map([session_id], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    for id in &ids {
        transition(
            &tx,
            id,
            State::Withdrawn,
            Change {
                reason: Some(reason),
                ..Change::default()
            },
        )?;
    }
    tx.commit()?;
    Ok(ids.len())
}

/// Marks pending actions past their expiry as `expired`. Returns them.
pub fn expire_due(store: &mut Store) -> Result<Vec<Action>, ApprovalError> {
    let now = crate::time::now_utc();
    let tx = store.write()?;
    let ids: Vec<String> = tx
        .prepare_cached("SELECT id FROM actions WHERE state = 'pending' AND expires_at <= ?1")?
        .query_map([&now], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        out.push(transition(
            &tx,
            &id,
            State::Expired,
            Change {
                reason: Some("nobody decided before it expired"),
                ..Change::default()
            },
        )?);
    }
    tx.commit()?;
    Ok(out)
}

/// When the next pending action expires, if any waits.
pub fn next_expiry(store: &Store) -> Result<Option<String>, ApprovalError> {
    Ok(store
        .conn()
        .prepare_cached("SELECT min(expires_at) FROM actions WHERE state = 'pending'")?
        .query_row([], |r| r.get(0))?)
}

#[cfg(test)]
pub(crate) use dispatch::nonce_spent_sql;
pub(crate) use pause::PAUSE_ROWS;
#[cfg(test)]
mod tests;
