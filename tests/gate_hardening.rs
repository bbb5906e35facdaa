//! What a hostile agent may ask for, through the real `vault mcp` against a recording loopback
//! target: path spellings that servers normalise out of the credential's prefix, headers and
//! parameters that rewrite the method or the path, proxies from the environment, and config
//! values out of range. Every refusal is proven by zero requests at the target and no action.
mod support;

use serde_json::{json, Value};
use std::process::Command;
use std::time::Duration;
use support::mcp::McpProc;
use support::target::HttpTarget;
use support::*;

const SECRET: &str = "DECOY_gate_tok_9b8f2a";

/// An HTTP credential with `--approval POLICY` (signed with the passphrase when not `each`).
fn add(v: &mut TestVault, name: &str, host: &str, approval: &str, extra: &[&str]) {
    let mut flags = vec!["--approval", approval];
    flags.extend_from_slice(extra);
    v.add_bearer_with(name, host, SECRET, &flags);
}

fn mcp(v: &TestVault) -> McpProc {
    let mut p = McpProc::spawn(v.command(&["mcp"]));
    p.initialize();
    p
}

fn call(p: &mut McpProc, id: i64, args: Value) -> Value {
    let r = p.call(id, "http_request", args);
    assert!(r.get("error").is_none(), "JSON-RPC error: {r}");
    r["result"].clone()
}

#[track_caller]
fn assert_refused(r: &Value, what: &str) {
    let sc = &r["structuredContent"];
    assert_eq!(r["isError"], true, "{what} was accepted: {r}");
    assert!(
        sc.get("action_id").is_none(),
        "{what} became an action: {r}"
    );
    let code = sc["error"]["code"].as_str().unwrap_or_default();
    assert!(
        matches!(code, "policy_denied" | "invalid_argument"),
        "{what}: refused as {code:?}: {r}"
    );
}

/// Spellings of "leave /v1/" that Tomcat, Spring, nginx, IIS or a proxy in front of them
/// normalise: each must be refused before an action exists.
const TRAVERSALS: &[&str] = &[
    "/v1/..;/admin",
    "/v1/..;/../admin",
    "/v1/x;jsessionid=1/../../admin",
    "/v1;/admin",
    "/v1/%252e%252e/admin",
    "/v1/%252e%252e%252fadmin",
    "/v1/%25%32%65%25%32%65/admin",
    "/v1/%c0%ae%c0%ae/admin",
    "/v1/%C0%AE%C0%AE/admin",
    "/v1/%e0%80%ae%e0%80%ae/admin",
    "/v1/..%c0%afadmin",
    "/v1/..%c1%9cadmin",
    "/v1/%u002e%u002e/admin",
    "/v1/%u002e%u002e%u2215admin",
    "/v1/%uff0e%uff0e/admin",
    "/v1/..%2fadmin",
    "/v1/..%2Fadmin",
    "/v1/%2e%2e/admin",
    "/v1/%2E%2E/admin",
    "/v1/.%2e/admin",
    "/v1/%2e./admin",
    "/v1/..\\admin",
    "/v1/x\\..\\..\\admin",
    "/v1/..%5cadmin",
    "/v1/..%5Cadmin",
    "/v1/..%255cadmin",
    "/v1/./admin",
    "/v1/x/./../../admin",
    "/v1/../admin",
    "/v1//admin",
    "/v1/....//admin",
    "/v1/\u{ff0e}\u{ff0e}/admin",
    "/v1/%ef%bc%8e%ef%bc%8e/admin",
    "/v1/\u{2024}\u{2024}/admin",
    "/v1/..%00/admin",
    "/v1/%00/../admin",
    "/v1/admin%2f",
    "/v1/%2f",
    "/v1/%2e",
    "/v1/x/..",
    "/v1/ ../admin",
    "/v1/%20/../admin",
    "/v1/%3b/admin",
    "/v1/%",
    "/v1/%zz",
];

#[test]
fn path_traversal_spellings_are_refused_before_any_action_exists() {
    let t = HttpTarget::start(SECRET);
    let mut v = TestVault::init("gate-paths");
    add(
        &mut v,
        "api",
        &t.base(),
        "never",
        &["--path-prefix", "/v1/"],
    );
    let mut p = mcp(&v);
    for (i, path) in TRAVERSALS.iter().enumerate() {
        let url = format!("{}{path}", t.base());
        let r = call(
            &mut p,
            100 + i as i64,
            json!({"credential": "api", "method": "GET", "url": url, "wait_s": 5}),
        );
        assert_refused(&r, &url);
    }
    assert!(
        t.requests().is_empty(),
        "the target received {:?}",
        t.requests()
    );
    // The same credential still reaches its own prefix (the target is really there).
    let ok = call(
        &mut p,
        1,
        json!({"credential": "api", "method": "GET", "url": format!("{}/v1/items/a%20b", t.base()), "wait_s": 5}),
    );
    assert_eq!(ok["structuredContent"]["state"], "completed", "{ok}");
    let reqs = t.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0]["path"], "/v1/items/a%20b");
    p.finish(Duration::from_secs(10));
}

