//! Activity and Sessions: projections of the journal (never a separate log). Built from the row
//! contracts the MCP server writes: `session.start`/`session.end`, `action.<state>` transitions
//! (with the basis a dispatch names and the reason a refusal gives) and `call.rejected`.
use super::AuditError;
use crate::wire::journal::{ActionRow, Basis, CallRejected, Kind, SessionEnd, SessionStart};
use crate::wire::State;
use rusqlite::Connection;
use std::collections::{BTreeMap, HashMap};

/// One line of `vault log`: an action (its latest state) or a rejected call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionEntry {
    /// None for a rejected call.
    pub action_id: Option<String>,
    pub session: Option<String>,
    /// Time of the first row (UTC, ms).
    pub started: String,
    /// Time of the latest row.
    pub updated: String,
    pub first_seq: i64,
    pub last_seq: i64,
    /// The latest `action.<state>`, or `rejected`.
    pub state: String,
    pub tool: Option<String>,
    pub credential: Option<String>,
    /// The server-written summary, or for a rejection its reason.
    pub summary: Option<String>,
    /// JSON-RPC code of a rejection.
    pub code: Option<i64>,
    /// From the first to the latest row, once the action is in a terminal state.
    pub duration_ms: Option<i64>,
    /// What allowed it to run, from its `action.dispatched` row: a person's decision (a card),
    /// a session grant, or the credential's signed policy.
    pub basis: Option<Basis>,
    /// The latest row's reason: why it was denied, expired, withdrawn or failed (or how it was
    /// approved while it waits for dispatch).
    pub reason: Option<String>,
    /// How the person decided it (`approved`/`denied` rows): the PIN on a card, a security key,
    /// or the passphrase (`vault approve --id`, the scripted path).
    pub method: Option<crate::wire::ApprovalMethod>,
}

/// One MCP session, from its `session.start` row.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SessionSummary {
    pub id: String,
    pub client_name: Option<String>,
    pub client_version: Option<String>,
    pub parent_pid: Option<i64>,
    pub parent_exe: Option<String>,
    pub profile: Option<String>,
    pub protocol_version: Option<String>,
    /// The session came through `vault run`'s relay (its `session.start` row says so).
    pub contained: bool,
    pub started: String,
    pub ended: Option<String>,
    pub end_reason: Option<String>,
    /// Actions by latest state, plus `rejected` calls.
    pub counts: BTreeMap<String, u64>,
}

/// The projection, kept up to date incrementally (`update`) for `vault log --follow`.
#[derive(Debug, Default)]
pub struct Activity {
    pub entries: Vec<ActionEntry>,
    pub sessions: Vec<SessionSummary>,
    by_action: HashMap<String, usize>,
    by_session: HashMap<String, usize>,
    last_seq: i64,
}

fn ms_between(a: &str, b: &str) -> Option<i64> {
    let a: jiff::Timestamp = a.parse().ok()?;
    let b: jiff::Timestamp = b.parse().ok()?;
    Some(b.as_millisecond() - a.as_millisecond())
}

impl Activity {
    /// The whole projection of the journal.
    pub fn load(conn: &Connection) -> Result<Self, AuditError> {
        let mut a = Self::default();
        a.update(conn)?;
        Ok(a)
    }

    /// Applies the rows appended since the last call; returns the indices of the entries they
    /// created or changed, in journal order.
    pub fn update(&mut self, conn: &Connection) -> Result<Vec<usize>, AuditError> {
        let mut stmt = conn.prepare_cached(
            "SELECT seq, ts, kind, session_id, action_id, body FROM audit WHERE seq > ?1 \
             AND (kind LIKE 'action.%' OR kind LIKE 'session.%' OR kind = 'call.rejected') ORDER BY seq",
        )?;
        let mut rows = stmt.query([self.last_seq])?;
        let mut touched = Vec::new();
        while let Some(r) = rows.next()? {
            let seq: i64 = r.get(0)?;
            let (ts, kind): (String, String) = (r.get(1)?, r.get(2)?);
            let (session, action): (Option<String>, Option<String>) = (r.get(3)?, r.get(4)?);
            let body: String = r.get(5)?;
            self.last_seq = seq;
            if let Some(i) = self.apply(seq, &ts, &kind, session, action, &body) {
                if touched.last() != Some(&i) {
                    touched.retain(|t| *t != i);
                    touched.push(i);
                }
            }
        }
        Ok(touched)
    }

    /// The seq of the last journal row seen.
    pub fn last_seq(&self) -> i64 {
        self.last_seq
    }

    /// The session an entry belongs to, if it was journaled.
    pub fn session_of(&self, entry: &ActionEntry) -> Option<&SessionSummary> {
        let i = *self.by_session.get(entry.session.as_deref()?)?;
        self.sessions.get(i)
    }

