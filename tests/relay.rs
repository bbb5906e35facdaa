//! A relay on the agent's socket path (`support::relay`): a same-uid process renames the agent's
//! socket, listens in its place and forwards every connection to it, reading and rewriting what
//! passes. The person's commands must give it nothing (no secret of `vault add`/`vault edit`),
//! let it choose nothing they sign (not the policy of another credential), and show nothing it
//! wrote (the card shows the request that runs). Run as root (CI), each test re-runs itself as
//! the unprivileged `vaulttest`, so the relay and the vault's processes share that uid.
mod support;

use agent_vault::approvals::{effective_approval, Trust};
use agent_vault::credentials::get_by_id;
use agent_vault::keys::Passphrase;
use agent_vault::paths::VaultPaths;
use agent_vault::vault::Vault;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::mcp::McpProc;
use support::raw::RawClient;
use support::relay::{rewrite_key, Dir, Relay};
use support::target::HttpTarget;
use support::uid::run_unprivileged;
use support::*;

const OLD: &str = "DECOY_relay_old_5e2b90";
const ADDED: &str = "DECOY_relay_added_91c4d7";
const EDITED: &str = "DECOY_relay_edited_3fa862";

fn relay(
    v: &TestVault,
    rewrite: impl Fn(Dir, &mut Value) -> bool + Send + Sync + 'static,
) -> Relay {
    Relay::start(&v.socket(), &v.dir.path().join("relay"), rewrite)
}

/// The secret stored for `name`, read with the store API in this process.
fn stored_secret(v: &TestVault, name: &str) -> Option<Vec<u8>> {
    let db = v.open_db();
    let row = agent_vault::store::CredentialRow::find(db.store.conn(), "default", name).unwrap()?;
    Some(row.secret(db.store.conn()).unwrap().to_vec())
}

/// (stored approval, the approval that applies) of credential `id`, checked here with the
/// approver's public key from `vault.key.age`: a policy looser than `each` applies only when
/// the approver signed it.
fn policy(v: &TestVault, id: &str) -> Option<(String, String)> {
    let vault = v.open_db();
    let paths = VaultPaths::new(v.vault_dir());
    let keys = Vault::keys(&paths, &Passphrase::from_string(PASSPHRASE.into())).unwrap();
    let trust = Trust::new(&vault.vault_id, &keys.approver);
    let (cred, sig) = get_by_id(vault.store.conn(), id).unwrap()?;
    let effective = effective_approval(&trust, &cred, sig.as_deref());
    Some((cred.approval.as_str().into(), effective.as_str().into()))
}

fn credential_id(v: &TestVault, name: &str) -> Option<String> {
    let db = v.open_db();
    agent_vault::store::CredentialRow::find(db.store.conn(), "default", name)
        .unwrap()
        .map(|r| r.id)
}

