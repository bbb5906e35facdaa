//! The person's side: signed decisions (approve once, approve for the session, deny) and the
//! signed lift of the pause switch (`pause.rs` holds the switch). The approver signs (`sign_decision`, `sign_resume`) in its own process with the
//! key from `vault.key.age`, over the action hash it re-derived itself; whoever holds the store
//! (the custody agent) only verifies and records (`decide`, `resume`).
use super::pause::{paused, PAUSE_ROWS};
use super::signing::{self, Signed, Trust};
use super::{load, transition, Action, ApprovalError, Change, State};
use crate::audit;
use crate::keys::ApproverKey;
use crate::store::{get_meta, Store};
use crate::wire::journal::{Kind, RowSignature, VaultResume};
use crate::wire::{
    ApprovalMethod, Decision, DecisionPayload, GrantPayload, NormalizedAction, Op, Payload,
    ResumePayload, Secret,
};
use jiff::Timestamp;
use rusqlite::params;
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
/// derived itself from `normalized`, the request it showed, made by `method`. The grant names
/// the action (not a session): the recorder applies it to the session its own records say asked
/// for that action. It covers the credential version of `normalized` and the scope
/// `grant_scope` derives from it, which is what the card said `s` would cover.
#[allow(clippy::too_many_arguments)]
pub fn sign_decision(
    key: &ApproverKey,
    vault_id: &str,
    action_id: &str,
    action_hash: &str,
    normalized: &NormalizedAction,
    expires_at: &str,
    verdict: &Verdict,
    method: ApprovalMethod,
    grant_ttl: Duration,
) -> SignedDecision {
    // The action's own expiry, as the vault wrote it; one that does not read (a damaged row) is
    // signed as long past, so the decision can never be used.
    let expires_at = expires_at.parse().unwrap_or(Timestamp::UNIX_EPOCH);
    let now = crate::wire::ts::to_millis(Timestamp::now());
    let (decision, reason) = match verdict {
        Verdict::Approve | Verdict::ApproveSession => (Decision::Approve, None),
        Verdict::Deny(r) => (Decision::Deny, r.clone()),
    };
    let payload = DecisionPayload {
        v: DecisionPayload::VERSION,
        vault_id: vault_id.to_owned(),
        action_id: action_id.to_owned(),
        action_hash: action_hash.to_owned(),
        decision,
        reason,
        expires_at,
        nonce: signing::random_hex(),
        issued_at: now,
        method,
    };
    let grant = (*verdict == Verdict::ApproveSession).then(|| {
        let g = GrantPayload {
            v: GrantPayload::VERSION,
            vault_id: vault_id.to_owned(),
            action_id: action_id.to_owned(),
            action_hash: action_hash.to_owned(),
            // A network action's grant names no credential.
            credential_id: normalized.credential().map_or("", |c| &c.id).to_owned(),
            credential_version: normalized.credential().map_or(0, |c| c.version),
            scope: crate::policy::scope::grant_scope(normalized),
            expires_at: now + grant_ttl,
            nonce: signing::random_hex(),
        };
        signing::sign(key, &g)
    });
    SignedDecision {
        decision: signing::sign(key, &payload),
        grant,
        touch: None,
    }
}

fn refuse(why: impl Into<String>) -> ApprovalError {
    ApprovalError::BadDecision(why.into())
}

