//! Benchmark: decision → request at the target, with a security-key touch and without. One vault,
//! two credentials on one target: `api` (approval `each`) and `keyed` (`each`, `--presence key`,
//! a software authenticator registered: 1Password's passkey-authenticator behind the CTAP2 bytes a
//! USB key carries). Each round approves one action of each, alternated, with the PIN. Without a
//! touch: the signed decision sent → arrival. With one: the touch returned → arrival (what the
//! agent adds: checking the assertion and the counter, in the decision's transaction), and the
//! authenticator's own time (the challenge handed over → the assertion back) apart, since a USB
//! key's is the person's finger.
//!
//! Run: `cargo bench --bench touch_latency`. `-- --quick`: a few rounds, checks each ran.
mod common;

#[allow(dead_code)]
#[path = "../tests/support/soft_key.rs"]
mod soft_key;

use agent_vault::agent::client::Proof;
use agent_vault::agent::protocol::{Reply, Request};
use agent_vault::approvals::{touch, Verdict};
use agent_vault::credentials::{self, Approval, NewCredential};
use agent_vault::wire::touch::{Presence, TouchProof};
use agent_vault::wire::{Op, Secret};
use common::{stats, BenchVault, FastTarget, Mcp, Side};
use serde_json::json;
use std::time::{Duration, Instant};

fn pending(bv: &mut BenchVault, url: &str) -> agent_vault::agent::protocol::ApprovalView {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let Reply::Pending(p) = bv.approver.call(Request::Pending).expect("pending") else {
            panic!("pending")
        };
        if let Some(v) = p.into_iter().find(|v| v.action.summary.contains(url)) {
            return v;
        }
        assert!(Instant::now() < deadline, "{url} never became pending");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn pin() -> Proof {
    Proof::Pin(Secret::new(common::PIN.as_bytes().to_vec()))
}

fn main() {
    let quick = common::quick();
    let n = common::size(quick, 200, 3);
    let target = FastTarget::start();
    let mut bv = BenchVault::new("touch-latency", target.port, Approval::Each);
    let vault_id = bv.cli.vault_id.clone();
    let mut key = soft_key::SoftKey::es256();
    let reg = agent_vault::fido::register(
        &mut key,
        &vault_id,
        "bench-registration-01",
        &[],
        &mut soft_key::no_pin,
    )
    .expect("registration");
    let request = touch::sign_key_change(
        &bv.keys.approver,
        &vault_id,
        Op::AddKey,
        touch::registered(&reg, "main"),
    );
    match bv.cli.call(Request::AddApproverKey { request }) {
        Ok(Reply::ApproverKeys(k)) => assert_eq!(k.len(), 1),
        other => panic!("registering the key: {other:?}"),
    }
    let keyed = NewCredential {
        id: credentials::new_id("cred"),
        profile: "default".into(),
        name: "keyed".into(),
        approval: Approval::Each,
        target: common::loopback_bearer(target.port, Presence::Key),
        secret: Secret::new(b"DECOY_bench_keyed_7d1e".to_vec()),
    };
    common::add_signed(&mut bv.cli, &bv.keys, keyed);
    let mut mcp = Mcp::spawn(&bv.paths);

    let (mut plain, mut touched, mut authenticator) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..n {
        // Without a touch.
        let tag = format!("p{i}");
        let url = format!("{}/p?t={tag}", target.base());
        mcp.http_request(2 * i as i64, &url, 60);
        let view = pending(&mut bv, &url);
        let sent = Instant::now();
        bv.approver
            .decide(
                &bv.keys.approver,
                &view,
                &Verdict::Approve,
                pin(),
                Duration::from_secs(60),
            )
            .expect("decide");
        assert_eq!(mcp.completed(2 * i as i64)["http"]["status"], 200);
        plain.push(target.arrival(&tag) - sent);

        // With one.
        let tag = format!("k{i}");
        let url = format!("{}/k?t={tag}", target.base());
        let id = 2 * i as i64 + 1;
        mcp.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "http_request", "arguments": {"credential": "keyed", "method": "GET", "url": url, "wait_s": 60}}}));
        let view = pending(&mut bv, &url);
        assert!(
            view.touch_keys.is_some(),
            "the keyed credential needs a touch"
        );
        let mut returned = Instant::now();
        let mut own = Duration::ZERO;
        let mut toucher = |c: &[u8; 32], allow: &[Vec<u8>]| -> Result<TouchProof, String> {
            let t0 = Instant::now();
            let t = agent_vault::fido::touch(&mut key, c, allow, &mut soft_key::no_pin)
                .map_err(|e| e.to_string())?;
            returned = Instant::now();
            own = returned - t0;
            Ok(TouchProof {
                credential_id: hex::encode(t.credential_id),
                authenticator_data: hex::encode(t.auth_data),
                signature: hex::encode(t.signature),
            })
        };
        bv.approver
            .decide_touched(
                &bv.keys.approver,
                &view,
                &Verdict::Approve,
                pin(),
                Duration::from_secs(60),
                Some(&mut toucher),
            )
            .expect("decide with a touch");
        assert_eq!(mcp.completed(id)["http"]["status"], 200);
        touched.push(target.arrival(&tag) - returned);
        authenticator.push(own);
    }
    assert_eq!(target.count(), 2 * n, "every approved action ran once");

    const PLAIN: &str = "signed decision sent -> arrival, no touch (peer)";
    common::emit_samples(PLAIN, Side::Peer, &plain);
    common::emit_samples(
        "touch returned -> arrival, --presence key",
        Side::Vs(PLAIN),
        &touched,
    );
    common::emit_samples(
        "software authenticator's own time (challenge -> assertion)",
        Side::Alone,
        &authenticator,
    );
    let (p50, p95, _) = stats(plain);
    let (t50, t95, _) = stats(touched);
    let (a50, a95, _) = stats(authenticator);
    println!("decision -> request at the target, {n} actions each (ms)");
    println!("{:<52} {:>9} {:>9}", "", "p50", "p95");
    println!("{:<52} {:>9.3} {:>9.3}", "no touch (peer)", p50, p95);
    println!(
        "{:<52} {:>9.3} {:>9.3}",
        "with a touch (after the key answered)", t50, t95
    );
    println!(
        "{:<52} {:>9.3} {:>9.3}",
        "the software authenticator itself", a50, a95
    );
    println!("ratio touch / none at p95: {:.2}x", t95 / p95);
}
