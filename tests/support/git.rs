//! A git smart-HTTP server over TLS on loopback for the tests (`git_http.py`: `git
//! http-backend` behind Python's HTTPS server, logging each request before it answers), and the
//! bare repository it serves.
use super::tls::TestCa;
use super::{support_file, system_python};
use std::process::{Child, Stdio};

/// A bare repository under `srv` with one commit, whose README says `text`.
pub fn repository(srv: &std::path::Path, text: &str) {
    let work = srv.join("work");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("README"), text).unwrap();
    git(&work, &["init", "-q", "-b", "main"]);
    git(&work, &["add", "README"]);
    git(&work, &["commit", "-q", "-m", "first"]);
    git(srv, &["clone", "-q", "--bare", "work", "repo.git"]);
}

/// `git args` in `dir` (as a committer named `t`), which must succeed; its output.
fn git(dir: &std::path::Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.org"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// `git http-backend` over TLS on loopback (`support/git_http.py`), serving `srv/repo.git`.
pub struct GitServer {
    pub server: Child,
    pub port: String,
    /// One JSON line per request the server received, written before it answered.
    pub log: std::path::PathBuf,
    pub srv: std::path::PathBuf,
}

impl GitServer {
    pub fn start(root: &std::path::Path, readme: &str) -> Self {
        let (certs, srv) = (root.join("certs"), root.join("srv"));
        std::fs::create_dir_all(&certs).unwrap();
        let ca = TestCa::create(&certs);
        repository(&srv, readme);
        let log = root.join("git-requests.jsonl");
        let mut server = std::process::Command::new(system_python())
            .arg(support_file("git_http.py"))
            .args([&srv, &ca.leaf_cert, &ca.leaf_key, &log])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut port = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(server.stdout.as_mut().unwrap()),
            &mut port,
        )
        .unwrap();
        let port = port.trim().to_owned();
        Self {
            server,
            port,
            log,
            srv,
        }
    }

    /// Commits `size` random bytes as `name` to the served repository (through its work tree);
    /// returns the blob's hash.
    pub fn commit_random_file(&self, name: &str, size: usize) -> String {
        let work = self.srv.join("work");
        let mut bytes = vec![0u8; size];
        getrandom::fill(&mut bytes).unwrap();
        std::fs::write(work.join(name), bytes).unwrap();
        git(&work, &["add", name]);
        git(&work, &["commit", "-q", "-m", name]);
        git(&work, &["push", "-q", "../repo.git", "main"]);
        git(&work, &["rev-parse", &format!("HEAD:{name}")])
    }

    /// What the server logged, one JSON value per request.
    pub fn requests(&self) -> Vec<serde_json::Value> {
        requests_in(&self.log)
    }
}

pub fn requests_in(log: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}
