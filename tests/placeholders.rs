//! Tokens the tools never hold (issue 47, item 3): `vault run --env API_TOKEN=api` gives the
//! client a placeholder, and for the credential's bound host the proxy ends TLS with the vault's
//! own CA and swaps the placeholder for the secret, gated like `http_request`. A real `curl`,
//! run inside by an unprivileged user, is the tool; everything is judged from outside: at the
//! loopback targets (what they received, counted), in the journal, and by grepping every output
//! for the secret.
mod support;

use std::process::{Child, Stdio};
use std::time::Duration;
use support::git::{requests_in, GitServer};
use support::target::HttpTarget;
use support::tls::TestCa;
use support::uid::run_unprivileged;
use support::world::world_root;
use support::*;

const SECRET: &str = "sk-live-SWAPPED-4f1e9c2d7a";

/// The script inside: three requests with `curl`, each one's status, body and error kept in the
/// project (`A`: the bound host with the placeholder; `B`: the bound host without it; `C`: a
/// second, allowed host with the placeholder), and the placeholder the client was given.
const INSIDE: &str = r#"
set -u
cd "$PROJECT"
curl -sS -H "Authorization: Bearer $API_TOKEN" -o a.body -w '%{http_code}' "$BOUND/echo?via=curl" > a.code 2> a.err
curl -sS -o b.body -w '%{http_code}' "$BOUND/echo?via=none" > b.code 2> b.err
curl -sS -H "Authorization: Bearer $API_TOKEN" -o c.body -w '%{http_code}' "$OTHER/echo?via=other" > c.code 2> c.err
printf '%s' "$API_TOKEN" > placeholder
"#;

/// Every form of the secret (`forms_of`: raw, base64 with and without prefixes, percent-encoded)
/// is absent from each of `outputs`.
#[track_caller]
fn no_secret_in(outputs: &[String]) {
    for (i, o) in outputs.iter().enumerate() {
        for (form, enc) in support::target::forms_of(SECRET) {
            assert!(
                !o.contains(&enc),
                "output {i} holds the secret ({form}): {o}"
            );
        }
    }
}

/// The credential `api`: a bearer token for the TLS target `bound` (behind `ca`), each request
/// on a card.
fn add_api_credential(v: &mut TestVault, bound: &HttpTarget, ca: &TestCa) {
    v.run_pp(
        &[
            "add",
            "http",
            "api",
            "--host",
            &bound.base(),
            "--bearer",
            "--secret-stdin",
            "--approval",
            "each",
            "--ca-file",
            ca.ca_cert.to_str().unwrap(),
        ],
        Some(&format!("{SECRET}\n")),
    )
    .ok();
}

fn start(v: &TestVault, root: &std::path::Path, bound: &str, other: &HttpTarget) -> Child {
    let (home, project) = (root.join("home"), root.join("home/project"));
    std::fs::create_dir_all(&project).unwrap();
    let allow = format!("127.0.0.1:{}", other.port);
    let mut c = v.command(&[
        "run",
        "--env",
        "API_TOKEN=api",
        "--allow-host",
        &allow,
        "--",
        "/bin/sh",
        "-c",
        INSIDE,
    ]);
    c.current_dir(&project)
        .env("HOME", &home)
        .env("PROJECT", &project)
        .env("BOUND", bound)
        .env("OTHER", other.base())
        .env("API_TOKEN", "the person's own token, which must not pass")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c.spawn().unwrap()
}

