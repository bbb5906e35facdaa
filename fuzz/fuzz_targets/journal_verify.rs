//! Fuzzes the journal verifier (`audit::verify_file`, the streaming `Verifier` behind
//! `vault verify --file`, with and without `--approver-key`): a mutated export must never be
//! accepted.
//!
//! The journal is built once per process, by the vault's own code: `Vault::init` in a temp dir
//! (row 1, `vault.init`), then typed `audit::append` rows inside `Store::write` transactions, a
//! credential of each policy added through `credentials::add_as_approver` (signed), and
//! `audit::record_rejection`: an
//! unlock, two interleaved sessions whose actions go through every terminal state (pending →
//! approved → dispatched on a decision nonce → completed; received → dispatched on the policy →
//! indeterminate; pending → denied / expired / withdrawn; approved → dispatched on its own nonce
//! → failed_before_send; a session grant recorded, received → dispatched on it → completed, the
//! grant revoked), a rejected and a suppressed call, a pause and a resume, a lock. Every row a
//! person decided carries the approver's signature (`signed`: the decisions, the grant, its
//! revocation, the resume, the credentials), made with the vault's approver key. It is exported
//! with `audit::export_to` (the bytes `vault export-audit` writes) and must verify as is, and be
//! held to the approver's key.
//!
//! Input: byte 0 holds the number of phase-1 mutations (bits 0-2), whether a forgery follows
//! (bit 3) and the number of anchors (bits 4-5). Then the anchors: each the true head of the
//! original journal at a chosen seq, or (one in four) a wrong one (a flipped hash, or a seq past
//! the end). Then the phase-1 mutations, in order, on the export's bytes: set, flip, insert or
//! delete bytes; insert a JSON token (whitespace, `\r`, an escape, a quote, a digit, …); cut the
//! bytes; delete, duplicate, swap, move or cut whole lines; edit one field of one row (seq, ts,
//! kind, session, action, prev, hash, or the body: another row's, or one key of it set, removed
//! or added) without touching its hash. Last, optionally, the forgery a person without the key
//! but with the format can do: one row edited (or not) and re-hashed (`One`: only the link to the
//! next row breaks), or every row from one on re-chained, prev and hash recomputed, optionally
//! renumbered (`Chain`: what a rewrite of history with a hash calculator looks like).
//!
//! Each verdict is compared with a reference written here from the byte layout (ARCHITECTURE.md):
//! lines split on `\n` as the verifier reads them, each parsed as an export row (all eight fields,
//! and `"v":2` or no `v`, no others; `session`/`action` absent is null), seqs 1..k in order, row 1
//! a `vault.init` chained to its vault id's genesis, each prev the previous hash, each hash
//! blake3(prev ‖ canonical row) over the body text as written, every anchor at or below k and equal
//! to the hash at its seq, and the lifecycle (an action starts `pending`/`received`, moves only by
//! `State::can_go`, a plain kind never names an action (a note about one, `approval.pin_wrong`,
//! may) and an `action.*` row always names one, an unknown `action.*` kind is refused, a
//! dispatch body reads as `ActionRow`, names a basis that fits (a decision after `approved`, a
//! `never`/`writes` policy or a recorded, unrevoked, unexpired grant of its session after
//! `received`) and spends a decision nonce at most once; a grant is recorded once, in its own
//! session's rows, and only a recorded grant is revoked, once; and what the touch checks read:
//! credential, `session.start` and key rows read as their types, a key registered reads as a COSE
//! key and only a registered one is removed, an approval of a credential that needs a touch
//! carries one, and a touch the fuzzer made, with no key, is refused).
//!
//! Invariants:
//! - no panic, whatever the bytes;
//! - ok ⇒ the reference accepts the bytes, `rows` is the number of lines and `head` is the last
//!   line's seq and hash;
//! - not ok ⇒ the failure names seq `rows + 1`, and the reference accepts the first `rows` lines
//!   (every row below the named one was verified) with the anchors at or below them;
//! - ok ⇒ every row before the forged tail is the original row at that place (same seq, ts, kind,
//!   session, action, body text, prev, hash). Without a forgery (or with `One` on a row that is
//!   not the last), that is every row: **the only journal other than the original that is
//!   accepted is a cut of whole lines at the end (at least row 1 kept) that no anchor reaches**;
//!   a row changed without re-hashing, re-hashed alone (its link to the next row breaks),
//!   deleted, duplicated, swapped or moved, bytes changed inside a row or its body's text, a line
//!   that is not a row, an empty journal, a cut that an anchor reaches, or a wrong anchor: all
//!   refused;
//! - with a forgery, what may be accepted is exactly what the key-less format cannot tell from
//!   an honest journal: a forged tail that is a consistent chain with a legal lifecycle and
//!   agrees with every anchor (the reference says so; an anchor at or after the forged row
//!   refuses it, as does an action whose first row was deleted, a state that cannot follow,
//!   or a decision nonce spent twice); and a forgery with no phase-1 mutation that the reference
//!   accepts is accepted (the verifier does not refuse an honest-looking journal);
//! - bytes that are exactly the export or a cut of it at a line end: accepted exactly when no
//!   anchor is wrong or past the cut, and at least one line is kept; held to the key exactly then;
//! - held to the key (every input is verified both ways), the checks only add: what it accepts
//!   the chain alone accepts (same rows, same head); it accepts no signed payload and signature
//!   the original journal does not hold (no signature can be made without the key; the same one
//!   may be spelled otherwise), and no dispatch on a
//!   person's decision (action, nonce) the original does not hold; and it never refuses what the
//!   chain accepts when nothing was changed. (A forgery that strips a signature from the rows
//!   before the first one left may be accepted, not held: what rests on them is counted.)
//!
//! Accepted as the same journal (no assertion either way beyond the above): JSON whitespace
//! between a line's fields (around the body too: its text runs from its first to its last
//! brace), key order, a string escape that decodes to the same text (`\u0061` for `a`) in `ts`,
//! `kind`, `session` or `action`, `"session"`/`"action"` absent for null, `\r` before a newline,
//! and no final newline. The body is compared as the text hashed, so inside it nothing may
//! differ.
//!
//! On a failed assertion the mutated journal and its anchors are written to
//! `journal_verify-failure-<pid>.jsonl` / `.anchors`, to replay with
//! `vault verify --file F --anchor SEQ:HASH …`.
#![no_main]

