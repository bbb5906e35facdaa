//! The approver's signatures as a worker reads them, from one row alone (no order needed, so on
//! every core): which rows carry one, and, held to a key, whether it is that key's over exactly
//! what the row says. A decision must name the row's action, hash, verdict and method (and its
//! touch the decision's nonce); a grant its action, credential version, scope and expiry; a
//! revocation its grant; a key change its key; a credential change the version, approval and
//! bindings the row shows; a resume its nonce. The signature itself is left to the caller, who
//! checks a chunk's in one batch (`verify_batch`); what the in-order checks need is kept
//! (`Good`, and of a dispatch row its hash, summary and credential).
use super::RowRef;
use crate::wire::journal::{
    ActionRow, CredentialBody, GrantAdded, GrantRevoked, KeyAdded, KeyRemoved, Kind,
    NetworkAllowed, RowSignature, VaultResume,
};
use crate::wire::{
    ApprovalMethod, Decision, DecisionPayload, GrantPayload, KeyPayload, NetworkPayload, Op,
    Payload, PolicyPayload, RemovalPayload, ResumePayload, RevocationPayload, State,
};
use ed25519_dalek::{Signature, VerifyingKey};
use serde::de::DeserializeOwned;

/// A decision may be journaled this long after the expiry the agent checked against.
pub(super) const SLACK_MS: i64 = 1000;

/// What a row says of the approver's signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Held {
    /// A row of a kind no person signs (or a dispatch read with no key).
    None,
    /// A row of a kind the approver signs, read with no key (or, with one, carrying none):
    /// whether it carries a signature.
    Carries(bool),
    /// Held to a key: the signature does not read or its payload is not what the row says.
    Bad(String),
    /// Held to a key: its payload is what the row says (the signature is checked in a batch).
    Good(Box<Good>),
    /// Held to a key: a dispatch row's action, as the in-order checks need it.
    Dispatch(Box<Dispatch>),
}

/// A signed row whose payload matches it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Good {
    pub(super) vault_id: Box<str>,
    pub(super) what: What,
}

/// What the in-order checks need of a signed payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum What {
    /// A decision: its nonce, the action hash it covers, approve or deny, and its expiry (ms).
    Decision {
        nonce: Box<str>,
        hash: Box<str>,
        approve: bool,
        expires_ms: i64,
    },
    /// A session grant, spent by its nonce.
    Grant { nonce: Box<str> },
    /// Anything else: the row says it all.
    Other,
}

/// What a dispatch row says its action was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Dispatch {
    pub(super) hash: Box<str>,
    pub(super) summary: Box<str>,
    pub(super) credential: Box<str>,
}

/// Whether a row of `kind` may carry the approver's signature.
pub(super) fn signs(kind: Option<Kind>) -> bool {
    matches!(
        kind,
        Some(
            Kind::Action(State::Approved | State::Denied)
                | Kind::GrantAdd
                | Kind::GrantRevoke
                | Kind::KeyAdd
                | Kind::KeyRemove
                | Kind::CredentialAdd
                | Kind::CredentialEdit
                | Kind::CredentialRm
                | Kind::VaultResume
                | Kind::NetworkAllow
        )
    )
}

/// Whether a row of `kind` must carry one once earlier rows did: all of them but a denial (a
/// pause denies what waits, and nobody signs that).
pub(super) fn must_sign(kind: Option<Kind>) -> bool {
    signs(kind) && kind != Some(Kind::Action(State::Denied))
}

