//! A live `vault mcp` process for tests: write JSON-RPC lines, read its stdout lines with a
//! timeout (every line is checked to be JSON), close stdin, collect stderr.
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::time::Duration;

pub struct McpProc {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: std::thread::JoinHandle<String>,
    /// Every stdout line seen so far, raw.
    pub seen: Vec<String>,
}

impl McpProc {
    pub fn spawn(mut cmd: Command) -> Self {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn vault mcp");
        let stdout = child.stdout.take().unwrap();
        let mut stderr = child.stderr.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = std::thread::spawn(move || {
            let mut s = String::new();
            std::io::Read::read_to_string(&mut stderr, &mut s).ok();
            s
        });
        Self {
            stdin: child.stdin.take(),
            child,
            lines,
            stderr,
            seen: Vec::new(),
        }
    }

    pub fn send(&mut self, v: &Value) {
        let mut line = serde_json::to_string(v).unwrap();
        line.push('\n');
        self.send_raw(line.as_bytes());
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    /// The next stdout message, or None after `timeout`.
    pub fn recv(&mut self, timeout: Duration) -> Option<Value> {
        match self.lines.recv_timeout(timeout) {
            Ok(line) => {
                let v: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|_| panic!("non-JSON stdout line: {line:?}"));
                assert_eq!(v["jsonrpc"], "2.0", "not JSON-RPC: {line}");
                self.seen.push(line);
                Some(v)
            }
            Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => None,
        }
    }

    /// Reads until the response with `id` arrives (notifications before it are returned too).
    pub fn until_id(&mut self, id: &Value, timeout: Duration) -> (Value, Vec<Value>) {
        let deadline = std::time::Instant::now() + timeout;
        let mut others = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let m = self.recv(left).unwrap_or_else(|| {
                panic!(
                    "no response to id {id} within {timeout:?}; seen: {:?}",
                    self.seen
                )
            });
            if &m["id"] == id && m.get("method").is_none() {
                return (m, others);
            }
            others.push(m);
        }
    }

    pub fn request(&mut self, id: Value, method: &str, params: Value) -> Value {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.until_id(&id, Duration::from_secs(20)).0
    }

    pub fn initialize(&mut self) -> Value {
        let r = self.request(json!("init"), "initialize", json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "test-client", "version": "1.0"}}));
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        r
    }

    pub fn call(&mut self, id: i64, tool: &str, args: Value) -> Value {
        self.request(
            json!(id),
            "tools/call",
            json!({"name": tool, "arguments": args}),
        )
    }

    pub fn close_stdin(&mut self) {
        self.stdin.take();
    }

    /// Closes stdin and waits for exit; returns (exit code, remaining stdout lines, stderr).
    pub fn finish(mut self, timeout: Duration) -> (i32, Vec<String>, String) {
        self.close_stdin();
        let start = std::time::Instant::now();
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            if start.elapsed() > timeout {
                let _ = self.child.kill();
                panic!("vault mcp did not exit within {timeout:?} after EOF");
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let mut rest = Vec::new();
        while let Ok(l) = self.lines.recv_timeout(Duration::from_millis(200)) {
            rest.push(l);
        }
        (
            status.code().unwrap_or(-1),
            rest,
            self.stderr.join().unwrap(),
        )
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

/// Every stdout line must be one JSON-RPC 2.0 response or notification; the failure names the
/// first offending line, raw.
#[track_caller]
pub fn assert_protocol_stdout(case: &str, stdout: &[u8]) -> Vec<Value> {
    let mut out = Vec::new();
    if stdout.is_empty() {
        return out;
    }
    assert!(
        stdout.ends_with(b"\n"),
        "{case}: stdout ended without a complete frame: {:?}",
        String::from_utf8_lossy(stdout)
    );
    for (n, raw) in stdout
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .enumerate()
    {
        let msg: Value = std::str::from_utf8(raw)
            .ok()
            .and_then(|s| serde_json::from_str(s).ok())
            .unwrap_or_else(|| {
                panic!(
                    "{case}: non-protocol stdout on line {}: {:?}",
                    n + 1,
                    String::from_utf8_lossy(raw)
                )
            });
        assert_eq!(
            msg["jsonrpc"],
            "2.0",
            "{case}: line {} lacks jsonrpc 2.0: {msg}",
            n + 1
        );
        let notification = msg["method"].is_string() && msg.get("id").is_none();
        let response =
            msg.get("id").is_some() && (msg.get("result").is_some() ^ msg.get("error").is_some());
        assert!(
            notification || response,
            "{case}: line {} has no permitted shape: {msg}",
            n + 1
        );
        out.push(msg);
    }
    out
}

/// Waits for the child, killing it after `limit` (a hang is a failure, not a stuck test run).
pub fn wait_with_timeout(
    mut child: std::process::Child,
    limit: Duration,
    what: &str,
) -> std::process::Output {
    let start = std::time::Instant::now();
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out_t = std::thread::spawn(move || {
        let mut b = Vec::new();
        std::io::Read::read_to_end(&mut stdout, &mut b).ok();
        b
    });
    let err_t = std::thread::spawn(move || {
        let mut b = Vec::new();
        std::io::Read::read_to_end(&mut stderr, &mut b).ok();
        b
    });
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("{what}: vault mcp did not exit within {}s", limit.as_secs());
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    std::process::Output {
        status,
        stdout: out_t.join().unwrap(),
        stderr: err_t.join().unwrap(),
    }
}