/// The agent's tricks for turning a GET into a DELETE, or one path into another, behind a
/// framework (Rails, Laravel, Spring, Symfony) or a proxy that honours them.
fn rewriting_requests(base: &str) -> Vec<Value> {
    let url = format!("{base}/v1/items/42");
    let mut out: Vec<Value> = [
        "X-HTTP-Method-Override",
        "x-http-method",
        "X-Method-Override",
        "X-Original-URL",
        "X-Rewrite-URL",
        "X-Forwarded-For",
        "X-Forwarded-Host",
        "X-Forwarded-Prefix",
        "Forwarded",
    ]
    .iter()
    .map(|h| json!({"url": url, "headers": {*h: "DELETE"}}))
    .collect();
    out.push(json!({"url": url, "query": {"_method": "DELETE"}}));
    out.push(json!({"url": format!("{url}?_method=DELETE")}));
    out.push(json!({"url": format!("{url}?a=1&%5Fmethod=DELETE")}));
    out.push(json!({"url": format!("{url}?_METHOD=delete")}));
    out
}

#[test]
fn rewriting_headers_and_method_parameters_are_refused_unless_the_credential_allows_them() {
    let t = HttpTarget::start(SECRET);
    let mut v = TestVault::init("gate-rewrite");
    add(
        &mut v,
        "api",
        &t.base(),
        "writes",
        &["--path-prefix", "/v1/"],
    );
    let mut p = mcp(&v);
    // Found: `GET /v1/items/42?_method=DELETE` with the override header ran with no card.
    let found = call(
        &mut p,
        1,
        json!({"credential": "api", "method": "GET", "url": format!("{}/v1/items/42?_method=DELETE", t.base()),
               "headers": {"X-HTTP-Method-Override": "DELETE"}, "wait_s": 5}),
    );
    assert_refused(&found, "GET ?_method=DELETE with X-HTTP-Method-Override");
    for (i, extra) in rewriting_requests(&t.base()).into_iter().enumerate() {
        let mut args = json!({"credential": "api", "method": "GET", "wait_s": 5});
        for (k, val) in extra.as_object().unwrap() {
            args[k] = val.clone();
        }
        let r = call(&mut p, 10 + i as i64, args.clone());
        assert_refused(&r, &args.to_string());
    }
    assert!(t.requests().is_empty(), "sent: {:?}", t.requests());
    let pending = v.run(&["pending", "--json"], None).ok();
    assert_eq!(pending.stdout.trim(), "[]");

    // A credential that explicitly allows the override: accepted, but under `writes` a GET that
    // carries it (or a body) is a write and waits for a card; a plain GET runs.
    v.run_pp(
        &[
            "edit",
            "api",
            "--allow-header",
            "X-HTTP-Method-Override",
            "--allow-header",
            "_method",
        ],
        None,
    )
    .ok();
    let listed = v.run(&["list", "--json"], None).ok();
    assert!(
        listed.stdout.contains("x-http-method-override"),
        "{}",
        listed.stdout
    );
    let base = t.base();
    for (i, args) in [
        json!({"url": format!("{base}/v1/items/42"), "headers": {"X-HTTP-Method-Override": "DELETE"}}),
        json!({"url": format!("{base}/v1/items/42"), "query": {"_method": "DELETE"}}),
        json!({"url": format!("{base}/v1/items/42?_method=DELETE")}),
        json!({"url": format!("{base}/v1/items/42"), "body": "delete=1"}),
    ]
    .into_iter()
    .enumerate()
    {
        let mut a = json!({"credential": "api", "method": "GET", "wait_s": 1});
        for (k, val) in args.as_object().unwrap() {
            a[k] = val.clone();
        }
        let r = call(&mut p, 50 + i as i64, a.clone());
        assert_eq!(
            r["structuredContent"]["state"], "pending",
            "{a} must wait for a card under `writes`: {r}"
        );
    }
    // Still refused: a rewriting header the credential did not allow.
    let r = call(
        &mut p,
        60,
        json!({"credential": "api", "method": "GET", "url": format!("{base}/v1/x"), "headers": {"X-Original-URL": "/admin"}, "wait_s": 1}),
    );
    assert_refused(
        &r,
        "X-Original-URL on a credential that allows only the method override",
    );
    assert!(t.requests().is_empty(), "sent: {:?}", t.requests());
    let plain = call(
        &mut p,
        61,
        json!({"credential": "api", "method": "GET", "url": format!("{base}/v1/items/42"), "wait_s": 5}),
    );
    assert_eq!(plain["structuredContent"]["state"], "completed", "{plain}");
    assert_eq!(t.requests().len(), 1);
    p.finish(Duration::from_secs(10));
}

