//! Tool results collected from the real binary and held to their tools' `outputSchema` by
//! `tests/clients/validate_results.mjs` (the TypeScript MCP SDK's validator and strict Ajv): a
//! `vault mcp` session that numbers its calls, the collection with the error codes and states it
//! exercised, and the run of the validator.
use super::mcp::McpProc;
use super::{assert_no_leak, bin, ci_node_dir, TestVault, PASSPHRASE};
use serde_json::{json, Value};
use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// A run of the validator that takes longer than this has stalled.
const VALIDATOR_TIMEOUT: Duration = Duration::from_secs(90);

/// A `vault mcp` session whose calls are numbered for it; answers that arrive while another is
/// awaited are kept for their own turn.
pub struct Session {
    pub p: McpProc,
    next: i64,
    early: HashMap<i64, Value>,
}

impl Session {
    pub fn start(v: &TestVault) -> Self {
        let mut p = McpProc::spawn(v.command(&["mcp"]));
        p.initialize();
        Self {
            p,
            next: 100,
            early: HashMap::new(),
        }
    }

    /// Sends a `tools/call` without waiting; returns its id.
    pub fn send(&mut self, tool: &str, args: Value) -> i64 {
        self.next += 1;
        let id = self.next;
        self.p
            .send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                            "params": {"name": tool, "arguments": args}}));
        id
    }

    /// The tool result of call `id` (`content`, `structuredContent`, `isError`).
    pub fn result(&mut self, id: i64, limit: Duration) -> Value {
        let deadline = Instant::now() + limit;
        let r = loop {
            if let Some(r) = self.early.remove(&id) {
                break r;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let m = self
                .p
                .recv(left)
                .unwrap_or_else(|| panic!("no answer to call {id} within {limit:?}"));
            if let Some(n) = m["id"].as_i64().filter(|_| m.get("method").is_none()) {
                self.early.insert(n, m);
            }
        };
        assert!(
            r.get("error").is_none(),
            "JSON-RPC error for call {id}: {r}"
        );
        r["result"].clone()
    }

    pub fn call(&mut self, tool: &str, args: Value) -> Value {
        let id = self.send(tool, args);
        self.result(id, Duration::from_secs(40))
    }
}

/// Every result collected: (label, tool, structuredContent), and what they exercised.
#[derive(Default)]
pub struct Shapes {
    lines: Vec<Value>,
    pub codes: BTreeSet<String>,
    pub states: BTreeSet<String>,
}

impl Shapes {
    /// Records one tool result, checks that `isError` goes with an `error` object and that the
    /// text block carries the same JSON, and returns its `structuredContent`.
    #[track_caller]
    pub fn add(&mut self, label: &str, tool: &str, result: &Value) -> Value {
        let s = result["structuredContent"].clone();
        assert!(s.is_object(), "{label}: no structuredContent: {result}");
        let is_error = result["isError"] == true;
        assert_eq!(is_error, s.get("error").is_some(), "{label}: {result}");
        let text = result["content"][0]["text"].as_str().unwrap_or_default();
        let json_line = if is_error {
            text.lines().last()
        } else {
            Some(text)
        };
        let carried: Value =
            serde_json::from_str(json_line.unwrap_or_default()).unwrap_or_else(|e| {
                panic!("{label}: the text block ends without the JSON ({e}): {text}")
            });
        assert_eq!(
            carried, s,
            "{label}: the text block and structuredContent differ"
        );
        if let Some(code) = s["error"]["code"].as_str() {
            self.codes.insert(code.to_owned());
        }
        let items = s["actions"].as_array().into_iter().flatten();
        for state in [&s["state"], &s["error"]["details"]["state"]]
            .into_iter()
            .chain(items.map(|a| &a["state"]))
            .filter_map(Value::as_str)
        {
            self.states.insert(state.to_owned());
        }
        self.lines
            .push(json!({"label": label, "tool": tool, "structured": s}));
        s
    }

