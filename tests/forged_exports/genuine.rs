//! A genuine journal made through the real agent, for tests/forged_exports.rs to forge: a wrong
//! PIN then the right one, a session grant and a read it covered, decisions, a `never` policy,
//! security-key touches from a key that keeps no counter, a denial, a pause and its resume, a
//! revocation, a withdrawal, an edit and a restart; its export and the approver key (hex) to hold
//! it to. And the forger's tools: the export's rows as JSON, and the export of rows re-hashed
//! from row 1 (`rechain`), as someone with the database key would write it.
use super::support::journal::approver_key;
use super::support::mcp::McpProc;
use super::support::soft_key::{no_pin, SoftKey};
use super::support::target::HttpTarget;
use super::support::*;
use agent_vault::agent::client::{Client, ClientError, Proof};
use agent_vault::agent::protocol::{Reply, Request};
use agent_vault::approvals::{touch, Verdict};
use agent_vault::fido;
use agent_vault::keys::KeyMaterial;
use agent_vault::wire::touch::TouchProof;
use agent_vault::wire::Op;
use serde_json::{json, Value};
use std::sync::OnceLock;
use std::time::Duration;

const SECRET: &str = "DECOY_forge_tok_41c09e7d";

/// The genuine export, the approver key (hex) to hold it to, and what each step's action is.
pub struct Genuine {
    pub text: String,
    pub key: String,
    /// Action ids by step name.
    pub acts: std::collections::HashMap<&'static str, String>,
    /// The vault's id (what a forger's own touches are made over).
    pub vault_id: String,
}

pub fn proof_of(t: fido::Touch) -> TouchProof {
    TouchProof {
        credential_id: hex::encode(t.credential_id),
        authenticator_data: hex::encode(t.auth_data),
        signature: hex::encode(t.signature),
    }
}

fn approver(v: &TestVault) -> (KeyMaterial, Client) {
    let paths = agent_vault::paths::VaultPaths::new(v.vault_dir());
    let pp = agent_vault::keys::Passphrase::from_string(PASSPHRASE.into());
    let keyfile = std::fs::read(v.vault_dir().join("vault.key.age")).unwrap();
    let keys = agent_vault::keys::unwrap_key_file(&keyfile, &pp).unwrap();
    let client = agent_vault::agent::handoff::approver_client(&paths, &keys).unwrap();
    (keys, client)
}

fn view(client: &mut Client, act: &str) -> agent_vault::agent::protocol::ApprovalView {
    match client
        .call(Request::ForApproval {
            action_id: act.to_owned(),
        })
        .unwrap()
    {
        Reply::View(v) => v,
        other => panic!("{other:?}"),
    }
}

fn pin(p: &str) -> Proof {
    Proof::Pin(agent_vault::wire::Secret::new(p.as_bytes().to_vec()))
}

/// Sends a call that waits for its card (`wait_s` 60) and returns its action id.
fn ask(p: &mut McpProc, v: &mut TestVault, id: i64, cred: &str, method: &str, url: &str) -> String {
    p.send(
        &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "http_request",
        "arguments": {"credential": cred, "method": method, "url": url, "wait_s": 60}}}),
    );
    let path = url.split_once("127.0.0.1").unwrap().1;
    let path = path.split_once('/').map_or(path, |(_, rest)| rest);
    v.pending_with(path)["action_id"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn done(p: &mut McpProc, id: i64, state: &str) -> String {
    let (r, _) = p.until_id(&json!(id), Duration::from_secs(60));
    let sc = &r["result"]["structuredContent"];
    assert_eq!(sc["state"], state, "{r}");
    sc["action_id"].as_str().unwrap().to_owned()
}

pub fn genuine() -> &'static Genuine {
    static G: OnceLock<Genuine> = OnceLock::new();
    G.get_or_init(make_genuine)
}

