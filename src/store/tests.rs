//! Unit tests of the store: real SQLCipher files in a temp dir.
use super::*;

fn temp_db(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("av-store-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("vault.db")
}

#[test]
fn create_then_reopen_with_the_same_key() {
    let path = temp_db("reopen");
    let key = MasterKey::generate();
    let store = Store::create(&path, &key).unwrap();
    assert_eq!(store.schema_version().unwrap(), LATEST_SCHEMA);
    assert!(store.cipher_version().unwrap().starts_with('4'));
    drop(store);
    let store = Store::open(&path, &key).unwrap();
    assert_eq!(store.schema_version().unwrap(), LATEST_SCHEMA);
    let head = std::fs::read(&path).unwrap();
    assert_ne!(
        &head[..16],
        b"SQLite format 3\0",
        "the file must be encrypted"
    );
}

#[test]
fn wrong_key_plaintext_and_missing_files_are_named() {
    let path = temp_db("wrong");
    Store::create(&path, &MasterKey::generate()).unwrap();
    let err = Store::open(&path, &MasterKey::generate()).unwrap_err();
    assert!(matches!(err, StoreError::WrongKeyOrNotVault(_)), "{err}");

    let plain = path.with_file_name("plain.db");
    Connection::open(&plain)
        .unwrap()
        .execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1);")
        .unwrap();
    let err = Store::open(&plain, &MasterKey::generate()).unwrap_err();
    assert!(matches!(err, StoreError::Plaintext(_)), "{err}");

    let junk = path.with_file_name("junk.db");
    std::fs::write(&junk, vec![0x5a; 8192]).unwrap();
    let err = Store::open(&junk, &MasterKey::generate()).unwrap_err();
    assert!(matches!(err, StoreError::WrongKeyOrNotVault(_)), "{err}");

    let err = Store::open(&path.with_file_name("absent.db"), &MasterKey::generate()).unwrap_err();
    assert!(matches!(err, StoreError::Missing(_)), "{err}");
}

#[test]
fn a_newer_schema_is_refused() {
    let path = temp_db("newer");
    let key = MasterKey::generate();
    let mut store = Store::create(&path, &key).unwrap();
    let tx = store.write().unwrap();
    tx.execute(
        "INSERT INTO schema_migrations VALUES (?1, 'from the future', 'x')",
        [LATEST_SCHEMA + 1],
    )
    .unwrap();
    tx.commit().unwrap();
    drop(store);
    let err = Store::open(&path, &key).unwrap_err();
    assert!(matches!(err, StoreError::NewerSchema { .. }), "{err}");
}

#[test]
fn audit_rows_refuse_update_and_delete() {
    let path = temp_db("appendonly");
    let mut store = Store::create(&path, &MasterKey::generate()).unwrap();
    let tx = store.write().unwrap();
    tx.execute(
        "INSERT INTO audit (seq, ts, kind, body, prev, hash) VALUES (1, 't', 'k', '{}', zeroblob(32), zeroblob(32))",
        [],
    )
    .unwrap();
    assert!(tx.execute("UPDATE audit SET kind = 'x'", []).is_err());
    assert!(tx.execute("DELETE FROM audit", []).is_err());
}
