//! The HTTP executor through the real binary: a signed `--approval never` credential bound to one
//! loopback target (A) and a second recording target (B). The credential reaches A and nothing
//! else; redirects are returned, not followed; echoed secrets are scrubbed everywhere; a 20 MiB
//! body is counted but not kept; TLS trusts only the credential's CA; each outcome state is the
//! truth about what left the machine.
mod support;

use serde_json::{json, Value};
use std::time::Duration;
use support::mcp::McpProc;
use support::target::{ClosedPort, HttpTarget};
use support::tls::TestCa;
use support::*;

/// Contains '/', '+', '=', '&' so that its base64 and percent-encoded forms differ from it.
const SECRET: &str = "DECOY_http/tok+41aa=9e&0c77";
const BASIC_USER: &str = "bot";

/// Adds an HTTP bearer credential with `--approval never`, signed with the passphrase.
fn add_never(v: &mut TestVault, name: &str, host: &str, extra: &[&str]) {
    add_never_auth(v, name, host, &["--bearer"], extra);
}

/// The same with another injection (`--query P`, `--basic USER`).
fn add_never_auth(v: &mut TestVault, name: &str, host: &str, auth: &[&str], extra: &[&str]) {
    let mut args = vec!["add", "http", name, "--host", host];
    args.extend_from_slice(auth);
    args.extend_from_slice(&["--secret-stdin", "--approval", "never"]);
    args.extend_from_slice(extra);
    v.run_pp(&args, Some(&format!("{SECRET}\n"))).ok();
}

fn mcp(v: &TestVault, log: bool) -> McpProc {
    let mut cmd = v.command(&["mcp"]);
    if log {
        cmd.env("VAULT_LOG", "trace");
    }
    let mut p = McpProc::spawn(cmd);
    p.initialize();
    p
}

/// One `http_request` call; returns the tool result (`isError`, `structuredContent`, `content`).
fn http(p: &mut McpProc, id: i64, credential: &str, url: &str, extra: Value) -> Value {
    let mut args = json!({"credential": credential, "method": "GET", "url": url, "wait_s": 20});
    for (k, val) in extra.as_object().unwrap() {
        args[k] = val.clone();
    }
    let r = p.call(id, "http_request", args);
    assert!(r.get("error").is_none(), "JSON-RPC error for {url}: {r}");
    r["result"].clone()
}

fn percent_forms(s: &str) -> [String; 2] {
    let mut upper = String::new();
    for c in s.bytes() {
        if c.is_ascii_alphanumeric() || b"-._~".contains(&c) {
            upper.push(c as char);
        } else {
            upper.push_str(&format!("%{c:02X}"));
        }
    }
    let lower = upper
        .split('%')
        .enumerate()
        .map(|(i, part)| {
            if i == 0 {
                part.to_owned()
            } else {
                format!("{}{}", part[..2].to_ascii_lowercase(), &part[2..])
            }
        })
        .collect::<Vec<_>>()
        .join("%");
    [upper, lower]
}

/// `assert_no_leak` plus the percent-encoded forms the target echoes and the basic-auth pair.
#[track_caller]
fn assert_clean(what: &str, bytes: &[u8]) {
    use base64::Engine;
    assert_no_leak(what, bytes, SECRET);
    let pair = base64::engine::general_purpose::STANDARD.encode(format!("{BASIC_USER}:{SECRET}"));
    for form in percent_forms(SECRET)
        .into_iter()
        .chain([pair.trim_end_matches('=').to_owned()])
    {
        let found = bytes.windows(form.len()).any(|w| w == form.as_bytes());
        assert!(
            !found,
            "{what} contains the secret percent-encoded ({form})"
        );
    }
}

