//! A real tmux server for the person's terminal: its own `TMUX_TMPDIR` (so its socket is the
//! default one there, `tmux-UID/default`, where a process of the user finds it), one session
//! whose pane runs a shell, keys sent the way a person types them (`send-keys`), and the pane
//! read back as a person sees it (`capture-pane`). The server is killed on drop.
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

pub struct Tmux {
    tmpdir: super::TempDir,
    pub session: String,
}

/// Whether tmux is installed (CI installs it; a missing tmux fails the test that needs it).
pub fn require() {
    let ok = Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(ok, "tmux is needed for this test (`.ci/run` installs it)");
}

impl Tmux {
    /// A server with one session of `cols`×`rows` whose pane runs `sh` with `env` added.
    pub fn start(tag: &str, env: &[(&str, String)], cols: u16, rows: u16) -> Self {
        require();
        let tmpdir = super::TempDir::new(&format!("{tag}-tmux"));
        let t = Self {
            tmpdir,
            session: "person".into(),
        };
        let mut c = t.command();
        c.args(["-f", "/dev/null", "new-session", "-d", "-s", &t.session])
            .args(["-x", &cols.to_string(), "-y", &rows.to_string()]);
        for (k, v) in env {
            c.args(["-e", &format!("{k}={v}")]);
        }
        c.args(["-e", "PS1=$ ", "sh"]);
        let out = c.output().expect("run tmux");
        assert!(out.status.success(), "tmux new-session: {out:?}");
        t
    }

    /// The directory to give a process of the user as `TMUX_TMPDIR`, so it finds this server.
    pub fn tmpdir(&self) -> &Path {
        self.tmpdir.path()
    }

    /// `tmux …` against this server.
    pub fn command(&self) -> Command {
        let mut c = Command::new("tmux");
        // tmux runs a pane's command through `default-shell -c`, taken from `$SHELL` or else
        // the user's login shell; CI's unprivileged user has `nologin`, and CI may set no
        // `$SHELL`, so the pane would die at once ("no current target").
        c.env("TMUX_TMPDIR", self.tmpdir.path())
            .env("SHELL", "/bin/sh")
            .env_remove("TMUX");
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command().args(args).output().expect("run tmux")
    }

    /// Types `text` into the pane as it is (no key names).
    pub fn type_text(&self, text: &str) {
        let out = self.run(&["send-keys", "-t", &self.session, "-l", text]);
        assert!(out.status.success(), "send-keys: {out:?}");
    }

    /// Presses one key by tmux's name for it (`Enter`, `a`, …).
    pub fn press(&self, key: &str) {
        let out = self.run(&["send-keys", "-t", &self.session, key]);
        assert!(out.status.success(), "send-keys: {out:?}");
    }

    /// Replaces whatever the pane runs with a fresh shell (the person closing what the attacker
    /// left in it).
    pub fn fresh_shell(&self) {
        let out = self.run(&["respawn-pane", "-k", "-t", &self.session, "sh"]);
        assert!(out.status.success(), "respawn-pane: {out:?}");
        self.wait_for("$", Duration::from_secs(10));
    }

    /// What the pane shows now.
    pub fn screen(&self) -> String {
        let out = self.run(&["capture-pane", "-p", "-t", &self.session]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Waits until the pane shows `text`; panics with the screen after `limit`.
    pub fn wait_for(&self, text: &str, limit: Duration) -> String {
        let start = Instant::now();
        loop {
            let s = self.screen();
            if s.contains(text) {
                return s;
            }
            assert!(
                start.elapsed() < limit,
                "the pane never showed {text:?}; it shows:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The socket path of this server (for a test that counts who can reach it).
    pub fn socket(&self) -> PathBuf {
        let uid = rustix::process::getuid().as_raw();
        self.tmpdir.path().join(format!("tmux-{uid}/default"))
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}
