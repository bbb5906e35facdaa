//! The custody agent's wire protocol: versioned, newline-delimited JSON of typed requests and
//! replies (serde enums with unknown fields refused), a frame cap, and the line splitter both
//! ends use. Frames that may carry a secret (a person's `vault add`) are read into and wiped from
//! zeroizing buffers.
use crate::approvals::{Action, Signed, SignedDecision, State};
use crate::credentials::{Credential, Edit, Listed, NewCredential};
use crate::mcp::protocol::ClientInfo;
use crate::services::tools::ToolResult;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use zeroize::Zeroizing;

/// The protocol version both ends must speak (`Hello.v`). 2: the encrypted channel
/// (`agent::channel`) replaced the key-possession challenge.
pub const VERSION: u32 = 2;

/// The longest frame either end accepts (an MCP line is at most 4 MiB; its wrapping is small).
pub const MAX_FRAME: usize = 8 * 1024 * 1024;

/// Who connects: the MCP adapter (one session per connection), a person's CLI command, or
/// `vault approve`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Mcp,
    Cli,
    Approver,
}

/// A client's frame: one request with an id the reply (and any events) will carry.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientFrame {
    pub id: u64,
    pub req: Request,
}

/// Everything a client may ask. The first request on a connection must be `Hello`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    Hello {
        v: u32,
        role: Role,
        #[serde(default)]
        client: Option<ClientInfo>,
        #[serde(default)]
        profile: Option<String>,
    },
    /// An MCP `tools/call` (role mcp): events `progress`/`state`, then the `tool` reply.
    Tool {
        name: String,
        args: Map<String, Value>,
    },
    /// Withdraw interest in the `Tool` request with id `call` (MCP `notifications/cancelled`).
    Cancel {
        call: u64,
    },
    /// A call the MCP adapter refused before it reached the agent: journaled as `call.rejected`.
    Reject {
        code: i64,
        reason: String,
        fingerprint: String,
        tool: Option<String>,
    },
    /// The session ends (stdin EOF, SIGTERM, protocol error): why. Answered once what waits is
    /// withdrawn and `session.end` is journaled and anchored.
    End {
        reason: String,
    },
    Status,
    /// `vault lock`: the agent journals it, zeroizes the key and exits.
    Lock,
    Credentials {
        profile: Option<String>,
    },
    /// A new credential and the approver's signature over what it becomes.
    AddCredential {
        new: NewCredential,
        signature: String,
    },
    /// An edit of the credential at `version`, with the approver's signature over the result.
    EditCredential {
        profile: String,
        name: String,
        version: i64,
        edit: Edit,
        signature: String,
    },
    /// A removal, signed by the approver for this credential at its current version.
    RemoveCredential {
        profile: String,
        name: String,
        removal: Signed,
    },
    Pending,
    /// Like `Pending`, then a `queue` event every time the queue changes (role approver).
    WatchPending,
    /// One action with what the approver needs to re-derive its hash.
    ForApproval {
        action_id: String,
    },
    Decide {
        decision: SignedDecision,
    },
    Pause {
        reason: String,
    },
    Resume {
        resume: Signed,
    },
    /// Journal rows after `after` (at most `limit`); with `wait_ms`, waits that long for one.
    Journal {
        after: i64,
        limit: u32,
        #[serde(default)]
        wait_ms: u64,
    },
    Verify {
        anchors: Vec<(i64, String)>,
    },
    Export {
        path: String,
    },
}

impl Request {
    /// Whether the request carries a secret, a signature or something to sign, or answers with
    /// what a card shows: such a request is accepted only over the encrypted channel, which only
    /// a process holding the vault's key can open (a relay on the socket path sees ciphertext).
    pub fn needs_channel(&self) -> bool {
        matches!(
            self,
            Request::AddCredential { .. }
                | Request::EditCredential { .. }
                | Request::RemoveCredential { .. }
                | Request::WatchPending
                | Request::ForApproval { .. }
                | Request::Decide { .. }
                | Request::Resume { .. }
        )
    }
}

