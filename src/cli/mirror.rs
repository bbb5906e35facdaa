//! A copy of the journal in an in-memory SQLite database, filled from the vault (through the
//! agent, or the store opened directly) so `vault log` and `vault sessions` run the journal's
//! projections (`audit::Activity`) without holding the vault's key.
use super::backend::{unexpected, Backend};
use crate::agent::protocol::{JournalRow, Reply, Request};
use rusqlite::Connection;

const PAGE: u32 = 5000;

pub(super) struct Mirror {
    pub conn: Connection,
    pub last: i64,
}

impl Mirror {
    /// Every row up to now.
    pub(super) fn load(backend: &mut Backend) -> anyhow::Result<Self> {
        let conn = Connection::open_in_memory()?;
        conn.execute_batch(
            "CREATE TABLE audit (seq INTEGER PRIMARY KEY, ts TEXT NOT NULL, kind TEXT NOT NULL, \
             session_id TEXT, action_id TEXT, body TEXT NOT NULL, prev BLOB NOT NULL, hash BLOB NOT NULL);",
        )?;
        let mut m = Self { conn, last: 0 };
        while m.fetch(backend, 0)? == PAGE as usize {}
        Ok(m)
    }

    /// Rows after the last one held; with `wait_ms`, the agent waits that long for one.
    pub(super) fn fetch(&mut self, backend: &mut Backend, wait_ms: u64) -> anyhow::Result<usize> {
        let rows = match backend.call(Request::Journal {
            after: self.last,
            limit: PAGE,
            wait_ms,
        })? {
            Reply::Rows(r) => r,
            other => return Err(unexpected(other)),
        };
        let tx = self.conn.transaction()?;
        for r in &rows {
            insert(&tx, r)?;
        }
        tx.commit()?;
        if let Some(r) = rows.last() {
            self.last = r.seq;
        }
        Ok(rows.len())
    }
}

fn insert(conn: &Connection, r: &JournalRow) -> anyhow::Result<()> {
    conn.prepare_cached(
        "INSERT INTO audit (seq, ts, kind, session_id, action_id, body, prev, hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?
    .execute(rusqlite::params![
        r.seq,
        r.ts,
        r.kind,
        r.session,
        r.action,
        r.body,
        hex::decode(&r.prev)?,
        hex::decode(&r.hash)?
    ])?;
    Ok(())
}
