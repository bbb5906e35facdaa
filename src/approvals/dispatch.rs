//! From a decision to the executor: which actions need a person (`gate`), the claim that turns
//! an approved (or policy-allowed) action into an `AuthorizedAction` after re-deriving its hash
//! and verifying the signed decision (single use by the journal: the `action.dispatched` row names
//! the decision's nonce), recording what the executor observed (`finish`), and closing what a
//! previous custody agent left unfinished (`reap_orphans`).
use super::signing::{self, Trust};
use super::{load, transition, Action, ApprovalError, AuthorizedAction, Change, State};
use crate::credentials::{self, Approval, Credential};
use crate::policy::{self, HttpArgs, SshArgs, ValidatedRequest};
use crate::store::Store;
use crate::wire::journal::{Basis, Kind};
use crate::wire::{Decision, DecisionPayload, NormalizedAction, Outcome};
use jiff::Timestamp;
use rusqlite::{params, Connection, OptionalExtension};

/// The approval that applies: the stored one if the approver signed it, else `each`.
pub fn effective_approval(trust: &Trust, cred: &Credential, sig: Option<&str>) -> Approval {
    if cred.approval == Approval::Each || !credentials::is_signed(trust, cred, sig) {
        return Approval::Each;
    }
    cred.approval
}

/// `Received` when the credential's (signed) policy lets this request run without a card, or a
/// session grant the person signed covers it (`normalized` is the request as hashed); else
/// `Pending`.
pub fn gate(
    conn: &Connection,
    trust: &Trust,
    cred: &Credential,
    sig: Option<&str>,
    request: &ValidatedRequest,
    normalized: &NormalizedAction,
    session_id: &str,
) -> Result<State, ApprovalError> {
    // A credential under `--presence` shows a card for what needs a touch, whatever its policy
    // or grants say: a touch is per action.
    if cred.target.presence().needs_touch(!is_read(request)) {
        return Ok(State::Pending);
    }
    Ok(match effective_approval(trust, cred, sig) {
        Approval::Never => State::Received,
        // A GET/HEAD with a body, a rewriting header or `_method` is a write too.
        Approval::Writes if is_read(request) => State::Received,
        // Whatever the policy, a session grant the person signed (`s` on a card) covers this
        // session's calls on this credential version that fall in its scope, until it ends.
        Approval::Each | Approval::Writes | Approval::Session => {
            let of = (cred.id.as_str(), cred.version);
            match super::grants::covering(conn, trust, session_id, of, normalized)? {
                Some(_) => State::Received,
                None => State::Pending,
            }
        }
    })
}

/// What a claim produced.
#[derive(Debug)]
pub enum Claim {
    /// Everything checked out; the action is `dispatched` (intent row committed). Run it.
    Go(Box<AuthorizedAction>),
    /// A `network` action's checks passed; it is `dispatched`, and `vault run`'s proxy opens
    /// the connection (and says what it carried, `finish`).
    Tunnel(Action),
    /// Something did not match; the action is now `failed_before_send` with the reason.
    Refused(Action),
    /// Not in a state that can be dispatched (still pending, or already taken).
    NotReady(Action),
}

/// Claims an `approved` or `received` action for dispatch. All checks run in one write
/// transaction: pause switch (from the journal; unreadable means refused), credential still at
/// the approved version, the stored request re-validated against the credential and re-hashed,
/// the action's last journal row a legal predecessor of `dispatched`, and a valid, unexpired
/// signed decision for exactly this action and hash whose nonce no `action.dispatched` row names
/// yet (or the credential's signed policy / a session grant whose scope covers the stored
/// request). The `dispatched` row records that basis.
pub fn claim(store: &mut Store, trust: &Trust, action_id: &str) -> Result<Claim, ApprovalError> {
    let tx = store.write()?;
    let action = load(&tx, action_id)?;
    if !matches!(action.state, State::Approved | State::Received) {
        return Ok(Claim::NotReady(action));
    }
    if action.tool == super::network::TOOL {
        let claimed = match check_network(&tx, trust, &action) {
            Ok(basis) => Claim::Tunnel(dispatch(&tx, &action, basis)?),
            Err(reason) => Claim::Refused(refuse(&tx, &action, &reason)?),
        };
        tx.commit()?;
        return Ok(claimed);
    }
    match check(&tx, trust, &action) {
        Ok((request, cred, basis)) => {
            let secret = crate::store::CredentialRow::find_by_id(&tx, &cred.id)?
                .ok_or(ApprovalError::NotFound(cred.id.clone()))?
                .secret(&tx)?;
            let dispatched = dispatch(&tx, &action, basis)?;
            tx.commit()?;
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
            let refused = refuse(&tx, &action, &reason)?;
            tx.commit()?;
            Ok(Claim::Refused(refused))
        }
    }
}