/// An action as the approver sees it: the stored row, the normalized request (canonical JSON,
/// whose blake3 the approver recomputes and compares with `action.action_hash`), the body, and who
/// asked (the client's self-reported name and the peer process the agent saw).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalView {
    pub action: Action,
    pub normalized: String,
    /// Hex of the body bytes, if any.
    pub body_hex: Option<String>,
    pub client: Value,
    pub peer: Value,
    /// How the credential changed since the person last approved one of its actions, if it did.
    #[serde(default)]
    pub changed: Option<CredentialChange>,
}

/// A credential's changes since the version the person last approved an action of.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CredentialChange {
    /// The credential version of the last approved action.
    pub approved_version: i64,
    /// Each changed field: its name, and the old and new values where the journal has them.
    pub fields: Vec<FieldChange>,
}

/// One changed field of a credential.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FieldChange {
    pub field: String,
    pub old: Option<String>,
    pub new: Option<String>,
}

impl ApprovalView {
    /// The normalized request, after checking that it hashes to the action's hash, that the body
    /// is the one it names, and that it is for the action's credential version: what an
    /// approver shows is then what it signs.
    pub fn verified_request(&self) -> Result<Value, String> {
        let a = &self.action;
        let normalized: Value = serde_json::from_str(&self.normalized)
            .map_err(|_| format!("action {} carries no readable request", a.id))?;
        if crate::policy::action_hash(&normalized) != a.action_hash {
            return Err(format!(
                "action {} does not match its hash; refusing to show or sign it",
                a.id
            ));
        }
        let body = match self.body_hex.as_deref().map(hex::decode) {
            None => None,
            Some(Ok(b)) => Some(b),
            Some(Err(_)) => return Err(format!("action {}'s body is malformed", a.id)),
        };
        let body_hash = body.as_ref().map(|b| blake3::hash(b).to_hex().to_string());
        if normalized["kind"] == "http"
            && normalized["body_blake3"].as_str() != body_hash.as_deref()
        {
            return Err(format!(
                "action {}'s body is not the one its hash covers",
                a.id
            ));
        }
        if normalized["credential"]["id"] != a.credential_id.as_str()
            || normalized["credential"]["version"] != a.credential_version
            || normalized["credential"]["name"] != a.credential_name.as_str()
        {
            return Err(format!(
                "action {} names another credential version than its request",
                a.id
            ));
        }
        Ok(normalized)
    }
}

/// One journal row as stored (the export's fields).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JournalRow {
    pub seq: i64,
    pub ts: String,
    pub kind: String,
    pub session: Option<String>,
    pub action: Option<String>,
    pub body: String,
    pub prev: String,
    pub hash: String,
}

/// What `vault doctor` and `vault unlock` show of a running agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentStatus {
    pub pid: u32,
    pub vault_id: String,
    pub socket: String,
    pub started_at: String,
    pub locks_at: String,
    pub idle_seconds: u64,
    pub hardening: crate::sys::Hardening,
    pub connections: usize,
    pub version: String,
    /// The store as the agent sees it (filled when asked with `Status`).
    #[serde(default)]
    pub store: Option<StoreStatus>,
}

/// What `vault doctor` shows of the open store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreStatus {
    pub schema_version: i64,
    pub cipher_version: String,
    pub journal_rows: i64,
    pub journal_head: i64,
    pub paused: Option<String>,
    pub pending: usize,
}

/// The agent's answer to one request.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "kind", content = "data", rename_all = "snake_case")]
pub enum Reply {
    Ok,
    Welcome {
        v: u32,
        vault_id: String,
        pid: u32,
        session: Option<String>,
        /// Whether this connection runs over the encrypted channel.
        secure: bool,
        /// What the agent noticed that the person should hear (its socket path moved, …).
        #[serde(default)]
        warnings: Vec<String>,
    },
    Tool(ToolResult),
    /// The tool call was cancelled by the client: MCP sends no response.
    Cancelled,
    Status(AgentStatus),
    Credentials(Vec<Listed>),
    Credential(Credential),
    Pending(Vec<ApprovalView>),
    View(ApprovalView),
    Action(Action),
    Count(usize),
    Flag(bool),
    Rows(Vec<JournalRow>),
    /// `vault verify`'s report as its `--json` line (keys in their documented order), and how
    /// many anchors came from `anchors.jsonl`.
    Verify {
        report: String,
        from_file: usize,
    },
    Exported {
        rows: u64,
        head: Option<(i64, String)>,
    },
    Error {
        code: ErrorCode,
        message: String,
    },
}

