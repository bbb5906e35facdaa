//! Benchmark: journal appends per second at the durability setting the vault uses
//! (`synchronous = FULL`, WAL) and at `NORMAL` for comparison, one transaction per append, against
//! what the disk takes to make the same WAL writes durable with nothing else (its floor); then a
//! 1,000,000-row chain verified in the database and as an export, against plain blake3 of the
//! same rows measured in the same run: per row over exactly the bytes the verifier hashes
//! (`prev ‖ canonical row`), and over the whole export.
//!
//! The journal is a real vault's (`Vault::init`: row 1 is `vault.init` with its vault id and
//! approver key), appended through `audit::append` with typed bodies (`audit/journal.rs`): two
//! signed credentials, then sessions of blocks of ten rows, each an action the person approved
//! (its `approved` row carrying the approver's signed decision, its dispatch spending that
//! decision's nonce) and two run on a signed `never` policy: one signed decision per ten rows.
//! The bench fails unless every verdict is ok, and held to the key where one is given.
//!
//! Held to the approver's key (what `vault verify` runs on vault.db, and `vault verify --file
//! --approver-key` on an export), verification also checks every signature (in batches, on the
//! workers) and what each dispatch rests on; the same export is verified with and without the key
//! in the same run (goal: at most 1.15x the time).
//!
//! Each figure of the verify section, the verifiers' and the peers' alike, is the median of three
//! runs.
//!
//! It also prints a ceiling for verifying vault.db on this machine: every core doing nothing but
//! the work each row needs (reading it, measured alone; hashing it, the peer; its signature
//! checked, alone in batches; the in-order checks, measured alone), split perfectly. No verifier
//! of this file format can beat it, so verifying vault.db is judged against it (decrypting pages is
//! work blake3 alone never does); the export, which needs no decryption, against the blake3 peer.
//!
//! Run: `cargo bench --bench audit` (goals: at least 5,000 appends/s; 1,000,000 rows/s verified;
//! vault.db at 80% of the ceiling, the export at 80% of per-row blake3; held to the key at most
//! 1.15x the time without).
//! `cargo bench --bench audit -- --quick`: a 20,000-row chain, checks only (what CI runs).
mod common;
#[path = "audit/journal.rs"]
mod journal;
#[path = "audit/peers.rs"]
mod peers;

use agent_vault::approvals::Trust;
use agent_vault::audit;
use agent_vault::keys::Passphrase;
use agent_vault::paths::VaultPaths;
use agent_vault::store::Store;
use agent_vault::vault::Vault;
use journal::Journal;
use peers::{hashed_bytes, in_order_checks, read_only, signatures_alone, signed_rows};
use std::time::{Duration, Instant};

/// Appends per second, one `BEGIN IMMEDIATE` transaction (and commit) per row.
fn appends_per_s(s: &mut Store, j: &mut Journal, n: usize) -> f64 {
    let t = Instant::now();
    for _ in 0..n {
        let tx = s.write().unwrap();
        j.append(&tx);
        tx.commit().unwrap();
    }
    n as f64 / t.elapsed().as_secs_f64()
}

/// The disk's own row: the floor under appends at FULL.
const SYNC: &str = "peer: this disk, a commit's WAL frames rewritten + fsync";

/// A WAL frame: a 24-byte header and a 4 KiB page.
const FRAME: u64 = 24 + 4096;

/// Bytes this process has handed to `write`/`pwrite` so far (`wchar` of /proc/self/io): what the
/// appends wrote, counted from the outside, whatever the schema's indexes make it.
fn bytes_written() -> u64 {
    std::fs::read_to_string("/proc/self/io")
        .ok()
        .and_then(|io| {
            io.lines().find_map(|l| {
                l.strip_prefix("wchar: ")
                    .and_then(|v| v.trim().parse().ok())
            })
        })
        .expect("/proc/self/io has wchar")
}

/// Syncs per second of what the vault's one-row commits at FULL wrote (`frames` WAL frames per
/// commit on average, as counted by `bytes_written`; strace shows each frame as a header and a
/// page, then `fsync`), as plain file writes over a 4 MiB file (the WAL's size between
/// checkpoints) rewritten in place: commit `i` writes the frames that bring the total to
/// `(i + 1) × frames`.
fn disk_syncs_per_s(dir: &std::path::Path, n: usize, frames: f64) -> f64 {
    use std::os::unix::fs::FileExt;
    let path = dir.join("sync-probe");
    let f = std::fs::File::create_new(&path).expect("the probe file");
    f.set_len(1000 * FRAME).unwrap();
    f.sync_all().unwrap();
    let page = [0x5au8; 4096];
    let total = |i: u64| (i as f64 * frames).round() as u64;
    let t = Instant::now();
    for i in 0..n as u64 {
        for k in total(i)..total(i + 1) {
            let at = (k % 999) * FRAME;
            f.write_all_at(&[0xa5; 24], at).unwrap();
            f.write_all_at(&page, at + 24).unwrap();
        }
        f.sync_all().unwrap();
    }
    let rate = n as f64 / t.elapsed().as_secs_f64();
    drop(f);
    std::fs::remove_file(&path).unwrap();
    rate
}