#[test]
fn the_credential_reaches_its_own_target_and_nothing_else() {
    let a = HttpTarget::start(SECRET);
    let b = HttpTarget::start(SECRET);
    let mut v = TestVault::init("http-bind");
    add_never(&mut v, "api", &a.base(), &[]);
    let mut p = mcp(&v, false);
    let (pa, pb) = (a.port, b.port);

    let ok = http(
        &mut p,
        1,
        "api",
        &format!("{}/echo?n=1", a.base()),
        json!({}),
    );
    assert_eq!(ok["isError"], false, "{ok}");
    assert_eq!(ok["structuredContent"]["state"], "completed");
    let reqs = a.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(
        reqs[0]["headers"]["authorization"],
        format!("Bearer {SECRET}")
    );

    let refused = [
        // The other target, by name and by every spelling of its address.
        format!("http://127.0.0.1:{pb}/echo"),
        format!("http://localhost:{pb}/echo"),
        format!("http://2130706433:{pb}/echo"),
        format!("http://0177.0.0.1:{pb}/echo"),
        format!("http://0x7f.0.0.1:{pb}/echo"),
        format!("http://0x7f000001:{pb}/echo"),
        format!("http://017700000001:{pb}/echo"),
        format!("http://127.1:{pb}/echo"),
        format!("http://[::ffff:127.0.0.1]:{pb}/echo"),
        format!("http://[::ffff:7f00:1]:{pb}/echo"),
        format!("http://[::1]:{pb}/echo"),
        // A's port on other hosts and addresses.
        format!("http://localhost:{pa}/echo"),
        format!("http://0.0.0.0:{pa}/echo"),
        format!("http://127.0.0.2:{pa}/echo"),
        format!("http://[::1]:{pa}/echo"),
        format!("http://example.com:{pa}/echo"),
        format!("http://127.0.0.1.nip.io:{pa}/echo"),
        // User info tricks: the real host is after the '@'.
        format!("http://127.0.0.1:{pa}@127.0.0.1:{pb}/echo"),
        format!("http://127.0.0.1%3A{pa}@127.0.0.1:{pb}/echo"),
        format!("http://user:pw@127.0.0.1:{pa}/echo"),
        format!("http://127.0.0.1:{pb}\\@127.0.0.1:{pa}/echo"),
        // Cloud metadata in any spelling.
        "http://169.254.169.254/latest/meta-data/".to_owned(),
        format!("http://169.254.169.254:{pa}/latest/meta-data/"),
        "http://2852039166/latest/meta-data/".to_owned(),
        "http://0xa9fea9fe/latest/meta-data/".to_owned(),
        "http://0251.0376.0251.0376/latest/meta-data/".to_owned(),
        "http://[::ffff:169.254.169.254]/latest/meta-data/".to_owned(),
        "http://[::ffff:a9fe:a9fe]/latest/meta-data/".to_owned(),
        "http://[fd00:ec2::254]/latest/meta-data/".to_owned(),
        // Other schemes, same host and port.
        format!("https://127.0.0.1:{pa}/echo"),
        format!("ftp://127.0.0.1:{pa}/echo"),
        format!("gopher://127.0.0.1:{pa}/_GET%20/echo"),
        format!("ws://127.0.0.1:{pa}/echo"),
        "file:///etc/passwd".to_owned(),
        // Not absolute.
        format!("//127.0.0.1:{pb}/echo"),
        "/echo".to_owned(),
    ];
    for (i, url) in refused.iter().enumerate() {
        let r = http(&mut p, 100 + i as i64, "api", url, json!({}));
        assert_eq!(r["isError"], true, "{url} was not refused: {r}");
        let sc = &r["structuredContent"];
        assert!(
            sc.get("http").is_none(),
            "{url}: an HTTP result for a refused URL: {r}"
        );
        let code = sc["error"]["code"].as_str().unwrap_or_default();
        assert!(
            matches!(code, "policy_denied" | "invalid_argument"),
            "{url}: refused with {code:?}, not as a policy refusal: {r}"
        );
        assert!(
            sc.get("action_id").is_none(),
            "{url}: a refused URL became an action: {r}"
        );
    }
    assert!(b.requests().is_empty(), "B received {:?}", b.requests());
    assert_eq!(a.requests().len(), 1, "A counts only the legit call");

    // A's own address spelled as IPv4-mapped IPv6 is A (the policy normalizes it): it is sent to
    // 127.0.0.1, as 127.0.0.1.
    let mapped = http(
        &mut p,
        3,
        "api",
        &format!("http://[::ffff:127.0.0.1]:{pa}/echo?n=mapped"),
        json!({}),
    );
    assert_eq!(
        mapped["structuredContent"]["state"], "completed",
        "{mapped}"
    );
    let reqs = a.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[1]["path"], "/echo?n=mapped");
    assert_eq!(reqs[1]["headers"]["host"], format!("127.0.0.1:{pa}"));
    assert!(b.requests().is_empty());

    // A redirect from A to B is the agent's to see, not the executor's to follow.
    let to_b = format!("http://127.0.0.1:{pb}/echo?from=redirect");
    let r = http(
        &mut p,
        2,
        "api",
        &format!("{}/redirect?to={}", a.base(), urlencode(&to_b)),
        json!({}),
    );
    let sc = &r["structuredContent"];
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(sc["state"], "completed", "{r}");
    assert_eq!(sc["http"]["status"], 302, "{r}");
    assert_eq!(
        sc["http"]["headers"]["untrusted_headers"]["location"],
        to_b.as_str(),
        "{r}"
    );
    assert!(b.requests().is_empty(), "B received {:?}", b.requests());
    assert_eq!(a.requests().len(), 3);
    p.finish(Duration::from_secs(10));
}

fn urlencode(s: &str) -> String {
    percent_forms(s)[0].clone()
}

