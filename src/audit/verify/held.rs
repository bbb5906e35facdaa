//! Holding the journal to the approver's key, in order (the workers checked each signature and
//! that its payload is what its row says, `sigs.rs`). From the first row that carries a
//! signature on, every row only the person decides must carry one (a denial may not: a pause
//! denies too). Row 1 must name the key. Each decision is recorded once (its nonce), and each
//! dispatch must rest on what the approver signed: a decision for that very action and hash,
//! unexpired and spent once; a grant whose signed nonce it names and whose signed scope covers
//! what the row says ran, on the credential version the grant names; or the signed policy in
//! force for its credential (`never`, or `writes` for a read, and never where a touch is needed).
//! Nothing runs while the journal says the vault is paused. A dispatch that rests on a row
//! written before the journal carried signatures is counted, not failed: no key can hold it.
use super::sigs::{self, Held as Read, What};
use super::summary;
use super::{Reason, RowRef, Signatures};
use crate::wire::journal::{Basis, CredentialBody, GrantAdded, Kind, VaultInit};
use crate::wire::touch::Presence;
use crate::wire::{Approval, GrantScope, State, Target};
use ed25519_dalek::VerifyingKey;
use std::collections::{HashMap, HashSet};

type Fail = (Reason, String);

/// An approval's signed decision, until its dispatch spends it.
#[derive(Debug)]
enum Approved {
    /// Written before signatures began.
    Unsigned,
    Signed {
        nonce: Box<str>,
        hash: Box<str>,
        expires_ms: i64,
    },
}

/// A grant as the approver signed it.
#[derive(Debug)]
enum Grant {
    Unsigned,
    Signed {
        nonce: Box<str>,
        scope: GrantScope,
        credential: Box<str>,
        credential_id: Box<str>,
        version: i64,
    },
}

/// A credential's version in force, and whether the approver's signature on it was checked.
#[derive(Debug)]
struct Cred {
    id: Box<str>,
    version: i64,
    approval: Approval,
    presence: Presence,
    signed: bool,
}

/// What the journal told so far, held to a key.
#[derive(Debug, Default)]
pub(super) struct Held {
    key: Option<VerifyingKey>,
    pub(super) sigs: Signatures,
    approvals: HashMap<Box<str>, Approved>,
    decisions: HashSet<Box<str>>,
    grants: HashMap<Box<str>, Grant>,
    /// (profile, name) → the version in force.
    creds: HashMap<(Box<str>, Box<str>), Cred>,
}

/// What a dispatch row is checked against besides itself.
pub(super) struct At<'a> {
    pub(super) seq: i64,
    pub(super) ts: &'a str,
    pub(super) action: &'a str,
    /// The profile of the row's session, from its `session.start` row.
    pub(super) profile: Option<&'a str>,
    /// The seq of the pause in force, if the vault is paused.
    pub(super) paused: Option<i64>,
}

fn millis(ts: &str) -> Option<i64> {
    ts.parse::<jiff::Timestamp>()
        .ok()
        .map(|t| t.as_millisecond())
}

impl Held {
    pub(super) fn new(key: Option<VerifyingKey>) -> Self {
        Self {
            key,
            sigs: Signatures {
                key: key.map(|k| k.to_bytes()),
                ..Signatures::default()
            },
            ..Self::default()
        }
    }

    pub(super) fn key(&self) -> Option<&VerifyingKey> {
        self.key.as_ref()
    }

    /// A dispatch (or touch) at `seq` that rests on a row written before signatures began.
    pub(super) fn unheld(&mut self, seq: i64) {
        self.sigs.unheld += 1;
        self.sigs.first_unheld.get_or_insert(seq);
    }

    /// Row 1 must name the approver key the journal is held to.
    pub(super) fn genesis(&self, body: &str) -> Result<(), Fail> {
        let Some(key) = &self.key else { return Ok(()) };
        let named = serde_json::from_str::<VaultInit>(body)
            .map(|b| b.approver_public_key)
            .unwrap_or_default();
        let want = hex::encode(key.as_bytes());
        if named != want {
            return Err((Reason::BadSignature, format!("row 1 names the approver key {named:?}, not the key given ({want}): this journal is another approver's, or its first row was rewritten")));
        }
        Ok(())
    }

