//! Noisy remote commands through `vault mcp` against a real OpenSSH `sshd`: the cases of
//! `stderr-limits` (the remote command is the noisy helper). Every stream is drained and counted,
//! retained bytes stay within the per-call and process budgets, the vault writes the truncation
//! marker, UTF-8 decodes across packets, exit statuses are reported only when observed, a command
//! that may have acted is never `failed`, approval cards are not delayed by output, and no remote
//! process is left behind.
//!
//! The commands run as a throwaway non-root user: OpenSSH handles a root session in its monitor
//! process and refuses `signal` requests there ("session signalling requires privilege
//! separation"), so TERM reaches only non-root commands (the TERM-ignoring case below shows what
//! happens when it does not). The tests run one at a time: floods on 2 cores distort timings.
mod support;

use serde_json::{json, Value};
use std::time::{Duration, Instant};
use support::ssh::*;
use support::sshd::Sshd;
use support::*;

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// What a test holds: the vault, the server and the user (removed on drop), and the lock.
struct Setup {
    v: TestVault,
    _sshd: Sshd,
    _user: LocalUser,
    _serial: std::sync::MutexGuard<'static, ()>,
}

/// A vault with `box` (approval `never`) and `gate` (approval `each`) for a throwaway user on a
/// real sshd, logging in with an ed25519 key.
fn setup(tag: &str, config: Option<&str>) -> Setup {
    let serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let user = LocalUser::create(&token("unused-password"));
    let mut v = TestVault::init(tag);
    let key = keygen(v.dir.path(), "id_ed25519", &["-t", "ed25519"], "");
    let sshd = Sshd::start(&key.public);
    let f = key.private.to_str().unwrap();
    for (name, approval) in [("box", "never"), ("gate", "each")] {
        let auth = ["--key-file", f];
        add_ssh(&mut v, name, &sshd, &user.name, &auth, None, approval, None).ok();
    }
    if let Some(c) = config {
        std::fs::write(v.vault_dir().join("config.toml"), c).unwrap();
    }
    // The executors run in the agent: restart it so it reads the config, logging at debug into
    // `agent.log` (the budget peaks are read from there).
    v.restart_agent_logging("agent_vault=debug");
    Setup {
        v,
        _sshd: sshd,
        _user: user,
        _serial: serial,
    }
}

/// `agent.log` and the stderr budget peaks it reports (`Budget::peak`, logged after each call).
fn budget_peaks(v: &TestVault) -> (String, Vec<u64>) {
    let log = std::fs::read_to_string(v.vault_dir().join("agent.log")).unwrap();
    let peaks = log
        .split("stderr_budget_peak=")
        .skip(1)
        .map(|rest| {
            rest.chars()
                .take_while(char::is_ascii_digit)
                .collect::<String>()
                .parse()
                .unwrap()
        })
        .collect();
    (log, peaks)
}

fn n(r: &Value, field: &str) -> u64 {
    ssh_of(r)[field]
        .as_u64()
        .unwrap_or_else(|| panic!("{field} in {r}"))
}

#[test]
fn a_stderr_flood_with_a_timeout_is_bounded_and_ends_in_time() {
    let Setup {
        mut v,
        _sshd,
        _user,
        _serial,
    } = setup("flood-timeout", None);
    let tok = token("diag");
    let agent = v.agent_pid().expect("the vault agent runs");
    let mut p = mcp(&v, None);
    let start = Instant::now();
    let r = exec(
        &mut p,
        1,
        "box",
        &format!("yes {tok} 1>&2"),
        json!({"timeout_s": 3}),
    );
    let took = start.elapsed();
    let hwm = vm_hwm_kib(agent);
    let seen = n(&r, "stderr_bytes_seen");
    eprintln!("yes 1>&2, timeout_s 3: returned after {took:?}, stderr seen {seen} bytes, vault agent VmHWM {hwm} KiB");
    assert!(took < Duration::from_secs(3 + 5 + 2), "took {took:?}");
    assert_eq!(r["isError"], true, "{r}");
    assert_eq!(r["structuredContent"]["state"], "indeterminate", "{r}");
    let s = ssh_of(&r);
    assert_eq!(s["exit_status"], Value::Null, "no exit status was observed");
    assert_eq!(
        s["exit_signal"], "TERM",
        "sshd reported the signal it delivered"
    );
    assert_eq!(s["stream_end"], "timeout");
    assert_eq!(s["stderr_truncated"], true);
    assert_eq!(n(&r, "stderr_bytes_retained"), 16384);
    assert!(seen > 1_000_000, "a large stream was drained: {seen}");
    let text = text_of(&r, "stderr");
    let marker =
        format!("[stderr truncated: kept last 16384 of {seen} bytes; showing the last 4096]\n");
    assert!(text.starts_with(&marker), "{}", &text[..120]);
    assert_eq!(text.len(), marker.len() + 4096);
    assert!(text.ends_with(&format!("{tok}\n")));
    assert!(hwm < 64 * 1024, "the vault agent peaked at {hwm} KiB");
    assert_gone(&tok, Duration::from_secs(3));
    p.finish(Duration::from_secs(10));
}

