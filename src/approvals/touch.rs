//! Security keys for approvals: the registered keys (at most two, a main one and a backup, in
//! `meta.approver_keys` with the last signature counter each gave), registering and removing one
//! by the approver's signed request (journaled, so `vault verify` knows every key a touch may
//! come from), and checking a touch that comes with a decision: a registered key's valid
//! assertion over this vault, this action hash and this decision's nonce, with a counter that
//! moved on. The protocol is `fido`'s; what needs a touch is the credential's `Presence`.
use super::signing::{self, Signed, Trust};
use super::ApprovalError;
use crate::audit;
use crate::fido;
use crate::store::{get_meta, set_meta, StoreError};
use crate::wire::journal::{KeyAdded, KeyRemoved, Kind, RowSignature};
use crate::wire::touch::{RegisteredKey, TouchProof};
use crate::wire::KeyPayload;
use crate::wire::{Op, Payload};
use jiff::Timestamp;
use rusqlite::Connection;
use serde::{Deserialize, Serialize};

const META: &str = "approver_keys";
/// A main key and a backup.
pub const MAX_KEYS: usize = 2;

/// A registered key as the vault keeps it: the key, the last counter it signed with, and when it
/// was registered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoredKey {
    pub key: RegisteredKey,
    pub counter: u32,
    pub added_at: String,
}

fn refuse(why: impl Into<String>) -> ApprovalError {
    ApprovalError::BadKeyChange(why.into())
}

/// The registered keys, oldest first.
pub fn keys(conn: &Connection) -> Result<Vec<StoredKey>, StoreError> {
    match get_meta(conn, META)? {
        None => Ok(Vec::new()),
        Some(json) => serde_json::from_str(&json)
            .map_err(|_| StoreError::Damaged("meta.approver_keys is not a list of keys")),
    }
}

fn save(conn: &Connection, keys: &[StoredKey]) -> Result<(), StoreError> {
    let json = serde_json::to_string(keys).expect("keys serialize");
    set_meta(conn, META, &json)
}

/// A registration, as the vault records it, under `name`.
pub fn registered(reg: &fido::Registration, name: &str) -> RegisteredKey {
    RegisteredKey {
        name: name.to_owned(),
        credential_id: hex::encode(&reg.credential_id),
        public_key: hex::encode(&reg.public_key),
        algorithm: reg.algorithm.to_owned(),
    }
}

/// The approver's side of `vault approver add-key` (`Op::AddKey`) and `remove-key`
/// (`Op::RemoveKey`): a signed, single-use request about this key.
pub fn sign_key_change(
    key: &crate::keys::ApproverKey,
    vault_id: &str,
    op: Op,
    registered: RegisteredKey,
) -> Signed {
    signing::sign(
        key,
        &KeyPayload {
            v: KeyPayload::VERSION,
            vault_id: vault_id.to_owned(),
            op,
            nonce: signing::random_hex(),
            key: registered,
            issued_at: crate::wire::ts::to_millis(Timestamp::now()),
        },
    )
}

/// Whether a key name is short and plain: 1 to 32 of `A-Za-z0-9._-`.
pub fn name_ok(name: &str) -> bool {
    (1..=32).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

/// Opens a key request: the approver's, fresh, for `op`, with a nonce never used before.
fn open(
    conn: &Connection,
    trust: &Trust,
    signed: &Signed,
    op: Op,
) -> Result<KeyPayload, ApprovalError> {
    let p: KeyPayload = signed.open(trust).ok_or(ApprovalError::WrongApprover)?;
    let fresh = Timestamp::now().duration_since(p.issued_at).as_secs().abs() <= 300;
    if !fresh || p.op != op || p.nonce.len() < 16 {
        return Err(refuse("the request is stale; run the command again"));
    }
    let used: bool = conn
        .prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM audit WHERE kind IN (?1, ?2) AND json_extract(body, '$.nonce') = ?3)",
        )?
        .query_row(
            [Kind::KeyAdd.as_str(), Kind::KeyRemove.as_str(), p.nonce.as_str()],
            |r| r.get(0),
        )?;
    if used {
        return Err(refuse("this request was already used"));
    }
    Ok(p)
}

