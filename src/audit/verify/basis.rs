//! What allowed each dispatch, as the journal alone proves it (a verifier with no key): every
//! `action.dispatched` row names a basis, and that basis must fit the rows before it. A decision
//! (a card) only after the action's `approved` row; the credential's policy (`never`, or
//! `writes` for a read) only after `received`; a session grant only after `received`, and only a
//! grant whose `grant.add` row came earlier, for the dispatch row's session, not yet revoked by a
//! `grant.revoke` row, and not past its expiry. The rows of grants are checked too: a grant is
//! recorded once, for the session its row names, and only a recorded grant is revoked. What the
//! journal cannot prove (that a signature is the approver's, that a grant's scope covers the
//! request) is the agent's to check before it writes the row.
use super::plain::Plain;
use crate::wire::journal::{ActionRow, Basis, GrantAdded, GrantRevoked, Kind};
use crate::wire::{Approval, State};
use std::collections::HashMap;

/// A grant dispatch may be journaled this long after the expiry the agent checked against (it
/// checks, then appends the row with a timestamp of its own).
const EXPIRY_SLACK_MS: i64 = 1000;

/// What the basis checks need of one row, taken from the row alone (by a worker thread).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Detail {
    None,
    /// An `action.dispatched` row's basis (`None`: it names none), or why its body cannot be read.
    Dispatch(Result<Option<Basis>, String>),
    /// A `grant.add` row's body, or why it cannot be read (boxed, as the next one: rare rows, and
    /// every row's `Facts` is as large as its largest detail).
    GrantAdd(Result<Box<GrantAdded>, String>),
    /// A `grant.revoke` row's body, or why it cannot be read.
    GrantRevoke(Result<Box<GrantRevoked>, String>),
}

impl Detail {
    /// The detail of a row of `kind` with this body.
    pub(super) fn of(kind: Option<Kind>, seq: i64, body: &str) -> Self {
        let unreadable =
            |e: serde_json::Error, k: Kind| format!("row {seq} ({k}) has no readable body: {e}");
        match kind {
            Some(Kind::Action(State::Dispatched)) => {
                Detail::Dispatch(dispatch_basis(body).map_or_else(
                    || {
                        serde_json::from_str::<ActionRow>(body)
                            .map(|b| b.basis)
                            .map_err(|e| unreadable(e, Kind::Action(State::Dispatched)))
                    },
                    Ok,
                ))
            }
            Some(Kind::GrantAdd) => Detail::GrantAdd(
                serde_json::from_str(body)
                    .map(Box::new)
                    .map_err(|e| unreadable(e, Kind::GrantAdd)),
            ),
            Some(Kind::GrantRevoke) => Detail::GrantRevoke(
                serde_json::from_str(body)
                    .map(Box::new)
                    .map_err(|e| unreadable(e, Kind::GrantRevoke)),
            ),
            _ => Detail::None,
        }
    }
}

/// A dispatch row's basis read the quick way (`Plain`): a body that is exactly an object of
/// `ActionRow`'s fields other than `touch`, each at most once, with no escape and no space, and a
/// basis whose fields are exactly one variant's; `None` (read it as an `ActionRow`, which says
/// why it does not read) for anything else: an escaped string, a key `ActionRow` ignores or
/// `touch`, a basis with other keys or with the fields of two variants (the untagged `Basis`
/// decides those). Where it answers, the answer is `ActionRow`'s (tested against it); it spares
/// a worker serde's owned strings and the untagged `Basis`, which buffers each value and tries
/// its variants in turn.
fn dispatch_basis(body: &str) -> Option<Option<Basis>> {
    read_dispatch(body).map(|d| d.basis)
}

/// A dispatch row as the quick reader reads it: its basis, and (for the checks held to a key)
/// the action hash, summary and credential it names.
pub(super) struct Quick<'a> {
    pub(super) basis: Option<Basis>,
    pub(super) hash: &'a str,
    pub(super) summary: &'a str,
    pub(super) credential: &'a str,
}