/// Sends 8 floods at once and returns their results.
fn eight_floods(p: &mut support::mcp::McpProc, tok: &str, timeout_s: u64) -> Vec<Value> {
    for i in 1..=8 {
        send_exec(
            p,
            i,
            "box",
            &format!("yes {tok}-{i} 1>&2"),
            json!({"timeout_s": timeout_s}),
        );
    }
    results_of(p, &(1..=8).collect::<Vec<_>>(), Duration::from_secs(120))
}

#[test]
fn eight_concurrent_floods_fit_the_default_budgets() {
    // The defaults: 8 × 16 KiB fit in the 256 KiB process budget.
    let Setup {
        mut v,
        _sshd,
        _user,
        _serial,
    } = setup("flood-8", None);
    let tok = token("f8");
    let agent = v.agent_pid().expect("the vault agent runs");
    let mut p = mcp(&v, None);
    let rs = eight_floods(&mut p, &tok, 4);
    let hwm = vm_hwm_kib(agent);
    let retained: u64 = rs.iter().map(|r| n(r, "stderr_bytes_retained")).sum();
    let seen: u64 = rs.iter().map(|r| n(r, "stderr_bytes_seen")).sum();
    eprintln!(
        "8 floods: stderr seen {seen} bytes, retained {retained} bytes, vault agent VmHWM {hwm} KiB"
    );
    for r in &rs {
        assert_eq!(r["structuredContent"]["state"], "indeterminate", "{r}");
        assert!(n(r, "stderr_bytes_retained") <= 16384);
        assert!(n(r, "stderr_bytes_seen") > 16384);
    }
    assert!(retained <= 256 * 1024);
    assert!(hwm < 64 * 1024, "the vault agent peaked at {hwm} KiB");
    p.finish(Duration::from_secs(10));
    assert_gone(&tok, Duration::from_secs(3));
}

#[test]
fn eight_concurrent_floods_share_a_tight_process_budget() {
    // A 32 KiB process budget: the 8 calls share it, and the process reports the most it ever
    // held at once (Budget::peak, logged after each call).
    let Setup {
        v,
        _sshd,
        _user,
        _serial,
    } = setup(
        "flood-8-tight",
        Some("[limits]\nstderr_retained_process_bytes = 32768\n"),
    );
    let tok = token("f8t");
    let mut p = mcp(&v, None);
    let rs = eight_floods(&mut p, &tok, 3);
    p.finish(Duration::from_secs(10));
    let (log, peaks) = budget_peaks(&v);
    eprintln!("8 floods, 32 KiB budget: peaks held at once {peaks:?}");
    assert_eq!(peaks.len(), 8, "one report per call: {log}");
    assert!(peaks.iter().all(|&p| p <= 32768), "{peaks:?}");
    assert!(rs.iter().all(|r| n(r, "stderr_bytes_retained") <= 16384));
    assert!(
        rs.iter()
            .any(|r| text_of(r, "stderr").contains("the process-wide budget was in use")),
        "the budget, not the per-call bound, limited some call"
    );
    assert_gone(&tok, Duration::from_secs(3));
}

