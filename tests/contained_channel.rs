//! The channel from inside `vault run` to the vault is an MCP client's and nothing more (issue
//! 45, items 1 and 4): an MCP connection is refused every request kind but an MCP session's own,
//! enumerated from the protocol's type, and the relay serves only processes of its own sandbox,
//! so the contained flag cannot be had from outside through `/proc/PID/root`. Each attacker is a
//! second process of the same uid; each refusal is judged from outside.
mod support;

use serde_json::{json, Value};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::target::HttpTarget;
use support::uid::run_unprivileged;
use support::world::{with_marker, world_root};
use support::*;

const SECRET: &str = "DECOY_channel_tok_0b5a77e2";

/// The MCP role is an MCP session and nothing more (issue 45, item 1): a same-uid process that
/// says hello as `mcp` on the agent's socket, and then sends every request kind the protocol
/// defines (enumerated from the type), is refused each one but the session's own (its tools,
/// cancel, reject, end, ping). Judged from outside: no export file, the agent alive and
/// unpaused, the other session's action still waiting and its body never sent here, no row of
/// what was asked.
#[test]
fn an_mcp_connection_is_refused_every_request_but_an_mcp_sessions_own() {
    let target = HttpTarget::start(SECRET);
    let mut v = TestVault::init("mcpgate");
    v.add_bearer("api", &target.base(), SECRET);
    // Another session's action waits, with a body the raw client must never see.
    let mut other = support::mcp::McpProc::spawn(v.command(&["mcp"]));
    other.initialize();
    let body_marker = "BODY_of_another_session_4f1a";
    other.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "http_request",
        "arguments": {"credential": "api", "method": "POST", "url": format!("{}/x", target.base()),
        "body": body_marker, "wait_s": 0}}}));
    let waiting = v.wait_pending(1);
    let export = v.dir.path().join("planted-export.sh");
    let samples = support::requests::every_kind(export.to_str().unwrap());
    let mut raw = support::raw::RawClient::connect(&v);
    let hello = raw.ask(
        1,
        json!({"op": "hello", "v": agent_vault::agent::protocol::VERSION, "role": "mcp"}),
    );
    assert_eq!(hello["kind"], "welcome", "{hello}");
    let mut said = String::new();
    let mut refused = Vec::new();
    for (n, (kind, req)) in samples.iter().enumerate() {
        // A second hello ends the connection (a protocol error); it is tried last, below.
        if *kind == agent_vault::agent::protocol::RequestKind::Hello || kind.for_mcp() {
            continue;
        }
        let reply = raw
            .try_ask(100 + n as u64, req.clone())
            .unwrap_or_else(|| panic!("the agent hung up on {kind:?}"));
        said.push_str(&reply.to_string());
        assert_eq!(reply["kind"], "error", "{kind:?} was served: {reply}");
        refused.push(*kind);
    }
    // A second hello is a protocol error: refused, and the connection closed.
    assert!(raw
        .try_ask(99, json!({"op": "hello", "v": 7, "role": "cli"}))
        .is_none());
    // Every person's command was tried (the list is the type's, less the session's own).
    assert!(refused.len() >= 25, "{refused:?}");
    assert!(
        !export.exists(),
        "the agent wrote the export a client asked for"
    );
    assert!(
        !said.contains(body_marker),
        "another session's body was sent: {said}"
    );
    assert!(!said.contains(SECRET));
    let pid = v.agent_pid().expect("the agent still runs");
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let state = stat[stat.rfind(')').unwrap() + 2..].chars().next();
    assert!(
        matches!(state, Some('S' | 'R')),
        "the agent is not running: {stat}"
    );
    let status: Value =
        serde_json::from_str(v.run(&["status", "--json"], None).ok().stdout.trim()).unwrap();
    assert!(
        status["paused"].is_null() || status["paused"] == false,
        "{status}"
    );
    let still: Vec<Value> = v.wait_pending(1);
    assert_eq!(still[0]["action_id"], waiting[0]["action_id"]);
    let journal = support::journal::kinds(&v);
    let adds = journal.iter().filter(|k| *k == "credential.add").count();
    assert_eq!(adds, 1, "a credential was added: {journal:?}");
    for kind in [
        "vault.lock",
        "vault.pause",
        "credential.edit",
        "credential.rm",
    ] {
        assert!(
            !journal.iter().any(|k| k == kind),
            "{kind} was journaled: {journal:?}"
        );
    }
    assert_eq!(target.requests().len(), 0, "the waiting POST ran");
}

