//! Journal helpers shared by the audit tests: open a test vault through the library, append
//! rows as the MCP server does, and read `vault verify --json`.
use super::TestVault;
use agent_vault::audit;
use agent_vault::vault::Vault;
use serde_json::{json, Value};

pub fn open(v: &TestVault) -> Vault {
    v.open_db()
}

/// Appends `n` rows (one transaction each) through the library, as the MCP server will.
pub fn append_rows(v: &TestVault, n: usize) {
    let mut vault = open(v);
    for i in 0..n {
        let tx = vault.store.write().unwrap();
        audit::append_row(&tx, "test.row", Some("ses_t"), None, &json!({"i": i})).unwrap();
        tx.commit().unwrap();
    }
}

/// The vault's approver public key in hex, as `vault approver show-key` prints it (with the
/// passphrase, from `vault.key.age`): what a person keeps elsewhere to hold an export to.
pub fn approver_key(v: &mut TestVault) -> String {
    let run = v
        .run(
            &["approver", "show-key", "--passphrase-stdin"],
            Some(&format!("{}\n", super::PASSPHRASE)),
        )
        .ok();
    run.stdout.lines().next().unwrap().to_owned()
}

pub fn verify_json(v: &mut TestVault, args: &[&str], want_code: i32) -> Value {
    let mut all = vec!["verify", "--json"];
    all.extend_from_slice(args);
    let run = v.run(&all, None).code(want_code);
    serde_json::from_str(run.stdout.trim()).unwrap()
}

/// The kinds of every journal row, oldest first.
pub fn kinds(v: &TestVault) -> Vec<String> {
    let vault = open(v);
    let mut stmt = vault
        .store
        .conn()
        .prepare("SELECT kind FROM audit ORDER BY seq")
        .unwrap();
    stmt.query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// Why the vault last locked: the reason of the newest `vault.lock` row.
pub fn last_lock_reason(v: &TestVault) -> String {
    open(v)
        .store
        .conn()
        .query_row(
            "SELECT json_extract(body, '$.reason') FROM audit WHERE kind = 'vault.lock' ORDER BY seq DESC LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap()
}