#[test]
fn stderr_before_and_during_approval_does_not_delay_the_card() {
    let Setup {
        mut v,
        _sshd,
        _user,
        _serial,
    } = setup("flood-card", None);
    let tok = token("card");
    let mut p = mcp(&v, None);
    // Baseline: time from the call to its card, with nothing else running.
    send_exec(&mut p, 100, "gate", &format!("echo base-{tok}"), json!({}));
    let (base, t0) = pending_id(&mut v, &format!("base-{tok}"));
    approve(&mut v, &base);
    assert_eq!(
        result_of(&mut p, 100, Duration::from_secs(30))["structuredContent"]["state"],
        "completed"
    );

    // Floods already writing when the next request comes, and while its card waits.
    for i in 1..=2 {
        send_exec(
            &mut p,
            i,
            "box",
            &format!("yes pre-{tok} 1>&2"),
            json!({"timeout_s": 10}),
        );
    }
    wait_until(Duration::from_secs(10), "the floods never started", || {
        processes_with(&format!("pre-{tok}")).len() >= 2
    });
    // The approved command itself writes 5 MB of stderr and exits right after.
    let cmd = format!("head -c 5000000 /dev/zero | tr '\\0' x 1>&2; echo during-{tok}");
    send_exec(&mut p, 200, "gate", &cmd, json!({}));
    let (act, t1) = pending_id(&mut v, &format!("during-{tok}"));
    eprintln!("time to card: {t0:?} idle, {t1:?} with two floods running");
    assert!(t1 < Duration::from_secs(3), "the card took {t1:?}");
    let approved_at = Instant::now();
    approve(&mut v, &act);
    // The floods' answers may come first; every answer is kept, whatever its order.
    let mut answers = std::collections::HashMap::new();
    let mut latency = None;
    while answers.len() < 3 {
        let m = p.recv(Duration::from_secs(60)).expect("an answer");
        if let Some(id) = m["id"].as_i64() {
            if id == 200 {
                latency = Some(approved_at.elapsed());
            }
            answers.insert(id, m["result"].clone());
        }
    }
    let latency = latency.unwrap();
    eprintln!("approve → result with floods running: {latency:?}");
    let r = &answers[&200];
    assert_eq!(r["structuredContent"]["state"], "completed", "{r}");
    assert_eq!(ssh_of(r)["exit_status"], 0);
    assert_eq!(text_of(r, "stdout"), format!("during-{tok}\n"));
    assert_eq!(n(r, "stderr_bytes_seen"), 5_000_000);
    assert_eq!(ssh_of(r)["stderr_truncated"], true);
    for i in 1..=2 {
        let f = &answers[&i];
        assert_eq!(f["structuredContent"]["state"], "indeterminate", "{f}");
        assert!(n(f, "stderr_bytes_retained") <= 16384);
    }
    p.finish(Duration::from_secs(10));
    assert_gone(&tok, Duration::from_secs(3));
}

