//! The scale suites' harness. Only `tests/scale.rs` uses it (it includes this file with `#[path]`,
//! so the other test binaries do not compile it): a seeded RNG; loopback targets that count each
//! tagged request and check, the moment it arrives and before it is answered, that the journal
//! already holds the `action.dispatched` row of the action that carries the tag; a `vault mcp`
//! driver that tells an answer from a session that died; SIGKILL by pid; `vault approve` killed
//! at a chosen moment; and the journal read back through `vault export-audit`.
#![allow(dead_code)]

use crate::support::{bin, Run, TestVault, PASSPHRASE};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

// The same server file `target.rs` loads, here with a route of its own (the recorder's); two
// copies of a test-only server in one test binary cost nothing.
#[path = "../../src/demo/target.rs"]
#[allow(dead_code, clippy::duplicate_mod)]
mod server;

/// `VAULT_SCALE=full`: the sizes of the issue; otherwise the CI sizes.
pub fn full_size() -> bool {
    std::env::var("VAULT_SCALE").is_ok_and(|v| v == "full")
}

/// `VAULT_SCALE_SEED` (decimal or 0x-hex) to replay a run, else a fresh one.
pub fn seed() -> u64 {
    if let Ok(s) = std::env::var("VAULT_SCALE_SEED") {
        let s = s.trim();
        let parsed = match s.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16),
            None => s.parse(),
        };
        return parsed.unwrap_or_else(|_| panic!("VAULT_SCALE_SEED={s:?} is not a number"));
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    Rng::new(nanos ^ u64::from(std::process::id())).next_u64()
}

/// splitmix64: small, seedable, the same sequence on every platform.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// In [0, n).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
    /// In [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
}

/// The tag of action `i` of session `s`: fixed width, so no tag is a prefix of another, and
/// only plain-word characters, so it passes as a URL query value and as an allowlisted SSH word.
pub fn tag(s: usize, i: usize) -> String {
    format!("t{s:02}n{i:05}x")
}

/// The first tag (`tag`'s shape) in `text`.
pub fn find_tag(text: &str) -> Option<String> {
    let b = text.as_bytes();
    (0..b.len().saturating_sub(9)).find_map(|at| {
        let w = &b[at..at + 10];
        let ok = w[0] == b't'
            && w[1..3].iter().all(u8::is_ascii_digit)
            && w[3] == b'n'
            && w[4..9].iter().all(u8::is_ascii_digit)
            && w[9] == b'x';
        ok.then(|| text[at..at + 10].to_owned())
    })
}

/// A read-only connection to the vault's database, opened with its key in this test process:
/// what the targets read when a request arrives. It never writes.
pub struct JournalReader {
    conn: Mutex<rusqlite::Connection>,
}

impl JournalReader {
    pub fn open(v: &TestVault) -> Arc<Self> {
        let key = v.master_hex();
        let conn = rusqlite::Connection::open_with_flags(
            v.vault_dir().join("vault.db"),
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .unwrap();
        conn.execute_batch("PRAGMA cipher_log_level = NONE;").ok();
        conn.execute_batch(&format!("PRAGMA key = \"x'{key}'\";"))
            .unwrap();
        conn.busy_timeout(Duration::from_secs(10)).unwrap();
        conn.query_row("SELECT count(*) FROM audit", [], |r| r.get::<_, i64>(0))
            .expect("the test opens vault.db read-only with its key");
        Arc::new(Self {
            conn: Mutex::new(conn),
        })
    }

    /// The first `action.dispatched` row whose body names `tag`: (action id, seq). The newest
    /// 2,000 rows first (the row was committed a moment ago), then the whole journal.
    pub fn dispatched(&self, tag: &str) -> Option<(String, i64)> {
        use rusqlite::OptionalExtension;
        let conn = self.conn.lock().unwrap();
        let head: i64 = conn
            .query_row("SELECT coalesce(max(seq), 0) FROM audit", [], |r| r.get(0))
            .unwrap();
        for from in [head - 2000, 0] {
            let found = conn
                .query_row(
                    "SELECT action_id, seq FROM audit WHERE seq > ?1 AND kind = 'action.dispatched' \
                     AND instr(body, ?2) > 0 ORDER BY seq LIMIT 1",
                    rusqlite::params![from, tag],
                    |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)),
                )
                .optional()
                .unwrap();
            if found.is_some() {
                return found;
            }
        }
        None
    }

    /// The newest row: (seq, hash in hex).
    pub fn head(&self) -> (i64, String) {
        let conn = self.conn.lock().unwrap();
        conn.query_row(
            "SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1",
            [],
            |r| Ok((r.get::<_, i64>(0)?, hex::encode(r.get::<_, Vec<u8>>(1)?))),
        )
        .unwrap()
    }

    /// Actions whose last journal row is not a final state: what still runs or waits.
    pub fn unfinished(&self) -> Vec<(String, String)> {
        let conn = self.conn.lock().unwrap();
        let mut stmt = conn
            .prepare(
                "SELECT action_id, kind FROM audit WHERE seq IN (SELECT max(seq) FROM audit \
                 WHERE kind LIKE 'action.%' AND action_id IS NOT NULL GROUP BY action_id) \
                 AND kind IN ('action.pending', 'action.received', 'action.approved', 'action.dispatched')",
            )
            .unwrap();
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }
}

