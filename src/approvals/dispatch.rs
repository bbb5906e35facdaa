//! From a decision to the executor: which actions need a person (`gate`), the claim that turns
//! an approved (or policy-allowed) action into an `AuthorizedAction` after re-deriving its hash
//! and verifying the signed decision, recording what the executor observed (`finish`), and
//! cleaning up after processes that died (`reap_orphans`).
use super::signing::{self, DECISION, GRANT, POLICY};
use super::{journal, load, Action, ApprovalError, AuthorizedAction, State};
use crate::credentials::{self, Approval, Credential};
use crate::exec::Outcome;
use crate::policy::{self, action_hash, HttpArgs, SshArgs, ValidatedRequest};
use crate::store::{get_meta, Store, StoreError};
use ed25519_dalek::VerifyingKey;
use rusqlite::{params, Connection, Transaction};
use serde_json::Value;

/// The approval that applies: the stored one if the approver signed it, else `each`.
pub fn effective_approval(
    conn: &Connection,
    public: &VerifyingKey,
    cred: &Credential,
    sig: Option<&str>,
) -> Approval {
    if cred.approval == Approval::Each {
        return Approval::Each;
    }
    let vault_id = get_meta(conn, "vault_id")
        .ok()
        .flatten()
        .unwrap_or_default();
    let payload = crate::canonical::to_string(&credentials::policy_payload(&vault_id, cred));
    match sig {
        Some(s) if signing::verify(public, POLICY, &payload, s) => cred.approval,
        _ => Approval::Each,
    }
}

/// `Received` when the credential's (signed) policy lets this request run without a card, else
/// `Pending`.
pub fn gate(
    conn: &Connection,
    cred: &Credential,
    sig: Option<&str>,
    request: &ValidatedRequest,
    session_id: &str,
) -> Result<State, ApprovalError> {
    let public = signing::approver_public_key(conn)?;
    Ok(match effective_approval(conn, &public, cred, sig) {
        Approval::Each => State::Pending,
        Approval::Never => State::Received,
        // A GET/HEAD with a body, a rewriting header or `_method` is a write too.
        Approval::Writes => match request {
            ValidatedRequest::Http(h) if h.is_read_only() => State::Received,
            _ => State::Pending,
        },
        Approval::Session => {
            if valid_grant(conn, &public, session_id, cred)? {
                State::Received
            } else {
                State::Pending
            }
        }
    })
}

fn valid_grant(
    conn: &Connection,
    public: &VerifyingKey,
    session_id: &str,
    cred: &Credential,
) -> Result<bool, ApprovalError> {
    let now = crate::time::now_utc();
    let vault_id = get_meta(conn, "vault_id")?.unwrap_or_default();
    let mut stmt = conn.prepare_cached(
        "SELECT payload, signature FROM grants WHERE session_id = ?1 AND credential_id = ?2 AND credential_version = ?3 AND expires_at > ?4",
    )?;
    let rows: Vec<(String, String)> = stmt
        .query_map(params![session_id, cred.id, cred.version, now], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })?
        .collect::<Result<_, _>>()?;
    Ok(rows.iter().any(|(payload, sig)| {
        let v: Value = serde_json::from_str(payload).unwrap_or_default();
        signing::verify(public, GRANT, payload, sig)
            && v["vault_id"] == vault_id.as_str()
            && v["session_id"] == session_id
            && v["credential_id"] == cred.id.as_str()
            && v["credential_version"] == cred.version
            && v["expires_at"].as_str().is_some_and(|e| e > now.as_str())
    }))
}

/// What a claim produced.
#[derive(Debug)]
pub enum Claim {
    /// Everything checked out; the action is `dispatched` (intent row committed). Run it.
    Go(Box<AuthorizedAction>),
    /// Something did not match; the action is now `failed_before_send` with the reason.
    Refused(Action),
    /// Not in a state that can be dispatched (still pending, or already taken).
    NotReady(Action),
}