/// The signature a row carries, and with `key` whether its payload is what the row says. A
/// `Good` row's message (the payload's tag and text) is appended to `message` and its signature
/// returned, for the caller to verify.
pub(super) fn read(
    row: &RowRef<'_>,
    kind: Option<Kind>,
    key: Option<&VerifyingKey>,
    message: &mut Vec<u8>,
) -> (Held, Option<Signature>) {
    if key.is_none() {
        return match signs(kind) {
            true => (Held::Carries(row.body.contains("\"signed\":{")), None),
            false => (Held::None, None),
        };
    }
    let seq = row.seq;
    // A signature on a row of a kind nobody signs would go unread: a signed row relabelled (a
    // revocation that no longer revokes, say).
    if !signs(kind) && carries(row.body) && !crate::mutation::off("relabelled_signature") {
        let why = format!("row {seq} ({}): it carries an approver signature, but the person signs no row of its kind: a signed row was relabelled, and what it decided would go unread", row.kind);
        return (Held::Bad(why), None);
    }
    let Some(kind) = kind else {
        return (Held::None, None);
    };
    let checked = match kind {
        Kind::Action(State::Dispatched) => {
            let said = match super::basis::read_dispatch(row.body) {
                Some(q) => Some(Dispatch {
                    hash: q.hash.into(),
                    summary: q.summary.into(),
                    credential: q.credential.into(),
                }),
                None => serde_json::from_str::<ActionRow>(row.body)
                    .ok()
                    .map(|b| Dispatch {
                        hash: b.hash.into(),
                        summary: b.summary.into(),
                        credential: b.credential.into(),
                    }),
            };
            // One that does not read: the basis check says why.
            return match said {
                Some(d) => (Held::Dispatch(Box::new(d)), None),
                None => (Held::None, None),
            };
        }
        Kind::Action(state @ (State::Approved | State::Denied)) => {
            with(row.body, |b: ActionRow| decision(row, state, b, message))
        }
        Kind::GrantAdd => with(row.body, |b: GrantAdded| grant(b, message)),
        Kind::GrantRevoke => with(row.body, |b: GrantRevoked| revocation(b, message)),
        Kind::KeyAdd => with(row.body, |b: KeyAdded| key_added(b, message)),
        Kind::KeyRemove => with(row.body, |b: KeyRemoved| key_removed(b, message)),
        Kind::CredentialAdd | Kind::CredentialEdit | Kind::CredentialRm => {
            with(row.body, |b: CredentialBody| credential(kind, b, message))
        }
        Kind::VaultResume => with(row.body, |b: VaultResume| resume(b, message)),
        Kind::NetworkAllow => with(row.body, |b: NetworkAllowed| network_allow(b, message)),
        _ => return (Held::None, None),
    };
    match checked {
        Ok(None) => (Held::Carries(false), None),
        Ok(Some((good, sig))) => (Held::Good(Box::new(good)), Some(sig)),
        Err(why) => (Held::Bad(format!("row {seq} ({kind}): {why}")), None),
    }
}

/// Whether a body holds a `signed` member (however its key is spelled): a cheap look first,
/// since most rows' bodies hold neither the word nor an escape.
fn carries(body: &str) -> bool {
    #[derive(serde::Deserialize)]
    struct Probe {
        #[serde(default)]
        signed: Option<serde::de::IgnoredAny>,
    }
    (body.contains("signed") || body.contains("\\u"))
        && serde_json::from_str::<Probe>(body).is_ok_and(|p| p.signed.is_some())
}

/// A checked payload and its signature; `None`: the row carries none.
type Checked = Result<Option<(Good, Signature)>, String>;

/// `check` of the row's body read as a `T`. A body that does not read and carries no signature is
/// taken as carrying none (what else is wrong with it is the other checks' to say).
fn with<T: DeserializeOwned>(text: &str, check: impl FnOnce(T) -> Checked) -> Checked {
    match serde_json::from_str(text) {
        Ok(b) => check(b),
        Err(_) if !text.contains("\"signed\":{") => Ok(None),
        Err(e) => Err(format!("the row does not read: {e}")),
    }
}

/// The payload of `sig` as a `T` of this build's format, its tag and text appended to `message`,
/// and the signature's bytes.
fn open<T: Payload>(sig: &RowSignature, message: &mut Vec<u8>) -> Result<(T, Signature), String> {
    let text = sig.payload.get();
    let payload: T =
        serde_json::from_str(text).map_err(|e| format!("its signed payload does not read: {e}"))?;
    if payload.version() != T::VERSION {
        return Err(format!(
            "its signed payload is of format {}, not {}",
            payload.version(),
            T::VERSION
        ));
    }
    let signature = hex::decode(&sig.signature)
        .ok()
        .and_then(|b| Signature::from_slice(&b).ok())
        .ok_or("its signature is not 64 bytes in hex")?;
    message.extend_from_slice(T::TAG);
    message.extend_from_slice(text.as_bytes());
    Ok((payload, signature))
}