/// `dispatch_basis`, keeping what the row names besides its basis; `None` where it does not
/// answer (serde reads those).
pub(super) fn read_dispatch(body: &str) -> Option<Quick<'_>> {
    thread_local! {
        /// Where the quotes are in the body being read (`Plain`), kept from one dispatch to the next.
        static QUOTES: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    QUOTES.with_borrow_mut(|quotes| {
        let mut p = Plain::new(body, quotes)?;
        p.eat("{")?;
        // The fields met so far, one bit each in `FIELDS`' order; the first five are required.
        const FIELDS: [&str; 8] = [
            "state",
            "tool",
            "credential",
            "summary",
            "hash",
            "reason",
            "method",
            "basis",
        ];
        let (mut met, mut basis) = (0u8, None);
        let (mut hash, mut summary, mut credential) = ("", "", "");
        loop {
            let key = p.key()?;
            let bit = 1 << FIELDS.iter().position(|f| *f == key)?;
            if met & bit != 0 {
                return None;
            }
            met |= bit;
            match key {
                "state" => State::parse(p.string()?).map(drop)?,
                "reason" => p.opt_str().map(drop)?,
                "method" => match p.opt_str()? {
                    None | Some("pin" | "passphrase" | "key") => {}
                    Some(_) => return None,
                },
                "basis" => basis = read_basis(&mut p)?,
                "hash" => hash = p.string()?,
                "summary" => summary = p.string()?,
                "credential" => credential = p.string()?,
                _ => p.string().map(drop)?,
            }
            if p.eat(",").is_none() {
                break;
            }
        }
        p.eat("}")?;
        (p.done() && met & 0b1_1111 == 0b1_1111).then_some(Quick {
            basis,
            hash,
            summary,
            credential,
        })
    })
}

/// `null` or a basis object whose fields are exactly one variant's (a field that is `null` is
/// not there, as for serde's `Option`).
fn read_basis(p: &mut Plain<'_, '_>) -> Option<Option<Basis>> {
    if p.eat("null").is_some() {
        return Some(None);
    }
    p.eat("{")?;
    let mut f: [Option<&str>; 5] = [None; 5];
    let mut met = 0u8;
    if p.eat("}").is_none() {
        loop {
            let key = p.key()?;
            let i = ["decision", "nonce", "grant", "grant_nonce", "policy"]
                .iter()
                .position(|k| *k == key)?;
            if met & (1 << i) != 0 {
                return None;
            }
            met |= 1 << i;
            f[i] = p.opt_str()?;
            if p.eat(",").is_none() {
                break;
            }
        }
        p.eat("}")?;
    }
    let basis = match f {
        [Some(decision), Some(nonce), None, None, None] => Basis::Decision {
            decision: decision.to_owned(),
            nonce: nonce.to_owned(),
        },
        [None, None, Some(grant), Some(grant_nonce), None] => Basis::Grant {
            grant: grant.to_owned(),
            grant_nonce: grant_nonce.to_owned(),
        },
        [None, None, None, None, Some(policy)] => Basis::Policy {
            policy: match policy {
                "each" => Approval::Each,
                "session" => Approval::Session,
                "writes" => Approval::Writes,
                "never" => Approval::Never,
                _ => return None,
            },
        },
        _ => return None,
    };
    Some(Some(basis))
}

/// A recorded grant, as far as the journal has told so far.
#[derive(Debug)]
struct Grant {
    session: Box<str>,
    /// Its expiry, in milliseconds since the epoch.
    expires_ms: i64,
    revoked: bool,
}

/// Every grant the journal recorded so far.
#[derive(Debug, Default)]
pub(super) struct Grants {
    by_id: HashMap<Box<str>, Grant, foldhash::fast::RandomState>,
}

fn millis(ts: &str) -> Option<i64> {
    ts.parse::<jiff::Timestamp>()
        .ok()
        .map(|t| t.as_millisecond())
}

