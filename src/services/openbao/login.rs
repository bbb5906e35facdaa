//! The vault's OpenBao login as stored (`meta.openbao_login`, inside the encrypted store): where
//! the team's server is, how the vault logs in, and the secret_id or token that does it. Only
//! the approver changes it (`OpenBaoPayload`, signed, single use, fresh, committing to the secret
//! that travels beside it), so a process of the person's uid that reaches the agent cannot point
//! the vault at a server of its own and collect the secret_id. Each change is a journal row that
//! names the address and method, never the secret.
use crate::approvals::Trust;
use crate::audit;
use crate::keys::signing::{self, Signed};
use crate::keys::ApproverKey;
use crate::store::{get_meta, set_meta, Store, StoreError};
use crate::wire::journal::{Kind, OpenBaoLoggedIn, OpenBaoLoggedOut};
use crate::wire::{Op, OpenBaoAuth, OpenBaoLogin, OpenBaoPayload, Payload, Secret};
use jiff::Timestamp;
use rusqlite::Connection;
use zeroize::Zeroizing;

const KEY: &str = "openbao_login";

/// Why a login or logout was refused; nothing was changed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LoginError {
    #[error("the OpenBao login is not signed by this vault's approver; nothing changed. Run `vault openbao login` with the passphrase")]
    WrongApprover,
    #[error("{0}; nothing changed. Run the `vault openbao` command again")]
    Refused(&'static str),
    #[error(
        "the vault is not logged in to OpenBao; log in with `vault openbao login --address URL …`"
    )]
    NotLoggedIn,
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Audit(#[from] audit::AuditError),
}

/// A login as the agent uses it: where and how, and the secret_id (AppRole) or token.
pub(crate) struct Stored {
    pub(crate) login: OpenBaoLogin,
    pub(crate) secret: Secret,
}

impl std::fmt::Debug for Stored {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stored")
            .field("login", &self.login)
            .field("secret", &"<redacted>")
            .finish()
    }
}

#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Row {
    login: OpenBaoLogin,
    /// Hex of the secret_id or token.
    secret: String,
}

fn commitment(nonce: &str, secret: &[u8]) -> String {
    let mut h = blake3::Hasher::new_derive_key("agent-vault openbao login commitment v1");
    h.update(nonce.as_bytes());
    h.update(secret);
    h.finalize().to_hex().to_string()
}

fn random_hex() -> String {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).expect("the OS random number generator failed");
    hex::encode(b)
}

/// The approver's side of `vault openbao login`: a signed, single-use request bound to `login`
/// and to this secret.
pub(crate) fn sign_login(
    key: &ApproverKey,
    vault_id: &str,
    login: &OpenBaoLogin,
    secret: &Secret,
) -> Signed {
    let nonce = random_hex();
    signing::sign(
        key,
        &OpenBaoPayload {
            v: OpenBaoPayload::VERSION,
            vault_id: vault_id.to_owned(),
            op: Op::OpenBaoLogin,
            commitment: commitment(&nonce, secret.expose()),
            nonce,
            login: Some(login.clone()),
            issued_at: Timestamp::now(),
        },
    )
}

/// The approver's side of `vault openbao logout`.
pub(crate) fn sign_logout(key: &ApproverKey, vault_id: &str) -> Signed {
    signing::sign(
        key,
        &OpenBaoPayload {
            v: OpenBaoPayload::VERSION,
            vault_id: vault_id.to_owned(),
            op: Op::OpenBaoLogout,
            nonce: random_hex(),
            login: None,
            commitment: String::new(),
            issued_at: Timestamp::now(),
        },
    )
}

