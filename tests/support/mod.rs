//! Shared test support: a throwaway vault driven through the real `vault` binary, decoy scanning,
//! a pseudo-terminal driver (and `pty.rs`, a terminal the test drives while the command runs), a
//! real OpenSSH `sshd` on loopback, a real OpenBao dev server (`bao.rs`) and team mode's steps
//! (`team.rs`), a git smart-HTTP server (`git.rs`), SSH helpers
//! (`ssh.rs`), re-running a test as the unprivileged user (`uid.rs`), and the same-uid
//! attacker's tools: reading another process's memory (`memory.rs`), speaking the agent's
//! protocol (`raw.rs`, with a sample of every request kind in `requests.rs`) and relaying its
//! socket (`relay.rs`).
#![allow(dead_code)]

pub mod ai;
pub mod bao;
pub mod completion;
pub mod git;
pub mod journal;
pub mod leak;
pub mod mcp;
pub mod memory;
pub mod pty;
pub mod raw;
pub mod relay;
pub mod requests;
pub mod shapes;
pub mod soft_key;
pub mod ssh;
pub mod sshd;
pub mod standin;
pub mod target;
pub mod team;
pub mod tls;
pub mod tmux;
pub mod uid;
pub mod world;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

pub const PASSPHRASE: &str = "correct horse battery staple";
/// The approval PIN `TestVault::init` sets: typed after `a`/`s` on every card.
pub const PIN: &str = "2468";

/// The `vault` binary cargo built for these tests, or `$VAULT_TEST_BIN` (CI points it at the
/// release build, so the shipped binary passes the same checks).
pub fn bin() -> &'static str {
    static BIN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        std::env::var("VAULT_TEST_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_vault").to_owned())
    })
}

/// A folder holding `agent-vault`, a link to the binary under test: the name the packages
/// install beside `vault` and the command a project's client config names. Made once per binary
/// under test (beside it when it can be, else in the system temp dir); a race with another test
/// process making the same link is fine.
pub fn agent_vault_dir() -> &'static Path {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let exe = std::fs::canonicalize(bin()).expect("the binary under test exists");
        let tag = blake3::hash(exe.as_os_str().as_encoded_bytes()).to_hex();
        let dir = std::env::temp_dir().join(format!("agent-vault-link-{}", &tag[..16]));
        std::fs::create_dir_all(&dir).unwrap();
        let link = dir.join("agent-vault");
        match std::os::unix::fs::symlink(&exe, &link) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => panic!("cannot link {}: {e}", link.display()),
        }
        assert_eq!(
            std::fs::canonicalize(&link).unwrap(),
            exe,
            "{} is a stale link",
            link.display()
        );
        dir
    })
}

/// A Python that has the test tools (`.ci/venv` when `.ci/run` made it, else python3).
pub fn python() -> PathBuf {
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/venv/bin/python");
    if venv.exists() {
        venv
    } else {
        PathBuf::from("python3")
    }
}

/// A Python with the standard library only, that an unprivileged test user can run (the venv's
/// interpreter may live under root's home): the system's, else the first `python3` on PATH.
pub fn system_python() -> PathBuf {
    let system = Path::new("/usr/bin/python3");
    if system.exists() {
        system.to_owned()
    } else {
        PathBuf::from("python3")
    }
}

/// `.ci/node`, with the TypeScript SDK, ajv and undici installed (a missing one fails the test).
pub fn ci_node_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/node");
    for pkg in ["@modelcontextprotocol/sdk", "ajv", "undici"] {
        assert!(
            dir.join("node_modules")
                .join(pkg)
                .join("package.json")
                .exists(),
            "{pkg} is not installed in {}: run `.ci/run` once (it runs `npm ci --prefix .ci/node`)",
            dir.display()
        );
    }
    dir
}

pub fn support_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/support")
        .join(name)
}