/// Only `vault run`'s proxy asks for hosts (issue 47, item 2): a same-uid process that is not
/// the vault's executable cannot open a network session (hello as `egress`), and a person's
/// command (role `cli`) is refused a `connect`. Judged from outside: no card waits, and the
/// journal holds no network action.
#[test]
fn only_vault_runs_proxy_asks_for_hosts() {
    let root = world_root("egresshello").unwrap();
    if !run_unprivileged("only_vault_runs_proxy_asks_for_hosts") {
        let _ = std::fs::remove_dir_all(&root);
        return;
    }
    let mut v = TestVault::init("egresshello");
    let version = agent_vault::agent::protocol::VERSION;
    let mut raw = support::raw::RawClient::connect(&v);
    let hello = raw.try_ask(1, json!({"op": "hello", "v": version, "role": "egress"}));
    assert!(
        hello.as_ref().is_none_or(|h| h["kind"] == "error"),
        "a network session was opened by another program: {hello:?}"
    );
    let mut cli = support::raw::RawClient::connect(&v);
    let hello = cli.ask(1, json!({"op": "hello", "v": version, "role": "cli"}));
    assert_eq!(hello["kind"], "welcome", "{hello}");
    let asked = cli.try_ask(2, json!({"op": "connect", "host": "127.0.0.1", "port": 9}));
    assert!(
        asked.as_ref().is_some_and(|r| r["kind"] == "error"),
        "a person's command asked for a host: {asked:?}"
    );
    let pending: Vec<Value> =
        serde_json::from_str(v.run(&["pending", "--json"], None).ok().stdout.trim()).unwrap();
    assert!(pending.is_empty(), "{pending:?}");
    let rows = support::journal::kinds(&v);
    assert!(
        !rows.iter().any(|k| k.starts_with("action.")),
        "an action was journaled: {rows:?}"
    );
    let _ = std::fs::remove_dir_all(&root);
}

/// The flag is the channel's (issue 45, item 4): a process outside any sandbox that reaches the
/// relay's socket through `/proc/PID/root` of a contained process (same uid, so the kernel lets
/// it) gets no contained session. Judged from outside: `vault sessions --json` marks no session
/// of its contained, and the relay's refusal leaves the agent untouched.
#[test]
fn a_process_outside_reaching_the_relay_through_proc_root_is_not_contained() {
    let root = world_root("procroot").unwrap();
    if !run_unprivileged("a_process_outside_reaching_the_relay_through_proc_root_is_not_contained")
    {
        let _ = std::fs::remove_dir_all(&root);
        return;
    }
    let mut v = TestVault::init("procroot");
    let marker = format!("avtest-procroot-{}", std::process::id());
    let (home, project) = (root.join("home"), root.join("home/project"));
    std::fs::create_dir_all(&project).unwrap();
    let mut c = v.command(&["run", "--", "sh", "-c", "sleep 60", &marker]);
    c.current_dir(&project)
        .env("HOME", &home)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut run = c.spawn().unwrap();
    let t0 = Instant::now();
    let inside = loop {
        if let Some(p) = with_marker(&marker)
            .into_iter()
            .find(|p| std::fs::read(format!("/proc/{p}/comm")).is_ok_and(|c| c.starts_with(b"sh")))
        {
            break p;
        }
        if t0.elapsed() > Duration::from_secs(20) || run.try_wait().unwrap().is_some() {
            let _ = run.kill();
            let out = run.wait_with_output().unwrap();
            panic!(
                "the client never started: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let doctor: Value =
        serde_json::from_str(v.run(&["doctor", "--json"], None).ok().stdout.trim()).unwrap();
    let socket = v.socket();
    let via_proc = format!("/proc/{inside}/root{}", socket.display());
    assert!(doctor.is_object());
    // The attacker: a second process, outside, speaking the agent's protocol through the path.
    let said = Command::new(system_python())
        .arg("-c")
        .arg(
            "import socket,sys,json\n\
             s=socket.socket(socket.AF_UNIX); s.settimeout(10); s.connect(sys.argv[1])\n\
             print('connected')\n\
             s.sendall(b'{\"id\":1,\"req\":{\"op\":\"hello\",\"v\":%d,\"role\":\"mcp\"}}\\n' % int(sys.argv[2]))\n\
             try:\n  print(s.recv(65536).decode())\n\
             except Exception as e:\n  print('no answer:', e)\n",
        )
        .arg(&via_proc)
        // The protocol's own version: a hello of another is refused whoever sends it.
        .arg(agent_vault::agent::protocol::VERSION.to_string())
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&said.stdout).into_owned() + &String::from_utf8_lossy(&said.stderr);
    let sessions: Vec<Value> =
        serde_json::from_str(v.run(&["sessions", "--json"], None).ok().stdout.trim()).unwrap();
    // The path itself works: the attack reached the relay (so its refusal is what is judged).
    assert!(text.starts_with("connected"), "{via_proc}: {text}");
    let contained: Vec<&Value> = sessions.iter().filter(|s| s["contained"] == true).collect();
    assert!(
        contained.is_empty(),
        "an outside process got a contained session: {text} {sessions:?}"
    );
    assert!(
        !text.contains("\"welcome\""),
        "the relay served an outside process: {text}"
    );
    let _ = run.kill();
    let _ = run.wait();
    let _ = std::fs::remove_dir_all(&root);
}