fn make_genuine() -> Genuine {
    let target = HttpTarget::start(SECRET);
    let base = target.base();
    let mut v = TestVault::init("forge");
    let (keys, mut client) = approver(&v);
    let vault_id = client.vault_id.clone();
    // A key that keeps no counter (every touch says 0), registered with the passphrase.
    let mut a = SoftKey::es256_without_counter();
    let reg = fido::register(&mut a, &vault_id, "0123456789abcdef0123", &[], &mut no_pin).unwrap();
    let request = touch::sign_key_change(
        &keys.approver,
        &vault_id,
        Op::AddKey,
        touch::registered(&reg, "main"),
    );
    client.call(Request::AddApproverKey { request }).unwrap();
    let add = |v: &mut TestVault, name: &str, extra: &[&str]| {
        let args = [
            &[
                "add",
                "http",
                name,
                "--host",
                &base,
                "--bearer",
                "--secret-stdin",
            ],
            extra,
        ];
        v.run_pp(&args.concat(), Some(&format!("{SECRET}\n"))).ok();
    };
    add(&mut v, "api", &[]);
    add(&mut v, "keyed", &["--presence", "key"]);
    add(&mut v, "free", &["--approval", "never"]);
    let hour = Duration::from_secs(3600);
    let mut acts = std::collections::HashMap::new();
    let mut p = McpProc::spawn(v.command(&["mcp"]));
    p.initialize();

    // 1. A GET: a wrong PIN first, then the right one and `s` (a grant on reads under its dir).
    let act = ask(
        &mut p,
        &mut v,
        1,
        "api",
        "GET",
        &format!("{base}/repos/acme/app/issues"),
    );
    let card = view(&mut client, &act);
    let wrong = client.decide(&keys.approver, &card, &Verdict::Approve, pin("97531"), hour);
    assert!(
        matches!(wrong, Err(ClientError::Refused { .. })),
        "{wrong:?}"
    );
    client
        .decide(
            &keys.approver,
            &card,
            &Verdict::ApproveSession,
            pin(PIN),
            hour,
        )
        .unwrap();
    acts.insert("granted", done(&mut p, 1, "completed"));
    // 2. A read the grant covers: no card.
    let r = p.call(
        2,
        "http_request",
        json!({"credential": "api", "method": "GET",
        "url": format!("{base}/repos/acme/app/pulls"), "wait_s": 30}),
    );
    assert_eq!(
        r["result"]["structuredContent"]["state"], "completed",
        "{r}"
    );
    acts.insert("on grant", done_id(&r));
    // 3, 4. Two writes, each on its own card.
    for (id, name, method, path) in [(3, "delete", "DELETE", "x"), (4, "post", "POST", "y")] {
        let act = ask(
            &mut p,
            &mut v,
            id,
            "api",
            method,
            &format!("{base}/repos/acme/{path}"),
        );
        let card = view(&mut client, &act);
        client
            .decide(&keys.approver, &card, &Verdict::Approve, pin(PIN), hour)
            .unwrap();
        acts.insert(name, done(&mut p, id, "completed"));
    }
    // 5. The `never` policy: no card.
    let r = p.call(
        5,
        "http_request",
        json!({"credential": "free", "method": "GET",
        "url": format!("{base}/free"), "wait_s": 30}),
    );
    assert_eq!(
        r["result"]["structuredContent"]["state"], "completed",
        "{r}"
    );
    acts.insert("policy", done_id(&r));
    // 6, 7. Two writes under `--presence key`, each touched (the counter stays 0).
    for (id, name, path) in [(6, "touched", "z"), (7, "touched again", "w")] {
        let act = ask(
            &mut p,
            &mut v,
            id,
            "keyed",
            "DELETE",
            &format!("{base}/repos/acme/{path}"),
        );
        let card = view(&mut client, &act);
        let mut toucher = |c: &[u8; 32], allow: &[Vec<u8>]| -> Result<TouchProof, String> {
            fido::touch(&mut a, c, allow, &mut no_pin)
                .map(proof_of)
                .map_err(|e| e.to_string())
        };
        client
            .decide_touched(
                &keys.approver,
                &card,
                &Verdict::Approve,
                pin(PIN),
                hour,
                Some(&mut toucher),
            )
            .unwrap();
        acts.insert(name, done(&mut p, id, "completed"));
    }
    // 8. A denial.
    let act = ask(
        &mut p,
        &mut v,
        8,
        "api",
        "DELETE",
        &format!("{base}/repos/acme/v"),
    );
    let card = view(&mut client, &act);
    let deny = Verdict::Deny(Some("not now".into()));
    client
        .decide(&keys.approver, &card, &deny, pin(PIN), hour)
        .unwrap();
    acts.insert("denied", done(&mut p, 8, "denied"));
    // A pause and its (signed) resume, the grant revoked, a read left waiting, then withdrawn.
    v.run(&["pause", "--reason", "lunch"], None).ok();
    v.run_pp(&["resume"], None).ok();
    v.run_pp(&["grants", "revoke", "--all"], None).ok();
    acts.insert(
        "withdrawn",
        ask(
            &mut p,
            &mut v,
            9,
            "api",
            "GET",
            &format!("{base}/repos/acme/app/tags"),
        ),
    );
    p.finish(Duration::from_secs(20));
    // A signed edit, and a restart (lock and unlock rows).
    v.run_pp(&["edit", "free", "--approval", "writes"], None)
        .ok();
    v.run(
        &["unlock", "--restart", "--passphrase-stdin"],
        Some(&format!("{PASSPHRASE}\n")),
    )
    .ok();
    assert_eq!(target.requests().len(), 7, "every approved call ran once");
    v.run(&["verify"], None).ok();
    let file = v.dir.path().join("genuine.jsonl");
    v.run_pp(&["export-audit", file.to_str().unwrap()], None)
        .ok();
    let text = std::fs::read_to_string(&file).unwrap();
    let key = approver_key(&mut v);
    // Held for the whole run in a static, which is never dropped: the vault's agent is locked
    // and its directory removed now (`TestVault`'s drop), not left running after the tests.
    drop(v);
    Genuine {
        text,
        key,
        acts,
        vault_id,
    }
}