/// `Err(what)` unless `ok`.
fn must(ok: bool, what: impl FnOnce() -> String) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(what())
    }
}

fn good(vault_id: String, what: What, sig: Signature) -> Checked {
    let vault_id = vault_id.into();
    Ok(Some((Good { vault_id, what }, sig)))
}

fn decision(row: &RowRef<'_>, state: State, b: ActionRow, message: &mut Vec<u8>) -> Checked {
    let Some(signed) = &b.signed else {
        return Ok(None);
    };
    let (d, sig): (DecisionPayload, _) = open(signed, message)?;
    let action = row.action.unwrap_or_default();
    must(d.action_id == action, || {
        format!(
            "its signed decision is for another action ({}), not {action}",
            d.action_id
        )
    })?;
    must(d.action_hash == b.hash, || {
        format!(
            "its signed decision covers another action hash ({}), not the row's {}",
            d.action_hash, b.hash
        )
    })?;
    let approve = state == State::Approved;
    must((d.decision == Decision::Approve) == approve, || {
        format!(
            "the person signed {} for this action, and the row says {state}",
            d.decision.as_str()
        )
    })?;
    must(Some(d.method) == b.method, || {
        format!(
            "its signed decision was made by {}, and the row says {}",
            d.method.as_str(),
            b.method.map_or("nothing", ApprovalMethod::as_str)
        )
    })?;
    must(!approve || d.method != ApprovalMethod::Key, || {
        "it approves on a key press alone, which approves nothing".into()
    })?;
    if let Some(t) = &b.touch {
        must(t.nonce == d.nonce, || {
            "its touch is over another decision's nonce".into()
        })?;
    }
    let expires_ms = d.expires_at.as_millisecond();
    let at = row
        .ts
        .parse::<jiff::Timestamp>()
        .map(|t| t.as_millisecond());
    must(at.is_ok_and(|t| t <= expires_ms + SLACK_MS), || {
        "it was recorded after the action expired".into()
    })?;
    let what = What::Decision {
        nonce: d.nonce.into(),
        hash: d.action_hash.into(),
        approve,
        expires_ms,
    };
    good(d.vault_id, what, sig)
}

fn grant(b: GrantAdded, message: &mut Vec<u8>) -> Checked {
    let Some(signed) = &b.signed else {
        return Ok(None);
    };
    let (g, sig): (GrantPayload, _) = open(signed, message)?;
    let expires = crate::time::format_utc(g.expires_at);
    let same = g.action_id == b.action
        && g.credential_id == b.credential_id
        && g.credential_version == b.credential_version
        && g.scope == b.scope
        && expires == b.expires_at;
    must(same, || {
        format!("its signed grant is not the one the row records (signed: action {}, credential {} version {}, scope {:?}, until {expires})", g.action_id, g.credential_id, g.credential_version, g.scope)
    })?;
    good(
        g.vault_id,
        What::Grant {
            nonce: g.nonce.into(),
        },
        sig,
    )
}

fn revocation(b: GrantRevoked, message: &mut Vec<u8>) -> Checked {
    let Some(signed) = &b.signed else {
        return Ok(None);
    };
    let (r, sig): (RevocationPayload, _) = open(signed, message)?;
    must(r.grant.as_ref().is_none_or(|g| *g == b.grant), || {
        format!(
            "its signed revocation ends grant {:?}, not {}",
            r.grant, b.grant
        )
    })?;
    must(r.nonce == b.nonce, || {
        "its signed revocation has another nonce".into()
    })?;
    good(r.vault_id, What::Other, sig)
}

fn key_change(p: &KeyPayload, op: Op, nonce: &str) -> Result<(), String> {
    must(p.op == op, || {
        format!("its signed request is {:?}, not {op:?}", p.op)
    })?;
    must(p.nonce == nonce, || {
        "its signed request has another nonce".into()
    })
}

