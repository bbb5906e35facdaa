//! The vault tests/journal_props.rs runs its steps on: a real SQLCipher store set up as `vault
//! init` sets one up (its key file aside), the approver key, a software security key, and what
//! exists so far (credentials, sessions, actions); each step goes through the vault's services.
use super::steps::Step;
use super::support::soft_key::{no_pin, SoftKey};
use agent_vault::approvals::{self, pin, touch, Claim, Submission, Submitted, Trust, Verdict};
use agent_vault::audit;
use agent_vault::credentials::{self, Approval};
use agent_vault::fido;
use agent_vault::keys::{ApproverKey, MasterKey};
use agent_vault::policy::{validate_http, HttpArgs};
use agent_vault::store::{set_meta, Store};
use agent_vault::wire::journal::{
    ClientLabel, Process, SessionEnd, SessionStart, VaultInit, VaultLock, VaultUnlock,
};
use agent_vault::wire::touch::{Presence, TouchProof};
use agent_vault::wire::{
    ApprovalMethod, Edit, Hardening, HttpAuth, HttpTarget, NewCredential, Op, Outcome, Secret,
    State, Target,
};
use std::time::Duration;

const VAULT: &str = "vlt_props";
const PIN: &str = "2468";

/// The vault the steps run on.
pub(crate) struct World {
    s: Store,
    key: ApproverKey,
    soft: SoftKey,
    reg: Option<fido::Registration>,
    creds: Vec<String>,
    sessions: Vec<String>,
    actions: Vec<String>,
    n: usize,
    dir: std::path::PathBuf,
}

fn target(presence: Presence) -> Target {
    Target::Http(HttpTarget {
        scheme: "https".into(),
        host: "api.example.com".into(),
        port: 443,
        path_prefix: "/".into(),
        methods: None,
        auth: HttpAuth::Bearer,
        ca_file: None,
        allow_headers: Vec::new(),
        secret_from: None,
        presence,
    })
}

fn pick<T>(v: &[T], i: u8) -> Option<&T> {
    (!v.is_empty()).then(|| &v[i as usize % v.len()])
}

/// The policies a step picks from (`each` the most, as on most vaults).
const APPROVALS: [Approval; 5] = [
    Approval::Each,
    Approval::Each,
    Approval::Session,
    Approval::Writes,
    Approval::Never,
];

impl World {
    /// A vault as `vault init` makes it (its key file aside), with an approval PIN.
    pub(crate) fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("av-props-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let key = ApproverKey::generate();
        let mut s = Store::create(&dir.join("vault.db"), &MasterKey::generate()).unwrap();
        // What is checked is what the rows say, not that they reach the disk: no fsync per step.
        s.conn().execute_batch("PRAGMA synchronous = OFF").unwrap();
        let tx = s.write().unwrap();
        set_meta(&tx, "vault_id", VAULT).unwrap();
        set_meta(&tx, "approver_public_key", &key.public_hex()).unwrap();
        let init = VaultInit {
            vault_id: VAULT.into(),
            approver_public_key: key.public_hex(),
            schema_version: agent_vault::store::LATEST_SCHEMA,
        };
        audit::append(&tx, None, None, &init).unwrap();
        tx.commit().unwrap();
        let mut w = Self {
            s,
            key,
            soft: SoftKey::es256(),
            reg: None,
            creds: Vec::new(),
            sessions: Vec::new(),
            actions: Vec::new(),
            n: 0,
            dir,
        };
        w.step(Step::SetPin);
        w.unlock();
        w
    }

    fn trust(&self) -> Trust {
        Trust::new(VAULT, &self.key)
    }

    fn unlock(&mut self) {
        approvals::reap_orphans(&mut self.s).unwrap();
        let body = VaultUnlock {
            agent_pid: 1,
            lifetime_s: 3600,
            hardening: Hardening {
                undumpable: true,
                no_core: true,
                key_locked: true,
            },
        };
        let tx = self.s.write().unwrap();
        audit::append(&tx, None, None, &body).unwrap();
        tx.commit().unwrap();
    }

    fn next(&mut self) -> usize {
        self.n += 1;
        self.n
    }