#[test]
fn a_command_that_acted_then_floods_is_indeterminate_after_a_cancel_during_cleanup() {
    let Setup {
        mut v,
        _sshd,
        _user,
        _serial,
    } = setup("flood-cancel", None);
    let tok = token("late");
    // In /tmp: the throwaway user cannot write in the test's directory.
    let mark = std::path::PathBuf::from(format!("/tmp/acted-{tok}"));
    let termed = std::path::PathBuf::from(format!("/tmp/termed-{tok}"));
    // It acts, reports, then floods and outlives TERM (the trap notes it got TERM; `yes`, killed
    // by it, is started again; a broken pipe ends the loop): the vault's cleanup (TERM, grace,
    // close) is under way when the client cancels and the session shuts down.
    let cmd = format!(
        "touch {}; echo acted; trap 'touch {}' TERM; while :; do yes {tok} 1>&2; [ $? = 143 ] || exit; done",
        mark.display(),
        termed.display()
    );
    let mut p = mcp(&v, None);
    send_exec(&mut p, 7, "box", &cmd, json!({"timeout_s": 2}));
    let waiting = Instant::now();
    while !termed.exists() {
        assert!(
            waiting.elapsed() < Duration::from_secs(20),
            "no TERM reached the command"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // It acted (the mark comes first in the command) and, past the TERM, floods on.
    assert!(mark.exists(), "the command acted");
    wait_until(Duration::from_secs(10), "no flood after the TERM", || {
        !processes_with(&tok).is_empty()
    });
    p.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7, "reason": "user gave up"}}));
    let shutdown = Instant::now();
    let seen = p.seen.clone();
    let (code, rest, _) = p.finish(Duration::from_secs(10));
    eprintln!(
        "cancel + shutdown during cleanup → vault mcp exited after {:?}",
        shutdown.elapsed()
    );
    assert_eq!(code, 0);
    assert_gone(&tok, Duration::from_secs(5));
    // The terminal state was recorded before the session ended, and it is not `failed`.
    let rows = v.run(&["log", "--json"], None).ok().stdout;
    let row = rows
        .lines()
        .rfind(|l| l.contains(&tok))
        .unwrap_or_else(|| panic!("no journal row: {rows}"));
    assert!(row.contains("\"state\":\"indeterminate\""), "{row}");
    let _ = std::fs::remove_file(&mark);
    let _ = std::fs::remove_file(&termed);
    // A cancelled call gets no response (MCP): none came, before the end or after it. What it
    // did is in the vault's store, where the result was recorded: it acted, and its end is
    // indeterminate (a time-out, no exit status).
    assert!(
        !seen.iter().chain(&rest).any(|l| l.contains("\"id\":7")),
        "the cancelled call was answered: {rest:?}"
    );
    let stored: String = v
        .open_db()
        .store
        .conn()
        .query_row(
            "SELECT result FROM actions WHERE summary LIKE ?1",
            [format!("%{tok}%")],
            |r| r.get(0),
        )
        .expect("the action and its result are stored");
    // (Its state, indeterminate, is the journal's row above; the store keeps the result.)
    let r: Value = serde_json::from_str(&stored).unwrap();
    let r = json!({"structuredContent": r});
    assert_eq!(ssh_of(&r)["exit_status"], Value::Null, "{r}");
    assert_eq!(ssh_of(&r)["stream_end"], "timeout", "{r}");
    assert_eq!(text_of(&r, "stdout"), "acted\n", "{r}");
}

#[test]
fn a_line_longer_than_the_bound_and_invalid_utf8_decode_cleanly() {
    let Setup {
        v,
        _sshd,
        _user,
        _serial,
    } = setup("flood-utf8", None);
    let mut p = mcp(&v, None);
    // One 100001-byte line of "é" ending in "x": the 16 KiB tail starts inside a character.
    let r = exec(
        &mut p,
        1,
        "box",
        "{ yes é | tr -d '\\n' | head -c 100000; printf x; } 1>&2",
        json!({}),
    );
    assert_eq!(r["structuredContent"]["state"], "completed", "{r}");
    assert_eq!(n(&r, "stderr_bytes_seen"), 100_001);
    assert_eq!(n(&r, "stderr_bytes_retained"), 16384);
    let text = text_of(&r, "stderr");
    let (marker, body) = text.split_once('\n').unwrap();
    assert_eq!(
        marker,
        "[stderr truncated: kept last 16384 of 100001 bytes; showing the last 4095]"
    );
    assert!(
        body.ends_with('x') && body[..body.len() - 1].chars().all(|c| c == 'é'),
        "{body}"
    );

    // A 3 MB line on stdout: 1 MiB kept, max_output_bytes returned.
    let r = exec(
        &mut p,
        2,
        "box",
        "head -c 3000000 /dev/zero | tr '\\0' y; echo",
        json!({"max_output_bytes": 10000}),
    );
    assert_eq!(n(&r, "stdout_bytes_seen"), 3_000_001);
    assert_eq!(n(&r, "stdout_bytes_retained"), 1 << 20);
    let text = text_of(&r, "stdout");
    let (marker, body) = text.split_once('\n').unwrap();
    assert_eq!(
        marker,
        "[stdout truncated: kept last 1048576 of 3000001 bytes; showing the last 10000]"
    );
    assert_eq!(body.len(), 10000);

    // Invalid sequences become U+FFFD; the JSON stays valid.
    let r = exec(
        &mut p,
        3,
        "box",
        "printf 'ok \\377\\376 bad \\300\\n'; printf 'err \\355\\240\\200 end\\n' 1>&2",
        json!({}),
    );
    assert_eq!(text_of(&r, "stdout"), "ok \u{fffd}\u{fffd} bad \u{fffd}\n");
    assert_eq!(text_of(&r, "stderr"), "err \u{fffd}\u{fffd}\u{fffd} end\n");

    // Multi-byte characters split across SSH packets decode whole.
    let line = "héllo wörld ✓";
    let r = exec(
        &mut p,
        4,
        "box",
        &format!("yes '{line}' | head -n 20000"),
        json!({"max_output_bytes": 1048576}),
    );
    assert_eq!(n(&r, "stdout_bytes_seen"), 20000 * (line.len() as u64 + 1));
    assert_eq!(ssh_of(&r)["stdout_truncated"], false);
    let text = text_of(&r, "stdout");
    assert_eq!(text.lines().count(), 20000);
    assert!(text.lines().all(|l| l == line));
    p.finish(Duration::from_secs(10));
}