impl Grants {
    /// A `grant.add` or `grant.revoke` row at `seq` whose session column is `session`; `Err` says
    /// how it contradicts the journal.
    pub(super) fn apply(
        &mut self,
        seq: i64,
        session: Option<&str>,
        detail: &Detail,
    ) -> Result<(), String> {
        match detail {
            Detail::GrantAdd(add) => {
                let add = add.as_ref().map_err(Clone::clone)?;
                if session != Some(add.session.as_str()) {
                    return Err(format!("row {seq} records grant {} for session {} but stands in another session's rows", add.grant, add.session));
                }
                let expires_ms = millis(&add.expires_at).ok_or_else(|| {
                    format!(
                        "row {seq} records grant {} with an expiry that is not a time",
                        add.grant
                    )
                })?;
                let grant = Grant {
                    session: add.session.as_str().into(),
                    expires_ms,
                    revoked: false,
                };
                if self
                    .by_id
                    .insert(add.grant.as_str().into(), grant)
                    .is_some()
                {
                    return Err(format!(
                        "row {seq} records grant {} a second time",
                        add.grant
                    ));
                }
                Ok(())
            }
            Detail::GrantRevoke(rev) => {
                let rev = rev.as_ref().map_err(Clone::clone)?;
                match self.by_id.get_mut(rev.grant.as_str()) {
                    Some(g) if !g.revoked && Some(&*g.session) == session => {
                        g.revoked = true;
                        Ok(())
                    }
                    Some(g) if g.revoked => {
                        Err(format!("row {seq} revokes grant {} again", rev.grant))
                    }
                    Some(_) => Err(format!(
                        "row {seq} revokes grant {} in another session's rows",
                        rev.grant
                    )),
                    None => Err(format!(
                        "row {seq} revokes grant {}, which no earlier row recorded",
                        rev.grant
                    )),
                }
            }
            _ => Ok(()),
        }
    }