/// The median of three runs of `f` (each returning its own time): one run's figure moves with
/// what else the machine does; each figure of the verify section, peers included, is taken so.
fn median3(mut f: impl FnMut() -> Duration) -> Duration {
    let mut d = [f(), f(), f()];
    d.sort();
    d[1]
}

fn rate(n: f64, d: Duration) -> f64 {
    n / d.as_secs_f64()
}

fn main() {
    let quick = common::quick();
    let appends = common::size(quick, 5_000, 200);
    let total_rows = common::size(quick, 1_000_000, 20_000);

    let dir = std::env::temp_dir().join(format!("av-bench-audit-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let paths = VaultPaths::new(dir.join("vault"));
    let pass = Passphrase::from_string(common::PASSPHRASE.into());
    let (vault, keys) = Vault::init(paths.clone(), &pass).expect("init");
    let vault_id = vault.vault_id.clone();
    let mut store = vault.store;
    let mut journal = Journal::new(&mut store, &keys.approver, &vault_id);
    let key = keys.approver.public();

    // 1. Appends at FULL (what Store::open sets), then at NORMAL, on the same journal.
    let written = bytes_written();
    let full_rate = appends_per_s(&mut store, &mut journal, appends);
    let frames = (bytes_written() - written) as f64 / FRAME as f64 / appends as f64;
    store
        .conn()
        .execute_batch("PRAGMA synchronous = NORMAL;")
        .unwrap();
    let normal_rate = appends_per_s(&mut store, &mut journal, appends);
    store
        .conn()
        .execute_batch("PRAGMA synchronous = FULL;")
        .unwrap();
    let report = audit::verify_store(store.conn(), &vault_id, &[], None).unwrap();
    assert!(report.ok(), "{}", report.to_json_line());
    // The floor under one durable transaction per row: what this disk takes to make the same
    // writes durable with nothing else (no SQL, no cipher), in the same directory.
    let sync_rate = disk_syncs_per_s(&dir, appends, frames);

    // 2. The rest of the chain up to `total_rows` rows, in one transaction.
    // Row 1 and the two credentials, then the journal's rows so far.
    let have = 3 + journal.rows as usize;
    let t = Instant::now();
    {
        let tx = store.write().unwrap();
        for _ in have..total_rows {
            journal.append(&tx);
        }
        tx.commit().unwrap();
    }
    let build = t.elapsed();
    let built = total_rows - have;

    // 3. Verify in the database, export, verify the export: every verdict must be ok.
    Trust::new(&vault_id, &keys.approver)
        .check_store(store.conn())
        .expect("row 1 and meta name the vault's approver key");
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
    let timed = |f: &dyn Fn() -> audit::Report| {
        median3(|| {
            let t = Instant::now();
            let report = f();
            let d = t.elapsed();
            let held = report.signatures.key.is_none() || report.held();
            assert!(
                report.ok() && held && report.rows == total_rows as u64,
                "{}",
                report.to_json_line()
            );
            d
        })
    };
    // What `vault verify` runs (one reader per core, held to the vault's key), then the same on
    // one thread, and with no key.
    let verify_db =
        timed(&|| audit::verify_store_parallel(&store, &vault_id, &[], Some(&key)).unwrap());
    let verify_db_1 = timed(&|| {
        let chunk = audit::VERIFY_CHUNK_ROWS;
        audit::verify_store_with(&store, &vault_id, &[], Some(&key), 1, chunk).unwrap()
    });
    let verify_db_unheld =
        timed(&|| audit::verify_store_parallel(&store, &vault_id, &[], None).unwrap());
    // What reading alone costs: every row decrypted and stepped over, nothing hashed.
    let read_db = median3(|| {
        let t = Instant::now();
        assert!(read_only(store.conn()) > 0);
        t.elapsed()
    });
    let file = dir.join("audit.jsonl");
    let t = Instant::now();
    audit::export(store.conn(), &file).unwrap();
    let export = t.elapsed();
    // The same export with no key and held to it, in the same run.
    let verify_file = timed(&|| audit::verify_file(&file, &[], None).unwrap());
    let verify_file_held = timed(&|| audit::verify_file(&file, &[], Some(&key)).unwrap());
    let verify_file_1 = timed(&|| audit::verify_file_with(&file, &[], None, 1).unwrap());
    let signatures = audit::verify_file(&file, &[], Some(&key))
        .unwrap()
        .signatures
        .checked;

    // 4. Peers: plain blake3 over the whole export, and per row over the bytes the verifier
    // hashes (in memory, each row's hash checked against the stored one after the clock stops).
    let export_bytes = std::fs::read(&file).unwrap();
    let size = export_bytes.len() as f64;
    let b3_whole = median3(|| {
        let t = Instant::now();
        std::hint::black_box(blake3::hash(std::hint::black_box(&export_bytes)));
        t.elapsed()
    });
    drop(export_bytes);
    let (rows_buf, ends, stored) = hashed_bytes(store.conn());
    let in_order = in_order_checks(store.conn(), &vault_id, &key);
    // A chunk of the verifier's rows holds this many signatures; checked alone, so many at once.
    let signed = signed_rows(store.conn());
    // Every approval's, and the two credentials' (too few to count apart).
    assert_eq!(signed.len() as u64 + 2, signatures);
    let per_chunk = (audit::VERIFY_CHUNK_ROWS as usize * signed.len()).div_ceil(total_rows);
    let sigs_alone = signatures_alone(&signed, &key, per_chunk);
    assert_eq!(ends.len(), total_rows);
    let mut per_row = Vec::with_capacity(total_rows);
    let b3_rows = median3(|| {
        per_row.clear();
        let t = Instant::now();
        let mut start = 0;
        for &end in &ends {
            per_row.push(*blake3::hash(&rows_buf[start..end]).as_bytes());
            start = end;
        }
        t.elapsed()
    });
    assert!(
        per_row == stored,
        "the peer must hash exactly what the verifier hashes"
    );
    drop(store);

    let n = total_rows as f64;
    let mb = |d: Duration| size / d.as_secs_f64() / 1e6;
    println!(
        "audit journal, {appends} appends per setting, {total_rows} rows verified ({:.0} MB exported, {:.0} MB hashed per row)",
        size / 1e6,
        rows_buf.len() as f64 / 1e6
    );
    println!(
        "{:<52} {:>14} {:>12} {:>10}",
        "", "rows/s", "MB/s", "time (s)"
    );
    let line = |name: &str, rows: f64, d: Duration, mbs: Option<f64>| {
        let mbs = mbs.map_or("-".into(), |m| format!("{m:.0}"));
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
    println!("{:<52} {:>14.0} {:>12} {:>10}", SYNC, sync_rate, "-", "-");
    println!("WAL frames per append commit at FULL (bytes written / 4,120): {frames:.2}");
    line(
        "build the rest of the chain (append, one transaction)",
        built as f64,
        build,
        None,
    );
    line(
        &format!("verify in vault.db, {workers} readers, held to the key"),
        n,
        verify_db,
        Some(mb(verify_db)),
    );
    line(
        "verify in vault.db, 1 reader, held to the key",
        n,
        verify_db_1,
        Some(mb(verify_db_1)),
    );
    line(
        &format!("verify in vault.db, {workers} readers, no key"),
        n,
        verify_db_unheld,
        Some(mb(verify_db_unheld)),
    );
    line(
        &format!(
            "signatures checked alone, 1 thread, batches of {per_chunk} ({signatures} in all)"
        ),
        n,
        sigs_alone,
        None,
    );
    line(
        "read every row of vault.db on one thread, no hashing",
        n,
        read_db,
        None,
    );
    line(
        "in-order checks alone (rows in memory, each one's Facts taken)",
        n,
        in_order,
        None,
    );
    line("export-audit to JSON lines", n, export, Some(mb(export)));
    line(
        &format!("verify --file, {workers} parsers, no key (parse, re-hash, lifecycle)"),
        n,
        verify_file,
        Some(mb(verify_file)),
    );
    line(
        &format!("verify --file, {workers} parsers, held to the key (--approver-key)"),
        n,
        verify_file_held,
        Some(mb(verify_file_held)),
    );
    line(
        "verify --file, 1 parser",
        n,
        verify_file_1,
        Some(mb(verify_file_1)),
    );
    line(
        "peer: blake3 per row of prev + canonical row",
        n,
        b3_rows,
        Some(rows_buf.len() as f64 / b3_rows.as_secs_f64() / 1e6),
    );
    line(
        "peer: blake3 of the export, whole buffer",
        n,
        b3_whole,
        Some(mb(b3_whole)),
    );
    // What no verifier of vault.db could beat on this machine: every core busy with nothing but
    // the work each row needs (read and decrypt it, hash it, check it in order), split perfectly
    // (the in-order checks cannot be split, hence the min).
    let per_row = |d: Duration| d.as_secs_f64() / n;
    let busy = per_row(read_db) + per_row(b3_rows) + per_row(sigs_alone) + per_row(in_order);
    let ceiling = (workers as f64 / busy).min(1.0 / per_row(in_order));
    println!(
        "ceiling for verify in vault.db, {workers} cores doing only read + blake3 + signatures + in-order checks: {ceiling:.0} rows/s ({:.1}% of blake3 per row)",
        ceiling / rate(n, b3_rows) * 100.0
    );
    // vault.db against its ceiling, the export against per-row blake3.
    let db_ratio = rate(n, verify_db) / ceiling;
    let file_ratio = rate(n, verify_file) / rate(n, b3_rows);
    // Held to the key against no key: time over time, same export, same run.
    let held_ratio = verify_file_held.as_secs_f64() / verify_file.as_secs_f64();
    let held_db_ratio = verify_db.as_secs_f64() / verify_db_unheld.as_secs_f64();
    println!(
        "held to the approver key / no key (time): export {held_ratio:.2}x, vault.db {held_db_ratio:.2}x ({signatures} signatures, one per {:.1} rows)",
        n / signatures.max(1) as f64
    );
    println!(
        "ratios: FULL/NORMAL appends {:.2}x, FULL/disk syncs {:.2}x; rows/s of verify db / ceiling {:.1}% (/ blake3 per row {:.1}%), verify file / blake3 per row {:.1}%",
        full_rate / normal_rate,
        full_rate / sync_rate,
        db_ratio * 100.0,
        rate(n, verify_db) / rate(n, b3_rows) * 100.0,
        file_ratio * 100.0,
    );
    let met = |ok: bool| if ok { "met" } else { "MISSED" };
    println!(
        "goals: >= 5,000 appends/s at FULL: {}; >= 1,000,000 rows/s verified: vault.db {}, export {}; vault.db >= 80% of the ceiling: {}; export >= 80% of per-row blake3: {}; held to the key <= 1.15x the time without: {}",
        met(full_rate >= 5000.0),
        met(rate(n, verify_db) >= 1_000_000.0),
        met(rate(n, verify_file) >= 1_000_000.0),
        met(db_ratio >= 0.8),
        met(file_ratio >= 0.8),
        met(held_ratio <= 1.15),
    );
    // The same figures and goals for the report (`cargo bench --bench report`).
    use common::{emit_figure, emit_goal, Side};
    const NORMAL: &str = "append, synchronous=NORMAL (comparison), 1 tx/row";
    const B3: &str = "peer: blake3 per row of prev + canonical row";
    const CEILING: &str =
        "ceiling: verify in vault.db, every core only reading, hashing and checking";
    for (row, side, rows_per_s) in [
        (
            "append, synchronous=FULL (vault setting), 1 tx/row",
            Side::Vs(SYNC),
            full_rate,
        ),
        (NORMAL, Side::Alone, normal_rate),
        (SYNC, Side::Peer, sync_rate),
        ("verify in vault.db", Side::Vs(CEILING), rate(n, verify_db)),
        (CEILING, Side::Vs(B3), ceiling),
        ("export-audit to JSON lines", Side::Alone, rate(n, export)),
        ("verify --file (export)", Side::Vs(B3), rate(n, verify_file)),
        (
            "verify --file (export), held to the approver key",
            Side::Vs("verify --file (export)"),
            rate(n, verify_file_held),
        ),
        (B3, Side::Peer, rate(n, b3_rows)),
    ] {
        emit_figure(row, "rows/s", side, rows_per_s);
    }
    emit_figure(
        "WAL frames per append commit (bytes written / 4,120)",
        "frames",
        Side::Alone,
        frames,
    );
    let whole = "peer: blake3 of the export, whole buffer";
    emit_figure(whole, "MB/s", Side::Peer, mb(b3_whole));
    let appends_met = full_rate >= 5000.0;
    emit_goal(
        ">= 5,000 appends/s at FULL",
        full_rate,
        "rows/s",
        appends_met,
    );
    for (what, r, ratio, of) in [
        ("vault.db", verify_db, db_ratio, "the ceiling"),
        ("export", verify_file, file_ratio, "per-row blake3"),
    ] {
        let r = rate(n, r);
        emit_goal(
            &format!(">= 1,000,000 rows/s verified ({what})"),
            r,
            "rows/s",
            r >= 1e6,
        );
        let pct = ratio * 100.0;
        emit_goal(&format!(">= 80% of {of} ({what})"), pct, "%", ratio >= 0.8);
    }
    emit_goal(
        "held to the approver key <= 1.15x the time without (export)",
        held_ratio,
        "x",
        held_ratio <= 1.15,
    );
    let _ = std::fs::remove_dir_all(&dir);
}
