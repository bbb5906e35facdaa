use super::*;
use crate::keys::MasterKey;
use crate::store::{set_meta, Store};

fn store(tag: &str) -> Store {
    let dir = std::env::temp_dir().join(format!("av-audit-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut s = Store::create(&dir.join("vault.db"), &MasterKey::generate()).unwrap();
    let tx = s.write().unwrap();
    set_meta(&tx, "vault_id", "vlt_test").unwrap();
    tx.commit().unwrap();
    s
}

#[test]
fn rows_chain_from_the_genesis_of_the_vault_id() {
    let mut s = store("chain");
    let tx = s.write().unwrap();
    let a = append(&tx, "vault.init", None, None, &json!({"b": 1, "a": "x"})).unwrap();
    let b = append(&tx, "credential.add", Some("ses_1"), None, &json!({})).unwrap();
    tx.commit().unwrap();
    assert_eq!((a.seq, b.seq), (1, 2));
    #[allow(clippy::type_complexity)]
    let rows: Vec<(
        i64,
        String,
        String,
        Option<String>,
        String,
        Vec<u8>,
        Vec<u8>,
    )> = s
        .conn()
        .prepare("SELECT seq, ts, kind, session_id, body, prev, hash FROM audit ORDER BY seq")
        .unwrap()
        .query_map([], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
            ))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(rows[0].4, r#"{"a":"x","b":1}"#);
    let mut prev = genesis("vlt_test");
    for (seq, ts, kind, session, body, stored_prev, hash) in rows {
        assert_eq!(stored_prev, prev);
        let body: Value = serde_json::from_str(&body).unwrap();
        let row = canonical_row(seq, &ts, &kind, session.as_deref(), None, &body);
        assert_eq!(hash, row_hash(&prev, &row));
        prev = hash.try_into().unwrap();
    }
}

#[test]
fn a_rolled_back_transaction_leaves_no_row() {
    let mut s = store("rollback");
    {
        let tx = s.write().unwrap();
        append(&tx, "x", None, None, &json!({})).unwrap();
    }
    let n: i64 = s
        .conn()
        .query_row("SELECT count(*) FROM audit", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 0);
}

#[test]
fn genesis_depends_on_the_vault() {
    assert_ne!(genesis("a"), genesis("b"));
}