#[test]
fn proxies_from_the_environment_are_ignored() {
    let t = HttpTarget::start(SECRET);
    let proxy = HttpTarget::start(SECRET);
    let mut v = TestVault::init("gate-proxy");
    add(&mut v, "api", &t.base(), "never", &[]);
    let mut cmd = v.command(&["mcp"]);
    let via = format!("http://user:pw@127.0.0.1:{}", proxy.port);
    for k in [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ] {
        cmd.env(k, &via);
    }
    cmd.env_remove("NO_PROXY").env_remove("no_proxy");
    let mut p = McpProc::spawn(cmd);
    p.initialize();
    let r = call(
        &mut p,
        1,
        json!({"credential": "api", "method": "GET", "url": format!("{}/echo?via=direct", t.base()), "wait_s": 10}),
    );
    assert_eq!(r["structuredContent"]["state"], "completed", "{r}");
    assert!(
        proxy.requests().is_empty(),
        "the proxy from the environment received {:?}",
        proxy.requests()
    );
    let reqs = t.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0]["path"], "/echo?via=direct");
    assert!(reqs[0]["headers"].get("proxy-authorization").is_none());
    p.finish(Duration::from_secs(10));
}

/// An address added to the loopback interface for one test (root), removed when dropped.
struct OnLoopback(&'static str);

impl OnLoopback {
    fn add(addr: &'static str) -> Self {
        let out = Command::new("ip")
            .args([
                "-6",
                "addr",
                "add",
                &format!("{addr}/128"),
                "dev",
                "lo",
                "nodad",
            ])
            .output()
            .expect("ip (iproute2)");
        assert!(out.status.success(), "ip addr add {addr}: {out:?}");
        Self(addr)
    }
}

impl Drop for OnLoopback {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["-6", "addr", "del", &format!("{}/128", self.0), "dev", "lo"])
            .output();
    }
}