#[test]
fn curl_with_a_placeholder_is_gated_by_the_card_and_only_the_bound_host_sees_the_secret() {
    let root = world_root("swapcurl").unwrap();
    if !run_unprivileged(
        "curl_with_a_placeholder_is_gated_by_the_card_and_only_the_bound_host_sees_the_secret",
    ) {
        let _ = std::fs::remove_dir_all(&root);
        return;
    }
    let certs = root.join("certs");
    std::fs::create_dir_all(&certs).unwrap();
    let ca = TestCa::create(&certs);
    let bound = HttpTarget::start_tls(SECRET, &ca.leaf_cert, &ca.leaf_key);
    let other = HttpTarget::start("unused");
    let mut v = TestVault::init("swapcurl");
    add_api_credential(&mut v, &bound, &ca);

    let run = start(&v, &root, &bound.base(), &other);
    // The swapped request waits for the card: nothing has reached the bound host yet.
    let pending = v.wait_pending(1);
    assert_eq!(pending[0]["tool"], "http_request", "{pending:?}");
    let summary = pending[0]["summary"].as_str().unwrap_or("");
    assert!(summary.starts_with("GET https://127.0.0.1:"), "{summary}");
    std::thread::sleep(Duration::from_millis(300));
    assert!(bound.requests().is_empty(), "a request ran before the card");
    let id = pending[0]["action_id"].as_str().unwrap().to_owned();
    v.run_pp(&["approve", "--id", &id, "--approve"], None).ok();

    let out = run.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "vault run failed: {stderr}");
    let project = root.join("home/project");
    let read = |f: &str| std::fs::read_to_string(project.join(f)).unwrap_or_default();
    let placeholder = read("placeholder");
    assert!(
        placeholder.starts_with("agent-vault-") && placeholder.len() == 44,
        "the client holds no placeholder: {placeholder:?} ({stderr})"
    );

    // A: through the card, to the bound host, with the real secret; the echo came back
    // scrubbed, byte for byte otherwise.
    assert_eq!(read("a.code"), "200", "{} {}", read("a.err"), stderr);
    let got = bound.requests();
    assert_eq!(got.len(), 1, "the bound host got {got:?}");
    assert_eq!(got[0]["path"], "/echo?via=curl");
    assert_eq!(
        got[0]["headers"]["authorization"],
        format!("Bearer {SECRET}")
    );
    let body: serde_json::Value = serde_json::from_str(&read("a.body")).unwrap_or_else(|e| {
        panic!(
            "curl's body is not the target's JSON ({e}): {}",
            read("a.body")
        )
    });
    assert_eq!(body["query"]["via"][0], "curl", "{body}");
    assert_eq!(
        body["headers"]["authorization"], "Bearer [REDACTED:api]",
        "the target's echo of the secret came back unscrubbed: {body}"
    );

    // B: no placeholder, no request: the proxy answered 401 itself.
    assert_eq!(read("b.code"), "401", "{}", read("b.body"));
    assert!(read("b.body").contains("API_TOKEN"), "{}", read("b.body"));

    // C: the placeholder sent to another host arrives as the placeholder, never swapped.
    assert_eq!(read("c.code"), "200", "{}", read("c.err"));
    let seen = other.requests();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(
        seen[0]["headers"]["authorization"],
        format!("Bearer {placeholder}")
    );
    // ... and the attempt is journaled in the proxy's session.
    let attempts: Vec<String> = {
        let vault = support::journal::open(&v);
        let mut st = vault
            .store
            .conn()
            .prepare(
                "SELECT json_extract(body, '$.reason') FROM audit WHERE kind = 'call.rejected'",
            )
            .unwrap();
        st.query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    assert_eq!(
        attempts,
        [format!(
            "placeholder API_TOKEN sent to 127.0.0.1 port {}, not swapped",
            other.port
        )],
    );

    // Only one request ever reached the bound host, and the secret is nowhere but there.
    assert_eq!(bound.requests().len(), 1);
    let mut outputs = vec![
        stderr.clone(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    ];
    for f in [
        "a.body",
        "a.err",
        "b.body",
        "b.err",
        "c.body",
        "c.err",
        "placeholder",
    ] {
        outputs.push(read(f));
    }
    outputs.push(other.requests().iter().map(|r| r.to_string()).collect());
    outputs.push(v.run(&["log", "--json"], None).ok().stdout);
    no_secret_in(&outputs);
    let kinds = support::journal::kinds(&v);
    let count = |k: &str| kinds.iter().filter(|x| *x == k).count();
    assert_eq!(
        (
            count("action.approved"),
            count("action.dispatched"),
            count("action.completed")
        ),
        (1, 1, 1),
        "{kinds:?}"
    );
    v.run(&["verify"], None).ok();
    let _ = std::fs::remove_dir_all(&root);
}

/// Node's own `fetch` inside: Node 20 (CI's) reads no proxy variable by itself, so the script
/// does what a Node 20 user does for them (undici's `EnvHttpProxyAgent` as the global
/// dispatcher; Node 24 and later need only the `NODE_USE_ENV_PROXY=1` that `vault run` sets).
/// It trusts the vault's CA through `NODE_EXTRA_CA_CERTS`, which `vault run` sets.
const NODE_FETCH: &str = r#"
const { EnvHttpProxyAgent, setGlobalDispatcher } = require(process.env.UNDICI);
const fs = require('fs');
setGlobalDispatcher(new EnvHttpProxyAgent());
(async () => {
  for (const [name, auth] of [['a', true], ['b', false]]) {
    try {
      const headers = auth ? { authorization: `Bearer ${process.env.API_TOKEN}` } : {};
      const r = await fetch(`${process.env.BOUND}/echo?via=node`, { headers });
      fs.writeFileSync(`${name}.code`, String(r.status));
      fs.writeFileSync(`${name}.body`, await r.text());
    } catch (e) {
      fs.writeFileSync(`${name}.err`, String(e && e.cause ? e.cause : e));
    }
  }
})();
"#;

#[test]
fn node_fetch_with_a_placeholder_is_gated_by_the_card_and_the_target_sees_the_secret() {
    let root = world_root("swapnode").unwrap();
    if !run_unprivileged(
        "node_fetch_with_a_placeholder_is_gated_by_the_card_and_the_target_sees_the_secret",
    ) {
        let _ = std::fs::remove_dir_all(&root);
        return;
    }
    let undici = support::ci_node_dir().join("node_modules/undici");
    let certs = root.join("certs");
    std::fs::create_dir_all(&certs).unwrap();
    let ca = TestCa::create(&certs);
    let bound = HttpTarget::start_tls(SECRET, &ca.leaf_cert, &ca.leaf_key);
    let mut v = TestVault::init("swapnode");
    add_api_credential(&mut v, &bound, &ca);
    let (home, project) = (root.join("home"), root.join("home/project"));
    std::fs::create_dir_all(&project).unwrap();
    let run = v
        .command(&["run", "--env", "API_TOKEN=api", "--allow-read"])
        .arg(&undici)
        .args(["--", "node", "-e", NODE_FETCH])
        .current_dir(&project)
        .env("HOME", &home)
        .env("UNDICI", &undici)
        .env("BOUND", bound.base())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pending = v.wait_pending(1);
    assert_eq!(pending[0]["tool"], "http_request", "{pending:?}");
    std::thread::sleep(Duration::from_millis(300));
    assert!(bound.requests().is_empty(), "a request ran before the card");
    let id = pending[0]["action_id"].as_str().unwrap().to_owned();
    v.run_pp(&["approve", "--id", &id, "--approve"], None).ok();

    let out = run.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "vault run failed: {stderr}");
    let read = |f: &str| std::fs::read_to_string(project.join(f)).unwrap_or_default();
    assert_eq!(
        read("a.code"),
        "200",
        "{} {} {stderr}",
        read("a.err"),
        read("a.body")
    );
    let got = bound.requests();
    assert_eq!(got.len(), 1, "the bound host got {got:?}");
    assert_eq!(
        got[0]["headers"]["authorization"],
        format!("Bearer {SECRET}")
    );
    let body: serde_json::Value = serde_json::from_str(&read("a.body")).unwrap();
    assert_eq!(
        body["headers"]["authorization"], "Bearer [REDACTED:api]",
        "{body}"
    );
    // Without the placeholder: the proxy's 401, and nothing more reached the target.
    assert_eq!(
        read("b.code"),
        "401",
        "{} {}",
        read("b.err"),
        read("b.body")
    );
    assert_eq!(bound.requests().len(), 1);

    let mut outputs = vec![stderr, String::from_utf8_lossy(&out.stdout).into_owned()];
    for f in ["a.body", "a.err", "b.body", "b.err"] {
        outputs.push(read(f));
    }
    outputs.push(v.run(&["log", "--json"], None).ok().stdout);
    no_secret_in(&outputs);
    v.run(&["verify"], None).ok();
    let _ = std::fs::remove_dir_all(&root);
}

