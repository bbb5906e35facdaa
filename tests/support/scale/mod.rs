//! The scale suites' harness. Only `tests/scale.rs` uses it (it loads this directory with
//! `#[path]`, so the other test binaries do not compile it):
//! - `target.rs`: loopback targets that count each tagged request and check, the moment it
//!   arrives and before it is answered, that the journal already holds the `action.dispatched`
//!   row of the action carrying the tag; the SSH command that reports to one of them.
//! - `journal.rs`: a read-only view of `vault.db` for the targets, the whole journal read back
//!   through `vault export-audit`, and the checks on it both suites share.
//! - `procs.rs`: the processes: `vault mcp` (telling an answer from a session that died), `vault
//!   approve` killed at a chosen moment, `vault log --follow`, SIGKILL by pid, restarts.
//! - `crash.rs`, `soak.rs`: the two drivers.
//!
//! Here: sizes, the seed, the seeded RNG, tags, and the rig both suites run on.
#![allow(dead_code)]

mod crash;
mod journal;
mod procs;
mod soak;
mod target;

pub use crash::*;
pub use journal::*;
pub use procs::*;
pub use soak::*;
pub use target::*;

use crate::support::sshd::Sshd;
use crate::support::TestVault;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// `VAULT_SCALE=full`: the sizes of the issue; otherwise the CI sizes.
pub fn full_size() -> bool {
    std::env::var("VAULT_SCALE").is_ok_and(|v| v == "full")
}

/// `VAULT_SCALE_SEED` (decimal or 0x-hex) to replay a run, else a fresh one.
pub fn seed() -> u64 {
    if let Ok(s) = std::env::var("VAULT_SCALE_SEED") {
        let s = s.trim();
        let parsed = match s.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16),
            None => s.parse(),
        };
        return parsed.unwrap_or_else(|_| panic!("VAULT_SCALE_SEED={s:?} is not a number"));
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    Rng::new(nanos ^ u64::from(std::process::id())).next_u64()
}

/// The suites take the 2 cores one at a time (each is the other's noise).
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static ONE: Mutex<()> = Mutex::new(());
    ONE.lock().unwrap_or_else(|p| p.into_inner())
}

/// splitmix64: small, seedable, the same sequence on every platform.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// In [0, n).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
    /// In [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
}

/// The tag of action `i` of session `s`: fixed width, so no tag is a prefix of another, and
/// only plain-word characters, so it passes as a URL query value and as an allowlisted SSH word.
pub fn tag(s: usize, i: usize) -> String {
    format!("t{s:02}n{i:05}x")
}

/// The first tag (`tag`'s shape) in `text`.
pub fn find_tag(text: &str) -> Option<String> {
    let b = text.as_bytes();
    (0..b.len().saturating_sub(9)).find_map(|at| {
        let w = &b[at..at + 10];
        let ok = w[0] == b't'
            && w[1..3].iter().all(u8::is_ascii_digit)
            && w[3] == b'n'
            && w[4..9].iter().all(u8::is_ascii_digit)
            && w[9] == b'x';
        ok.then(|| text[at..at + 10].to_owned())
    })
}

/// The step number in a tag.
pub fn step_of(tag: &str) -> usize {
    tag[4..9].parse().unwrap()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Http,
    Ssh,
}

impl Kind {
    /// Which target a journal summary names.
    pub fn of_summary(summary: &str) -> Self {
        if summary.starts_with("ssh ") {
            Kind::Ssh
        } else {
            Kind::Http
        }
    }
}

const DECOY: &str = "DECOY_scale_tok_7d31c0a9e4";

/// A vault with four credentials (HTTP and SSH, each `never` and `each`), a recording HTTP
/// target, a real sshd whose one allowlisted command reports to a second recorder, and a
/// read-only view of the journal for the recorders.
pub struct Rig {
    pub v: TestVault,
    pub journal: Arc<JournalReader>,
    pub http: Recorder,
    pub ssh: Recorder,
    _sshd: Sshd,
    rec: PathBuf,
}

impl Rig {
    pub fn new(tag: &str) -> Self {
        let mut v = TestVault::init(tag);
        let journal = JournalReader::open(&v);
        Recorder::check_catches_a_request_without_intent(journal.clone());
        let http = Recorder::start(journal.clone(), true);
        let ssh = Recorder::start(journal.clone(), false);
        let key = crate::support::ssh::keygen(v.dir.path(), "id_scale", &["-t", "ed25519"], "");
        let sshd = Sshd::start_with(&key.public, "MaxSessions 100\nMaxStartups 100:30:200");
        let rec = write_rec_script(v.dir.path(), ssh.port);
        for (name, approval) in [("h-auto", "never"), ("h-card", "each")] {
            v.add_bearer_with(name, &http.base(), DECOY, &["--approval", approval]);
        }
        let allow = format!("{} *", rec.display());
        let key_file = key.private.to_str().unwrap().to_owned();
        for (name, approval) in [("s-auto", "never"), ("s-card", "each")] {
            let auth = ["--key-file", &key_file, "--allow-command", &allow];
            crate::support::ssh::add_ssh(&mut v, name, &sshd, "root", &auth, None, approval, None)
                .ok();
        }
        Self {
            v,
            journal,
            http,
            ssh,
            _sshd: sshd,
            rec,
        }
    }

    /// The tool and arguments of one action carrying `tag`: on the `each` credential with
    /// `card`, else on the `never` one.
    pub fn call(&self, kind: Kind, card: bool, tag: &str) -> (&'static str, Value) {
        match kind {
            Kind::Http => (
                "http_request",
                json!({"credential": if card { "h-card" } else { "h-auto" }, "method": "GET",
                       "url": format!("{}/rec?t={tag}", self.http.base()), "wait_s": 60}),
            ),
            Kind::Ssh => (
                "ssh_exec",
                json!({"credential": if card { "s-card" } else { "s-auto" },
                       "command": format!("{} {tag}", self.rec.display()),
                       "wait_s": 60, "timeout_s": 30}),
            ),
        }
    }

    pub fn target(&self, kind: Kind) -> &Recorder {
        match kind {
            Kind::Http => &self.http,
            Kind::Ssh => &self.ssh,
        }
    }

    /// Waits (up to `limit`) until no action is unfinished and no request arrived for a second:
    /// what a killed agent's SSH command or a killed session's dispatch still does lands first.
    pub fn settle(&self, limit: Duration) {
        let t0 = Instant::now();
        let mut last = (usize::MAX, Instant::now());
        loop {
            let n = self.http.arrivals().len() + self.ssh.arrivals().len();
            if n != last.0 {
                last = (n, Instant::now());
            }
            let open = self.journal.unfinished();
            if open.is_empty() && last.1.elapsed() > Duration::from_secs(1) {
                return;
            }
            assert!(
                t0.elapsed() < limit,
                "still unfinished after {limit:?}: {open:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
