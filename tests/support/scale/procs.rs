//! The processes of the scale suites: `vault` commands run to their end, the agent restarted
//! and found, `vault mcp` sessions that tell an answer from a session that died, `vault approve`
//! killed at a chosen moment, `vault log --follow` read on a thread, SIGKILL by pid.
use crate::support::{bin, Run, TestVault, PASSPHRASE};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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
    crate::support::agent_pid_in(&r.stdout)
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

/// A process's resident memory from /proc/PID/status, in KiB: all of it (VmRSS), and its
/// anonymous (heap, stacks) and file-backed (the binary's pages) parts.
#[derive(Debug, Clone, Copy)]
pub struct Rss {
    pub total: u64,
    pub anon: u64,
    pub file: u64,
}

impl Rss {
    pub fn of(pid: u32) -> Self {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let field = |name: &str| -> u64 {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
                .unwrap_or_else(|| panic!("{name} in /proc/{pid}/status"))
        };
        Self {
            total: field("VmRSS:"),
            anon: field("RssAnon:"),
            file: field("RssFile:"),
        }
    }
}

impl std::fmt::Display for Rss {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} KiB ({} anon + {} file)",
            self.total, self.anon, self.file
        )
    }
}

/// A SIGKILL sent to `pid` after `after`, from a thread; `join` waits for it. The caller must
/// not reap `pid` before `join` (a reaped pid can be reused); dropped without `join` (a test
/// failing on the way), it is called off, so a guard that reaps the process next is safe.
pub struct Killer {
    thread: Option<std::thread::JoinHandle<bool>>,
    off: Arc<AtomicBool>,
}

impl Killer {
    pub fn arm(pid: u32, after: Duration) -> Self {
        let off = Arc::new(AtomicBool::new(false));
        let called_off = off.clone();
        let thread = std::thread::spawn(move || {
            std::thread::sleep(after);
            !called_off.load(Ordering::SeqCst) && sigkill(pid)
        });
        Self {
            thread: Some(thread),
            off,
        }
    }

    /// Waits for the signal; whether it was delivered.
    pub fn join(mut self) -> bool {
        self.thread.take().unwrap().join().unwrap()
    }
}

impl Drop for Killer {
    fn drop(&mut self) {
        if let Some(t) = self.thread.take() {
            self.off.store(true, Ordering::SeqCst);
            let _ = t.join();
        }
    }
}

/// The agent this test started or adopted, stopped on drop if it still runs (a test that
/// fails on the way): SIGTERM, so it journals its lock and removes its socket as it does when
/// `vault lock` stops it, then SIGKILL if it is still there after 5 s.
pub struct AgentGuard {
    pub pid: u32,
}

impl Drop for AgentGuard {
    fn drop(&mut self) {
        let is_agent = std::fs::read(format!("/proc/{}/cmdline", self.pid))
            .is_ok_and(|c| String::from_utf8_lossy(&c).contains("agent"));
        if !(alive(self.pid) && is_agent) {
            return;
        }
        // SAFETY: a signal to the agent this test started.
        unsafe { libc::kill(self.pid as i32, libc::SIGTERM) };
        let t0 = Instant::now();
        while alive(self.pid) && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(20));
        }
        if alive(self.pid) {
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

/// When to kill a `vault approve`.
#[derive(Debug, Clone, Copy)]
pub enum ApproveKill {
    /// This long after it started (most of its life is the passphrase KDF).
    AfterStart(Duration),
    /// This long after it opened its socket to the agent: the handshake, the view, the hash
    /// check, the signature, the decision and its reply all happen after that.
    AfterConnect(Duration),
}

/// One `vault approve` run: how it ended, how long it took, and when it connected to the agent
/// (seen as its first socket in /proc/PID/fd; `None` if it never did, or /proc did not say).
#[derive(Debug)]
pub struct ApproveRun {
    pub outcome: Approval,
    pub took: Duration,
    pub connected: Option<Duration>,
}

/// Whether `pid` holds a socket (the approver's only one is its connection to the agent).
fn has_socket(pid: u32) -> bool {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    dir.flatten().any(|e| {
        std::fs::read_link(e.path()).is_ok_and(|l| l.to_string_lossy().starts_with("socket:"))
    })
}

/// `vault approve --id ID --approve --passphrase-stdin`, killed with SIGKILL per `kill` if it
/// still runs then. Polled here, in one thread, so its pid is never reaped before the signal.
pub fn approve(v: &TestVault, id: &str, kill: Option<ApproveKill>) -> ApproveRun {
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
    let (mut killed, mut connected) = (false, None);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if connected.is_none() && has_socket(child.id()) {
            connected = Some(t0.elapsed());
        }
        let due = match kill {
            Some(ApproveKill::AfterStart(d)) => t0.elapsed() >= d,
            Some(ApproveKill::AfterConnect(d)) => connected.is_some_and(|c| t0.elapsed() >= c + d),
            None => false,
        };
        if due && !killed {
            killed = sigkill(child.id());
        }
        if t0.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("vault approve --id {id} still ran after 60 s");
        }
        std::thread::sleep(Duration::from_micros(500));
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
    ApproveRun {
        outcome,
        took,
        connected,
    }
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

    /// Waits until it has printed `n` lines (panics after `limit`, or if it exits).
    pub fn wait_lines(&mut self, n: usize, limit: Duration) {
        let deadline = Instant::now() + limit;
        while self.lines.lock().unwrap().len() < n {
            assert!(self.running(), "vault log --follow exited");
            assert!(
                Instant::now() < deadline,
                "vault log --follow printed {} lines of {n} in {limit:?}",
                self.lines.lock().unwrap().len()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
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

/// Path of the vault binary under test (for the figures).
pub fn binary() -> &'static str {
    bin()
}