/// The credential `git`: basic auth (`x-access-token`) to the git server, with `approval`.
fn add_git_credential(v: &mut TestVault, root: &std::path::Path, port: &str, approval: &str) {
    let ca = root.join("certs/ca.pem");
    assert!(
        ca.exists(),
        "the git server's CA is not at {}",
        ca.display()
    );
    v.run_pp(
        &[
            "add",
            "http",
            "git",
            "--host",
            &format!("https://127.0.0.1:{port}"),
            "--basic",
            "x-access-token",
            "--secret-stdin",
            "--approval",
            approval,
            "--ca-file",
            ca.to_str().unwrap(),
        ],
        Some(&format!("{SECRET}\n")),
    )
    .ok();
}

/// `Basic base64(x-access-token:SECRET)`, as the git server must receive it.
fn basic_secret() -> String {
    format!(
        "Basic {}",
        base64::Engine::encode(
            &base64::engine::general_purpose::STANDARD,
            format!("x-access-token:{SECRET}")
        )
    )
}

/// `git clone` over HTTPS with the placeholder as basic auth's password (as a GitHub token is
/// used), against `git http-backend` on loopback. Git's first request carries no password: the
/// proxy answers it 401 itself, and git sends the placeholder. Each swapped request waits for
/// the person's card; the test approves each as it comes. The clone holds the repository; every
/// request the server received carried the real secret and none the placeholder; nothing the
/// client wrote (its output, the clone's config) holds the secret. (The clone goes under /tmp
/// inside: the sandbox refuses a repository made in the project.)
#[test]
fn git_clones_over_https_with_a_placeholder_each_request_on_the_card() {
    let root = world_root("swapgit").unwrap();
    if !run_unprivileged("git_clones_over_https_with_a_placeholder_each_request_on_the_card") {
        let _ = std::fs::remove_dir_all(&root);
        return;
    }
    let GitServer {
        mut server,
        port,
        log,
        ..
    } = GitServer::start(&root, "cloned through the vault\n");
    let mut v = TestVault::init("swapgit");
    add_git_credential(&mut v, &root, &port, "each");

    let (home, project) = (root.join("home"), root.join("home/project"));
    std::fs::create_dir_all(&project).unwrap();
    let script = format!(
        "git clone \"https://x-access-token:$GIT_TOKEN@127.0.0.1:{port}/repo.git\" /tmp/clone > git.out 2>&1; echo $? > git.code; cp /tmp/clone/README cloned.README; cp /tmp/clone/.git/config cloned.config"
    );
    let mut run = v
        .command(&[
            "run",
            "--env",
            "GIT_TOKEN=git",
            "--",
            "/bin/sh",
            "-c",
            &script,
        ])
        .current_dir(&project)
        .env("HOME", &home)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Every card that comes, approved, until the clone ends.
    let mut approved = 0;
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while run.try_wait().unwrap().is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "the clone never ended"
        );
        let pending = v.run(&["pending", "--json"], None).ok().stdout;
        let pending: Vec<serde_json::Value> = serde_json::from_str(pending.trim()).unwrap();
        for p in pending {
            let id = p["action_id"].as_str().unwrap().to_owned();
            v.run_pp(&["approve", "--id", &id, "--approve"], None).ok();
            approved += 1;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = run.wait_with_output().unwrap();
    let _ = server.kill();
    let _ = server.wait();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let read = |f: &str| std::fs::read_to_string(project.join(f)).unwrap_or_default();
    assert_eq!(
        read("git.code").trim(),
        "0",
        "git clone failed: {} {stderr}",
        read("git.out")
    );
    assert_eq!(read("cloned.README"), "cloned through the vault\n");

    let requests = requests_in(&log);
    let basic = basic_secret();
    assert!(requests.len() >= 2, "{requests:?}");
    assert!(
        requests
            .iter()
            .all(|r| r["authorization"] == basic.as_str()),
        "a request reached the server without the secret: {requests:?}"
    );
    assert_eq!(
        approved,
        requests.len(),
        "one card per request: {requests:?}"
    );

    let mut outputs = vec![stderr, read("git.out"), read("cloned.config")];
    outputs.push(v.run(&["log", "--json"], None).ok().stdout);
    no_secret_in(&outputs);
    v.run(&["verify"], None).ok();
    let _ = std::fs::remove_dir_all(&root);
}

