//! `network` actions (docs/design.md §8): a host `vault run`'s sandbox may not reach yet,
//! asked for by its proxy on its egress session. Such an action uses no credential (its
//! credential columns are empty, version 0): its normalized form names the host and port, the
//! card shows `CONNECT host:port`, and it runs only on the person's signed decision for it or a
//! session grant (`s`) for exactly that host and port. No policy lets one run without a card.
//! The connection itself is the proxy's; the agent records its intent (`dispatched`, checked in
//! `dispatch::check_network`) and what it carried (`finish`).
use super::{from_row, journal, load, previous_call_sql, ApprovalError, State, Submitted};
use crate::store::Store;
use crate::wire::{NormalizedAction, NormalizedNetwork};
use rusqlite::{params, OptionalExtension};
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
/// grant the person signed covers exactly this host and port, else `pending` (one card). The
/// same ask while one waits or runs is that action (`Existing`): one card per host at a time.
pub fn submit_network(
    store: &mut Store,
    trust: &super::Trust,
    ask: NetworkAsk<'_>,
) -> Result<Submitted, ApprovalError> {
    let normalized = NormalizedAction::Network(NormalizedNetwork {
        host: ask.host.to_owned(),
        port: ask.port,
    });
    let text = crate::policy::canonical_text(&normalized);
    let hash = crate::policy::hash_of_text(&text);
    let fingerprint = blake3::hash(
        crate::canonical::to_string(&json!({
            "session": ask.session_id, "profile": ask.profile, "tool": TOOL, "action": normalized,
        }))
        .as_bytes(),
    )
    .to_hex()
    .to_string();
    let now = jiff::Timestamp::now();
    let tx = store.write()?;
    let previous = tx
        .prepare_cached(&previous_call_sql())?
        .query_row([&fingerprint, ask.session_id], from_row)
        .optional()?;
    if let Some(prev) = previous.filter(|p| !p.state.is_terminal()) {
        return Ok(Submitted::Existing(prev));
    }
    let initial = match super::grants::covering(&tx, trust, ask.session_id, ("", 0), &normalized)? {
        Some(_) => State::Received,
        None => State::Pending,
    };
    let id = crate::credentials::new_id("act");
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
