//! The approval card in a real pseudo-terminal (`vault approve`), against a counting loopback
//! target: the card shows everything that will be sent (every agent header as `name: value`,
//! the whole query, the body readable), a body that cannot be shown whole cannot be approved,
//! and keys typed before a card was on screen decide nothing.
mod support;

use serde_json::{json, Value};
use std::time::Duration;
use support::mcp::McpProc;
use support::target::HttpTarget;
use support::*;

const SECRET: &str = "DECOY_card_tok_73d0e1";

fn add(v: &mut TestVault, name: &str, host: &str, extra: &[&str]) {
    v.add_bearer_with(name, host, SECRET, extra);
}

fn mcp(v: &TestVault) -> McpProc {
    let mut p = McpProc::spawn(v.command(&["mcp"]));
    p.initialize();
    p
}

/// Sends an `http_request` without waiting for its answer.
fn send(p: &mut McpProc, id: i64, args: Value) {
    p.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "http_request", "arguments": args}}));
}

/// Waits until `n` actions are pending; returns their ids, oldest first.
fn pending(v: &mut TestVault, n: usize) -> Vec<String> {
    v.wait_pending(n)
        .iter()
        .map(|a| a["action_id"].as_str().unwrap().to_owned())
        .collect()
}

fn result_of(p: &mut McpProc, id: i64) -> Value {
    p.until_id(&json!(id), Duration::from_secs(60)).0["result"].clone()
}

/// The text of the first card in a transcript (after the passphrase prompt).
fn first_card(transcript: &str) -> &str {
    let start = transcript
        .find("Action 1 of")
        .unwrap_or_else(|| panic!("no card in: {}", transcript.escape_debug()));
    let rest = &transcript[start..];
    &rest[..rest.find("[a]pprove once").map_or(rest.len(), |e| e + 14)]
}