/// Waits until an action is pending; its id.
fn pending(v: &mut TestVault) -> String {
    v.wait_pending(1)[0]["action_id"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// A command run through the relay did its job, or refused and said why (the socket).
fn succeeded(what: &str, run: &Run, findings: &mut Vec<String>) -> bool {
    if run.code == 0 {
        return true;
    }
    if !run.stderr.contains("socket") {
        findings.push(format!(
            "{what} failed (exit {}) without naming the socket: {}",
            run.code, run.stderr
        ));
    }
    false
}

#[track_caller]
fn assert_none(findings: &[String]) {
    assert!(findings.is_empty(), "\n{}", findings.join("\n"));
}

#[test]
fn a_relay_on_the_socket_path_gets_no_secret_of_add_or_edit() {
    if !run_unprivileged("a_relay_on_the_socket_path_gets_no_secret_of_add_or_edit") {
        return;
    }
    let target = HttpTarget::start(OLD);
    let mut v = TestVault::init("relay-secret");
    v.add_bearer("api", &target.base(), OLD);
    let key = v.master_hex();
    let r = relay(&v, |_, _| false);
    let add = v.run_pp(
        &[
            "add",
            "http",
            "api2",
            "--host",
            &target.base(),
            "--bearer",
            "--secret-stdin",
        ],
        Some(&format!("{ADDED}\n")),
    );
    let edit = v.run_pp(
        &["edit", "api", "--secret-stdin"],
        Some(&format!("{EDITED}\n")),
    );
    // A command without the passphrase (plain text) refuses to talk through the relay.
    let pending = v.run(&["pending"], None);
    let (relayed, parsed, heard) = (r.connections(), r.parsed(), r.recorded());
    drop(r);
    eprintln!(
        "relayed {relayed} connections, {parsed} JSON lines, {} bytes; add: {add:?}; edit: {edit:?}",
        heard.len()
    );
    // The control: the relay stood in the path of both commands (else nothing here is proved),
    // and it never saw a JSON line of theirs (the channel is sealed from the first byte on).
    assert!(
        relayed >= 2,
        "the relay relayed {relayed} connection(s): add and edit did not go through it"
    );
    let mut findings = Vec::new();
    for secret in [ADDED, EDITED, PASSPHRASE, key.as_str()] {
        let mut forms = encodings(secret);
        forms.extend([hex::encode(secret), hex::encode_upper(secret)]);
        if let Some(form) = forms
            .iter()
            .find(|f| support::memory::contains(&heard, f.as_bytes()))
        {
            findings.push(format!("the relay heard {secret:?} (as {form:?})"));
        }
    }
    // A command that worked through the relay was told, by its own check and by the agent.
    for (what, run) in [("vault add", &add), ("vault edit", &edit)] {
        let told = run.stderr.contains("relays this connection")
            && run.stderr.contains("no longer leads to the vault agent");
        if run.code == 0 && !told {
            findings.push(format!(
                "{what} went through the relay unsaid: {}",
                run.stderr
            ));
        }
    }
    if pending.code == 0 || !pending.stderr.contains("is not the vault agent") {
        findings.push(format!(
            "vault pending talked through the relay in plain text: {pending:?}"
        ));
    }
    if succeeded("vault add", &add, &mut findings)
        && stored_secret(&v, "api2").as_deref() != Some(ADDED.as_bytes())
    {
        findings.push("vault add succeeded but stored another secret than it was given".into());
    }
    if succeeded("vault edit", &edit, &mut findings)
        && stored_secret(&v, "api").as_deref() != Some(EDITED.as_bytes())
    {
        findings.push("vault edit succeeded but stored another secret than it was given".into());
    }
    assert_none(&findings);
}

#[test]
fn a_relay_cannot_choose_the_policy_the_person_signs() {
    if !run_unprivileged("a_relay_cannot_choose_the_policy_the_person_signs") {
        return;
    }
    let target = HttpTarget::start(OLD);
    let mut v = TestVault::init("relay-policy");
    v.add_bearer("prod", &target.base(), OLD);
    // The attacker sets `prod` to `never` with an unsigned edit over the socket (today it is
    // accepted and counts as `each`), then offers `prod` as `never` to the person's `vault add`.
    let mut raw = RawClient::connect(&v);
    let edited = raw
        .try_ask(
            1,
            json!({"op": "hello", "v": agent_vault::agent::protocol::VERSION, "role": "cli"}),
        )
        .and_then(|_| raw.try_ask(2, json!({"op": "edit_credential", "profile": "default", "name": "prod", "edit": {"approval": "never"}})));
    drop(raw);
    eprintln!("the attacker's unsigned edit: {edited:?}");
    // The credential as it now stands (what the edit's reply, or a listing, shows the attacker).
    let mut bait = {
        let db = v.open_db();
        serde_json::to_value(agent_vault::credentials::get(&db.store, "default", "prod").unwrap())
            .unwrap()
    };
    bait["approval"] = json!("never");
    let prod = bait["id"].as_str().unwrap().to_owned();
    let r = relay(&v, move |dir, line| {
        let reply = &mut line["reply"];
        if dir != Dir::ToClient || reply["kind"] != "credential" || reply["data"]["name"] == "prod"
        {
            return false;
        }
        reply["data"] = bait.clone();
        true
    });
    let add = v.run_pp(
        &[
            "add",
            "http",
            "mine",
            "--host",
            &target.base(),
            "--bearer",
            "--secret-stdin",
            "--approval",
            "writes",
        ],
        Some(&format!("{ADDED}\n")),
    );
    let (relayed, swapped) = (r.connections(), r.rewritten());
    drop(r);
    eprintln!("relayed {relayed} connections, swapped {swapped} replies; add: {add:?}");
    assert!(
        relayed >= 1,
        "the relay relayed no connection: vault add did not go through it"
    );
    let mut findings = Vec::new();
    let (stored, applies) = policy(&v, &prod).expect("prod exists");
    if applies != "each" {
        findings.push(format!("the attacker's credential prod (stored {stored}) carries the approver's signature over `{applies}`: the person's passphrase signed a policy the relay chose"));
    }
    if succeeded("vault add --approval writes", &add, &mut findings) {
        let mine = credential_id(&v, "mine").expect("vault add succeeded: mine exists");
        let (stored, applies) = policy(&v, &mine).unwrap();
        if (stored.as_str(), applies.as_str()) != ("writes", "writes") {
            findings.push(format!("the person's new credential mine is stored {stored} and applies as {applies}, not a signed `writes`"));
        }
    }
    // What the agent makes of it: a DELETE with prod must wait for a card.
    let mut mcp = McpProc::spawn(v.command(&["mcp"]));
    mcp.initialize();
    let url = format!("{}/repos/acme/prod", target.base());
    let r = mcp.call(
        9,
        "http_request",
        json!({"credential": "prod", "method": "DELETE", "url": url, "wait_s": 0}),
    );
    let state = r["result"]["structuredContent"]["state"].clone();
    let deletes = target
        .requests()
        .iter()
        .filter(|q| q["method"] == "DELETE")
        .count();
    if state != "pending" || deletes != 0 {
        findings.push(format!("an AI DELETE with prod answered {state} and reached the target {deletes} time(s), with no card"));
    }
    mcp.finish(Duration::from_secs(10));
    assert_none(&findings);
}

/// The text of the first card on the screen (or all of it, if no card came).
fn first_card(screen: &str) -> &str {
    let Some(start) = screen.find("Action 1 of") else {
        return screen;
    };
    let rest = &screen[start..];
    &rest[..rest.find("[a]pprove once").unwrap_or(rest.len())]
}

#[test]
fn the_card_shows_the_request_that_runs_whatever_the_relay_writes() {
    if !run_unprivileged("the_card_shows_the_request_that_runs_whatever_the_relay_writes") {
        return;
    }
    let target = HttpTarget::start(OLD);
    let mut v = TestVault::init("relay-card");
    v.add_bearer("prod", &target.base(), OLD);
    let mut mcp = McpProc::spawn(v.command(&["mcp"]));
    mcp.initialize();
    let url = format!("{}/repos/acme/prod", target.base());
    mcp.send(&json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "http_request", "arguments": {"credential": "prod", "method": "DELETE", "url": url, "wait_s": 45}}}));
    pending(&mut v);
    // The agent's words, as the relay passes them on: every summary of the DELETE reads as a GET.
    let lie = format!("GET {}/user (credential prod)", target.base());
    let shown = lie.clone();
    let r = relay(&v, move |dir, line| {
        dir == Dir::ToClient
            && rewrite_key(line, "summary", &|s| {
                let hit = s.as_str().is_some_and(|t| t.contains("/repos/acme/prod"));
                if hit {
                    *s = json!(shown);
                }
                hit
            })
    });
    let run = v.run_tty_timed(
        &["approve"],
        &[
            ("passphrase", &format!("{PASSPHRASE}\n"), 0.2),
            ("[a]pprove once", "a", 0.8),
            ("PIN to approve", &format!("{PIN}\r"), 0.2),
            ("No action waits", "q", 0.3),
        ],
    );
    let (relayed, rewritten) = (r.connections(), r.rewritten());
    drop(r);
    let (answer, _) = mcp.until_id(&json!(5), Duration::from_secs(90));
    let deletes = target
        .requests()
        .iter()
        .filter(|q| q["method"] == "DELETE")
        .count();
    eprintln!(
        "relayed {relayed} connections, rewrote {rewritten} lines; approve exit {}; the call: {}; DELETEs at the target: {deletes}",
        run.code, answer["result"]["structuredContent"]["state"]
    );
    // The control: approve went through the relay, showed a card and approved it; the person
    // saw the real request, so the DELETE ran once (a relay that only passes sealed bytes on
    // cannot stop that either).
    assert!(
        relayed >= 1,
        "the relay relayed no connection: vault approve did not go through it"
    );
    let card = first_card(&run.stdout);
    assert!(
        run.code == 0 && card.contains("DELETE") && card.contains("/repos/acme/prod"),
        "vault approve never showed the DELETE's card (exit {}):\n{}",
        run.code,
        run.stdout
    );
    assert_eq!(deletes, 1, "the approved DELETE did not run once: {answer}");
    let mut findings = Vec::new();
    if run.stdout.contains("/user") {
        findings.push(format!(
            "the approver's screen showed the relay's text {lie:?}:\n{card}"
        ));
    }
    if deletes > 0 && !(card.contains("DELETE") && card.contains("/repos/acme/prod")) {
        findings.push(format!("DELETE /repos/acme/prod ran {deletes} time(s) after an `a` on a card that did not show it:\n{card}"));
    }
    mcp.finish(Duration::from_secs(10));
    assert_none(&findings);
}