    /// One row, by its kind. A body that does not read as its kind's (a damaged row: `vault
    /// verify` names it) shows as empty.
    fn apply(
        &mut self,
        seq: i64,
        ts: &str,
        kind: &str,
        session: Option<String>,
        action: Option<String>,
        body: &str,
    ) -> Option<usize> {
        match Kind::parse(kind)? {
            Kind::SessionStart => {
                let start = serde_json::from_str(body).ok();
                self.session_started(session?, ts, start);
                None
            }
            Kind::SessionEnd => {
                let end: Option<SessionEnd> = serde_json::from_str(body).ok();
                let s = self.session_mut(session.as_deref()?)?;
                s.ended = Some(ts.to_owned());
                s.end_reason = end.map(|e| e.reason);
                None
            }
            Kind::CallRejected => {
                let body = serde_json::from_str(body).ok();
                Some(self.rejected(seq, ts, session, body))
            }
            Kind::Action(state) => {
                let body = serde_json::from_str(body).ok();
                Some(self.transition(seq, ts, session, action?, state, body))
            }
            _ => None,
        }
    }

    fn session_started(&mut self, id: String, ts: &str, body: Option<SessionStart>) {
        let s = match body {
            Some(b) => SessionSummary {
                id: id.clone(),
                client_name: Some(b.client.name),
                client_version: Some(b.client.version),
                parent_pid: b.parent.pid.map(i64::from),
                parent_exe: b.parent.exe,
                profile: Some(b.profile),
                protocol_version: Some(b.protocol_version),
                contained: b.contained,
                started: ts.to_owned(),
                ..Default::default()
            },
            None => SessionSummary {
                id: id.clone(),
                started: ts.to_owned(),
                ..Default::default()
            },
        };
        self.by_session.insert(id, self.sessions.len());
        self.sessions.push(s);
    }

    /// A refused call: its own line, counted in its session.
    fn rejected(
        &mut self,
        seq: i64,
        ts: &str,
        session: Option<String>,
        body: Option<CallRejected>,
    ) -> usize {
        if let Some(s) = session.as_deref().and_then(|id| self.session_mut(id)) {
            *s.counts.entry("rejected".into()).or_default() += 1;
        }
        self.entries.push(ActionEntry {
            action_id: None,
            session,
            started: ts.to_owned(),
            updated: ts.to_owned(),
            first_seq: seq,
            last_seq: seq,
            state: "rejected".into(),
            tool: body.as_ref().and_then(|b| b.tool.clone()),
            credential: None,
            summary: body.as_ref().map(|b| b.reason.clone()),
            code: body.as_ref().map(|b| b.code),
            duration_ms: None,
            basis: None,
            reason: None,
            method: None,
        });
        self.entries.len() - 1
    }

    /// An `action.<state>` row: the action's line (made at its first row) moves to `state`, and
    /// its session's counts follow.
    fn transition(
        &mut self,
        seq: i64,
        ts: &str,
        session: Option<String>,
        id: String,
        state: State,
        body: Option<ActionRow>,
    ) -> usize {
        let i = match self.by_action.get(&id) {
            Some(&i) => i,
            None => {
                self.entries.push(ActionEntry {
                    action_id: Some(id.clone()),
                    session,
                    started: ts.to_owned(),
                    updated: ts.to_owned(),
                    first_seq: seq,
                    last_seq: seq,
                    state: String::new(),
                    tool: None,
                    credential: None,
                    summary: None,
                    code: None,
                    duration_ms: None,
                    basis: None,
                    reason: None,
                    method: None,
                });
                self.by_action.insert(id, self.entries.len() - 1);
                self.entries.len() - 1
            }
        };
        let old_state = std::mem::take(&mut self.entries[i].state);
        let e = &mut self.entries[i];
        e.updated = ts.to_owned();
        e.last_seq = seq;
        e.state = state.as_str().to_owned();
        if let Some(b) = body {
            e.tool = Some(b.tool);
            e.credential = Some(b.credential);
            e.summary = Some(b.summary);
            e.reason = b.reason;
            if b.basis.is_some() {
                e.basis = b.basis;
            }
            if b.method.is_some() {
                e.method = b.method;
            }
        }
        e.duration_ms = state
            .is_terminal()
            .then(|| ms_between(&e.started, &e.updated))
            .flatten();
        let sid = e.session.clone();
        if let Some(s) = sid.as_deref().and_then(|id| self.session_mut(id)) {
            if let Some(n) = s.counts.get_mut(&old_state) {
                *n -= 1;
                if *n == 0 {
                    s.counts.remove(&old_state);
                }
            }
            *s.counts.entry(state.as_str().to_owned()).or_default() += 1;
        }
        i
    }

    fn session_mut(&mut self, id: &str) -> Option<&mut SessionSummary> {
        let i = *self.by_session.get(id)?;
        self.sessions.get_mut(i)
    }
}
