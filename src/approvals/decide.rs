//! The person's side: signed decisions (approve once, approve for the session, deny) and the
//! pause switch. The approver signs (`sign_decision`, `sign_resume`) in its own process with the
//! key from `vault.key.age`, over the action hash it re-derived itself; whoever holds the store
//! (the custody agent) only verifies and records (`decide`, `resume`). Anyone may `pause`.
use super::signing::{self, Signed, Trust, DECISION, GRANT, RESUME};
use super::{load, transition, Action, ApprovalError, Change, State};
use crate::audit;
use crate::keys::ApproverKey;
use crate::store::{get_meta, set_meta, Store, StoreError};
use rusqlite::{params, Connection};
use serde_json::{json, Value};
use std::time::Duration;

/// What the person decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Approve,
    /// Approve, and let this session use the same credential without asking until the grant ends.
    ApproveSession,
    Deny(Option<String>),
}

pub use crate::wire::SignedDecision;

/// The approver's side: signs `verdict` for the action `action_id` whose hash the approver
/// derived itself from what it showed. The grant names the action (not a session): the recorder
/// applies it to the session its own records say asked for that action.
#[allow(clippy::too_many_arguments)]
pub fn sign_decision(
    key: &ApproverKey,
    vault_id: &str,
    action_id: &str,
    action_hash: &str,
    credential: (&str, i64),
    expires_at: &str,
    verdict: &Verdict,
    grant_ttl: Duration,
) -> SignedDecision {
    let now = jiff::Timestamp::now();
    let issued = crate::time::format_utc(now);
    let (decision, reason) = match verdict {
        Verdict::Approve | Verdict::ApproveSession => ("approve", None),
        Verdict::Deny(r) => ("deny", r.clone()),
    };
    let payload = json!({
        "v": 1, "vault_id": vault_id, "action_id": action_id, "action_hash": action_hash,
        "decision": decision, "reason": reason, "expires_at": expires_at, "nonce": random_hex(),
        "issued_at": issued,
    });
    let (payload, signature) = signing::sign(key, DECISION, &payload);
    let grant = (*verdict == Verdict::ApproveSession).then(|| {
        let g = json!({
            "v": 2, "vault_id": vault_id, "action_id": action_id, "action_hash": action_hash,
            "credential_id": credential.0, "credential_version": credential.1,
            "expires_at": crate::time::format_utc(now + grant_ttl), "nonce": random_hex(),
        });
        let (payload, signature) = signing::sign(key, GRANT, &g);
        Signed { payload, signature }
    });
    SignedDecision {
        decision: Signed { payload, signature },
        grant,
    }
}

fn refuse(why: impl Into<String>) -> ApprovalError {
    ApprovalError::BadDecision(why.into())
}

/// Verifies and records a signed decision on a pending action, and moves it to `approved` or
/// `denied`. The signature must be the trusted approver's, over exactly this action's id and
/// stored hash, unexpired, with a nonce never seen before.
pub fn decide(
    store: &mut Store,
    trust: &Trust,
    signed: &SignedDecision,
) -> Result<Action, ApprovalError> {
    let d = signed
        .decision
        .open(trust, DECISION)
        .ok_or_else(|| refuse("its signature is not the approver's, or it is for another vault"))?;
    let action_id = d["action_id"].as_str().unwrap_or_default();
    let now = crate::time::now_utc();
    let tx = store.write()?;
    let action = load(&tx, action_id)?;
    if action.state != State::Pending {
        return Err(ApprovalError::NotPending {
            id: action.id,
            state: action.state,
        });
    }
    if action.expires_at <= now {
        let expired = transition(
            &tx,
            &action.id,
            State::Expired,
            Change {
                reason: Some("nobody decided before it expired"),
                ..Change::default()
            },
        )?;
        tx.commit()?;
        return Err(ApprovalError::NotPending {
            id: expired.id,
            state: State::Expired,
        });
    }
    let v = Opened::of(&d, &action)?;
    tx.prepare_cached("INSERT INTO decisions (id, action_id, decision, nonce, payload, signature, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)")?.execute(params![crate::credentials::new_id("dec"), action.id, v.decision(), v.nonce, signed.decision.payload, signed.decision.signature, now],
    )
    .map_err(|_| refuse("this decision was already recorded (its nonce is used)"))?;
    let note = match (&signed.grant, v.approve) {
        (Some(g), true) => {
            let expires = record_grant(&tx, trust, g, &action)?;
            format!("approved for this session (until {expires})")
        }
        (None, true) => "approved once".to_owned(),
        (_, false) => match &v.reason {
            Some(r) => format!("denied: {r}"),
            None => "denied".to_owned(),
        },
    };
    let to = if v.approve {
        State::Approved
    } else {
        State::Denied
    };
    let change = Change {
        reason: v.reason.as_deref(),
        note: Some(&note),
        ..Change::default()
    };
    let decided = transition(&tx, &action.id, to, change)?;
    tx.commit()?;
    Ok(decided)
}

/// The fields of an opened decision payload, checked against the action it names.
struct Opened<'a> {
    approve: bool,
    nonce: &'a str,
    reason: Option<String>,
}