/// One tagged request as a target received it, and what the journal held at that moment.
#[derive(Debug, Clone)]
pub struct Arrival {
    pub tag: String,
    /// The `action.dispatched` row naming the tag, found before the request was answered.
    pub dispatched: Option<(String, i64)>,
    /// The journal's head (seq, hash) read at arrival.
    pub head: (i64, String),
}

/// A loopback HTTP target (the one server of the demo, tests and benches) whose every request
/// carries `t=TAG` in its query. It records each request, then reads the journal before it
/// answers, so a request that reached it ahead of its intent row is caught at that moment.
pub struct Recorder {
    pub port: u16,
    server: server::Target,
    arrivals: Arc<Mutex<Vec<Arrival>>>,
}

impl Recorder {
    pub fn start(journal: Arc<JournalReader>) -> Self {
        let arrivals: Arc<Mutex<Vec<Arrival>>> = Arc::default();
        let log = arrivals.clone();
        let server = server::Target::start(move |r: &server::Request| {
            let tag = r
                .query()
                .split('&')
                .find_map(|kv| kv.strip_prefix("t="))
                .unwrap_or("")
                .to_owned();
            let dispatched = journal.dispatched(&tag);
            let head = journal.head();
            log.lock().unwrap().push(Arrival {
                tag: tag.clone(),
                dispatched,
                head,
            });
            server::Response::json(200, &json!({"ok": true, "t": tag}))
        })
        .expect("start a recording target");
        Self {
            port: server.port,
            server,
            arrivals,
        }
    }

    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// How many requests reached the server at all (tagged or not), counted by the server.
    pub fn requests(&self) -> usize {
        self.server.requests().len()
    }

    pub fn arrivals(&self) -> Vec<Arrival> {
        self.arrivals.lock().unwrap().clone()
    }

    /// Requests per tag.
    pub fn per_tag(&self) -> HashMap<String, usize> {
        let mut m = HashMap::new();
        for a in self.arrivals() {
            *m.entry(a.tag).or_insert(0) += 1;
        }
        m
    }
}

