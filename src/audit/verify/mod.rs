//! Verifying the chain: recomputing every row's hash from the genesis, naming the first row that
//! was changed, removed, inserted, reordered or cut off, checking anchors, each action's
//! lifecycle and the basis of each dispatch (`basis.rs`), and (when an `actions` table exists)
//! that each action's state equals its last journal transition. Held to the approver's public
//! key (`Verifier::held_to`), each signature a row carries is checked (`sigs.rs`, on the
//! workers) and every dispatch must rest on what the approver signed (`held.rs`).
mod basis;
#[cfg(test)]
mod file_tests;
mod held;
#[cfg(test)]
mod held_tests;
mod line;
pub(crate) mod parallel;
mod plain;
mod report;
mod seen;
mod sigs;
mod sources;
mod summary;
mod touches;

pub use parallel::CHUNK_ROWS;
pub use report::{Failure, Head, Reason, Report, Signatures};
pub use seen::Transitions;
pub use sources::{
    verify_file, verify_file_with, verify_store, verify_store_parallel, verify_store_with,
};

use super::anchor::Anchor;
use super::{genesis, put_canonical_row};
use crate::wire::journal::{Basis, Kind, VaultInit};
use basis::Detail;
use ed25519_dalek::{Signature, VerifyingKey};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Errors that stop verification before a verdict (a verdict that the chain is bad is a `Report`).
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error("cannot read {path}: {source}; check the path and its permissions")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("database error reading the journal: {0}; run `vault doctor`")]
    Sql(#[from] rusqlite::Error),
    /// Opening a reader or reading the `meta` table.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

/// One journal row as read, borrowed from the database row or the export line.
#[derive(Debug, Clone, Copy)]
pub struct RowRef<'a> {
    pub seq: i64,
    pub ts: &'a str,
    pub kind: &'a str,
    pub session: Option<&'a str>,
    pub action: Option<&'a str>,
    /// The body's JSON text exactly as stored (canonical when untouched).
    pub body: &'a str,
    pub prev: &'a [u8],
    pub hash: &'a [u8],
}

/// blake3(prev ‖ canonical row) of a row as read (`buf` is scratch space): what its stored `hash`
/// must be.
fn computed_hash(buf: &mut Vec<u8>, row: &RowRef<'_>) -> [u8; 32] {
    buf.clear();
    buf.extend_from_slice(row.prev);
    put_canonical_row(buf, row);
    *blake3::hash(buf).as_bytes()
}

/// What the in-order checks need of a row that depends on that row alone, so that a worker
/// thread can take it (`parallel`): its computed hash, its kind, what a dispatch or grant row
/// says (`basis::Detail`), and the hashes its action id and decision nonce are looked up by
/// (`seen::key`; 0 for a row without one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Facts {
    hash: [u8; 32],
    kind: Option<Kind>,
    detail: Detail,
    action_key: u64,
    nonce_key: u64,
    /// Held to a key, the `seen::key` of the row's session (1 for none) where it names an
    /// action, so the in-order checks can keep each action to one session; 0 otherwise.
    session_key: u64,
    /// The approver's signature the row carries, as far as the row alone tells (`sigs.rs`).
    held: sigs::Held,
}

impl Facts {
    /// The facts of `row` (`buf` is scratch space for its canonical form).
    pub fn of(buf: &mut Vec<u8>, row: &RowRef<'_>) -> Self {
        Self::hashed(computed_hash(buf, row), row)
    }

    /// `of`, held to `key`: the signature the row carries is read, matched against the row and
    /// checked (alone; the workers check a chunk's in one batch).
    pub fn of_held(buf: &mut Vec<u8>, row: &RowRef<'_>, key: &VerifyingKey) -> Self {
        let hash = computed_hash(buf, row);
        let mut message = Vec::new();
        let (mut facts, signature) = Self::keyed(hash, row, Some(key), &mut message);
        if let Some(signature) = signature {
            if !sigs::verify_all(key, &[&message], &[signature])[0] {
                facts.signature_failed(row.seq);
            }
        }
        facts
    }

    /// The facts of `row` whose hash, blake3(prev ‖ canonical row), was taken already.
    pub(crate) fn hashed(hash: [u8; 32], row: &RowRef<'_>) -> Self {
        Self::keyed(hash, row, None, &mut Vec::new()).0
    }

