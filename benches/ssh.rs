//! Benchmark: an SSH command through `vault mcp` (signed `--approval never` credential, ed25519
//! key, a real OpenSSH sshd on loopback) — the first command of a session (TCP, key exchange,
//! host-key pin check, login) and the next ones on the reused connection — against the OpenSSH
//! `ssh` client running the same command without and with ControlMaster, in the same run. Then
//! the peak RSS (VmHWM) of the vault agent (which runs the executors) once it drained a 1 GiB stdout flood, and the time it
//! takes, against `ssh` piping the same flood to /dev/null.
//!
//! Run: `cargo bench --bench ssh` (as root: it starts sshd; `openssh-server` and
//! `openssh-client` installed, as `.ci/run` does). Goals: reused ≤ the ControlMaster figure; peak
//! RSS under the 1 GiB flood ≤ 64 MiB. `-- --quick`: a few commands of each and an 8 MiB flood,
//! checks only that every command exited 0 with its output (what CI runs).
mod common;
#[path = "../tests/support/mod.rs"]
mod support;

use agent_vault::agent::client::stop_running;
use agent_vault::agent::protocol::{Reply, Request};
use agent_vault::credentials::{self, Approval, NewCredential, SshTarget, Target};
use agent_vault::keys::Passphrase;
use agent_vault::paths::VaultPaths;
use agent_vault::vault::Vault;
use common::{stats, Mcp, Side};
use serde_json::{json, Value};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::ssh::{keygen, vm_hwm_kib};
use support::sshd::Sshd;

/// `echo hi-N`: every call differs, so none is answered from the replay window.
const COMMAND: &str = "echo hi";
/// The flood's size: 1024 MiB (8 in quick mode); `SSH_BENCH_FLOOD_MIB` overrides it.
fn flood_bytes(quick: bool) -> u64 {
    std::env::var("SSH_BENCH_FLOOD_MIB")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(common::size(quick, 1024, 8))
        << 20
}

fn exec(mcp: &mut Mcp, id: i64, command: &str, timeout_s: u64) -> Value {
    mcp.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "ssh_exec", "arguments": {"credential": "box", "command": command, "timeout_s": timeout_s, "wait_s": 120}}}));
    let r = mcp.response(&json!(id));
    let sc = r["result"]["structuredContent"].clone();
    assert_eq!(sc["state"], "completed", "{r}");
    assert_eq!(sc["ssh"]["exit_status"], 0, "{r}");
    assert_eq!(sc["replayed"], false, "a stored result, nothing ran: {r}");
    sc
}

/// A warm session whose vault is already open (list_credentials), so the next call's time is
/// the SSH work plus the vault's own per-call work.
fn session(paths: &VaultPaths) -> Mcp {
    let mut mcp = Mcp::spawn(paths);
    mcp.send(&json!({"jsonrpc": "2.0", "id": 0, "method": "tools/call", "params": {"name": "list_credentials", "arguments": {}}}));
    mcp.response(&json!(0));
    mcp
}

fn ssh_cmd(key: &std::path::Path, port: u16, extra: &[&str]) -> Command {
    let mut c = Command::new("ssh");
    c.args(["-q", "-i"])
        .arg(key)
        .args([
            "-o",
            "BatchMode=yes",
            "-o",
            "StrictHostKeyChecking=no",
            "-o",
            "UserKnownHostsFile=/dev/null",
            "-p",
            &port.to_string(),
        ])
        .args(extra);
    c
}

fn time_ssh(key: &std::path::Path, port: u16, extra: &[&str], command: &str) -> Duration {
    let t = Instant::now();
    let out = ssh_cmd(key, port, extra)
        .args(["root@127.0.0.1", command])
        .stderr(Stdio::null())
        .output()
        .expect("ssh (apt-get install -y openssh-client)");
    let took = t.elapsed();
    assert!(out.status.success(), "ssh failed");
    took
}

fn row(what: &str, side: Side<'_>, v: Vec<Duration>) -> f64 {
    common::emit_samples(what, side, &v);
    let (p50, p95, mean) = stats(v);
    println!("{what:<58} {p50:>9.2} {p95:>9.2} {mean:>9.2}");
    p50
}

