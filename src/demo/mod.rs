//! `vault demo`: the whole flow on a throwaway vault against a loopback HTTP target and an
//! in-process SSH server (`ssh.rs`, `ssh_target.rs`), through the real processes: `vault init`
//! starts a custody agent, the real `vault mcp` asks for actions, they wait, a person (or, without
//! a terminal, the scripted path) approves them, the agent injects the secret, the target answers,
//! the secret is scrubbed from the result, and the journal verifies.
//! Progress is reported through a callback; nothing prints here.
mod ssh;
pub(crate) mod ssh_target;
mod target;

use crate::agent::client::Client;
use crate::agent::handoff::approver_client;
use crate::agent::protocol::{ApprovalView, Reply, Request, Role};
use crate::approvals::Verdict;
use crate::audit;
use crate::credentials::{
    Approval, HttpAuth, HttpTarget, NewCredential, Secret, Target as CredTarget,
};
use crate::keys::{KeyMaterial, Passphrase};
use crate::paths::VaultPaths;
use crate::vault::Vault;
use crate::wire::journal::VerifyLine;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How the approval is given.
pub(crate) enum Approver<'a> {
    /// The person, on the real card: runs `vault approve` on this terminal for the demo vault
    /// (given its directory and a 0600 file holding its passphrase) until the person quits it.
    Person(&'a mut dyn FnMut(&std::path::Path, &std::path::Path) -> Result<(), String>),
    /// No terminal: approve through the scripted path, and say so.
    Scripted,
}

/// The demo vault's passphrase file (0600, inside the throwaway vault directory).
fn passphrase_file(paths: &VaultPaths) -> std::path::PathBuf {
    paths.dir().join("demo-passphrase")
}

/// Errors of the demo.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DemoError {
    #[error("demo step failed: {0}")]
    Step(String),
}

fn step(msg: impl Into<String>) -> DemoError {
    DemoError::Step(msg.into())
}

/// How the flow went, once every step ran: how many of its two actions the person denied (a
/// denial is shown working, but the demo did not run the whole flow).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Outcome {
    pub denied: u32,
}

