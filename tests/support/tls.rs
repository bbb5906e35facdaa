//! A throwaway certificate authority and a leaf for `127.0.0.1`, made with the `openssl` CLI.
use std::path::{Path, PathBuf};
use std::process::Command;

pub struct TestCa {
    /// The CA certificate (what a credential's `--ca-file` names).
    pub ca_cert: PathBuf,
    /// The leaf certificate (subjectAltName IP:127.0.0.1) and its key, for the server.
    pub leaf_cert: PathBuf,
    pub leaf_key: PathBuf,
}

/// Runs `openssl` in `dir` with whitespace-separated `args`.
#[track_caller]
fn openssl(dir: &Path, args: &str) {
    let out = Command::new("openssl")
        .args(args.split_whitespace())
        .current_dir(dir)
        .output()
        .expect("run the openssl CLI (apt-get install openssl)");
    assert!(
        out.status.success(),
        "openssl {args}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl TestCa {
    /// Writes ca.pem, ca.key, leaf.pem, leaf.key into `dir`.
    pub fn create(dir: &Path) -> Self {
        Self::create_for(dir, "IP:127.0.0.1")
    }

    /// The same with the leaf's subjectAltName `san` (e.g. `DNS:name.example`).
    pub fn create_for(dir: &Path, san: &str) -> Self {
        let ec = "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes";
        openssl(
            dir,
            &format!(
                "req -x509 {ec} -keyout ca.key -out ca.pem -days 2 -subj /CN=agent-vault-test-CA \
                 -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign"
            ),
        );
        openssl(
            dir,
            &format!("req {ec} -keyout leaf.key -out leaf.csr -subj /CN=127.0.0.1"),
        );
        std::fs::write(
            dir.join("leaf.ext"),
            format!(
                "subjectAltName={san}\nbasicConstraints=CA:FALSE\n\
                 keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n"
            ),
        )
        .unwrap();
        openssl(
            dir,
            "x509 -req -in leaf.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out leaf.pem \
             -days 2 -extfile leaf.ext",
        );
        Self {
            ca_cert: dir.join("ca.pem"),
            leaf_cert: dir.join("leaf.pem"),
            leaf_key: dir.join("leaf.key"),
        }
    }
}