fn key_added(b: KeyAdded, message: &mut Vec<u8>) -> Checked {
    let Some(signed) = &b.signed else {
        return Ok(None);
    };
    let (p, sig): (KeyPayload, _) = open(signed, message)?;
    key_change(&p, Op::AddKey, &b.nonce)?;
    must(p.key == b.key, || {
        format!(
            "the approver signed the registration of key {} (credential {}), not the key this row registers",
            p.key.name, p.key.credential_id
        )
    })?;
    good(p.vault_id, What::Other, sig)
}

fn key_removed(b: KeyRemoved, message: &mut Vec<u8>) -> Checked {
    let Some(signed) = &b.signed else {
        return Ok(None);
    };
    let (p, sig): (KeyPayload, _) = open(signed, message)?;
    key_change(&p, Op::RemoveKey, &b.nonce)?;
    must(
        p.key.credential_id == b.credential_id && p.key.name == b.name,
        || {
            format!(
                "the approver signed the removal of key {}, not {}",
                p.key.name, b.name
            )
        },
    )?;
    good(p.vault_id, What::Other, sig)
}

fn credential(kind: Kind, b: CredentialBody, message: &mut Vec<u8>) -> Checked {
    let Some(signed) = &b.signed else {
        return Ok(None);
    };
    if kind == Kind::CredentialRm {
        let (r, sig): (RemovalPayload, _) = open(signed, message)?;
        let same = r.op == Op::Rm && r.credential_id == b.id && r.version == b.version;
        must(same, || {
            format!(
                "the approver signed the removal of {} version {}, not {} version {}",
                r.credential_id, r.version, b.id, b.version
            )
        })?;
        return good(r.vault_id, What::Other, sig);
    }
    let (p, sig): (PolicyPayload, _) = open(signed, message)?;
    must(p.credential_id == b.id && p.version == b.version, || {
        format!(
            "the approver signed {} version {}, not {} version {}",
            p.credential_id, p.version, b.id, b.version
        )
    })?;
    must(p.approval == b.approval, || {
        format!(
            "the approver signed the policy {} for credential {}, and the row says {}",
            p.approval.as_str(),
            b.name,
            b.approval.as_str()
        )
    })?;
    must(p.target == b.binding, || {
        format!(
            "the approver signed other bindings for credential {} than the row shows",
            b.name
        )
    })?;
    good(p.vault_id, What::Other, sig)
}

fn resume(b: VaultResume, message: &mut Vec<u8>) -> Checked {
    let Some(signed) = &b.signed else {
        return Ok(None);
    };
    let (r, sig): (ResumePayload, _) = open(signed, message)?;
    must(r.op == Op::Resume && r.nonce == b.nonce, || {
        "the approver signed another resume".into()
    })?;
    good(r.vault_id, What::Other, sig)
}

fn network_allow(b: NetworkAllowed, message: &mut Vec<u8>) -> Checked {
    let Some(signed) = &b.signed else {
        return Ok(None);
    };
    let (n, sig): (NetworkPayload, _) = open(signed, message)?;
    must(n.allow == b.allow && n.nonce == b.nonce, || {
        "the approver signed other allowed hosts than the row shows".into()
    })?;
    good(n.vault_id, What::Other, sig)
}

/// Checks signatures over their messages, all by `key`: every one at once (a batch), and only
/// when the batch fails each one alone, to name those that do not verify. Returns, per
/// signature, whether it is the approver's.
pub(super) fn verify_all(key: &VerifyingKey, messages: &[&[u8]], sigs: &[Signature]) -> Vec<bool> {
    if sigs.is_empty() {
        return Vec::new();
    }
    if crate::mutation::off("approver_signature") {
        return vec![true; sigs.len()];
    }
    let keys = vec![*key; sigs.len()];
    if sigs.len() > 1 && ed25519_dalek::verify_batch(messages, sigs, &keys).is_ok() {
        return vec![true; sigs.len()];
    }
    messages
        .iter()
        .zip(sigs)
        .map(|(m, s)| key.verify_strict(m, s).is_ok())
        .collect()
}