/// Runs the demo; `say` receives one line per step. Returns Ok only if every step succeeded.
pub(crate) fn run(
    say: &mut dyn FnMut(&str),
    approver: Approver<'_>,
    keep: bool,
) -> Result<Outcome, DemoError> {
    let dir = std::env::temp_dir().join(format!("agent-vault-demo-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let paths = VaultPaths::new(&dir);
    cleanup_on_signal(&paths);
    let result = flow(&paths, say, approver);
    crate::agent::client::stop_running(&paths);
    if keep {
        say(&format!(
            "Kept the demo vault in {dir}; its passphrase is in {file} (0600): e.g. VAULT_DIR={dir} VAULT_PASSPHRASE_FILE={file} vault log",
            dir = dir.display(),
            file = passphrase_file(&paths).display(),
        ));
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }
    result
}

/// On SIGINT, SIGTERM or SIGHUP (Ctrl-C, a closed terminal): stop the demo's agent, delete the
/// throwaway vault and exit 130, instead of leaving both behind.
fn cleanup_on_signal(paths: &VaultPaths) {
    let paths = paths.clone();
    let _ = std::thread::Builder::new()
        .name("demo-signals".into())
        .spawn(move || {
            use tokio::signal::unix::{signal, SignalKind};
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async {
                let (Ok(mut int), Ok(mut term), Ok(mut hup)) = (
                    signal(SignalKind::interrupt()),
                    signal(SignalKind::terminate()),
                    signal(SignalKind::hangup()),
                ) else {
                    return;
                };
                tokio::select! {
                    _ = int.recv() => {}
                    _ = term.recv() => {}
                    _ = hup.recv() => {}
                }
            });
            crate::agent::client::stop_running(&paths);
            let _ = std::fs::remove_dir_all(paths.dir());
            tracing::warn!("demo interrupted: its vault agent was stopped and its vault deleted");
            std::process::exit(130);
        });
}

/// The demo API's answer: "created", with a debug echo of the Authorization header (so that the
/// demo shows the vault scrubbing its own secret out of a response).
fn answer(request: &target::Request) -> target::Response {
    if request.route() != "/v1/items" {
        return target::Response::json(404, &json!({"error": "no such route"}));
    }
    let name = serde_json::from_slice::<Value>(&request.body)
        .ok()
        .and_then(|v| v["name"].as_str().map(str::to_owned));
    target::Response::json(
        201,
        &json!({
            "created": {"id": 101, "name": name},
            "debug_echo_of_your_authorization_header": request.header("authorization"),
        }),
    )
}

fn random_hex(n: usize) -> String {
    let mut b = vec![0u8; n];
    getrandom::fill(&mut b).expect("the OS random number generator failed");
    hex::encode(b)
}

fn flow(
    paths: &VaultPaths,
    say: &mut dyn FnMut(&str),
    mut approver: Approver<'_>,
) -> Result<Outcome, DemoError> {
    let passphrase = random_hex(12);
    let secret = format!("demo-token-{}", random_hex(8));
    let target = target::Target::start(answer)
        .map_err(|e| step(format!("cannot start the loopback target: {e}")))?;
    say(&format!(
        "1. Loopback target listening on http://127.0.0.1:{}",
        target.port
    ));

    let (mut vault, keys) =
        Vault::init(paths.clone(), &Passphrase::from_string(passphrase.clone()))
            .map_err(|e| step(format!("vault init: {e}")))?;
    // The approval PIN every approval on a card takes; a real vault has the person choose it.
    let pin = format!(
        "{:04}",
        u16::from_str_radix(&random_hex(2), 16).unwrap_or(0) % 10_000
    );
    let pin_secret = Secret::new(pin.clone().into_bytes());
    let trust = vault.trust(&keys);
    let signed = crate::approvals::pin::sign_pin(&keys.approver, &vault.vault_id, &pin_secret);
    crate::approvals::pin::set(&mut vault.store, &trust, &signed, &pin_secret)
        .map_err(|e| step(format!("setting the demo's approval PIN: {e}")))?;
    // For the real `vault approve` on a terminal, and for --keep; never printed.
    crate::paths::write_new_private(
        &passphrase_file(paths),
        format!("{passphrase}\n").as_bytes(),
    )
    .map_err(|e| step(format!("writing the demo passphrase file: {e}")))?;
    let vault_id = vault.vault_id.clone();
    drop(vault);
    let agent = crate::agent::handoff::start_agent(
        paths,
        &vault_id,
        &keys,
        Duration::from_secs(600),
        crate::agent::handoff::IfRunning::Keep,
    )
    .map_err(|e| step(format!("starting the vault agent: {e}")))?;
    say(&format!(
        "2. Throwaway vault in {} (a random passphrase, never shown); its key is held only by the vault agent, pid {} (not dumpable, no core, not readable by other processes)",
        paths.dir().display(),
        agent.pid
    ));
    if matches!(approver, Approver::Person(_)) {
        say(&format!("   Its approval PIN is {pin}: every approval on a card takes it, typed after [a] with nothing shown, so a program that can type into your terminal cannot approve. (Your own vault asks you to choose one.)"));
    }
    let psk = crate::agent::channel::channel_key(&keys.master);
    let mut cli = Client::connect_secure(paths, &psk, Role::Cli)
        .map_err(|e| step(e.to_string()))?
        .ok_or_else(|| step("the vault agent is not reachable"))?;
    add_credential(
        &mut cli,
        &keys,
        NewCredential {
            id: crate::credentials::new_id("cred"),
            profile: "default".into(),
            name: "demo-api".into(),
            approval: Approval::Each,
            target: CredTarget::Http(HttpTarget {
                presence: crate::wire::touch::Presence::None,
                scheme: "http".into(),
                host: "127.0.0.1".into(),
                port: target.port,
                path_prefix: "/v1/".into(),
                methods: None,
                auth: HttpAuth::Bearer,
                ca_file: None,
                allow_headers: Vec::new(),
                secret_from: None,
            }),
            secret: Secret::new(secret.clone().into_bytes()),
        },
    )
    .map_err(|e| step(format!("vault add: {e}")))?;
    say("3. Credential demo-api added: bearer token bound to that host, port and /v1/, approval each");

    let mut mcp = start_mcp(paths, say)?;
    let mut approver_conn = approver_client(paths, &keys).map_err(|e| step(e.to_string()))?;
    let http_approved = http_action(
        paths,
        &mut mcp,
        &mut approver_conn,
        &keys,
        &mut approver,
        &target,
        &secret,
        say,
    )?;
    let ssh_approved = ssh::run(
        paths,
        &mut cli,
        &mut approver_conn,
        &keys,
        &mut mcp,
        &mut approver,
        say,
    )?;
    mcp.finish()?;

    check_journal(&mut cli, paths, &keys.approver.public(), &secret, say)?;
    let denied = u32::from(!http_approved) + u32::from(!ssh_approved);
    if denied == 0 {
        say("Demo complete: the AI agent got its requests done without ever holding a secret.");
    } else {
        say("Demo complete, with a denial: what you denied was never sent.");
    }
    Ok(Outcome { denied })
}

/// `vault add` as the person's command does it: the credential signed by the approver as built
/// here, sent over the encrypted channel.
fn add_credential(
    cli: &mut Client,
    keys: &crate::keys::KeyMaterial,
    new: NewCredential,
) -> Result<(), crate::agent::client::ClientError> {
    let signature = crate::credentials::policy_signature(
        &keys.approver,
        &cli.vault_id,
        &crate::credentials::as_added(&new),
    );
    cli.call(Request::AddCredential { new, signature })
        .map(|_| ())
}

/// Starts the real `vault mcp` and lists its tools (step 4).
fn start_mcp(paths: &VaultPaths, say: &mut dyn FnMut(&str)) -> Result<Mcp, DemoError> {
    let mut mcp = Mcp::spawn(paths)?;
    mcp.send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "vault-demo", "version": env!("CARGO_PKG_VERSION")}}}))?;
    mcp.until(1)?;
    mcp.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
    mcp.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))?;
    let tools = mcp.until(2)?;
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .map(|t| t.iter().filter_map(|x| x["name"].as_str()).collect())
        .unwrap_or_default();
    say(&format!(
        "4. `vault mcp` started; tools: {}",
        names.join(", ")
    ));
    Ok(mcp)
}

