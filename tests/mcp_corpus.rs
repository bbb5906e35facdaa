//! The wire boundary through the real binary: every hostile input of `tests/corpus/cases.json`
//! gets its exact JSON-RPC code (or tool error), closes the session or not as documented, leaves
//! zero actions (an executor only ever runs a claimed action) and no `action.*` journal row, and
//! stdout stays pure JSON-RPC throughout.
mod support;

use serde_json::Value;
use std::io::Write;
use std::net::TcpListener;
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::mcp::{assert_protocol_stdout, wait_with_timeout};
use support::target::HttpTarget;
use support::*;

const DECOYS: [&str; 3] = [
    "DECOY_corpus_api_7d1e2",
    "DECOY_corpus_box_c93a0",
    "DECOY_corpus_other_55f1",
];

const INIT: &str = r#"{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"corpus","version":"1"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
const PROBE: &str = r#"{"jsonrpc":"2.0","id":"probe","method":"ping"}"#;

/// What the corpus's credentials reach: real loopback targets that count every request (the two
/// HTTPS ones, behind a throwaway CA) and a TCP listener that counts every connection (where the
/// SSH credential points), so that "zero actions" is counted where an action would land.
struct Targets {
    api: HttpTarget,
    other: HttpTarget,
    ssh_port: u16,
    ssh_hits: Arc<AtomicUsize>,
    _ca: TempDir,
}

impl Targets {
    fn start() -> Self {
        let dir = TempDir::new("corpus-ca");
        let ca = support::tls::TestCa::create(dir.path());
        let api = HttpTarget::start_tls("unused", &ca.leaf_cert, &ca.leaf_key);
        let other = HttpTarget::start_tls("unused", &ca.leaf_cert, &ca.leaf_key);
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let ssh_port = listener.local_addr().unwrap().port();
        let ssh_hits = Arc::new(AtomicUsize::new(0));
        let hits = ssh_hits.clone();
        std::thread::spawn(move || {
            for _ in listener.incoming() {
                hits.fetch_add(1, Ordering::SeqCst);
            }
        });
        // The CA file must outlive the vault's reads of it.
        let _ = ca.ca_cert.clone();
        Self {
            api,
            other,
            ssh_port,
            ssh_hits,
            _ca: dir,
        }
    }

    /// `host:port` of a target, as the cases' URLs name it in place of the example host.
    fn authority(t: &HttpTarget) -> String {
        t.base().trim_start_matches("https://").to_owned()
    }

    /// The cases' example hosts, each replaced by the loopback target its credential names: a
    /// case's URL keeps its meaning (same scheme, path, port and userinfo relation), and now
    /// leads somewhere real. A case whose URL would no longer parse after the swap (a port
    /// after the host, a host that only begins with it) keeps the example host: it names no
    /// credential's target either way.
    fn rewrite(&self, input: &[u8]) -> Vec<u8> {
        let mut out = input.to_vec();
        for (host, t) in [
            ("api.example.com", &self.api),
            ("other.example.com", &self.other),
        ] {
            let to = Self::authority(t);
            for end in ["/", "\\/"] {
                out = replace_bytes(
                    &out,
                    format!("{host}{end}").as_bytes(),
                    format!("{to}{end}").as_bytes(),
                );
            }
        }
        out
    }

    fn requests(&self) -> usize {
        self.api.requests().len() + self.other.requests().len()
    }
}

/// `from` replaced by `to` in `bytes` (which need not be UTF-8: some cases are not).
fn replace_bytes(bytes: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut rest = bytes;
    while let Some(at) = memchr::memmem::find(rest, from) {
        out.extend_from_slice(&rest[..at]);
        out.extend_from_slice(to);
        rest = &rest[at + from.len()..];
    }
    out.extend_from_slice(rest);
    out
}

