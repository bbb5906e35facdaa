//! Benchmark: journal appends per second at the durability setting the vault uses
//! (`synchronous = FULL`, WAL) and at `NORMAL` for comparison, one transaction per append; then a
//! 1,000,000-row chain verified in the database and as an export, against plain blake3 hashing of
//! the same exported bytes measured in the same run (whole file, and line by line).
//!
//! Run: `cargo bench --bench audit` (goals: >= 5,000 appends/s, >= 500,000 rows/s verified).
use agent_vault::audit;
use agent_vault::keys::MasterKey;
use agent_vault::paths;
use agent_vault::store::{set_meta, Store};
use serde_json::json;
use std::path::Path;
use std::time::{Duration, Instant};

const APPENDS: usize = 5_000;
const ROWS: usize = 1_000_000;

fn new_store(path: &Path) -> Store {
    drop(paths::create_new_private(path).unwrap());
    let mut s = Store::create(path, &MasterKey::generate()).unwrap();
    let tx = s.write().unwrap();
    set_meta(&tx, "vault_id", "vlt_bench").unwrap();
    audit::append_row(
        &tx,
        "vault.init",
        None,
        None,
        &json!({"vault_id": "vlt_bench"}),
    )
    .unwrap();
    tx.commit().unwrap();
    s
}

fn body(i: usize) -> serde_json::Value {
    json!({
        "state": "completed",
        "tool": "http_request",
        "credential": "api",
        "summary": format!("POST https://api.example.com/v1/items/{i} (credential api)"),
    })
}

/// Appends per second, one `BEGIN IMMEDIATE` transaction (and commit) per row.
fn appends_per_s(s: &mut Store) -> f64 {
    let t = Instant::now();
    for i in 0..APPENDS {
        let tx = s.write().unwrap();
        let act = format!("act_{i:08x}");
        audit::append_row(
            &tx,
            "action.completed",
            Some("ses_bench"),
            Some(&act),
            &body(i),
        )
        .unwrap();
        tx.commit().unwrap();
    }
    APPENDS as f64 / t.elapsed().as_secs_f64()
}

fn rate(n: f64, d: Duration) -> f64 {
    n / d.as_secs_f64()
}

fn main() {
    let dir = std::env::temp_dir().join(format!("av-bench-audit-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();

    // 1. Appends at FULL (what Store::open sets) and at NORMAL.
    let mut full = new_store(&dir.join("full.db"));
    let full_rate = appends_per_s(&mut full);
    let mut normal = new_store(&dir.join("normal.db"));
    normal
        .conn()
        .execute_batch("PRAGMA synchronous = NORMAL;")
        .unwrap();
    let normal_rate = appends_per_s(&mut normal);
    assert!(audit::verify_store(full.conn(), "vlt_bench", &[])
        .unwrap()
        .ok());
    drop((full, normal));

    // 2. A 1M-row chain, built in one transaction.
    let mut big = new_store(&dir.join("big.db"));
    let t = Instant::now();
    {
        let tx = big.write().unwrap();
        for i in 1..ROWS {
            let act = format!("act_{:08x}", i / 4);
            audit::append_row(
                &tx,
                "action.completed",
                Some("ses_bench"),
                Some(&act),
                &body(i),
            )
            .unwrap();
        }
        tx.commit().unwrap();
    }
    let build = t.elapsed();

    // 3. Verify in the database, export, verify the export.
    let t = Instant::now();
    let report = audit::verify_store(big.conn(), "vlt_bench", &[]).unwrap();
    let verify_db = t.elapsed();
    assert!(report.ok() && report.rows == ROWS as u64, "{report:?}");
    let file = dir.join("audit.jsonl");
    let t = Instant::now();
    audit::export(big.conn(), &file).unwrap();
    let export = t.elapsed();
    let t = Instant::now();
    let report = audit::verify_file(&file, &[]).unwrap();
    let verify_file = t.elapsed();
    assert!(report.ok() && report.rows == ROWS as u64, "{report:?}");

    // 4. Peers: plain blake3 over the same exported bytes (in memory), whole and per line.
    let bytes = std::fs::read(&file).unwrap();
    let size = bytes.len() as f64;
    let t = Instant::now();
    let whole = blake3::hash(&bytes);
    let b3_whole = t.elapsed();
    let t = Instant::now();
    let mut acc = 0u8;
    for line in bytes.split(|b| *b == b'\n') {
        acc ^= blake3::hash(line).as_bytes()[0];
    }
    let b3_lines = t.elapsed();
    std::hint::black_box((whole, acc));

    let mb = |d: Duration| size / d.as_secs_f64() / 1e6;
    println!(
        "audit journal, {} appends per setting, {ROWS} rows verified ({:.0} MB exported)",
        APPENDS,
        size / 1e6
    );
    println!(
        "{:<52} {:>14} {:>12} {:>10}",
        "", "rows/s", "MB/s", "time (s)"
    );
    let line = |name: &str, rows: f64, d: Duration, with_mb: bool| {
        let mbs = if with_mb {
            format!("{:.0}", mb(d))
        } else {
            "-".into()
        };
        println!(
            "{:<52} {:>14.0} {:>12} {:>10.3}",
            name,
            rate(rows, d),
            mbs,
            d.as_secs_f64()
        );
    };
    println!(
        "{:<52} {:>14.0} {:>12} {:>10}",
        "append, synchronous=FULL (vault setting), 1 tx/row", full_rate, "-", "-"
    );
    println!(
        "{:<52} {:>14.0} {:>12} {:>10}",
        "append, synchronous=NORMAL (comparison), 1 tx/row", normal_rate, "-", "-"
    );
    line(
        "build 1M-row chain (append, one transaction)",
        ROWS as f64,
        build,
        false,
    );
    line(
        "verify in vault.db (decrypt, read, re-hash)",
        ROWS as f64,
        verify_db,
        true,
    );
    line("export-audit to JSON lines", ROWS as f64, export, true);
    line(
        "verify --file (parse JSON lines, re-hash)",
        ROWS as f64,
        verify_file,
        true,
    );
    line(
        "peer: blake3 of the export, whole buffer",
        ROWS as f64,
        b3_whole,
        true,
    );
    line(
        "peer: blake3 of the export, line by line",
        ROWS as f64,
        b3_lines,
        true,
    );
    println!(
        "ratios: FULL/NORMAL appends {:.2}x; verify db / blake3 whole {:.2}x, / blake3 per line {:.2}x; verify file / blake3 per line {:.2}x",
        full_rate / normal_rate,
        mb(verify_db) / mb(b3_whole),
        mb(verify_db) / mb(b3_lines),
        mb(verify_file) / mb(b3_lines),
    );
    let met = |ok: bool| if ok { "met" } else { "MISSED" };
    println!(
        "goals: >= 5,000 appends/s at FULL: {}; >= 500,000 rows/s verified (vault.db): {}, (export): {}",
        met(full_rate >= 5000.0),
        met(rate(ROWS as f64, verify_db) >= 500_000.0),
        met(rate(ROWS as f64, verify_file) >= 500_000.0),
    );
    let _ = std::fs::remove_dir_all(&dir);
}