/// Verifies and records a signed decision on a pending action, and moves it to `approved` or
/// `denied`. The signature must be the trusted approver's, over exactly this action's id and
/// stored hash, unexpired, with a nonce never seen before. An approval made with the PIN must
/// come with the right one (`pin::check`, which counts wrong ones and pauses at the limit); a key
/// press alone approves nothing.
pub fn decide(
    store: &mut Store,
    trust: &Trust,
    signed: &SignedDecision,
    pin: Option<&Secret>,
) -> Result<Action, ApprovalError> {
    let d: DecisionPayload = signed
        .decision
        .open(trust)
        .ok_or_else(|| refuse("its signature is not the approver's, or it is for another vault"))?;
    if d.decision == Decision::Approve {
        match d.method {
            ApprovalMethod::Pin => super::pin::check(store, pin, &d.action_id)?,
            ApprovalMethod::Passphrase => {}
            ApprovalMethod::Key => {
                return Err(refuse(
                    "a key press alone does not approve on this vault; approve with the PIN",
                ))
            }
        }
    }
    let now = crate::time::now_utc();
    let tx = store.write()?;
    let action = load(&tx, &d.action_id)?;
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
    if d.action_hash != action.action_hash {
        return Err(refuse("it was signed for another version of this action"));
    }
    if d.nonce.len() < 16 {
        return Err(refuse("no nonce"));
    }
    let approve = d.decision == Decision::Approve;
    // A credential under `--presence` needs, for this action, a registered key's touch over
    // this vault, this hash and this decision's nonce; and no session grant, which would let
    // later actions run without one.
    let touch = if approve && super::touch::needs_touch(&tx, &action)? {
        if signed.grant.is_some() {
            return Err(refuse("this credential needs a key touch for each action, so it takes no session grant; approve once"));
        }
        super::touch::check(
            &tx,
            trust,
            &action.action_hash,
            &d.nonce,
            signed.touch.as_ref(),
        )?;
        signed
            .touch
            .as_ref()
            .map(|t| crate::wire::touch::TouchRecord {
                nonce: d.nonce.clone(),
                credential_id: t.credential_id.clone(),
                authenticator_data: t.authenticator_data.clone(),
                signature: t.signature.clone(),
            })
    } else {
        None
    };
    tx.prepare_cached("INSERT INTO decisions (id, action_id, decision, nonce, payload, signature, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)")?.execute(params![crate::credentials::new_id("dec"), action.id, d.decision.as_str(), d.nonce, signed.decision.payload, signed.decision.signature, now],
    )
    .map_err(|_| refuse("this decision was already recorded (its nonce is used)"))?;
    let note = match (&signed.grant, approve) {
        (Some(g), true) => {
            let (expires, scope) = super::grants::record(&tx, trust, g, &action)?;
            let covers = crate::policy::scope::describe(&scope);
            format!("approved for this session (until {expires}): {covers}")
        }
        (None, true) => "approved once".to_owned(),
        (_, false) => match &d.reason {
            Some(r) => format!("denied: {r}"),
            None => "denied".to_owned(),
        },
    };
    let to = if approve {
        State::Approved
    } else {
        State::Denied
    };
    let change = Change {
        reason: d.reason.as_deref(),
        note: Some(&note),
        method: Some(d.method),
        touch,
        signed: Some(RowSignature::of(&signed.decision)),
        ..Change::default()
    };
    let decided = transition(&tx, &action.id, to, change)?;
    tx.commit()?;
    Ok(decided)
}

/// The approver's side of `vault resume`: a signed, single-use request to lift the pause.
pub fn sign_resume(key: &ApproverKey, vault_id: &str) -> Signed {
    signing::sign(
        key,
        &ResumePayload {
            v: ResumePayload::VERSION,
            vault_id: vault_id.to_owned(),
            op: Op::Resume,
            nonce: signing::random_hex(),
            issued_at: crate::wire::ts::to_millis(Timestamp::now()),
        },
    )
}

/// `vault resume`: needs the approver's signature (fresh, never used before), so an agent cannot
/// lift the switch. Returns whether the vault was paused.
pub fn resume(store: &mut Store, trust: &Trust, signed: &Signed) -> Result<bool, ApprovalError> {
    let v: ResumePayload = signed.open(trust).ok_or(ApprovalError::WrongApprover)?;
    let fresh = Timestamp::now().duration_since(v.issued_at).as_secs().abs() <= 300;
    if !fresh || v.op != Op::Resume || v.nonce.len() < 16 {
        return Err(refuse(
            "the resume request is stale; run `vault resume` again",
        ));
    }
    let tx = store.write()?;
    // `kind IN (…)` is the condition of the partial index `audit_pause` (schema/0006).
    let sql = format!(
        "SELECT EXISTS (SELECT 1 FROM audit WHERE {PAUSE_ROWS} AND kind = '{}' AND json_extract(body, '$.nonce') = ?1)",
        Kind::VaultResume.as_str()
    );
    let used: bool = tx
        .prepare_cached(&sql)?
        .query_row([v.nonce.as_str()], |r| r.get(0))?;
    if used {
        return Err(refuse("this resume request was already used"));
    }
    let was = paused(&tx)?.is_some() || get_meta(&tx, "paused")?.is_some();
    // The person has looked: wrong PINs before the pause no longer count toward the next one.
    super::pin::clear_failures(&tx)?;
    tx.prepare_cached("DELETE FROM meta WHERE key = 'paused'")?
        .execute([])?;
    if was {
        let body = VaultResume {
            nonce: v.nonce,
            signed: Some(RowSignature::of(signed)),
        };
        audit::append(&tx, None, None, &body)?;
    }
    tx.commit()?;
    Ok(was)
}
