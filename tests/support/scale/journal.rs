//! The journal as the scale suites read it: a read-only connection to `vault.db` for the targets
//! (what was committed at the moment a request arrived), the whole journal read back through
//! `vault export-audit` for the final checks, and the checks both suites share.
use super::{find_tag, run, Kind, Rig};
use crate::support::{TestVault, PASSPHRASE};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A read-only connection to the vault's database, opened with its key in this test process.
/// It never writes.
pub struct JournalReader {
    conn: Mutex<rusqlite::Connection>,
}

impl JournalReader {
    pub fn open(v: &TestVault) -> Arc<Self> {
        let key = v.master_hex();
        let conn = rusqlite::Connection::open_with_flags(
            v.vault_dir().join("vault.db"),
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .unwrap();
        conn.execute_batch("PRAGMA cipher_log_level = NONE;").ok();
        conn.execute_batch(&format!("PRAGMA key = \"x'{key}'\";"))
            .unwrap();
        conn.execute_batch(agent_vault::store::PAGE_FORMAT_PRAGMAS)
            .unwrap();
        conn.busy_timeout(Duration::from_secs(10)).unwrap();
        conn.query_row("SELECT count(*) FROM audit", [], |r| r.get::<_, i64>(0))
            .expect("the test opens vault.db read-only with its key");
        Arc::new(Self {
            conn: Mutex::new(conn),
        })
    }

    /// The first `action.dispatched` row whose body names `tag`: (action id, seq). The newest
    /// 2,000 rows first (the row was committed a moment ago), then the whole journal.
    pub fn dispatched(&self, tag: &str) -> Option<(String, i64)> {
        use rusqlite::OptionalExtension;
        let conn = self.conn.lock().unwrap();
        let head: i64 = conn
            .query_row("SELECT coalesce(max(seq), 0) FROM audit", [], |r| r.get(0))
            .unwrap();
        for from in [head - 2000, 0] {
            let found = conn
                .query_row(
                    "SELECT action_id, seq FROM audit WHERE seq > ?1 AND kind = 'action.dispatched' \
                     AND instr(body, ?2) > 0 ORDER BY seq LIMIT 1",
                    rusqlite::params![from, tag],
                    |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)),
                )
                .optional()
                .unwrap();
            if found.is_some() {
                return found;
            }
        }
        None
    }

    /// The newest row: (seq, hash in hex).
    pub fn head(&self) -> (i64, String) {
        let conn = self.conn.lock().unwrap();
        conn.query_row(
            "SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1",
            [],
            |r| Ok((r.get::<_, i64>(0)?, hex::encode(r.get::<_, Vec<u8>>(1)?))),
        )
        .unwrap()
    }

    /// Actions whose last journal row is not a final state: what still runs or waits.
    pub fn unfinished(&self) -> Vec<(String, String)> {
        let conn = self.conn.lock().unwrap();
        let mut stmt = conn
            .prepare(
                "SELECT action_id, kind FROM audit WHERE seq IN (SELECT max(seq) FROM audit \
                 WHERE kind LIKE 'action.%' AND action_id IS NOT NULL GROUP BY action_id) \
                 AND kind IN ('action.pending', 'action.received', 'action.approved', 'action.dispatched')",
            )
            .unwrap();
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }
}

/// `vault verify --json`.
pub fn verify(v: &TestVault) -> Value {
    let r = run(v, &["verify", "--json"], None);
    serde_json::from_str(r.stdout.trim())
        .unwrap_or_else(|_| panic!("vault verify --json: {}\n{}", r.stdout, r.stderr))
}

/// One journal row as `vault export-audit` wrote it.
#[derive(Debug, Clone)]
pub struct Row {
    pub seq: i64,
    pub kind: String,
    pub action: Option<String>,
    pub body: Value,
    pub hash: String,
}

impl Row {
    /// `action.<state>` → state.
    pub fn state(&self) -> Option<&str> {
        self.kind.strip_prefix("action.")
    }
}

/// The whole journal, through `vault export-audit FILE` (the keyless export), which must
/// pass `vault verify --file` held to the approver's public key (every action that ran resting on
/// a signed basis) and number its rows 1, 2, 3, … with no gap.
pub fn export(v: &TestVault, name: &str) -> Vec<Row> {
    let file = v.dir.path().join(name);
    let path = file.to_str().unwrap();
    run(v, &["export-audit", path], None).ok();
    let shown = run(
        v,
        &["approver", "show-key", "--passphrase-stdin"],
        Some(&format!("{PASSPHRASE}\n")),
    )
    .ok();
    let key = shown
        .stdout
        .lines()
        .next()
        .expect("show-key prints the key");
    let held = ["verify", "--json", "--file", path, "--approver-key", key];
    let check = run(v, &held, None).ok();
    let line: Value = serde_json::from_str(check.stdout.trim()).unwrap();
    assert_eq!(line["ok"], true, "the export verifies: {line}");
    assert_eq!(line["held"], true, "held to the approver's key: {line}");
    let text = std::fs::read_to_string(&file).unwrap();
    let rows: Vec<Row> = text
        .lines()
        .map(|l| {
            let r: Value = serde_json::from_str(l).unwrap();
            Row {
                seq: r["seq"].as_i64().unwrap(),
                kind: r["kind"].as_str().unwrap().to_owned(),
                action: r["action"].as_str().map(str::to_owned),
                body: r["body"].clone(),
                hash: r["hash"].as_str().unwrap().to_owned(),
            }
        })
        .collect();
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(r.seq, i as i64 + 1, "the export skips or repeats a seq");
    }
    let _ = std::fs::remove_file(&file);
    rows
}