#[test]
fn an_echoed_secret_appears_in_no_output_log_journal_or_file() {
    let a = HttpTarget::start(SECRET);
    let mut v = TestVault::init("http-leak");
    add_never(&mut v, "api", &a.base(), &[]);
    add_never_auth(&mut v, "q", &a.base(), &["--query", "api_key"], &[]);
    add_never_auth(&mut v, "basic", &a.base(), &["--basic", BASIC_USER], &[]);
    let mut p = mcp(&v, true);
    let leak = http(&mut p, 1, "api", &format!("{}/leak", a.base()), json!({}));
    let echo = http(
        &mut p,
        2,
        "api",
        &format!("{}/echo", a.base()),
        json!({"method": "POST", "json": {"hello": "world"}}),
    );
    // The secret as a query parameter and inside basic auth, echoed back the same way.
    let query = http(&mut p, 3, "q", &format!("{}/echo?x=1", a.base()), json!({}));
    let basic = http(&mut p, 4, "basic", &format!("{}/echo", a.base()), json!({}));
    let reqs = a.requests();
    assert_eq!(reqs.len(), 4, "every call reached A");
    assert!(reqs[..2]
        .iter()
        .all(|r| r["headers"]["authorization"] == format!("Bearer {SECRET}")));
    assert!(
        reqs[2]["path"]
            .as_str()
            .unwrap()
            .contains(&format!("api_key={}", urlencode(SECRET))),
        "{}",
        reqs[2]
    );
    assert!(reqs[3]["headers"]["authorization"]
        .as_str()
        .unwrap()
        .starts_with("Basic "));
    assert_eq!(
        query["structuredContent"]["http"]["body"]["untrusted_json"]["query"]["api_key"][0],
        "[REDACTED:q]",
        "{query}"
    );
    assert_eq!(
        basic["structuredContent"]["http"]["body"]["untrusted_json"]["headers"]["authorization"],
        "Basic [REDACTED:basic]",
        "{basic}"
    );
    // The target really echoed it; the agent got the marker instead.
    assert_eq!(leak["structuredContent"]["state"], "completed", "{leak}");
    let text = leak["structuredContent"]["http"]["body"]["untrusted_text"]
        .as_str()
        .unwrap_or_else(|| panic!("{leak}"));
    assert!(text.matches("[REDACTED:api]").count() >= 4, "{text}");
    assert!(
        leak["structuredContent"]["http"]["headers"]["untrusted_headers"]["location"]
            .as_str()
            .unwrap()
            .contains("[REDACTED:api]")
    );
    assert_eq!(
        echo["structuredContent"]["http"]["body"]["untrusted_json"]["headers"]["authorization"],
        "Bearer [REDACTED:api]",
        "{echo}"
    );
    for (what, r) in [
        ("/leak", &leak),
        ("/echo", &echo),
        ("query /echo", &query),
        ("basic /echo", &basic),
    ] {
        assert_clean(&format!("tool result of {what}"), r.to_string().as_bytes());
    }
    let seen = p.seen.join("\n");
    let (code, rest, stderr) = p.finish(Duration::from_secs(10));
    assert_eq!(code, 0);
    assert_clean(
        "vault mcp stdout",
        format!("{seen}\n{}", rest.join("\n")).as_bytes(),
    );
    assert!(
        !stderr.trim().is_empty(),
        "VAULT_LOG=trace wrote nothing to stderr, so the scan would prove nothing"
    );
    assert_clean("vault mcp stderr (VAULT_LOG=trace)", stderr.as_bytes());

    let export = v.dir.path().join("audit-export.jsonl");
    v.run(&["export-audit", export.to_str().unwrap()], None)
        .ok();
    let journal = std::fs::read(&export).unwrap();
    assert!(
        String::from_utf8_lossy(&journal).contains("action.completed"),
        "the export holds the actions"
    );
    assert_clean("vault export-audit", &journal);
    let log = v.run(&["log", "--json"], None).ok();
    assert!(log.stdout.contains("/leak"), "{}", log.stdout);
    assert_clean("vault log --json", log.stdout.as_bytes());
    assert_clean("vault log stderr", log.stderr.as_bytes());
    let files = files_under(&v.vault_dir());
    assert!(!files.is_empty());
    for f in files {
        assert_clean(&f.display().to_string(), &std::fs::read(&f).unwrap());
    }
    assert_clean("every CLI run", v.transcript.join("\n").as_bytes());
}

