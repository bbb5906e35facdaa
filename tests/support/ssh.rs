//! SSH test helpers: keys made by `ssh-keygen`, credentials added through `vault add ssh`,
//! `ssh_exec` calls through `vault mcp`, a throwaway local user for password logins, peak RSS,
//! and a scan of /proc for processes a remote command left behind.
use super::mcp::McpProc;
use super::sshd::Sshd;
use super::{Run, TestVault};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A key pair written by `ssh-keygen`.
pub struct KeyPair {
    pub private: PathBuf,
    /// The `authorized_keys` line.
    pub public: String,
}

/// `ssh-keygen -t … -N passphrase` into `dir/name`.
pub fn keygen(dir: &Path, name: &str, kind: &[&str], passphrase: &str) -> KeyPair {
    let private = dir.join(name);
    let st = Command::new("ssh-keygen")
        .arg("-q")
        .args(kind)
        .args(["-N", passphrase, "-C", "vault-test", "-f"])
        .arg(&private)
        .status()
        .expect("ssh-keygen (apt-get install -y openssh-client)");
    assert!(st.success());
    let public = std::fs::read_to_string(private.with_extension("pub")).unwrap();
    KeyPair { private, public }
}

/// `vault add ssh NAME` bound to `sshd`, as `user`, with `auth` (`--key-file F` or
/// `--password-stdin`, whose stdin is `password`), pinned to `pin` (default: the real key).
/// Approval `never` is signed with the passphrase file.
#[allow(clippy::too_many_arguments)]
pub fn add_ssh(
    v: &mut TestVault,
    name: &str,
    sshd: &Sshd,
    user: &str,
    auth: &[&str],
    password: Option<&str>,
    approval: &str,
    pin: Option<&str>,
) -> Run {
    let port = sshd.port.to_string();
    let pin = pin.unwrap_or(&sshd.host_key_fingerprint).to_owned();
    let mut args = vec![
        "add",
        "ssh",
        name,
        "--host",
        "127.0.0.1",
        "--port",
        &port,
        "--user",
        user,
        "--host-key",
        &pin,
        "--approval",
        approval,
    ];
    args.extend_from_slice(auth);
    let stdin = password.map(|p| format!("{p}\n"));
    v.run_pp(&args, stdin.as_deref())
}

/// A `vault mcp` session, initialized; `VAULT_LOG` when `log` is given.
pub fn mcp(v: &TestVault, log: Option<&str>) -> McpProc {
    let mut cmd = v.command(&["mcp"]);
    if let Some(level) = log {
        cmd.env("VAULT_LOG", level);
    }
    let mut p = McpProc::spawn(cmd);
    p.initialize();
    p
}

/// Sends `ssh_exec` (id `id`) without waiting for the answer.
pub fn send_exec(p: &mut McpProc, id: i64, credential: &str, command: &str, extra: Value) {
    let mut args = json!({"credential": credential, "command": command, "wait_s": 60});
    for (k, val) in extra.as_object().unwrap() {
        args[k] = val.clone();
    }
    p.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "ssh_exec", "arguments": args}}));
}

/// The tool result of request `id`, waiting up to `limit`.
pub fn result_of(p: &mut McpProc, id: i64, limit: Duration) -> Value {
    let r = p.until_id(&json!(id), limit).0;
    assert!(r.get("error").is_none(), "JSON-RPC error: {r}");
    assert_ne!(
        r["result"]["structuredContent"]["replayed"], true,
        "a stored result was replayed: nothing ran"
    );
    r["result"].clone()
}

/// The tool results of requests `ids`, in whatever order they arrive.
pub fn results_of(p: &mut McpProc, ids: &[i64], limit: Duration) -> Vec<Value> {
    let start = Instant::now();
    let mut got: std::collections::HashMap<i64, Value> = Default::default();
    while got.len() < ids.len() {
        let left = limit.saturating_sub(start.elapsed());
        let m = p.recv(left).unwrap_or_else(|| {
            panic!(
                "no answers for {ids:?} within {limit:?}; got {:?}",
                got.keys()
            )
        });
        if let Some(id) = m["id"].as_i64().filter(|id| ids.contains(id)) {
            assert!(m.get("error").is_none(), "JSON-RPC error: {m}");
            got.insert(id, m["result"].clone());
        }
    }
    ids.iter().map(|id| got.remove(id).unwrap()).collect()
}

/// One `ssh_exec` call and its tool result.
pub fn exec(p: &mut McpProc, id: i64, credential: &str, command: &str, extra: Value) -> Value {
    send_exec(p, id, credential, command, extra);
    result_of(p, id, Duration::from_secs(60))
}