/// The intent row: the decision it rests on is spent, and the action is `dispatched` on `basis`.
fn dispatch(tx: &Connection, action: &Action, basis: Basis) -> Result<Action, ApprovalError> {
    if let Basis::Decision { decision: d, .. } = &basis {
        tx.prepare_cached("UPDATE decisions SET used_at = ?2 WHERE id = ?1")?
            .execute(params![d, crate::time::now_utc()])?;
    }
    let change = Change {
        basis: Some(basis),
        ..Change::default()
    };
    transition(tx, &action.id, State::Dispatched, change)
}

/// A claim that must not run: the action ends `failed_before_send` with why.
fn refuse(tx: &Connection, action: &Action, reason: &str) -> Result<Action, ApprovalError> {
    let change = Change {
        reason: Some(reason),
        ..Change::default()
    };
    let refused = transition(tx, &action.id, State::FailedBeforeSend, change)?;
    tracing::warn!(action = %refused.id, %reason, "dispatch refused");
    Ok(refused)
}

/// What every claim checks first: the pause switch (unreadable means refused), and the action's
/// last journal row is the state it is claimed in.
fn ready(tx: &Connection, action: &Action) -> Result<(), String> {
    match super::pause::paused(tx) {
        Ok(None) => {}
        Ok(Some(why)) => return Err(format!("the vault is paused: {why}")),
        Err(e) => return Err(format!("the pause switch cannot be read ({e}); refusing")),
    }
    let last: Option<String> = tx
        .prepare_cached("SELECT kind FROM audit WHERE action_id = ?1 ORDER BY seq DESC LIMIT 1")
        .and_then(|mut st| st.query_row([&action.id], |r| r.get(0)).optional())
        .map_err(|e| e.to_string())?;
    if last.as_deref().and_then(Kind::parse) != Some(Kind::Action(action.state)) {
        return Err("the journal does not show this action waiting for dispatch".into());
    }
    Ok(())
}

/// Every check before dispatch; `Err` is the reason it must not run, `Ok` carries what allowed it.
fn check(
    tx: &Connection,
    trust: &Trust,
    action: &Action,
) -> Result<(ValidatedRequest, Credential, Basis), String> {
    ready(tx, action)?;
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
        .prepare_cached("SELECT normalized, body FROM actions WHERE id = ?1")
        .and_then(|mut st| st.query_row([&action.id], |r| Ok((r.get(0)?, r.get(1)?))))
        .map_err(|e| e.to_string())?;
    let Some((stored, hash)) = policy::read_normalized(&normalized) else {
        return Err("the stored action is not a normalized request".into());
    };
    if hash != action.action_hash {
        return Err("the stored action does not match its hash (changed after approval)".into());
    }
    let mut request = rebuild(&cred, &stored, body)
        .map_err(|e| format!("the stored action no longer passes policy: {e}"))?;
    // Team mode: the KV version resolved when it was asked for is part of what was hashed.
    if let NormalizedAction::Http(h) = &stored {
        let remote =
            matches!(&cred.target, crate::wire::Target::Http(t) if t.secret_from.is_some());
        if remote != h.secret_version.is_some() {
            return Err(
                "the stored action does not name the OpenBao secret version its credential needs"
                    .into(),
            );
        }
        request.set_secret_version(h.secret_version);
    }
    if request.normalized(&cred) != stored {
        return Err("the stored action re-derives to a different request".into());
    }
    let basis = match action.state {
        State::Approved => {
            let (id, nonce) = valid_decision(tx, trust, action)?;
            Basis::Decision {
                decision: id,
                nonce,
            }
        }
        _ => match effective_approval(trust, &cred, sig.as_deref()) {
            Approval::Never => Basis::Policy {
                policy: Approval::Never,
            },
            Approval::Writes if is_read(&request) => Basis::Policy {
                policy: Approval::Writes,
            },
            Approval::Each | Approval::Writes | Approval::Session => {
                let of = (cred.id.as_str(), cred.version);
                match super::grants::covering(tx, trust, &action.session_id, of, &stored)
                    .map_err(|e| e.to_string())?
                {
                    Some((grant, grant_nonce)) => Basis::Grant { grant, grant_nonce },
                    None => {
                        return Err("the credential's policy requires an approval, and no session grant covers this call (it ended, was revoked, or does not cover this method, path or command)".into())
                    }
                }
            }
        },
    };
    Ok((request, cred, basis))
}

