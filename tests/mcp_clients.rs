//! `vault mcp` driven by the official MCP client SDKs, as agents run it: the Python SDK's legacy
//! `ClientSession` (initialize handshake) and its default `Client` (mode "auto", which probes
//! `server/discover` first), and the TypeScript SDK's `Client` + `StdioClientTransport`. The
//! client scripts live in `tests/clients/`; the SDKs are installed by `.ci/run` into `.ci/venv`
//! and `.ci/node` at pinned versions.
//!
//! Each client lists the tools, calls `list_credentials` on a vault that holds a credential and
//! validates the result against the tool's `outputSchema`, gets a `pending` action from
//! `http_request` with `wait_s: 0`, reads it back with `get_action`, and gets an `isError` result
//! for an unknown argument. Everything a client saw (results and the server's stderr) is scanned
//! for the vault's decoy secrets.
mod support;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use support::*;

const HTTP_DECOY: &str = "DECOY_mcp_client_tok_7c41e0b95d";
/// A client run that takes longer than this has stalled.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(60);

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn client_script(name: &str) -> PathBuf {
    root().join("tests/clients").join(name)
}

/// `.ci/venv`'s Python, with the `mcp` SDK importable.
fn venv_python() -> PathBuf {
    let py = root().join(".ci/venv/bin/python");
    let ok = py.exists()
        && Command::new(&py)
            .args(["-c", "import mcp, jsonschema"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
    assert!(
        ok,
        "the Python MCP SDK is not installed in {}: run `.ci/run` once (it installs \
         .ci/requirements.txt into .ci/venv), or `python3 -m venv .ci/venv && \
         .ci/venv/bin/pip install -r .ci/requirements.txt`",
        py.display()
    );
    py
}

/// A vault with one HTTP credential whose secret is a decoy.
fn vault_with_credential(tag: &str) -> TestVault {
    let mut v = TestVault::init(tag);
    v.add_bearer("api", "api.example.com", HTTP_DECOY);
    v
}

struct ClientRun {
    summary: Value,
    seen: Vec<Value>,
    wall: Duration,
}

/// Runs a client script to completion (or kills it at `CLIENT_TIMEOUT`), then checks that it
/// succeeded and that nothing it saw holds a secret.
fn run_client(label: &str, mut cmd: Command) -> ClientRun {
    let f = run_limited(
        cmd.env_remove("VAULT_DIR")
            .env_remove("VAULT_PASSPHRASE_FILE"),
        CLIENT_TIMEOUT,
    )
    .unwrap_or_else(|e| panic!("{label}: cannot start the client: {e}"));
    let (status, wall, stdout, stderr) = (f.status, f.wall, f.stdout, f.stderr);
    let text = String::from_utf8_lossy(&stdout);
    let errtext = String::from_utf8_lossy(&stderr);
    match status {
        None => {
            panic!("{label}: stalled for {CLIENT_TIMEOUT:?}\nstdout:\n{text}\nstderr:\n{errtext}")
        }
        Some(s) if !s.success() => {
            panic!("{label}: failed ({s})\nstdout:\n{text}\nstderr:\n{errtext}")
        }
        Some(_) => {}
    }
    for secret in [HTTP_DECOY, PASSPHRASE] {
        assert_no_leak(&format!("{label} stdout"), &stdout, secret);
        assert_no_leak(
            &format!("{label} stderr (server stderr too)"),
            &stderr,
            secret,
        );
    }
    let mut summary = None;
    let mut seen = Vec::new();
    for line in text.lines() {
        let v: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("{label}: stdout line is not JSON ({e}): {line}"));
        if let Some(s) = v.get("summary") {
            summary = Some(s.clone());
        } else {
            seen.push(v);
        }
    }
    let summary = summary.unwrap_or_else(|| panic!("{label}: no summary line\n{text}"));
    println!(
        "{label}: {summary} (wall {:.0} ms)",
        wall.as_secs_f64() * 1e3
    );
    ClientRun {
        summary,
        seen,
        wall,
    }
}

/// What every client must have seen, in order.
#[track_caller]
fn assert_saw_everything(label: &str, run: &ClientRun) {
    let kinds: Vec<&str> = run.seen.iter().filter_map(|v| v["seen"].as_str()).collect();
    assert_eq!(
        &kinds[1..],
        [
            "tools/list",
            "list_credentials",
            "http_request",
            "get_action",
            "unknown_argument"
        ],
        "{label}"
    );
    let pending = &run.seen[3]["value"];
    assert_eq!(pending["structuredContent"]["state"], "pending", "{label}");
    assert_eq!(
        run.summary["action_id"], pending["structuredContent"]["action_id"],
        "{label}"
    );
    let bad = &run.seen[5]["value"];
    assert_eq!(bad["isError"], true, "{label}");
    assert!(
        bad["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("Error:")),
        "{label}: {bad}"
    );
}

fn ms(v: &Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("summary has no {key}: {v}"))
}

fn python_client(mode: &str, v: &TestVault) -> ClientRun {
    let mut cmd = Command::new(venv_python());
    cmd.arg(client_script("python_client.py"))
        .arg(mode)
        .arg(bin())
        .arg(v.vault_dir());
    run_client(&format!("python-{mode}"), cmd)
}

#[test]
fn python_sdk_client_session_does_the_initialize_handshake() {
    let v = vault_with_credential("py-session");
    let run = python_client("session", &v);
    assert_saw_everything("python ClientSession", &run);
    assert_eq!(run.seen[0]["seen"], "initialize");
    assert_eq!(run.seen[0]["value"]["serverInfo"]["name"], "agent-vault");
    assert_eq!(run.summary["protocol_version"], "2025-11-25");
}

#[test]
fn python_sdk_default_client_negotiates_modern_without_a_stall() {
    let v = vault_with_credential("py-auto");
    let run = python_client("auto", &v);
    assert_saw_everything("python Client(auto)", &run);
    // The probe succeeded: the connection speaks 2026-07-28, no fallback handshake.
    assert_eq!(run.summary["protocol_version"], "2026-07-28");
    let connect = ms(&run.summary, "connect_ms");
    assert!(
        connect < 2000.0,
        "the auto client took {connect} ms to connect (a server/discover stall?)"
    );
    assert!(run.wall < Duration::from_secs(20), "{:?}", run.wall);
}

#[test]
fn typescript_sdk_client_over_stdio() {
    let v = vault_with_credential("node");
    let dir = ci_node_dir();
    let mut cmd = Command::new("node");
    cmd.arg(client_script("node_client.mjs"))
        .arg(&dir)
        .arg(bin())
        .arg(v.vault_dir());
    let run = run_client("node-sdk", cmd);
    assert_saw_everything("TypeScript Client", &run);
    assert_eq!(run.seen[0]["value"]["serverVersion"]["name"], "agent-vault");
    assert!(
        run.summary["protocol_version"]
            .as_str()
            .is_some_and(|p| p.starts_with("2025-")),
        "{}",
        run.summary
    );
}
