//! Custody: no process the AI client can reach holds a key or a secret. Each test plays the
//! attacker as a real second process: a shell of the same non-root uid (ptrace, `/proc`, keyrings,
//! files, `vault mcp`'s memory, every candidate key against `vault.db`), a peer of another uid at
//! the socket, an impostor listening on the socket path, and `kill -9` of the agent mid-dispatch.
//! Run as root (CI), the same-uid test re-runs itself as the unprivileged user `vaulttest`
//! (`.ci/run` creates it) and the other-uid test switches to that user and to `nobody`.
mod support;

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::mcp::McpProc;
use support::memory::{contains, ptrace_attach, read_memory};
use support::target::HttpTarget;
use support::uid::{as_user, is_root, run_unprivileged, test_user, USER};
use support::*;

const DECOY: &str = "DECOY_custody_tok_4c1e8a93d2";
/// A vault with a bearer decoy bound to `target`, and a `vault mcp` whose `http_request` waits.
fn flow_in_progress(tag: &str, target: &HttpTarget) -> (TestVault, McpProc, String) {
    let mut v = TestVault::init(tag);
    v.add_bearer("api", &format!("http://127.0.0.1:{}", target.port), DECOY);
    let mut mcp = McpProc::spawn(v.command(&["mcp"]));
    mcp.initialize();
    mcp.send(&json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "http_request", "arguments": {"credential": "api", "method": "GET", "url": format!("http://127.0.0.1:{}/x", target.port), "wait_s": 60}}}));
    let action = v.wait_pending(1)[0]["action_id"]
        .as_str()
        .unwrap()
        .to_owned();
    (v, mcp, action)
}

/// Every 64-hex-digit run in `bytes`: what a raw SQLCipher key looks like written down.
fn hex_candidates(bytes: &[u8], out: &mut std::collections::BTreeSet<String>) {
    let mut run = 0usize;
    for (i, b) in bytes.iter().enumerate() {
        if b.is_ascii_hexdigit() {
            run += 1;
            if run >= 64 {
                out.insert(String::from_utf8_lossy(&bytes[i + 1 - 64..=i]).to_lowercase());
            }
        } else {
            run = 0;
        }
    }
}

fn opens_with(db: &std::path::Path, hex_key: &str) -> bool {
    let Ok(c) =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
    else {
        return false;
    };
    let _ = c.execute_batch("PRAGMA cipher_log_level = NONE;");
    c.execute_batch(&format!("PRAGMA key = \"x'{hex_key}'\";"))
        .is_ok()
        && c.execute_batch(agent_vault::store::PAGE_FORMAT_PRAGMAS)
            .is_ok()
        && c.query_row("SELECT count(*) FROM sqlite_master", [], |r| {
            r.get::<_, i64>(0)
        })
        .is_ok()
}

fn files_of(dirs: &[std::path::PathBuf]) -> Vec<std::path::PathBuf> {
    // Only what this user owns (the vault runs as this user here; a root-owned CI log is not
    // its doing), and not a checkout or build directory that happens to sit under /tmp: those
    // hold this test's own decoy (its source, its binaries).
    use std::os::unix::fs::MetadataExt;
    let uid = rustix::process::getuid().as_raw();
    let exe = std::env::current_exe().unwrap();
    let skip: Vec<std::path::PathBuf> = [
        Some(std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))),
        exe.ancestors().nth(3).map(std::path::Path::to_owned),
    ]
    .into_iter()
    .flatten()
    .collect();
    let mut out = Vec::new();
    let mut stack: Vec<_> = dirs.to_vec();
    while let Some(d) = stack.pop() {
        if skip.iter().any(|s| d.starts_with(s)) {
            continue;
        }
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let Ok(t) = e.file_type() else { continue };
            if t.is_dir() {
                stack.push(e.path());
            } else if t.is_file() && e.metadata().is_ok_and(|m| m.uid() == uid) {
                out.push(e.path());
            }
        }
    }
    out
}