/// A vault with an http credential `api`, an ssh credential `box` (command allowlist) in the
/// default profile, and `other-api` in profile `other`, each bound to a loopback target of `t`.
fn corpus_vault(t: &Targets) -> TestVault {
    let mut v = TestVault::init("corpus");
    let ca = t._ca.path().join("ca.pem");
    v.run_pp(
        &[
            "add",
            "http",
            "api",
            "--host",
            &format!("https://{}", Targets::authority(&t.api)),
            "--ca-file",
            ca.to_str().unwrap(),
            "--path-prefix",
            "/v1/",
            "--methods",
            "GET,POST",
            "--bearer",
            "--secret-stdin",
        ],
        Some(&format!("{}\n", DECOYS[0])),
    )
    .ok();
    let pin = format!("SHA256:{}", "A".repeat(43));
    v.run_pp(
        &[
            "add",
            "ssh",
            "box",
            "--host",
            "127.0.0.1",
            "--port",
            &t.ssh_port.to_string(),
            "--user",
            "deploy",
            "--password-stdin",
            "--host-key",
            &pin,
            "--allow-command",
            "uptime",
        ],
        Some(&format!("{}\n", DECOYS[1])),
    )
    .ok();
    v.run_pp(
        &[
            "add",
            "http",
            "other-api",
            "--host",
            &format!("https://{}", Targets::authority(&t.other)),
            "--ca-file",
            ca.to_str().unwrap(),
            "--bearer",
            "--secret-stdin",
            "--profile",
            "other",
        ],
        Some(&format!("{}\n", DECOYS[2])),
    )
    .ok();
    v
}

