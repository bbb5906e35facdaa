//! Shared by the benchmarks: quick mode (every bench), the loopback HTTP/1.1 target (its own time
//! is tens of microseconds, the same for the vault and for the direct peer), a throwaway vault
//! with its custody agent, and a `vault mcp` session driven over its stdio.
#![allow(dead_code)]
use agent_vault::agent::client::{stop_running, Client};
use agent_vault::agent::handoff::approver_client;
use agent_vault::agent::protocol::{Reply, Request, Role};
use agent_vault::credentials::{
    self, Approval, HttpAuth, HttpTarget, NewCredential, Secret, Target,
};
use agent_vault::keys::{KeyMaterial, Passphrase};
use agent_vault::paths::VaultPaths;
use agent_vault::vault::Vault;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// Quick mode: `cargo bench --bench NAME -- --quick`. Small sizes, a few seconds per bench, and
/// only the checks that the bench ran and its result verifies: what CI runs (`.ci/run`) so a bench
/// cannot rot. Its figures are not the bench's figures. (`cargo bench` also passes `--bench`.)
pub fn quick() -> bool {
    let quick = std::env::args().skip(1).any(|a| a == "--quick");
    if quick {
        println!("quick mode: small sizes, checks only; the figures below are not the bench's");
    }
    quick
}

/// `full` normally, `small` in quick mode.
pub fn size<T>(quick: bool, full: T, small: T) -> T {
    if quick {
        small
    } else {
        full
    }
}

pub const SECRET: &str = "bench-token-not-a-secret";
pub const PASSPHRASE: &str = "bench passphrase, not secret";
/// The bench vault's approval PIN (every approval on a card takes it).
#[allow(dead_code)]
pub const PIN: &str = "2468";

/// How a measured row relates to the others of its bench, for the report's ratios.
#[derive(Clone, Copy)]
pub enum Side<'a> {
    /// The peer measured in the same run (what the vault is compared with).
    Peer,
    /// Compared with the peer row of this label, from the same run.
    Vs(&'a str),
    /// Stands alone.
    Alone,
}

/// The records `cargo bench --bench report` reads: with `BENCH_JSON=<file>` set, each call
/// appends one JSON line to that file (the bench is this crate's name); unset, nothing happens.
/// `kind` is `latency` (samples in ms, with their p50/p95/mean as `stats` computes them),
/// `figure` (one value per run: a rate, a size) or `goal` (its text, the value it judged, met).
/// The one writer; `emit_samples`, `emit_figure` and `emit_goal` shape its records.
pub fn emit(kind: &str, row: &str, fields: Value) {
    let Some(path) = std::env::var_os("BENCH_JSON") else {
        return;
    };
    let mut record = json!({"bench": env!("CARGO_CRATE_NAME"), "kind": kind, "row": row});
    if let (Value::Object(r), Value::Object(f)) = (&mut record, fields) {
        r.extend(f);
    }
    let mut line = serde_json::to_vec(&record).unwrap();
    line.push(b'\n');
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(&line))
        .unwrap_or_else(|e| panic!("BENCH_JSON={}: {e}", path.to_string_lossy()));
}

fn side_fields(side: Side<'_>) -> (bool, Option<&str>) {
    match side {
        Side::Peer => (true, None),
        Side::Vs(peer) => (false, Some(peer)),
        Side::Alone => (false, None),
    }
}

/// A latency row: every sample (ms) and its p50/p95/mean as `stats` gives them.
pub fn emit_samples(row: &str, side: Side<'_>, samples: &[Duration]) {
    let (peer, vs) = side_fields(side);
    let (p50, p95, mean) = stats(samples.to_vec());
    let ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1e3).collect();
    emit(
        "latency",
        row,
        json!({"unit": "ms", "p50": p50, "p95": p95, "mean": mean, "n": ms.len(),
               "peer": peer, "vs": vs, "samples": ms}),
    );
}

/// A figure measured once per run (`unit`: `rows/s`, `MB/s`, `KiB`, …).
pub fn emit_figure(row: &str, unit: &str, side: Side<'_>, value: f64) {
    let (peer, vs) = side_fields(side);
    emit(
        "figure",
        row,
        json!({"unit": unit, "value": value, "peer": peer, "vs": vs}),
    );
}