#[test]
fn a_same_uid_shell_gets_no_key_and_no_secret() {
    if !run_unprivileged("a_same_uid_shell_gets_no_key_and_no_secret") {
        return;
    }
    assert!(!is_root(), "this part must run unprivileged");
    let target = HttpTarget::start(DECOY);
    let (mut v, mcp, _action) = flow_in_progress("sameuid", &target);
    let agent = v.agent_pid().expect("the agent runs");
    let key = v.master_hex();
    let raw_key = hex::decode(&key).unwrap();

    // ptrace: refused on the agent; the control (vault mcp, an ordinary process) shows the
    // attempt itself works, unless yama forbids it for every process.
    assert_eq!(
        ptrace_attach(agent),
        Err(libc::EPERM),
        "ptrace attach to the agent"
    );
    if matches!(agent_vault::sys::ptrace_scope(), None | Some(0)) {
        assert_eq!(
            ptrace_attach(mcp.pid()),
            Ok(()),
            "control: attach to vault mcp"
        );
    }
    // /proc: the agent's memory and environment cannot be read.
    for f in ["mem", "environ"] {
        let r = std::fs::File::open(format!("/proc/{agent}/{f}")).and_then(|mut h| {
            let mut b = [0u8; 16];
            h.read(&mut b)
        });
        assert!(r.is_err(), "/proc/{agent}/{f} was readable");
    }
    assert!(
        read_memory(agent).is_err(),
        "the agent's memory was readable"
    );
    // No kernel keyring entry names the vault.
    let keys = std::fs::read_to_string("/proc/keys").unwrap_or_default();
    let vault_id = std::fs::read_to_string(v.vault_dir().join("vault.id")).unwrap();
    assert!(
        !keys.contains(vault_id.trim()),
        "a keyring holds the vault: {keys}"
    );
    if let Ok(out) = Command::new("keyctl").args(["show", "@u"]).output() {
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(!text.contains("agent-vault"), "keyctl shows: {text}");
    }
    // What the attacker can read: files under the vault dir, /tmp, $XDG_RUNTIME_DIR, and the
    // memory and environment of `vault mcp` (the AI client's own child).
    let mut dirs = vec![v.vault_dir(), std::env::temp_dir()];
    if let Some(x) = std::env::var_os("XDG_RUNTIME_DIR") {
        dirs.push(x.into());
    }
    let mut candidates = std::collections::BTreeSet::new();
    for f in files_of(&dirs) {
        let Ok(bytes) = std::fs::read(&f) else {
            continue;
        };
        assert!(
            !contains(&bytes, &raw_key),
            "{} holds the master key",
            f.display()
        );
        assert!(
            !contains(&bytes.to_ascii_lowercase(), key.as_bytes()),
            "{} holds the master key (hex)",
            f.display()
        );
        assert_no_leak(&f.display().to_string(), &bytes, DECOY);
        hex_candidates(&bytes, &mut candidates);
    }
    let mem = read_memory(mcp.pid()).expect("vault mcp's memory is readable to its user");
    assert!(mem.len() > 100_000, "read {} bytes of vault mcp", mem.len());
    assert!(
        !contains(&mem, &raw_key),
        "vault mcp's memory holds the master key"
    );
    assert!(
        !contains(&mem.to_ascii_lowercase(), key.as_bytes()),
        "vault mcp's memory holds the key in hex"
    );
    assert_no_leak("vault mcp's memory", &mem, DECOY);
    hex_candidates(&mem, &mut candidates);
    let environ = std::fs::read(format!("/proc/{}/environ", mcp.pid())).unwrap();
    hex_candidates(&environ, &mut candidates);
    // Every candidate key against vault.db: none opens it (the test's own key does).
    assert!(
        opens_with(&v.vault_dir().join("vault.db"), &key),
        "control: the real key opens it"
    );
    let tried = candidates.len();
    for c in &candidates {
        assert!(
            !opens_with(&v.vault_dir().join("vault.db"), c),
            "{c} opens vault.db"
        );
    }
    eprintln!(
        "tried {tried} candidate keys from files and vault mcp's memory; none opened vault.db"
    );
    assert_eq!(
        target.requests().len(),
        0,
        "nothing was sent while the action waited"
    );
    drop(mcp);
}

