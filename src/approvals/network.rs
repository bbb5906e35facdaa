//! `network` actions (docs/design.md §8): a host `vault run`'s sandbox may not reach yet,
//! asked for by its proxy on its egress session. Such an action uses no credential (its
//! credential columns are empty, version 0): its normalized form names the host and port, the
//! card shows `CONNECT host:port`, and it runs only on the person's signed decision for it or a
//! session grant (`s`) for exactly that host and port. No policy lets one run without a card.
//! The connection itself is the proxy's; the agent records its intent (`dispatched`, checked in
//! `dispatch::check_network`) and what it carried (`finish`). Also the hosts that pass without a
//! card: `config.toml`'s `[network] allow` as the approver signed it (`sign_allowed`,
//! `set_allowed`), kept in `meta` with its signature and re-checked against the approver's key
//! whenever it is read (`allowed`), so a writer of the database without that key adds no host.
use super::signing::{self, Signed, Trust};
use super::{journal, load, ApprovalError, State, Submitted};
use crate::keys::ApproverKey;
use crate::store::{get_meta, set_meta, Store};
use crate::wire::journal::{Kind, NetworkAllowed, RowSignature};
use crate::wire::{NetworkPayload, NormalizedAction, NormalizedNetwork, Payload};
use rusqlite::params;
use serde_json::json;
use std::time::Duration;

/// The `tool` column of a network action.
pub const TOOL: &str = "network";

/// What a network action asks for, and who asks.
#[derive(Debug)]
pub struct NetworkAsk<'a> {
    pub session_id: &'a str,
    pub client: &'a str,
    pub profile: &'a str,
    /// Lower case; an IPv6 address without brackets.
    pub host: &'a str,
    pub port: u16,
    pub expiry: Duration,
}

/// The card's and the journal's words for it: `CONNECT host:port`.
pub fn summary(host: &str, port: u16) -> String {
    format!("CONNECT {}", crate::policy::scope::authority(host, port))
}

/// Records the proxy's ask as a `network` action of its session: `received` when a session
/// grant the person signed covers exactly this host and port, else `pending` (one card). Every
/// ask is an action of its own, never an earlier one, even for the same host: an approval on a
/// card opens one connection (a second one while the first is open or waits asks again, and `s`
/// on the card covers the rest), and each dispatch row is the one connection it allowed.
pub fn submit_network(
    store: &mut Store,
    trust: &Trust,
    ask: NetworkAsk<'_>,
) -> Result<Submitted, ApprovalError> {
    let normalized = NormalizedAction::Network(NormalizedNetwork {
        host: ask.host.to_owned(),
        port: ask.port,
    });
    let text = crate::policy::canonical_text(&normalized);
    let hash = crate::policy::hash_of_text(&text);
    let id = crate::credentials::new_id("act");
    // Unique per ask: nothing is looked up by it (no idempotency, no replay).
    let fingerprint = blake3::hash(
        crate::canonical::to_string(&json!({
            "session": ask.session_id, "tool": TOOL, "action": normalized, "id": id,
        }))
        .as_bytes(),
    )
    .to_hex()
    .to_string();
    let now = jiff::Timestamp::now();
    let tx = store.write()?;
    let initial = match super::grants::covering(&tx, trust, ask.session_id, ("", 0), &normalized)? {
        Some(_) => State::Received,
        None => State::Pending,
    };
    let created = crate::time::format_utc(now);
    let expires = crate::time::format_utc(now + ask.expiry);
    tx.prepare_cached("INSERT INTO actions (id, session_id, client, profile, tool, credential_id, credential_name, credential_version, \
         state, summary, normalized, action_hash, body, fingerprint, idempotency_key, owner_pid, created_at, updated_at, expires_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, '', '', 0, ?6, ?7, ?8, ?9, NULL, ?10, NULL, ?11, ?12, ?12, ?13)")?
        .execute(params![
            id, ask.session_id, ask.client, ask.profile, TOOL, initial.as_str(),
            summary(ask.host, ask.port), text, hash, fingerprint, std::process::id(), created, expires
        ])?;
    let action = load(&tx, &id)?;
    journal(&tx, &action, None, None, None, (None, None))?;
    tx.commit()?;
    Ok(Submitted::Created(action))
}

/// Where the signed allow list is kept.
const META: &str = "network_allow";
/// How long after it was signed an allow list is accepted.
const FRESH_SECONDS: i64 = 300;

/// The approver's side of `vault config --sign`: `allow`, as `config.toml` writes it.
pub fn sign_allowed(key: &ApproverKey, vault_id: &str, allow: Vec<String>) -> Signed {
    signing::sign(
        key,
        &NetworkPayload {
            v: NetworkPayload::VERSION,
            vault_id: vault_id.to_owned(),
            allow,
            nonce: signing::random_hex(),
            issued_at: crate::wire::ts::to_millis(jiff::Timestamp::now()),
        },
    )
}

/// Records a signed allow list (the approver's, fresh, its nonce never recorded before): it is
/// in force from now on, and a `network.allow` row carries it. Returns the hosts.
pub fn set_allowed(
    store: &mut Store,
    trust: &Trust,
    signed: &Signed,
) -> Result<Vec<String>, ApprovalError> {
    let p: NetworkPayload = signed.open(trust).ok_or(ApprovalError::WrongApprover)?;
    let fresh = jiff::Timestamp::now()
        .duration_since(p.issued_at)
        .as_secs()
        .abs()
        <= FRESH_SECONDS;
    if !fresh || p.nonce.len() < 16 {
        return Err(ApprovalError::BadDecision(
            "the signed allow list is stale; run `vault config --sign` again".into(),
        ));
    }
    let tx = store.write()?;
    let used: bool = tx
        .prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM audit WHERE kind = ?1 AND json_extract(body, '$.nonce') = ?2)",
        )?
        .query_row(params![Kind::NetworkAllow.as_str(), p.nonce], |r| r.get(0))?;
    if used {
        return Err(ApprovalError::BadDecision(
            "this signed allow list was already recorded".into(),
        ));
    }
    set_meta(
        &tx,
        META,
        &serde_json::to_string(signed).map_err(|_| {
            crate::store::StoreError::Damaged("a signed allow list does not serialize")
        })?,
    )?;
    let body = NetworkAllowed {
        allow: p.allow.clone(),
        nonce: p.nonce,
        signed: Some(RowSignature::of(signed)),
    };
    crate::audit::append(&tx, None, None, &body)?;
    tx.commit()?;
    Ok(p.allow)
}

/// The allow list in force: the newest one recorded, if its signature is the approver's (else
/// none: a list the approver did not sign lets nothing through).
pub fn allowed(store: &Store, trust: &Trust) -> Result<Vec<String>, ApprovalError> {
    let Some(text) = get_meta(store.conn(), META)? else {
        return Ok(Vec::new());
    };
    let opened = serde_json::from_str::<Signed>(&text)
        .ok()
        .and_then(|s| s.open::<NetworkPayload>(trust));
    match opened {
        Some(p) => Ok(p.allow),
        None => {
            tracing::warn!("the stored network allow list is not the approver's; it is ignored");
            Ok(Vec::new())
        }
    }
}
