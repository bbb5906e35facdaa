//! Session grants (docs/design.md §4): recording one the approver signed with a decision
//! (`record`: its scope must be the one `policy::scope::grant_scope` derives from the action it
//! was given on, and a `grant.add` journal row says what it covers), finding the grant that
//! covers a call (`covering`, asked at submission and again at dispatch), listing the active
//! ones (`list`) and ending them (`sign_revocation` on the approver's side, `revoke` on the
//! recorder's). What cannot be faked with the database key alone rests on the journal: a grant
//! counts only once its `grant.add` row is there and until a `grant.revoke` row names it, and its
//! uses are the `action.dispatched` rows whose basis names it.
use super::signing::{self, Signed, Trust};
use super::{Action, ApprovalError};
use crate::audit;
use crate::keys::ApproverKey;
use crate::policy::scope::{covers, grant_scope};
use crate::store::Store;
use crate::wire::journal::{GrantAdded, GrantRevoked, Kind, RowSignature};
use crate::wire::protocol::{GrantCredential, GrantView};
use crate::wire::{GrantPayload, NormalizedAction, Payload, RevocationPayload, State};
use jiff::Timestamp;
use rusqlite::{params, Connection, OptionalExtension};

/// How long after it was signed a revocation is accepted.
const FRESH_SECONDS: i64 = 300;

fn refuse(why: impl Into<String>) -> ApprovalError {
    ApprovalError::BadDecision(why.into())
}

/// The condition of the partial index `audit_grant` (schema/0008), written exactly as there so
/// SQLite uses it (plans do not look at bound values).
const GRANT_ROWS: &str = "kind IN ('grant.add', 'grant.revoke')";

/// Stores the grant the approver signed with an approval of `action`, for the session that asked
/// for that action (from our own records, not from anything the approver was shown), and
/// journals it. Its scope must be what the card showed: `grant_scope` of the stored request.
/// Returns the grant's expiry and scope.
pub(super) fn record(
    tx: &Connection,
    trust: &Trust,
    g: &Signed,
    action: &Action,
) -> Result<(String, crate::wire::GrantScope), ApprovalError> {
    let v: GrantPayload = g.open(trust).ok_or_else(|| {
        refuse("the session grant's signature is not the approver's, or it is of an older format")
    })?;
    let ok = v.action_id == action.id
        && v.action_hash == action.action_hash
        && v.credential_id == action.credential_id
        && v.credential_version == action.credential_version
        && v.nonce.len() >= 16;
    if !ok {
        return Err(refuse("the session grant does not match this action"));
    }
    let normalized: String = tx
        .prepare_cached("SELECT normalized FROM actions WHERE id = ?1")?
        .query_row([&action.id], |r| r.get(0))?;
    let stored = crate::policy::read_normalized(&normalized)
        .filter(|(_, hash)| *hash == action.action_hash)
        .map(|(n, _)| n)
        .ok_or_else(|| refuse("the action's stored request does not match its hash"))?;
    if v.scope != grant_scope(&stored) {
        return Err(refuse(
            "the session grant's scope is not what this action's card showed",
        ));
    }
    let id = crate::credentials::new_id("grt");
    let expires = crate::time::format_utc(v.expires_at);
    tx.prepare_cached("INSERT INTO grants (id, session_id, credential_id, credential_version, nonce, payload, signature, expires_at, created_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)")?.execute(params![id, action.session_id, action.credential_id, action.credential_version, v.nonce, g.payload, g.signature, expires, crate::time::now_utc()],
    )
    .map_err(|_| refuse("this session grant was already recorded"))?;
    let body = GrantAdded {
        grant: id,
        session: action.session_id.clone(),
        action: action.id.clone(),
        credential: action.credential_name.clone(),
        credential_id: action.credential_id.clone(),
        credential_version: action.credential_version,
        scope: v.scope.clone(),
        expires_at: expires.clone(),
        signed: Some(RowSignature::of(g)),
    };
    audit::append(tx, Some(&action.session_id), None, &body)?;
    Ok((expires, v.scope))
}

/// The kinds of a grant's `grant.add` / `grant.revoke` rows, through the partial index
/// `audit_grant` (schema/0008): the query repeats its condition exactly.
fn grant_rows_sql() -> String {
    format!("SELECT kind FROM audit WHERE {GRANT_ROWS} AND json_extract(body, '$.grant') = ?1")
}

