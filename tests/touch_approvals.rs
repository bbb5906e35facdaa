//! Security-key approvals through the real agent (issue 34): a credential under `--presence key`
//! runs an action only when its approval carries a registered key's touch over that action's
//! hash and that decision's nonce. None at all, a touch for another action, a replayed touch, a
//! touch from a key that was never registered (signed with the passphrase), and a cloned key
//! whose counter went back: each is refused by the agent, and the HTTP target counts zero
//! requests. The valid one runs, and its touch is in the journal's `approved` row. The key is a
//! software authenticator behind the CTAP2 bytes a USB key carries (`support::soft_key`). A forged
//! export (the touch dropped, or its signature changed, and the chain recomputed) fails `vault
//! verify --file` with no key. In a real tmux pane, the card says a touch is needed and offers no
//! grant; with no key plugged in, `a` and the PIN end in "no FIDO2 security key found" and the
//! target counts zero requests.
mod support;

use agent_vault::agent::client::{Client, ClientError, Proof};
use agent_vault::agent::protocol::{Reply, Request};
use agent_vault::approvals::{touch, Verdict};
use agent_vault::fido;
use agent_vault::keys::KeyMaterial;
use agent_vault::wire::touch::TouchProof;
use agent_vault::wire::Op;
use serde_json::json;
use std::time::Duration;
use support::mcp::McpProc;
use support::soft_key::{no_pin, SoftKey};
use support::target::HttpTarget;
use support::tmux::Tmux;
use support::*;

const SECRET: &str = "DECOY_touch_tok_8c1d44e0";

fn proof_of(t: fido::Touch) -> TouchProof {
    TouchProof {
        credential_id: hex::encode(t.credential_id),
        authenticator_data: hex::encode(t.auth_data),
        signature: hex::encode(t.signature),
    }
}

fn deletes(target: &HttpTarget) -> usize {
    target
        .requests()
        .iter()
        .filter(|r| r["method"] == "DELETE")
        .count()
}

/// `vault add http api --presence key` for the target at `base`, the secret on stdin.
fn add_keyed(v: &mut TestVault, base: &str) -> Run {
    let args = [
        "add",
        "http",
        "api",
        "--host",
        base,
        "--bearer",
        "--secret-stdin",
    ];
    v.run_pp(
        &[&args[..], &["--presence", "key"]].concat(),
        Some(&format!("{SECRET}\n")),
    )
}

/// The approver's keys (opened with the passphrase) and its authenticated connection.
fn approver(v: &TestVault) -> (KeyMaterial, Client) {
    let paths = agent_vault::paths::VaultPaths::new(v.vault_dir());
    let pp = agent_vault::keys::Passphrase::from_string(PASSPHRASE.into());
    let keyfile = std::fs::read(v.vault_dir().join("vault.key.age")).unwrap();
    let keys = agent_vault::keys::unwrap_key_file(&keyfile, &pp).unwrap();
    let client = agent_vault::agent::handoff::approver_client(&paths, &keys).unwrap();
    (keys, client)
}

/// A software key registered as `main`, signed with the approver key, as `vault approver
/// add-key` does with a USB one.
fn register_a_key(keys: &KeyMaterial, client: &mut Client) -> (SoftKey, fido::Registration) {
    let mut a = SoftKey::es256();
    let vault_id = client.vault_id.clone();
    let reg = fido::register(&mut a, &vault_id, "0123456789abcdef0123", &[], &mut no_pin).unwrap();
    let request = touch::sign_key_change(
        &keys.approver,
        &vault_id,
        Op::AddKey,
        touch::registered(&reg, "main"),
    );
    match client.call(Request::AddApproverKey { request }).unwrap() {
        Reply::ApproverKeys(k) => assert_eq!(k.len(), 1),
        other => panic!("{other:?}"),
    }
    (a, reg)
}