    /// `add`, then asserts that `key` of the result (`code`: its `error.code`) is `want`.
    #[track_caller]
    pub fn add_as(
        &mut self,
        label: &str,
        tool: &str,
        result: &Value,
        key: &str,
        want: &str,
    ) -> Value {
        let s = self.add(label, tool, result);
        expect(&s, key, want);
        s
    }

    /// How many results were collected.
    pub fn len(&self) -> usize {
        self.lines.len()
    }

    /// Runs `validate_results.mjs` over every collected result against the `outputSchema` that
    /// `vault mcp` (with `VAULT_DIR` = `vault_dir`) announces; panics with its report unless every
    /// result passed. Returns the validator's summary.
    pub fn validate(&self, vault_dir: &Path, secret: &str) -> Value {
        let file = vault_dir.with_file_name("results.jsonl");
        let body: String = self.lines.iter().map(|l| format!("{l}\n")).collect();
        std::fs::write(&file, &body).unwrap();
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/validate_results.mjs");
        let f = super::run_limited(
            Command::new("node")
                .arg(script)
                .arg(ci_node_dir())
                .arg(bin())
                .arg(vault_dir)
                .arg(&file)
                .env_remove("VAULT_DIR"),
            VALIDATOR_TIMEOUT,
        )
        .unwrap_or_else(|e| panic!("cannot start node (it is needed for this test): {e}"));
        let status = f
            .status
            .unwrap_or_else(|| panic!("validate_results.mjs stalled for {VALIDATOR_TIMEOUT:?}"));
        let (stdout, stderr) = (
            String::from_utf8_lossy(&f.stdout).into_owned(),
            String::from_utf8_lossy(&f.stderr).into_owned(),
        );
        assert_no_leak("validator output", stdout.as_bytes(), secret);
        assert!(
            status.success(),
            "results that do not fit their tool's outputSchema ({status}):\n{stdout}\nstderr:\n{stderr}"
        );
        let summary: Value = stdout
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find_map(|v| v.get("summary").cloned())
            .unwrap_or_else(|| panic!("no summary from the validator:\n{stdout}\n{stderr}"));
        assert_eq!(summary["checked"], self.lines.len(), "{summary}");
        assert_eq!(summary["failed"], 0, "{summary}");
        summary
    }
}

/// `http_request` arguments: GET `url` with `credential`, waiting up to 30 s, plus `extra`.
pub fn get(credential: &str, url: String, extra: Value) -> Value {
    let mut args = json!({"credential": credential, "method": "GET", "url": url, "wait_s": 30});
    for (k, val) in extra.as_object().unwrap() {
        args[k] = val.clone();
    }
    args
}

/// Asserts `key` of a result (`code`: its `error.code`) is `want`.
#[track_caller]
pub fn expect(s: &Value, key: &str, want: &str) {
    let got = match key {
        "code" => &s["error"]["code"],
        _ => &s[key],
    };
    assert_eq!(got, want, "{key}: {s}");
}

/// The ids `vault pending --json` lists.
pub fn pending(v: &mut TestVault) -> Vec<String> {
    let r = v.run(&["pending", "--json"], None).ok();
    let list: Vec<Value> = serde_json::from_str(r.stdout.trim()).unwrap();
    list.iter()
        .map(|a| a["action_id"].as_str().unwrap().to_owned())
        .collect()
}

/// Waits until at least `n` actions wait for a person; returns their ids.
pub fn await_pending(v: &mut TestVault, n: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let ids = pending(v);
        if ids.len() >= n {
            return ids;
        }
        assert!(
            Instant::now() < deadline,
            "only {} actions pending, want {n}",
            ids.len()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn decide(v: &mut TestVault, id: &str, how: &str) {
    v.run(
        &["approve", "--id", id, how, "--passphrase-stdin"],
        Some(&format!("{PASSPHRASE}\n")),
    )
    .ok();
}

pub fn unlock(v: &mut TestVault) {
    v.run(
        &["unlock", "--passphrase-stdin"],
        Some(&format!("{PASSPHRASE}\n")),
    )
    .ok();
}

pub fn kill_agent(v: &mut TestVault) {
    let pid = v.agent_pid().expect("a running vault agent");
    // SAFETY: signalling the vault agent this test started.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGKILL) }, 0);
}