/// The HTTP action (steps 5-7): the agent's POST waits, a person decides, the target sees the
/// credential only after an approval, and the agent never sees it.
#[allow(clippy::too_many_arguments)]
fn http_action(
    paths: &VaultPaths,
    mcp: &mut Mcp,
    approver_conn: &mut Client,
    keys: &KeyMaterial,
    approver: &mut Approver<'_>,
    target: &target::Target,
    secret: &str,
    say: &mut dyn FnMut(&str),
) -> Result<bool, DemoError> {
    let url = format!("http://127.0.0.1:{}/v1/items", target.port);
    mcp.send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "http_request", "arguments": {"credential": "demo-api", "method": "POST", "url": url, "json": {"name": "demo item"}, "wait_s": 60}}}))?;

    let view = wait_pending(approver_conn)?;
    let action = view.action.clone();
    view.verified_request().map_err(step)?;
    say(&format!(
        "5. The agent asked: {} (hash {}…, re-derived by the approver); it waits for a decision",
        action.summary,
        &action.action_hash[..12]
    ));
    if !target.requests().is_empty() {
        return Err(step("the target was contacted before any approval"));
    }
    let approved = decide(
        paths,
        approver,
        approver_conn,
        keys,
        &view,
        " (as `vault approve --id … --approve --passphrase-stdin` does)",
        say,
    )?;
    say(&format!(
        "6. Decision signed with the approver key: {}",
        if approved { "approved" } else { "denied" }
    ));

    let answer = mcp.until(3)?;
    let result = &answer["result"]["structuredContent"];
    let text = serde_json::to_string(&answer).unwrap_or_default();
    if text.contains(secret) {
        return Err(step("the secret reached the agent's result"));
    }
    if approved {
        if result["state"] != "completed" {
            return Err(step(format!("expected completed, got {result}")));
        }
        let seen = target.requests();
        let auth_ok =
            seen.len() == 1 && seen[0].header("authorization") == Some(&format!("Bearer {secret}"));
        if !auth_ok {
            return Err(step(
                "the target did not receive exactly one request carrying the credential",
            ));
        }
        say(&format!(
            "7. The target received {} {} ({} bytes of JSON) with the secret injected; it answered HTTP {}",
            seen[0].method, seen[0].path, seen[0].body.len(), result["http"]["status"]
        ));
        say(&format!(
            "   What the agent got back (the secret the target echoed is scrubbed): {}",
            result["http"]["body"]
        ));
    } else {
        if answer["result"]["isError"] != true || !target.requests().is_empty() {
            return Err(step(
                "a denied action must be an error result and send nothing",
            ));
        }
        say("7. Denied: the agent got an `Error:` result with the reason, and nothing was sent");
    }
    Ok(approved)
}