/// Opens a signed request of `op`: the approver's, fresh (5 minutes), never used before.
fn open(
    conn: &Connection,
    trust: &Trust,
    signed: &Signed,
    op: Op,
) -> Result<OpenBaoPayload, LoginError> {
    let p: OpenBaoPayload = signed.open(trust).ok_or(LoginError::WrongApprover)?;
    let fresh = Timestamp::now().duration_since(p.issued_at).as_secs().abs() <= 300;
    if !fresh || p.op != op || p.nonce.len() < 16 {
        return Err(LoginError::Refused(
            "the signed OpenBao request is stale or of another kind",
        ));
    }
    let kind = match op {
        Op::OpenBaoLogin => Kind::OpenBaoLogin,
        _ => Kind::OpenBaoLogout,
    };
    let used: bool = conn
        .prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM audit WHERE kind = ?1 AND json_extract(body, '$.nonce') = ?2)",
        )
        .and_then(|mut st| st.query_row([kind.as_str(), p.nonce.as_str()], |r| r.get(0)))
        .map_err(StoreError::from)?;
    if used {
        return Err(LoginError::Refused(
            "this signed OpenBao request was already used",
        ));
    }
    Ok(p)
}

/// Stores (or replaces) the login: the approver's fresh signature over it and this secret.
pub(crate) fn set(
    store: &mut Store,
    trust: &Trust,
    signed: &Signed,
    secret: &Secret,
) -> Result<(), LoginError> {
    let tx = store.write()?;
    let p = open(&tx, trust, signed, Op::OpenBaoLogin)?;
    let login = p.login.ok_or(LoginError::Refused(
        "the signed OpenBao login names no server",
    ))?;
    if commitment(&p.nonce, secret.expose()) != p.commitment {
        return Err(LoginError::Refused(
            "the secret sent is not the one the approver signed",
        ));
    }
    if secret.expose().is_empty() {
        return Err(LoginError::Refused("the secret_id or token is empty"));
    }
    let row = Zeroizing::new(
        serde_json::to_string(&Row {
            login: login.clone(),
            secret: hex::encode(secret.expose()),
        })
        .expect("a login serializes"),
    );
    set_meta(&tx, KEY, &row)?;
    let (method, role_id) = match &login.auth {
        OpenBaoAuth::Approle { role_id, .. } => ("approle", Some(role_id.clone())),
        OpenBaoAuth::Token => ("token", None),
    };
    audit::append(
        &tx,
        None,
        None,
        &OpenBaoLoggedIn {
            nonce: p.nonce,
            address: login.address,
            method: method.to_owned(),
            role_id,
        },
    )?;
    tx.commit()?;
    Ok(())
}

/// Removes the login (and so the secret_id or token), by the approver's fresh signature.
pub(crate) fn clear(store: &mut Store, trust: &Trust, signed: &Signed) -> Result<(), LoginError> {
    let tx = store.write()?;
    let p = open(&tx, trust, signed, Op::OpenBaoLogout)?;
    if get_meta(&tx, KEY)?.is_none() {
        return Err(LoginError::NotLoggedIn);
    }
    tx.execute("DELETE FROM meta WHERE key = ?1", [KEY])
        .map_err(StoreError::from)?;
    audit::append(&tx, None, None, &OpenBaoLoggedOut { nonce: p.nonce })?;
    tx.commit()?;
    Ok(())
}

/// The stored login, if any.
pub(crate) fn load(conn: &Connection) -> Result<Option<Stored>, StoreError> {
    let Some(text) = get_meta(conn, KEY)?.map(Zeroizing::new) else {
        return Ok(None);
    };
    let damaged = || {
        StoreError::Damaged(
            "meta.openbao_login is not an OpenBao login; log in again with `vault openbao login`",
        )
    };
    let row: Row = serde_json::from_str(&text).map_err(|_| damaged())?;
    let hex_text = Zeroizing::new(row.secret);
    let mut secret = Zeroizing::new(hex::decode(hex_text.as_str()).map_err(|_| damaged())?);
    Ok(Some(Stored {
        login: row.login,
        secret: Secret::new(std::mem::take(&mut *secret)),
    }))
}