#[test]
fn a_20_mib_body_is_counted_not_kept() {
    let a = HttpTarget::start(SECRET);
    let mut v = TestVault::init("http-big");
    add_never(&mut v, "api", &a.base(), &[]);
    let agent = v.agent_pid().expect("the vault agent runs");
    let mut p = mcp(&v, false);
    let max = 10_000;
    let r = http(
        &mut p,
        1,
        "api",
        &format!("{}/big?mb=20", a.base()),
        json!({"max_output_bytes": max, "timeout_s": 60}),
    );
    // The agent runs the executor: read its peak once it has handled the whole body.
    let hwm = support::ssh::vm_hwm_kib(agent);
    eprintln!("vault agent peak RSS (VmHWM) after a 20 MiB body: {hwm} KiB");
    let sc = &r["structuredContent"];
    assert_eq!(sc["state"], "completed", "{r}");
    assert_eq!(sc["http"]["body_truncated"], true);
    assert_eq!(sc["http"]["body_bytes_seen"], 20 * 1024 * 1024);
    let text = sc["http"]["body"]["untrusted_text"].as_str().unwrap();
    assert!(
        !text.is_empty() && text.len() <= max,
        "returned {} bytes",
        text.len()
    );
    assert!(
        hwm < 64 * 1024,
        "the vault agent peaked at {hwm} KiB RSS for a 20 MiB body"
    );
    p.finish(Duration::from_secs(10));
}

#[test]
fn tls_trusts_only_the_credentials_ca() {
    let certs = TempDir::new("tls-ca");
    let ca = TestCa::create(certs.path());
    let t = HttpTarget::start_tls(SECRET, &ca.leaf_cert, &ca.leaf_key);
    assert!(t.base().starts_with("https://"));
    let mut v = TestVault::init("http-tls");
    let ca_file = ca.ca_cert.to_str().unwrap();
    add_never(&mut v, "trusted", &t.base(), &["--ca-file", ca_file]);
    add_never(&mut v, "untrusted", &t.base(), &[]);
    let mut p = mcp(&v, false);

    let no = http(
        &mut p,
        1,
        "untrusted",
        &format!("{}/echo?who=untrusted", t.base()),
        json!({}),
    );
    assert_eq!(no["isError"], true, "{no}");
    assert_eq!(
        no["structuredContent"]["state"], "failed_before_send",
        "{no}"
    );
    assert!(
        t.requests().is_empty(),
        "an HTTP request arrived over an untrusted TLS connection: {:?}",
        t.requests()
    );

    let yes = http(
        &mut p,
        2,
        "trusted",
        &format!("{}/echo?who=trusted", t.base()),
        json!({}),
    );
    assert_eq!(yes["isError"], false, "{yes}");
    assert_eq!(yes["structuredContent"]["state"], "completed", "{yes}");
    assert_eq!(yes["structuredContent"]["http"]["status"], 200);
    let reqs = t.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0]["path"], "/echo?who=trusted");
    assert_eq!(
        reqs[0]["headers"]["authorization"],
        format!("Bearer {SECRET}")
    );
    p.finish(Duration::from_secs(10));
}

#[test]
fn outcome_states_tell_what_left_the_machine() {
    let a = HttpTarget::start(SECRET);
    // A port nothing listens on, held for the test (no other test's server can take it).
    let closed_port = ClosedPort::new();
    let closed = closed_port.port;
    let mut v = TestVault::init("http-states");
    add_never(&mut v, "api", &a.base(), &[]);
    add_never(&mut v, "closed", &format!("http://127.0.0.1:{closed}"), &[]);
    let mut p = mcp(&v, false);

    let r500 = http(
        &mut p,
        1,
        "api",
        &format!("{}/status/500", a.base()),
        json!({}),
    );
    assert_eq!(r500["isError"], false, "a 500 is an answer: {r500}");
    assert_eq!(r500["structuredContent"]["state"], "completed");
    assert_eq!(r500["structuredContent"]["http"]["status"], 500);
    assert_eq!(a.requests().len(), 1);

    let refused = http(
        &mut p,
        2,
        "closed",
        &format!("http://127.0.0.1:{closed}/x"),
        json!({}),
    );
    assert_eq!(refused["isError"], true, "{refused}");
    assert_eq!(
        refused["structuredContent"]["state"], "failed_before_send",
        "{refused}"
    );

    let started = std::time::Instant::now();
    let slow = http(
        &mut p,
        3,
        "api",
        &format!("{}/slow?s=5", a.base()),
        json!({"timeout_s": 1}),
    );
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "the 1 s timeout was not applied ({:?})",
        started.elapsed()
    );
    assert_eq!(slow["isError"], true, "{slow}");
    assert_eq!(
        slow["structuredContent"]["state"], "indeterminate",
        "the request was sent, so the target may have acted: {slow}"
    );
    let reqs = a.requests();
    assert_eq!(reqs.len(), 2, "the slow request did arrive");
    assert_eq!(reqs[1]["path"], "/slow?s=5");
    p.finish(Duration::from_secs(10));
}
