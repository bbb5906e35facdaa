//! Security-key touches, as the journal alone proves them (a verifier with no key and no
//! device): the keys registered (`approver.key_add`, `approver.key_remove`), what each credential
//! requires (`presence` in its `credential.add`/`edit` binding), each session's profile, and every
//! `action.approved` row. An approval of a credential that needs a touch must carry one; a touch
//! must come from a key registered before it and not removed, verify over this vault, the row's
//! action hash and the decision nonce it names, and move that key's counter on. The work stays
//! off the common path: nothing is read from an `approved` row until a credential asks for a
//! touch or the row carries one.
use crate::fido;
use crate::wire::journal::{CredentialBody, KeyAdded, KeyRemoved, Kind, SessionStart};
use crate::wire::touch::{Presence, TouchRecord};
use crate::wire::Target;
use std::collections::HashMap;

/// A key the journal registered.
#[derive(Debug)]
struct Key {
    name: String,
    public: fido::PublicKey,
    counter: Option<u32>,
    removed: bool,
    /// Its registration row carries the approver's signature (checked where a key is given).
    signed: bool,
}

/// What the journal told so far about keys, credentials and sessions.
#[derive(Debug, Default)]
pub(super) struct Touches {
    keys: HashMap<String, Key>,
    /// (profile, credential name) → what an approval needs; only credentials that need a touch.
    presence: HashMap<(String, String), Presence>,
    /// Session id → its profile.
    sessions: HashMap<String, String>,
    /// The decision nonces touches were made for: a touch counts once.
    used: std::collections::HashSet<String>,
}

/// The parts of an `action.approved` row a touch check reads.
#[derive(serde::Deserialize)]
struct Approved {
    credential: String,
    summary: String,
    hash: String,
    #[serde(default)]
    touch: Option<TouchRecord>,
}

fn unreadable(seq: i64, kind: Kind, e: serde_json::Error) -> String {
    format!("row {seq} ({kind}) has no readable body: {e}")
}

/// Whether the in-order checks read the body of a row of `kind` (the rest keep none).
pub(super) fn reads_body(kind: Option<Kind>) -> bool {
    matches!(
        kind,
        Some(
            Kind::KeyAdd
                | Kind::KeyRemove
                | Kind::CredentialAdd
                | Kind::CredentialEdit
                | Kind::CredentialRm
                | Kind::SessionStart
                | Kind::Action(crate::wire::State::Approved)
        )
    )
}

impl Touches {
    /// A row without an action: keys, credentials and sessions are recorded.
    pub(super) fn apply(
        &mut self,
        seq: i64,
        kind: Option<Kind>,
        session: Option<&str>,
        body: &str,
        signed: bool,
    ) -> Result<(), String> {
        match kind {
            Some(k @ Kind::KeyAdd) => {
                let add: KeyAdded =
                    serde_json::from_str(body).map_err(|e| unreadable(seq, k, e))?;
                let public = hex::decode(&add.key.public_key)
                    .ok()
                    .and_then(|c| fido::parse_cose_key(&c).ok())
                    .ok_or_else(|| {
                        format!(
                            "row {seq} registers key {} with a public key that does not read",
                            add.key.name
                        )
                    })?;
                self.keys.insert(
                    add.key.credential_id,
                    Key {
                        name: add.key.name,
                        public,
                        counter: None,
                        removed: false,
                        signed,
                    },
                );
            }
            Some(k @ Kind::KeyRemove) => {
                let rm: KeyRemoved =
                    serde_json::from_str(body).map_err(|e| unreadable(seq, k, e))?;
                match self.keys.get_mut(&rm.credential_id) {
                    Some(key) if !key.removed => key.removed = true,
                    _ => {
                        return Err(format!(
                            "row {seq} removes key {}, which no earlier row registered",
                            rm.name
                        ))
                    }
                }
            }
            Some(k @ (Kind::CredentialAdd | Kind::CredentialEdit | Kind::CredentialRm)) => {
                let c: CredentialBody =
                    serde_json::from_str(body).map_err(|e| unreadable(seq, k, e))?;
                let at = (c.profile, c.name);
                let needs = match &c.binding {
                    Target::Http(h) => h.presence,
                    Target::Ssh(s) => s.presence,
                };
                if k == Kind::CredentialRm || needs.is_none() {
                    self.presence.remove(&at);
                } else {
                    self.presence.insert(at, needs);
                }
            }
            Some(k @ Kind::SessionStart) => {
                // Only needed once some credential asks for a touch; cheap enough to keep.
                let s: SessionStart =
                    serde_json::from_str(body).map_err(|e| unreadable(seq, k, e))?;
                if let Some(id) = session {
                    self.sessions.insert(id.to_owned(), s.profile);
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// The profile of `session`, from its `session.start` row.
    pub(super) fn profile_of(&self, session: &str) -> Option<&str> {
        self.sessions.get(session).map(String::as_str)
    }

    /// An `action.approved` row at `seq` in `session`: its touch, where it needs or carries one.
    /// Returns, for a touch, whether its key's registration row carried a signature.
    pub(super) fn check_approved(
        &mut self,
        vault_id: &str,
        seq: i64,
        session: Option<&str>,
        body: &str,
    ) -> Result<Option<bool>, String> {
        if self.presence.is_empty() && !body.contains("\"touch\"") {
            return Ok(None);
        }
        let row: Approved = serde_json::from_str(body)
            .map_err(|e| unreadable(seq, Kind::Action(crate::wire::State::Approved), e))?;
        let profile = session.and_then(|s| self.sessions.get(s));
        let needs = profile
            .and_then(|p| self.presence.get(&(p.clone(), row.credential.clone())))
            .copied()
            .unwrap_or_default();
        // The summary names the method first; a GET or HEAD is taken as a read (the agent, which
        // sees the whole request, also asks for a touch on a GET with a body).
        let read = row.summary.starts_with("GET ") || row.summary.starts_with("HEAD ");
        let Some(touch) = row.touch else {
            if needs.needs_touch(!read) {
                return Err(format!("row {seq} approves an action of credential {}, which needs a security-key touch, and carries none", row.credential));
            }
            return Ok(None);
        };
        if !self.used.insert(touch.nonce.clone()) {
            return Err(format!("row {seq}'s touch was made for a decision an earlier approval's touch was made for: a touch counts once"));
        }
        let Some(key) = self
            .keys
            .get_mut(&touch.credential_id)
            .filter(|k| !k.removed)
        else {
            return Err(format!("row {seq}'s touch comes from a key no earlier row registered (or one removed before)"));
        };
        let (Ok(data), Ok(sig)) = (
            hex::decode(&touch.authenticator_data),
            hex::decode(&touch.signature),
        ) else {
            return Err(format!("row {seq}'s touch is not hex"));
        };
        let challenge = fido::challenge(vault_id, &row.hash, &touch.nonce);
        let read = fido::verify_assertion(&key.public, &challenge, &data, &sig).map_err(|e| {
            format!(
                "row {seq}'s touch by key {} does not verify for this action: {e}",
                key.name
            )
        })?;
        if !fido::counter_moved_on(key.counter, read.counter) {
            return Err(format!(
                "row {seq}'s touch by key {} has counter {} after {}: the counter went back (a cloned key, or a touch used twice)",
                key.name,
                read.counter,
                key.counter.unwrap_or_default()
            ));
        }
        key.counter = Some(read.counter);
        Ok(Some(key.signed))
    }
}
