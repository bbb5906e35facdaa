//! Benchmark: what `vault run` costs a client's start. `vault run -- true` (namespaces, the
//! view's mounts, Landlock, seccomp, the relay's socket, the fork of the client and its end)
//! against bare `true`, and against `bwrap` with a comparable policy, all measured by the same
//! harness in the same run: new user, mount, PID, IPC and network namespaces (bwrap brings up
//! the loopback as `vault run`'s PID 1 does; `vault run` also listens there for its proxy and
//! hands the socket out), a new root holding the
//! system's directories read-only, private tmpfs mounts over /tmp, /var/tmp, /run, the runtime
//! directory and the home, the project writable, the vault binary read-only and the vault
//! directory empty, a fresh /dev and /proc, `--die-with-parent` and `--new-session` (bwrap's
//! answer to TIOCSTI).
//!
//! The peer is the system's `bwrap` (Debian's `bubblewrap`, which `.ci/run` installs). Without
//! it the bench says so and fails, as mcp_startup does without its peer.
//!
//! Run: `cargo bench --bench run_startup` (goal: `vault run -- true` p50 at most 1.5× bwrap's).
//! `-- --quick`: a few starts of each, checks only (what CI runs).
mod common;

use common::{stats, Side};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn time(mut c: Command, runs: usize) -> Vec<Duration> {
    c.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // One unmeasured start warms the page cache.
    let first = c.output().unwrap();
    assert!(
        first.status.success(),
        "{c:?}: {}",
        String::from_utf8_lossy(&first.stderr)
    );
    (0..runs)
        .map(|_| {
            let t = Instant::now();
            let s = c.status().unwrap();
            let took = t.elapsed();
            assert!(s.success(), "{c:?} failed");
            took
        })
        .collect()
}

fn main() {
    let quick = common::quick();
    let runs = common::size(quick, 200, 5);
    let Some(bwrap) = ["/usr/bin/bwrap", "/bin/bwrap"]
        .into_iter()
        .find(|p| Path::new(p).exists())
    else {
        eprintln!("run_startup: the peer `bwrap` is not installed (`apt-get install bubblewrap`; .ci/run does)");
        std::process::exit(1);
    };
    let dir = std::env::temp_dir().join(format!("av-bench-run-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let home = dir.join("home");
    let project = home.join("project");
    let run = dir.join("run");
    for d in [&project, &home.join(".ssh"), &run] {
        std::fs::create_dir_all(d).unwrap();
    }
    let vault_dir = home.join(".local/share/agent-vault");
    let bin = env!("CARGO_BIN_EXE_vault");
    let out = Command::new(bin)
        .args(["init", "--passphrase-stdin"])
        .env("VAULT_DIR", &vault_dir)
        .env("HOME", &home)
        .env("XDG_RUNTIME_DIR", &run)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin
                .take()
                .unwrap()
                .write_all(b"bench passphrase, not secret\n")?;
            c.wait_with_output()
        })
        .unwrap();
    assert!(out.status.success(), "vault init");

    let bare = time(Command::new("true"), runs);
    let mut ours = Command::new(bin);
    ours.args(["run", "--", "true"])
        .current_dir(&project)
        .env("VAULT_DIR", &vault_dir)
        .env("HOME", &home)
        .env("XDG_RUNTIME_DIR", &run);
    let vault = time(ours, runs);
    let mut theirs = Command::new(bwrap);
    let (p, h, r, v) = (
        project.display().to_string(),
        home.display().to_string(),
        run.display().to_string(),
        vault_dir.display().to_string(),
    );
    theirs
        .args([
            "--unshare-user",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-net",
            "--die-with-parent",
        ])
        .args(["--new-session", "--dev", "/dev", "--proc", "/proc"]);
    // The same view as vault run's: the system's directories read-only (their links made
    // again), private tmpfs mounts over /tmp, /var/tmp, /run, the runtime directory and the home,
    // the project writable, the vault binary read-only, the vault directory an empty tmpfs.
    for s in [
        "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc", "/opt", "/sys",
    ] {
        match std::fs::symlink_metadata(s) {
            Ok(m) if m.is_symlink() => {
                let to = std::fs::read_link(s).unwrap();
                theirs.args(["--symlink", to.to_str().unwrap(), s]);
            }
            Ok(_) => {
                theirs.args(["--ro-bind", s, s]);
            }
            Err(_) => {}
        }
    }
    theirs
        .args(["--tmpfs", "/tmp", "--tmpfs", "/var/tmp", "--tmpfs", "/run"])
        .args(["--tmpfs", &r, "--tmpfs", &h, "--tmpfs", &v])
        .args(["--bind", &p, &p, "--ro-bind", bin, bin, "--chdir", &p])
        .args(["--setenv", "HOME", &h, "true"])
        .current_dir(&project);
    let peer = time(theirs, runs);
    let _ = Command::new(bin)
        .arg("lock")
        .env("VAULT_DIR", &vault_dir)
        .env("XDG_RUNTIME_DIR", &run)
        .output();
    let _ = std::fs::remove_dir_all(&dir);

    const PEER: &str = "bwrap, comparable policy -> true exits (peer)";
    common::emit_samples("bare true (floor)", Side::Alone, &bare);
    common::emit_samples(PEER, Side::Peer, &peer);
    common::emit_samples("vault run -- true", Side::Vs(PEER), &vault);
    let (b50, b95, bmean) = stats(bare);
    let (p50, p95, pmean) = stats(peer);
    let (v50, v95, vmean) = stats(vault);
    println!("start -> exit of `true`, {runs} runs each (ms)");
    println!("{:<48} {:>9} {:>9} {:>9}", "", "p50", "p95", "mean");
    for (what, (a, b, c)) in [
        ("bare true (floor)", (b50, b95, bmean)),
        ("bwrap, comparable policy (peer)", (p50, p95, pmean)),
        ("vault run -- true", (v50, v95, vmean)),
    ] {
        println!("{what:<48} {a:>9.3} {b:>9.3} {c:>9.3}");
    }
    let ratio = v50 / p50;
    let met = ratio <= 1.5;
    println!(
        "vault run / bwrap (p50): {ratio:.2}x; goal <= 1.5x: {}",
        if met { "met" } else { "NOT met" }
    );
    common::emit_goal("vault run -- true p50 <= 1.5x bwrap's", ratio, "x", met);
}