#[test]
fn a_relay_that_changes_a_byte_of_the_channel_is_refused_and_nothing_is_added() {
    if !run_unprivileged(
        "a_relay_that_changes_a_byte_of_the_channel_is_refused_and_nothing_is_added",
    ) {
        return;
    }
    let target = HttpTarget::start(OLD);
    let mut v = TestVault::init("relay-tamper");
    v.add_bearer("api", &target.base(), OLD);
    let mut findings = Vec::new();
    // Past the handshake line: byte 1 is the low byte of the first message's length, byte 40 is
    // inside its ciphertext (the hello); either way, in either direction.
    for (dir, at, what) in [
        (Dir::ToAgent, 40u64, "a byte of a message to the agent"),
        (Dir::ToAgent, 1, "the length of a message to the agent"),
        (Dir::ToClient, 40, "a byte of a message from the agent"),
    ] {
        let name = format!("tampered{at}{}", dir == Dir::ToAgent);
        let changed = Arc::new(AtomicUsize::new(0));
        let seen = changed.clone();
        let r = Relay::tampering(
            &v.socket(),
            &v.dir.path().join(format!("relay-{name}")),
            move |d, off, bytes| {
                if d == dir && off <= at && at < off + bytes.len() as u64 {
                    bytes[(at - off) as usize] ^= 0x01;
                    seen.fetch_add(1, Ordering::SeqCst);
                }
            },
        );
        let add = v.run_pp(
            &[
                "add",
                "http",
                &name,
                "--host",
                &target.base(),
                "--bearer",
                "--secret-stdin",
            ],
            Some(&format!("{ADDED}\n")),
        );
        let (relayed, flipped) = (r.connections(), changed.load(Ordering::SeqCst));
        drop(r);
        eprintln!(
            "{what}: relayed {relayed} connections, changed {flipped} bytes; add exit {}: {}",
            add.code,
            add.stderr.trim()
        );
        if flipped == 0 {
            findings.push(format!(
                "{what}: the relay changed nothing (exit {})",
                add.code
            ));
        }
        if add.code == 0 {
            findings.push(format!(
                "{what}: `vault add` succeeded through a relay that changed it"
            ));
        }
        if stored_secret(&v, &name).is_some() {
            findings.push(format!("{what}: the credential was stored"));
        }
        // The error itself (not only the warning before it) says what happened: the channel
        // was altered, or the process on the socket path cut the connection.
        let error = add
            .stderr
            .lines()
            .find(|l| l.starts_with("error:"))
            .unwrap_or("");
        if !error.contains("encrypted channel") {
            findings.push(format!(
                "{what}: the error does not say the channel was altered or cut: {}",
                add.stderr
            ));
        }
    }
    // The agent serves on: the same command without the relay succeeds.
    let add = v.run_pp(
        &[
            "add",
            "http",
            "after",
            "--host",
            &target.base(),
            "--bearer",
            "--secret-stdin",
        ],
        Some(&format!("{ADDED}\n")),
    );
    assert_eq!(add.code, 0, "{}", add.stderr);
    assert_eq!(
        stored_secret(&v, "after").as_deref(),
        Some(ADDED.as_bytes())
    );
    assert_none(&findings);
}

