//! Benchmark: decision → request at the target. A `vault mcp` process waits on `http_request`
//! (approval `each`); this process, as `vault approve` does, finds the pending action through the
//! agent, signs the decision with the approver key and sends it; the in-bench target notes when
//! the request head arrives. Latency = arrival − the instant the signed decision was sent (so it
//! includes the decision's own commit): the agent verifying and committing it, pushing it to the
//! waiting call (no polling), the dispatch claim (a second commit) and the connection. Peer in
//! the same run, as the floor of any dispatch: a direct ureq GET, start → arrival.
//!
//! Run: `cargo bench --bench approval_latency` (prints a table; the goal is p95 ≤ 3 ms).
//! `-- --quick`: a few approvals, checks only that each was dispatched and completed (what CI runs).
mod common;

use agent_vault::agent::protocol::{Reply, Request};
use agent_vault::approvals::Verdict;
use agent_vault::credentials::Approval;
use common::{stats, BenchVault, FastTarget, Mcp, Side};
use std::time::{Duration, Instant};

fn main() {
    let quick = common::quick();
    let n = common::size(quick, 200, 5);
    let target = FastTarget::start();
    let mut bv = BenchVault::new("approval-latency", target.port, Approval::Each);
    let mut mcp = Mcp::spawn(&bv.paths);

    // Peer: a direct GET (connect + request head), the floor of any dispatch.
    let agent: ureq::Agent = ureq::Agent::config_builder().build().into();
    let mut direct = Vec::with_capacity(n);
    for i in 0..n {
        let t = Instant::now();
        let tag = format!("d{i}");
        agent
            .get(format!("{}/d?t={tag}", target.base()))
            .call()
            .expect("direct GET");
        direct.push(target.arrival(&tag) - t);
    }

    let mut latency = Vec::with_capacity(n);
    let mut find = Vec::with_capacity(n);
    for i in 0..n {
        let tag = format!("a{i}");
        let url = format!("{}/a?t={tag}", target.base());
        let asked = Instant::now();
        mcp.http_request(i as i64, &url, 60);
        let deadline = Instant::now() + Duration::from_secs(10);
        let view = loop {
            let Reply::Pending(pending) = bv.approver.call(Request::Pending).expect("pending")
            else {
                panic!("pending")
            };
            if let Some(v) = pending
                .into_iter()
                .find(|v| v.action.summary.contains(&url))
            {
                break v;
            }
            assert!(
                Instant::now() < deadline,
                "action {tag} never became pending"
            );
            std::thread::sleep(Duration::from_millis(1));
        };
        find.push(asked.elapsed());
        assert_eq!(target.count(), n + i, "nothing is sent while pending");
        let committed = Instant::now();
        bv.approver
            .decide(
                &bv.keys.approver,
                &view,
                &Verdict::Approve,
                // The card's method: the approval PIN, which the agent checks.
                agent_vault::agent::client::Proof::Pin(agent_vault::wire::Secret::new(
                    common::PIN.as_bytes().to_vec(),
                )),
                Duration::from_secs(3600),
            )
            .expect("decide");
        let sc = mcp.completed(i as i64);
        assert_eq!(sc["http"]["status"], 200);
        latency.push(target.arrival(&tag) - committed);
    }

    const DIRECT: &str = "direct ureq GET, start -> arrival (peer)";
    common::emit_samples(DIRECT, Side::Peer, &direct);
    common::emit_samples("tools/call sent -> pending seen", Side::Alone, &find);
    common::emit_samples(
        "signed decision sent -> request arrived",
        Side::Vs(DIRECT),
        &latency,
    );
    let (d50, d95, dmean) = stats(direct);
    let (f50, f95, fmean) = stats(find);
    let (l50, l95, lmean) = stats(latency);
    println!("approval committed -> request at the target, {n} actions (ms)");
    println!("{:<52} {:>9} {:>9} {:>9}", "", "p50", "p95", "mean");
    println!(
        "{:<52} {:>9.3} {:>9.3} {:>9.3}",
        "direct ureq GET, start -> arrival (peer floor)", d50, d95, dmean
    );
    println!(
        "{:<52} {:>9.3} {:>9.3} {:>9.3}",
        "tools/call sent -> pending seen by the approver", f50, f95, fmean
    );
    println!(
        "{:<52} {:>9.3} {:>9.3} {:>9.3}",
        "signed decision sent -> request arrived (agent)", l50, l95, lmean
    );
    println!("ratio vault / direct at p50: {:.1}x", l50 / d50);
    let goal = 3.0;
    println!(
        "p95 {l95:.3} ms, goal <= {goal} ms: {}",
        if l95 <= goal { "met" } else { "NOT met" }
    );
    common::emit_goal(
        &format!("decision -> arrival p95 <= {goal} ms"),
        l95,
        "ms",
        l95 <= goal,
    );
}