/// The allowlisted SSH command: a script on the SSH host (this machine, as root through sshd)
/// that reports `$1`, the tag, to `recorder` and prints its answer. The recorder counts
/// commands that actually ran on the host.
pub fn write_rec_script(dir: &Path, recorder_port: u16) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("rec");
    let script = format!(
        "#!/bin/bash\n\
         # Reports that this command ran on the SSH host, tagged $1, and waits for the answer.\n\
         exec 3<>/dev/tcp/127.0.0.1/{recorder_port} || exit 3\n\
         printf 'GET /ssh?t=%s HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\nConnection: close\\r\\n\\r\\n' \"$1\" >&3\n\
         IFS= read -r status <&3\n\
         echo \"$1 ${{status%$'\\r'}}\"\n"
    );
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    // sshd runs it as root from the test's private temp dir.
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// `vault ARGS` for `v` with `stdin`, without keeping a transcript (thousands of runs).
pub fn run(v: &TestVault, args: &[&str], stdin: Option<&str>) -> Run {
    let mut child = v
        .command(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn vault");
    let _ = child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.unwrap_or("").as_bytes());
    let o = child.wait_with_output().unwrap();
    Run {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// `vault unlock --passphrase-stdin`: the agent's pid.
pub fn unlock(v: &TestVault) -> u32 {
    let r = run(
        v,
        &["unlock", "--passphrase-stdin"],
        Some(&format!("{PASSPHRASE}\n")),
    )
    .ok();
    agent_pid_in(&r.stdout).unwrap_or_else(|| panic!("no agent pid in: {}", r.stdout))
}

/// The pid in "… agent pid N …".
pub fn agent_pid_in(text: &str) -> Option<u32> {
    let rest = &text[text.find("agent pid ")? + "agent pid ".len()..];
    rest.split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// The pid of the running agent, from `vault doctor --json`.
pub fn running_agent(v: &TestVault) -> Option<u32> {
    let r = run(v, &["doctor", "--json"], None);
    let d: Value = serde_json::from_str(r.stdout.trim()).ok()?;
    d["checks"]
        .as_array()?
        .iter()
        .find(|c| c["check"] == "vault agent" && c["ok"] == true)?["detail"]
        .as_str()?
        .strip_prefix("pid ")?
        .split(',')
        .next()?
        .parse()
        .ok()
}

/// `vault verify --json`.
pub fn verify(v: &TestVault) -> Value {
    let r = run(v, &["verify", "--json"], None);
    serde_json::from_str(r.stdout.trim())
        .unwrap_or_else(|_| panic!("vault verify --json: {}\n{}", r.stdout, r.stderr))
}

/// Whether `pid` runs (a zombie does not).
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| !s[s.rfind(')').unwrap() + 2..].starts_with('Z'))
}

/// SIGKILL to `pid`; whether it was delivered.
pub fn sigkill(pid: u32) -> bool {
    // SAFETY: a signal to a process this test started (callers never reap it concurrently).
    unsafe { libc::kill(pid as i32, libc::SIGKILL) == 0 }
}

/// VmRSS of `pid`, in KiB.
pub fn vm_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/PID/status")
}

/// A SIGKILL sent to `pid` after `after`, from a thread; `join` waits for it. The caller must
/// not reap `pid` before `join` (a reaped pid can be reused).
pub struct Killer(std::thread::JoinHandle<bool>);

impl Killer {
    pub fn arm(pid: u32, after: Duration) -> Self {
        Self(std::thread::spawn(move || {
            std::thread::sleep(after);
            sigkill(pid)
        }))
    }
    pub fn join(self) -> bool {
        self.0.join().unwrap()
    }
}

/// The agent this test started or adopted, killed on drop if it still runs (after `vault lock`
/// in `TestVault`'s drop, this finds nothing to do).
pub struct AgentGuard {
    pub pid: u32,
}

impl Drop for AgentGuard {
    fn drop(&mut self) {
        let is_vault = std::fs::read(format!("/proc/{}/cmdline", self.pid))
            .is_ok_and(|c| String::from_utf8_lossy(&c).contains("agent"));
        if alive(self.pid) && is_vault {
            sigkill(self.pid);
        }
    }
}

/// What `vault approve --id ID --approve` came to.
#[derive(Debug)]
pub enum Approval {
    Approved,
    /// It exited non-zero (the action was no longer pending, the agent died under it, …).
    Refused(String),
    /// This test killed it with SIGKILL.
    Killed,
}

