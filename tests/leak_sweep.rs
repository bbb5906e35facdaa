//! The leak sweep: a decoy secret in every credential kind (bearer, basic, header template, query
//! parameter, SSH password, SSH private key), requests against a loopback target that echoes the
//! credential it received in every form (raw, base64 at three alignments standard and URL-safe,
//! percent-encoded upper, lower, mixed and partial, form-encoded, JSON `\u`-escaped, Go-escaped,
//! hex; in the body, in headers and in `Location`; as JSON whose escapes decode to it; cut in the
//! middle), then a search for every form of every decoy in every tool result, `vault mcp` stdout,
//! its stderr and the agent's `agent.log` at `VAULT_LOG=trace`, `vault log --json`, `vault export-audit`, every column of
//! every table of vault.db (opened with the master key by another SQLCipher implementation), every
//! file in the vault directory and every CLI run: zero hits. The target must have received each
//! HTTP secret, so the sweep proves the scrubber, not an absent secret.
mod support;

use base64::Engine;
use serde_json::{json, Value};
use std::time::Duration;
use support::leak::assert_clean;
use support::mcp::McpProc;
use support::target::HttpTarget;
use support::*;

const BEARER: &str = "DECOYbear~9*f0 q&<7>/+=c1";
const BASIC: &str = "DECOYbasic~2*a9 k&<3>/+=d4";
const HEADER: &str = "DECOYhdr~5*b1 m&<8>/+=e2";
const QUERY: &str = "DECOYqry~7*c3 n&<1>/+=f5";
const SSH_PASSWORD: &str = "DECOYsshpw~4*d2 p&<6>/+=a8";

/// The master key, recovered with the stock `age` CLI from `vault.key.age` and the passphrase.
fn master_key(v: &TestVault) -> String {
    let out = std::process::Command::new(python())
        .arg(support_file("pty_drive.py"))
        .arg(serde_json::to_string(&[("passphrase", format!("{PASSPHRASE}\n"))]).unwrap())
        .args(["--", "age", "-d"])
        .arg(v.vault_dir().join("vault.key.age"))
        .output()
        .expect("run age (apt-get install age; .ci/run does)");
    let text = String::from_utf8(out.stdout).unwrap();
    let line = text
        .lines()
        .find(|l| l.contains("\"master_key\""))
        .expect("age output");
    let doc: Value = serde_json::from_str(line[line.find('{').unwrap()..].trim()).unwrap();
    doc["master_key"].as_str().unwrap().to_owned()
}

