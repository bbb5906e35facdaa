//! Session grants through the real binaries (issue 30, item 2): `s` on a GET's card covers reads
//! under that path's directory and nothing else (a DELETE, a POST, a GET with a body, a GET
//! elsewhere each get a card, and the target sees none of them); `vault grants` lists a grant
//! with its scope and uses; `vault grants revoke ID|--all` ends it at once, with the agent
//! running and locked; `vault log --json` names why every dispatched action ran, and the journal
//! verifies.
mod support;

use serde_json::{json, Value};
use std::time::Duration;
use support::mcp::McpProc;
use support::target::HttpTarget;
use support::*;

const SECRET: &str = "DECOY_grants_tok_5e1f07aa";

/// An `http_request` with these arguments (credential `api`), waiting `wait_s`; its result.
fn call(p: &mut McpProc, id: i64, method: &str, url: &str, extra: Value, wait_s: u64) -> Value {
    let mut args = json!({"credential": "api", "method": method, "url": url, "wait_s": wait_s});
    for (k, v) in extra.as_object().into_iter().flatten() {
        args[k] = v.clone();
    }
    p.call(id, "http_request", args)["result"]["structuredContent"].clone()
}

/// How many requests of `method` reached the target.
fn count(target: &HttpTarget, method: &str) -> usize {
    target
        .requests()
        .iter()
        .filter(|r| r["method"] == method)
        .count()
}

/// Sends a GET of `url` without waiting, approves its card with `--approve-session`, and waits
/// for it to complete; returns the scripted approval's JSON line.
fn grant_on_get(p: &mut McpProc, v: &mut TestVault, id: i64, url: &str) -> Value {
    p.send(
        &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "http_request",
        "arguments": {"credential": "api", "method": "GET", "url": url, "wait_s": 30}}}),
    );
    let path = url.split_once("127.0.0.1").unwrap().1;
    let act = v.pending_with(path)["action_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = v
        .run(
            &[
                "approve",
                "--id",
                &act,
                "--approve-session",
                "--json",
                "--passphrase-stdin",
            ],
            Some(&format!("{PASSPHRASE}\n")),
        )
        .ok();
    let (done, _) = p.until_id(&json!(id), Duration::from_secs(30));
    assert_eq!(
        done["result"]["structuredContent"]["state"], "completed",
        "{done}"
    );
    serde_json::from_str(r.stdout.trim()).unwrap()
}

fn grants(v: &mut TestVault) -> Vec<Value> {
    serde_json::from_str(v.run(&["grants", "--json"], None).ok().stdout.trim()).unwrap()
}