#[test]
fn on_the_card_a_key_credential_says_so_and_with_no_key_plugged_in_nothing_is_sent() {
    // The person's `vault approve` in a real tmux pane. This machine has no USB key (and no
    // UHID to fake one): after `a` and the PIN, the screen names the hash to touch for, says
    // that no key was found, and the DELETE stays waiting with zero bytes at the target.
    let target = HttpTarget::start(SECRET);
    let mut v = TestVault::init("touchcard");
    let (keys, mut client) = approver(&v);
    register_a_key(&keys, &mut client);
    let base = target.base();
    add_keyed(&mut v, &base).ok();
    let tmux = Tmux::start(
        "touchcard",
        &[("VAULT_DIR", v.vault_dir().display().to_string())],
        120,
        40,
    );
    tmux.type_text(&format!("{} approve", bin()));
    tmux.press("Enter");
    tmux.wait_for("Vault passphrase", Duration::from_secs(20));
    tmux.type_text(PASSPHRASE);
    tmux.press("Enter");
    tmux.wait_for("No action waits", Duration::from_secs(30));

    let mut p = McpProc::spawn(v.command(&["mcp"]));
    p.initialize();
    p.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "http_request",
        "arguments": {"credential": "api", "method": "DELETE", "url": format!("{base}/repos/acme/prod"), "wait_s": 0}}}));
    let pending = v.pending_with("/repos/acme/prod");
    let hash = match client
        .call(Request::ForApproval {
            action_id: pending["action_id"].as_str().unwrap().to_owned(),
        })
        .unwrap()
    {
        Reply::View(view) => view.action.action_hash,
        other => panic!("{other:?}"),
    };
    let card = tmux.wait_for("[a]", Duration::from_secs(20));
    assert!(card.contains("key touch   needed"), "{card}");
    assert!(card.contains("a key touch is per action"), "{card}");
    std::thread::sleep(Duration::from_millis(800));
    tmux.press("a");
    tmux.wait_for("PIN to approve", Duration::from_secs(10));
    tmux.type_text(PIN);
    tmux.press("Enter");
    let told = tmux.wait_for("no FIDO2 security key found", Duration::from_secs(20));
    // (The "Touch your security key for <hash>" prompt is drawn first and replaced by this at
    // once: with no key there is nothing to wait for.)
    assert!(
        told.contains(&hash[..16]),
        "the card names the hash: {told}"
    );
    assert!(told.contains("Not decided"), "{told}");
    assert_eq!(deletes(&target), 0, "nothing reached the target");
    let still = v.pending_with("/repos/acme/prod");
    assert_eq!(
        still["action_id"], pending["action_id"],
        "the action still waits"
    );
}

