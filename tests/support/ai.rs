//! The real AI clients for `tests/ai_clients.rs`: where `.ci/ai-clients` installed them (a test
//! fails with an install hint when they are missing, it never skips), the commands the docs tell
//! a user to run, a clean environment for a client, running one with a time limit, and a person
//! approving through the scripted path while a turn waits. The model stand-in is `standin.rs`.
use super::{bin, PASSPHRASE};
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

pub fn clients_dir() -> PathBuf {
    root().join(".ci/ai-clients")
}

/// The executable `name` of the npm package `package`, installed in `.ci/ai-clients` at the
/// version `package.json` pins; otherwise the test fails and says how to install it.
pub fn client_bin(name: &str, package: &str) -> PathBuf {
    let dir = clients_dir();
    let pinned: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("package.json")).unwrap()).unwrap();
    let want = pinned["dependencies"][package].as_str().unwrap().to_owned();
    let installed =
        std::fs::read_to_string(dir.join("node_modules").join(package).join("package.json"))
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .and_then(|v| v["version"].as_str().map(str::to_owned));
    let exe = dir.join("node_modules/.bin").join(name);
    assert!(
        installed.as_deref() == Some(want.as_str()) && exe.exists(),
        "{package} {want} is not installed in {} (found {installed:?}): run \
         `npm ci --prefix .ci/ai-clients` (what .ci/run does)",
        dir.display()
    );
    exe
}

/// The line of `packaging/mcp-clients.md` that starts with `prefix`: what the docs tell a user to
/// type, run as written.
pub fn doc_command(prefix: &str) -> String {
    let doc = std::fs::read_to_string(root().join("packaging/mcp-clients.md")).unwrap();
    doc.lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("packaging/mcp-clients.md has no line starting {prefix:?}"))
        .to_owned()
}

/// `program` in `cwd` with `HOME` set to `home`, the vault at `vault_dir`, and nothing from the
/// developer's own client setup (their keys, base URLs, config dirs) or a CI marker that makes
/// a client's terminal UI behave unlike a person's. PATH starts with the clients and the `vault`
/// under test, so `command -v vault` in a doc line finds that binary.
pub fn client_command(program: &Path, home: &Path, cwd: &Path, vault_dir: &Path) -> Command {
    let mut c = Command::new(program);
    c.current_dir(cwd);
    for (key, _) in std::env::vars_os() {
        let k = key.to_string_lossy();
        let drop = [
            "ANTHROPIC_",
            "CLAUDE",
            "GEMINI_",
            "GOOGLE_",
            "CI_",
            "XDG_CONFIG",
            "VAULT_",
        ]
        .iter()
        .any(|p| k.starts_with(p))
            || [
                "CI",
                "CONTINUOUS_INTEGRATION",
                "XDG_CACHE_HOME",
                "XDG_DATA_HOME",
            ]
            .contains(&k.as_ref());
        if drop {
            c.env_remove(&key);
        }
    }
    let vault_bin = Path::new(bin()).parent().unwrap().to_owned();
    let path = std::env::var("PATH").unwrap_or_default();
    let bins = clients_dir().join("node_modules/.bin");
    c.env("HOME", home)
        .env(
            "PATH",
            format!(
                "{}:{}:{}:{path}",
                bins.display(),
                vault_bin.display(),
                super::agent_vault_dir().display()
            ),
        )
        .env("VAULT_DIR", vault_dir)
        .env("NO_COLOR", "1");
    c
}

/// What one client run printed, and how long it took.
pub struct ClientRun {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    pub wall: Duration,
}

/// Runs `cmd` to its end with no stdin, failing the test (with its output) if it takes longer
/// than `limit` or exits non-zero.
#[track_caller]
pub fn run_ok(label: &str, mut cmd: Command, limit: Duration) -> ClientRun {
    let f = super::run_limited(&mut cmd, limit)
        .unwrap_or_else(|e| panic!("{label}: cannot start: {e}"));
    let (stdout, stderr) = (
        String::from_utf8_lossy(&f.stdout).into_owned(),
        String::from_utf8_lossy(&f.stderr).into_owned(),
    );
    let said = format!("stdout:\n{stdout}\nstderr:\n{stderr}");
    match f.status {
        None => panic!("{label}: still running after {limit:?}\n{said}"),
        Some(s) if !s.success() => panic!("{label}: failed ({s})\n{said}"),
        Some(status) => ClientRun {
            status,
            stdout,
            stderr,
            wall: f.wall,
        },
    }
}

/// A person approving each action the moment `vault pending --json` lists it, through
/// `vault approve --id ID --approve --passphrase-stdin`, until `finish`.
pub struct Approver {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Vec<Value>>,
}

impl Approver {
    pub fn start(vault_dir: PathBuf) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let vault = move |args: &[&str], stdin: &str| {
            let mut child = Command::new(bin())
                .args(args)
                .env("VAULT_DIR", &vault_dir)
                .env_remove("VAULT_PASSPHRASE_FILE")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let _ = child.stdin.take().unwrap().write_all(stdin.as_bytes());
            child.wait_with_output().unwrap()
        };
        let handle = std::thread::spawn(move || {
            let mut approved = Vec::new();
            while !flag.load(Ordering::Relaxed) {
                let listed = vault(&["pending", "--json"], "");
                let pending: Vec<Value> =
                    serde_json::from_slice(&listed.stdout).unwrap_or_default();
                for a in pending {
                    let id = a["action_id"].as_str().unwrap_or_default().to_owned();
                    let pp = format!("{PASSPHRASE}\n");
                    let r = vault(
                        &["approve", "--id", &id, "--approve", "--passphrase-stdin"],
                        &pp,
                    );
                    let said = String::from_utf8_lossy(&r.stdout).into_owned();
                    assert!(r.status.success(), "approving {id} failed: {said}");
                    approved.push(a);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            approved
        });
        Self { stop, handle }
    }

    /// Stops approving; the actions approved, as `vault pending --json` listed them.
    pub fn finish(self) -> Vec<Value> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().expect("the approver failed")
    }
}