/// Each action's rows, oldest first, with the tag and target its summary names.
pub struct Actions {
    pub by_id: HashMap<String, Vec<(i64, String)>>,
    pub tag_of: HashMap<String, String>,
    pub kind_of: HashMap<String, Kind>,
    pub ids_of_tag: HashMap<String, Vec<String>>,
    /// The reason on each action's last row that has one.
    pub reason_of: HashMap<String, String>,
}

impl Actions {
    pub fn of(rows: &[Row]) -> Self {
        let mut a = Self {
            by_id: HashMap::new(),
            tag_of: HashMap::new(),
            kind_of: HashMap::new(),
            ids_of_tag: HashMap::new(),
            reason_of: HashMap::new(),
        };
        for r in rows {
            let (Some(state), Some(id)) = (r.state(), r.action.as_ref()) else {
                continue;
            };
            a.by_id
                .entry(id.clone())
                .or_default()
                .push((r.seq, state.to_owned()));
            if let Some(summary) = r.body["summary"].as_str() {
                if let Some(t) = find_tag(summary) {
                    a.tag_of.entry(id.clone()).or_insert(t);
                }
                a.kind_of
                    .entry(id.clone())
                    .or_insert(Kind::of_summary(summary));
            }
            if let Some(why) = r.body["reason"].as_str() {
                a.reason_of.insert(id.clone(), why.to_owned());
            }
        }
        for (id, t) in &a.tag_of {
            a.ids_of_tag.entry(t.clone()).or_default().push(id.clone());
        }
        a
    }

    pub fn last(&self, id: &str) -> Option<&str> {
        self.by_id.get(id)?.last().map(|(_, s)| s.as_str())
    }

    pub fn count(&self, id: &str, state: &str) -> usize {
        self.by_id
            .get(id)
            .map_or(0, |rows| rows.iter().filter(|(_, s)| s == state).count())
    }

    /// The states of `id`, joined: `received>dispatched>completed`.
    pub fn path(&self, id: &str) -> String {
        self.by_id[id]
            .iter()
            .map(|(_, s)| s.as_str())
            .collect::<Vec<_>>()
            .join(">")
    }
}

/// Every request that reached a target found its `action.dispatched` row already in the
/// journal when it arrived, and that row is the one of the action its tag belongs to. A head
/// cut short found one too: the row of its tag, or one whose URL starts with what arrived.
pub fn assert_intent_before_every_request(rig: &Rig, acts: &Actions) {
    for kind in [Kind::Http, Kind::Ssh] {
        for a in rig.target(kind).arrivals() {
            let what = match &a.cut {
                None => format!("request {:?}", a.tag),
                Some(bytes) => format!("a head cut short ({bytes:?})"),
            };
            let Some((id, seq)) = &a.dispatched else {
                panic!(
                    "{kind:?}: {what} reached the target with no action.dispatched row in the \
                     journal (head then: seq {})",
                    a.head.0
                );
            };
            assert!(*seq <= a.head.0, "{a:?}");
            assert_eq!(acts.kind_of.get(id), Some(&kind), "{a:?}");
            if a.complete || a.tag.is_some() {
                assert!(a.tag.is_some(), "{kind:?}: a request without a tag: {a:?}");
                assert_eq!(
                    acts.tag_of.get(id),
                    a.tag.as_ref(),
                    "{kind:?}: {what} arrived under action {id}, which carries another tag"
                );
            }
        }
    }
}

/// Every (seq, hash) seen at some moment (a verify after a restart, the head a killed agent
/// left, a target's read at arrival) is still in the final journal with the same hash: no row
/// was lost or rewritten.
pub fn assert_heads_kept(rows: &[Row], heads: &[(i64, String)]) {
    for (seq, hash) in heads {
        let row = rows.get(*seq as usize - 1).unwrap_or_else(|| {
            panic!(
                "row {seq} was seen, but the journal now ends at {}",
                rows.len()
            )
        });
        assert_eq!(
            &row.hash, hash,
            "row {seq} changed after it was seen (lost and rewritten)"
        );
    }
}
