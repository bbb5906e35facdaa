//! A credential's bindings, policy, secret and existence change only with the approver: a same-uid
//! process with the agent's socket but no passphrase (the AI client's shell) cannot re-pin an SSH
//! host key, widen an HTTP prefix, methods or headers, loosen a policy, swap the secret or remove
//! a credential, neither through `vault` commands nor by speaking the agent's protocol itself.
//! Nothing changes: same version, same row, no journal row, and the target still sees nothing
//! the old bindings would refuse. A change the person signed is shown on the next card, old and
//! new.
mod support;

use serde_json::{json, Value};
use support::raw::RawClient;
use support::target::HttpTarget;
use support::uid::run_unprivileged;
use support::*;

const SECRET: &str = "DECOY_bindings_tok_93b1e";
const PIN: &str = "SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
const EVIL_PIN: &str = "SHA256:BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB";

/// Each credential's (name, version, approval, target, secret) straight from the store.
fn snapshot(v: &TestVault) -> Vec<(String, i64, String, String, Vec<u8>)> {
    let db = v.open_db();
    let mut stmt = db
        .store
        .conn()
        .prepare("SELECT name, version, approval, target, secret FROM credentials ORDER BY name")
        .unwrap();
    stmt.query_map([], |r| {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

/// A vault with an HTTP credential bound to `target` under /v1/ (GET only) and an SSH one.
fn vault(tag: &str, target: &HttpTarget) -> TestVault {
    let mut v = TestVault::init(tag);
    v.add_bearer_with(
        "api",
        &target.base(),
        SECRET,
        &["--path-prefix", "/v1/", "--methods", "GET"],
    );
    v.run_pp(
        &[
            "add",
            "ssh",
            "web1",
            "--host",
            "127.0.0.1",
            "--port",
            "9",
            "--user",
            "deploy",
            "--password-stdin",
            "--host-key",
            PIN,
        ],
        Some("DECOY_bindings_pw_1\n"),
    )
    .ok();
    v
}

#[test]
fn without_the_passphrase_no_command_changes_a_credential() {
    if !run_unprivileged("without_the_passphrase_no_command_changes_a_credential") {
        return;
    }
    let target = HttpTarget::start(SECRET);
    let mut v = vault("bind-cli", &target);
    let before = (snapshot(&v), support::journal::kinds(&v));
    // The AI client's shell runs `vault` itself, with no terminal and no passphrase file.
    let attempts: [&[&str]; 9] = [
        &["edit", "web1", "--host-key", EVIL_PIN],
        &["edit", "web1", "--allow-command", "*"],
        &["edit", "api", "--path-prefix", "/"],
        &["edit", "api", "--methods", "any"],
        &["edit", "api", "--allow-header", "X-HTTP-Method-Override"],
        &["edit", "api", "--approval", "never"],
        &["edit", "api", "--secret-stdin"],
        &["rm", "api"],
        &["rm", "web1"],
    ];
    let mut changed = Vec::new();
    for args in attempts {
        let r = v.run(args, Some("attacker-token\n"));
        if r.code == 0 {
            changed.push(format!(
                "`vault {}` succeeded: {}",
                args.join(" "),
                r.stdout
            ));
        } else if !r.stderr.contains("passphrase") {
            changed.push(format!(
                "`vault {}` failed without saying the passphrase is needed: {}",
                args.join(" "),
                r.stderr
            ));
        }
    }
    let after = (snapshot(&v), support::journal::kinds(&v));
    assert!(changed.is_empty(), "{}", changed.join("\n"));
    assert_eq!(after.0, before.0, "a credential changed");
    assert_eq!(after.1, before.1, "something was journaled");
    // The target still sees only what the old bindings allow: a DELETE outside /v1/ is refused.
    let mut mcp = support::mcp::McpProc::spawn(v.command(&["mcp"]));
    mcp.initialize();
    let r = mcp.call(
        1,
        "http_request",
        json!({"credential": "api", "method": "DELETE", "url": format!("{}/admin", target.base()), "wait_s": 0}),
    );
    assert_eq!(
        r["result"]["structuredContent"]["error"]["code"], "policy_denied",
        "{r}"
    );
    assert!(target.requests().is_empty(), "{:?}", target.requests());
}

#[test]
fn speaking_the_agent_protocol_changes_no_credential() {
    if !run_unprivileged("speaking_the_agent_protocol_changes_no_credential") {
        return;
    }
    let target = HttpTarget::start(SECRET);
    let v = vault("bind-raw", &target);
    let before = (snapshot(&v), support::journal::kinds(&v));
    let listed = {
        let mut c = RawClient::cli(&v);
        c.ask(2, json!({"op": "credentials", "profile": "default"}))
    };
    let web1 = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["credential"]["name"] == "web1")
        .unwrap()["credential"]
        .clone();
    let version = web1["version"].as_i64().unwrap();
    let forged = json!({"payload": "{}", "signature": "00".repeat(64)});
    let requests: Vec<Value> = vec![
        json!({"op": "edit_credential", "profile": "default", "name": "web1", "version": version,
               "edit": {"host_key": EVIL_PIN}, "signature": "00".repeat(64)}),
        json!({"op": "edit_credential", "profile": "default", "name": "api", "version": 1,
               "edit": {"path_prefix": "/", "methods": null}, "signature": ""}),
        json!({"op": "edit_credential", "profile": "default", "name": "api", "version": 1,
               "edit": {"approval": "never"}, "signature": "00"}),
        json!({"op": "remove_credential", "profile": "default", "name": "api", "removal": forged}),
        json!({"op": "add_credential", "signature": "00", "new": {"id": format!("cred_{}", "0".repeat(32)),
               "profile": "default", "name": "evil", "approval": "never",
               "target": {"kind": "http", "scheme": "https", "host": "evil.example", "port": 443,
                          "path_prefix": "/", "methods": null, "auth": {"type": "bearer"},
                          "ca_file": null, "allow_headers": []},
               "secret": hex::encode("attacker")}}),
    ];
    for (i, req) in requests.into_iter().enumerate() {
        // Each on a fresh connection: a refused frame may close the one it came on.
        let mut c = RawClient::cli(&v);
        let reply = c.try_ask(2 + i as u64, req.clone());
        assert!(
            reply.as_ref().is_none_or(|r| r["kind"] == "error"),
            "{req} was answered {reply:?}"
        );
    }
    let after = (snapshot(&v), support::journal::kinds(&v));
    assert_eq!(after.0, before.0, "a credential changed");
    let new_rows: Vec<&String> = after.1[before.1.len()..]
        .iter()
        .filter(|k| k.starts_with("credential."))
        .collect();
    assert!(new_rows.is_empty(), "{new_rows:?}");
}

#[test]
fn a_signed_change_is_named_on_the_next_card() {
    let target = HttpTarget::start(SECRET);
    let mut v = vault("bind-card", &target);
    // One approved action at version 1, then the person re-pins the key (signed: passphrase).
    let mut mcp = support::mcp::McpProc::spawn(v.command(&["mcp"]));
    mcp.initialize();
    let ask = |mcp: &mut support::mcp::McpProc, id: i64| {
        mcp.call(
            id,
            "ssh_exec",
            json!({"credential": "web1", "command": "uptime", "wait_s": 0}),
        )["result"]["structuredContent"]["action_id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let first = ask(&mut mcp, 1);
    v.run(
        &["approve", "--id", &first, "--approve", "--passphrase-stdin"],
        Some(&format!("{PASSPHRASE}\n")),
    )
    .ok();
    v.run_pp(&["edit", "web1", "--host-key", EVIL_PIN], None)
        .ok();
    let second = ask(&mut mcp, 2);
    let card = v.run_tty_timed(
        &["approve"],
        &[
            ("passphrase", &format!("{PASSPHRASE}\n"), 0.2),
            ("[q]uit", "q", 0.6),
        ],
    );
    let screen = card.stdout.clone() + &card.stderr;
    for want in [
        "changed since you last approved one of its actions (then version 1)",
        &format!("host_key: {PIN} → {EVIL_PIN}"),
        &format!("{EVIL_PIN} (pinned)"),
        "deploy@127.0.0.1:9 $ uptime",
    ] {
        assert!(
            screen.contains(want),
            "{want} not on the card of {second}:\n{screen}"
        );
    }
}