/// Every check before a `network` action's intent row (inside `claim`'s transaction): the pause
/// switch and the journal (`ready`), the stored request is a network one that hashes to the
/// action's hash, and the person's signed, unused, unexpired decision for exactly this action,
/// or (for one a grant let through) a grant in force that covers exactly its host and port.
fn check_network(tx: &Connection, trust: &Trust, action: &Action) -> Result<Basis, String> {
    ready(tx, action)?;
    let normalized: String = tx
        .prepare_cached("SELECT normalized FROM actions WHERE id = ?1")
        .and_then(|mut st| st.query_row([&action.id], |r| r.get(0)))
        .map_err(|e| e.to_string())?;
    let stored = match crate::policy::read_normalized(&normalized) {
        Some((n @ NormalizedAction::Network(_), hash)) if hash == action.action_hash => n,
        _ => return Err("the stored action is not the network request its hash covers".into()),
    };
    if action.state == State::Approved {
        let (decision, nonce) = valid_decision(tx, trust, action)?;
        return Ok(Basis::Decision { decision, nonce });
    }
    match super::grants::covering(tx, trust, &action.session_id, ("", 0), &stored) {
        Ok(Some((grant, grant_nonce))) => Ok(Basis::Grant { grant, grant_nonce }),
        Ok(None) => Err("no approval and no session grant covers this host (it ended, was revoked, or names another host or port)".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// What the `writes` policy lets run without a card: a read-only HTTP request (GET or HEAD with
/// no body, no rewriting header, no `_method`; `HttpRequest::is_read_only`).
pub(crate) fn is_read(request: &ValidatedRequest) -> bool {
    matches!(request, ValidatedRequest::Http(h) if h.is_read_only())
}

fn valid_decision(
    tx: &Connection,
    trust: &Trust,
    action: &Action,
) -> Result<(String, String), String> {
    let now = Timestamp::now();
    let mut stmt = tx
        .prepare_cached("SELECT id, payload, signature FROM decisions WHERE action_id = ?1 AND decision = 'approve' AND used_at IS NULL")
        .map_err(|e| e.to_string())?;
    let rows: Vec<(String, String, String)> = stmt
        .query_map([&action.id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .and_then(Iterator::collect)
        .map_err(|e| e.to_string())?;
    for (id, payload, signature) in rows {
        let signed = signing::Signed { payload, signature };
        let Some(d) = signed.open::<DecisionPayload>(trust) else {
            continue;
        };
        let ok = d.action_id == action.id
            && d.action_hash == action.action_hash
            && d.decision == Decision::Approve
            && d.expires_at > now
            && d.nonce.len() >= 16;
        if ok && !nonce_spent(tx, &d.nonce).map_err(|e| e.to_string())? {
            return Ok((id, d.nonce));
        }
    }
    Err("no valid, unused signed approval for this exact action".into())
}

/// Whether an `action.dispatched` row of the journal already names this decision nonce.
fn nonce_spent(tx: &Connection, nonce: &str) -> rusqlite::Result<bool> {
    tx.prepare_cached(&nonce_spent_sql())?
        .query_row([nonce], |r| r.get(0))
}

/// `nonce_spent`'s query. The partial index `audit_dispatch_nonce` (schema/0007) serves it only
/// because the query repeats the index's condition: the kind written into the SQL as a literal
/// (plans do not look at bound values: QPSG, `store::keyed`) and the nonce not null.
pub(crate) fn nonce_spent_sql() -> String {
    let nonce = "json_extract(body, '$.basis.nonce')";
    format!(
        "SELECT EXISTS (SELECT 1 FROM audit WHERE kind = '{}' AND {nonce} IS NOT NULL AND {nonce} = ?1)",
        Kind::Action(State::Dispatched).as_str()
    )
}

/// Turns the stored normalized action back into a validated request, through the same policy
/// checks a new request passes.
fn rebuild(
    cred: &Credential,
    stored: &NormalizedAction,
    body: Option<Vec<u8>>,
) -> Result<ValidatedRequest, policy::PolicyError> {
    match stored {
        NormalizedAction::Http(h) => {
            let body_hash = body.as_ref().map(|b| blake3::hash(b).to_hex().to_string());
            if h.body_blake3 != body_hash {
                return Err(policy::PolicyError::invalid(
                    "body",
                    "the stored body does not match its hash",
                    "",
                ));
            }
            // The proxy's body is any bytes; an agent's is text (or JSON), as it was sent.
            let (body_bytes, body_text) = match (h.proxied, body) {
                (true, b) => (b, None),
                (false, Some(b)) => match String::from_utf8(b) {
                    Ok(text) => (None, Some(text)),
                    Err(_) => {
                        return Err(policy::PolicyError::invalid(
                            "body",
                            "the stored body of an agent's request is not text",
                            "",
                        ))
                    }
                },
                (false, None) => (None, None),
            };
            let args = HttpArgs {
                credential: cred.name.clone(),
                method: h.method.clone(),
                url: h.url.clone(),
                headers: h.headers.iter().cloned().collect(),
                body: body_text,
                body_bytes,
                timeout_s: Some(h.timeout_s),
                max_output_bytes: (!h.proxied).then_some(h.max_output_bytes),
                proxied: h.proxied,
                ..HttpArgs::default()
            };
            policy::validate_http(cred, args)
        }
        NormalizedAction::Network(_) => Err(policy::PolicyError::invalid(
            "kind",
            "a network action is not a credential's request",
            "",
        )),
        NormalizedAction::Ssh(s) => policy::validate_ssh(
            cred,
            SshArgs {
                credential: cred.name.clone(),
                command: s.command.clone(),
                timeout_s: Some(s.timeout_s),
                max_output_bytes: Some(s.max_output_bytes),
                ..SshArgs::default()
            },
        ),
    }
}

/// Records what the executor observed: `completed`, `failed_before_send` or `indeterminate`.
pub fn finish(
    store: &mut Store,
    action_id: &str,
    outcome: &Outcome,
) -> Result<Action, ApprovalError> {
    let tx = store.write()?;
    let done = transition(
        &tx,
        action_id,
        outcome.state,
        Change {
            reason: outcome.reason.as_deref(),
            result: Some(&outcome.result),
            ..Change::default()
        },
    )?;
    // A tool's upload past `http_request`'s bound (through `vault run`'s proxy, up to 64 MiB)
    // is not kept once it ran: the action's hash and its journal rows hold its blake3.
    tx.prepare_cached("UPDATE actions SET body = NULL WHERE id = ?1 AND length(body) > ?2")?
        .execute(rusqlite::params![
            action_id,
            crate::policy::MAX_BODY_BYTES as i64
        ])?;
    tx.commit()?;
    Ok(done)
}

/// Closes every action a previous custody agent left unfinished: there is one agent per vault
/// (it holds the vault's agent lock), so a starting agent owns nothing yet and every non-final
/// action is an orphan. `dispatched` ones become `indeterminate` (the target may have acted),
/// waiting ones `withdrawn`. Returns how many changed. (A pid check would not do: a zombie or a
/// reused pid looks alive.)
pub fn reap_orphans(store: &mut Store) -> Result<usize, ApprovalError> {
    let tx = store.write()?;
    let rows: Vec<(String, String)> = tx
        .prepare("SELECT id, state FROM actions WHERE state IN ('pending', 'received', 'approved', 'dispatched')")?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    for (id, state) in &rows {
        let (to, why) = if state == "dispatched" {
            (
                State::Indeterminate,
                "the vault agent running it stopped before it finished; the target may have acted",
            )
        } else {
            (State::Withdrawn, "the vault agent holding it stopped")
        };
        transition(
            &tx,
            id,
            to,
            Change {
                reason: Some(why),
                ..Change::default()
            },
        )?;
    }
    tx.commit()?;
    Ok(rows.len())
}