/// The journal verifies, in the agent and offline from an export held to the approver's public
/// key, and holds no secret (step 9).
fn check_journal(
    cli: &mut Client,
    paths: &VaultPaths,
    approver: &ed25519_dalek::VerifyingKey,
    secret: &str,
    say: &mut dyn FnMut(&str),
) -> Result<(), DemoError> {
    let report: VerifyLine = match cli.call(Request::Verify { anchors: vec![] }) {
        Ok(Reply::Verify { report, .. }) => serde_json::from_str(&report)
            .map_err(|e| step(format!("verify answered {report:?}: {e}")))?,
        other => return Err(step(format!("verify: {other:?}"))),
    };
    if !report.ok || !report.held {
        return Err(step(format!("the journal does not verify: {report:?}")));
    }
    let export = paths.dir().join("journal.jsonl");
    cli.call(Request::Export {
        path: export.display().to_string(),
    })
    .map_err(|e| step(format!("export: {e}")))?;
    let offline = audit::verify_file(&export, &[], Some(approver))
        .map_err(|e| step(format!("verify --file: {e}")))?;
    if !offline.held()
        || std::fs::read_to_string(&export)
            .unwrap_or_default()
            .contains(secret)
    {
        return Err(step(
            "the exported journal does not verify, or holds the secret",
        ));
    }
    say(&format!("9. Journal verified: {} rows, hash chain intact, {} approver signatures checked (also offline from the export, with the approver's public key alone); no secret in it", report.rows, report.signatures));
    Ok(())
}

/// Asks the person (or, without a terminal, approves and says so) and sends the signed verdict
/// for `view`; returns whether it was approved.
fn decide(
    paths: &VaultPaths,
    approver: &mut Approver<'_>,
    approver_conn: &mut Client,
    keys: &KeyMaterial,
    view: &ApprovalView,
    scripted_how: &str,
    say: &mut dyn FnMut(&str),
) -> Result<bool, DemoError> {
    let action = &view.action;
    let approved = match approver {
        Approver::Person(screen) => {
            say("   The real `vault approve` opens now: read the card, press [a] and type the PIN to approve (or [d] to deny), then [q] to come back here.");
            screen(paths.dir(), &passphrase_file(paths)).map_err(step)?;
            // What the person decided, as the agent recorded it.
            return match approver_conn.call(Request::ForApproval {
                action_id: action.id.clone(),
            }) {
                Ok(Reply::View(v)) => match v.action.state {
                    crate::wire::State::Approved
                    | crate::wire::State::Dispatched
                    | crate::wire::State::Completed => Ok(true),
                    crate::wire::State::Denied => Ok(false),
                    other => Err(step(format!(
                        "the action is still {other}: nothing was decided on the card (press [a] or [d] before [q])"
                    ))),
                },
                other => Err(step(format!("reading the decision: {other:?}"))),
            };
        }
        Approver::Scripted => {
            say(&format!(
                "   No terminal: approving through the scripted path{scripted_how}"
            ));
            true
        }
    };
    let verdict = if approved {
        Verdict::Approve
    } else {
        Verdict::Deny(Some("declined in the demo".into()))
    };
    approver_conn
        .decide(
            &keys.approver,
            view,
            &verdict,
            crate::agent::client::Proof::Passphrase,
            Duration::from_secs(60),
        )
        .map_err(|e| step(format!("decide: {e}")))?;
    Ok(approved)
}

fn wait_pending(approver: &mut Client) -> Result<ApprovalView, DemoError> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(Reply::Pending(p)) = approver.call(Request::Pending) {
            if let Some(v) = p.into_iter().next() {
                return Ok(v);
            }
        }
        if Instant::now() > deadline {
            return Err(step("the request never reached the approval queue"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The real `vault mcp` as a child process, spoken to over its stdio.
struct Mcp {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Mcp {
    fn spawn(paths: &VaultPaths) -> Result<Self, DemoError> {
        let exe = std::env::current_exe().map_err(|e| step(e.to_string()))?;
        let mut child = Command::new(exe)
            .arg("mcp")
            .env("VAULT_DIR", paths.dir())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| step(format!("cannot start `vault mcp`: {e}")))?;
        let out = child.stdout.take().ok_or_else(|| step("no stdout"))?;
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Self { child, lines })
    }

    fn send(&mut self, v: Value) -> Result<(), DemoError> {
        let stdin = self
            .child
            .stdin
            .as_mut()
            .ok_or_else(|| step("stdin closed"))?;
        writeln!(stdin, "{v}")
            .and_then(|()| stdin.flush())
            .map_err(|e| step(format!("writing to `vault mcp`: {e}")))
    }

    fn until(&mut self, id: i64) -> Result<Value, DemoError> {
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(90))
                .map_err(|_| step(format!("no answer from `vault mcp` to request {id}")))?;
            let v: Value = serde_json::from_str(&line)
                .map_err(|_| step(format!("`vault mcp` wrote a non-JSON line: {line:?}")))?;
            if v["id"] == id {
                return Ok(v);
            }
        }
    }

    fn finish(mut self) -> Result<(), DemoError> {
        drop(self.child.stdin.take());
        let status = self.child.wait().map_err(|e| step(e.to_string()))?;
        if !status.success() {
            return Err(step(format!("`vault mcp` exited with {status}")));
        }
        Ok(())
    }
}
