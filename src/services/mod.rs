//! The services the custody agent runs and the adapters (`mcp`, `cli`) only call: the MCP tools
//! (`tools`), the person's requests (`ops`), and an MCP session's journal rows (start, end).
//! A check that protects data lives here or below, so every adapter inherits it.
pub(crate) mod authority;
mod changes;
pub(crate) mod db;
pub(crate) mod egress;
pub(crate) mod hub;
pub(crate) mod openbao;
pub(crate) mod ops;
pub(crate) mod tools;

use crate::approvals;
use crate::store::{Store, StoreError};
use crate::wire::journal::{ClientLabel, Process, SessionEnd, SessionStart};
use crate::wire::ClientInfo;

/// Journals `session.start`: the client's self-reported name, and the processes the agent saw
/// (the peer, `vault mcp`, and its parent, the AI client), which identify who asked.
pub(crate) fn session_start(
    store: &mut Store,
    session_id: &str,
    client: &ClientInfo,
    profile: &str,
    (peer, parent): (Process, Process),
    contained: bool,
) -> Result<(), StoreError> {
    let body = SessionStart {
        client: ClientLabel {
            name: client.name.clone(),
            version: client.version.clone(),
        },
        peer,
        parent,
        profile: profile.to_owned(),
        protocol_version: client.protocol_version.clone(),
        contained,
    };
    let tx = store.write()?;
    crate::audit::append(&tx, Some(session_id), None, &body)
        .map_err(|_| StoreError::Damaged("the journal could not be appended to"))?;
    tx.commit()
}

/// At the end of a session: withdraw what still waits and journal `session.end`. Returns the
/// new head, which the caller anchors (in `anchors.jsonl`, outside the database) once committed.
pub(crate) fn session_end(
    store: &mut Store,
    session_id: &str,
    reason: &str,
    suppressed_rejections: u64,
) -> Result<crate::audit::Appended, StoreError> {
    let n = approvals::withdraw_session(store, session_id, "the client went away").unwrap_or(0);
    let tx = store.write()?;
    let body = SessionEnd {
        reason: reason.to_owned(),
        withdrawn: n as u64,
        suppressed_rejections,
    };
    let end = crate::audit::append(&tx, Some(session_id), None, &body)
        .map_err(|_| StoreError::Damaged("the journal could not be appended to"))?;
    tx.commit()?;
    Ok(end)
}