/// `vault approve --id ID --approve --passphrase-stdin`, killed with SIGKILL `kill_after` its
/// start if it still runs then. Polled here, in one thread, so the pid is never reaped before
/// the signal.
pub fn approve(v: &TestVault, id: &str, kill_after: Option<Duration>) -> (Approval, Duration) {
    let t0 = Instant::now();
    let mut child = v
        .command(&["approve", "--id", id, "--approve", "--passphrase-stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _ = child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("{PASSPHRASE}\n").as_bytes());
    let mut stderr = child.stderr.take().unwrap();
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let mut killed = false;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if let Some(after) = kill_after {
            if !killed && t0.elapsed() >= after {
                killed = sigkill(child.id());
            }
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "vault approve --id {id} still runs after 60 s"
        );
        std::thread::sleep(Duration::from_millis(1));
    };
    let took = t0.elapsed();
    let stderr = err.join().unwrap();
    let outcome = if killed {
        Approval::Killed
    } else if status.success() {
        Approval::Approved
    } else {
        Approval::Refused(stderr)
    };
    (outcome, took)
}

/// The action `vault pending --json` lists with `tag` in its summary.
pub fn pending_with(v: &TestVault, tag: &str) -> Option<String> {
    let r = run(v, &["pending", "--json"], None);
    let listed: Vec<Value> = serde_json::from_str(r.stdout.trim()).ok()?;
    listed
        .iter()
        .find(|a| a["summary"].as_str().is_some_and(|s| s.contains(tag)))
        .and_then(|a| a["action_id"].as_str().map(str::to_owned))
}

/// What a `vault mcp` session gave back for one request.
#[derive(Debug)]
pub enum Reply {
    Answer(Value),
    /// stdout closed: the process is gone.
    Gone,
    Timeout,
}

/// A live `vault mcp`, its stdout read on a thread, its stderr in a file; SIGKILLed on drop
/// unless it was finished.
pub struct Mcp {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Value>,
    /// Answers read while waiting for another id.
    early: HashMap<i64, Value>,
    pub stderr_path: PathBuf,
    reaped: bool,
}

impl Mcp {
    /// Spawns `vault mcp` and runs the initialize handshake.
    pub fn start(v: &TestVault, stderr_path: PathBuf) -> Self {
        let mut child = v
            .command(&["mcp"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr_path).unwrap())
            .spawn()
            .expect("spawn vault mcp");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let v: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|_| panic!("vault mcp wrote a non-JSON line: {line:?}"));
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        let mut m = Self {
            stdin: child.stdin.take(),
            child,
            lines,
            early: HashMap::new(),
            stderr_path,
            reaped: false,
        };
        m.send(&json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "scale-suite", "version": "1.0"}}}));
        match m.reply(0, Duration::from_secs(30)) {
            Reply::Answer(r) => assert!(r.get("result").is_some(), "initialize: {r}"),
            other => panic!("initialize: {other:?}; stderr: {}", m.stderr()),
        }
        m.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        m
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Writes one line; false when the process no longer reads.
    pub fn send(&mut self, v: &Value) -> bool {
        let Some(stdin) = self.stdin.as_mut() else {
            return false;
        };
        let mut line = serde_json::to_string(v).unwrap();
        line.push('\n');
        stdin.write_all(line.as_bytes()).is_ok() && stdin.flush().is_ok()
    }

    /// A `tools/call` with request id `id`.
    pub fn call(&mut self, id: i64, tool: &str, args: &Value) -> bool {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": args}}))
    }

    /// The response to `id` (notifications skipped), within `timeout`.
    pub fn reply(&mut self, id: i64, timeout: Duration) -> Reply {
        if let Some(v) = self.early.remove(&id) {
            return Reply::Answer(v);
        }
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(m) if m.get("method").is_some() => {}
                Ok(m) => match m["id"].as_i64() {
                    Some(got) if got == id => return Reply::Answer(m),
                    Some(got) => {
                        self.early.insert(got, m);
                    }
                    None => panic!("vault mcp answered without an id: {m}"),
                },
                Err(RecvTimeoutError::Timeout) => return Reply::Timeout,
                Err(RecvTimeoutError::Disconnected) => return Reply::Gone,
            }
        }
    }

    /// Whether the process has exited (reaps it). Never call this while a `Killer` aims at it.
    pub fn exited(&mut self) -> bool {
        if !self.reaped && self.child.try_wait().unwrap().is_some() {
            self.reaped = true;
        }
        self.reaped
    }

    /// Closes stdin (the session ends as a client ends it) and waits up to `limit`.
    pub fn finish(&mut self, limit: Duration) {
        self.stdin.take();
        let t0 = Instant::now();
        while !self.exited() {
            assert!(
                t0.elapsed() < limit,
                "vault mcp did not exit within {limit:?} after EOF; stderr: {}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        if !self.reaped {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `vault log --follow --json`, read on a thread for as long as it runs; killed on drop.
pub struct Follower {
    child: Child,
    lines: Arc<Mutex<Vec<Value>>>,
}

impl Follower {
    pub fn start(v: &TestVault) -> Self {
        let mut child = v
            .command(&["log", "--follow", "--json"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn vault log --follow");
        let stdout = child.stdout.take().unwrap();
        let lines: Arc<Mutex<Vec<Value>>> = Arc::default();
        let seen = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let v: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|_| panic!("vault log --json wrote a non-JSON line: {line:?}"));
                seen.lock().unwrap().push(v);
            }
        });
        Self { child, lines }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn lines(&self) -> Vec<Value> {
        self.lines.lock().unwrap().clone()
    }

    /// Whether it still runs (it must, the whole time).
    pub fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One journal row as `vault export-audit` wrote it.
#[derive(Debug, Clone)]
pub struct Row {
    pub seq: i64,
    pub kind: String,
    pub session: Option<String>,
    pub action: Option<String>,
    pub body: Value,
    pub hash: String,
}

impl Row {
    /// `action.<state>` → state.
    pub fn state(&self) -> Option<&str> {
        self.kind.strip_prefix("action.")
    }
}

/// The whole journal, through `vault export-audit FILE` (the keyless export `vault verify
/// --file` checks too), which must verify.
pub fn export(v: &TestVault, name: &str) -> Vec<Row> {
    let file = v.dir.path().join(name);
    let path = file.to_str().unwrap();
    run(v, &["export-audit", path], None).ok();
    let check = run(v, &["verify", "--json", "--file", path], None).ok();
    let line: Value = serde_json::from_str(check.stdout.trim()).unwrap();
    assert_eq!(line["ok"], true, "the export verifies: {line}");
    let text = std::fs::read_to_string(&file).unwrap();
    let rows: Vec<Row> = text
        .lines()
        .map(|l| {
            let r: Value = serde_json::from_str(l).unwrap();
            Row {
                seq: r["seq"].as_i64().unwrap(),
                kind: r["kind"].as_str().unwrap().to_owned(),
                session: r["session"].as_str().map(str::to_owned),
                action: r["action"].as_str().map(str::to_owned),
                body: r["body"].clone(),
                hash: r["hash"].as_str().unwrap().to_owned(),
            }
        })
        .collect();
    let _ = std::fs::remove_file(&file);
    rows
}

/// Each action's rows, oldest first, with the tag its summary carries.
pub struct Actions {
    pub by_id: HashMap<String, Vec<(i64, String)>>,
    pub tag_of: HashMap<String, String>,
    pub ids_of_tag: HashMap<String, Vec<String>>,
}

impl Actions {
    pub fn of(rows: &[Row]) -> Self {
        let mut by_id: HashMap<String, Vec<(i64, String)>> = HashMap::new();
        let mut tag_of = HashMap::new();
        for r in rows {
            let (Some(state), Some(id)) = (r.state(), r.action.as_ref()) else {
                continue;
            };
            by_id
                .entry(id.clone())
                .or_default()
                .push((r.seq, state.to_owned()));
            if let Some(t) = r.body["summary"].as_str().and_then(find_tag) {
                tag_of.entry(id.clone()).or_insert(t);
            }
        }
        let mut ids_of_tag: HashMap<String, Vec<String>> = HashMap::new();
        for (id, t) in &tag_of {
            ids_of_tag.entry(t.clone()).or_default().push(id.clone());
        }
        Self {
            by_id,
            tag_of,
            ids_of_tag,
        }
    }

    pub fn last(&self, id: &str) -> Option<&str> {
        self.by_id.get(id)?.last().map(|(_, s)| s.as_str())
    }

    pub fn count(&self, id: &str, state: &str) -> usize {
        self.by_id
            .get(id)
            .map_or(0, |rows| rows.iter().filter(|(_, s)| s == state).count())
    }
}

/// Path of the vault binary under test (for the figures).
pub fn binary() -> &'static str {
    bin()
}