/// Claims an `approved` or `received` action for dispatch. All checks run in one write
/// transaction: pause switch, credential still at the approved version, the stored request
/// re-validated against the credential and re-hashed, and a valid, unused, unexpired signed
/// decision for exactly this action and hash (or the credential's signed policy / session grant).
pub fn claim(store: &mut Store, action_id: &str) -> Result<Claim, ApprovalError> {
    let tx = store.write()?;
    let action = load(&tx, action_id)?;
    if !matches!(action.state, State::Approved | State::Received) {
        return Ok(Claim::NotReady(action));
    }
    match check(&tx, &action) {
        Ok((request, cred, decision_id)) => {
            if let Some(d) = &decision_id {
                tx.execute(
                    "UPDATE decisions SET used_at = ?2 WHERE id = ?1",
                    params![d, crate::time::now_utc()],
                )?;
            }
            let secret = crate::store::CredentialRow::find_by_id(&tx, &cred.id)?
                .ok_or(ApprovalError::NotFound(cred.id.clone()))?
                .secret(&tx)?;
            set_state(&tx, &action.id, State::Dispatched, None)?;
            let dispatched = load(&tx, &action.id)?;
            journal(&tx, &dispatched, None)?;
            tx.commit().map_err(StoreError::from)?;
            let secret = credentials::Secret::new(secret.to_vec());
            Ok(Claim::Go(Box::new(AuthorizedAction::new(
                dispatched.id,
                dispatched.action_hash,
                cred,
                request,
                secret,
            ))))
        }
        Err(reason) => {
            set_state(&tx, &action.id, State::FailedBeforeSend, Some(&reason))?;
            let refused = load(&tx, &action.id)?;
            journal(&tx, &refused, Some(&reason))?;
            tx.commit().map_err(StoreError::from)?;
            tracing::warn!(action = %refused.id, %reason, "dispatch refused");
            Ok(Claim::Refused(refused))
        }
    }
}

fn set_state(
    tx: &Transaction<'_>,
    id: &str,
    state: State,
    reason: Option<&str>,
) -> Result<(), ApprovalError> {
    tx.execute(
        "UPDATE actions SET state = ?2, updated_at = ?3, reason = coalesce(?4, reason), owner_pid = ?5 WHERE id = ?1",
        params![id, state.as_str(), crate::time::now_utc(), reason, std::process::id()],
    )?;
    Ok(())
}