#[test]
fn a_reads_grant_covers_reads_under_its_directory_and_revoke_ends_it() {
    let target = HttpTarget::start(SECRET);
    let mut v = TestVault::init("grants");
    v.add_bearer("api", &target.base(), SECRET);
    let base = target.base();
    let mut p = McpProc::spawn(v.command(&["mcp"]));
    p.initialize();
    let approved = grant_on_get(&mut p, &mut v, 1, &format!("{base}/repos/acme/app/issues"));
    assert_eq!(count(&target, "GET"), 1);

    // A write, a GET with a body and a GET outside the directory each get a card.
    let waits = [
        ("DELETE", format!("{base}/repos/acme/prod"), json!({})),
        (
            "POST",
            format!("{base}/repos/acme/app/issues"),
            json!({"json": {"title": "x"}}),
        ),
        (
            "GET",
            format!("{base}/repos/acme/app/issues"),
            json!({"body": "q"}),
        ),
        ("GET", format!("{base}/repos/acme/other"), json!({})),
        ("GET", format!("{base}/repos/acme/application"), json!({})),
    ];
    for (i, (method, url, extra)) in waits.iter().enumerate() {
        let sc = call(&mut p, 10 + i as i64, method, url, extra.clone(), 1);
        assert_eq!(sc["state"], "pending", "{method} {url}: {sc}");
    }
    assert_eq!(count(&target, "DELETE"), 0, "no DELETE reached the target");
    assert_eq!(count(&target, "POST"), 0, "no POST reached the target");
    assert_eq!(count(&target, "GET"), 1, "no GET outside the grant ran");
    // The confirmation named what the grant covers.
    let scope = approved["grant"]["scope"].as_str().unwrap_or_default();
    assert!(
        scope.contains("GET, HEAD at or under /repos/acme/app"),
        "{approved}"
    );

    // A read under the directory (any query, any depth) runs without a card.
    for (i, path) in ["repos/acme/app/pulls?state=open", "repos/acme/app/issues/7"]
        .iter()
        .enumerate()
    {
        let sc = call(
            &mut p,
            20 + i as i64,
            "GET",
            &format!("{base}/{path}"),
            json!({}),
            5,
        );
        assert_eq!(sc["state"], "completed", "{path}: {sc}");
    }
    let sc = call(
        &mut p,
        22,
        "HEAD",
        &format!("{base}/repos/acme/app/x"),
        json!({}),
        5,
    );
    assert_eq!(sc["state"], "completed", "HEAD: {sc}");
    assert_eq!(count(&target, "GET") + count(&target, "HEAD"), 4);

    // `vault grants` lists it: session, client, credential, scope, expiry, uses so far.
    let listed = grants(&mut v);
    assert_eq!(listed.len(), 1, "{listed:?}");
    let g = &listed[0];
    assert_eq!(g["uses"], 3, "{g}");
    assert_eq!(g["credential"]["name"], "api", "{g}");
    assert_eq!(g["credential"]["version"], 1, "{g}");
    assert_eq!(g["client"]["name"], "test-client", "{g}");
    assert_eq!(g["scope"]["kind"], "http_reads", "{g}");
    assert_eq!(g["scope"]["prefix"], "/repos/acme/app/", "{g}");
    assert_eq!(g["scope"]["methods"], json!(["GET", "HEAD"]), "{g}");
    assert!(g["session"].as_str().unwrap().starts_with("ses_"), "{g}");
    assert!(g["expires_at"].as_str().unwrap().ends_with('Z'), "{g}");
    let id = g["id"].as_str().unwrap().to_owned();
    let text = v.run(&["grants"], None).ok().stdout;
    assert!(
        text.contains(&id) && text.contains("GET, HEAD at or under /repos/acme/app, any query"),
        "{text}"
    );

    // Revoked: the next read of that session gets a card, and nothing more reaches the target.
    let r = v
        .run(
            &["grants", "revoke", &id, "--passphrase-stdin"],
            Some(&format!("{PASSPHRASE}\n")),
        )
        .ok();
    assert!(r.stdout.contains(&id), "{}", r.stdout);
    let sc = call(
        &mut p,
        30,
        "GET",
        &format!("{base}/repos/acme/app/y"),
        json!({}),
        1,
    );
    assert_eq!(sc["state"], "pending", "after revoke: {sc}");
    assert_eq!(count(&target, "GET") + count(&target, "HEAD"), 4);
    assert!(grants(&mut v).is_empty());
    // A revocation is single use and must name a grant that is active.
    v.run(
        &["grants", "revoke", &id, "--passphrase-stdin"],
        Some(&format!("{PASSPHRASE}\n")),
    )
    .code(1);

    // `--all` ends every active grant.
    grant_on_get(&mut p, &mut v, 40, &format!("{base}/orgs/acme/teams"));
    let sc = call(
        &mut p,
        41,
        "GET",
        &format!("{base}/orgs/acme/members"),
        json!({}),
        5,
    );
    assert_eq!(sc["state"], "completed", "{sc}");
    assert_eq!(grants(&mut v).len(), 1);
    v.run(
        &["grants", "revoke", "--all", "--passphrase-stdin"],
        Some(&format!("{PASSPHRASE}\n")),
    )
    .ok();
    let sc = call(
        &mut p,
        42,
        "GET",
        &format!("{base}/orgs/acme/repos"),
        json!({}),
        1,
    );
    assert_eq!(sc["state"], "pending", "after revoke --all: {sc}");
    let gets = count(&target, "GET") + count(&target, "HEAD");
    assert_eq!(gets, 6);
    // The writes that waited all along still have not run: no grant, revoked or not, covered
    // them (counted at the target again, at the end).
    assert_eq!(count(&target, "DELETE"), 0, "a DELETE reached the target");
    assert_eq!(count(&target, "POST"), 0, "a POST reached the target");
    let requests = target.requests();
    assert_eq!(
        requests.len(),
        6,
        "only the six reads reached the target: {requests:?}"
    );

    // Every dispatched action names why it ran: a card (with its decision) or the grant.
    let log = v.run(&["log", "--json"], None).ok().stdout;
    let entries: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let done: Vec<&Value> = entries
        .iter()
        .filter(|e| e["state"] == "completed")
        .collect();
    assert_eq!(done.len(), 6, "{log}");
    let mut by_kind = std::collections::BTreeMap::<String, usize>::new();
    for e in &done {
        let kind = e["basis"]["kind"]
            .as_str()
            .unwrap_or_else(|| panic!("no basis: {e}"));
        *by_kind.entry(kind.to_owned()).or_default() += 1;
        match kind {
            "card" => assert!(e["basis"]["decision"].as_str().unwrap().starts_with("dec_")),
            "grant" => assert!(e["basis"]["grant"].as_str().unwrap().starts_with("grt_")),
            other => panic!("{other}: {e}"),
        }
    }
    assert_eq!(by_kind.get("card"), Some(&2), "{log}");
    assert_eq!(by_kind.get("grant"), Some(&4), "{log}");
    assert!(log.contains(&format!("\"grant\":\"{id}\"")), "{log}");
    let human = v.run(&["log"], None).ok().stdout;
    assert!(human.contains(&format!("grant {id}")), "{human}");
    v.run(&["verify"], None).ok();
    p.finish(Duration::from_secs(10));
}

/// A grant lives with its session, and a session with the agent that served it: once the vault is
/// locked (the agent journals each open session's end), no grant is in force, and a locked
/// vault, opened with the passphrase, lists none (it listed the dead grant as in force).
#[test]
fn grants_end_with_their_session_and_a_locked_vault_lists_none_in_force() {
    let target = HttpTarget::start(SECRET);
    let mut v = TestVault::init("grants-locked");
    v.add_bearer("api", &target.base(), SECRET);
    let mut p = McpProc::spawn(v.command(&["mcp"]));
    p.initialize();
    grant_on_get(&mut p, &mut v, 1, &format!("{}/a/b", target.base()));
    assert_eq!(grants(&mut v).len(), 1, "in force while the session runs");
    v.run(&["lock"], None).ok();
    let pp = format!("{PASSPHRASE}\n");
    let listed = v
        .run(&["grants", "--json", "--passphrase-stdin"], Some(&pp))
        .ok()
        .stdout;
    assert_eq!(listed.trim(), "[]");
    // The grant is journaled (given, and its session ended), and the journal verifies.
    let kinds = support::journal::kinds(&v);
    assert!(kinds.iter().any(|k| k == "grant.add"), "{kinds:?}");
    assert!(kinds.iter().any(|k| k == "session.end"), "{kinds:?}");
    v.run(&["verify", "--passphrase-stdin"], Some(&pp)).ok();
    drop(p);
}
