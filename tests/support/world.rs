//! The person's world for the containment tests (tests/containment.rs,
//! tests/nothing_planted.rs): their home and vault under a root outside `/tmp` owned by the test
//! user, listeners that count who connects, and reading the process table from outside (who
//! runs, who is a child of whom, who carries a marker).
use super::uid::is_root;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A listening socket that counts who connects.
pub struct Counted {
    pub name: String,
    pub hits: Arc<AtomicUsize>,
}

pub fn count(listener: UnixListener, name: String) -> Counted {
    let hits = Arc::new(AtomicUsize::new(0));
    let h = hits.clone();
    std::thread::spawn(move || {
        for _ in listener.incoming().flatten() {
            h.fetch_add(1, Ordering::SeqCst);
        }
    });
    Counted { name, hits }
}

pub fn listen(path: &Path) -> Counted {
    let _ = std::fs::create_dir_all(path.parent().unwrap());
    let _ = std::fs::remove_file(path);
    count(
        UnixListener::bind(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
        path.display().to_string(),
    )
}

pub fn listen_abstract(name: &str) -> Counted {
    use std::os::linux::net::SocketAddrExt;
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    count(UnixListener::bind_addr(&addr).unwrap(), format!("@{name}"))
}

/// The person: their home, runtime directory, vault and a copy of `vault` they own (so that
/// "the vault binary is never writable from inside" is a real claim, not file modes).
pub struct Person {
    pub root: PathBuf,
    pub home: PathBuf,
    pub run: PathBuf,
    pub project: PathBuf,
    pub vault_dir: PathBuf,
    pub bin: PathBuf,
}

impl Person {
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.bin);
        c.args(args)
            .env("HOME", &self.home)
            .env("XDG_RUNTIME_DIR", &self.run)
            .env("VAULT_DIR", &self.vault_dir)
            .env_remove("VAULT_PASSPHRASE_FILE")
            .env_remove("TMUX");
        c
    }

    pub fn ok(&self, args: &[&str], stdin: Option<&str>) -> String {
        let mut c = self.cmd(args);
        c.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c.spawn().unwrap();
        if let Some(s) = stdin {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(s.as_bytes()).unwrap();
        }
        let out = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "vault {args:?}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        text
    }
}

pub fn run_input(c: &mut Command, stdin: &str) -> std::process::Output {
    use std::io::Write;
    let mut child = c
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

pub fn git(home: &Path, dir: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .env("HOME", home)
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.name=person",
            "-c",
            "user.email=p@example.invalid",
        ])
        .args(args)
        .output()
        .unwrap();
    assert!(ok.status.success(), "git {args:?}: {ok:?}");
}

pub fn digest(p: &Path) -> Option<String> {
    std::fs::read(p)
        .ok()
        .map(|b| blake3::hash(&b).to_hex().to_string())
}

/// Whether `pid` runs: it exists and is not a zombie (a process that was stopped and not yet
/// reaped has a `/proc` entry too).
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rfind(')')
            .and_then(|i| s[i + 1..].split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X")
    })
}

/// Children of `pid` (from `/proc/*/stat`).
pub fn children(pid: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/stat"))
                .ok()
                .and_then(|s| {
                    let rest = s[s.rfind(')')? + 2..].to_owned();
                    rest.split(' ').nth(1)?.parse::<u32>().ok()
                })
                == Some(pid)
        })
        .collect()
}

/// Every descendant of `pid`: its children, theirs, and so on (from `/proc/*/stat`).
pub fn descendants(pid: u32) -> Vec<u32> {
    let mut found = children(pid);
    let mut i = 0;
    while i < found.len() {
        let more = children(found[i]);
        found.extend(more);
        i += 1;
    }
    found
}

/// Processes whose command line holds `marker`.
pub fn with_marker(marker: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(marker))
        })
        .collect()
}

/// A directory for the person's world outside `/tmp` (which `vault run` makes private, so a
/// home under it would prove nothing): under cargo's target, owned by the test user.
pub fn world_root(test: &str) -> Option<PathBuf> {
    // One variable per test: the tests of this file run side by side in one process.
    let var = format!("AV_CONTAIN_ROOT_{test}");
    if let Some(r) = std::env::var_os(&var) {
        return Some(PathBuf::from(r));
    }
    let root =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    if is_root() {
        let uid = super::uid::test_user();
        let gid = super::uid::id_of(super::uid::USER, "-g").unwrap();
        std::os::unix::fs::chown(&root, Some(uid), Some(gid)).unwrap();
        // The re-run as the test user inherits it.
        std::env::set_var(&var, &root);
    }
    Some(root)
}