/// Every check before dispatch; `Err` is the reason it must not run.
fn check(
    tx: &Transaction<'_>,
    action: &Action,
) -> Result<(ValidatedRequest, Credential, Option<String>), String> {
    if let Ok(Some(why)) = super::decide::paused(tx) {
        return Err(format!("the vault is paused: {why}"));
    }
    let public = signing::approver_public_key(tx).map_err(|e| e.to_string())?;
    let (cred, sig) = credentials::get_by_id(tx, &action.credential_id)
        .map_err(|e| e.to_string())?
        .ok_or("the credential was removed after the request")?;
    if cred.version != action.credential_version {
        return Err(format!(
            "the credential changed after the request (version {} → {})",
            action.credential_version, cred.version
        ));
    }
    let (normalized, body): (String, Option<Vec<u8>>) = tx
        .query_row(
            "SELECT normalized, body FROM actions WHERE id = ?1",
            [&action.id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .map_err(|e| e.to_string())?;
    let stored: Value =
        serde_json::from_str(&normalized).map_err(|_| "the stored action is not JSON")?;
    if action_hash(&stored) != action.action_hash {
        return Err("the stored action does not match its hash (changed after approval)".into());
    }
    let request = rebuild(&cred, &stored, body)
        .map_err(|e| format!("the stored action no longer passes policy: {e}"))?;
    if crate::canonical::to_string(&request.normalized(&cred))
        != crate::canonical::to_string(&stored)
    {
        return Err("the stored action re-derives to a different request".into());
    }
    let decision = match action.state {
        State::Approved => Some(valid_decision(tx, &public, action)?),
        _ => {
            if gate(tx, &cred, sig.as_deref(), &request, &action.session_id)
                .map_err(|e| e.to_string())?
                != State::Received
            {
                return Err(
                    "the credential's policy requires an approval and there is none".into(),
                );
            }
            None
        }
    };
    Ok((request, cred, decision))
}

fn valid_decision(
    tx: &Transaction<'_>,
    public: &VerifyingKey,
    action: &Action,
) -> Result<String, String> {
    let vault_id = get_meta(tx, "vault_id").ok().flatten().unwrap_or_default();
    let now = crate::time::now_utc();
    let mut stmt = tx
        .prepare("SELECT id, payload, signature FROM decisions WHERE action_id = ?1 AND decision = 'approve' AND used_at IS NULL")
        .map_err(|e| e.to_string())?;
    let rows: Vec<(String, String, String)> = stmt
        .query_map([&action.id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .and_then(Iterator::collect)
        .map_err(|e| e.to_string())?;
    for (id, payload, sig) in rows {
        let v: Value = serde_json::from_str(&payload).unwrap_or_default();
        let ok = signing::verify(public, DECISION, &payload, &sig)
            && v["vault_id"] == vault_id.as_str()
            && v["action_id"] == action.id.as_str()
            && v["action_hash"] == action.action_hash.as_str()
            && v["decision"] == "approve"
            && v["expires_at"].as_str().is_some_and(|e| e > now.as_str());
        if ok {
            return Ok(id);
        }
    }
    Err("no valid signed approval for this exact action".into())
}

/// Turns the stored normalized action back into a validated request, through the same policy
/// checks a new request passes.
fn rebuild(
    cred: &Credential,
    v: &Value,
    body: Option<Vec<u8>>,
) -> Result<ValidatedRequest, policy::PolicyError> {
    let s = |k: &str| v[k].as_str().unwrap_or_default().to_owned();
    match v["kind"].as_str() {
        Some("http") => {
            let body_text = body.map(|b| String::from_utf8(b).unwrap_or_default());
            if v["body_blake3"].as_str()
                != body_text
                    .as_ref()
                    .map(|b| blake3::hash(b.as_bytes()).to_hex().to_string())
                    .as_deref()
            {
                return Err(policy::PolicyError::invalid(
                    "body",
                    "the stored body does not match its hash",
                    "",
                ));
            }
            let headers = v["headers"]
                .as_array()
                .map(|h| {
                    h.iter()
                        .filter_map(|p| {
                            Some((p[0].as_str()?.to_owned(), p[1].as_str()?.to_owned()))
                        })
                        .collect()
                })
                .unwrap_or_default();
            let args = HttpArgs {
                credential: cred.name.clone(),
                method: s("method"),
                url: s("url"),
                headers,
                body: body_text,
                timeout_s: v["timeout_s"].as_u64(),
                max_output_bytes: v["max_output_bytes"].as_u64(),
                ..HttpArgs::default()
            };
            policy::validate_http(cred, args)
        }
        Some("ssh") => policy::validate_ssh(
            cred,
            SshArgs {
                credential: cred.name.clone(),
                command: s("command"),
                timeout_s: v["timeout_s"].as_u64(),
                max_output_bytes: v["max_output_bytes"].as_u64(),
                ..SshArgs::default()
            },
        ),
        _ => Err(policy::PolicyError::invalid(
            "kind",
            "unknown action kind",
            "",
        )),
    }
}

/// Records what the executor observed: `completed`, `failed_before_send` or `indeterminate`.
pub fn finish(
    store: &mut Store,
    action_id: &str,
    outcome: &Outcome,
) -> Result<Action, ApprovalError> {
    let tx = store.write()?;
    let a = load(&tx, action_id)?;
    if a.state != State::Dispatched {
        return Err(ApprovalError::NotPending {
            id: a.id,
            state: a.state,
        });
    }
    tx.execute(
        "UPDATE actions SET state = ?2, updated_at = ?3, reason = ?4, result = ?5 WHERE id = ?1",
        params![
            action_id,
            outcome.state.as_str(),
            crate::time::now_utc(),
            outcome.reason,
            outcome.result.to_string()
        ],
    )?;
    let done = load(&tx, action_id)?;
    journal(&tx, &done, outcome.reason.as_deref())?;
    tx.commit().map_err(StoreError::from)?;
    Ok(done)
}

/// Actions whose owner process is gone: `dispatched` ones become `indeterminate` (the target may
/// have acted), waiting ones become `withdrawn`. Returns how many changed.
pub fn reap_orphans(store: &mut Store) -> Result<usize, ApprovalError> {
    let rows: Vec<(String, String, i64)> = store
        .conn()
        .prepare("SELECT id, state, owner_pid FROM actions WHERE state IN ('pending', 'received', 'approved', 'dispatched')")?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<Result<_, _>>()?;
    let mut n = 0;
    for (id, state, pid) in rows {
        if process_alive(pid) {
            continue;
        }
        let tx = store.write()?;
        let (to, why) = if state == "dispatched" {
            (
                State::Indeterminate,
                "the process running it ended before it finished; the target may have acted",
            )
        } else {
            (State::Withdrawn, "the process that asked for it ended")
        };
        let changed = tx.execute(
            "UPDATE actions SET state = ?2, updated_at = ?3, reason = ?4 WHERE id = ?1 AND state = ?5",
            params![id, to.as_str(), crate::time::now_utc(), why, state],
        )?;
        if changed == 1 {
            let a = load(&tx, &id)?;
            journal(&tx, &a, Some(why))?;
            n += 1;
        }
        tx.commit().map_err(StoreError::from)?;
    }
    Ok(n)
}

fn process_alive(pid: i64) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    if pid <= 0 {
        return false;
    }
    // SAFETY: signal 0 only checks that the process exists and may be signalled.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}
