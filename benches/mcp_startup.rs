//! Benchmark: `vault mcp` as a client meets it. Cold start (spawn → `initialize` answered) and a
//! warm `tools/list` round trip on one session, against the reference TypeScript server
//! `@modelcontextprotocol/server-everything` (run with `node … stdio`), measured by the same
//! harness in the same run.
//!
//! The peer needs `node` on PATH and is installed, pinned by `.ci/node/package-lock.json`, by
//! one command from the repository root: `npm ci --prefix .ci/node` (`.ci/run` runs it too).
//! Without it the bench says so and fails: in quick mode before measuring anything, in full
//! mode after printing the vault's own rows.
//!
//! Also the size of the `tools/list` answer (`tools_list_bytes`: the raw line, what a client puts
//! in the model's context), against the vault's own answer before it was cut down (a constant,
//! stated as such: no other server here lists these tools), and server-everything's for scale.
//!
//! Run: `cargo bench --bench mcp_startup` (prints a table; goals: cold start p50 ≤ 3 ms and
//! ≥ 60× faster than the peer, `tools/list` ≤ 8 KiB). `-- --quick`: a few starts and calls of
//! each, checks only (what CI runs).
mod common;

use common::{stats, Side};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// The `tools/list` answer of `vault mcp` before it was cut down (commit 5ec8d82): the peer of
/// the `tools_list_bytes` row.
const TOOLS_LIST_BYTES_BEFORE: f64 = 27_014.0;
const TOOLS_LIST_BEFORE: &str =
    "tools_list_bytes, vault mcp before (27,014 at 5ec8d82, a constant)";

/// How the peer is installed (from the repository root).
const PEER_INSTALL: &str = "npm ci --prefix .ci/node";

/// How to start one MCP server over stdio.
struct Server {
    name: String,
    program: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
}

struct Session {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: i64,
    /// Bytes of the last response line read, newline excluded.
    last_len: usize,
}

impl Server {
    fn spawn(&self) -> Session {
        let mut c = Command::new(&self.program);
        c.args(&self.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        for (k, v) in &self.env {
            c.env(k, v);
        }
        let mut child = c.spawn().unwrap_or_else(|e| panic!("{}: {e}", self.name));
        Session {
            stdin: child.stdin.take().unwrap(),
            stdout: BufReader::new(child.stdout.take().unwrap()),
            child,
            next_id: 1,
            last_len: 0,
        }
    }
}

impl Session {
    fn send(&mut self, v: &Value) {
        let mut line = serde_json::to_vec(v).unwrap();
        line.push(b'\n');
        self.stdin.write_all(&line).unwrap();
        self.stdin.flush().unwrap();
    }

    /// Sends a request and reads lines until its response (skipping server notifications).
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let mut line = String::new();
        loop {
            line.clear();
            let n = self.stdout.read_line(&mut line).unwrap();
            assert!(n > 0, "the server closed stdout before answering {method}");
            let v: Value = serde_json::from_str(&line).expect("a JSON-RPC line");
            if v["id"] == json!(id) {
                self.last_len = line.trim_end_matches(['\r', '\n']).len();
                assert!(v.get("result").is_some(), "{method} failed: {v}");
                return v;
            }
        }
    }

    fn initialize(&mut self) -> Value {
        self.request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "mcp-startup-bench", "version": "1"}}),
        )
    }

    fn close(mut self) {
        drop(self.stdin);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Measured {
    cold: (f64, f64, f64),
    warm: (f64, f64, f64),
    /// The `tools/list` answer line, in bytes.
    list_bytes: usize,
}

/// Also the report's rows: `peer` names the server the rows are compared with (None: this is it).
fn measure(server: &Server, cold_runs: usize, warm_calls: usize, peer: Option<&str>) -> Measured {
    // One unmeasured start warms the page cache.
    let mut s = server.spawn();
    s.initialize();
    s.close();

    let mut cold = Vec::with_capacity(cold_runs);
    for _ in 0..cold_runs {
        let t = Instant::now();
        let mut s = server.spawn();
        s.initialize();
        cold.push(t.elapsed());
        s.close();
    }

    let mut s = server.spawn();
    s.initialize();
    s.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let tools = s.request("tools/list", json!({}));
    let list_bytes = s.last_len;
    assert!(
        tools["result"]["tools"]
            .as_array()
            .is_some_and(|t| !t.is_empty()),
        "{}: no tools",
        server.name
    );
    for _ in 0..20 {
        s.request("tools/list", json!({}));
    }
    let mut warm = Vec::with_capacity(warm_calls);
    for _ in 0..warm_calls {
        let t = Instant::now();
        s.request("tools/list", json!({}));
        warm.push(t.elapsed());
    }
    s.close();
    for (what, samples) in [
        ("cold start -> initialize", &cold),
        ("warm tools/list", &warm),
    ] {
        let vs = peer.map(|p| format!("{what}, {p}"));
        let side = vs.as_deref().map_or(Side::Peer, Side::Vs);
        common::emit_samples(&format!("{what}, {}", server.name), side, samples);
    }
    Measured {
        cold: stats(cold),
        warm: stats(warm),
        list_bytes,
    }
}

fn peer() -> Result<Server, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let entry =
        root.join(".ci/node/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    if !entry.exists() {
        return Err(format!(
            "{} is missing: install it with `{PEER_INSTALL}` from {}",
            entry.display(),
            root.display()
        ));
    }
    let node_ok = Command::new("node")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !node_ok {
        return Err(format!(
            "`node` is not on PATH: install Node.js (>= 18), then `{PEER_INSTALL}` from {}",
            root.display()
        ));
    }
    Ok(Server {
        name: "server-everything (node)".into(),
        program: "node".into(),
        args: vec![entry.display().to_string(), "stdio".into()],
        env: vec![],
    })
}

