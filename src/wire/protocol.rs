//! The custody agent's wire protocol, as both ends spell it: versioned, newline-delimited JSON
//! of typed requests and replies (serde enums with unknown fields refused), events, and what a
//! person's commands are shown (approval views, journal rows, status). Framing (the line splitter,
//! the frame cap's enforcement) and the encrypted channel are `agent`'s.
use super::{
    Action, ClientInfo, Credential, Edit, Hardening, Listed, NewCredential, Secret, Signed,
    SignedDecision, State, ToolResult,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The vault's OpenBao login as `vault openbao status` shows it: none, or where and how, and
/// (from a running agent) how its token stands, in a line for people.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenBaoView {
    pub login: Option<super::OpenBaoLogin>,
    /// `None` on a locked vault (no agent, so no token).
    pub token: Option<String>,
    /// The last fault talking to OpenBao, if the last call failed.
    pub last_error: Option<String>,
}

/// The journal's head in the team's OpenBao: whether the vault has a login, the head it holds
/// (`None`: none written yet), or why it could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoteHeadView {
    pub logged_in: bool,
    pub head: Option<(i64, String)>,
    pub error: Option<String>,
}

/// The protocol version both ends must speak (`Hello.v`). 2: the encrypted channel
/// (`agent::channel`) replaced the key-possession challenge. 3: an `ApprovalView` carries the
/// session's typed start row instead of loose client and peer JSON. 4: session grants carry a
/// scope (`GrantPayload` v3), and `grants` / `revoke_grants`. 5: `ping`, and the events that
/// tell a person's command the agent stops, the vault was paused or resumed, or an action left
/// the approval queue undecided. 6: `openbao_login`, `openbao_logout`, `openbao_status` and
/// `openbao_head`. 7: the `egress` role (`vault run`'s proxy: `connect`, `tunneled`, later
/// `intercept` and `swap`). 8: a `swap`'s body may come in a file (`body_file`), and an
/// `ApprovalView` may withhold a body too large for a frame.
pub const VERSION: u32 = 8;

/// The longest frame either end accepts (an MCP line is at most 4 MiB; its wrapping is small).
pub const MAX_FRAME: usize = 8 * 1024 * 1024;

/// Who connects: the MCP adapter (one session per connection), a person's CLI command,
/// `vault approve`, or `vault run`'s network proxy (one session: the contained client's network,
/// which asks for the hosts it may not reach yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Mcp,
    Cli,
    Approver,
    Egress,
}

/// A client's frame: one request with an id the reply (and any events) will carry.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientFrame {
    pub id: u64,
    pub req: Request,
}