    /// `hashed`, held to `key`: a signature the row carries is read and matched against the row,
    /// its message appended to `message` and returned for the caller to verify.
    pub(crate) fn keyed(
        hash: [u8; 32],
        row: &RowRef<'_>,
        key: Option<&VerifyingKey>,
        message: &mut Vec<u8>,
    ) -> (Self, Option<Signature>) {
        let kind = Kind::parse(row.kind);
        let (held, signature) = sigs::read(row, kind, key, message);
        let detail = Detail::of(kind, row.seq, row.body);
        let nonce_key = match &detail {
            Detail::Dispatch(Ok(Some(Basis::Decision { nonce, .. }))) => seen::key(nonce),
            _ => 0,
        };
        let facts = Self {
            hash,
            kind,
            detail,
            action_key: row.action.map_or(0, seen::key),
            nonce_key,
            session_key: match (key, row.action) {
                (Some(_), Some(_)) => row.session.map_or(1, seen::key),
                _ => 0,
            },
            held,
        };
        (facts, signature)
    }

    /// The signature whose message `keyed` returned is not the approver's.
    pub(crate) fn signature_failed(&mut self, seq: i64) {
        self.held = sigs::Held::Bad(format!(
            "row {seq}'s signature is not the approver's over what it signs: the row was forged or changed, or the key given is not this vault's approver"
        ));
    }
}

/// A streaming verifier: feed rows in order with `push` until it returns false, then `finish`.
#[derive(Debug)]
pub struct Verifier {
    expected: i64,
    prev: [u8; 32],
    rows: u64,
    head: Option<Head>,
    failure: Option<Failure>,
    /// A seq above the expected one was seen; the next row tells a gap from a reordering.
    pending_gap: Option<(i64, i64)>,
    vault_id: Option<String>,
    anchors: BTreeMap<i64, Vec<[u8; 32]>>,
    /// Last transition (seq, state) per action.
    transitions: Transitions,
    /// Decision nonces already spent by an `action.dispatched` row.
    spent: seen::Spent,
    /// The grants recorded so far, and whether each was revoked.
    grants: basis::Grants,
    /// Registered keys, what credentials require, sessions' profiles (`touches.rs`).
    touches: touches::Touches,
    /// The seq of the `vault.pause` in force (none after a `vault.resume`).
    paused: Option<i64>,
    /// The approver's key the rows are held to, and what the signed rows told so far.
    held: held::Held,
    buf: Vec<u8>,
}

impl Verifier {
    /// `vault_id`: the id the chain must start from (None: take it from row 1, as for an export).
    pub fn new(vault_id: Option<&str>, anchors: &[Anchor]) -> Self {
        let mut map: BTreeMap<i64, Vec<[u8; 32]>> = BTreeMap::new();
        for a in anchors {
            map.entry(a.seq).or_default().push(a.hash);
        }
        Self {
            expected: 1,
            prev: [0; 32],
            rows: 0,
            head: None,
            failure: None,
            pending_gap: None,
            vault_id: vault_id.map(str::to_owned),
            anchors: map,
            transitions: Transitions::default(),
            spent: Default::default(),
            grants: basis::Grants::default(),
            touches: touches::Touches::default(),
            paused: None,
            held: held::Held::new(None),
            buf: Vec::with_capacity(512),
        }
    }

    /// Holds the rows to the approver's public key `key`: every signature is checked, and each
    /// dispatch must rest on what it signed (`held.rs`).
    pub fn held_to(mut self, key: VerifyingKey) -> Self {
        self.held = held::Held::new(Some(key));
        self
    }

    /// The approver key the rows are held to.
    pub fn key(&self) -> Option<&VerifyingKey> {
        self.held.key()
    }