/// The `ssh` object of a result's `structuredContent`.
pub fn ssh_of(r: &Value) -> &Value {
    &r["structuredContent"]["ssh"]
}

pub fn text_of<'a>(r: &'a Value, stream: &str) -> &'a str {
    ssh_of(r)[stream]["untrusted_text"]
        .as_str()
        .unwrap_or_else(|| panic!("no {stream} text in {r}"))
}

/// Waits until `vault pending --json` lists an action whose summary contains `needle`; its id and
/// how long that took.
pub fn pending_id(v: &mut TestVault, needle: &str) -> (String, Duration) {
    let start = Instant::now();
    let a = v.pending_with(needle);
    (a["action_id"].as_str().unwrap().to_owned(), start.elapsed())
}

/// `vault approve --id ID --approve --passphrase-stdin`.
pub fn approve(v: &mut TestVault, id: &str) {
    let r = v
        .run(
            &["approve", "--id", id, "--approve", "--passphrase-stdin"],
            Some(&format!("{}\n", super::PASSPHRASE)),
        )
        .ok();
    assert!(r.stdout.contains("approved"), "{}", r.stdout);
}

/// Peak RSS (VmHWM) of a process, in KiB.
pub fn vm_hwm_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/PID/status")
}

/// Pids of processes whose command line contains `token` (the remote side is this machine).
pub fn processes_with(token: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if pid == std::process::id() {
            continue;
        }
        if let Ok(cmd) = std::fs::read(e.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.contains(token) {
                out.push(pid);
            }
        }
    }
    out
}

/// Waits up to `limit` for every process carrying `token` to be gone.
#[track_caller]
pub fn assert_gone(token: &str, limit: Duration) {
    let start = Instant::now();
    loop {
        let left = processes_with(token);
        if left.is_empty() {
            return;
        }
        assert!(
            start.elapsed() < limit,
            "processes still running for {token}: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A unique token for commands and markers of one test.
pub fn token(tag: &str) -> String {
    let mut b = [0u8; 6];
    getrandom_fill(&mut b);
    format!("{tag}-{}", hex::encode(b))
}

fn getrandom_fill(b: &mut [u8]) {
    use std::io::Read;
    std::fs::File::open("/dev/urandom")
        .unwrap()
        .read_exact(b)
        .unwrap();
}

/// A local user for password logins, removed on drop. Made with `useradd` (home `/tmp`, never
/// created or removed) and `chpasswd`; needs root, as the sshd of these tests does.
pub struct LocalUser {
    pub name: String,
}

impl LocalUser {
    pub fn create(password: &str) -> Self {
        assert!(
            rustix_is_root(),
            "password tests create a throwaway user with useradd: run them as root (CI does)"
        );
        let name = format!("avt{}", &token("u")[2..10]);
        let st = Command::new("useradd")
            .args(["-M", "-d", "/tmp", "-s", "/bin/sh", &name])
            .status()
            .expect("useradd");
        assert!(st.success(), "useradd {name} failed");
        let user = Self { name };
        let mut child = Command::new("chpasswd")
            .stdin(std::process::Stdio::piped())
            .spawn()
            .expect("chpasswd");
        use std::io::Write;
        writeln!(child.stdin.take().unwrap(), "{}:{password}", user.name).unwrap();
        assert!(child.wait().unwrap().success(), "chpasswd failed");
        user
    }
}

fn rustix_is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .map(|u| u.split_whitespace().next() == Some("0"))
        })
        .unwrap_or(false)
}

impl Drop for LocalUser {
    fn drop(&mut self) {
        // Whatever the tests left running as this user (they started it), by pid.
        let uid = String::from_utf8(
            Command::new("id")
                .args(["-u", &self.name])
                .output()
                .map(|o| o.stdout)
                .unwrap_or_default(),
        )
        .unwrap_or_default();
        let uid = uid.trim();
        for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Ok(status) = std::fs::read_to_string(e.path().join("status")) else {
                continue;
            };
            let owner = status
                .lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|u| u.split_whitespace().next());
            if !uid.is_empty() && owner == Some(uid) {
                let pid = e.file_name().to_string_lossy().into_owned();
                let _ = Command::new("kill")
                    .args(["-9", &pid])
                    .stderr(std::process::Stdio::null())
                    .status();
            }
        }
        std::thread::sleep(Duration::from_millis(100));
        // Never `userdel -r`: the home is /tmp.
        let _ = Command::new("userdel").arg(&self.name).status();
    }
}