#[test]
fn peers_of_another_uid_are_refused_at_the_socket() {
    if !is_root() {
        // A test that cannot run here must not pass: say so, unless told to skip on purpose.
        assert!(
            std::env::var_os("AV_SKIP_ROOT_TESTS").is_some(),
            "this test switches to other uids and needs root (CI runs it as root); set AV_SKIP_ROOT_TESTS=1 to skip it on purpose"
        );
        eprintln!("skipped on purpose (AV_SKIP_ROOT_TESTS): switching to other uids needs root");
        return;
    }
    test_user();
    let dir = TempDir::new("otheruid");
    let vault_dir = dir.path().join("vault");
    let chown = |p: &std::path::Path| {
        assert!(Command::new("chown")
            .args(["-R", USER])
            .arg(p)
            .status()
            .unwrap()
            .success());
    };
    chown(dir.path());
    let mut init = as_user(USER, bin())
        .args(["init", "--passphrase-stdin"])
        .env("VAULT_DIR", &vault_dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    writeln!(init.stdin.take().unwrap(), "{PASSPHRASE}").unwrap();
    let out = init.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let socket = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .find(|w| w.ends_with(".sock;") || w.ends_with(".sock"))
        .map(|w| w.trim_end_matches(';').to_owned())
        .expect("init printed the socket");
    let agent = |what: &str| {
        let out = as_user(USER, bin())
            .args(["doctor", "--json"])
            .env("VAULT_DIR", &vault_dir)
            .output()
            .unwrap();
        agent_pid_in(&String::from_utf8_lossy(&out.stdout))
            .unwrap_or_else(|| panic!("{what}: the vault agent no longer runs"))
    };
    let pid = agent("before");
    let status = || -> Value {
        let out = as_user(USER, bin())
            .args(["status", "--json"])
            .env("VAULT_DIR", &vault_dir)
            .output()
            .unwrap();
        serde_json::from_slice(&out.stdout).expect("vault status --json")
    };
    let rows_before = status()["journal_head"].as_u64().unwrap();
    // What another uid sends: this build's hello, then a request that would change state.
    let v = agent_vault::agent::protocol::VERSION;
    let frames = format!(
        "{{\"id\":1,\"req\":{{\"op\":\"hello\",\"v\":{v},\"role\":\"cli\"}}}}\n\
         {{\"id\":2,\"req\":{{\"op\":\"lock\"}}}}\n\
         {{\"id\":3,\"req\":{{\"op\":\"pause\",\"reason\":\"another uid\"}}}}\n"
    );
    // As root (another uid, which can traverse the 0700 directory): the agent's peer check
    // closes the connection without a word: an end of file, not a silence.
    let mut s = UnixStream::connect(&socket).expect("root reaches the socket");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let t0 = std::time::Instant::now();
    let _ = s.write_all(frames.as_bytes());
    let mut answer = Vec::new();
    let read = s.read_to_end(&mut answer);
    // Closed: an end of file, or a reset (the frames were left unread); not a time-out.
    let closed = match &read {
        Ok(_) => true,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
    };
    assert!(
        closed && t0.elapsed() < Duration::from_secs(5),
        "the connection was not closed ({read:?} after {:?})",
        t0.elapsed()
    );
    assert!(
        answer.is_empty(),
        "the agent answered another uid: {}",
        String::from_utf8_lossy(&answer)
    );
    // As nobody: the 0700 directory stops it before the socket.
    let probe = format!(
        "import socket,sys\ns=socket.socket(socket.AF_UNIX)\ntry:\n s.connect({socket:?})\nexcept OSError as e:\n print('refused', e.errno); sys.exit(0)\ns.sendall({frames:?}.encode())\nprint('answer', s.recv(100))\n"
    );
    let out = as_user("nobody", "/usr/bin/python3")
        .arg("-c")
        .arg(&probe)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("refused 13") || text.contains("answer b''"),
        "nobody: {text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Judged from outside: the same agent runs, unpaused, and nothing of it was journaled.
    assert_eq!(agent("after"), pid, "the agent was replaced");
    let after = status();
    assert!(after["paused"].is_null(), "paused by another uid: {after}");
    assert_eq!(
        after["journal_head"].as_u64().unwrap(),
        rows_before,
        "another uid's requests were journaled: {after}"
    );
    let _ = as_user(USER, bin())
        .arg("lock")
        .env("VAULT_DIR", &vault_dir)
        .output();
}

/// An impostor on the socket path, a process of its own (`support/impostor.py`, the same uid):
/// records every line, answers hello as an agent would, offers a harmless-looking `ok`, and
/// would record any decision it got. Killed when dropped.
struct Impostor(std::process::Child);

impl Drop for Impostor {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn impostor(socket: &std::path::Path, record: std::path::PathBuf) -> Impostor {
    let mut child = Command::new(system_python())
        .arg(support_file("impostor.py"))
        .arg(socket)
        .arg(&record)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(
        line.trim(),
        "listening",
        "the impostor did not bind {}",
        socket.display()
    );
    Impostor(child)
}

fn heard(record: &std::path::Path) -> String {
    std::fs::read_to_string(record).unwrap_or_default()
}

#[track_caller]
fn assert_heard_no_secret(record: &std::path::Path, secrets: &[&str]) {
    let heard = heard(record);
    for secret in secrets {
        assert!(
            !heard.contains(secret),
            "the impostor heard a secret: {heard}"
        );
        assert!(
            !heard.contains(&hex::encode(secret)),
            "the impostor heard a secret in hex: {heard}"
        );
    }
}

#[test]
fn an_impostor_on_the_socket_path_gets_no_key_no_secret_and_no_signature() {
    // The impostor is a second process of the same non-root uid (CI: the test user).
    if !run_unprivileged("an_impostor_on_the_socket_path_gets_no_key_no_secret_and_no_signature") {
        return;
    }
    let mut v = TestVault::init("impostor");
    let key = v.master_hex();
    v.run(&["lock"], None).ok();
    let socket = agent_vault::agent::socket::socket_path(
        std::fs::read_to_string(v.vault_dir().join("vault.id"))
            .unwrap()
            .trim(),
    );
    let record = v.dir.path().join("impostor.log");
    let secrets = [key.as_str(), PASSPHRASE, DECOY];
    // 1. Listening before `vault unlock`: unlock stops a running agent by signal to the holder
    //    of its lock (here nobody), never through the socket, then hands the key to a new agent
    //    over its inherited channel; the impostor hears nothing at all.
    let _imp = impostor(&socket, record.clone());
    v.run(
        &["unlock", "--passphrase-stdin"],
        Some(&format!("{PASSPHRASE}\n")),
    )
    .ok();
    assert_eq!(heard(&record), "", "the impostor heard something");
    let real = v.agent_pid().expect("the real agent runs");
    // 2. The path hijacked while the real agent runs: `vault add` hands its secret only over the
    //    encrypted channel, which only a holder of the key completes; nothing else is sent.
    std::fs::write(&record, "").unwrap();
    let _imp2 = impostor(&socket, record.clone());
    let r = v.run_pp(
        &[
            "add",
            "http",
            "stolen",
            "--host",
            "api.example.com",
            "--bearer",
            "--secret-stdin",
        ],
        Some(&format!("{DECOY}\n")),
    );
    assert_ne!(r.code, 0, "add must refuse an unproven agent: {}", r.stdout);
    assert!(r.stderr.contains("not this vault's agent"), "{}", r.stderr);
    assert_heard_no_secret(&record, &secrets);
    // 3. With only the impostor left, `vault approve` asks it for a proof, replaces it, and signs
    //    only what the real agent holds (here nothing: the action it would offer does not exist).
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(real as i32).unwrap(),
        rustix::process::Signal::TERM,
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while agent_vault::agent::is_running(&agent_vault::paths::VaultPaths::new(v.vault_dir())) {
        assert!(
            Instant::now() < deadline,
            "the agent did not stop on SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let _imp3 = impostor(&socket, record.clone());
    let r = v.run(
        &[
            "approve",
            "--id",
            "act_00000000000000000000000000000000",
            "--approve",
            "--passphrase-stdin",
        ],
        Some(&format!("{PASSPHRASE}\n")),
    );
    assert_ne!(r.code, 0, "nothing to approve: {}", r.stdout);
    let h = heard(&record);
    assert!(
        !h.contains("\"op\":\"decide\"") && !h.contains("signature"),
        "the impostor got a decision: {h}"
    );
    assert_heard_no_secret(&record, &secrets);
    let doctor = v.run(&["doctor", "--json"], None);
    assert!(
        doctor.stdout.contains("not dumpable"),
        "a real agent runs again: {}",
        doctor.stdout
    );
}

#[test]
fn an_agent_killed_mid_dispatch_is_indeterminate_then_reaped() {
    // The target holds the request (answers after 60 s): the agent is killed while it waits.
    let target = HttpTarget::start(DECOY);
    let mut v = TestVault::init("kill");
    v.run_pp(
        &[
            "add",
            "http",
            "api",
            "--host",
            &format!("http://127.0.0.1:{}", target.port),
            "--bearer",
            "--secret-stdin",
            "--approval",
            "never",
        ],
        Some(&format!("{DECOY}\n")),
    )
    .ok();
    let mut mcp = McpProc::spawn(v.command(&["mcp"]));
    mcp.initialize();
    let agent = v.agent_pid().expect("the agent runs");
    mcp.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "http_request", "arguments": {"credential": "api", "method": "POST", "url": format!("http://127.0.0.1:{}/slow?s=60", target.port), "body": "x", "wait_s": 60}}}));
    let deadline = Instant::now() + Duration::from_secs(10);
    while target.requests().is_empty() {
        assert!(
            Instant::now() < deadline,
            "the request never reached the target"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(agent as i32).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    let (r, _) = mcp.until_id(&json!(3), Duration::from_secs(10));
    let sc = &r["result"]["structuredContent"];
    assert_eq!(sc["state"], "indeterminate", "{r}");
    assert_eq!(r["result"]["isError"], true);
    let action = sc["action_id"].as_str().unwrap().to_owned();
    // The next agent finds the action dispatched with nobody running it: indeterminate.
    v.run(
        &["unlock", "--passphrase-stdin"],
        Some(&format!("{PASSPHRASE}\n")),
    )
    .ok();
    let state: String = v
        .open_db()
        .store
        .conn()
        .query_row("SELECT state FROM actions WHERE id = ?1", [&action], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(state, "indeterminate");
    let verify = v.run(&["verify", "--json"], None).ok();
    assert!(verify.stdout.contains("\"ok\":true"), "{}", verify.stdout);
    drop(mcp);
}

#[test]
fn unlock_refuses_a_database_whose_approver_key_was_swapped() {
    let mut v = TestVault::init("swapped");
    {
        let vault = v.open_db();
        let other = agent_vault::keys::ApproverKey::generate();
        vault
            .store
            .conn()
            .execute(
                "UPDATE meta SET value = ?1 WHERE key = 'approver_public_key'",
                [other.public_hex()],
            )
            .unwrap();
    }
    // A new agent (the one init started is replaced) must refuse it.
    let r = v.run(
        &["unlock", "--restart", "--passphrase-stdin"],
        Some(&format!("{PASSPHRASE}\n")),
    );
    assert_ne!(r.code, 0, "unlock must refuse: {}", r.stdout);
    assert!(r.stderr.contains("approver"), "{}", r.stderr);
    assert!(v.agent_pid().is_none(), "no agent runs on a swapped key");
}

#[test]
fn the_agent_ends_with_its_lifetime_and_tool_calls_then_say_locked() {
    let mut v = TestVault::init("lifetime");
    v.run(
        &["unlock", "--restart", "--passphrase-stdin", "--for", "2s"],
        Some(&format!("{PASSPHRASE}\n")),
    )
    .ok();
    assert!(v.agent_pid().is_some());
    std::thread::sleep(Duration::from_secs(3));
    let deadline = Instant::now() + Duration::from_secs(10);
    while v.agent_pid().is_some() {
        assert!(Instant::now() < deadline, "the agent outlived its lifetime");
        std::thread::sleep(Duration::from_millis(200));
    }
    let mut mcp = McpProc::spawn(v.command(&["mcp"]));
    mcp.initialize();
    let r = mcp.call(1, "list_credentials", json!({}));
    assert_eq!(
        r["result"]["structuredContent"]["error"]["code"], "locked",
        "{r}"
    );
    assert!(r["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("vault unlock"));
    mcp.finish(Duration::from_secs(10));
    // The journal says why it locked.
    let reason = support::journal::last_lock_reason(&v);
    assert_eq!(reason, "lifetime ended");
}