    /// Checks one `action.<state>` row against the lifecycle (docs/design.md §4): the first row of an
    /// action is `pending` or `received`, each next state is a legal successor of the last, a
    /// dispatch names a basis the journal backs (`basis.rs`), and it spends a decision nonce at
    /// most once.
    fn check_lifecycle(
        &mut self,
        exp: i64,
        row: &RowRef<'_>,
        action: &str,
        facts: &Facts,
    ) -> Result<(), (Reason, String)> {
        let illegal = |d: String| (Reason::IllegalTransition, d);
        let kind = row.kind;
        let to = match facts.kind {
            Some(Kind::Action(to)) => to,
            // A note about the action (`approval.pin_wrong`) is history, not a step of it.
            Some(note) if note.notes_action() => return Ok(()),
            Some(other) => {
                return Err(illegal(format!(
                    "row {exp} is a {other} row but names action {action}"
                )))
            }
            None if kind.starts_with("action.") => {
                return Err(illegal(format!(
                    "row {exp} names an unknown state {kind:?}"
                )))
            }
            // A kind this build does not know (a newer build's row) is history, not an action step.
            None => return Ok(()),
        };
        let state = to.as_str();
        // One lookup per row: the entry is updated in place at the end.
        let Self {
            transitions,
            spent,
            grants,
            held,
            touches,
            paused,
            ..
        } = self;
        let last = transitions.last_mut(facts.action_key, action);
        // Held to a key: an action's rows stay in the session it was asked for in (a grant given
        // on it binds to that session, `check_grant_session`).
        if let Some(l) = &last {
            if facts.session_key != 0 && l.session != 0 && l.session != facts.session_key {
                return Err(illegal(format!("action {action} appears at seq {exp} in another session than the one its rows began in (seq {})", l.seq)));
            }
        }
        match last.as_ref().map(|l| (l.seq, l.state)) {
            None if !to.is_initial() => {
                return Err(illegal(format!("action {action} first appears at seq {exp} as {state}, but an action starts pending or received")));
            }
            Some((seq, from)) if !from.can_go(to) => {
                return Err(illegal(format!("action {action} went from {from} (seq {seq}) to {state} (seq {exp}), which the lifecycle does not allow")));
            }
            Some((_, from)) => {
                if let Detail::Dispatch(basis) = &facts.detail {
                    let basis = basis.as_ref().map_err(|e| illegal(e.clone()))?;
                    grants
                        .check_dispatch((exp, row.ts, row.session), action, from, basis.as_ref())
                        .map_err(|d| (Reason::NoValidBasis, d))?;
                    if let Some(Basis::Decision { nonce, .. }) = basis {
                        if !spent.spend(facts.nonce_key, nonce) {
                            return Err(illegal(format!("action {action} was dispatched at seq {exp} on a decision an earlier dispatch already spent")));
                        }
                    }
                    if let (Some(basis), Some(_)) = (basis, held.key()) {
                        let said = match &facts.held {
                            sigs::Held::Dispatch(d) => Some(&**d),
                            _ => None,
                        };
                        let at = held::At {
                            seq: exp,
                            ts: row.ts,
                            action,
                            profile: row.session.and_then(|s| touches.profile_of(s)),
                            paused: *paused,
                        };
                        held.dispatch(&at, basis, said)
                            .map_err(|d| (Reason::NoValidBasis, d))?;
                    }
                }
            }
            None => {}
        }
        // The key is allocated once per action, not once per row.
        match last {
            Some(last) => (last.seq, last.state) = (exp, to),
            None => transitions.first((facts.action_key, action), exp, to, facts.session_key),
        }
        Ok(())
    }

    fn fail(&mut self, seq: Option<i64>, reason: Reason, detail: String) -> bool {
        self.failure = Some(Failure {
            seq,
            reason,
            detail,
        });
        false
    }

    /// A row that could not be read; it stands where seq `expected` belongs.
    pub fn push_malformed(&mut self, detail: String) -> bool {
        if self.failure.is_some() {
            return false;
        }
        let at = self.pending_gap.map_or(self.expected, |(e, _)| e);
        self.fail(Some(at), Reason::Malformed, detail)
    }

    /// Checks the next row. Returns false once the chain is known to be broken (stop feeding).
    pub fn push(&mut self, row: &RowRef<'_>) -> bool {
        let facts = match self.held.key().copied() {
            Some(key) => Facts::of_held(&mut self.buf, row, &key),
            None => Facts::of(&mut self.buf, row),
        };
        self.push_facts(row, &facts)
    }