#[test]
fn a_command_through_a_relay_that_holds_the_agents_answers_ends_within_its_deadline() {
    if !run_unprivileged(
        "a_command_through_a_relay_that_holds_the_agents_answers_ends_within_its_deadline",
    ) {
        return;
    }
    let target = HttpTarget::start(OLD);
    let mut v = TestVault::init("relay-hold");
    v.add_bearer("api", &target.base(), OLD);
    // The person's commands wait this long for the agent (`[agent] answer_seconds`, 30 s by
    // default); read by each command, not the agent.
    std::fs::write(
        v.vault_dir().join("config.toml"),
        "[agent]\nanswer_seconds = 3\n",
    )
    .unwrap();
    let secret = v.dir.path().join("secret");
    std::fs::write(&secret, format!("{ADDED}\n")).unwrap();
    let passphrase = v.dir.path().join("passphrase");
    std::fs::write(&passphrase, format!("{PASSPHRASE}\n")).unwrap();
    // Found: through a relay that held frames back, `vault add` and `vault edit` hung for more
    // than 120 s with no word. This relay holds every frame from the agent after the handshake.
    let release = Arc::new(AtomicBool::new(false));
    let held = release.clone();
    let r = Relay::tampering(
        &v.socket(),
        &v.dir.path().join("relay-hold"),
        move |dir, _, bytes| {
            // (The handshake's line passes: the hook sees only what follows it.)
            while dir == Dir::ToClient && !bytes.is_empty() && !held.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(50));
            }
        },
    );
    let secret = secret.to_str().unwrap();
    let base = target.base();
    let mut findings = Vec::new();
    for (what, args) in [
        (
            "vault add",
            vec![
                "add",
                "http",
                "api2",
                "--host",
                &base,
                "--bearer",
                "--secret-file",
                secret,
            ],
        ),
        ("vault edit", vec!["edit", "api", "--secret-file", secret]),
    ] {
        let mut c = v.command(&args);
        c.env("VAULT_PASSPHRASE_FILE", &passphrase);
        let run = run_limited(&mut c, Duration::from_secs(60)).unwrap();
        let stderr = String::from_utf8_lossy(&run.stderr);
        eprintln!("{what}: {:?} after {:?}: {stderr}", run.status, run.wall);
        match run.status {
            None => findings.push(format!("{what} still waited after 60 s")),
            Some(s) if s.success() => findings.push(format!("{what} succeeded: {stderr}")),
            Some(_) if run.wall > Duration::from_secs(20) => {
                findings.push(format!("{what} took {:?} to give up", run.wall))
            }
            Some(_) => {}
        }
        if !(stderr.contains("did not answer within 3 s")
            && stderr.contains("vault doctor")
            && stderr.contains("vault unlock --restart"))
        {
            findings.push(format!("{what} did not say what to check: {stderr}"));
        }
    }
    release.store(true, Ordering::SeqCst);
    drop(r);
    if stored_secret(&v, "api2").is_some()
        || stored_secret(&v, "api").as_deref() != Some(OLD.as_bytes())
    {
        findings.push("a change was made although no answer came".into());
    }
    assert_none(&findings);
}
