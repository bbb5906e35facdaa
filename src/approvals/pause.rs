//! The pause switch: `vault pause` (anyone may pull it: every tool call fails at once and every
//! waiting action is denied) and whether the vault is paused, read from the journal. Lifting it
//! needs the approver's signature (`decide.rs`: `resume`).
use super::{transition, ApprovalError, Change, State};
use crate::audit;
use crate::store::{set_meta, Store, StoreError};
use crate::wire::journal::{Kind, VaultPause};
use rusqlite::Connection;

/// The condition of the partial index `audit_pause` (schema/0006), written exactly as there so
/// SQLite uses it (`services::changes::tests` checks the plans).
pub(crate) const PAUSE_ROWS: &str = "kind IN ('vault.pause', 'vault.resume')";

/// Whether the vault is paused, and why: the last `vault.pause` / `vault.resume` row of the
/// journal decides (the `meta` copy is only for people reading the table). An error means the
/// state cannot be read; callers refuse then.
pub fn paused(conn: &Connection) -> Result<Option<String>, StoreError> {
    use rusqlite::OptionalExtension;
    // The kinds are written into the SQL, not bound: SQLite uses a partial index only when the
    // query's condition matches it when the statement is planned, and plans do not look at bound
    // values (QPSG, `store::keyed`). This runs twice per call.
    let sql = format!("SELECT kind, body FROM audit WHERE {PAUSE_ROWS} ORDER BY seq DESC LIMIT 1");
    let last: Option<(String, String)> = conn
        .prepare_cached(&sql)?
        .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    Ok(match last {
        Some((kind, body)) if Kind::parse(&kind) == Some(Kind::VaultPause) => {
            let p: VaultPause = serde_json::from_str(&body)
                .map_err(|_| StoreError::Damaged("a vault.pause journal row is not readable"))?;
            Some(p.reason)
        }
        _ => None,
    })
}

/// `vault pause`: every tool call fails at once, and every waiting action is denied.
pub fn pause(store: &mut Store, reason: &str) -> Result<usize, ApprovalError> {
    let tx = store.write()?;
    set_meta(&tx, "paused", reason)?;
    let body = VaultPause {
        reason: reason.to_owned(),
    };
    audit::append(&tx, None, None, &body)?;
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
