//! A real OpenSSH `sshd` on 127.0.0.1 with its own host key, config, pid file and log in a temp
//! dir. `start_with` adds config lines (they take precedence: sshd keeps the first value of a
//! keyword) such as `LogLevel VERBOSE`, whose log lines let a test count logins at the target.
use super::TempDir;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Sshd {
    pub port: u16,
    /// `SHA256:…` of the host key, as `ssh-keygen -l` prints it.
    pub host_key_fingerprint: String,
    pub dir: TempDir,
    child: Child,
}

fn find(bin: &str) -> String {
    for d in ["/usr/sbin", "/usr/bin", "/sbin", "/usr/local/sbin"] {
        let p = format!("{d}/{bin}");
        if std::path::Path::new(&p).exists() {
            return p;
        }
    }
    panic!("{bin} not found: install OpenSSH (`apt-get install -y openssh-server openssh-client`; .ci/run does)");
}

impl Sshd {
    /// Starts sshd on a free loopback port; `authorized_keys` lines may be given.
    pub fn start(authorized_keys: &str) -> Self {
        Self::start_with(authorized_keys, "")
    }

    /// The same, with `extra` config lines ahead of the defaults.
    pub fn start_with(authorized_keys: &str, extra: &str) -> Self {
        let dir = TempDir::new("sshd");
        let d = dir.path();
        let key = d.join("host_ed25519");
        let st = Command::new(find("ssh-keygen"))
            .args(["-q", "-t", "ed25519", "-N", "", "-f"])
            .arg(&key)
            .status()
            .unwrap();
        assert!(st.success());
        std::fs::write(d.join("authorized_keys"), authorized_keys).unwrap();
        let host_key_fingerprint = fingerprint(&d.join("host_ed25519.pub"));
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let config = format!(
            "{extra}\nListenAddress 127.0.0.1\nPort {port}\nHostKey {}\nAuthorizedKeysFile {}\nPidFile {}\n\
             UsePAM no\nStrictModes no\nPasswordAuthentication yes\nPubkeyAuthentication yes\n\
             PermitRootLogin yes\nLogLevel ERROR\n",
            key.display(),
            d.join("authorized_keys").display(),
            d.join("sshd.pid").display()
        );
        std::fs::write(d.join("sshd_config"), config).unwrap();
        let _ = std::fs::create_dir_all("/run/sshd");
        let child = Command::new(find("sshd"))
            .args(["-D", "-e", "-f"])
            .arg(d.join("sshd_config"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(d.join("sshd.log")).unwrap())
            .spawn()
            .expect("start sshd (tests run it as root)");
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "sshd did not listen on {port}");
            std::thread::sleep(Duration::from_millis(20));
        }
        Self {
            port,
            host_key_fingerprint,
            dir,
            child,
        }
    }
}

impl Sshd {
    /// What sshd logged so far (its stderr).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("sshd.log")).unwrap_or_default()
    }

    /// A fresh ed25519 host key's fingerprint that is not this server's (a wrong pin).
    pub fn other_fingerprint(&self) -> String {
        let key = self.dir.path().join("other_host_key");
        let _ = std::fs::remove_file(&key);
        let _ = std::fs::remove_file(key.with_extension("pub"));
        let st = Command::new(find("ssh-keygen"))
            .args(["-q", "-t", "ed25519", "-N", "", "-f"])
            .arg(&key)
            .status()
            .unwrap();
        assert!(st.success());
        fingerprint(&key.with_extension("pub"))
    }
}

/// `SHA256:…` of a public key file, as `ssh-keygen -l` prints it.
pub fn fingerprint(public_file: &std::path::Path) -> String {
    let out = Command::new(find("ssh-keygen"))
        .arg("-lf")
        .arg(public_file)
        .output()
        .unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .split_whitespace()
        .nth(1)
        .unwrap()
        .to_owned()
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