fn main() {
    let quick = common::quick();
    let (firsts_n, reused_n, plain_n) = common::size(quick, (10, 100, 20), (2, 5, 2));
    let dir = std::env::temp_dir().join(format!("av-bench-ssh-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let key = keygen(&dir, "id_ed25519", &["-t", "ed25519"], "");
    let sshd = Sshd::start_with(&key.public, "LogLevel VERBOSE\nMaxStartups 100");
    let paths = VaultPaths::new(dir.join("vault"));
    let pass = Passphrase::from_string(common::PASSPHRASE.into());
    let (vault, keys) = Vault::init(paths.clone(), &pass).expect("init");
    let vault_id = vault.vault_id.clone();
    drop(vault);
    common::start_agent(&paths, &vault_id, &keys);
    let mut cli = common::secure_cli(&paths, &keys);
    let (secret, auth) =
        credentials::load_private_key(&key.private, || unreachable!("no passphrase")).unwrap();
    let new = NewCredential {
        id: credentials::new_id("cred"),
        profile: "default".into(),
        name: "box".into(),
        approval: Approval::Never,
        target: Target::Ssh(SshTarget {
            presence: agent_vault::wire::touch::Presence::None,
            host: "127.0.0.1".into(),
            port: sshd.port,
            user: "root".into(),
            host_key: sshd.host_key_fingerprint.clone(),
            auth,
            allow_commands: vec![],
        }),
        secret,
    };
    common::add_signed(&mut cli, &keys, new);
    let agent_pid = match cli.call(Request::Status).expect("status") {
        Reply::Status(s) => s.pid,
        other => panic!("status: {other:?}"),
    };

    // The vault: the first command of a fresh session, then commands on its connection.
    let mut firsts = Vec::new();
    let mut mcp = None;
    for i in 0..firsts_n {
        let mut m = session(&paths);
        let t = Instant::now();
        let sc = exec(&mut m, 1, &format!("{COMMAND}-{i}"), 10);
        firsts.push(t.elapsed());
        assert_eq!(sc["ssh"]["stdout"]["untrusted_text"], format!("hi-{i}\n"));
        if i + 1 == firsts_n {
            mcp = Some(m);
        }
    }
    let mut mcp = mcp.unwrap();
    let mut reused = Vec::new();
    for i in 0..reused_n {
        let t = Instant::now();
        exec(&mut mcp, 100 + i as i64, &format!("{COMMAND}-r{i}"), 10);
        reused.push(t.elapsed());
    }
    let logins = sshd.log().matches("Accepted publickey").count();
    drop(mcp);

    // OpenSSH: a new connection per command, and a ControlMaster connection reused.
    let plain: Vec<Duration> = (0..plain_n)
        .map(|i| time_ssh(&key.private, sshd.port, &[], &format!("{COMMAND}-p{i}")))
        .collect();
    let sock = dir.join("cm.sock");
    let cm = format!("ControlPath={}", sock.display());
    let st = ssh_cmd(
        &key.private,
        sshd.port,
        &["-o", "ControlMaster=yes", "-o", &cm],
    )
    .args(["-fN", "root@127.0.0.1"])
    .status()
    .unwrap();
    assert!(st.success(), "ControlMaster start");
    let muxed: Vec<Duration> = (0..reused_n)
        .map(|i| {
            time_ssh(
                &key.private,
                sshd.port,
                &["-o", &cm],
                &format!("{COMMAND}-m{i}"),
            )
        })
        .collect();

    println!("`{COMMAND}-N` over SSH on loopback (ms)");
    println!("{:<58} {:>9} {:>9} {:>9}", "", "p50", "p95", "mean");
    let new = format!("ssh, new connection (peer, n={plain_n})");
    let master = format!("ssh -o ControlPath, reused master (peer, n={reused_n})");
    let f = row(
        &format!("vault ssh_exec, first of a session (n={firsts_n})"),
        Side::Vs(&new),
        firsts,
    );
    let r = row(
        &format!("vault ssh_exec, reused connection (n={reused_n})"),
        Side::Vs(&master),
        reused,
    );
    let p = row(&new, Side::Peer, plain);
    let c = row(&master, Side::Peer, muxed);
    println!(
        "sshd logins for the vault's {} commands: {logins} (one per session)",
        firsts_n + reused_n
    );
    println!(
        "ratio vault first / ssh new connection at p50: {:.2}x",
        f / p
    );
    println!(
        "ratio vault reused / ssh ControlMaster at p50: {:.2}x",
        r / c
    );
    println!("ratio vault reused / vault first at p50: {:.2}x", r / f);
    println!(
        "goal reused <= ControlMaster: {}",
        if r <= c { "met" } else { "NOT met" }
    );
    common::emit_goal("reused p50 <= ssh ControlMaster p50", r / c, "x", r <= c);

    // 1 GiB of stdout: drained, counted, 1 MiB kept, 64 KiB returned.
    let bytes = flood_bytes(quick);
    let flood = format!("yes 0123456789abcdef | head -c {bytes}");
    let t = Instant::now();
    let out = ssh_cmd(&key.private, sshd.port, &["-o", &cm])
        .args(["root@127.0.0.1", &flood])
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(out.success());
    let peer = t.elapsed();
    let mut m = session(&paths);
    let t = Instant::now();
    let sc = exec(&mut m, 2, &flood, 300);
    let took = t.elapsed();
    let hwm = vm_hwm_kib(agent_pid);
    assert_eq!(sc["ssh"]["stdout_bytes_seen"], bytes);
    assert_eq!(sc["ssh"]["stdout_bytes_retained"], 1 << 20);
    println!(
        "{} MiB stdout flood: vault {:.1} s ({:.0} MB/s), ssh > /dev/null {:.1} s ({:.0} MB/s, peer), ratio {:.1}x",
        bytes >> 20,
        took.as_secs_f64(),
        bytes as f64 / 1e6 / took.as_secs_f64(),
        peer.as_secs_f64(),
        bytes as f64 / 1e6 / peer.as_secs_f64(),
        took.as_secs_f64() / peer.as_secs_f64()
    );
    println!(
        "vault agent peak RSS (VmHWM, whole run) after the flood: {hwm} KiB, goal <= 65536 KiB: {}",
        if hwm <= 64 * 1024 { "met" } else { "NOT met" }
    );
    const FLOOD_PEER: &str = "stdout flood, ssh > /dev/null (peer)";
    let mbs = |d: Duration| bytes as f64 / 1e6 / d.as_secs_f64();
    common::emit_figure(FLOOD_PEER, "MB/s", Side::Peer, mbs(peer));
    common::emit_figure(
        "stdout flood, vault ssh_exec",
        "MB/s",
        Side::Vs(FLOOD_PEER),
        mbs(took),
    );
    common::emit_figure(
        "vault agent peak RSS after the flood",
        "KiB",
        Side::Alone,
        hwm as f64,
    );
    common::emit_goal(
        "agent peak RSS under the flood <= 64 MiB",
        hwm as f64,
        "KiB",
        hwm <= 64 * 1024,
    );
    drop(m);
    let _ = ssh_cmd(&key.private, sshd.port, &["-o", &cm, "-O", "exit"])
        .arg("root@127.0.0.1")
        .stderr(Stdio::null())
        .status();
    stop_running(&paths);
    let _ = std::fs::remove_dir_all(&dir);
}