/// A goal as the bench judges it: its text, the value judged (in `unit`) and whether it was met.
pub fn emit_goal(goal: &str, value: f64, unit: &str, met: bool) {
    emit(
        "goal",
        goal,
        json!({"unit": unit, "value": value, "met": met}),
    );
}

pub fn stats(mut v: Vec<Duration>) -> (f64, f64, f64) {
    v.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let p = |q: f64| ms(v[((v.len() as f64 - 1.0) * q).round() as usize]);
    (
        p(0.5),
        p(0.95),
        ms(v.iter().sum::<Duration>()) / v.len() as f64,
    )
}

// The ssh bench also loads tests/support, which loads the same file: two copies, both fine.
#[allow(clippy::duplicate_mod)]
#[path = "../../src/demo/target.rs"]
mod server;

/// The loopback HTTP/1.1 target (`src/demo/target.rs`, the one the demo and the tests run)
/// answering every request with a small JSON body. Requests are tagged by their `t=` query
/// parameter; `arrival` says when a tagged request's head had fully arrived.
pub struct FastTarget {
    pub port: u16,
    server: server::Target,
}

impl FastTarget {
    pub fn start() -> Self {
        let server = server::Target::start(|_| {
            server::Response::new(200, "application/json", &br#"{"ok":true}"#[..])
        })
        .expect("bind 127.0.0.1");
        Self {
            port: server.port,
            server,
        }
    }

    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// When the request tagged `t` arrived, waiting up to 5 s for it.
    pub fn arrival(&self, t: &str) -> Instant {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let tagged = self.server.requests().into_iter().find(|r| {
                r.query()
                    .split('&')
                    .any(|kv| kv.strip_prefix("t=") == Some(t))
            });
            if let Some(r) = tagged {
                return r.arrived;
            }
            assert!(Instant::now() < deadline, "request t={t} never arrived");
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    pub fn count(&self) -> usize {
        self.server.requests().len()
    }
}

/// A vault in a temp dir with its agent running (started as `vault unlock` does), one bearer
/// credential `api` bound to `base` (an approval other than `each` is signed with the approver
/// key), a CLI connection and an approver connection to the agent.
pub struct BenchVault {
    pub dir: PathBuf,
    pub paths: VaultPaths,
    pub keys: KeyMaterial,
    pub cli: Client,
    pub approver: Client,
}

impl BenchVault {
    pub fn new(tag: &str, port: u16, approval: Approval) -> Self {
        Self::with_config(tag, port, approval, "")
    }

    /// With a `config.toml` the agent reads when it starts.
    pub fn with_config(tag: &str, port: u16, approval: Approval, config: &str) -> Self {
        let target = loopback_bearer(port, agent_vault::wire::touch::Presence::None);
        Self::build(tag, target, approval, config, None)
    }

    /// `api` bound to `target`; with `ca`, the credential trusts that CA (PEM, written to
    /// `target-ca.pem` in the bench's directory).
    pub fn with_target(tag: &str, target: Target, approval: Approval, ca: Option<&str>) -> Self {
        Self::build(tag, target, approval, "", ca)
    }

    fn build(
        tag: &str,
        mut target: Target,
        approval: Approval,
        config: &str,
        ca: Option<&str>,
    ) -> Self {
        let dir = std::env::temp_dir().join(format!("av-bench-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let paths = VaultPaths::new(dir.join("vault"));
        let pass = Passphrase::from_string(PASSPHRASE.into());
        let (vault, keys) = Vault::init(paths.clone(), &pass).expect("init");
        std::fs::write(paths.config(), config).unwrap();
        let vault_id = vault.vault_id.clone();
        drop(vault);
        if let (Some(pem), Target::Http(t)) = (ca, &mut target) {
            let file = dir.join("target-ca.pem");
            std::fs::write(&file, pem).unwrap();
            t.ca_file = Some(file.display().to_string());
        }
        start_agent(&paths, &vault_id, &keys);
        let mut cli = secure_cli(&paths, &keys);
        let pin = Secret::new(PIN.as_bytes().to_vec());
        let request = agent_vault::approvals::pin::sign_pin(&keys.approver, &vault_id, &pin);
        match cli.call(Request::SetPin { request, pin }) {
            Ok(Reply::Ok) => {}
            other => panic!("setting the approval PIN: {other:?}"),
        }
        let new = NewCredential {
            id: credentials::new_id("cred"),
            profile: "default".into(),
            name: "api".into(),
            approval,
            target,
            secret: Secret::new(SECRET.as_bytes().to_vec()),
        };
        add_signed(&mut cli, &keys, new);
        let approver = approver_client(&paths, &keys).expect("approver connection");
        Self {
            dir,
            paths,
            keys,
            cli,
            approver,
        }
    }
}

/// A person's command's connection: the encrypted channel, keyed from the master key.
#[allow(dead_code)]
pub fn secure_cli(paths: &VaultPaths, keys: &KeyMaterial) -> Client {
    let psk = agent_vault::agent::channel::channel_key(&keys.master);
    Client::connect_secure(paths, &psk, Role::Cli)
        .unwrap()
        .expect("agent")
}

/// `vault add` as the person's command does it: signed by the approver as built here.
#[allow(dead_code)]
pub fn add_signed(cli: &mut Client, keys: &KeyMaterial, new: NewCredential) {
    let vault_id = cli.vault_id.clone();
    let signature =
        credentials::policy_signature(&keys.approver, &vault_id, &credentials::as_added(&new));
    let Reply::Credential(_) = cli
        .call(Request::AddCredential { new, signature })
        .expect("add")
    else {
        panic!("add credential")
    };
}

/// Starts the vault's agent the way `vault unlock` does: the `vault` binary, key on a channel.
/// (`handoff::start_agent` spawns the current executable, which in a bench is the bench.)
pub fn start_agent(paths: &VaultPaths, vault_id: &str, keys: &KeyMaterial) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_vault"))
        .args(["unlock", "--passphrase-stdin", "--for", "2h"])
        .env("VAULT_DIR", paths.dir())
        .env_remove("VAULT_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("vault unlock");
    writeln!(child.stdin.take().unwrap(), "{PASSPHRASE}").unwrap();
    assert!(child.wait().unwrap().success(), "vault unlock failed");
    let _ = (vault_id, keys);
}

impl Drop for BenchVault {
    fn drop(&mut self) {
        stop_running(&self.paths);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A warm `vault mcp` session.
pub struct Mcp {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Mcp {
    pub fn spawn(paths: &VaultPaths) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_vault"))
            .arg("mcp")
            .env("VAULT_DIR", paths.dir())
            .env_remove("VAULT_LOG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn vault mcp");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut m = Self {
            child,
            stdin,
            stdout,
        };
        m.send(&json!({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}));
        m.response(&json!("init"));
        m.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        m
    }

    pub fn send(&mut self, v: &Value) {
        let mut line = serde_json::to_vec(v).unwrap();
        line.push(b'\n');
        self.stdin.write_all(&line).unwrap();
        self.stdin.flush().unwrap();
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Reads lines until the response to `id` (notifications are skipped).
    pub fn response(&mut self, id: &Value) -> Value {
        let mut line = String::new();
        loop {
            line.clear();
            let n = self.stdout.read_line(&mut line).unwrap();
            assert!(n > 0, "vault mcp closed its stdout");
            let v: Value = serde_json::from_str(&line).unwrap();
            if &v["id"] == id && v.get("method").is_none() {
                return v;
            }
        }
    }

    pub fn http_request(&mut self, id: i64, url: &str, wait_s: u64) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "http_request", "arguments": {"credential": "api", "method": "GET", "url": url, "wait_s": wait_s}}}));
    }

    /// The `structuredContent` of the response to `id`, which must be `completed`.
    pub fn completed(&mut self, id: i64) -> Value {
        let r = self.response(&json!(id));
        let sc = r["result"]["structuredContent"].clone();
        assert_eq!(sc["state"], "completed", "{r}");
        sc
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A bearer-token HTTP credential's target on a loopback port, with `presence`.
pub fn loopback_bearer(port: u16, presence: agent_vault::wire::touch::Presence) -> Target {
    Target::Http(HttpTarget {
        presence,
        scheme: "http".into(),
        host: "127.0.0.1".into(),
        port,
        path_prefix: "/".into(),
        methods: None,
        auth: HttpAuth::Bearer,
        ca_file: None,
        allow_headers: Vec::new(),
        secret_from: None,
    })
}