/// Why a request failed, so a CLI can map it to an exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// Malformed frame, unknown op, wrong role or version.
    Protocol,
    /// The request is well formed but its content is not acceptable.
    Invalid,
    NotFound,
    /// A signature that is not the approver's.
    WrongApprover,
    /// The vault is paused.
    Paused,
    /// A per-connection or per-session limit.
    Limit,
    Internal,
}

/// Something the agent pushes while a request runs (tagged with that request's id).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Event {
    /// A waiting tool call is still waiting (MCP `notifications/progress`).
    Progress { n: u64, message: String },
    /// The call's action changed state. `dispatched` is written before the executor starts.
    State { action_id: String, state: State },
    /// The approval queue changed (after `WatchPending`).
    Queue { actions: Vec<ApprovalView> },
}

/// An agent's frame: a reply or an event, each with the id of the request it belongs to.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case", deny_unknown_fields)]
pub enum AgentFrame {
    Reply { id: u64, reply: Box<Reply> },
    Event { id: u64, event: Event },
}

/// One frame as a line, in a buffer that is wiped when dropped.
pub fn encode<T: Serialize>(frame: &T) -> Zeroizing<Vec<u8>> {
    let mut line = Zeroizing::new(Vec::with_capacity(256));
    serde_json::to_writer(&mut *line, frame).expect("protocol frames always serialize");
    line.push(b'\n');
    line
}

/// Why a frame could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("a frame is longer than {MAX_FRAME} bytes")]
    TooLong,
    #[error("the frame is not a valid message: {0}")]
    Malformed(String),
}

/// Splits a byte stream into lines, refusing a line past `MAX_FRAME` as soon as it is too long.
/// The buffer is zeroized as it is consumed and when dropped.
#[derive(Default)]
pub struct Splitter {
    buf: Zeroizing<Vec<u8>>,
    /// How much of `buf` is known to hold no newline.
    scanned: usize,
}

impl Splitter {
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The next complete line (without its `\n`), if one is buffered.
    pub fn next_line(&mut self) -> Result<Option<Zeroizing<Vec<u8>>>, FrameError> {
        match self.buf[self.scanned..].iter().position(|&b| b == b'\n') {
            Some(i) => {
                let i = self.scanned + i;
                self.scanned = 0;
                let mut line = Zeroizing::new(self.buf[..i].to_vec());
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                let rest = self.buf[i + 1..].to_vec();
                self.buf.iter_mut().for_each(|b| *b = 0);
                *self.buf = rest;
                Ok(Some(line))
            }
            None if self.buf.len() > MAX_FRAME => Err(FrameError::TooLong),
            None => {
                self.scanned = self.buf.len();
                Ok(None)
            }
        }
    }
}

/// Parses one line as `T`.
pub fn decode<T: for<'de> Deserialize<'de>>(line: &[u8]) -> Result<T, FrameError> {
    serde_json::from_slice(line).map_err(|e| FrameError::Malformed(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip_and_unknown_fields_are_refused() {
        let f = ClientFrame {
            id: 7,
            req: Request::Pause { reason: "x".into() },
        };
        let line = encode(&f);
        let back: ClientFrame = decode(&line[..line.len() - 1]).unwrap();
        assert!(matches!(back.req, Request::Pause { reason } if reason == "x"));
        for bad in [
            r#"{"id":1,"req":{"op":"pause","reason":"x","extra":1}}"#,
            r#"{"id":1,"req":{"op":"nope"}}"#,
            r#"{"id":1,"req":{"op":"pause","reason":"x"},"more":2}"#,
            r#"{"id":-1,"req":{"op":"status"}}"#,
        ] {
            assert!(decode::<ClientFrame>(bad.as_bytes()).is_err(), "{bad}");
        }
    }

    #[test]
    fn splitter_caps_frames_and_keeps_the_rest() {
        let mut s = Splitter::default();
        s.push(b"ab\ncd");
        assert_eq!(&s.next_line().unwrap().unwrap()[..], b"ab");
        assert!(s.next_line().unwrap().is_none());
        s.push(b"\n");
        assert_eq!(&s.next_line().unwrap().unwrap()[..], b"cd");
        s.push(&vec![b'x'; MAX_FRAME + 1]);
        assert!(matches!(s.next_line(), Err(FrameError::TooLong)));
    }
}