/// Every cell of every table of vault.db, one JSON line each: {table, column, text, hex}.
fn dump_db(v: &TestVault) -> Vec<Value> {
    let probe = r#"
import json, sys, sqlcipher3
c = sqlcipher3.connect(sys.argv[1])
c.execute('PRAGMA key = "x\'%s\'"' % sys.argv[2])
c.execute('PRAGMA cipher_hmac_algorithm = HMAC_SHA256')
tables = [r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
for t in tables:
    cur = c.execute('SELECT * FROM "%s"' % t)
    cols = [d[0] for d in cur.description]
    for row in cur:
        for col, val in zip(cols, row):
            if isinstance(val, bytes):
                text, hx = val.decode('latin-1'), val.hex()
            else:
                text, hx = str(val), str(val).encode().hex()
            print(json.dumps({"table": t, "column": col, "text": text, "hex": hx}))
"#;
    let o = std::process::Command::new(python())
        .args(["-c", probe])
        .arg(v.vault_dir().join("vault.db"))
        .arg(master_key(v))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn add_http(v: &mut TestVault, name: &str, host: &str, auth: &[&str], secret: &str) {
    let mut args = vec!["add", "http", name, "--host", host];
    args.extend_from_slice(auth);
    args.extend_from_slice(&["--secret-stdin", "--approval", "never"]);
    v.run_pp(&args, Some(&format!("{secret}\n"))).ok();
}

#[test]
fn no_form_of_any_decoy_reaches_any_output_log_journal_column_or_file() {
    let t = HttpTarget::start("unused");
    let mut v = TestVault::init("leak-sweep");
    let base = t.base();
    add_http(&mut v, "bearer", &base, &["--bearer"], BEARER);
    add_http(&mut v, "basic", &base, &["--basic", "bot"], BASIC);
    add_http(
        &mut v,
        "header",
        &base,
        &["--header", "X-Api-Key", "--format", "Token {secret}"],
        HEADER,
    );
    add_http(&mut v, "query", &base, &["--query", "api_key"], QUERY);
    // SSH credentials hold decoys too (no SSH action runs here: only storage is swept).
    let host_key = format!("SHA256:{}", "A".repeat(43));
    v.run_pp(
        &[
            "add",
            "ssh",
            "sshpw",
            "--host",
            "127.0.0.1",
            "--user",
            "deploy",
            "--password-stdin",
            "--host-key",
            &host_key,
        ],
        Some(&format!("{SSH_PASSWORD}\n")),
    )
    .ok();
    let keys = TempDir::new("leak-key");
    let key_file = keys.path().join("id_ed25519");
    let kg = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "decoy", "-f"])
        .arg(&key_file)
        .status()
        .expect("ssh-keygen (openssh-client)");
    assert!(kg.success());
    v.run_pp(
        &[
            "add",
            "ssh",
            "sshkey",
            "--host",
            "127.0.0.1",
            "--user",
            "deploy",
            "--key-file",
            key_file.to_str().unwrap(),
            "--host-key",
            &host_key,
        ],
        None,
    )
    .ok();
    let pem = std::fs::read_to_string(&key_file).unwrap();
    let key_line = pem
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .max_by_key(|l| l.len())
        .unwrap()
        .to_owned();

    // The agent holds the secrets and runs the executors: it logs at trace into agent.log (one
    // of the files swept below), as `vault mcp` does on its stderr.
    v.restart_agent_logging("trace");
    let mut cmd = v.command(&["mcp"]);
    cmd.env("VAULT_LOG", "trace");
    let mut p = McpProc::spawn(cmd);
    p.initialize();
    let mut id = 0;
    let mut results = Vec::new();
    for kind in ["bearer", "basic", "header", "query"] {
        for path in ["/forms", "/forms.json", "/cut"] {
            id += 1;
            let r = p.call(
                id,
                "http_request",
                json!({"credential": kind, "method": "GET", "url": format!("{base}{path}?kind={kind}"), "wait_s": 20}),
            );
            let sc = &r["result"]["structuredContent"];
            assert_eq!(sc["state"], "completed", "{kind} {path}: {r}");
            assert_eq!(
                sc["http"]["status"], 200,
                "the target got the {kind} secret: {r}"
            );
            results.push(r);
        }
    }
    // The echoes were really there, and really replaced.
    let forms_text = results[0]["result"]["structuredContent"]["http"]["body"]["untrusted_text"]
        .as_str()
        .unwrap();
    assert!(
        forms_text.matches("[REDACTED:bearer]").count() >= 20,
        "{forms_text}"
    );
    assert_eq!(
        results[1]["result"]["structuredContent"]["http"]["body"]["untrusted_json"]["raw"],
        "[REDACTED:bearer]"
    );
    let seen = p.seen.join("\n");
    let (code, rest, stderr) = p.finish(Duration::from_secs(10));
    assert_eq!(code, 0);
    assert!(
        !stderr.trim().is_empty(),
        "VAULT_LOG=trace wrote nothing to stderr, so its scan would prove nothing"
    );
    let agent_log = std::fs::read_to_string(v.vault_dir().join("agent.log")).unwrap_or_default();
    assert!(
        agent_log.contains("TRACE") || agent_log.contains("DEBUG"),
        "the agent logged at trace into agent.log, so its scan proves something: {agent_log}"
    );

    let mut decoys: Vec<(&str, Vec<u8>)> = vec![
        ("bearer", BEARER.into()),
        ("basic", BASIC.into()),
        ("header template", HEADER.into()),
        ("query", QUERY.into()),
        ("ssh password", SSH_PASSWORD.into()),
    ];
    let everything: Vec<(String, Vec<u8>)> = {
        let export = v.dir.path().join("export.jsonl");
        v.run(&["export-audit", export.to_str().unwrap()], None)
            .ok();
        let log = v.run(&["log", "--json"], None).ok();
        assert!(log.stdout.contains("/forms.json"), "{}", log.stdout);
        let mut all = vec![
            (
                "tool results and vault mcp stdout".to_owned(),
                format!("{seen}\n{}", rest.join("\n")).into_bytes(),
            ),
            (
                "vault mcp stderr at VAULT_LOG=trace".to_owned(),
                stderr.into_bytes(),
            ),
            ("vault log --json".to_owned(), log.stdout.into_bytes()),
            (
                "vault export-audit".to_owned(),
                std::fs::read(&export).unwrap(),
            ),
        ];
        for f in files_under(&v.vault_dir()) {
            all.push((f.display().to_string(), std::fs::read(&f).unwrap()));
        }
        all.push((
            "every CLI run".to_owned(),
            v.transcript.join("\n").into_bytes(),
        ));
        all
    };
    // The target received every HTTP secret, as the vault sends it.
    let reqs = t.requests();
    let header = |r: &Value, h: &str| r["headers"][h].as_str().unwrap_or_default().to_owned();
    assert!(reqs
        .iter()
        .any(|r| header(r, "authorization") == format!("Bearer {BEARER}")));
    let pair = base64::engine::general_purpose::STANDARD.encode(format!("bot:{BASIC}"));
    assert!(reqs
        .iter()
        .any(|r| header(r, "authorization") == format!("Basic {pair}")));
    assert!(reqs
        .iter()
        .any(|r| header(r, "x-api-key") == format!("Token {HEADER}")));
    let sent: String = url::form_urlencoded::byte_serialize(QUERY.as_bytes()).collect();
    assert!(reqs.iter().any(|r| r["path"]
        .as_str()
        .unwrap()
        .contains(&format!("api_key={sent}"))));

    // Every cell of vault.db: the secret column holds each decoy; no other column holds any form.
    let cells = dump_db(&v);
    let secrets: Vec<&Value> = cells
        .iter()
        .filter(|c| c["table"] == "credentials" && c["column"] == "secret")
        .collect();
    for (kind, s) in &decoys {
        assert!(
            secrets.iter().any(|c| c["hex"] == hex::encode(s)),
            "the dump did not find the {kind} secret in credentials.secret, so it proves nothing"
        );
    }
    decoys.push(("ssh private key", key_line.clone().into_bytes()));
    for c in &cells {
        if c["table"] == "credentials" && c["column"] == "secret" {
            continue;
        }
        let what = format!(
            "vault.db {}.{}",
            c["table"].as_str().unwrap(),
            c["column"].as_str().unwrap()
        );
        assert_clean(&what, c["text"].as_str().unwrap().as_bytes(), &decoys);
    }
    assert!(
        cells.iter().any(|c| c["table"] == "audit"),
        "the dump read the journal"
    );
    for (what, bytes) in &everything {
        assert_clean(what, bytes, &decoys);
    }
}