#[test]
fn an_action_under_presence_key_runs_only_with_a_registered_keys_touch_over_its_own_hash() {
    // The forger is a process of the person's own uid, not root (issue 49).
    if !support::uid::run_unprivileged(
        "an_action_under_presence_key_runs_only_with_a_registered_keys_touch_over_its_own_hash",
    ) {
        return;
    }
    let target = HttpTarget::start(SECRET);
    let mut v = TestVault::init("touch");
    let (keys, mut client) = approver(&v);
    let vault_id = client.vault_id.clone();

    // Without a registered key, a credential cannot ask for one.
    let base = target.base();
    let r = add_keyed(&mut v, &base);
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("vault approver add-key"), "{}", r.stderr);

    // The person registers key A (signed with the approver key the passphrase opens).
    let (mut a, reg) = register_a_key(&keys, &mut client);
    let listed = v.run(&["approver", "keys", "--json"], None).ok();
    assert!(listed.stdout.contains(&hex::encode(&reg.credential_id)));
    add_keyed(&mut v, &base).ok();

    let mut p = McpProc::spawn(v.command(&["mcp"]));
    p.initialize();
    p.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "http_request",
        "arguments": {"credential": "api", "method": "DELETE", "url": format!("{base}/repos/acme/prod"), "wait_s": 60}}}));
    let act = v.pending_with("/repos/acme/prod")["action_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let view = match client
        .call(Request::ForApproval {
            action_id: act.clone(),
        })
        .unwrap()
    {
        Reply::View(v) => v,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        view.touch_keys.as_deref(),
        Some(&[hex::encode(&reg.credential_id)][..])
    );
    let hash = view.action.action_hash.clone();
    let allow = vec![reg.credential_id.clone()];
    let grant = Duration::from_secs(60);

    // 1. The scripted path on this machine has no USB key: it says so, and sends nothing.
    let r = v.run(
        &["approve", "--id", &act, "--approve", "--passphrase-stdin"],
        Some(&format!("{PASSPHRASE}\n")),
    );
    assert_ne!(r.code, 0);
    assert!(
        r.stderr.contains("no FIDO2 security key found"),
        "{}",
        r.stderr
    );

    // 2. No touch at all, sent to the agent as a forged client would.
    let mut signed = agent_vault::approvals::sign_decision(
        &keys.approver,
        &vault_id,
        &act,
        &hash,
        &view.verified_request().unwrap(),
        &view.action.expires_at,
        &Verdict::Approve,
        agent_vault::wire::ApprovalMethod::Passphrase,
        grant,
    );
    let refused = client.call(Request::Decide {
        decision: signed.clone(),
        pin: None,
    });
    assert!(
        matches!(&refused, Err(ClientError::Refused { message, .. }) if message.contains("touch")),
        "{refused:?}"
    );

    // 3. A valid touch by A, but for another action's hash.
    let nonce =
        serde_json::from_str::<agent_vault::wire::DecisionPayload>(&signed.decision.payload)
            .unwrap()
            .nonce;
    // Another hash: the first hex digit changed, so it differs whatever this one starts with.
    let flipped = if hash.starts_with('0') { "1" } else { "0" };
    let other_hash = format!("{flipped}{}", &hash[1..]);
    assert_ne!(other_hash, hash);
    let other = fido::challenge(&vault_id, &other_hash, &nonce);
    signed.touch = Some(proof_of(
        fido::touch(&mut a, &other, &allow, &mut no_pin).unwrap(),
    ));
    let refused = client.call(Request::Decide {
        decision: signed.clone(),
        pin: None,
    });
    assert!(
        matches!(&refused, Err(ClientError::Refused { .. })),
        "{refused:?}"
    );

    // 4. A touch by A over this action, made for an earlier decision (another nonce): a replay.
    let replayed = proof_of(
        fido::touch(
            &mut a,
            &fido::challenge(&vault_id, &hash, "an-earlier-nonce-000"),
            &allow,
            &mut no_pin,
        )
        .unwrap(),
    );
    let give = |t: TouchProof| {
        move |_: &[u8; 32], _: &[Vec<u8>]| -> Result<TouchProof, String> { Ok(t.clone()) }
    };
    let r = client.decide_touched(
        &keys.approver,
        &view,
        &Verdict::Approve,
        Proof::Passphrase,
        grant,
        Some(&mut give(replayed)),
    );
    assert!(matches!(&r, Err(ClientError::Refused { .. })), "{r:?}");

    // 5. A key the person never registered (a same-uid process's own authenticator).
    let mut b = SoftKey::es256();
    let b_reg =
        fido::register(&mut b, &vault_id, "fedcba9876543210fedc", &[], &mut no_pin).unwrap();
    let mut b_touch = |c: &[u8; 32], _: &[Vec<u8>]| -> Result<TouchProof, String> {
        Ok(proof_of(
            fido::touch(
                &mut b,
                c,
                std::slice::from_ref(&b_reg.credential_id),
                &mut no_pin,
            )
            .unwrap(),
        ))
    };
    let r = client.decide_touched(
        &keys.approver,
        &view,
        &Verdict::Approve,
        Proof::Passphrase,
        grant,
        Some(&mut b_touch),
    );
    assert!(
        matches!(&r, Err(ClientError::Refused { message, .. }) if message.contains("not registered")),
        "{r:?}"
    );
    assert_eq!(
        deletes(&target),
        0,
        "no refused approval let the DELETE out"
    );

    // 6. A's real touch over this action and this decision: it runs.
    let clone = a.snapshot();
    let mut a_touch = |c: &[u8; 32], allow: &[Vec<u8>]| -> Result<TouchProof, String> {
        fido::touch(&mut a, c, allow, &mut no_pin)
            .map(proof_of)
            .map_err(|e| e.to_string())
    };
    let decided = client
        .decide_touched(
            &keys.approver,
            &view,
            &Verdict::ApproveSession,
            Proof::Passphrase,
            grant,
            Some(&mut a_touch),
        )
        .unwrap();
    assert!(
        decided.session_until.is_none(),
        "a touch is per action: no grant"
    );
    let (done, _) = p.until_id(&json!(1), Duration::from_secs(30));
    assert_eq!(
        done["result"]["structuredContent"]["state"], "completed",
        "{done}"
    );
    assert_eq!(deletes(&target), 1);

    // 7. A clone of A, taken before that touch, signs the next action with a counter behind.
    p.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "http_request",
        "arguments": {"credential": "api", "method": "DELETE", "url": format!("{base}/repos/acme/stage"), "wait_s": 0}}}));
    let act2 = v.pending_with("/repos/acme/stage")["action_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let view2 = match client
        .call(Request::ForApproval { action_id: act2 })
        .unwrap()
    {
        Reply::View(v) => v,
        other => panic!("{other:?}"),
    };
    a.restore(clone);
    let mut a_touch = |c: &[u8; 32], allow: &[Vec<u8>]| -> Result<TouchProof, String> {
        fido::touch(&mut a, c, allow, &mut no_pin)
            .map(proof_of)
            .map_err(|e| e.to_string())
    };
    let r = client.decide_touched(
        &keys.approver,
        &view2,
        &Verdict::Approve,
        Proof::Passphrase,
        grant,
        Some(&mut a_touch),
    );
    assert!(
        matches!(&r, Err(ClientError::Refused { message, .. }) if message.contains("counter went back")),
        "{r:?}"
    );
    assert_eq!(
        deletes(&target),
        1,
        "the cloned key's approval sent nothing"
    );

    // The journal holds the touch in the approved row, and verifies.
    let export = v.vault_dir().join("touch-export.jsonl");
    v.run_pp(&["export-audit", export.to_str().unwrap()], None)
        .ok();
    let text = std::fs::read_to_string(&export).unwrap();
    let approved: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("\"action.approved\""))
        .collect();
    assert_eq!(approved.len(), 1, "{text}");
    assert!(
        approved[0].contains("authenticator_data"),
        "{}",
        approved[0]
    );
    v.run(&["verify"], None).ok();
    let key = support::journal::approver_key(&mut v);
    let held = [
        "verify",
        "--file",
        export.to_str().unwrap(),
        "--approver-key",
        &key,
    ];
    v.run(&held, None).ok();

    // A forger with the database key rewrites the approved row and recomputes every hash after
    // it: the chain holds, the touch does not. `vault verify --file` needs no key to see it.
    let forged = |name: &str, edit: &dyn Fn(&mut serde_json::Value)| {
        let file = v.vault_dir().join(format!("forged-{name}.jsonl"));
        std::fs::write(&file, rechain(&text, edit)).unwrap();
        let out = std::process::Command::new(bin())
            .args(["verify", "--json", "--file"])
            .arg(&file)
            .output()
            .unwrap();
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(out.status.code(), Some(3), "{name}: {report}");
        let reason = report["reason"].as_str().unwrap_or_default().to_owned();
        assert!(reason.starts_with("bad touch: row "), "{name}: {report}");
        reason
    };
    let said = forged("no-touch", &|body| {
        body.as_object_mut().unwrap().remove("touch");
    });
    assert!(said.contains("needs a security-key touch"), "{said}");
    let said = forged("flipped", &|body| {
        let sig = body["touch"]["signature"].as_str().unwrap().to_owned();
        let flipped = if sig.ends_with('0') { "1" } else { "0" };
        body["touch"]["signature"] = json!(format!("{}{flipped}", &sig[..sig.len() - 1]));
    });
    assert!(said.contains("does not verify"), "{said}");
}