    /// Runs one step; a refusal by the vault is an outcome like any other (the journal must
    /// verify either way), a panic is not.
    pub(crate) fn step(&mut self, step: Step) {
        let trust = self.trust();
        match step {
            Step::AddCredential { approval, keyed } => {
                let name = format!("c{}", self.next());
                let presence = if keyed { Presence::Key } else { Presence::None };
                let new = NewCredential {
                    id: credentials::new_id("cred"),
                    profile: "default".into(),
                    name: name.clone(),
                    approval: APPROVALS[approval as usize % APPROVALS.len()],
                    target: target(presence),
                    secret: Secret::new(b"tok-props".to_vec()),
                };
                if credentials::add_as_approver(&mut self.s, &self.key, VAULT, new).is_ok() {
                    self.creds.push(name);
                }
            }
            Step::Edit { cred, approval } => {
                let Some(name) = pick(&self.creds, cred).cloned() else {
                    return;
                };
                let edit = Edit {
                    approval: Some(APPROVALS[approval as usize % APPROVALS.len()]),
                    ..Edit::default()
                };
                let _ = credentials::edit_as_approver(
                    &mut self.s,
                    &self.key,
                    VAULT,
                    ("default", &name),
                    edit,
                );
            }
            Step::Remove { cred } => {
                let Some(name) = pick(&self.creds, cred).cloned() else {
                    return;
                };
                let _ = credentials::remove_as_approver(
                    &mut self.s,
                    &self.key,
                    VAULT,
                    ("default", &name),
                );
            }
            Step::StartSession => {
                let id = format!("ses_{}", self.next());
                let body = SessionStart {
                    client: ClientLabel {
                        name: "props".into(),
                        version: "1".into(),
                    },
                    peer: Process::default(),
                    parent: Process::default(),
                    profile: "default".into(),
                    protocol_version: "2025-11-25".into(),
                    contained: false,
                };
                let tx = self.s.write().unwrap();
                audit::append(&tx, Some(&id), None, &body).unwrap();
                tx.commit().unwrap();
                self.sessions.push(id);
            }
            Step::EndSession { session } => {
                let Some(id) = pick(&self.sessions, session).cloned() else {
                    return;
                };
                self.end_session(&id);
                self.sessions.retain(|s| *s != id);
            }
            Step::Call {
                session,
                cred,
                write,
                path,
                expiring,
            } => {
                // A call comes in a session: the client's first call opens one.
                if self.sessions.is_empty() {
                    self.step(Step::StartSession);
                }
                let (Some(ses), Some(name)) = (
                    pick(&self.sessions, session).cloned(),
                    pick(&self.creds, cred).cloned(),
                ) else {
                    return;
                };
                let n = self.next();
                let method = if write { "DELETE" } else { "GET" };
                let url = format!("https://api.example.com/repos/p{path}/items/{n}");
                self.submit(&ses, &name, method, url, expiring);
            }
            Step::ReadAgain { action } => {
                // The reads a person approved, the latest first.
                let done = [State::Approved, State::Dispatched, State::Completed];
                let reads: Vec<String> = self
                    .actions
                    .iter()
                    .rev()
                    .filter(|id| {
                        approvals::find(&self.s, id)
                            .is_ok_and(|a| a.summary.starts_with("GET ") && done.contains(&a.state))
                    })
                    .cloned()
                    .collect();
                let Some(id) = pick(&reads, action).cloned() else {
                    return;
                };
                let a = approvals::find(&self.s, &id).unwrap();
                let n = self.next();
                let Some(url) = a.summary.split(' ').nth(1) else {
                    return;
                };
                let dir = &url[..url.rfind('/').unwrap_or(url.len())];
                let url = format!("{dir}/again{n}");
                self.submit(&a.session_id, &a.credential_name, "GET", url, false);
            }
            Step::Approve { action, how } => {
                let candidates = self.in_state(&[State::Pending]);
                let Some(id) = pick(&candidates, action).cloned() else {
                    return;
                };
                self.approve(&id, how);
            }
            Step::Deny { action } => {
                let candidates = self.in_state(&[State::Pending]);
                let Some(id) = pick(&candidates, action).cloned() else {
                    return;
                };
                let _ = self.decide(
                    &id,
                    &Verdict::Deny(Some("no".into())),
                    ApprovalMethod::Key,
                    None,
                    None,
                );
            }
            Step::Dispatch { action, finish } => {
                let candidates = self.in_state(&[State::Approved, State::Received]);
                let Some(id) = pick(&candidates, action).cloned() else {
                    return;
                };
                if let Ok(Claim::Go(_)) = approvals::claim(&mut self.s, &trust, &id) {
                    if finish {
                        let done = Outcome {
                            state: State::Completed,
                            result: serde_json::json!({"http": {"status": 204}}),
                            reason: None,
                        };
                        approvals::finish(&mut self.s, &id, &done).unwrap();
                    }
                }
            }
            Step::Withdraw { action } => {
                let candidates = self.in_state(&[State::Pending]);
                let Some(id) = pick(&candidates, action).cloned() else {
                    return;
                };
                let Ok(a) = approvals::find(&self.s, &id) else {
                    return;
                };
                let _ =
                    approvals::withdraw(&mut self.s, &a.session_id, &id, "the client cancelled");
            }
            Step::Expire => {
                approvals::expire_due(&mut self.s).unwrap();
            }
            Step::Revoke { all } => {
                let grants = approvals::list_grants(&self.s, &trust).unwrap();
                let one = grants.first().map(|g| g.id.clone());
                let which = if all { None } else { one.as_deref() };
                let signed = approvals::sign_revocation(&self.key, VAULT, which);
                let _ = approvals::revoke_grants(&mut self.s, &trust, &signed);
            }
            Step::Pause => {
                approvals::pause(&mut self.s, "props pause").unwrap();
            }
            Step::Resume => {
                let signed = approvals::sign_resume(&self.key, VAULT);
                approvals::resume(&mut self.s, &trust, &signed).unwrap();
            }
            Step::SetPin => {
                let pin = Secret::new(PIN.as_bytes().to_vec());
                let signed = pin::sign_pin(&self.key, VAULT, &pin);
                pin::set(&mut self.s, &trust, &signed, &pin).unwrap();
            }
            Step::AddKey => {
                if self.reg.is_some() {
                    return;
                }
                self.soft = SoftKey::es256();
                let nonce = format!("{:020}", self.next());
                let reg = fido::register(&mut self.soft, VAULT, &nonce, &[], &mut no_pin).unwrap();
                let request = touch::sign_key_change(
                    &self.key,
                    VAULT,
                    Op::AddKey,
                    touch::registered(&reg, "main"),
                );
                touch::add_key(&mut self.s, &trust, &request).unwrap();
                self.reg = Some(reg);
            }
            Step::RemoveKey => {
                let Some(reg) = self.reg.take() else { return };
                let request = touch::sign_key_change(
                    &self.key,
                    VAULT,
                    Op::RemoveKey,
                    touch::registered(&reg, "main"),
                );
                touch::remove_key(&mut self.s, &trust, &request).unwrap();
            }
            Step::Forge => {
                let Ok(waiting) = approvals::list_pending(&self.s) else {
                    return;
                };
                let Some(a) = waiting.first() else { return };
                let row = agent_vault::wire::journal::ActionRow {
                    state: State::Approved,
                    tool: a.tool.clone(),
                    credential: a.credential_name.clone(),
                    summary: a.summary.clone(),
                    hash: a.action_hash.clone(),
                    reason: None,
                    basis: None,
                    method: Some(ApprovalMethod::Pin),
                    touch: None,
                    signed: None,
                };
                let tx = self.s.write().unwrap();
                audit::append(&tx, Some(&a.session_id), Some(&a.id), &row).unwrap();
                tx.execute(
                    "UPDATE actions SET state = 'approved' WHERE id = ?1",
                    [&a.id],
                )
                .unwrap();
                tx.commit().unwrap();
            }
            Step::Restart => {
                for id in std::mem::take(&mut self.sessions) {
                    self.end_session(&id);
                }
                let tx = self.s.write().unwrap();
                let body = VaultLock {
                    reason: "vault lock".into(),
                };
                audit::append(&tx, None, None, &body).unwrap();
                tx.commit().unwrap();
                self.unlock();
            }
        }
    }