fn done_id(r: &Value) -> String {
    r["result"]["structuredContent"]["action_id"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The rows of an export, as JSON.
pub fn rows(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The export of `rows` as a forger with the database key writes it: seqs renumbered in order,
/// every `prev` and `hash` recomputed from row 1 (a row nobody changed keeps its hash).
pub fn rechain(rows: &[Value]) -> String {
    let mut prev: [u8; 32] = hex::decode(rows[0]["prev"].as_str().unwrap())
        .unwrap()
        .try_into()
        .unwrap();
    let mut out = String::new();
    for (i, row) in rows.iter().enumerate() {
        let canonical = agent_vault::audit::canonical_row(
            i as i64 + 1,
            row["ts"].as_str().unwrap(),
            row["kind"].as_str().unwrap(),
            row["session"].as_str(),
            row["action"].as_str(),
            &row["body"],
        );
        let hash = agent_vault::audit::row_hash(&prev, &canonical);
        out.push_str(&format!(
            r#"{{"v":2,"prev":"{}","hash":"{}",{}"#,
            hex::encode(prev),
            hex::encode(hash),
            &canonical[1..]
        ));
        out.push('\n');
        prev = hash;
    }
    out
}

/// The index of the row of `action` whose kind is `kind`.
pub fn at(rows: &[Value], action: &str, kind: &str) -> usize {
    rows.iter()
        .position(|r| r["action"] == action && r["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} row of {action}"))
}

pub fn at_kind(rows: &[Value], kind: &str) -> usize {
    rows.iter()
        .position(|r| r["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} row"))
}