#[test]
fn the_card_shows_every_header_the_query_and_a_readable_body() {
    let t = HttpTarget::start(SECRET);
    let mut v = TestVault::init("card-show");
    add(
        &mut v,
        "api",
        &t.base(),
        &[
            "--allow-header",
            "X-HTTP-Method-Override",
            "--allow-header",
            "X-Original-URL",
        ],
    );
    let mut p = mcp(&v);
    // Found: the card showed only {"name":"harmless"}; these headers were visible only under [v].
    send(
        &mut p,
        1,
        json!({"credential": "api", "method": "POST", "url": format!("{}/v1/items?dry_run=false", t.base()),
               "query": {"force": "yes"},
               "headers": {"X-HTTP-Method-Override": "DELETE", "X-Original-URL": "/admin/delete-all", "X-Trace": "t-1"},
               "json": {"name": "harmless", "tags": ["a", "b"], "note": "he said \"hi\""}, "wait_s": 40}),
    );
    pending(&mut v, 1);
    let run = v.run_tty_timed(
        &["approve"],
        &[
            ("passphrase", &format!("{PASSPHRASE}\n"), 0.2),
            ("[a]pprove once", "v", 0.8),
            ("any key to go back", "x", 0.8),
            ("[a]pprove once", "d", 0.8),
            ("Reason", "\n", 0.3),
            ("Denied act_", "q", 0.3),
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stdout.escape_debug());
    let card = first_card(&run.stdout);
    for want in [
        "x-http-method-override: DELETE",
        "x-original-url: /admin/delete-all",
        "x-trace: t-1",
        "content-type: application/json",
        "dry_run = false",
        "force = yes",
        "\"name\": \"harmless\"",
        "\"note\": \"he said \\\"hi\\\"\"",
    ] {
        assert!(
            card.contains(want),
            "the card (not only [v]) must show {want:?}:\n{card}"
        );
    }
    assert!(
        !card.contains("{\\\"name"),
        "quotes are not escaped wholesale:\n{card}"
    );
    // The full view is the same readable form, not the raw normalized JSON.
    let full = &run.stdout[run
        .stdout
        .find("any key to go back")
        .unwrap()
        .saturating_sub(4000)..];
    assert!(
        full.contains("x-http-method-override: DELETE") && full.contains("\"name\": \"harmless\""),
        "{full}"
    );
    assert!(
        !full.contains("\"body_blake3\""),
        "the full view is not raw normalized JSON:\n{full}"
    );
    let r = result_of(&mut p, 1);
    assert_eq!(r["structuredContent"]["state"], "denied", "{r}");
    assert!(t.requests().is_empty());
    p.finish(Duration::from_secs(10));
}

#[test]
fn a_body_that_cannot_be_shown_whole_cannot_be_approved() {
    let t = HttpTarget::start(SECRET);
    let mut v = TestVault::init("card-big");
    add(&mut v, "api", &t.base(), &[]);
    let mut p = mcp(&v);
    let url = format!("{}/v1/upload", t.base());

    // Past what a full view shows: refused at submission, with the fix.
    let huge = format!("{}END-OF-HUGE", "0123456789abcdef\n".repeat(2048));
    let r = p.call(
        1,
        "http_request",
        json!({"credential": "api", "method": "POST", "url": url, "body": huge, "wait_s": 1}),
    );
    let sc = &r["result"]["structuredContent"];
    assert_eq!(sc["error"]["code"], "invalid_argument", "{r}");
    assert!(sc.get("action_id").is_none());
    let text = r["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("smaller"), "{text}");

    // Within the bound but past the preview: the card says how much it hides, [v] shows it all.
    let medium = format!("{}END-OF-MEDIUM", "line of the body\n".repeat(200));
    send(
        &mut p,
        2,
        json!({"credential": "api", "method": "POST", "url": url, "body": medium, "wait_s": 40}),
    );
    pending(&mut v, 1);
    let run = v.run_tty_timed(
        &["approve"],
        &[
            ("passphrase", &format!("{PASSPHRASE}\n"), 0.2),
            ("[a]pprove once", "v", 0.8),
            // Page through the full view (40 rows): the end of the body is on its last page.
            ("next page", " ", 0.3),
            ("next page", " ", 0.3),
            ("next page", " ", 0.3),
            ("next page", " ", 0.3),
            ("next page", " ", 0.3),
            ("END-OF-MEDIUM", "x", 0.3),
            ("[a]pprove once", "d", 0.8),
            ("Reason", "\n", 0.3),
            ("Denied act_", "q", 0.3),
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stdout.escape_debug());
    let card = first_card(&run.stdout);
    assert!(
        card.contains("more lines: [v] shows all") && !card.contains("END-OF-MEDIUM"),
        "{card}"
    );
    assert_eq!(result_of(&mut p, 2)["structuredContent"]["state"], "denied");

    // A pending action whose body is over the bound (its credential's `never` policy lost its
    // signature, so it needs a card after all): the card says so and [a] / [s] refuse.
    v.run_pp(
        &[
            "add",
            "http",
            "bulk",
            "--host",
            &t.base(),
            "--bearer",
            "--secret-stdin",
            "--approval",
            "never",
        ],
        Some(&format!("{SECRET}\n")),
    )
    .ok();
    {
        let vault = v.open_db();
        vault
            .store
            .conn()
            .execute(
                "UPDATE credentials SET policy_sig = NULL WHERE name = 'bulk'",
                [],
            )
            .unwrap();
    }
    send(
        &mut p,
        3,
        json!({"credential": "bulk", "method": "POST", "url": url, "body": huge, "wait_s": 40}),
    );
    let ids = pending(&mut v, 1);
    let run = v.run_tty_timed(
        &["approve"],
        &[
            ("passphrase", &format!("{PASSPHRASE}\n"), 0.2),
            ("[a]pprove once", "a", 0.8),
            ("cannot be approved", "s", 0.8),
            ("cannot be approved", "q", 0.8),
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stdout.escape_debug());
    let card = first_card(&run.stdout);
    // The warning may wrap (at word boundaries) to the terminal's width.
    let words = strip_ansi(card)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(words.contains("cannot be approved"), "{card}");
    assert!(!run.stdout.contains("Approved act_"), "{}", run.stdout);
    assert_eq!(pending(&mut v, 1), ids, "still pending");
    assert!(t.requests().is_empty(), "sent: {:?}", t.requests());
    p.finish(Duration::from_secs(10));
}

#[test]
fn keys_typed_before_a_card_was_seen_decide_nothing() {
    let t = HttpTarget::start(SECRET);
    let mut v = TestVault::init("card-keys");
    add(&mut v, "api", &t.base(), &[]);
    let mut p = mcp(&v);
    // Found: a harmless GET, then a DELETE; `aa` typed 50 ms apart approved both.
    send(
        &mut p,
        1,
        json!({"credential": "api", "method": "GET", "url": format!("{}/v1/harmless", t.base()), "wait_s": 40}),
    );
    pending(&mut v, 1);
    send(
        &mut p,
        2,
        json!({"credential": "api", "method": "DELETE", "url": format!("{}/v1/projects/prod", t.base()), "wait_s": 12}),
    );
    let ids = pending(&mut v, 2);
    let run = v.run_tty_timed(
        &["approve"],
        &[
            ("passphrase", &format!("{PASSPHRASE}\n"), 0.2),
            ("[a]pprove once", "a", 0.8),
            ("PIN to approve", &format!("{PIN}\r"), 0.2),
            ("", "a", 0.05),
            ("", "s", 0.05),
            ("Approved act_", "a", 0.1),
            ("", "q", 1.0),
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stdout.escape_debug());
    assert_eq!(
        result_of(&mut p, 1)["structuredContent"]["state"],
        "completed"
    );
    let second = result_of(&mut p, 2);
    assert_eq!(
        second["structuredContent"]["state"], "pending",
        "the DELETE was decided by keys typed before its card was seen: {second}"
    );
    let reqs = t.requests();
    assert_eq!(reqs.len(), 1, "only the first action may run: {reqs:?}");
    assert_eq!(reqs[0]["method"], "GET");
    assert_eq!(pending(&mut v, 1), vec![ids[1].clone()]);
    p.finish(Duration::from_secs(10));
}

/// `s` without its terminal escapes (ESC [ … letter).
fn strip_ansi(s: &str) -> String {
    let mut plain = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for d in chars.by_ref() {
                    if d.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
            continue;
        }
        plain.push(c);
    }
    plain
}

/// The last screen the approver drew, escapes removed, as lines.
fn last_screen(transcript: &str) -> Vec<String> {
    let screen = transcript.rsplit("\x1b[2J\x1b[H").next().unwrap_or("");
    strip_ansi(screen)
        .split('\n')
        .map(|l| l.trim_end_matches('\r').to_owned())
        .filter(|l| !l.is_empty())
        .collect()
}

#[test]
fn the_card_fits_a_40x12_and_a_200x50_terminal() {
    let t = HttpTarget::start(SECRET);
    let mut v = TestVault::init("card-size");
    add(&mut v, "api", &t.base(), &[]);
    let mut p = mcp(&v);
    // A 3 KB body of words, six headers and a long query: more than a small terminal shows.
    let words: Vec<String> = (0..400).map(|i| format!("word{i}")).collect();
    let headers: serde_json::Map<String, Value> = (0..6)
        .map(|i| {
            (
                format!("X-Extra-{i}"),
                json!(format!("value number {i} of six")),
            )
        })
        .collect();
    send(
        &mut p,
        1,
        json!({"credential": "api", "method": "POST",
               "url": format!("{}/v1/items?one=1&two=2&three=3&four=4&five=5", t.base()),
               "headers": headers, "body": words.join(" "), "wait_s": 60}),
    );
    pending(&mut v, 1);
    for (rows, cols) in [(12u16, 40u16), (50, 200)] {
        let run = v.run_tty_sized(
            &["approve"],
            &[
                ("passphrase", &format!("{PASSPHRASE}\n"), 0.2),
                ("[q]uit", "q", 0.8),
            ],
            (rows, cols),
        );
        assert_eq!(run.code, 0, "{}", run.stdout.escape_debug());
        let screen = last_screen(&run.stdout);
        let what = format!("{rows}x{cols}:\n{}", screen.join("\n"));
        assert!(
            screen.len() < usize::from(rows),
            "taller than the terminal: {what}"
        );
        let wide: Vec<(usize, &String)> = screen
            .iter()
            .map(|l| (l.chars().count(), l))
            .filter(|(n, _)| *n > usize::from(cols))
            .collect();
        assert!(wide.is_empty(), "wider than the terminal {wide:?}: {what}");
        assert!(
            screen.last().is_some_and(|l| l.contains("[q]uit")),
            "{what}"
        );
        // What decides the approval is on screen, whole (wrapped rows joined).
        let squeezed: String = screen.concat().split_whitespace().collect();
        for fact in [
            "toolhttp_request",
            "credentialapi(profiledefault,version1)",
            &format!("POST{}/v1/items", t.base()),
        ] {
            assert!(squeezed.contains(fact), "{fact}: {what}");
        }
        // A word of the body is never cut in two at the end of a line.
        for l in &screen {
            let last = l.split_whitespace().last().unwrap_or("");
            if let Some(n) = last.strip_prefix("word") {
                assert!(
                    n.parse::<u32>().is_ok(),
                    "a word cut at the edge: {l:?} in {what}"
                );
            }
        }
    }
    // Ctrl-C on the card quits and gives the terminal back as it was (echo on).
    let run = v.run_tty_sized(
        &["approve"],
        &[
            ("passphrase", &format!("{PASSPHRASE}\n"), 0.2),
            ("[q]uit", "\u{3}", 0.8),
        ],
        (24, 80),
    );
    assert_eq!(
        run.code,
        0,
        "Ctrl-C quits cleanly: {}",
        run.stdout.escape_debug()
    );
    p.finish(Duration::from_secs(10));
}
