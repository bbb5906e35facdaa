//! Benchmark: durable journal appends with 8 concurrent sessions. Today's design in the same run
//! as the peer: 8 writers, each with its own connection to `vault.db` (as each `vault mcp`
//! process had), one `BEGIN IMMEDIATE` … `COMMIT` (one fsync) per row. Against: 8 sessions
//! connected to the custody agent, each keeping 16 journaled requests in flight (`call.rejected`
//! rows: each is one row the agent must make durable before it answers); the agent's writer
//! commits what arrived together in one transaction (group commit). Both at `synchronous = FULL`.
//!
//! Run: `cargo bench --bench agent_journal` (goal: ≥ 20,000 durable rows/s through the agent).
//! `-- --quick`: a few rows per writer, checks only that all were answered and the journal
//! verifies (what CI runs).
mod common;

use agent_vault::agent::client::Client;
use agent_vault::agent::protocol::{Reply, Request, Role};
use agent_vault::audit;
use agent_vault::credentials::Approval;
use agent_vault::mcp::protocol::ClientInfo;
use agent_vault::store::Store;
use common::{BenchVault, FastTarget};
use serde_json::json;
use std::time::Instant;

const SESSIONS: usize = 8;
const WINDOW: usize = 16;

fn main() {
    let quick = common::quick();
    let rows_per_session = common::size(quick, 4000, 100);
    let direct_rows_per_writer = common::size(quick, 500, 10);
    let target = FastTarget::start();
    // The budget of refused calls journaled per session and second (20 by default) would count
    // instead of journaling most of them: lift it, this measures the writer.
    let bv = BenchVault::with_config(
        "agent-journal",
        target.port,
        Approval::Each,
        "[limits]\nrefused_calls_per_second = 100000\n",
    );

    // Peer: today's design, every writer its own connection, one fsync per row.
    let started = Instant::now();
    let writers: Vec<_> = (0..SESSIONS)
        .map(|w| {
            let (db, key) = (bv.paths.db(), bv.keys.master.clone());
            std::thread::spawn(move || {
                let mut store = Store::open(&db, &key).expect("open");
                for i in 0..direct_rows_per_writer {
                    let tx = loop {
                        match store.write() {
                            Ok(tx) => break tx,
                            Err(agent_vault::store::StoreError::Busy) => continue,
                            Err(e) => panic!("{e}"),
                        }
                    };
                    audit::append_row(&tx, "bench.direct", None, None, &json!({"w": w, "i": i}))
                        .unwrap();
                    tx.commit().unwrap();
                }
            })
        })
        .collect();
    writers.into_iter().for_each(|w| w.join().unwrap());
    let direct_secs = started.elapsed().as_secs_f64();
    let direct_rows = SESSIONS * direct_rows_per_writer;

    // Through the agent: 8 sessions, 16 requests in flight each.
    let started = Instant::now();
    let sessions: Vec<_> = (0..SESSIONS)
        .map(|s| {
            let paths = bv.paths.clone();
            std::thread::spawn(move || {
                let info = ClientInfo {
                    name: format!("bench-{s}"),
                    version: "1".into(),
                    protocol_version: "2025-11-25".into(),
                };
                let mut c = Client::connect_as(&paths, Role::Mcp, Some(info))
                    .unwrap()
                    .expect("agent");
                let fingerprint = "0".repeat(64);
                let (mut sent, mut done) = (0, 0);
                while done < rows_per_session {
                    while sent < rows_per_session && sent - done < WINDOW {
                        c.send(Request::Reject {
                            code: -32600,
                            reason: "bench".into(),
                            fingerprint: fingerprint.clone(),
                            tool: None,
                        })
                        .unwrap();
                        sent += 1;
                    }
                    let (_, r) = c.next_reply().unwrap();
                    assert!(matches!(r, Reply::Ok), "{r:?}");
                    done += 1;
                }
            })
        })
        .collect();
    sessions.into_iter().for_each(|s| s.join().unwrap());
    let agent_secs = started.elapsed().as_secs_f64();
    let agent_rows = SESSIONS * rows_per_session;

    let direct_rate = direct_rows as f64 / direct_secs;
    let agent_rate = agent_rows as f64 / agent_secs;
    println!("durable journal appends, {SESSIONS} concurrent writers, synchronous = FULL");
    println!("{:<58} {:>9} {:>12}", "", "rows", "rows/s");
    println!(
        "{:<58} {:>9} {:>12.0}",
        "today: 8 connections, one transaction per row (peer)", direct_rows, direct_rate
    );
    println!(
        "{:<58} {:>9} {:>12.0}",
        format!("agent: 8 sessions x {WINDOW} in flight, group commit"),
        agent_rows,
        agent_rate
    );
    println!("ratio agent / today: {:.1}x", agent_rate / direct_rate);
    let goal = 20_000.0;
    println!(
        "agent {agent_rate:.0} rows/s, goal >= {goal:.0}: {}",
        if agent_rate >= goal { "met" } else { "NOT met" }
    );
    const TODAY: &str = "today: 8 connections, one transaction per row (peer)";
    common::emit_figure(TODAY, "rows/s", common::Side::Peer, direct_rate);
    common::emit_figure(
        "agent: 8 sessions x 16 in flight, group commit",
        "rows/s",
        common::Side::Vs(TODAY),
        agent_rate,
    );
    common::emit_goal(
        &format!(">= {goal:.0} durable rows/s through the agent"),
        agent_rate,
        "rows/s",
        agent_rate >= goal,
    );
    let mut cli = Client::connect(&bv.paths, Role::Cli).unwrap().unwrap();
    let Reply::Verify { report, .. } = cli.call(Request::Verify { anchors: vec![] }).unwrap()
    else {
        panic!("verify")
    };
    assert!(report.contains("\"ok\":true"), "{report}");
    println!("journal verified after the run: {report}");
}