    /// `push` for a row whose `Facts` were already taken (by a worker thread: they depend on the
    /// row alone; only the checks below need the order).
    pub fn push_facts(&mut self, row: &RowRef<'_>, facts: &Facts) -> bool {
        if self.failure.is_some() {
            return false;
        }
        match self.check_order(row) {
            Ok(true) => {}
            // A row ahead of its place: the next one says whether it is a gap or a swap.
            Ok(false) => return true,
            Err((seq, reason, detail)) => return self.fail(Some(seq), reason, detail),
        }
        let exp = self.expected;
        match self.check_row(exp, row, facts) {
            Err((reason, detail)) => self.fail(Some(exp), reason, detail),
            Ok(hash) => {
                match facts.kind {
                    Some(Kind::VaultPause) => self.paused = Some(exp),
                    Some(Kind::VaultResume) => self.paused = None,
                    _ => {}
                }
                self.prev = hash;
                self.head = Some(Head { seq: exp, hash });
                self.rows += 1;
                self.expected += 1;
                true
            }
        }
    }

    /// Whether `row` is the expected seq (`Ok(true)`), ahead of it (`Ok(false)`: held until the
    /// next row tells a deletion from a swap), or out of order.
    fn check_order(&mut self, row: &RowRef<'_>) -> Result<bool, (i64, Reason, String)> {
        let exp = self.expected;
        if let Some((e, found)) = self.pending_gap.take() {
            return Err(if row.seq == e {
                (
                    e,
                    Reason::Reordered,
                    format!("seq {e} comes after seq {found}: rows were swapped or moved"),
                )
            } else {
                (e, Reason::Gap, format!("seq {e} is missing: the row after seq {} is seq {found}; a row was deleted", e - 1))
            });
        }
        if row.seq > exp {
            self.pending_gap = Some((exp, row.seq));
            return Ok(false);
        }
        if row.seq == exp - 1 {
            return Err((
                exp,
                Reason::Duplicate,
                format!("seq {} appears twice; a row was copied", row.seq),
            ));
        }
        if row.seq < exp {
            return Err((
                exp,
                Reason::Reordered,
                format!(
                    "seq {} appears again after seq {}: rows were moved",
                    row.seq,
                    exp - 1
                ),
            ));
        }
        Ok(true)
    }

    /// The row at its place: linked to the previous one (or a genesis), hashing to its `hash`,
    /// agreeing with any anchor at its seq, and a legal lifecycle step. Returns its hash.
    fn check_row(
        &mut self,
        exp: i64,
        row: &RowRef<'_>,
        facts: &Facts,
    ) -> Result<[u8; 32], (Reason, String)> {
        let hash = facts.hash;
        if row.prev.len() != 32 || row.hash.len() != 32 {
            return Err((
                Reason::Malformed,
                format!("row {exp}: prev and hash must be 32 bytes"),
            ));
        }
        if exp == 1 {
            self.check_genesis(row, facts.kind)
                .map_err(|detail| (Reason::BadGenesis, detail))?;
            if self.vault_id.is_none() {
                self.vault_id = serde_json::from_str::<VaultInit>(row.body)
                    .ok()
                    .map(|b| b.vault_id);
            }
            self.held.genesis(row.body)?;
        } else if row.prev != self.prev && !crate::mutation::off("verify_chain") {
            return Err((Reason::PrevMismatch, format!("row {exp}'s prev is not the hash of row {}: the history before it was rewritten", exp - 1)));
        }
        if row.hash != hash && !crate::mutation::off("verify_chain") {
            return Err((
                Reason::HashMismatch,
                format!("row {exp} was changed after it was written (its hash does not match its contents)"),
            ));
        }
        if let Some(bad) = self
            .anchors
            .get(&exp)
            .and_then(|hs| hs.iter().find(|h| **h != hash))
        {
            let detail = format!(
                "the anchor {exp}:{} differs from the journal's hash {} at that seq: history was rewritten",
                hex::encode(bad),
                hex::encode(hash)
            );
            return Err((Reason::AnchorMismatch, detail));
        }
        // A step of an action's lifecycle names its action: one that names none would escape
        // every lifecycle and basis check below (the fuzz target forged such a dispatch).
        if row.action.is_none() && row.kind.starts_with("action.") {
            return Err((
                Reason::IllegalTransition,
                format!("row {exp} ({:?}) names no action: every step of an action's lifecycle names the action it moves", row.kind),
            ));
        }
        let vault_id = self.vault_id.as_deref().unwrap_or_default();
        let grant = match &facts.detail {
            Detail::GrantAdd(Ok(add)) => Some(&**add),
            _ => None,
        };
        self.held
            .row(exp, row, facts.kind, &facts.held, vault_id, grant)?;
        if let (Some(add), sigs::Held::Good(_)) = (grant, &facts.held) {
            self.check_grant_session(exp, add)?;
        }
        if let Some(action) = row.action {
            self.check_lifecycle(exp, row, action, facts)?;
            if facts.kind == Some(Kind::Action(crate::wire::State::Approved)) {
                let vault_id = self.vault_id.as_deref().unwrap_or_default();
                let touched = self
                    .touches
                    .check_approved(vault_id, exp, row.session, row.body)
                    .map_err(|d| (Reason::BadTouch, d))?;
                // A touch by a key registered before signatures began: no key holds it.
                if touched == Some(false) && self.held.key().is_some() {
                    self.held.unheld(exp);
                }
            }
        } else if matches!(facts.detail, Detail::GrantAdd(_) | Detail::GrantRevoke(_)) {
            self.grants
                .apply(exp, row.session, &facts.detail)
                .map_err(|d| (Reason::GrantMismatch, d))?;
        } else if touches::reads_body(facts.kind) {
            let signed = matches!(facts.held, sigs::Held::Good(_) | sigs::Held::Carries(true));
            self.touches
                .apply(exp, facts.kind, row.session, row.body, signed)
                .map_err(|d| (Reason::BadTouch, d))?;
        }
        Ok(hash)
    }