/// `git clone` of a repository whose pack is past the agent's 4 MiB reply (a 6 MB file of
/// random bytes), then `git push` over HTTPS with the placeholder: a pack of 3 MB of random
/// bytes (binary, larger than the `http.postBuffer` given, so git sends it chunked, and past the
/// 1 MiB a frame carries, so the proxy hands it to the agent in a file) goes through the proxy,
/// which reads the chunks whole, and on to the server with the secret. The credential runs
/// without a card (`never`): a binary pack is more than a card can show whole.
/// Judged at the server and in the clone: the large file arrived with the hash the server has;
/// the pushed commit and its blob are in the bare repository, and every request it received
/// carried the secret; git's trace shows the pack left it chunked; the files the large response
/// and the large request went through are gone.
#[test]
fn git_clones_past_the_reply_and_pushes_a_binary_pack_chunked_with_a_placeholder() {
    let root = world_root("swappush").unwrap();
    if !run_unprivileged(
        "git_clones_past_the_reply_and_pushes_a_binary_pack_chunked_with_a_placeholder",
    ) {
        let _ = std::fs::remove_dir_all(&root);
        return;
    }
    let mut git_server = GitServer::start(&root, "pushed to through the vault\n");
    let large = git_server.commit_random_file("large.bin", 6_000_000);
    let port = git_server.port.clone();
    let mut v = TestVault::init("swappush");
    add_git_credential(&mut v, &root, &port, "never");
    let (home, project) = (root.join("home"), root.join("home/project"));
    std::fs::create_dir_all(&project).unwrap();
    let script = format!(
        r#"P=$(pwd)
git clone -q "https://x-access-token:$GIT_TOKEN@127.0.0.1:{port}/repo.git" /tmp/w > "$P/git.out" 2>&1 || exit 3
cd /tmp/w
git hash-object large.bin > "$P/large"
head -c 3000000 /dev/urandom > big.bin
git add big.bin && git -c user.name=t -c user.email=t@example.org commit -qm big || exit 4
git hash-object big.bin > "$P/blob"
GIT_TRACE_CURL="$P/curl.trace" GIT_TRACE_CURL_NO_DATA=1 git -c http.postBuffer=65536 push origin HEAD >> "$P/git.out" 2>&1
echo $? > "$P/git.code""#
    );
    let out = v
        .command(&[
            "run",
            "--env",
            "GIT_TOKEN=git",
            "--",
            "/bin/sh",
            "-c",
            &script,
        ])
        .current_dir(&project)
        .env("HOME", &home)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let _ = git_server.server.kill();
    let _ = git_server.server.wait();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let read = |f: &str| std::fs::read_to_string(project.join(f)).unwrap_or_default();
    // The actions that did not complete, with their reasons, for the failure message.
    let journal: String = v
        .run(&["log", "--json"], None)
        .ok()
        .stdout
        .lines()
        .filter(|l| !l.contains("\"state\":\"completed\""))
        .collect::<Vec<_>>()
        .join("\n");
    assert_eq!(
        read("git.code").trim(),
        "0",
        "git push failed (vault run {:?}): {} {stderr}\nthe journal: {}",
        out.status,
        read("git.out"),
        journal
    );
    // At the server: the commit and its blob arrived.
    let bare = git_server.srv.join("repo.git");
    let git_out = |args: &[&str]| {
        let o = std::process::Command::new("git")
            .arg("--git-dir")
            .arg(&bare)
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).trim().to_owned()
    };
    assert_eq!(
        read("large").trim(),
        large,
        "the large file was cloned whole"
    );
    let relayed = agent_vault::paths::VaultPaths::new(v.vault_dir()).relayed();
    let left: Vec<_> = std::fs::read_dir(&relayed)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "the proxy left {left:?}");
    // The pack is not kept in the vault once sent: its action holds no body, only its hash.
    let vault = v.open_db();
    let count = |sql: &str| -> i64 { vault.store.conn().query_row(sql, [], |r| r.get(0)).unwrap() };
    assert_eq!(
        count("SELECT count(*) FROM actions WHERE length(body) > 1048576"),
        0
    );
    assert!(
        count("SELECT count(*) FROM actions WHERE state = 'completed' AND body IS NULL AND normalized LIKE '%git-receive-pack%' AND normalized LIKE '%body_blake3%'") >= 1,
        "the push's action"
    );
    drop(vault);
    assert_eq!(git_out(&["log", "-1", "--format=%s", "main"]), "big");
    let blob = read("blob").trim().to_owned();
    assert_eq!(blob.len(), 40, "{blob:?}");
    assert_eq!(git_out(&["rev-parse", "main:big.bin"]), blob);
    assert_eq!(git_out(&["cat-file", "-s", &blob]), "3000000");
    // Every request carried the secret, the pack's among them; the pack left git chunked.
    let requests = git_server.requests();
    assert!(
        requests
            .iter()
            .any(|r| r["method"] == "POST" && r["path"] == "/repo.git/git-receive-pack"),
        "{requests:?}"
    );
    assert!(
        requests
            .iter()
            .all(|r| r["authorization"] == basic_secret().as_str()),
        "a request reached the server without the secret: {requests:?}"
    );
    let trace = read("curl.trace");
    assert!(
        trace
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked"),
        "git did not send the pack chunked:\n{trace}"
    );
    no_secret_in(&[stderr, read("git.out"), trace]);
    v.run(&["verify"], None).ok();
    let _ = std::fs::remove_dir_all(&root);
}
