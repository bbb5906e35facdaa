//! The verdict of a verification: why a chain is not intact (`Reason`), where (`Failure`), the
//! last verified row, and what the approver's signatures proved (`Signatures`), as `vault
//! verify --json` prints it.
use crate::wire::journal::{HeadLine, VerifyLine};

/// Why the chain is not intact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// The stored hash is not blake3(prev ‖ row): the row was changed after it was written.
    HashMismatch,
    /// The stored prev is not the previous row's hash: a row before it was removed or rewritten.
    PrevMismatch,
    /// A seq is missing.
    Gap,
    /// A seq appears twice.
    Duplicate,
    /// Rows are out of order.
    Reordered,
    /// A row cannot be read at all (missing field, bad hex, bad JSON, wrong type).
    Malformed,
    /// Row 1 is not a `vault.init` row chained to the genesis of its vault id, or there is no row.
    BadGenesis,
    /// An anchor names a seq beyond the end of the journal: rows were cut off.
    TruncatedBelowAnchor,
    /// An anchor's hash differs from the row at its seq: history was rewritten.
    AnchorMismatch,
    /// An action's state in the `actions` table differs from its last journal transition.
    ActionStateMismatch,
    /// An action's journal rows break the lifecycle: a state that cannot follow the previous one
    /// (`completed → dispatched`), a first row that is not `pending`/`received`, or a dispatch
    /// whose decision nonce an earlier dispatch already spent.
    IllegalTransition,
    /// The `meta` pause row disagrees with the last `vault.pause` / `vault.resume` row.
    PauseStateMismatch,
    /// A dispatch names no basis, or one the journal does not back: a decision on an action
    /// that was not `approved`, a policy or grant on one that was not `received`, a grant no
    /// earlier `grant.add` row recorded, revoked before, of another session or expired.
    NoValidBasis,
    /// A `grant.add` or `grant.revoke` row that does not read or contradicts the journal: a
    /// grant recorded twice or in another session's rows, a revocation of an unrecorded grant.
    GrantMismatch,
    /// An approval of a credential that needs a security-key touch carries none, or a touch that
    /// does not verify: from an unregistered or removed key, over another action or decision, or
    /// with a counter that went back, or used twice; or a key row that does not read.
    BadTouch,
    /// Held to an approver key: a row's signature is not that key's, does not read, or signs
    /// something other than its row says (another action, hash, scope, key, policy); or row 1
    /// names another approver.
    BadSignature,
    /// Held to an approver key: a row only the person decides (an approval, a grant, a
    /// revocation, a key or credential change, a resume) carries no signature, after the rows
    /// before it did.
    Unsigned,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::HashMismatch => "hash mismatch",
            Reason::PrevMismatch => "prev mismatch",
            Reason::Gap => "gap",
            Reason::Duplicate => "duplicate",
            Reason::Reordered => "reordered",
            Reason::Malformed => "malformed row",
            Reason::BadGenesis => "bad genesis",
            Reason::TruncatedBelowAnchor => "truncated below anchor",
            Reason::AnchorMismatch => "anchor mismatch",
            Reason::ActionStateMismatch => "action state mismatch",
            Reason::IllegalTransition => "illegal transition",
            Reason::PauseStateMismatch => "pause state mismatch",
            Reason::NoValidBasis => "no valid basis",
            Reason::GrantMismatch => "grant mismatch",
            Reason::BadTouch => "bad touch",
            Reason::BadSignature => "bad signature",
            Reason::Unsigned => "unsigned",
        }
    }
}

/// The first thing found wrong. `seq` is the first position whose row is wrong or missing:
/// every row below it was verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub seq: Option<i64>,
    pub reason: Reason,
    pub detail: String,
}

impl Failure {
    /// `"<reason>: <detail>"`, the `reason` of `vault verify --json`.
    pub fn message(&self) -> String {
        format!("{}: {}", self.reason.as_str(), self.detail)
    }
}

/// The last verified row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    pub seq: i64,
    pub hash: [u8; 32],
}

/// What the approver's signatures proved: the key the rows were held to (none: no key was
/// given, and nothing was checked but the chain and what the rows say of each other), from which
/// row on the journal carries signatures, how many were checked, and how many dispatches (or
/// touches) rest on rows written before signatures began, which no key can hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Signatures {
    pub key: Option<[u8; 32]>,
    pub from_seq: Option<i64>,
    pub checked: u64,
    pub unheld: u64,
    pub first_unheld: Option<i64>,
}

/// The verdict: how many rows were verified, the last verified row, the first failure, and what
/// the approver's signatures proved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    pub rows: u64,
    pub head: Option<Head>,
    pub failure: Option<Failure>,
    pub signatures: Signatures,
}

impl Report {
    pub fn ok(&self) -> bool {
        self.failure.is_none()
    }

    /// Whether the journal is held to the approver's key: intact, checked against a key, and no
    /// dispatch resting on a row written before signatures began.
    pub fn held(&self) -> bool {
        self.ok() && self.signatures.key.is_some() && self.signatures.unheld == 0
    }

    /// What an intact journal could not be held to, in one line (`None` when held, or failed).
    pub fn unchecked(&self) -> Option<String> {
        if !self.ok() || self.held() {
            return None;
        }
        let s = &self.signatures;
        if s.key.is_none() {
            return Some(match s.from_seq {
                Some(from) => format!("the approver's signatures (the rows carry them from row {from} on; give --approver-key KEY, the key `vault approver show-key` prints, to check them): without them, an export rewritten and re-hashed from its first changed row passes"),
                None => "the approver's signatures (no row carries one, and no --approver-key was given): without them, an export rewritten and re-hashed from its first changed row passes".to_owned(),
            });
        }
        let first = s
            .first_unheld
            .map_or(String::new(), |f| format!(", the first at row {f}"));
        let since = match s.from_seq {
            Some(from) => format!("signatures begin at row {from}"),
            None => "no row carries a signature".to_owned(),
        };
        Some(format!(
            "{} dispatch{} or touch{} rest on rows written before the journal carried signatures ({since}{first}): the chain covers them, no key does",
            s.unheld,
            if s.unheld == 1 { "" } else { "es" },
            if s.unheld == 1 { "" } else { "es" },
        ))
    }

    /// The verdict as `vault verify --json` prints it.
    pub fn to_line(&self) -> VerifyLine {
        VerifyLine {
            ok: self.ok(),
            rows: self.rows,
            head: self.head.map(|h| HeadLine {
                seq: h.seq,
                hash: hex::encode(h.hash),
            }),
            first_bad_seq: self.failure.as_ref().and_then(|f| f.seq),
            reason: self.failure.as_ref().map(Failure::message),
            held: self.held(),
            signatures: self.signatures.checked,
            signed_from: self.signatures.from_seq,
            unchecked: self.unchecked(),
        }
    }

    /// `to_line` as one line of JSON (`VerifyLine`'s key order).
    pub fn to_json_line(&self) -> String {
        serde_json::to_string(&self.to_line()).expect("a report serializes")
    }
}
