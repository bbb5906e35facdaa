//! Benchmark: open `vault.db` cold with the raw master key and list credentials, against the same
//! database opened with SQLCipher's default passphrase KDF (PBKDF2-HMAC-SHA512, 256,000
//! iterations), measured in the same run. Also the whole `vault list --json` process.
//!
//! Run: `cargo bench --bench open_list` (prints a table; the goal is ≤ 5 ms for open + list).
//! `-- --quick`: a few of each, checks only (what CI runs).
mod common;

use agent_vault::credentials::{
    self, Approval, HttpAuth, HttpTarget, NewCredential, Secret, Target,
};
use agent_vault::keys::Passphrase;
use agent_vault::paths::VaultPaths;
use agent_vault::store::Store;
use agent_vault::vault::Vault;
use common::{stats, Side};
use std::time::Instant;

const CREDENTIALS: usize = 20;

fn cred(i: usize) -> NewCredential {
    NewCredential {
        id: credentials::new_id("cred"),
        profile: "default".into(),
        name: format!("api-{i:02}"),
        approval: Approval::Each,
        target: Target::Http(HttpTarget {
            presence: agent_vault::wire::touch::Presence::None,
            scheme: "https".into(),
            host: format!("api{i}.example.com"),
            port: 443,
            path_prefix: "/v1/".into(),
            methods: None,
            auth: HttpAuth::Bearer,
            ca_file: None,
            allow_headers: Vec::new(),
            secret_from: None,
        }),
        secret: Secret::new(format!("token-{i}").into_bytes()),
    }
}

fn main() {
    let quick = common::quick();
    let dir = std::env::temp_dir().join(format!("av-bench-open-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let paths = VaultPaths::new(dir.join("vault"));
    let pass = Passphrase::from_string("bench passphrase, not secret".into());
    let (mut vault, keys) = Vault::init(paths.clone(), &pass).expect("init");
    for i in 0..CREDENTIALS {
        let id = vault.vault_id.clone();
        credentials::add_as_approver(&mut vault.store, &keys.approver, &id, cred(i)).unwrap();
    }
    drop(vault);
    // The whole-process case goes through the agent, as `vault list` does when unlocked.
    let mut unlock = std::process::Command::new(env!("CARGO_BIN_EXE_vault"))
        .args(["unlock", "--passphrase-stdin"])
        .env("VAULT_DIR", paths.dir())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        writeln!(unlock.stdin.take().unwrap(), "bench passphrase, not secret").unwrap();
    }
    assert!(unlock.wait().unwrap().success());
    // The master key, as the agent holds it.
    let trust = agent_vault::approvals::Trust::new(&paths.read_id().unwrap(), &keys.approver);
    let key = keys.master;

    // 1. Raw key: new connection, key, first read, schema check, list.
    let n = common::size(quick, 300, 20);
    let mut raw = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let store = Store::open(&paths.db(), &key).unwrap();
        let list = credentials::list(&store, &trust, None).unwrap();
        assert_eq!(list.len(), CREDENTIALS);
        drop(store);
        raw.push(t.elapsed());
    }

    // 2. Peer: the same schema and rows in a SQLCipher file keyed by passphrase (default KDF).
    let kdf_db = dir.join("kdf.db");
    {
        // Exported from the vault itself into a file attached with the passphrase and SQLCipher's
        // defaults (the attached file is empty, so it takes the export's settings, not ours).
        let c = rusqlite::Connection::open(paths.db()).unwrap();
        c.execute_batch(&format!(
            "PRAGMA key = \"x'{}'\"; {}",
            key.to_hex().as_str(),
            agent_vault::store::PAGE_FORMAT_PRAGMAS
        ))
        .unwrap();
        c.execute(
            "ATTACH DATABASE ?1 AS kdf KEY 'bench passphrase, not secret'",
            [kdf_db.to_str().unwrap()],
        )
        .unwrap();
        c.query_row("SELECT sqlcipher_export('kdf')", [], |_| Ok(()))
            .unwrap();
        c.execute_batch("DETACH DATABASE kdf").unwrap();
    }
    let m = common::size(quick, 15, 2);
    let mut kdf = Vec::with_capacity(m);
    for _ in 0..m {
        let t = Instant::now();
        let c = rusqlite::Connection::open(&kdf_db).unwrap();
        c.execute_batch("PRAGMA key = 'bench passphrase, not secret';")
            .unwrap();
        let mut stmt = c.prepare("SELECT id, profile, name, kind, version, approval, target FROM credentials ORDER BY profile, name").unwrap();
        let rows = stmt
            .query_map([], |r| r.get::<_, String>(2))
            .unwrap()
            .count();
        assert_eq!(rows, CREDENTIALS);
        drop(stmt);
        drop(c);
        kdf.push(t.elapsed());
    }

    // 3. The whole process: spawn `vault list --json` (connect to the agent, list, print).
    let p = common::size(quick, 60, 5);
    let mut proc_times = Vec::with_capacity(p);
    for _ in 0..p {
        let t = Instant::now();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_vault"))
            .args(["list", "--json"])
            .env("VAULT_DIR", paths.dir())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        proc_times.push(t.elapsed());
    }

    const KDF: &str = "open + list, passphrase KDF (peer)";
    common::emit_samples("open + list, raw key (vault)", Side::Vs(KDF), &raw);
    common::emit_samples(KDF, Side::Peer, &kdf);
    common::emit_samples("`vault list --json` process", Side::Alone, &proc_times);
    let (r50, r95, rmean) = stats(raw);
    let (k50, k95, kmean) = stats(kdf);
    let (p50, p95, pmean) = stats(proc_times);
    println!("open + list {CREDENTIALS} credentials, cold connection each time (ms)");
    println!("{:<44} {:>9} {:>9} {:>9}", "", "p50", "p95", "mean");
    println!(
        "{:<44} {:>9.3} {:>9.3} {:>9.3}",
        format!("raw key (vault), n={n}"),
        r50,
        r95,
        rmean
    );
    println!(
        "{:<44} {:>9.3} {:>9.3} {:>9.3}",
        format!("passphrase KDF (SQLCipher default), n={m}"),
        k50,
        k95,
        kmean
    );
    println!(
        "{:<44} {:>9.3} {:>9.3} {:>9.3}",
        format!("`vault list --json` process, n={p}"),
        p50,
        p95,
        pmean
    );
    println!(
        "ratio KDF / raw key at p50: {:.0}x; goal raw p50 <= 5 ms: {}",
        k50 / r50,
        if r50 <= 5.0 { "met" } else { "MISSED" }
    );
    common::emit_goal("raw key open + list p50 <= 5 ms", r50, "ms", r50 <= 5.0);

    let _ = std::process::Command::new(env!("CARGO_BIN_EXE_vault"))
        .arg("lock")
        .env("VAULT_DIR", paths.dir())
        .output();
    let _ = std::fs::remove_dir_all(&dir);
}