use agent_vault::audit::{self, Anchor, Head, Report};
use agent_vault::credentials::{self, Approval, HttpAuth, HttpTarget, NewCredential, Target};
use agent_vault::keys::Passphrase;
use agent_vault::paths::VaultPaths;
use agent_vault::vault::Vault;
use agent_vault::keys::signing::{self, Signed};
use agent_vault::wire::journal::{
    ActionRow, Basis, CallSuppressed, ClientLabel, CredentialBody, GrantAdded, GrantRevoked, Kind,
    Process, RowSignature, SessionEnd, SessionStart, VaultInit, VaultLock, VaultPause,
    VaultResume, VaultUnlock,
};
use agent_vault::wire::touch::Presence;
use agent_vault::wire::{
    ApprovalMethod, Decision, DecisionPayload, GrantPayload, GrantScope, Hardening, Op, Payload,
    ResumePayload, RevocationPayload, State,
};
use ed25519_dalek::VerifyingKey;
use libfuzzer_sys::arbitrary::Unstructured;
use libfuzzer_sys::fuzz_target;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::PathBuf;
use std::sync::OnceLock;

/// An export line as the reference reads it: every field, no other (as the verifier). Both
/// formats have the same fields; the current one adds `"v":2`, the first has no `v`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Row {
    #[serde(default)]
    v: Option<u64>,
    seq: i64,
    ts: String,
    kind: String,
    #[serde(default)]
    session: Option<String>,
    #[serde(default)]
    action: Option<String>,
    body: Box<RawValue>,
    prev: String,
    hash: String,
}

impl Row {
    /// A line of either format; a `v` other than 2 is not a row.
    fn parse(line: &[u8]) -> Option<Row> {
        serde_json::from_slice(line)
            .ok()
            .filter(|r: &Row| r.v.is_none_or(|v| v == 2))
    }

    /// The same row: every field, the body as its text.
    fn same(&self, o: &Row) -> bool {
        self.seq == o.seq
            && self.ts == o.ts
            && self.kind == o.kind
            && self.session == o.session
            && self.action == o.action
            && self.body.get() == o.body.get()
            && self.prev == o.prev
            && self.hash == o.hash
    }

    /// The line in the export's first format (an edited row need not keep the current layout:
    /// both read as the same row).
    fn to_line(&self) -> Vec<u8> {
        #[derive(Serialize)]
        struct Out<'a> {
            seq: i64,
            ts: &'a str,
            kind: &'a str,
            session: Option<&'a str>,
            action: Option<&'a str>,
            body: &'a RawValue,
            prev: &'a str,
            hash: &'a str,
        }
        serde_json::to_vec(&Out {
            seq: self.seq,
            ts: &self.ts,
            kind: &self.kind,
            session: self.session.as_deref(),
            action: self.action.as_deref(),
            body: &self.body,
            prev: &self.prev,
            hash: &self.hash,
        })
        .expect("a row serializes")
    }

    /// The canonical row over the body text as written (what the verifier hashes).
    fn canonical(&self) -> String {
        let with_null = audit::canonical_row(
            self.seq,
            &self.ts,
            &self.kind,
            self.session.as_deref(),
            self.action.as_deref(),
            &Value::Null,
        );
        // `action` (null or a JSON string, whose quotes are escaped) is the only key before
        // `body`: the first `,"body":null,` is the structural one.
        let at = with_null
            .find(",\"body\":null,")
            .expect("canonical_row has a body");
        let mut s = String::with_capacity(with_null.len() + self.body.get().len());
        s.push_str(&with_null[..at + 8]);
        s.push_str(self.body.get());
        s.push_str(&with_null[at + 12..]);
        s
    }

    /// Re-hashes the row over `prev` as a forger would: body made canonical, prev and hash set.
    fn forge(&mut self, prev: &[u8; 32]) {
        if let Ok(v) = serde_json::from_str::<Value>(self.body.get()) {
            self.body = canonical_body(&v);
        }
        self.prev = hex::encode(prev);
        self.hash = hex::encode(audit::row_hash(prev, &self.canonical()));
    }
}

/// `v` as canonical JSON text, by the library's own canonical form (`canonical_row`'s body).
fn canonical_body(v: &Value) -> Box<RawValue> {
    #[derive(Deserialize)]
    struct B {
        body: Box<RawValue>,
    }
    let row = audit::canonical_row(0, "", "", None, None, v);
    serde_json::from_str::<B>(&row).expect("canonical row").body
}

/// Exactly 64 lowercase hex digits (the export's and the verifier's form), decoded.
fn hex32(s: &str) -> Option<[u8; 32]> {
    let ok = s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    let mut out = [0u8; 32];
    (ok && hex::decode_to_slice(s, &mut out).is_ok()).then_some(out)
}

/// The lines as `verify_file` reads them: split on `\n`, a final empty piece is no line.
/// (`memchr`: a byte-by-byte split is the target's hottest loop under the comparison hooks.)
fn split_lines(b: &[u8]) -> Vec<&[u8]> {
    let mut v = Vec::with_capacity(64);
    let mut start = 0;
    for end in memchr::memchr_iter(b'\n', b) {
        v.push(&b[start..end]);
        start = end + 1;
    }
    if start < b.len() {
        v.push(&b[start..]);
    }
    v
}

/// A journal timestamp in milliseconds since the epoch, parsed as the vault parses it.
fn ms(ts: &str) -> Option<i64> {
    agent_vault::wire::ts::millis::deserialize(Value::String(ts.to_owned()))
        .ok()
        .map(|t| t.as_millisecond())
}

/// What the reference knows of security keys, as `audit/verify/touches.rs` reads it: the keys
/// registered (credential id → removed), what each credential requires, each session's profile.
#[derive(Default)]
struct Touches {
    keys: HashMap<String, bool>,
    presence: HashMap<(String, String), Presence>,
    sessions: HashMap<String, String>,
}

impl Touches {
    /// Whether the touch checks read a row of this kind (with no action).
    fn reads(&self, r: &Row) -> bool {
        matches!(
            Kind::parse(&r.kind),
            Some(
                Kind::KeyAdd
                    | Kind::KeyRemove
                    | Kind::CredentialAdd
                    | Kind::CredentialEdit
                    | Kind::CredentialRm
                    | Kind::SessionStart
            )
        )
    }