fn input_of(case: &Value) -> Vec<u8> {
    if let Some(s) = case["input"].as_str() {
        return s.as_bytes().to_vec();
    }
    if let Some(h) = case["input_hex"].as_str() {
        return hex::decode(h).unwrap();
    }
    match case["generate"].as_str().unwrap() {
        "oversized" => {
            let mut v = br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":""#.to_vec();
            v.resize(4 * 1024 * 1024 + 64, b'a');
            v.extend_from_slice(b"\"}}\n");
            v
        }
        "deep_array" => format!("{}{}\n", "[".repeat(100_000), "]".repeat(100_000)).into_bytes(),
        "deep_object" => {
            let mut s = String::from(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":"#);
            s.push_str(&r#"{"a":"#.repeat(500));
            s.push('1');
            s.push_str(&"}".repeat(501));
            s.push('\n');
            s.into_bytes()
        }
        other => panic!("unknown generator {other}"),
    }
}

fn rejected_rows(v: &TestVault) -> i64 {
    v.open_db()
        .store
        .conn()
        .query_row(
            "SELECT count(*) FROM audit WHERE kind = 'call.rejected'",
            [],
            |r| r.get(0),
        )
        .unwrap()
}

#[test]
fn every_hostile_input_is_refused_before_anything_can_act() {
    let corpus: Value = serde_json::from_str(
        &std::fs::read_to_string(support_file("../corpus/cases.json")).unwrap(),
    )
    .unwrap();
    let cases = corpus["cases"].as_array().unwrap();
    assert!(cases.len() >= 40, "the corpus keeps at least 40 cases");
    let targets = Targets::start();
    let mut v = corpus_vault(&targets);
    // The control: each target is reachable through its credential (so a zero below is a
    // refusal, not a dead target), then counted from zero.
    let ssh_before = targets.ssh_hits.load(Ordering::SeqCst);
    let mut p = support::mcp::McpProc::spawn(v.command(&["mcp"]));
    p.initialize();
    let url = format!("https://{}/v1/items", Targets::authority(&targets.api));
    let control = p.call(
        1,
        "http_request",
        serde_json::json!({"credential": "api",
        "method": "GET", "url": url, "wait_s": 0}),
    );
    let control_id = control["result"]["structuredContent"]["action_id"]
        .as_str()
        .unwrap_or_else(|| panic!("the control GET did not wait for a card: {control}"))
        .to_owned();
    p.finish(Duration::from_secs(10));
    let mut rejected_before = rejected_rows(&v);
    let mut aimed = 0;
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let mut stdin = Vec::new();
        if case["preamble"] != false {
            stdin.extend_from_slice(format!("{INIT}\n{INITIALIZED}\n").as_bytes());
        }
        let input = input_of(case);
        let rewritten = targets.rewrite(&input);
        aimed += usize::from(rewritten != input);
        stdin.extend_from_slice(&rewritten);
        let eof = case["eof"] == true;
        if !eof {
            stdin.extend_from_slice(format!("{PROBE}\n").as_bytes());
        }
        let mut child = v
            .command(&["mcp"])
            .env("VAULT_LOG", "debug")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut pipe = child.stdin.take().unwrap();
        let writer = std::thread::spawn(move || {
            let _ = pipe.write_all(&stdin);
        });
        let out = wait_with_timeout(child, Duration::from_secs(30), name);
        writer.join().unwrap();
        let messages = assert_protocol_stdout(name, &out.stdout);
        v.transcript
            .push(String::from_utf8_lossy(&out.stdout).into_owned());
        v.transcript
            .push(String::from_utf8_lossy(&out.stderr).into_owned());

        let answers: Vec<&Value> = messages
            .iter()
            .filter(|m| m["id"] != "init" && m["id"] != "probe")
            .collect();
        assert_eq!(
            answers.len(),
            1,
            "{name}: expected one answer, got {answers:?}"
        );
        let answer = answers[0];
        let expect = &case["expect"];
        if let Some(code) = expect["code"].as_i64() {
            assert_eq!(answer["error"]["code"], code, "{name}: {answer}");
            if code == -32700 || (code == -32600 && case["closes"] == true) {
                assert!(
                    answer["id"].is_null(),
                    "{name}: framing errors answer with id null"
                );
            }
        } else if let Some(tool_error) = expect["tool_error"].as_str() {
            let r = &answer["result"];
            assert_eq!(r["isError"], true, "{name}: {answer}");
            assert_eq!(
                r["structuredContent"]["error"]["code"], tool_error,
                "{name}: {answer}"
            );
            let text = r["content"][0]["text"].as_str().unwrap();
            assert!(text.starts_with("Error: "), "{name}: {text}");
            let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
            assert_eq!(
                last, r["structuredContent"],
                "{name}: the text ends with the structured JSON"
            );
        } else {
            assert!(answer.get("result").is_some(), "{name}: {answer}");
        }
        let probe_answered = messages.iter().any(|m| m["id"] == "probe");
        let closes = case["closes"] == true;
        if !eof {
            assert_eq!(
                probe_answered,
                !closes,
                "{name}: the session must {} after it",
                if closes { "close" } else { "stay open" }
            );
        }
        // Each refused call is journaled once, as `call.rejected`; a case marked
        // `"journaled": false` says why it is not a call (a lifecycle refusal before or at
        // `initialize`, when the session has no agent connection yet, or a version refusal).
        let rejected = rejected_rows(&v);
        let want = i64::from(expect.get("ok").is_none() && case["journaled"] != false);
        assert_eq!(
            rejected - rejected_before,
            want,
            "{name}: call.rejected rows written for this case"
        );
        rejected_before = rejected;
    }

    // No rejected request left an action behind, and no secret went anywhere.
    let vault = v.open_db();
    let actions: i64 = vault
        .store
        .conn()
        .query_row(
            "SELECT count(*) FROM actions WHERE id != ?1",
            [&control_id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(actions, 0, "rejected requests must leave no action");
    // Counted where an action would land: nothing reached a target or the SSH port (and the
    // cases that name an example host now name a real one).
    assert!(
        aimed >= 10,
        "only {aimed} cases were aimed at the loopback targets"
    );
    assert_eq!(targets.requests(), 0, "a request reached a target");
    assert_eq!(
        targets.ssh_hits.load(Ordering::SeqCst),
        ssh_before,
        "a connection reached the SSH credential's port"
    );
    let transitions: i64 = vault
        .store
        .conn()
        .query_row(
            "SELECT count(*) FROM audit WHERE kind LIKE 'action.%' AND action_id != ?1",
            [&control_id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        transitions, 0,
        "no action ever existed, so none was dispatched"
    );
    // Each refusal is journaled as call.rejected with a fingerprint, never the request bytes.
    let bodies: Vec<String> = vault
        .store
        .conn()
        .prepare("SELECT body FROM audit WHERE kind = 'call.rejected'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    for b in &bodies {
        let v: Value = serde_json::from_str(b).unwrap();
        assert_eq!(v["fingerprint"].as_str().unwrap().len(), 64, "{b}");
        assert!(
            !b.contains("evil.example") && !b.contains("rm -rf"),
            "request bytes reached the journal: {b}"
        );
    }
    drop(vault);
    let verify = v.run(&["verify", "--json"], None).ok();
    assert!(verify.stdout.contains("\"ok\":true"), "{}", verify.stdout);
    let all = v.transcript.join("\n");
    for d in DECOYS {
        assert_no_leak("mcp stdout/stderr", all.as_bytes(), d);
    }
}
