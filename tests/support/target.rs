//! A real loopback HTTP server (tests/support/http_target.py) that records every request.
use super::TempDir;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

pub struct HttpTarget {
    pub port: u16,
    scheme: &'static str,
    record: PathBuf,
    child: Child,
    _dir: TempDir,
}

impl HttpTarget {
    /// Starts the server; `secret` is what `/leak` echoes back in every encoding.
    pub fn start(secret: &str) -> Self {
        Self::spawn(secret, None)
    }

    /// The same server speaking HTTPS only, with this certificate chain and key (PEM files).
    pub fn start_tls(secret: &str, cert: &Path, key: &Path) -> Self {
        Self::spawn(secret, Some((cert, key)))
    }

    fn spawn(secret: &str, tls: Option<(&Path, &Path)>) -> Self {
        let dir = TempDir::new("target");
        let record = dir.path().join("requests.jsonl");
        std::fs::write(&record, "").unwrap();
        let mut cmd = Command::new(super::python());
        cmd.arg(super::support_file("http_target.py"))
            .arg(&record)
            .arg(secret);
        if let Some((cert, key)) = tls {
            cmd.arg(cert).arg(key);
        }
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the loopback HTTP target (python3)");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .trim()
            .strip_prefix("PORT ")
            .and_then(|p| p.parse().ok())
            .expect("the target printed its port");
        Self {
            port,
            scheme: if tls.is_some() { "https" } else { "http" },
            record,
            child,
            _dir: dir,
        }
    }

    pub fn base(&self) -> String {
        format!("{}://127.0.0.1:{}", self.scheme, self.port)
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.record)
            .unwrap()
            .lines()
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

impl Drop for HttpTarget {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