#[test]
fn a_wrapper_that_exits_while_its_child_holds_stderr_is_closed_after_the_grace() {
    let Setup {
        v,
        _sshd,
        _user,
        _serial,
    } = setup("flood-bg", None);
    let tok = token("bg");
    let mut p = mcp(&v, None);
    let start = Instant::now();
    let r = exec(
        &mut p,
        1,
        "box",
        &format!("(yes {tok} 1>&2 &); echo parent-done"),
        json!({"timeout_s": 60}),
    );
    let took = start.elapsed();
    eprintln!("exit with a child holding stderr: returned after {took:?}");
    assert_eq!(r["structuredContent"]["state"], "completed", "{r}");
    assert_eq!(ssh_of(&r)["exit_status"], 0);
    assert_eq!(text_of(&r, "stdout"), "parent-done\n");
    assert_eq!(ssh_of(&r)["stream_end"], "timeout");
    assert!(
        took >= Duration::from_secs(4) && took < Duration::from_secs(12),
        "took {took:?}"
    );
    assert_gone(&tok, Duration::from_secs(5));
    p.finish(Duration::from_secs(10));
}

#[test]
fn eight_calls_that_flood_then_sleep_hold_at_most_the_process_budget() {
    // The case: 16 KiB per call, 32 KiB for the process, eight concurrent calls each
    // writing 2 MB to stderr and then sleeping 3 s before they exit. The bound is on what the
    // process holds at once, which the agent measures (Budget::peak, logged after each call):
    // never above it. It counts each scrubber's held-back tail (2,393 bytes for this key), which
    // a stream reserves before it keeps anything; before that, eight such tails sat outside the
    // budget and the results' figures added up to 47,126 bytes. Figures of calls that end at
    // different times may still add up to more than the bound (a call that ends gives its bytes
    // back to those still running); each is true of its call.
    let Setup {
        v,
        _sshd,
        _user,
        _serial,
    } = setup(
        "flood-8-sleep",
        Some("[limits]\nstderr_retained_per_call_bytes = 16384\nstderr_retained_process_bytes = 32768\n"),
    );
    let tok = token("f8s");
    let mut p = mcp(&v, None);
    for i in 1..=8 {
        send_exec(
            &mut p,
            i,
            "box",
            &format!("yes {tok}-{i} | head -c 2000000 1>&2; sleep 3"),
            json!({"timeout_s": 30}),
        );
    }
    let rs = results_of(
        &mut p,
        &(1..=8).collect::<Vec<_>>(),
        Duration::from_secs(120),
    );
    p.finish(Duration::from_secs(10));
    let (log, peaks) = budget_peaks(&v);
    let retained: Vec<u64> = rs.iter().map(|r| n(r, "stderr_bytes_retained")).collect();
    eprintln!(
        "8 x (2 MB of stderr, then sleep 3 s), 32 KiB budget: retained per result {retained:?} (sum {}), peaks held at once {peaks:?}",
        retained.iter().sum::<u64>()
    );
    for r in &rs {
        assert_eq!(r["structuredContent"]["state"], "completed", "{r}");
        assert_eq!(n(r, "stderr_bytes_seen"), 2_000_000, "{r}");
        let kept = n(r, "stderr_bytes_retained");
        assert!(kept <= 16384, "{r}");
        // Each figure is true of its call: the marker the agent reads says the same.
        if kept > 0 {
            assert!(
                text_of(r, "stderr").contains(&format!("kept last {kept} of 2000000 bytes")),
                "{r}"
            );
        }
    }
    assert_eq!(peaks.len(), 8, "one report per call: {log}");
    assert!(peaks.iter().all(|&p| p <= 32768), "{peaks:?}");
    assert_gone(&tok, Duration::from_secs(3));
}