/// A fresh directory under the system temp dir, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        static N: AtomicUsize = AtomicUsize::new(0);
        let p = std::env::temp_dir().join(format!(
            "av-it-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Self(p)
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What one `vault` run printed.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    fn from(o: Output) -> Self {
        Self {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
    #[track_caller]
    pub fn ok(self) -> Self {
        assert_eq!(
            self.code, 0,
            "expected success:\nstdout: {}\nstderr: {}",
            self.stdout, self.stderr
        );
        self
    }
    #[track_caller]
    pub fn code(self, want: i32) -> Self {
        assert_eq!(
            self.code, want,
            "expected exit {want}:\nstdout: {}\nstderr: {}",
            self.stdout, self.stderr
        );
        self
    }
}

/// A vault in its own temp dir; every run's output is kept for leak scans. Locks on drop, which
/// stops its vault agent.
pub struct TestVault {
    pub dir: TempDir,
    pub transcript: Vec<String>,
    master: std::sync::OnceLock<agent_vault::keys::MasterKey>,
}

impl TestVault {
    /// An empty directory, not yet initialized.
    pub fn empty(tag: &str) -> Self {
        Self {
            dir: TempDir::new(tag),
            transcript: Vec::new(),
            master: std::sync::OnceLock::new(),
        }
    }

    /// A vault made with `init --passphrase-stdin --pin-stdin` (approval PIN `PIN`).
    pub fn init(tag: &str) -> Self {
        let mut v = Self::empty(tag);
        v.run(
            &["init", "--passphrase-stdin", "--pin-stdin"],
            Some(&format!("{PASSPHRASE}\n{PIN}\n")),
        )
        .ok();
        v
    }

    /// A vault made with `init --passphrase-stdin` alone: no approval PIN yet, so its journal
    /// starts with `vault.init` and `vault.unlock` only (tests that count rows).
    pub fn init_without_pin(tag: &str) -> Self {
        let mut v = Self::empty(tag);
        v.run(
            &["init", "--passphrase-stdin"],
            Some(&format!("{PASSPHRASE}\n")),
        )
        .ok();
        v
    }

    pub fn vault_dir(&self) -> PathBuf {
        self.dir.path().join("vault")
    }

    /// Opens `vault.db` in this test process with the master key (decrypted once from
    /// `vault.key.age` with the passphrase): how a test inspects or tampers with the store while
    /// the agent runs.
    pub fn open_db(&self) -> agent_vault::vault::Vault {
        use agent_vault::paths::VaultPaths;
        use agent_vault::vault::Vault;
        let paths = VaultPaths::new(self.vault_dir());
        let key = self.master.get_or_init(|| {
            let pp = agent_vault::keys::Passphrase::from_string(PASSPHRASE.into());
            Vault::keys(&paths, &pp)
                .expect("the test passphrase opens vault.key.age")
                .master
        });
        Vault::open_with_key(paths, key).expect("open the test vault with its key")
    }

    /// The master key in hex (a test handing it to a child process of its own).
    pub fn master_hex(&self) -> String {
        drop(self.open_db());
        self.master.get().unwrap().to_hex().to_string()
    }

    /// Replaces the vault's agent with one started under `VAULT_LOG=level` (its log is
    /// `agent.log` in the vault directory): how a test scans the executors' logs.
    pub fn restart_agent_logging(&mut self, level: &str) {
        let mut c = self.command(&["unlock", "--restart", "--passphrase-stdin"]);
        c.env("VAULT_LOG", level);
        self.run_command(&mut c, Some(&format!("{PASSPHRASE}\n")))
            .ok();
    }

    /// Writes `config.toml` and restarts the agent, which reads it only when it starts.
    pub fn configure(&mut self, toml: &str) {
        std::fs::write(self.vault_dir().join("config.toml"), toml).unwrap();
        self.run(
            &["unlock", "--restart", "--passphrase-stdin"],
            Some(&format!("{PASSPHRASE}\n")),
        )
        .ok();
    }

    /// The pid of the vault's agent (from `vault doctor --json`), if one runs.
    pub fn agent_pid(&mut self) -> Option<u32> {
        let run = self.run(&["doctor", "--json"], None);
        agent_pid_in(&run.stdout)
    }

    /// The path of the vault's agent socket.
    pub fn socket(&self) -> PathBuf {
        let id = std::fs::read_to_string(self.vault_dir().join("vault.id")).unwrap();
        agent_vault::agent::socket::socket_path(id.trim())
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(bin());
        c.args(args)
            .env("VAULT_DIR", self.vault_dir())
            .env_remove("VAULT_PASSPHRASE_FILE")
            .env_remove("VAULT_LOG");
        c
    }

    /// Runs `vault ARGS` with `stdin` (or an empty stdin).
    pub fn run(&mut self, args: &[&str], stdin: Option<&str>) -> Run {
        let mut c = self.command(args);
        self.run_command(&mut c, stdin)
    }

    pub fn run_command(&mut self, c: &mut Command, stdin: Option<&str>) -> Run {
        use std::io::Write;
        let mut child = c
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn vault");
        let mut pipe = child.stdin.take().unwrap();
        // The child may exit before reading (e.g. a usage error); that is not a test failure.
        let _ = pipe.write_all(stdin.unwrap_or("").as_bytes());
        drop(pipe);
        let run = Run::from(child.wait_with_output().unwrap());
        self.transcript.push(run.stdout.clone());
        self.transcript.push(run.stderr.clone());
        run
    }

    /// `vault pending --json` once it lists at least `n` actions (within 20 s).
    #[track_caller]
    pub fn wait_pending(&mut self, n: usize) -> Vec<serde_json::Value> {
        let mut listed = Vec::new();
        wait_until(
            Duration::from_secs(20),
            &format!("{n} action(s) never became pending"),
            || {
                let r = self.run(&["pending", "--json"], None).ok();
                listed = serde_json::from_str(r.stdout.trim()).unwrap();
                listed.len() >= n
            },
        );
        listed
    }

    /// The pending action whose summary contains `needle`, once there is one (within 20 s).
    #[track_caller]
    pub fn pending_with(&mut self, needle: &str) -> serde_json::Value {
        let mut found = serde_json::Value::Null;
        wait_until(
            Duration::from_secs(20),
            &format!("no pending action for {needle:?}"),
            || {
                let r = self.run(&["pending", "--json"], None).ok();
                let listed: Vec<serde_json::Value> = serde_json::from_str(r.stdout.trim()).unwrap();
                found = listed
                    .into_iter()
                    .find(|a| a["summary"].as_str().unwrap_or("").contains(needle))
                    .unwrap_or_default();
                !found.is_null()
            },
        );
        found
    }

    /// `vault add http NAME --host HOST --bearer --secret-stdin` with `secret`; must succeed.
    pub fn add_bearer(&mut self, name: &str, host: &str, secret: &str) {
        self.add_bearer_with(name, host, secret, &[]);
    }

    /// `add_bearer` with more `vault add http` flags (`--approval`, `--allow-header`, …); the
    /// passphrase file signs any approval looser than `each`.
    pub fn add_bearer_with(&mut self, name: &str, host: &str, secret: &str, extra: &[&str]) {
        let mut args = vec![
            "add",
            "http",
            name,
            "--host",
            host,
            "--bearer",
            "--secret-stdin",
        ];
        args.extend_from_slice(extra);
        self.run_pp(&args, Some(&format!("{secret}\n"))).ok();
    }

    /// Runs `vault ARGS` with `VAULT_PASSPHRASE_FILE` pointing at a 0600 file holding the passphrase.
    pub fn run_pp(&mut self, args: &[&str], stdin: Option<&str>) -> Run {
        let pp = self.dir.path().join("passphrase");
        if !pp.exists() {
            std::fs::write(&pp, format!("{PASSPHRASE}\n")).unwrap();
        }
        let mut c = self.command(args);
        c.env("VAULT_PASSPHRASE_FILE", &pp);
        self.run_command(&mut c, stdin)
    }

    /// Runs `vault ARGS` in a pseudo-terminal, answering prompts: [(expect, send)].
    pub fn run_tty(&mut self, args: &[&str], script: &[(&str, &str)]) -> Run {
        let steps: Vec<(&str, &str, f64)> = script.iter().map(|&(e, s)| (e, s, 0.2)).collect();
        self.run_tty_timed(args, &steps)
    }

    /// `run_tty` with a delay per step: (expect, send, seconds to wait after seeing `expect`).
    /// Each `expect` is looked for after where the previous one was found; "" matches at once.
    pub fn run_tty_timed(&mut self, args: &[&str], script: &[(&str, &str, f64)]) -> Run {
        self.run_tty_sized(args, script, (40, 120))
    }

    /// `run_tty_timed` on a terminal of (rows, columns).
    pub fn run_tty_sized(
        &mut self,
        args: &[&str],
        script: &[(&str, &str, f64)],
        (rows, cols): (u16, u16),
    ) -> Run {
        let script = serde_json::to_string(script).unwrap();
        let mut c = Command::new(python());
        c.arg(support_file("pty_drive.py"))
            .arg(script)
            .arg("--")
            .arg(bin())
            .args(args);
        c.env("VAULT_DIR", self.vault_dir())
            .env("PTY_SIZE", format!("{rows}x{cols}"))
            .env_remove("VAULT_PASSPHRASE_FILE");
        self.run_command(&mut c, None)
    }
}

impl Drop for TestVault {
    fn drop(&mut self) {
        if self.vault_dir().join("vault.id").exists() {
            let _ = self
                .command(&["lock"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// A command run to its end, or killed once it overran its limit.
pub struct Finished {
    /// `None`: it overran and was killed.
    pub status: Option<std::process::ExitStatus>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub wall: Duration,
}

/// Runs `cmd` with no stdin, both outputs drained as it runs, killing it after `limit`.
pub fn run_limited(cmd: &mut Command, limit: Duration) -> std::io::Result<Finished> {
    use std::io::Read;
    let started = std::time::Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut b = Vec::new();
            let _ = r.read_to_end(&mut b);
            b
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break Some(s);
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Ok(Finished {
        status,
        wall: started.elapsed(),
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    })
}

/// Polls `done` every 20 ms until it holds, failing the test after `limit` with `what`: how a
/// test waits for an event instead of sleeping and hoping.
#[track_caller]
pub fn wait_until(limit: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + limit;
    while !done() {
        assert!(
            std::time::Instant::now() < deadline,
            "{what} (waited {limit:?})"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The forms a secret could leak in: raw, JSON-escaped, base64 (standard, URL-safe, unpadded),
/// hex.
pub fn encodings(secret: &str) -> Vec<String> {
    use base64::Engine;
    let b = secret.as_bytes();
    let e = base64::engine::general_purpose::STANDARD.encode(b);
    let json = serde_json::to_string(secret).unwrap();
    let mut forms = vec![
        secret.to_owned(),
        // What a JSON output holds of a secret with `"`, `\` or a control character.
        json[1..json.len() - 1].to_owned(),
        e.trim_end_matches('=').to_owned(),
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b),
        hex::encode(b),
        hex::encode_upper(b),
    ];
    forms.dedup();
    forms
}

/// Panics if any encoding of `secret` occurs in `haystack`.
#[track_caller]
pub fn assert_no_leak(what: &str, haystack: &[u8], secret: &str) {
    for form in encodings(secret) {
        let found = haystack.windows(form.len()).any(|w| w == form.as_bytes());
        assert!(!found, "{what} contains the secret (as {form:?})");
    }
}

/// Every file under `dir`, recursively.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// A stored RFC 3339 UTC time as the CLI shows it to a person: local, with its offset.
pub fn local_time(ts: &str) -> String {
    ts.parse::<jiff::Timestamp>()
        .unwrap()
        .to_zoned_datetime(jiff::tz::TimeZone::system())
        .strftime("%Y-%m-%d %H:%M:%S %:z")
        .to_string()
}

pub fn mode(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

/// The agent's pid as `vault doctor --json` (its stdout) names it, if one runs.
pub fn agent_pid_in(doctor: &str) -> Option<u32> {
    let v: serde_json::Value = serde_json::from_str(doctor.trim()).ok()?;
    v["checks"]
        .as_array()?
        .iter()
        .find(|c| c["check"] == "vault agent" && c["ok"] == true)?["detail"]
        .as_str()?
        .strip_prefix("pid ")?
        .split(',')
        .next()?
        .parse()
        .ok()
}