fn main() {
    let quick = common::quick();
    let (cold_runs, warm_calls) = common::size(quick, (50, 500), (3, 20));
    let peer = peer();
    if let (true, Err(why)) = (quick, &peer) {
        eprintln!("mcp_startup: the peer is not installed: {why}");
        std::process::exit(1);
    }
    let dir = std::env::temp_dir().join(format!("av-bench-mcp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let vault_dir = dir.join("vault");
    let bin = env!("CARGO_BIN_EXE_vault");
    let env = vec![("VAULT_DIR".to_string(), vault_dir.display().to_string())];
    let mut init = Command::new(bin)
        .args(["init", "--passphrase-stdin"])
        .envs(env.iter().cloned())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("vault init");
    init.stdin
        .take()
        .unwrap()
        .write_all(b"bench passphrase, not secret\n")
        .unwrap();
    let out = init.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let vault = Server {
        name: "vault mcp".into(),
        program: bin.into(),
        args: vec!["mcp".into()],
        env: env.clone(),
    };
    let peer_name = peer.as_ref().map_or("(no peer)", |p| p.name.as_str());
    let ours = measure(&vault, cold_runs, warm_calls, Some(peer_name));
    let theirs = peer
        .as_ref()
        .ok()
        .map(|p| measure(p, cold_runs, warm_calls, None));

    println!("MCP over stdio (ms)");
    println!("{:<52} {:>9} {:>9} {:>9}", "", "p50", "p95", "mean");
    let row = |label: String, (p50, p95, mean): (f64, f64, f64)| {
        println!("{label:<52} {p50:>9.3} {p95:>9.3} {mean:>9.3}");
    };
    row(
        format!("cold start → initialize, vault mcp, n={cold_runs}"),
        ours.cold,
    );
    if let Some(t) = &theirs {
        row(
            format!("cold start → initialize, server-everything, n={cold_runs}"),
            t.cold,
        );
    }
    row(
        format!("warm tools/list, vault mcp, n={warm_calls}"),
        ours.warm,
    );
    if let Some(t) = &theirs {
        row(
            format!("warm tools/list, server-everything, n={warm_calls}"),
            t.warm,
        );
    }
    println!(
        "tools/list answer: vault mcp {} bytes (was {TOOLS_LIST_BYTES_BEFORE}){}",
        ours.list_bytes,
        theirs.as_ref().map_or(String::new(), |t| format!(
            ", server-everything {} bytes",
            t.list_bytes
        ))
    );
    common::emit_figure(
        TOOLS_LIST_BEFORE,
        "bytes",
        Side::Peer,
        TOOLS_LIST_BYTES_BEFORE,
    );
    common::emit_figure(
        "tools_list_bytes, vault mcp",
        "bytes",
        Side::Vs(TOOLS_LIST_BEFORE),
        ours.list_bytes as f64,
    );
    if let Some(t) = &theirs {
        common::emit_figure(
            "tools_list_bytes, server-everything (node)",
            "bytes",
            Side::Alone,
            t.list_bytes as f64,
        );
    }
    let goal_list = ours.list_bytes <= 8192;
    println!(
        "goal tools/list <= 8 KiB: {}",
        if goal_list { "met" } else { "MISSED" }
    );
    common::emit_goal(
        "tools/list answer <= 8192 bytes",
        ours.list_bytes as f64,
        "bytes",
        goal_list,
    );
    let goal_cold = ours.cold.0 <= 3.0;
    println!(
        "goal cold start p50 <= 3 ms: {}",
        if goal_cold { "met" } else { "MISSED" }
    );
    common::emit_goal("cold start p50 <= 3 ms", ours.cold.0, "ms", goal_cold);
    if let Some(t) = &theirs {
        let cold_ratio = t.cold.0 / ours.cold.0;
        let warm_ratio = t.warm.0 / ours.warm.0;
        println!(
            "ratio server-everything / vault mcp at p50: cold start {cold_ratio:.1}x, warm tools/list {warm_ratio:.1}x; goal cold >= 60x: {}",
            if cold_ratio >= 60.0 { "met" } else { "MISSED" }
        );
        common::emit_goal(
            "cold start >= 60x faster than server-everything",
            cold_ratio,
            "x",
            cold_ratio >= 60.0,
        );
    }

    let _ = Command::new(bin)
        .arg("lock")
        .envs(env.iter().cloned())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    let _ = std::fs::remove_dir_all(&dir);
    if let Err(why) = peer {
        eprintln!("mcp_startup: no peer rows, the peer is not installed: {why}");
        std::process::exit(1);
    }
}