#[test]
fn a_nat64_address_counts_as_the_ipv4_address_it_embeds() {
    if !support::uid::is_root() {
        assert!(
            std::env::var_os("AV_SKIP_ROOT_TESTS").is_some(),
            "this test puts the NAT64 addresses on the loopback interface and needs root (CI runs it as root); set AV_SKIP_ROOT_TESTS=1 to skip it on purpose"
        );
        eprintln!("skipped on purpose (AV_SKIP_ROOT_TESTS): adding addresses needs root");
        return;
    }
    // Each address is made real, here, with a listener on 443 that counts: a guard that let the
    // request through would be seen arriving, not inferred from a message.
    let mut staged = Vec::new();
    let mut counts = Vec::new();
    for addr in ["64:ff9b::a9fe:a9fe", "64:ff9b:1::a9fe:a9fe"] {
        staged.push(OnLoopback::add(addr));
        let l = std::net::TcpListener::bind(format!("[{addr}]:443")).unwrap();
        let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let h = hits.clone();
        std::thread::spawn(move || {
            for _ in l.incoming() {
                h.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        });
        // The control: the address answers a direct connection. The kernel installs an added
        // address's local route from a work queue, so on a loaded machine the first connect
        // can find "network unreachable" for a moment: wait for the route, then go on.
        let t0 = std::time::Instant::now();
        while let Err(e) = std::net::TcpStream::connect(format!("[{addr}]:443")) {
            assert!(
                t0.elapsed() < Duration::from_secs(5),
                "[{addr}]:443 never answered a direct connection: {e}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        counts.push((addr, hits));
    }
    let wait_count = |hits: &std::sync::atomic::AtomicUsize, n: usize| {
        let t0 = std::time::Instant::now();
        while hits.load(std::sync::atomic::Ordering::SeqCst) < n
            && t0.elapsed() < Duration::from_secs(5)
        {
            std::thread::sleep(Duration::from_millis(10));
        }
        hits.load(std::sync::atomic::Ordering::SeqCst)
    };
    for (addr, hits) in &counts {
        assert_eq!(wait_count(hits, 1), 1, "the control did not reach {addr}");
    }
    let mut v = TestVault::init("gate-nat64");
    // 169.254.169.254 (cloud metadata) behind the well-known NAT64 prefix and the local-use one.
    for (name, host) in [
        ("wkp", "https://[64:ff9b::a9fe:a9fe]"),
        ("local", "https://[64:ff9b:1::a9fe:a9fe]"),
    ] {
        add(&mut v, name, host, "never", &[]);
    }
    let mut p = mcp(&v);
    for (i, (name, url)) in [
        ("wkp", "https://[64:ff9b::a9fe:a9fe]/latest/meta-data/"),
        ("local", "https://[64:ff9b:1::a9fe:a9fe]/latest/meta-data/"),
    ]
    .iter()
    .enumerate()
    {
        let r = call(
            &mut p,
            1 + i as i64,
            json!({"credential": name, "method": "GET", "url": url, "wait_s": 10}),
        );
        assert_eq!(r["structuredContent"]["state"], "failed_before_send", "{r}");
        let text = r["content"][0]["text"].as_str().unwrap();
        assert!(
            text.contains("cloud metadata"),
            "{url} must be refused by the guard as metadata, not tried: {text}"
        );
    }
    p.finish(Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(300));
    for (addr, hits) in &counts {
        assert_eq!(
            hits.load(std::sync::atomic::Ordering::SeqCst),
            1,
            "the vault connected to {addr} (only the control did)"
        );
    }
    drop(staged);
}

#[test]
fn config_values_out_of_range_are_named_with_their_range_and_nothing_panics() {
    let t = HttpTarget::start(SECRET);
    let mut v = TestVault::init("gate-config");
    add(&mut v, "api", &t.base(), "each", &[]);
    let config = v.vault_dir().join("config.toml");
    // Found: this value panicked at the first tool call and poisoned the session.
    std::fs::write(
        &config,
        "[approvals]\nexpiry_seconds = 9223372036854775807\n",
    )
    .unwrap();
    let mut p = McpProc::spawn(v.command(&["mcp"]));
    p.send(&json!({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}));
    p.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "http_request", "arguments": {"credential": "api", "method": "POST", "url": format!("{}/x", t.base()), "wait_s": 1}}}));
    let (code, _, stderr) = p.finish(Duration::from_secs(10));
    assert_ne!(code, 0, "vault mcp ran with an unusable config: {stderr}");
    assert!(
        stderr.contains("expiry_seconds") && stderr.contains("1..=604800"),
        "the error names the key and its range: {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(t.requests().is_empty());

    for (text, key, range) in [
        (
            "[approvals]\nexpiry_seconds = 0\n",
            "expiry_seconds",
            "1..=604800",
        ),
        (
            "[approvals]\nwait_seconds = -5\n",
            "wait_seconds",
            "0..=120",
        ),
        (
            "[approvals]\nwait_seconds = \"soon\"\n",
            "wait_seconds",
            "0..=120",
        ),
        (
            "[approvals]\nsession_grant_seconds = 9999999999\n",
            "session_grant_seconds",
            "1..=86400",
        ),
        (
            "[approvals]\nreplay_window_seconds = 1e9\n",
            "replay_window_seconds",
            "0..=86400",
        ),
        (
            "[limits]\nshutdown_grace_seconds = 100000\n",
            "shutdown_grace_seconds",
            "0..=300",
        ),
        (
            "[limits]\noutput_retained_process_bytes = 9223372036854775807\n",
            "output_retained_process_bytes",
            "1..=1073741824",
        ),
        (
            "[limits]\nstderr_agent_excerpt_bytes = 0\n",
            "stderr_agent_excerpt_bytes",
            "1..=",
        ),
        ("[limits]\nnot_a_key = 1\n", "not_a_key", "unknown"),
        ("[nope]\nx = 1\n", "nope", "unknown"),
    ] {
        std::fs::write(&config, text).unwrap();
        let r = v.run(&["doctor"], None).code(1);
        let out = format!("{}{}", r.stdout, r.stderr);
        assert!(
            out.contains(key) && out.contains(range),
            "{text:?}: doctor must name {key} and {range}: {out}"
        );
        assert!(!out.contains("panicked"), "{out}");
    }
    std::fs::write(
        &config,
        "[approvals]\nexpiry_seconds = 604800\nwait_seconds = 0\n",
    )
    .unwrap();
    let r = v.run(&["doctor"], None);
    assert!(r.stdout.contains("config.toml"), "{}", r.stdout);
    assert!(!r.stdout.contains("not valid"), "{}", r.stdout);
}