/// Everything a client may ask. The first request on a connection must be `Hello`. Its kinds
/// (`RequestKind`, one per variant, derived) say what each role may ask (`RequestKind::for_mcp`).
#[derive(Debug, Serialize, Deserialize, strum::EnumDiscriminants)]
#[strum_discriminants(name(RequestKind), derive(strum::EnumIter, Hash))]
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
    /// Sent first, before `hello`, by `vault run`'s relay for a connection that came from inside
    /// its sandbox: the peer (`pid`, as the relay's `SO_PEERCRED` saw it) is contained. Accepted
    /// only from a peer that runs the agent's own executable; answered `ok` (to the relay, which
    /// then passes bytes through) or refused. The session it opens is marked contained, and only
    /// the MCP role may follow.
    Contained {
        pid: u32,
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
    /// `vault run`'s proxy (role egress): the contained client asks for `host:port`, which the
    /// allow list does not name. It waits as a `network` action for the person's card; the reply
    /// is the action once it is `dispatched` (open the connection) or final (refused: its
    /// reason says why), after `state` events.
    Connect {
        host: String,
        port: u16,
    },
    /// `vault run`'s proxy (role egress): the connection of a dispatched `network` action closed,
    /// having carried `sent` bytes out and `received` back (`error`: how it failed).
    Tunneled {
        action_id: String,
        sent: u64,
        received: u64,
        #[serde(default)]
        error: Option<String>,
    },
    /// `vault run`'s proxy (role egress), once for each `--env NAME=CREDENTIAL` before the
    /// sandbox starts: the credential's bound host and a leaf certificate for it (and nothing
    /// else) from the vault's own CA, made on first use; the reply is `intercept`. With it the
    /// proxy terminates TLS for that host alone, to swap the credential's placeholder. Not
    /// over the channel (`vault run` holds no key): the leaf's key opens nothing but a TLS
    /// session with a client that trusts the vault's CA, which only the sandbox does.
    Intercept {
        credential: String,
    },
    /// `vault run`'s proxy (role egress): a request a tool inside sent to an intercepted host
    /// with `credential`'s placeholder, the placeholder taken out. It runs as an `http_request`
    /// of this session, gated like one (the credential's methods and paths, its policy, the
    /// card, grants, scrubbing, the journal); the reply is the action once final, whose result's
    /// `proxied` holds the response byte for byte.
    Swap {
        credential: String,
        method: String,
        url: String,
        headers: Vec<(String, String)>,
        /// The body's bytes, base64 (any bytes: a git pack, a gzipped request).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        body_base64: Option<String>,
        /// A body too large for a frame: the file the proxy wrote it to in `<vault>/relayed/`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        body_file: Option<RelayedFile>,
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
    /// Answered at once (`ok`) by the connection itself: how a command that waits for long
    /// (`vault approve`) learns the agent still answers.
    Ping,
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
    /// A signed decision; an approval made with the PIN carries it (hex, zeroized).
    Decide {
        decision: SignedDecision,
        #[serde(default)]
        pin: Option<Secret>,
    },
    /// Sets the approval PIN: the approver's signed request and the PIN it commits to.
    SetPin {
        request: Signed,
        pin: Secret,
    },
    Pause {
        reason: String,
    },
    Resume {
        resume: Signed,
    },
    /// Logs the vault in to a team's OpenBao: the approver's signed `OpenBaoPayload` and the
    /// secret_id or token it commits to (hex, zeroized).
    #[serde(rename = "openbao_login")]
    OpenBaoLogin {
        request: Signed,
        secret: Secret,
    },
    /// Removes the OpenBao login, by the approver's signed `OpenBaoPayload` (no login).
    #[serde(rename = "openbao_logout")]
    OpenBaoLogout {
        request: Signed,
    },
    /// Where the vault logs in to OpenBao and how that goes.
    #[serde(rename = "openbao_status")]
    OpenBaoStatus,
    /// The journal's head as the team's OpenBao holds it (read now).
    #[serde(rename = "openbao_head")]
    OpenBaoHead,
    /// The registered security keys.
    #[serde(rename = "approver_keys")]
    ApproverKeys,
    /// Registers a security key, by the approver's signed `KeyPayload` (`add_key`).
    #[serde(rename = "approver_add_key")]
    AddApproverKey {
        request: Signed,
    },
    /// Removes a registered security key, by the approver's signed `KeyPayload` (`remove_key`).
    #[serde(rename = "approver_remove_key")]
    RemoveApproverKey {
        request: Signed,
    },
    /// Records `config.toml`'s `[network] allow` as the approver signed it (`NetworkPayload`);
    /// answered with the hosts.
    SetAllowedHosts {
        request: Signed,
    },
    /// The hosts `vault run`'s sandbox reaches without a card: the allow list in force, if the
    /// approver signed it (a person's command; `vault run` asks before it starts the client).
    AllowedHosts,
    /// The active session grants.
    Grants,
    /// End one session grant or all of them, by the approver's signed `RevocationPayload`.
    RevokeGrants {
        revoke: Signed,
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

impl RequestKind {
    /// What an MCP session may ask, on any connection and so on every contained one: its own
    /// tool calls, their cancellation, a refusal of one of its calls, its own end, and `ping`.
    /// Everything else is a person's command (the journal, the queue, an export, a pause, a
    /// lock, …) and is refused on an MCP connection. A kind added later is refused there until
    /// it is named here.
    pub fn for_mcp(self) -> bool {
        matches!(
            self,
            RequestKind::Tool
                | RequestKind::Cancel
                | RequestKind::Reject
                | RequestKind::End
                | RequestKind::Ping
        )
    }

    /// What `vault run`'s proxy may ask on its egress session: its hosts, what their connections
    /// carried, its placeholders' certificates and swaps, a placeholder seen going elsewhere
    /// (`reject`, journaled as `call.rejected`), its own end, and `ping`. Nothing else, and no other role asks for hosts.
    pub fn for_egress(self) -> bool {
        matches!(
            self,
            RequestKind::Connect
                | RequestKind::Tunneled
                | RequestKind::Intercept
                | RequestKind::Swap
                | RequestKind::Reject
                | RequestKind::End
                | RequestKind::Ping
        )
    }

    /// Every kind the protocol defines (for tests and documentation).
    pub fn all() -> impl Iterator<Item = RequestKind> {
        <RequestKind as strum::IntoEnumIterator>::iter()
    }
}

impl Request {
    pub fn kind(&self) -> RequestKind {
        self.into()
    }

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
                | Request::SetPin { .. }
                | Request::Resume { .. }
                | Request::RevokeGrants { .. }
                | Request::SetAllowedHosts { .. }
                | Request::AddApproverKey { .. }
                | Request::RemoveApproverKey { .. }
        )
    }
}

/// An action as the approver sees it: the stored row, the normalized request (canonical JSON,
/// whose blake3 the approver recomputes and compares with `action.action_hash`), the body, and who
/// asked (the session's start row: the client's self-reported name and the processes the agent
/// saw).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalView {
    pub action: Action,
    pub normalized: String,
    /// Hex of the body bytes, if any.
    pub body_hex: Option<String>,
    /// A body larger than a frame carries (a tool's upload through `vault run`'s proxy) is not
    /// sent: its length instead. A card cannot show it, so it cannot be approved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_withheld_bytes: Option<u64>,
    /// The session that asked, as its `session.start` row recorded it (the client's
    /// self-reported label, `vault mcp` and its parent process), if the journal has it.
    pub session: Option<Box<super::journal::SessionStart>>,
    /// How the credential changed since the person last approved one of its actions, if it did.
    #[serde(default)]
    pub changed: Option<CredentialChange>,
    /// The credential's policy in force (`each` unless the approver signed another), so the
    /// approver knows whether an approval covers the session without asking again.
    #[serde(default)]
    pub policy: Option<super::Approval>,
    /// Where approving needs a security-key touch (`--presence`): the registered credential
    /// ids (hex) the key may sign with. `None`: no touch is needed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub touch_keys: Option<Vec<String>>,
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

/// A session grant as `vault grants` lists it: what it covers, for which session and client, on
/// which credential version, until when, and how many dispatches named it so far.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrantView {
    pub id: String,
    pub session: String,
    /// The session's self-reported client, from its `session.start` row.
    pub client: Option<super::journal::ClientLabel>,
    /// The action whose card it was given on.
    pub action_id: String,
    pub credential: GrantCredential,
    pub scope: super::GrantScope,
    pub created_at: String,
    pub expires_at: String,
    /// `action.dispatched` rows whose basis names this grant.
    pub uses: u64,
}