/// `text` (an export) with `edit` applied to the body of its `action.approved` row, and every
/// row's `prev` and `hash` recomputed from there on, as a forger holding the key would.
fn rechain(text: &str, edit: &dyn Fn(&mut serde_json::Value)) -> String {
    let mut prev: Option<[u8; 32]> = None;
    let mut out = String::new();
    for line in text.lines() {
        let mut row: serde_json::Value = serde_json::from_str(line).unwrap();
        if row["kind"] == "action.approved" {
            edit(&mut row["body"]);
        }
        let p = match prev {
            Some(p) => p,
            None => hex::decode(row["prev"].as_str().unwrap())
                .unwrap()
                .try_into()
                .unwrap(),
        };
        let canonical = agent_vault::audit::canonical_row(
            row["seq"].as_i64().unwrap(),
            row["ts"].as_str().unwrap(),
            row["kind"].as_str().unwrap(),
            row["session"].as_str(),
            row["action"].as_str(),
            &row["body"],
        );
        let hash = agent_vault::audit::row_hash(&p, &canonical);
        let fields = serde_json::json!({
            "seq": row["seq"], "ts": row["ts"], "kind": row["kind"], "session": row["session"],
            "action": row["action"], "body": row["body"], "prev": hex::encode(p),
            "hash": hex::encode(hash),
        });
        out.push_str(&fields.to_string());
        out.push('\n');
        prev = Some(hash);
    }
    out
}