/// Registers a key by the approver's signed request: a plain name not taken, a credential not
/// registered, a public key that reads as ES256 or EdDSA, and room (two keys at most).
pub fn add_key(
    store: &mut crate::store::Store,
    trust: &Trust,
    signed: &Signed,
) -> Result<Vec<StoredKey>, ApprovalError> {
    let tx = store.write()?;
    let p = open(&tx, trust, signed, Op::AddKey)?;
    let k = &p.key;
    if !name_ok(&k.name) {
        return Err(refuse(
            "a key name is 1 to 32 letters, digits, '.', '_' or '-'",
        ));
    }
    let cose = hex::decode(&k.public_key).map_err(|_| refuse("the public key is not hex"))?;
    let public = fido::parse_cose_key(&cose).map_err(|e| refuse(e.to_string()))?;
    if public.algorithm() != k.algorithm || hex::decode(&k.credential_id).is_err() {
        return Err(refuse("the key's algorithm or credential id does not read"));
    }
    let mut all = keys(&tx)?;
    if all.iter().any(|s| s.key.name == k.name) {
        return Err(refuse(format!(
            "a key named {} is registered already; choose another --name",
            k.name
        )));
    }
    if all.iter().any(|s| s.key.credential_id == k.credential_id) {
        return Err(refuse("this credential is registered already"));
    }
    if all.len() >= MAX_KEYS {
        return Err(refuse(format!(
            "{MAX_KEYS} keys are registered (a main one and a backup); remove one first with `vault approver remove-key NAME`"
        )));
    }
    all.push(StoredKey {
        key: k.clone(),
        counter: 0,
        added_at: crate::time::now_utc(),
    });
    save(&tx, &all)?;
    audit::append(
        &tx,
        None,
        None,
        &KeyAdded {
            nonce: p.nonce,
            key: p.key,
            signed: Some(RowSignature::of(signed)),
        },
    )?;
    tx.commit()?;
    Ok(all)
}

/// Removes a registered key by the approver's signed request naming it and its credential.
pub fn remove_key(
    store: &mut crate::store::Store,
    trust: &Trust,
    signed: &Signed,
) -> Result<Vec<StoredKey>, ApprovalError> {
    let tx = store.write()?;
    let p = open(&tx, trust, signed, Op::RemoveKey)?;
    let mut all = keys(&tx)?;
    let before = all.len();
    all.retain(|s| !(s.key.name == p.key.name && s.key.credential_id == p.key.credential_id));
    if all.len() == before {
        return Err(refuse(format!(
            "no key named {} is registered (`vault approver keys`)",
            p.key.name
        )));
    }
    save(&tx, &all)?;
    audit::append(
        &tx,
        None,
        None,
        &KeyRemoved {
            nonce: p.nonce,
            name: p.key.name,
            credential_id: p.key.credential_id,
            signed: Some(RowSignature::of(signed)),
        },
    )?;
    tx.commit()?;
    Ok(all)
}

/// Checks the touch that came with an approval of `action_hash` under the decision nonce
/// `nonce`: a registered key's assertion over exactly that, with the person present and a
/// counter past the last one that key gave (a clone or a replay goes back). Records the new
/// counter in `conn`'s transaction.
pub fn check(
    conn: &Connection,
    trust: &Trust,
    action_hash: &str,
    nonce: &str,
    proof: Option<&TouchProof>,
) -> Result<(), ApprovalError> {
    let Some(proof) = proof else {
        return Err(ApprovalError::NoTouch);
    };
    let mut all = keys(conn)?;
    let Some(stored) = all
        .iter_mut()
        .find(|s| s.key.credential_id == proof.credential_id)
    else {
        return Err(ApprovalError::BadTouch(
            "it came from a key that is not registered".into(),
        ));
    };
    let bad = |e: fido::FidoError| ApprovalError::BadTouch(e.to_string());
    let cose = hex::decode(&stored.key.public_key)
        .map_err(|_| StoreError::Damaged("meta.approver_keys holds a key that is not hex"))?;
    let public = fido::parse_cose_key(&cose).map_err(bad)?;
    let data = hex::decode(&proof.authenticator_data)
        .map_err(|_| ApprovalError::BadTouch("its data is not hex".into()))?;
    let sig = hex::decode(&proof.signature)
        .map_err(|_| ApprovalError::BadTouch("its signature is not hex".into()))?;
    let challenge = fido::challenge(&trust.vault_id, action_hash, nonce);
    let read = fido::verify_assertion(&public, &challenge, &data, &sig).map_err(bad)?;
    if !fido::counter_moved_on(Some(stored.counter), read.counter) {
        return Err(ApprovalError::BadTouch(format!(
            "key {}'s counter went back ({} after {}): the key was cloned, or an old touch was replayed",
            stored.key.name, read.counter, stored.counter
        )));
    }
    stored.counter = read.counter;
    save(conn, &all)?;
    Ok(())
}

/// Whether approving `action` needs a touch: its credential's `Presence`, for a write or for
/// every action. A credential that is gone needs none here (the dispatch refuses the action).
pub fn needs_touch(conn: &Connection, action: &crate::wire::Action) -> Result<bool, ApprovalError> {
    let Some(row) = crate::store::CredentialRow::find_by_id(conn, &action.credential_id)? else {
        return Ok(false);
    };
    let target: crate::wire::Target = serde_json::from_str(&row.target)
        .map_err(|_| StoreError::Damaged("a credential's target is not JSON"))?;
    let presence = target.presence();
    if presence.is_none() {
        return Ok(false);
    }
    let (normalized, _) = super::stored_request_in(conn, &action.id)?;
    let normalized: crate::wire::NormalizedAction = serde_json::from_str(&normalized)
        .map_err(|_| StoreError::Damaged("an action's normalized request is not JSON"))?;
    Ok(presence.needs_touch(!crate::policy::scope::is_read(&normalized)))
}