/// The credential version a grant covers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrantCredential {
    pub id: String,
    pub name: String,
    pub version: i64,
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
    pub hardening: Hardening,
    pub connections: usize,
    pub version: String,
    /// The store as the agent sees it (filled when asked with `Status`).
    #[serde(default)]
    pub store: Option<StoreStatus>,
    /// The configuration the agent read when it started, `section.key` → value (`vault config`
    /// shows what a restart would change).
    #[serde(default)]
    pub config: Vec<(String, u64)>,
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
    /// Whether an approval PIN is set (without one, no card can be approved).
    #[serde(default)]
    pub pin_set: bool,
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
    /// The hosts of the signed network allow list (`AllowedHosts`, `SetAllowedHosts`).
    Hosts(Vec<String>),
    /// A credential's bound host, for `vault run`'s proxy to terminate TLS for (`Intercept`).
    Intercept(Interception),
    /// Session grants: the active ones (`Grants`), or those just revoked (`RevokeGrants`).
    Grants(Vec<GrantView>),
    /// The registered security keys, oldest first.
    ApproverKeys(Vec<KeyView>),
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
    #[serde(rename = "openbao")]
    OpenBao(OpenBaoView),
    RemoteHead(RemoteHeadView),
    Error {
        code: ErrorCode,
        message: String,
    },
}

/// A body passed through a file of `<vault>/relayed/` rather than in a frame (`exec::relayed`):
/// its name there, its length and its blake3 (hex), which the reader holds it to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RelayedFile {
    pub name: String,
    pub bytes: u64,
    pub blake3: String,
}

/// What `vault run`'s proxy needs to terminate TLS for one credential's bound host: the host
/// and port, the vault's CA certificate (for the sandbox's trust bundle), and a leaf for that
/// host signed by it, with its key.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Interception {
    pub host: String,
    pub port: u16,
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: Secret,
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
    /// An action left the approval queue (after `WatchPending`, before the `queue` that no
    /// longer lists it): its state now and why (withdrawn because its call was cancelled or its
    /// client went away, expired, denied by a pause, or decided by another approver).
    Left {
        action_id: String,
        state: State,
        reason: Option<String>,
    },
    /// The vault was paused, and why (after `WatchPending`; also first when it already is).
    Paused { reason: String },
    /// The pause was lifted (after `WatchPending`).
    Resumed,
    /// The agent is stopping, and why in the person's words (to every connection but an MCP
    /// session's, with id 0, just before it closes them).
    Stopping { reason: String },
}

/// An agent's frame: a reply or an event, each with the id of the request it belongs to.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case", deny_unknown_fields)]
pub enum AgentFrame {
    Reply { id: u64, reply: Box<Reply> },
    Event { id: u64, event: Event },
}

/// A registered security key as `vault approver keys` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyView {
    pub key: super::touch::RegisteredKey,
    /// The last signature counter it approved with.
    pub counter: u32,
    pub added_at: String,
}
