//! The audit bench's journal writer: each `append` writes the next row of an endless run of
//! sessions, through the vault's own append path (typed bodies). A session is `session.start`,
//! 100 blocks of 10 rows, `session.end`; a block is one action a person decided (`pending →
//! approved → dispatched → completed`, its `approved` row carrying the approver's signed decision,
//! its dispatch spending that decision's nonce) and two that ran on the signed `never` policy of
//! another credential (`received → dispatched → completed`): one signed decision per 10 rows.
//! The two credentials are added first, signed, as `vault add` adds them.
use agent_vault::credentials::{
    self, Approval, HttpAuth, HttpTarget, NewCredential, Secret, Target,
};
use agent_vault::keys::{signing, ApproverKey};
use agent_vault::store::Store;
use agent_vault::wire::journal::{
    ActionRow, Basis, ClientLabel, Process, RowSignature, SessionEnd, SessionStart,
};
use agent_vault::wire::{ApprovalMethod, Decision, DecisionPayload, Payload, State};
use rusqlite::Connection;

/// Blocks of ten rows per session.
const BLOCKS_PER_SESSION: u64 = 100;
pub const ROWS_PER_SESSION: u64 = 2 + 10 * BLOCKS_PER_SESSION;

/// The rows of a block: (which action of the block, its state).
const BLOCK: [(u8, State); 10] = [
    (0, State::Pending),
    (1, State::Received),
    (0, State::Approved),
    (1, State::Dispatched),
    (0, State::Dispatched),
    (2, State::Received),
    (1, State::Completed),
    (0, State::Completed),
    (2, State::Dispatched),
    (2, State::Completed),
];

pub struct Journal {
    pub rows: u64,
    key: ApproverKey,
    vault_id: String,
}

impl Journal {
    /// A writer for the vault `vault_id` whose approver is `key`; adds the two credentials.
    pub fn new(store: &mut Store, key: &ApproverKey, vault_id: &str) -> Self {
        let key = ApproverKey::from_seed_hex(&key.seed_hex()).expect("a seed");
        for (name, approval) in [("api", Approval::Each), ("free", Approval::Never)] {
            let new = NewCredential {
                id: credentials::new_id("cred"),
                profile: "default".into(),
                name: name.into(),
                approval,
                target: Target::Http(HttpTarget {
                    scheme: "https".into(),
                    host: "api.example.com".into(),
                    port: 443,
                    path_prefix: "/".into(),
                    methods: None,
                    auth: HttpAuth::Bearer,
                    ca_file: None,
                    allow_headers: Vec::new(),
                    secret_from: None,
                    presence: Default::default(),
                }),
                secret: Secret::new(b"bench-token-not-a-secret".to_vec()),
            };
            credentials::add_as_approver(store, &key, vault_id, new).expect("a credential");
        }
        Self {
            rows: 0,
            key,
            vault_id: vault_id.to_owned(),
        }
    }

    /// The approver's signed decision on action `id` of hash `hash`, made with the PIN.
    fn decision(&self, id: &str, hash: &str, nonce: &str) -> RowSignature {
        let payload = DecisionPayload {
            v: DecisionPayload::VERSION,
            vault_id: self.vault_id.clone(),
            action_id: id.to_owned(),
            action_hash: hash.to_owned(),
            decision: Decision::Approve,
            reason: None,
            expires_at: "2999-01-01T00:00:00Z".parse().unwrap(),
            nonce: nonce.to_owned(),
            issued_at: "2026-01-01T00:00:00Z".parse().unwrap(),
            method: ApprovalMethod::Pin,
        };
        RowSignature::of(&signing::sign(&self.key, &payload))
    }

    pub fn append(&mut self, tx: &Connection) {
        let s = self.rows / ROWS_PER_SESSION;
        let k = self.rows % ROWS_PER_SESSION;
        let session = format!("ses_{s:016x}");
        let r = if k == 0 {
            let start = SessionStart {
                client: ClientLabel {
                    name: "bench-client".into(),
                    version: "1.0.0".into(),
                },
                peer: Process {
                    pid: Some(4242),
                    exe: Some("/usr/local/bin/vault".into()),
                },
                parent: Process {
                    pid: Some(4241),
                    exe: Some("/usr/local/bin/bench-client".into()),
                },
                profile: "default".into(),
                protocol_version: "2025-11-25".into(),
                contained: false,
            };
            agent_vault::audit::append(tx, Some(&session), None, &start)
        } else if k == ROWS_PER_SESSION - 1 {
            let end = SessionEnd {
                reason: "client closed stdin".into(),
                withdrawn: 0,
                suppressed_rejections: 0,
            };
            agent_vault::audit::append(tx, Some(&session), None, &end)
        } else {
            let block = s * BLOCKS_PER_SESSION + (k - 1) / 10;
            let (which, state) = BLOCK[((k - 1) % 10) as usize];
            let action = format!("act_{block:016x}{which}");
            let (method, credential) = match which {
                0 => ("POST", "api"),
                _ => ("GET", "free"),
            };
            let summary = format!(
                "{method} https://api.example.com/v1/items/{block}/{which} (credential {credential})"
            );
            let hash = blake3::hash(summary.as_bytes()).to_hex().to_string();
            let nonce = format!("{block:032x}");
            let basis = match (which, state) {
                (0, State::Dispatched) => Some(Basis::Decision {
                    decision: format!("dec_{block:016x}"),
                    nonce: nonce.clone(),
                }),
                (_, State::Dispatched) => Some(Basis::Policy {
                    policy: Approval::Never,
                }),
                _ => None,
            };
            let approved = state == State::Approved;
            let row = ActionRow {
                state,
                tool: "http_request".into(),
                credential: credential.into(),
                signed: approved.then(|| self.decision(&action, &hash, &nonce)),
                method: approved.then_some(ApprovalMethod::Pin),
                hash,
                summary,
                reason: None,
                basis,
                touch: None,
            };
            agent_vault::audit::append(tx, Some(&session), Some(&action), &row)
        };
        r.expect("append");
        self.rows += 1;
    }
}