    /// A call of `session` on credential `name`, as `vault mcp` hands it to the agent.
    fn submit(&mut self, session: &str, name: &str, method: &str, url: String, expiring: bool) {
        let Ok(c) = credentials::get(&self.s, "default", name) else {
            return;
        };
        let args = HttpArgs {
            credential: name.to_owned(),
            method: method.into(),
            url,
            ..HttpArgs::default()
        };
        let req = validate_http(&c, args).unwrap();
        let expiry = if expiring {
            Duration::ZERO
        } else {
            Duration::from_secs(3600)
        };
        let sub = Submission {
            session_id: session,
            client: "props",
            profile: "default",
            credential: &c,
            request: &req,
            idempotency_key: None,
            expiry,
            replay_window: Duration::from_secs(600),
            unresolved: None,
        };
        let trust = self.trust();
        if let Ok(Submitted::Created(a)) = approvals::submit(&mut self.s, &trust, sub) {
            self.actions.push(a.id);
        }
    }

    /// The actions asked for so far that are in one of `states` now.
    fn in_state(&self, states: &[State]) -> Vec<String> {
        self.actions
            .iter()
            .filter(|id| approvals::find(&self.s, id).is_ok_and(|a| states.contains(&a.state)))
            .cloned()
            .collect()
    }

    /// As `services::session_end`: what waits is withdrawn, then `session.end`.
    fn end_session(&mut self, id: &str) {
        let n = approvals::withdraw_session(&mut self.s, id, "the client went away").unwrap();
        let tx = self.s.write().unwrap();
        let body = SessionEnd {
            reason: "eof".into(),
            withdrawn: n as u64,
            suppressed_rejections: 0,
        };
        audit::append(&tx, Some(id), None, &body).unwrap();
        tx.commit().unwrap();
    }