impl<'a> Opened<'a> {
    fn of(d: &'a Value, action: &Action) -> Result<Self, ApprovalError> {
        if d["action_hash"] != action.action_hash.as_str() {
            return Err(refuse("it was signed for another version of this action"));
        }
        let approve = match d["decision"].as_str() {
            Some("approve") => true,
            Some("deny") => false,
            _ => return Err(refuse("its verdict is neither approve nor deny")),
        };
        let nonce = d["nonce"]
            .as_str()
            .filter(|n| n.len() >= 16)
            .ok_or_else(|| refuse("no nonce"))?;
        let reason = d["reason"].as_str().map(str::to_owned);
        Ok(Self {
            approve,
            nonce,
            reason,
        })
    }

    fn decision(&self) -> &'static str {
        if self.approve {
            "approve"
        } else {
            "deny"
        }
    }
}

/// Stores a session grant for the session that asked for `action` (from our own records, not from
/// anything the approver was shown). Returns its expiry.
fn record_grant(
    tx: &Connection,
    trust: &Trust,
    g: &Signed,
    action: &Action,
) -> Result<String, ApprovalError> {
    let v = g
        .open(trust, GRANT)
        .ok_or_else(|| refuse("the session grant's signature is not the approver's"))?;
    let ok = v["action_id"] == action.id.as_str()
        && v["action_hash"] == action.action_hash.as_str()
        && v["credential_id"] == action.credential_id.as_str()
        && v["credential_version"] == action.credential_version;
    let (Some(expires), Some(nonce), true) = (v["expires_at"].as_str(), v["nonce"].as_str(), ok)
    else {
        return Err(refuse("the session grant does not match this action"));
    };
    tx.prepare_cached("INSERT INTO grants (id, session_id, credential_id, credential_version, nonce, payload, signature, expires_at, created_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)")?.execute(params![crate::credentials::new_id("grt"), action.session_id, action.credential_id, action.credential_version, nonce, g.payload, g.signature, expires, crate::time::now_utc()],
    )
    .map_err(|_| refuse("this session grant was already recorded"))?;
    Ok(expires.to_owned())
}

fn random_hex() -> String {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).expect("the OS random number generator failed");
    hex::encode(b)
}

/// Whether the vault is paused, and why: the last `vault.pause` / `vault.resume` row of the
/// journal decides (the `meta` copy is only for people reading the table). An error means the
/// state cannot be read; callers refuse then.
pub fn paused(conn: &Connection) -> Result<Option<String>, StoreError> {
    use rusqlite::OptionalExtension;
    let last: Option<(String, String)> = conn
        .prepare_cached("SELECT kind, body FROM audit WHERE kind IN ('vault.pause', 'vault.resume') ORDER BY seq DESC LIMIT 1")?.query_row([],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    Ok(match last {
        Some((kind, body)) if kind == "vault.pause" => {
            let v: Value = serde_json::from_str(&body)
                .map_err(|_| StoreError::Damaged("a vault.pause journal row is not JSON"))?;
            Some(v["reason"].as_str().unwrap_or("paused").to_owned())
        }
        _ => None,
    })
}

/// `vault pause`: every tool call fails at once, and every waiting action is denied.
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
        transition(
            &tx,
            id,
            State::Denied,
            Change {
                reason: Some(&why),
                ..Change::default()
            },
        )?;
    }
    tx.commit()?;
    Ok(ids.len())
}

/// The approver's side of `vault resume`: a signed, single-use request to lift the pause.
pub fn sign_resume(key: &ApproverKey, vault_id: &str) -> Signed {
    let payload = json!({
        "v": 1, "vault_id": vault_id, "op": "resume", "nonce": random_hex(),
        "issued_at": crate::time::now_utc(),
    });
    let (payload, signature) = signing::sign(key, RESUME, &payload);
    Signed { payload, signature }
}

/// `vault resume`: needs the approver's signature (fresh, never used before), so an agent cannot
/// lift the switch. Returns whether the vault was paused.
pub fn resume(store: &mut Store, trust: &Trust, signed: &Signed) -> Result<bool, ApprovalError> {
    let v = signed
        .open(trust, RESUME)
        .ok_or(ApprovalError::WrongApprover)?;
    let fresh = v["issued_at"]
        .as_str()
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        .is_some_and(|t| jiff::Timestamp::now().duration_since(t).as_secs().abs() <= 300);
    let nonce = v["nonce"].as_str().unwrap_or_default().to_owned();
    if !fresh || nonce.len() < 16 {
        return Err(refuse(
            "the resume request is stale; run `vault resume` again",
        ));
    }
    let tx = store.write()?;
    let used: bool = tx.prepare_cached("SELECT EXISTS (SELECT 1 FROM audit WHERE kind = 'vault.resume' AND json_extract(body, '$.nonce') = ?1)")?.query_row([&nonce],
        |r| r.get(0),
    )?;
    if used {
        return Err(refuse("this resume request was already used"));
    }
    let was = paused(&tx)?.is_some() || get_meta(&tx, "paused")?.is_some();
    tx.prepare_cached("DELETE FROM meta WHERE key = 'paused'")?
        .execute([])?;
    if was {
        audit::append(&tx, "vault.resume", None, None, &json!({"nonce": nonce}))?;
    }
    tx.commit()?;
    Ok(was)
}