    fn apply(&mut self, r: &Row) -> Result<(), String> {
        let unread = |e: serde_json::Error| format!("row {}: {} body {e}", r.seq, r.kind);
        match Kind::parse(&r.kind) {
            Some(Kind::KeyAdd) => {
                let add: agent_vault::wire::journal::KeyAdded =
                    serde_json::from_str(r.body.get()).map_err(unread)?;
                hex::decode(&add.key.public_key)
                    .ok()
                    .and_then(|c| agent_vault::fido::parse_cose_key(&c).ok())
                    .ok_or_else(|| format!("row {}: a key that does not read", r.seq))?;
                self.keys.insert(add.key.credential_id, false);
            }
            Some(Kind::KeyRemove) => {
                let rm: agent_vault::wire::journal::KeyRemoved =
                    serde_json::from_str(r.body.get()).map_err(unread)?;
                match self.keys.get_mut(&rm.credential_id) {
                    Some(removed) if !*removed => *removed = true,
                    _ => return Err(format!("row {}: removes no registered key", r.seq)),
                }
            }
            Some(k @ (Kind::CredentialAdd | Kind::CredentialEdit | Kind::CredentialRm)) => {
                let c: CredentialBody = serde_json::from_str(r.body.get()).map_err(unread)?;
                let needs = match &c.binding {
                    Target::Http(h) => h.presence,
                    Target::Ssh(s) => s.presence,
                };
                let at = (c.profile, c.name);
                if k == Kind::CredentialRm || needs.is_none() {
                    self.presence.remove(&at);
                } else {
                    self.presence.insert(at, needs);
                }
            }
            Some(Kind::SessionStart) => {
                let s: SessionStart = serde_json::from_str(r.body.get()).map_err(unread)?;
                if let Some(id) = &r.session {
                    self.sessions.insert(id.clone(), s.profile);
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// An `action.approved` row: a touch where its credential needs one. No touch a fuzzer
    /// makes verifies (it holds no key), so one that is there is refused.
    fn approved(&self, r: &Row) -> Result<(), String> {
        let body = r.body.get();
        if self.presence.is_empty() && !body.contains("\"touch\"") {
            return Ok(());
        }
        #[derive(Deserialize)]
        struct Approved {
            credential: String,
            summary: String,
            #[allow(dead_code)]
            hash: String,
            #[serde(default)]
            touch: Option<agent_vault::wire::touch::TouchRecord>,
        }
        let a: Approved = serde_json::from_str(body)
            .map_err(|e| format!("row {}: approved body {e}", r.seq))?;
        if a.touch.is_some() {
            return Err(format!("row {}: a touch no registered key made", r.seq));
        }
        let profile = r.session.as_ref().and_then(|s| self.sessions.get(s));
        let needs = profile
            .and_then(|p| self.presence.get(&(p.clone(), a.credential.clone())))
            .copied()
            .unwrap_or_default();
        let read = a.summary.starts_with("GET ") || a.summary.starts_with("HEAD ");
        if needs.needs_touch(!read) {
            return Err(format!("row {}: needs a touch and carries none", r.seq));
        }
        Ok(())
    }
}

/// The reference verdict over parsed rows: Ok, or why not.
fn reference(rows: &[Row], anchors: &[Anchor]) -> Result<(), String> {
    if rows.is_empty() {
        return Err("no row".into());
    }
    let mut prev = [0u8; 32];
    let mut last: HashMap<&str, State> = HashMap::new();
    let mut spent: HashSet<String> = HashSet::new();
    // Each recorded grant: its session, expiry (ms) and whether it was revoked.
    let mut grants: HashMap<String, (String, i64, bool)> = HashMap::new();
    let mut touches = Touches::default();
    for (j, r) in rows.iter().enumerate() {
        if r.seq != j as i64 + 1 {
            return Err(format!("line {} has seq {}", j + 1, r.seq));
        }
        let (Some(p), Some(h)) = (hex32(&r.prev), hex32(&r.hash)) else {
            return Err(format!("row {} prev/hash not lowercase hex", r.seq));
        };
        if j == 0 {
            if r.kind != "vault.init" {
                return Err("row 1 is not vault.init".into());
            }
            let init: VaultInit =
                serde_json::from_str(r.body.get()).map_err(|e| format!("row 1 body: {e}"))?;
            if p != audit::genesis(&init.vault_id) {
                return Err("row 1 prev is not the genesis".into());
            }
        } else if p != prev {
            return Err(format!("row {} prev", r.seq));
        }
        if audit::row_hash(&p, &r.canonical()) != h {
            return Err(format!("row {} hash", r.seq));
        }
        prev = h;
        // A step of an action's lifecycle names the action it moves.
        if r.action.is_none() && r.kind.starts_with("action.") {
            return Err(format!("row {}: an action row names no action", r.seq));
        }
        if let Some(a) = r.action.as_deref() {
            let to = match Kind::parse(&r.kind) {
                Some(Kind::Action(s)) => s,
                // A note about the action (a wrong PIN typed on its card) moves it nowhere.
                Some(k) if k.notes_action() => continue,
                Some(_) => return Err(format!("row {}: a plain kind names an action", r.seq)),
                None if r.kind.starts_with("action.") => {
                    return Err(format!("row {}: unknown state", r.seq))
                }
                None => continue,
            };
            match last.get(a) {
                None if !to.is_initial() => return Err(format!("row {}: first state", r.seq)),
                Some(from) if !from.can_go(to) => {
                    return Err(format!("row {}: illegal transition", r.seq))
                }
                _ => {}
            }
            if to == State::Approved {
                touches.approved(r)?;
            }
            if to == State::Dispatched {
                let body: ActionRow = serde_json::from_str(r.body.get())
                    .map_err(|e| format!("row {}: dispatch body {e}", r.seq))?;
                let from = last[a];
                let fits = match &body.basis {
                    None => false,
                    Some(Basis::Decision { .. }) => from == State::Approved,
                    Some(Basis::Policy { policy }) => {
                        from == State::Received
                            && matches!(policy, Approval::Never | Approval::Writes)
                    }
                    Some(Basis::Grant { grant, .. }) => {
                        from == State::Received
                            && grants.get(grant.as_str()).is_some_and(|(s, exp, revoked)| {
                                !revoked
                                    && r.session.as_deref() == Some(s.as_str())
                                    && ms(&r.ts).is_some_and(|t| t <= exp + 1000)
                            })
                    }
                };
                if !fits {
                    return Err(format!("row {}: no valid basis", r.seq));
                }
                if let Some(Basis::Decision { nonce, .. }) = body.basis {
                    if !spent.insert(nonce) {
                        return Err(format!("row {}: nonce spent twice", r.seq));
                    }
                }
            }
            last.insert(a, to);
        } else if touches.reads(r) {
            touches.apply(r)?;
        } else if r.kind == Kind::GrantAdd.as_str() {
            let add: GrantAdded = serde_json::from_str(r.body.get())
                .map_err(|e| format!("row {}: grant body {e}", r.seq))?;
            let exp = ms(&add.expires_at).ok_or_else(|| format!("row {}: expiry", r.seq))?;
            if r.session.as_deref() != Some(add.session.as_str())
                || grants.insert(add.grant, (add.session, exp, false)).is_some()
            {
                return Err(format!("row {}: grant recorded twice or elsewhere", r.seq));
            }
        } else if r.kind == Kind::GrantRevoke.as_str() {
            let rev: GrantRevoked = serde_json::from_str(r.body.get())
                .map_err(|e| format!("row {}: revocation body {e}", r.seq))?;
            match grants.get_mut(rev.grant.as_str()) {
                Some((s, _, revoked)) if !*revoked && r.session.as_deref() == Some(s.as_str()) => {
                    *revoked = true
                }
                _ => return Err(format!("row {}: revocation of no recorded grant", r.seq)),
            }
        }
    }
    for a in anchors {
        let at = usize::try_from(a.seq - 1).ok().and_then(|i| rows.get(i));
        if at.and_then(|r| hex32(&r.hash)) != Some(a.hash) {
            return Err(format!("anchor {} not matched", a.seq));
        }
    }
    Ok(())
}

struct Base {
    bytes: Vec<u8>,
    rows: Vec<Row>,
    vault_id: String,
    /// The approver's public key, which signed the journal's decisions, grant and the rest.
    key: VerifyingKey,
    /// (action, nonce) of every dispatch on a person's decision.
    decisions: HashSet<(String, String)>,
}

fn process() -> Process {
    Process {
        pid: Some(4242),
        exe: Some("/usr/local/bin/fuzz-client".into()),
    }
}

/// Appends the journal described in the header, through the vault's own append path.
fn build(vault: &mut Vault, keys: &agent_vault::keys::KeyMaterial) {
    let id = vault.vault_id.clone();
    // What the approver signs, as the journal keeps it.
    let sign = |p: &dyn Fn() -> Signed| Some(RowSignature::of(&p()));
    let when = |t: &str| -> jiff::Timestamp { t.parse().unwrap() };
    let decided = |n: u32, approve: bool| {
        signing::sign(
            &keys.approver,
            &DecisionPayload {
                v: DecisionPayload::VERSION,
                vault_id: id.clone(),
                action_id: format!("act_{n:032x}"),
                action_hash: format!("{n:064x}"),
                decision: if approve { Decision::Approve } else { Decision::Deny },
                reason: None,
                expires_at: when("2999-01-01T00:00:00Z"),
                nonce: format!("{n:032x}"),
                issued_at: when("2026-01-01T00:00:00Z"),
                method: ApprovalMethod::Pin,
            },
        )
    };
    let tx = vault.store.write().unwrap();
    audit::append(
        &tx,
        None,
        None,
        &VaultUnlock {
            agent_pid: 4240,
            lifetime_s: 3600,
            hardening: Hardening {
                undumpable: true,
                no_core: true,
                key_locked: false,
            },
        },
    )
    .unwrap();
    tx.commit().unwrap();
    let cred = NewCredential {
        id: credentials::new_id("cred"),
        profile: "default".into(),
        name: "api".into(),
        approval: Approval::Each,
        target: Target::Http(HttpTarget {
            scheme: "https".into(),
            host: "api.example.com".into(),
            port: 443,
            path_prefix: "/v1/".into(),
            methods: None,
            auth: HttpAuth::Bearer,
            ca_file: None,
            allow_headers: Vec::new(),
            secret_from: None,
            presence: Presence::None,
        }),
        secret: credentials::Secret::new(b"fuzz-token-not-a-secret".to_vec()),
    };
    let free = NewCredential {
        id: credentials::new_id("cred"),
        profile: "default".into(),
        name: "free".into(),
        approval: Approval::Never,
        target: cred.target.clone(),
        secret: credentials::Secret::new(b"fuzz-token-not-a-secret".to_vec()),
    };
    let api = credentials::add_as_approver(&mut vault.store, &keys.approver, &id, cred).unwrap();
    credentials::add_as_approver(&mut vault.store, &keys.approver, &id, free).unwrap();

    let (a, b) = (
        "ses_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        "ses_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
    );
    let start = |name: &str| SessionStart {
        client: ClientLabel {
            name: name.into(),
            version: "1.0.0".into(),
        },
        peer: process(),
        parent: process(),
        profile: "default".into(),
        protocol_version: "2025-11-25".into(),
        contained: false,
    };
    // Action 2 runs on the `never` policy of `free`; action 7 is a read under the grant's scope.
    let row = |n: u32, state: State, basis: Option<Basis>| {
        let (method, credential) = match n {
            2 => ("GET", "free"),
            7 => ("GET", "api"),
            _ => ("POST", "api"),
        };
        let summary =
            format!("{method} https://api.example.com/v1/items/{n} (credential {credential})");
        let row = ActionRow {
            state,
            tool: "http_request".into(),
            credential: credential.into(),
            hash: format!("{n:064x}"),
            summary,
            reason: matches!(state, State::Denied | State::FailedBeforeSend)
                .then(|| "refused \"here\"\nby the person".into()),
            basis,
            method: None,
            touch: None,
            signed: None,
        };
        (format!("act_{n:032x}"), row)
    };
    // One `action.<state>` row of action `n` in `session`.
    macro_rules! step {
        ($tx:expr, $session:expr, $n:expr, $state:expr, $basis:expr $(,)?) => {{
            let (action, body) = row($n, $state, $basis);
            audit::append(&$tx, Some($session), Some(&action), &body).unwrap();
        }};
    }
    // A person's decision on action `n`, made with the PIN and signed.
    macro_rules! decide {
        ($tx:expr, $session:expr, $n:expr, $state:expr $(,)?) => {{
            let (action, mut body) = row($n, $state, None);
            body.method = Some(ApprovalMethod::Pin);
            body.signed = sign(&|| decided($n, $state == State::Approved));
            audit::append(&$tx, Some($session), Some(&action), &body).unwrap();
        }};
    }
    let decision = |n: u32| {
        Some(Basis::Decision {
            decision: format!("dec_{n:032x}"),
            nonce: format!("{n:032x}"),
        })
    };
    use State::*;
    let tx = vault.store.write().unwrap();
    audit::append(&tx, Some(a), None, &start("client-a")).unwrap();
    step!(tx, a, 1, Pending, None);
    audit::append(&tx, Some(b), None, &start("client-b")).unwrap();
    decide!(tx, a, 1, Approved);
    step!(tx, b, 2, Received, None);
    step!(tx, a, 1, Dispatched, decision(1));
    step!(
        tx,
        b,
        2,
        Dispatched,
        Some(Basis::Policy {
            policy: Approval::Never,
        }),
    );
    step!(tx, a, 1, Completed, None);
    step!(tx, b, 2, Indeterminate, None);
    audit::record_rejection(
        &tx,
        Some(a),
        -32602,
        "unknown credential",
        &"0".repeat(64),
        None,
    )
    .unwrap();
    step!(tx, a, 3, Pending, None);
    decide!(tx, a, 3, Denied);
    audit::append(
        &tx,
        None,
        None,
        &VaultPause {
            reason: "kill switch".into(),
        },
    )
    .unwrap();
    step!(tx, b, 4, Pending, None);
    step!(tx, b, 4, Expired, None);
    audit::append(
        &tx,
        Some(b),
        None,
        &CallSuppressed {
            count: 3,
            reason: "rate".into(),
        },
    )
    .unwrap();
    audit::append(
        &tx,
        None,
        None,
        &VaultResume {
            nonce: "f".repeat(32),
            signed: sign(&|| {
                signing::sign(
                    &keys.approver,
                    &ResumePayload {
                        v: ResumePayload::VERSION,
                        vault_id: id.clone(),
                        op: Op::Resume,
                        nonce: "f".repeat(32),
                        issued_at: when("2026-01-01T00:00:00Z"),
                    },
                )
            }),
        },
    )
    .unwrap();
    step!(tx, a, 5, Pending, None);
    decide!(tx, a, 5, Approved);
    step!(tx, b, 6, Pending, None);
    step!(tx, a, 5, Dispatched, decision(5));
    step!(tx, b, 6, Withdrawn, None);
    step!(tx, a, 5, FailedBeforeSend, None);
    let grant = format!("grt_{:032x}", 7);
    let scope = GrantScope::HttpReads {
        methods: vec!["GET".into(), "HEAD".into()],
        prefix: "/v1/".into(),
    };
    let grant_payload = GrantPayload {
        v: GrantPayload::VERSION,
        vault_id: id.clone(),
        action_id: format!("act_{:032x}", 5),
        action_hash: format!("{:064x}", 5),
        credential_id: api.id.clone(),
        credential_version: 1,
        scope: scope.clone(),
        expires_at: when("2999-01-01T00:00:00Z"),
        nonce: format!("{:032x}", 77),
    };
    let added = GrantAdded {
        grant: grant.clone(),
        session: a.into(),
        action: format!("act_{:032x}", 5),
        credential: "api".into(),
        credential_id: api.id.clone(),
        credential_version: 1,
        scope,
        expires_at: "2999-01-01T00:00:00.000Z".into(),
        signed: sign(&|| signing::sign(&keys.approver, &grant_payload)),
    };
    audit::append(&tx, Some(a), None, &added).unwrap();
    step!(tx, a, 7, Received, None);
    step!(
        tx,
        a,
        7,
        Dispatched,
        Some(Basis::Grant {
            grant: grant.clone(),
            grant_nonce: format!("{:032x}", 77),
        }),
    );
    step!(tx, a, 7, Completed, None);
    let revocation = RevocationPayload {
        v: RevocationPayload::VERSION,
        vault_id: id.clone(),
        grant: Some(grant.clone()),
        nonce: "e".repeat(32),
        issued_at: when("2026-01-01T00:00:00Z"),
    };
    let revoked = GrantRevoked {
        grant,
        session: a.into(),
        nonce: "e".repeat(32),
        signed: sign(&|| signing::sign(&keys.approver, &revocation)),
    };
    audit::append(&tx, Some(a), None, &revoked).unwrap();
    let end = SessionEnd {
        reason: "client closed stdin".into(),
        withdrawn: 0,
        suppressed_rejections: 0,
    };
    audit::append(&tx, Some(a), None, &end).unwrap();
    audit::append(&tx, Some(b), None, &end).unwrap();
    audit::append(
        &tx,
        None,
        None,
        &VaultLock {
            reason: "lock".into(),
        },
    )
    .unwrap();
    tx.commit().unwrap();
}

fn base() -> &'static Base {
    static B: OnceLock<Base> = OnceLock::new();
    B.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("av-fuzz-journal-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let paths = VaultPaths::new(dir.join("vault"));
        let pass = Passphrase::from_string("fuzz passphrase, not secret".into());
        let (mut vault, keys) = Vault::init(paths, &pass).expect("init");
        build(&mut vault, &keys);
        let mut bytes = Vec::new();
        let exported =
            audit::export_to(vault.store.conn(), &mut bytes, &dir.join("export")).unwrap();
        let vault_id = vault.vault_id.clone();
        drop(vault);
        let _ = std::fs::remove_dir_all(&dir);
        let rows: Vec<Row> = split_lines(&bytes)
            .iter()
            .map(|l| Row::parse(l).expect("the export parses"))
            .collect();
        assert_eq!(rows.len() as u64, exported.rows);
        assert!(rows.len() >= 30, "{} rows", rows.len());
        reference(&rows, &[]).expect("the reference accepts the export");
        let key = keys.approver.public();
        let report = verify(&bytes, &[], None);
        assert!(report.ok(), "{}", report.to_json_line());
        let held = verify(&bytes, &[], Some(&key));
        assert!(held.held(), "{}", held.to_json_line());
        assert_eq!(held.signatures.checked, 8, "{}", held.to_json_line());
        let decisions = decision_dispatches(&rows);
        assert_eq!(decisions.len(), 2);
        Base {
            bytes,
            rows,
            vault_id,
            key,
            decisions,
        }
    })
}

/// (action, nonce) of every dispatch row on a person's decision.
fn decision_dispatches(rows: &[Row]) -> HashSet<(String, String)> {
    rows.iter()
        .filter(|r| r.kind == "action.dispatched")
        .filter_map(|r| {
            let body: ActionRow = serde_json::from_str(r.body.get()).ok()?;
            match body.basis? {
                Basis::Decision { nonce, .. } => Some((r.action.clone()?, nonce)),
                _ => None,
            }
        })
        .collect()
}

/// The signature a row's body carries, as what it means: the payload's text and the signature's
/// bytes (the same signature may be spelled in upper case, or with JSON escapes).
fn signed_objects(body: &str) -> Vec<(String, Vec<u8>)> {
    #[derive(Deserialize)]
    struct WithSig {
        #[serde(default)]
        signed: Option<RowSignature>,
    }
    serde_json::from_str::<WithSig>(body)
        .ok()
        .and_then(|w| w.signed)
        .map(|s| {
            let bytes = hex::decode(&s.signature).unwrap_or_default();
            vec![(s.payload.get().to_owned(), bytes)]
        })
        .unwrap_or_default()
}

/// `verify_file` on `bytes`, held to `key` if given: an unlinked file in /dev/shm (or the temp
/// dir) reached through /proc/self/fd, rewritten for each input (nothing is left behind when the
/// process ends).
fn verify(bytes: &[u8], anchors: &[Anchor], key: Option<&VerifyingKey>) -> Report {
    static F: OnceLock<(File, PathBuf)> = OnceLock::new();
    let (file, path) = F.get_or_init(|| {
        let shm = std::path::Path::new("/dev/shm");
        let dir = if shm.is_dir() {
            shm.to_path_buf()
        } else {
            std::env::temp_dir()
        };
        let p = dir.join(format!("av-fuzz-journal-{}.jsonl", std::process::id()));
        let f = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&p)
            .unwrap();
        std::fs::remove_file(&p).unwrap();
        let fd = PathBuf::from(format!("/proc/self/fd/{}", f.as_raw_fd()));
        (f, fd)
    });
    file.set_len(0).unwrap();
    file.write_all_at(bytes, 0).unwrap();
    audit::verify_file(path, anchors, key).expect("the file is readable")
}

/// Tokens whose insertion keeps JSON valid or nearly so.
const TOKENS: &[&[u8]] = &[
    b" ",
    b"\t",
    b"\r",
    b"\n",
    b"\"",
    b"\\",
    b",",
    b":",
    b"{",
    b"}",
    b"[",
    b"]",
    b"0",
    b"1",
    b"-",
    b"null",
    b"\\u0000",
    b"\\u0061",
    b"\\\"",
    b"\\n",
    b",\"x\":1",
    b"\xff",
    b"\xc3\xa9",
];

fn lines_of(b: &[u8]) -> Vec<Vec<u8>> {
    split_lines(b).into_iter().map(<[u8]>::to_vec).collect()
}

fn join(lines: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for l in lines {
        out.extend_from_slice(l);
        out.push(b'\n');
    }
    out
}

fn idx(u: &mut Unstructured<'_>, len: usize) -> usize {
    if len == 0 {
        0
    } else {
        u.int_in_range(0..=len - 1).unwrap_or(0)
    }
}

fn short_string(u: &mut Unstructured<'_>) -> String {
    let n = u.int_in_range(0..=12).unwrap_or(0);
    String::from_utf8_lossy(u.bytes(n).unwrap_or(&[])).into_owned()
}

fn edit_string(u: &mut Unstructured<'_>, s: &str, others: &[&str]) -> String {
    match u.int_in_range(0..=2).unwrap_or(0) {
        0 => u.choose(others).map(|s| s.to_string()).unwrap_or_default(),
        1 => short_string(u),
        _ => {
            let mut chars: Vec<char> = s.chars().collect();
            let i = idx(u, chars.len());
            let c = char::from_u32(u.arbitrary::<u16>().unwrap_or(0) as u32).unwrap_or('x');
            if chars.is_empty() {
                chars.push(c);
            } else {
                chars[i] = c;
            }
            chars.into_iter().collect()
        }
    }
}

/// Changes one value at most two levels into `v` (set, remove, add a key).
fn edit_value(u: &mut Unstructured<'_>, v: &mut Value, depth: u8) {
    let Value::Object(map) = v else {
        *v = Value::String(short_string(u));
        return;
    };
    let keys: Vec<String> = map.keys().cloned().collect();
    let op = u.int_in_range(0..=6).unwrap_or(0);
    if keys.is_empty() || op == 6 {
        let k = if u.arbitrary::<bool>().unwrap_or(false) {
            short_string(u)
        } else {
            "x".into()
        };
        map.insert(k, Value::from(u.arbitrary::<i64>().unwrap_or(0)));
        return;
    }
    let k = &keys[idx(u, keys.len())];
    match op {
        0 => {
            map.remove(k);
        }
        1 => {
            map.insert(k.clone(), Value::Null);
        }
        2 => {
            map.insert(k.clone(), Value::String(short_string(u)));
        }
        3 => {
            map.insert(k.clone(), Value::from(u.arbitrary::<i64>().unwrap_or(0)));
        }
        4 => {
            map.insert(k.clone(), Value::Bool(u.arbitrary().unwrap_or(false)));
        }
        _ => {
            let inner = map.get_mut(k).unwrap();
            if depth < 2 && inner.is_object() {
                edit_value(u, inner, depth + 1);
            } else if let Value::String(s) = inner {
                let states: Vec<&str> = State::ALL.iter().map(|s| s.as_str()).collect();
                *s = edit_string(u, s, &states);
            } else {
                *inner = Value::String(short_string(u));
            }
        }
    }
}

/// Edits one field of `row` (its hash untouched).
fn edit_field(u: &mut Unstructured<'_>, row: &mut Row, base: &Base) {
    let pick = |f: &dyn Fn(&Row) -> String| -> Vec<String> { base.rows.iter().map(f).collect() };
    match u.int_in_range(0..=7).unwrap_or(0) {
        0 => {
            row.seq = if u.arbitrary::<bool>().unwrap_or(true) {
                row.seq.wrapping_add(u.int_in_range(-3i64..=3).unwrap_or(1))
            } else {
                u.arbitrary().unwrap_or(0)
            }
        }
        1 => {
            let all = pick(&|r| r.ts.clone());
            let all: Vec<&str> = all.iter().map(String::as_str).collect();
            row.ts = edit_string(u, &row.ts, &all);
        }
        2 => {
            let kinds: Vec<&str> = Kind::all().map(Kind::as_str).collect();
            row.kind = edit_string(u, &row.kind, &kinds);
        }
        3 | 4 => {
            let session = u.int_in_range(3..=4).unwrap_or(3) == 3;
            let all = pick(&|r| {
                if session {
                    r.session.clone().unwrap_or_default()
                } else {
                    r.action.clone().unwrap_or_default()
                }
            });
            let all: Vec<&str> = all.iter().map(String::as_str).collect();
            let field = if session {
                &mut row.session
            } else {
                &mut row.action
            };
            *field = if u.arbitrary::<bool>().unwrap_or(false) {
                None
            } else {
                Some(edit_string(u, field.as_deref().unwrap_or(""), &all))
            };
        }
        5 => {
            if u.arbitrary::<bool>().unwrap_or(false) {
                row.body = base.rows[idx(u, base.rows.len())].body.clone();
            } else if let Ok(mut v) = serde_json::from_str::<Value>(row.body.get()) {
                edit_value(u, &mut v, 0);
                row.body = canonical_body(&v);
            }
        }
        n => {
            let field = if n == 6 { &mut row.prev } else { &mut row.hash };
            match u.int_in_range(0..=2).unwrap_or(0) {
                0 => {
                    let other = &base.rows[idx(u, base.rows.len())];
                    *field = if n == 6 {
                        other.prev.clone()
                    } else {
                        other.hash.clone()
                    };
                }
                1 => *field = field.to_ascii_uppercase(),
                _ => {
                    let mut b = field.clone().into_bytes();
                    if !b.is_empty() {
                        let i = idx(u, b.len());
                        b[i] = b"0123456789abcdef"[idx(u, 16)];
                    }
                    *field = String::from_utf8_lossy(&b).into_owned();
                }
            }
        }
    }
}

/// One phase-1 mutation of `m`.
fn mutate(u: &mut Unstructured<'_>, m: &mut Vec<u8>, base: &Base) {
    let op = u.int_in_range(0..=12).unwrap_or(0);
    if op <= 5 {
        let pos = u.int_in_range(0..=m.len()).unwrap_or(0);
        match op {
            0 if pos < m.len() => m[pos] = u.arbitrary().unwrap_or(0),
            1 if pos < m.len() => m[pos] ^= 1 << u.int_in_range(0..=7).unwrap_or(0),
            2 => {
                let n = u.int_in_range(1..=8).unwrap_or(1);
                let b = u.bytes(n).unwrap_or(&[]).to_vec();
                m.splice(pos..pos, b);
            }
            3 => {
                let n = u.int_in_range(1..=64).unwrap_or(1);
                m.drain(pos..(pos + n).min(m.len()));
            }
            4 => m.truncate(pos),
            5 => {
                let t = u.choose(TOKENS).unwrap_or(&TOKENS[0]).to_vec();
                m.splice(pos..pos, t);
            }
            _ => {}
        }
        return;
    }
    let mut lines = lines_of(m);
    let n = lines.len();
    if n == 0 {
        return;
    }
    let (i, j) = (idx(u, n), idx(u, n));
    match op {
        6 => {
            lines.remove(i);
        }
        7 => {
            let l = lines[i].clone();
            lines.insert(idx(u, n + 1), l);
        }
        8 => lines.swap(i, j),
        9 => {
            let l = lines.remove(i);
            lines.insert(j.min(lines.len()), l);
        }
        10 => lines.truncate(i),
        _ => {
            let Some(mut row) = Row::parse(&lines[i]) else {
                return;
            };
            edit_field(u, &mut row, base);
            lines[i] = row.to_line();
        }
    }
    *m = join(&lines);
}

/// Where the forged tail starts (rows from there on may differ from the original).
enum Forgery {
    None,
    One(usize),
    Chain(usize),
}

/// Phase 2: a row edited (or not) and re-hashed, alone or with every row after it re-chained.
fn forge(u: &mut Unstructured<'_>, m: &mut Vec<u8>, base: &Base) -> Forgery {
    let mut lines = lines_of(m);
    if lines.is_empty() {
        return Forgery::None;
    }
    let p = idx(u, lines.len());
    let chain = u.arbitrary::<bool>().unwrap_or(false);
    let renumber = chain && u.arbitrary::<bool>().unwrap_or(false);
    let edit = u.arbitrary::<bool>().unwrap_or(false);
    let genesis_of = |r: &Row| {
        let id = serde_json::from_str::<VaultInit>(r.body.get())
            .map(|i| i.vault_id)
            .unwrap_or_else(|_| base.vault_id.clone());
        audit::genesis(&id)
    };
    let end = if chain { lines.len() } else { p + 1 };
    for q in p..end {
        let Some(mut row) = Row::parse(&lines[q]) else {
            continue;
        };
        if q == p && edit {
            edit_field(u, &mut row, base);
        }
        if renumber {
            row.seq = q as i64 + 1;
        }
        let prev = if q == 0 {
            Some(genesis_of(&row))
        } else if chain && q > p {
            Row::parse(&lines[q - 1]).and_then(|r| hex32(&r.hash))
        } else {
            hex32(&row.prev).or_else(|| Row::parse(&lines[q - 1]).and_then(|r| hex32(&r.hash)))
        };
        if let Some(prev) = prev {
            row.forge(&prev);
            lines[q] = row.to_line();
        }
    }
    *m = join(&lines);
    if chain {
        Forgery::Chain(p)
    } else {
        Forgery::One(p)
    }
}

/// Nothing was changed: no byte mutation and no forgery.
fn forgery_none_and_no_ops(ops: u8, forgery: &Forgery) -> bool {
    ops == 0 && matches!(forgery, Forgery::None)
}

fn fail(m: &[u8], anchors: &[Anchor], report: &Report, what: &str) -> ! {
    let stem = format!("journal_verify-failure-{}", std::process::id());
    let _ = std::fs::write(format!("{stem}.jsonl"), m);
    let list: Vec<String> = anchors.iter().map(Anchor::to_string).collect();
    let _ = std::fs::write(format!("{stem}.anchors"), list.join("\n"));
    panic!(
        "{what}\nverdict: {}\nanchors: {list:?}\njournal written to {stem}.jsonl:\n{}",
        report.to_json_line(),
        String::from_utf8_lossy(m)
    );
}

fuzz_target!(|data: &[u8]| {
    let base = base();
    let n = base.rows.len();
    let mut u = Unstructured::new(data);
    let head = u.arbitrary::<u8>().unwrap_or(0);
    let (ops, forging, n_anchors) = (head & 7, head & 8 != 0, (head >> 4) & 3);

    let mut anchors = Vec::new();
    for _ in 0..n_anchors {
        let wrong = u.int_in_range(0..=3).unwrap_or(0) == 3;
        let seq = u.int_in_range(1..=n + usize::from(wrong) * 2).unwrap_or(1);
        let mut hash = base
            .rows
            .get(seq - 1)
            .and_then(|r| hex32(&r.hash))
            .unwrap_or([7; 32]);
        if wrong {
            hash[idx(&mut u, 32)] ^= u.int_in_range(1..=255).unwrap_or(1);
        }
        anchors.push(Anchor {
            seq: seq as i64,
            hash,
        });
    }

    let mut m = base.bytes.clone();
    for _ in 0..ops {
        mutate(&mut u, &mut m, base);
    }
    let forgery = if forging {
        forge(&mut u, &mut m, base)
    } else {
        Forgery::None
    };

    let report = verify(&m, &anchors, None);
    let held = verify(&m, &anchors, Some(&base.key));
    let lines = split_lines(&m);
    let k = lines.len();
    let check = |ok: bool, what: &str| {
        if !ok {
            fail(&m, &anchors, &report, what)
        }
    };

    // Exactly the export, or a cut of it at a line end.
    let cut = base.bytes.starts_with(&m)
        && (m.is_empty() || m.ends_with(b"\n") || base.bytes[m.len()] == b'\n');
    if cut {
        let expect = k >= 1
            && anchors.iter().all(|a| {
                a.seq as usize <= k && hex32(&base.rows[a.seq as usize - 1].hash) == Some(a.hash)
            });
        check(
            report.ok() == expect,
            "the export (or a cut at a line end) got the wrong verdict",
        );
        check(
            held.held() == expect,
            "the export (or a cut at a line end) held to its key got the wrong verdict",
        );
    }

    // Held to the key, the checks only add: what it accepts, the chain accepts, and it accepts
    // no signature, and no dispatch on a person's decision, that the original does not hold.
    if held.ok() {
        check(
            report.ok() && report.rows == held.rows && report.head == held.head,
            "held to the key it accepted what the chain alone refuses",
        );
        let rows: Vec<Row> = lines.iter().filter_map(|l| Row::parse(l)).collect();
        let originals: HashSet<(String, Vec<u8>)> = base
            .rows
            .iter()
            .flat_map(|r| signed_objects(r.body.get()))
            .collect();
        for r in &rows {
            if let Some(s) = signed_objects(r.body.get()).iter().find(|s| !originals.contains(*s)) {
                fail(&m, &anchors, &held, &format!("held to the key, accepted at row {} a signature the approver never made: {}", r.seq, s.0));
            }
        }
        if !decision_dispatches(&rows).is_subset(&base.decisions) {
            fail(&m, &anchors, &held, "held to the key, accepted a dispatch on a decision the person never made for it");
        }
    } else if report.ok() && forgery_none_and_no_ops(ops, &forgery) {
        fail(&m, &anchors, &held, "held to the key, refused a journal the chain accepts with nothing forged");
    }

    if report.ok() {
        let rows: Option<Vec<Row>> = lines.iter().map(|l| Row::parse(l)).collect();
        let Some(rows) = rows else {
            fail(
                &m,
                &anchors,
                &report,
                "accepted a line that is not an export row",
            )
        };
        if let Err(why) = reference(&rows, &anchors) {
            fail(
                &m,
                &anchors,
                &report,
                &format!("accepted, the reference refuses: {why}"),
            );
        }
        let last = hex32(&rows[k - 1].hash).unwrap();
        check(
            report.rows == k as u64
                && report.head
                    == Some(Head {
                        seq: k as i64,
                        hash: last,
                    }),
            "accepted with the wrong row count or head",
        );
        let original_up_to = match forgery {
            Forgery::None => k,
            Forgery::One(p) if p + 1 < k => k,
            Forgery::One(p) | Forgery::Chain(p) => p.min(k),
        };
        for (j, row) in rows.iter().enumerate().take(original_up_to) {
            if !base.rows.get(j).is_some_and(|b| b.same(row)) {
                fail(
                    &m,
                    &anchors,
                    &report,
                    &format!("accepted a journal whose row at line {} is not the original (no forgery reaches it)", j + 1),
                );
            }
        }
    } else {
        let failure = report.failure.as_ref().unwrap();
        let verified = report.rows as usize;
        check(
            failure.seq == Some(verified as i64 + 1),
            "the failure does not name the row after the last verified one",
        );
        check(
            report.head.map(|h| h.seq) == (verified > 0).then_some(verified as i64),
            "the head is not the last verified row",
        );
        if verified > 0 {
            let rows: Option<Vec<Row>> = lines[..verified.min(k)]
                .iter()
                .map(|l| Row::parse(l))
                .collect();
            let below: Vec<Anchor> = anchors
                .iter()
                .filter(|a| a.seq as usize <= verified)
                .copied()
                .collect();
            let ok = rows.is_some_and(|r| r.len() == verified && reference(&r, &below).is_ok());
            check(
                ok,
                "a row below the failure does not verify by the reference",
            );
        }
        if let (0, Forgery::One(_) | Forgery::Chain(_)) = (ops, &forgery) {
            let rows: Option<Vec<Row>> = lines.iter().map(|l| Row::parse(l)).collect();
            if let Some(rows) = rows {
                if reference(&rows, &anchors).is_ok() {
                    fail(
                        &m,
                        &anchors,
                        &report,
                        "refused a forged journal the reference accepts",
                    );
                }
            }
        }
    }
});