    /// Whether a dispatch of `action` at `seq` (row session `session`, time `ts`), whose previous
    /// state was `from`, names a basis that fits the journal; `Err` says why not.
    pub(super) fn check_dispatch(
        &self,
        (seq, ts, session): (i64, &str, Option<&str>),
        action: &str,
        from: State,
        basis: Option<&Basis>,
    ) -> Result<(), String> {
        let after = |want: State, what: &str| {
            if from == want {
                Ok(())
            } else {
                Err(format!("action {action} was dispatched at seq {seq} on {what}, but its previous row is {from}, not {want}"))
            }
        };
        match basis {
            None => Err(format!("action {action} was dispatched at seq {seq} with no basis: neither a decision, a grant nor a policy")),
            Some(Basis::Decision { .. }) => after(State::Approved, "a person's decision"),
            Some(Basis::Policy { policy }) => {
                if !matches!(policy, Approval::Never | Approval::Writes) {
                    return Err(format!("action {action} was dispatched at seq {seq} on the policy {}, which never runs an action without a card", policy.as_str()));
                }
                after(State::Received, "the credential's policy")
            }
            Some(Basis::Grant { grant, .. }) => {
                after(State::Received, "a session grant")?;
                let Some(g) = self.by_id.get(grant.as_str()) else {
                    return Err(format!("action {action} was dispatched at seq {seq} on grant {grant}, which no earlier row recorded"));
                };
                if g.revoked {
                    return Err(format!("action {action} was dispatched at seq {seq} on grant {grant}, which was revoked before"));
                }
                if session != Some(&*g.session) {
                    return Err(format!("action {action} was dispatched at seq {seq} on grant {grant}, which was given to session {}, not this one", g.session));
                }
                match millis(ts) {
                    Some(at) if at <= g.expires_ms + EXPIRY_SLACK_MS => Ok(()),
                    _ => Err(format!("action {action} was dispatched at seq {seq} on grant {grant} after it expired")),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::proptests::Rng;

    /// Every answer of the quick reader is the `ActionRow` reading's: its basis, and the hash,
    /// summary and credential it keeps for the checks held to a key.
    fn agrees(body: &str) {
        if let Some(quick) = read_dispatch(body) {
            let full = serde_json::from_str::<ActionRow>(body).ok();
            let full = full.map(|r| (r.basis, r.hash, r.summary, r.credential));
            let quick = (
                quick.basis,
                quick.hash.to_owned(),
                quick.summary.to_owned(),
                quick.credential.to_owned(),
            );
            assert_eq!(Some(quick), full, "{body}");
        }
    }

    #[test]
    fn the_quick_basis_reader_answers_as_action_row_does_or_not_at_all() {
        let row = |basis: &str| {
            format!(
                r#"{{"basis":{basis},"credential":"api","hash":"ab","state":"dispatched","summary":"GET /","tool":"http_request"}}"#
            )
        };
        let bases = [
            r#"{"decision":"dec_1","nonce":"n1"}"#,
            r#"{"grant":"grt_1","grant_nonce":"n1"}"#,
            r#"{"policy":"never"}"#,
            r#"{"policy":"each"}"#,
            r#"{"policy":"sometimes"}"#,
            r#"{"decision":"dec_1","nonce":"n1","grant":"g","grant_nonce":"x"}"#,
            r#"{"decision":"dec_1","grant":"g","grant_nonce":"x"}"#,
            r#"{"decision":null,"nonce":null,"policy":"writes"}"#,
            r#"{"decision":"dec_1","nonce":"n1","other":1}"#,
            r#"{"decision":"dec_1","decision":"dec_2","nonce":"n1"}"#,
            r#"{"decision":"d\u0065c","nonce":"n1"}"#,
            r#"{"decision":1,"nonce":"n1"}"#,
            r#"{"nonce":"n1"}"#,
            r#"{}"#,
            r#"[]"#,
            r#""dec_1""#,
            "null",
        ];
        let mut bodies: Vec<String> = bases.iter().map(|b| row(b)).collect();
        for b in bases {
            bodies.push(row(b).replace(r#","tool":"http_request""#, ""));
            bodies.push(row(b).replace(r#""tool":"http_request""#, r#""tool":"http\"req""#));
            bodies.push(row(b).replace('}', r#","reason":"x","method":"pin","extra":[1]}"#));
        }
        bodies.push(row("null").replace(r#""basis":null,"#, ""));
        // `touch` is a field of `ActionRow`'s that the quick reader leaves to it; a state of
        // another name, a method, an escape in a field the reader would not keep.
        let decision = row(bases[0]);
        for tail in [
            r#","touch":null}"#,
            r#","touch":5}"#,
            r#","touch":{}}"#,
            r#","method":"key"}"#,
            r#","method":"thumb"}"#,
            r#","method":null,"reason":null}"#,
        ] {
            bodies.push(format!("{}{tail}", &decision[..decision.len() - 1]));
        }
        for state in ["failed_before_send", "FailedBeforeSend", "completed"] {
            bodies.push(decision.replace("dispatched", state));
        }
        bodies.push(decision.replace("GET /", r"GET \/"));
        let quick = bodies
            .iter()
            .filter(|b| dispatch_basis(b).is_some())
            .count();
        assert!(
            quick >= 8,
            "the quick reader answers the vault's own bodies"
        );
        // Random damage to each: nothing the quick reader answers differs.
        let mut rng = Rng(0x0d15_a7c4);
        const NOISE: &[u8] = b"{}[]\",:\\ 0123456789-truefalsn";
        for b in &bodies {
            agrees(b);
            for _ in 0..200 {
                let mut m = b.as_bytes().to_vec();
                for _ in 0..=rng.below(3) {
                    let at = rng.below(m.len());
                    match rng.below(3) {
                        0 => m[at] = NOISE[rng.below(NOISE.len())],
                        1 => m.insert(at, NOISE[rng.below(NOISE.len())]),
                        _ => {
                            m.remove(at);
                        }
                    }
                }
                if let Ok(m) = std::str::from_utf8(&m) {
                    agrees(m);
                }
            }
        }
    }
}
