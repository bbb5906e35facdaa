//! Nothing an agent writes can drive the person's terminal: control characters in request fields
//! are refused at submission (nothing queued, nothing sent), and agent-derived text that is
//! accepted (the client's self-reported name and version, summaries) reaches `vault pending`,
//! `vault log`, `vault sessions` and the approval card only as visible escapes.
mod support;

use serde_json::{json, Value};
use std::time::Duration;
use support::mcp::McpProc;
use support::target::HttpTarget;
use support::*;

const SECRET: &str = "DECOY_term_tok_5c1e0b";
/// Repaints the previous line, retitles the window, and reverses the text after it.
const EVIL_NAME: &str = "claude\r\u{1b}[2K\u{1b}[1Aok \u{202e}gpj.exe\u{9b}31m";
const EVIL_VERSION: &str = "1.0\u{1b}]0;pwned\u{7}\u{2066}";

/// Raw bytes that must never reach a terminal from agent text.
fn assert_inert(what: &str, out: &str) {
    for bad in [
        "\u{1b}[2K",
        "\u{1b}[1A",
        "\u{1b}]0;",
        "\u{7}",
        "\u{202e}",
        "\u{2066}",
        "\u{9b}",
        "\rok",
    ] {
        assert!(
            !out.contains(bad),
            "{what} printed {bad:?} raw:\n{}",
            out.escape_debug()
        );
    }
}

fn setup(tag: &str) -> (TestVault, HttpTarget, McpProc) {
    let target = HttpTarget::start(SECRET);
    let mut v = TestVault::init(tag);
    v.add_bearer("api", &target.base(), SECRET);
    let mut p = McpProc::spawn(v.command(&["mcp"]));
    p.request(
        json!("init"),
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {},
               "clientInfo": {"name": EVIL_NAME, "version": EVIL_VERSION}}),
    );
    p.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    (v, target, p)
}

fn wait_pending(v: &mut TestVault, n: usize) -> Vec<Value> {
    v.wait_pending(n)
}

#[test]
fn control_characters_in_request_fields_are_refused_before_anything_is_queued() {
    let (mut v, target, mut p) = setup("term-refuse");
    let base = target.base();
    let cases = [
        json!({"url": format!("{base}/v1/x\r\n\u{1b}[2K")}),
        json!({"url": format!("{base}/v1/x\t")}),
        json!({"url": format!("{base}/v1/x"), "query": {"q": "a\u{1b}[1Ab"}}),
        json!({"url": format!("{base}/v1/x"), "query": {"k\r": "v"}}),
        json!({"url": format!("{base}/v1/x"), "query": {"q": "\u{202e}txt"}}),
        json!({"url": format!("{base}/v1/x"), "headers": {"X-Note": "a\u{9b}2Kb"}}),
        json!({"url": format!("{base}/v1/x"), "headers": {"X-Note": "left\u{202e}right"}}),
        json!({"url": format!("{base}/v1/x"), "headers": {"X-Note": "a\u{7f}"}}),
        json!({"url": format!("{base}/v1/x"), "idempotency_key": "k\u{1b}[2K"}),
    ];
    for (i, extra) in cases.iter().enumerate() {
        let mut args = json!({"credential": "api", "method": "POST", "wait_s": 1});
        for (k, val) in extra.as_object().unwrap() {
            args[k] = val.clone();
        }
        let r = p.call(10 + i as i64, "http_request", args.clone());
        let sc = &r["result"]["structuredContent"];
        assert_eq!(r["result"]["isError"], true, "accepted {args}: {r}");
        assert_eq!(sc["error"]["code"], "invalid_argument", "{args}: {r}");
        assert!(
            sc.get("action_id").is_none(),
            "{args} became an action: {r}"
        );
    }
    let pending = v.run(&["pending", "--json"], None).ok();
    assert_eq!(pending.stdout.trim(), "[]", "nothing was queued");
    assert!(target.requests().is_empty(), "nothing was sent");
    p.finish(Duration::from_secs(10));
}

#[test]
fn agent_text_reaches_pending_log_sessions_and_the_card_only_escaped() {
    let (mut v, target, mut p) = setup("term-escape");
    p.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "http_request", "arguments": {"credential": "api", "method": "POST", "url": format!("{}/v1/items", target.base()), "json": {"note": "\u{1b}[2J\u{202e}x"}, "wait_s": 30}}}));
    wait_pending(&mut v, 1);

    for args in [
        &["pending"][..],
        &["log"][..],
        &["sessions"][..],
        &["log", "--follow"][..],
    ] {
        let out = if args.contains(&"--follow") {
            // `--follow` prints the same lines and keeps running: read what it printed, then stop it.
            let mut c = v.command(args);
            let child = c
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            std::thread::sleep(Duration::from_millis(1500));
            terminate(child.id());
            let o = child.wait_with_output().unwrap();
            String::from_utf8_lossy(&o.stdout).into_owned()
        } else {
            v.run(args, None).ok().stdout
        };
        let what = format!("vault {}", args.join(" "));
        assert_inert(&what, &out);
        if args[0] != "log" || args.len() == 1 {
            // `vault mcp` drops C0 controls from the client name; the bidi override stays, escaped.
            assert!(
                out.contains("\\u{202e}"),
                "{what} does not show the escapes visibly:\n{out}"
            );
        }
    }

    // The card, in a real terminal: the client name and the body, escaped.
    let run = v.run_tty_timed(
        &["approve"],
        &[
            ("passphrase", &format!("{PASSPHRASE}\n"), 0.2),
            ("[a]pprove once", "q", 0.8),
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stdout);
    let card = run.stdout.split("Action 1 of").nth(1).unwrap_or_else(|| {
        panic!("no card: {}", run.stdout.escape_debug());
    });
    assert_inert("the approval card", card);
    assert!(card.contains("\\u{202e}gpj.exe"), "{}", card.escape_debug());
    assert!(target.requests().is_empty());
    p.finish(Duration::from_secs(10));
}

/// SIGTERM to the child this test started (by its pid).
fn terminate(pid: u32) {
    let _ = std::process::Command::new("kill")
        .arg(pid.to_string())
        .status();
}
