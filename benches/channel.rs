//! Benchmark: what the encrypted channel (Noise NNpsk0, `agent::channel`) costs a person's
//! command, against plain text to the same agent in the same run. Per request on a warm
//! connection (a small `status` and a large `journal` reply of ~1,000 rows), and per connection
//! (connect + hello, against connect + handshake + hello). Requests alternate between the two
//! connections so both see the same machine.
//!
//! Run: `cargo bench --bench channel` (prints a table; the goal is ≤ 1 ms added per request).
//! `-- --quick`: a few requests and connections, checks only (what CI runs).
mod common;

use agent_vault::agent::client::Client;
use agent_vault::agent::protocol::{Reply, Request, Role};
use agent_vault::credentials::Approval;
use common::{secure_cli, stats, BenchVault, FastTarget, Side};
use std::time::{Duration, Instant};

fn time(c: &mut Client, req: impl Fn() -> Request) -> Duration {
    let t = Instant::now();
    let reply = c.call(req()).expect("request");
    let took = t.elapsed();
    assert!(!matches!(reply, Reply::Error { .. }), "{reply:?}");
    took
}

fn row(what: &str, plain: Vec<Duration>, secure: Vec<Duration>) {
    // The report's rows by the request's name (the journal's size varies with the machine).
    let name = what.split(" (").next().unwrap_or(what);
    let peer = format!("{name}, plain text (peer)");
    common::emit_samples(&peer, Side::Peer, &plain);
    common::emit_samples(
        &format!("{name}, encrypted channel"),
        Side::Vs(&peer),
        &secure,
    );
    let (p50, p95, _) = stats(plain);
    let (s50, s95, _) = stats(secure);
    println!(
        "{what:<34} {p50:>9.3} {p95:>9.3} {s50:>9.3} {s95:>9.3} {:>+10.3} {:>7.2}x",
        s50 - p50,
        s50 / p50
    );
    if !name.starts_with("connect") {
        // The header's goal: at most 1 ms added per request.
        let added = s50 - p50;
        common::emit_goal(
            &format!("{name}: the channel adds <= 1 ms at p50"),
            added,
            "ms",
            added <= 1.0,
        );
    }
}

fn main() {
    let quick = common::quick();
    let (n, connects, sessions) = common::size(quick, (2000, 300, 500), (50, 10, 20));
    let target = FastTarget::start();
    let bv = BenchVault::new("channel", target.port, Approval::Each);
    // Some journal to read: every connection's hello and the credential add are rows; add more
    // by opening sessions (each `mcp` hello journals session.start).
    for _ in 0..sessions {
        let _ = Client::connect_as(&bv.paths, Role::Mcp, None).expect("mcp session");
    }
    let mut plain = Client::connect(&bv.paths, Role::Cli)
        .unwrap()
        .expect("agent");
    let mut secure = secure_cli(&bv.paths, &bv.keys);
    let journal = || Request::Journal {
        after: 0,
        limit: 1000,
        wait_ms: 0,
    };
    let Reply::Rows(rows) = plain.call(journal()).unwrap() else {
        panic!("journal")
    };
    let bytes: usize = rows.iter().map(|r| r.body.len() + 300).sum();

    println!(
        "{:<34} {:>9} {:>9} {:>9} {:>9} {:>10} {:>8}",
        "ms", "plain p50", "p95", "chan p50", "p95", "added p50", "ratio"
    );
    let (mut ps, mut ss, mut pj, mut sj) = (vec![], vec![], vec![], vec![]);
    for i in 0..n {
        ps.push(time(&mut plain, || Request::Status));
        ss.push(time(&mut secure, || Request::Status));
        if i % 10 == 0 {
            pj.push(time(&mut plain, journal));
            sj.push(time(&mut secure, journal));
        }
    }
    row("status (small reply)", ps, ss);
    row(
        &format!("journal ({} rows, ~{} KiB)", rows.len(), bytes / 1024),
        pj,
        sj,
    );

    let (mut pc, mut sc) = (vec![], vec![]);
    for _ in 0..connects {
        let t = Instant::now();
        drop(
            Client::connect(&bv.paths, Role::Cli)
                .unwrap()
                .expect("agent"),
        );
        pc.push(t.elapsed());
        let t = Instant::now();
        drop(secure_cli(&bv.paths, &bv.keys));
        sc.push(t.elapsed());
    }
    row("connect + hello (+ handshake)", pc, sc);
}