    /// The signature a row carries (`read`, by a worker) and what it records: checked against
    /// the key and the vault, and kept for the rows after it.
    pub(super) fn row(
        &mut self,
        seq: i64,
        row: &RowRef<'_>,
        kind: Option<Kind>,
        read: &Read,
        vault_id: &str,
        grant: Option<&GrantAdded>,
    ) -> Result<(), Fail> {
        let carries = match read {
            Read::None | Read::Dispatch(_) => return Ok(()),
            Read::Carries(c) => *c,
            Read::Bad(_) | Read::Good(_) => true,
        };
        let began = self.sigs.from_seq;
        if carries {
            self.sigs.from_seq.get_or_insert(seq);
        }
        if self.key.is_none() {
            return Ok(());
        }
        let good = match read {
            Read::Bad(why) => return Err((Reason::BadSignature, why.clone())),
            Read::Good(g) => Some(g),
            _ => None,
        };
        if let (None, Some(from)) = (good, began) {
            if sigs::must_sign(kind) {
                let kind = match kind {
                    Some(k) => k.as_str(),
                    None => row.kind,
                };
                return Err((Reason::Unsigned, format!("row {seq} ({kind}) carries no approver signature, though every such row does from row {from} on: a signature was stripped, or the row was written by someone else")));
            }
        }
        if let Some(g) = good {
            if &*g.vault_id != vault_id {
                return Err((
                    Reason::BadSignature,
                    format!(
                        "row {seq}'s signature is for vault {}, not {vault_id}",
                        g.vault_id
                    ),
                ));
            }
            self.sigs.checked += 1;
        }
        let action = row.action.unwrap_or_default();
        match (kind, good.map(|g| &g.what)) {
            (
                Some(Kind::Action(state)),
                Some(What::Decision {
                    nonce,
                    hash,
                    expires_ms,
                    ..
                }),
            ) => {
                if !self.decisions.insert(nonce.clone()) {
                    return Err((Reason::BadSignature, format!("row {seq} records a decision whose nonce an earlier row recorded: each decision is recorded once")));
                }
                if state == State::Approved {
                    let signed = Approved::Signed {
                        nonce: nonce.clone(),
                        hash: hash.clone(),
                        expires_ms: *expires_ms,
                    };
                    self.approvals.insert(action.into(), signed);
                }
            }
            (Some(Kind::Action(State::Approved)), None) => {
                self.approvals.insert(action.into(), Approved::Unsigned);
            }
            (Some(Kind::GrantAdd), what) => {
                let Some(add) = grant else { return Ok(()) };
                let grant = match what {
                    Some(What::Grant { nonce }) => Grant::Signed {
                        nonce: nonce.clone(),
                        scope: add.scope.clone(),
                        credential: add.credential.as_str().into(),
                        credential_id: add.credential_id.as_str().into(),
                        version: add.credential_version,
                    },
                    _ => Grant::Unsigned,
                };
                self.grants.insert(add.grant.as_str().into(), grant);
            }
            (Some(k @ (Kind::CredentialAdd | Kind::CredentialEdit | Kind::CredentialRm)), _) => {
                let Ok(c) = serde_json::from_str::<CredentialBody>(row.body) else {
                    return Ok(());
                };
                let at = (c.profile.into(), c.name.into());
                if k == Kind::CredentialRm {
                    self.creds.remove(&at);
                } else {
                    let presence = match &c.binding {
                        Target::Http(h) => h.presence,
                        Target::Ssh(s) => s.presence,
                    };
                    let cred = Cred {
                        id: c.id.into(),
                        version: c.version,
                        approval: c.approval,
                        presence,
                        signed: good.is_some(),
                    };
                    self.creds.insert(at, cred);
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// A dispatch of `at.action` on `basis`, whose row says `said`: it must rest on what the
    /// approver signed (see the module's doc).
    pub(super) fn dispatch(
        &mut self,
        at: &At<'_>,
        basis: &Basis,
        said: Option<&sigs::Dispatch>,
    ) -> Result<(), String> {
        if self.key.is_none() {
            return Ok(());
        }
        let (seq, action) = (at.seq, at.action);
        if let (Some(p), Some(_)) = (at.paused, self.sigs.from_seq) {
            return Err(format!("action {action} was dispatched at seq {seq} while the vault was paused (row {p}): nothing runs until a signed resume"));
        }
        let Some(said) = said else {
            return Err(format!("row {seq}'s dispatch does not say what ran"));
        };
        match basis {
            Basis::Decision { nonce, .. } => match self.approvals.remove(action) {
                None | Some(Approved::Unsigned) => {
                    self.unheld(seq);
                    Ok(())
                }
                Some(Approved::Signed {
                    nonce: signed,
                    hash,
                    expires_ms,
                }) => {
                    if **nonce != *signed {
                        return Err(format!("action {action} was dispatched at seq {seq} on decision nonce {nonce}, but no approval of it the approver signed names that nonce (its approval signed {signed})"));
                    }
                    if said.hash != hash {
                        return Err(format!("action {action} was dispatched at seq {seq} as hash {}, but the approver signed its approval over hash {hash}", said.hash));
                    }
                    if millis(at.ts).is_none_or(|t| t > expires_ms + sigs::SLACK_MS) {
                        return Err(format!("action {action} was dispatched at seq {seq} after the approver's decision expired"));
                    }
                    Ok(())
                }
            },
            Basis::Grant { grant, grant_nonce } => {
                let (nonce, scope, credential, id, version) = match self.grants.get(grant.as_str())
                {
                    None | Some(Grant::Unsigned) => {
                        self.unheld(seq);
                        return Ok(());
                    }
                    Some(Grant::Signed {
                        nonce,
                        scope,
                        credential,
                        credential_id,
                        version,
                    }) => (nonce, scope, credential, credential_id, *version),
                };
                if **grant_nonce != **nonce {
                    return Err(format!("action {action} was dispatched at seq {seq} on grant {grant} with nonce {grant_nonce}, which is not the nonce the approver signed the grant with"));
                }
                if *said.credential != **credential {
                    return Err(format!("action {action} of credential {} was dispatched at seq {seq} on grant {grant}, which the approver signed for credential {credential}", said.credential));
                }
                if !summary::parse(&said.summary).is_some_and(|s| summary::covers(scope, s)) {
                    return Err(format!("action {action} was dispatched at seq {seq} on grant {grant}, but what it says ran ({}) is outside the grant's signed scope ({})", said.summary, describe(scope)));
                }
                // A network grant names no credential (its action uses none).
                if matches!(scope, GrantScope::Network { .. }) && id.is_empty() && version == 0 {
                    return Ok(());
                }
                match at.profile.and_then(|p| self.creds.get(&(p.into(), said.credential.clone()))) {
                    Some(c) if *c.id == **id && c.version == version => Ok(()),
                    Some(c) if !c.signed => {
                        self.unheld(seq);
                        Ok(())
                    }
                    _ => Err(format!("action {action} was dispatched at seq {seq} on grant {grant}, which covers version {version} of credential {credential}, not the version in force")),
                }
            }
            Basis::Policy { policy } => {
                let cred = at
                    .profile
                    .and_then(|p| self.creds.get(&(p.into(), said.credential.clone())));
                let Some(c) = cred else {
                    return Err(format!("action {action} was dispatched at seq {seq} on the policy of credential {}, which no signed row added to its session's profile", said.credential));
                };
                if !c.signed {
                    self.unheld(seq);
                    return Ok(());
                }
                if c.approval != *policy {
                    return Err(format!("action {action} was dispatched at seq {seq} on the policy {}, but the approver signed the policy {} for credential {}", policy.as_str(), c.approval.as_str(), said.credential));
                }
                let read = summary::parse(&said.summary).is_some_and(summary::is_read);
                if *policy == Approval::Writes && !read {
                    return Err(format!("action {action} was dispatched at seq {seq} on the policy writes, but it says it is a write ({})", said.summary));
                }
                if c.presence.needs_touch(!read) {
                    return Err(format!("action {action} was dispatched at seq {seq} on the policy of credential {}, whose approvals need a security-key touch: no policy runs it without a card", said.credential));
                }
                Ok(())
            }
        }
    }
}

/// A scope in a person's words (as `policy::scope::describe`, which this layer cannot import).
fn describe(scope: &GrantScope) -> String {
    match scope {
        GrantScope::HttpReads { methods, prefix } => {
            format!("{} under {prefix}, reads only", methods.join(", "))
        }
        GrantScope::HttpWrite { method, path, .. } => format!("{method} {path}"),
        GrantScope::SshCommand { command } => format!("the command {command}"),
        GrantScope::Network { host, port } if host.contains(':') => {
            format!("connections to [{host}]:{port}")
        }
        GrantScope::Network { host, port } => format!("connections to {host}:{port}"),
    }
}