    /// Held to a key: a signed grant names the action it was given on, not a session (the agent
    /// finds the session from its records), so the session its row records must be that
    /// action's.
    fn check_grant_session(
        &self,
        exp: i64,
        add: &crate::wire::journal::GrantAdded,
    ) -> Result<(), (Reason, String)> {
        let want = seen::key(&add.session);
        match self.transitions.session_of(&add.action) {
            Some(s) if s == want || s == 0 => Ok(()),
            Some(_) => Err((Reason::NoValidBasis, format!("row {exp} records grant {} for session {}, but the approver signed it on action {}, which another session asked for", add.grant, add.session, add.action))),
            None => Err((Reason::NoValidBasis, format!("row {exp} records grant {} on action {}, which no earlier row recorded", add.grant, add.action))),
        }
    }

    fn check_genesis(&self, row: &RowRef<'_>, kind: Option<Kind>) -> Result<(), String> {
        if kind != Some(Kind::VaultInit) {
            return Err(format!(
                "row 1 is a {:?} row; a journal starts with vault.init",
                row.kind
            ));
        }
        let body: VaultInit = serde_json::from_str(row.body)
            .map_err(|e| format!("row 1's body is not a vault.init body: {e}"))?;
        let id = body.vault_id.as_str();
        if let Some(want) = &self.vault_id {
            if id != want {
                return Err(format!(
                    "row 1 belongs to vault {id}, but this is vault {want}"
                ));
            }
        }
        if row.prev != genesis(id) {
            return Err(format!(
                "row 1's prev is not the genesis of vault {id} (blake3 of the tag and the id)"
            ));
        }
        Ok(())
    }

    /// The verdict, each action's last transition, and whether the journal ends paused.
    pub fn finish(mut self) -> (Report, Transitions, bool) {
        if self.failure.is_none() {
            if let Some((e, found)) = self.pending_gap.take() {
                self.fail(
                    Some(e),
                    Reason::Gap,
                    format!("seq {e} is missing: the last row is seq {found}"),
                );
            } else if self.rows == 0 {
                self.fail(
                    Some(1),
                    Reason::BadGenesis,
                    "the journal is empty; it must start with a vault.init row".into(),
                );
            } else if let Some((&a, _)) = self.anchors.range(self.expected..).next() {
                let last = self.expected - 1;
                self.fail(
                    Some(self.expected),
                    Reason::TruncatedBelowAnchor,
                    format!("an anchor names seq {a} but the journal ends at seq {last}: rows were cut off"),
                );
            }
        }
        let report = Report {
            rows: self.rows,
            head: self.head,
            failure: self.failure,
            signatures: self.held.sigs,
        };
        (report, self.transitions, self.paused.is_some())
    }
}