    /// An approval made `how`: 0-2 the PIN on the card (with `s` for 1 and 2), 3 a wrong PIN, 4
    /// the passphrase (`vault approve --id`), 5 a key press alone (refused); a credential that
    /// needs a touch gets the registered key's.
    fn approve(&mut self, id: &str, how: u8) {
        let (verdict, method, pin) = match how {
            0 => (Verdict::Approve, ApprovalMethod::Pin, Some(PIN)),
            1 | 2 => (Verdict::ApproveSession, ApprovalMethod::Pin, Some(PIN)),
            3 => (Verdict::Approve, ApprovalMethod::Pin, Some("9999")),
            4 => (Verdict::Approve, ApprovalMethod::Passphrase, None),
            _ => (Verdict::Approve, ApprovalMethod::Key, None),
        };
        let toucher = self.reg.as_ref().map(|r| r.credential_id.clone());
        let _ = self.decide(id, &verdict, method, pin, toucher);
    }

    fn decide(
        &mut self,
        id: &str,
        verdict: &Verdict,
        method: ApprovalMethod,
        pin: Option<&str>,
        touch_with: Option<Vec<u8>>,
    ) -> Result<(), approvals::ApprovalError> {
        let a = approvals::find(&self.s, id)?;
        let (text, _) = approvals::stored_request(&self.s, id)?;
        let (normalized, _) = agent_vault::policy::read_normalized(&text).unwrap();
        let mut signed = approvals::sign_decision(
            &self.key,
            VAULT,
            id,
            &a.action_hash,
            &normalized,
            &a.expires_at,
            verdict,
            method,
            Duration::from_secs(3600),
        );
        if let Some(cred) = touch_with {
            let d: agent_vault::wire::DecisionPayload =
                serde_json::from_str(&signed.decision.payload).unwrap();
            let c = fido::challenge(VAULT, &a.action_hash, &d.nonce);
            let t =
                fido::touch(&mut self.soft, &c, std::slice::from_ref(&cred), &mut no_pin).unwrap();
            signed.touch = Some(TouchProof {
                credential_id: hex::encode(t.credential_id),
                authenticator_data: hex::encode(t.auth_data),
                signature: hex::encode(t.signature),
            });
        }
        let pin = pin.map(|p| Secret::new(p.as_bytes().to_vec()));
        let trust = self.trust();
        approvals::decide(&mut self.s, &trust, &signed, pin.as_ref()).map(drop)
    }

    /// Why the journal as it stands is not held to the approver's key, if it is not: in one
    /// thread, and at the `last` step also in parallel (the same verdict) and from its export.
    pub(crate) fn broken(&self, last: bool) -> Option<String> {
        let key = self.key.public();
        let one = audit::verify_store(self.s.conn(), VAULT, &[], Some(&key)).unwrap();
        if last {
            let many = audit::verify_store_with(&self.s, VAULT, &[], Some(&key), 2, 3).unwrap();
            if many != one {
                return Some(format!("the parallel verdict differs: {many:?} vs {one:?}"));
            }
        }
        if !one.held() {
            return Some(one.to_json_line());
        }
        if last {
            let file = self.dir.join(format!("export-{}.jsonl", self.next_file()));
            audit::export(self.s.conn(), &file).unwrap();
            let offline = audit::verify_file(&file, &[], Some(&key)).unwrap();
            std::fs::remove_file(&file).unwrap();
            if !offline.held() || offline.rows != one.rows {
                return Some(format!("the export: {}", offline.to_json_line()));
            }
        }
        None
    }

    /// What the journal holds, by kind, with a dispatch's basis and an approval's touch named
    /// (`action.dispatched grant`, `action.approved touch`): what the sequences reached.
    pub(crate) fn kinds(&self) -> Vec<String> {
        let sql = "SELECT DISTINCT kind \
            || CASE WHEN json_extract(body, '$.basis.policy') IS NOT NULL THEN ' policy' \
                    WHEN json_extract(body, '$.basis.grant') IS NOT NULL THEN ' grant' \
                    WHEN json_extract(body, '$.basis.decision') IS NOT NULL THEN ' decision' \
                    WHEN json_extract(body, '$.touch') IS NOT NULL THEN ' touch' ELSE '' END \
            FROM audit";
        let mut stmt = self.s.conn().prepare(sql).unwrap();
        let rows = stmt.query_map([], |r| r.get(0)).unwrap();
        rows.map(Result::unwrap).collect()
    }

    fn next_file(&self) -> usize {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }
}

impl Drop for World {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