/// Whether the journal shows the grant recorded and not revoked.
fn in_force(conn: &Connection, grant: &str) -> rusqlite::Result<bool> {
    let kinds: Vec<String> = conn
        .prepare_cached(&grant_rows_sql())?
        .query_map([grant], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    let has = |k: Kind| kinds.iter().any(|s| s == k.as_str());
    Ok(has(Kind::GrantAdd) && !has(Kind::GrantRevoke))
}

/// A grant row as stored, its payload opened.
struct Stored {
    id: String,
    session: String,
    created_at: String,
    payload: GrantPayload,
}

/// The unexpired grants whose signature is the approver's (of this format), optionally only those
/// of one session and credential version.
fn unexpired(
    conn: &Connection,
    trust: &Trust,
    only: Option<(&str, (&str, i64))>,
) -> Result<Vec<Stored>, ApprovalError> {
    let now = Timestamp::now();
    let cols =
        "SELECT id, session_id, payload, signature, created_at FROM grants WHERE expires_at > ?1";
    let at = crate::time::format_utc(now);
    let row = |r: &rusqlite::Row<'_>| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?));
    let rows: Vec<(String, String, String, String, String)> = match only {
        Some((session, (id, version))) => conn
            .prepare_cached(&format!("{cols} AND session_id = ?2 AND credential_id = ?3 AND credential_version = ?4 ORDER BY created_at, id"))?
            .query_map(params![at, session, id, version], row)?
            .collect::<Result<_, _>>()?,
        None => conn
            .prepare_cached(&format!("{cols} ORDER BY created_at, id"))?
            .query_map([at], row)?
            .collect::<Result<_, _>>()?,
    };
    Ok(rows
        .into_iter()
        .filter_map(|(id, session, payload, signature, created_at)| {
            let payload = Signed { payload, signature }.open::<GrantPayload>(trust)?;
            (payload.expires_at > now).then_some(Stored {
                id,
                session,
                created_at,
                payload,
            })
        })
        .collect())
}

/// The grant that covers `action` for `session_id` on this credential version (id and version;
/// `("", 0)` for a network action, which uses none), if one does: signed by the approver,
/// unexpired, given on an action of this very session, recorded in the journal and not revoked,
/// and its scope covers the action. Returns its id and nonce.
pub(super) fn covering(
    conn: &Connection,
    trust: &Trust,
    session_id: &str,
    cred: (&str, i64),
    action: &NormalizedAction,
) -> Result<Option<(String, String)>, ApprovalError> {
    for g in unexpired(conn, trust, Some((session_id, cred)))? {
        let p = &g.payload;
        let of_session = conn
            .prepare_cached("SELECT session_id FROM actions WHERE id = ?1")?
            .query_row([&p.action_id], |r| r.get::<_, String>(0))
            .optional()?
            .is_some_and(|s| s == session_id);
        let ok = of_session
            && g.session == session_id
            && p.credential_id == cred.0
            && p.credential_version == cred.1
            && covers(&p.scope, action);
        if ok && in_force(conn, &g.id)? {
            return Ok(Some((g.id, g.payload.nonce)));
        }
    }
    Ok(None)
}

/// How many `action.dispatched` rows name the grant as their basis. The query repeats the
/// condition of the partial index `audit_dispatch_grant` (schema/0008).
fn uses(conn: &Connection, grant: &str) -> rusqlite::Result<u64> {
    let n: i64 = conn
        .prepare_cached(&uses_sql())?
        .query_row([grant], |r| r.get(0))?;
    Ok(n.unsigned_abs())
}

fn uses_sql() -> String {
    let by = "json_extract(body, '$.basis.grant')";
    format!(
        "SELECT count(*) FROM audit WHERE kind = '{}' AND {by} IS NOT NULL AND {by} = ?1",
        Kind::Action(State::Dispatched).as_str()
    )
}

/// Whether a `grant.revoke` row already names a revocation's nonce, through the partial index
/// `audit_grant_revoke_nonce` (schema/0008).
fn nonce_used_sql() -> String {
    format!(
        "SELECT EXISTS (SELECT 1 FROM audit WHERE kind = '{}' AND json_extract(body, '$.nonce') = ?1)",
        Kind::GrantRevoke.as_str()
    )
}

fn view(conn: &Connection, g: &Stored) -> Result<GrantView, ApprovalError> {
    let name: Option<String> = conn
        .prepare_cached("SELECT credential_name FROM actions WHERE id = ?1")?
        .query_row([&g.payload.action_id], |r| r.get(0))
        .optional()?;
    Ok(GrantView {
        id: g.id.clone(),
        session: g.session.clone(),
        client: None,
        action_id: g.payload.action_id.clone(),
        credential: GrantCredential {
            id: g.payload.credential_id.clone(),
            name: name.unwrap_or_else(|| "?".into()),
            version: g.payload.credential_version,
        },
        scope: g.payload.scope.clone(),
        created_at: g.created_at.clone(),
        expires_at: crate::time::format_utc(g.payload.expires_at),
        uses: uses(conn, &g.id)?,
    })
}

/// The grants in force: signed, unexpired, recorded in the journal and not revoked, oldest first
/// (`client` is left to the caller, which reads sessions).
fn active(conn: &Connection, trust: &Trust) -> Result<Vec<Stored>, ApprovalError> {
    let mut out = Vec::new();
    for g in unexpired(conn, trust, None)? {
        if in_force(conn, &g.id)? && !session_ended(conn, &g.session)? {
            out.push(g);
        }
    }
    Ok(out)
}

/// Whether the session's end is journaled: its grants can never be used again (a session that
/// ended makes no call), so they are not in force, whatever their expiry says.
fn session_ended(conn: &Connection, session: &str) -> rusqlite::Result<bool> {
    conn.prepare_cached("SELECT EXISTS (SELECT 1 FROM audit WHERE session_id = ?1 AND kind = ?2)")?
        .query_row([session, Kind::SessionEnd.as_str()], |r| r.get(0))
}

/// `vault grants`: every grant in force, with its uses so far.
pub fn list_grants(store: &Store, trust: &Trust) -> Result<Vec<GrantView>, ApprovalError> {
    let conn = store.conn();
    active(conn, trust)?.iter().map(|g| view(conn, g)).collect()
}

/// The approver's side of `vault grants revoke`: a signed, single-use request to end one grant
/// (`Some(id)`) or every grant in force (`None`).
pub fn sign_revocation(key: &ApproverKey, vault_id: &str, grant: Option<&str>) -> Signed {
    signing::sign(
        key,
        &RevocationPayload {
            v: RevocationPayload::VERSION,
            vault_id: vault_id.to_owned(),
            grant: grant.map(str::to_owned),
            nonce: signing::random_hex(),
            issued_at: crate::wire::ts::to_millis(Timestamp::now()),
        },
    )
}

/// `vault grants revoke`: ends the grants the approver's fresh, never-used revocation names (one,
/// or every grant in force that was recorded before it was signed), each with a `grant.revoke`
/// journal row, so the next call of their sessions gets a card. Returns them as they were.
pub fn revoke_grants(
    store: &mut Store,
    trust: &Trust,
    signed: &Signed,
) -> Result<Vec<GrantView>, ApprovalError> {
    let r: RevocationPayload = signed.open(trust).ok_or(ApprovalError::WrongApprover)?;
    let age = Timestamp::now().duration_since(r.issued_at).as_secs();
    if age.abs() > FRESH_SECONDS || r.nonce.len() < 16 {
        return Err(ApprovalError::BadRevocation(
            "it was signed more than five minutes ago, or carries no nonce".into(),
        ));
    }
    let tx = store.write()?;
    if tx
        .prepare_cached(&nonce_used_sql())?
        .query_row([&r.nonce], |row| row.get::<_, bool>(0))?
    {
        return Err(ApprovalError::BadRevocation(
            "it was already used (each revocation ends grants once)".into(),
        ));
    }
    let signed_at = crate::time::format_utc(r.issued_at);
    let targets: Vec<Stored> = active(&tx, trust)?
        .into_iter()
        .filter(|g| match &r.grant {
            Some(id) => g.id == *id,
            None => g.created_at <= signed_at,
        })
        .collect();
    if let (Some(id), true) = (&r.grant, targets.is_empty()) {
        return Err(ApprovalError::NoGrant(id.clone()));
    }
    let mut out = Vec::with_capacity(targets.len());
    for g in &targets {
        out.push(view(&tx, g)?);
        let body = GrantRevoked {
            grant: g.id.clone(),
            session: g.session.clone(),
            nonce: r.nonce.clone(),
            signed: Some(RowSignature::of(signed)),
        };
        audit::append(&tx, Some(&g.session), None, &body)?;
    }
    tx.commit()?;
    Ok(out)
}

/// The journal queries of this module, whose plans `approvals::tests` checks.
#[cfg(test)]
pub(crate) fn journal_sql() -> [String; 3] {
    [grant_rows_sql(), uses_sql(), nonce_used_sql()]
}
