//! Benchmark: what the placeholder swap (`vault run --env`, issue 47) adds to a tool's HTTPS
//! request. A client inside `vault run` sends an auto-approved (`--approval never`, signed) GET
//! with the placeholder through the proxy: a `CONNECT`, TLS ended by the proxy with the vault's
//! leaf, the request read, the `swap` to the agent (validation, the action and its journal rows,
//! the claim with its durable intent row, the executor's own TLS connection to the target with
//! the secret, the scrubbed response) and written back. The peer is the same client, outside,
//! with the secret, straight to the same loopback TLS target, in the same run. The client opens
//! a new connection per request either way (the proxy answers `connection: close`), so both pay
//! one client-side TLS handshake. The target keeps a connection open for the next request, as a
//! real API does; the client does not reuse it, and the executor does (its kept connection of
//! the credential version, `src/exec/kept.rs`), so the vault's path pays the executor's own TLS
//! handshake to the target once, not per request.
//!
//! The client is `benches/swap_client.py` (the system's Python: `http.client`, `ssl`), timing
//! each request itself from connect to the last byte, so the sandbox's start is not counted.
//!
//! Run: `cargo bench --bench swap` (goal: the swap adds at most 1.5 ms at p50, the bound of
//! `http_request`, benches/http_overhead.rs). `-- --quick`: a few requests, checks only.
mod common;

use agent_vault::credentials::{Approval, Target};
use common::{stats, BenchVault, Side};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

#[path = "../src/demo/target.rs"]
#[allow(dead_code)]
mod server;

/// A throwaway CA and a leaf for 127.0.0.1 (PEM), made with rcgen.
fn certificates() -> (String, String, String) {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.distinguished_name
        .push(DnType::CommonName, "agent-vault bench CA");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().unwrap();
    let mut leaf = CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
    leaf.distinguished_name
        .push(DnType::CommonName, "127.0.0.1");
    let leaf = leaf.signed_by(&key, &issuer).unwrap();
    (ca_cert.pem(), leaf.pem(), key.serialize_pem())
}

/// The loopback HTTPS target: every request gets `{"ok":true}`, and a connection stays open for
/// its client's next request, as a real API's does.
fn target(cert: &str, key: &str) -> server::Target {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let chain = vec![CertificateDer::from_pem_slice(cert.as_bytes()).unwrap()];
    let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = Arc::new(
        rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .unwrap(),
    );
    server::Target::start_with(
        |_| server::Response::new(200, "application/json", &br#"{"ok":true}"#[..]),
        move |tcp| {
            let conn = rustls::ServerConnection::new(config.clone()).ok()?;
            Some(Box::new(rustls::StreamOwned::new(conn, tcp)) as Box<dyn server::Stream>)
        },
        true,
    )
    .expect("bind 127.0.0.1")
}

/// The client's times; its line of phase medians goes to stderr.
fn samples(out: std::process::Output, what: &str) -> Vec<Duration> {
    let stderr = String::from_utf8_lossy(&out.stderr);
    for line in stderr.lines().filter(|l| l.starts_with("phases ")) {
        eprintln!("{line}");
    }
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ms: Vec<f64> = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{what}: {e}: {}", String::from_utf8_lossy(&out.stderr)));
    ms.into_iter()
        .map(|m| Duration::from_secs_f64(m / 1000.0))
        .collect()
}

fn main() {
    let quick = common::quick();
    let (n, warmup) = common::size(quick, (300, 20), (5, 1));
    let (ca, cert, key) = certificates();
    let t = target(&cert, &key);
    let mut bound = common::loopback_bearer(t.port, agent_vault::wire::touch::Presence::None);
    if let Target::Http(h) = &mut bound {
        h.scheme = "https".into();
    }
    let bv = BenchVault::with_target("swap", bound, Approval::Never, Some(&ca));
    let client = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/swap_client.py");
    let python = ["/usr/bin/python3", "/bin/python3"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .expect("the system's python3");
    let ca_file = bv.dir.join("target-ca.pem");
    let (total, skip) = ((warmup + n).to_string(), warmup.to_string());
    let direct = Command::new(python)
        .args([client, "direct", &t.port.to_string(), &total, &skip])
        .arg(&ca_file)
        .arg(common::SECRET)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let project = bv.dir.join("home/project");
    std::fs::create_dir_all(&project).unwrap();
    let swapped = Command::new(env!("CARGO_BIN_EXE_vault"))
        .args([
            "run",
            "--env",
            "API_TOKEN=api",
            "--allow-read",
            client,
            "--",
        ])
        .args([python, client, "proxy", &t.port.to_string(), &total, &skip])
        .current_dir(&project)
        .env("VAULT_DIR", bv.paths.dir())
        .env("HOME", bv.dir.join("home"))
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let direct: Vec<Duration> = samples(direct, "direct").split_off(warmup);
    let swapped: Vec<Duration> = samples(swapped, "through the swap").split_off(warmup);
    assert_eq!(
        t.requests().len(),
        2 * (warmup + n),
        "every request reached the target once"
    );
    assert!(
        t.requests().iter().all(|r| r
            .headers
            .iter()
            .any(|(k, v)| k == "authorization" && v == &format!("Bearer {}", common::SECRET))),
        "a request reached the target without the secret"
    );
    let peer = "HTTPS GET, direct with the secret (peer)";
    common::emit_samples(peer, Side::Peer, &direct);
    common::emit_samples(
        "HTTPS GET with a placeholder, swapped by the vault",
        Side::Vs(peer),
        &swapped,
    );
    let (d50, d95, _) = stats(direct);
    let (s50, s95, _) = stats(swapped);
    println!("GET ms           p50      p95");
    println!("direct      {d50:>8.3} {d95:>8.3}");
    println!(
        "swapped     {s50:>8.3} {s95:>8.3}   (+{:.3} ms at p50)",
        s50 - d50
    );
    let added = s50 - d50;
    common::emit_goal(
        "the placeholder swap adds <= 1.5 ms at p50",
        added,
        "ms",
        added <= 1.5,
    );
}
