//! `vault run`'s network (issue 47, item 1): the sandbox has a network namespace of its own whose
//! only way out is the vault's proxy, to the allowed hosts. The attacker is a program inside,
//! run by an unprivileged user, that reads a decoy from the project and tries every way out;
//! each listener it aims at is on the person's loopback and counts what arrives, from outside.
//! The same program with `--network open` is the control: there the same listeners receive the
//! decoy, so their silence under containment is the sandbox's doing.
mod support;

use serde_json::{json, Value};
use std::io::Read;
use std::net::{TcpListener, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::target::HttpTarget;
use support::uid::{is_root, run_unprivileged};
use support::world::world_root;
use support::*;

/// A listener on the person's loopback that keeps every byte each connection or datagram brought.
struct Counter {
    port: u16,
    got: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl Counter {
    fn tcp(addr: &str) -> Self {
        let l = TcpListener::bind(addr).unwrap_or_else(|e| panic!("bind {addr}: {e}"));
        let got: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
        let (port, keep) = (l.local_addr().unwrap().port(), got.clone());
        std::thread::spawn(move || {
            for mut c in l.incoming().flatten() {
                let keep = keep.clone();
                std::thread::spawn(move || {
                    let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
                    let mut bytes = Vec::new();
                    let _ = c.read_to_end(&mut bytes);
                    keep.lock().unwrap().push(bytes);
                });
            }
        });
        Self { port, got }
    }

    /// A TCP listener at `ip` on the same port as `other`.
    fn tcp_beside(ip: &str, other: &Counter) -> Self {
        Self::tcp(&format!("{ip}:{}", other.port))
    }

    fn udp(addr: &str) -> Self {
        let s = UdpSocket::bind(addr).unwrap_or_else(|e| panic!("bind {addr}: {e}"));
        let got: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
        let (port, keep) = (s.local_addr().unwrap().port(), got.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 65536];
            while let Ok((n, _)) = s.recv_from(&mut buf) {
                keep.lock().unwrap().push(buf[..n].to_vec());
            }
        });
        Self { port, got }
    }

    fn arrivals(&self) -> usize {
        self.got.lock().unwrap().len()
    }

    fn holds(&self, needle: &[u8]) -> bool {
        self.got.lock().unwrap().iter().any(|b| {
            b.windows(needle.len())
                .any(|w| w.eq_ignore_ascii_case(needle))
        })
    }
}

/// Runs the attacker under `vault run` with `flags`; returns its report and `vault run`'s stderr.
fn attack(root: &std::path::Path, config: &Value, flags: &[String]) -> (Value, String) {
    let home = root.join("home");
    let project = home.join("project");
    let report = project.join("report.json");
    let _ = std::fs::remove_file(&report);
    let mut cfg = config.clone();
    cfg["project"] = json!(project);
    cfg["report"] = json!(report);
    let config_path = project.join("attack.json");
    std::fs::write(&config_path, cfg.to_string()).unwrap();
    let script = support_file("net_attacker.py");
    let mut c = Command::new(bin());
    c.arg("run")
        .args(flags)
        .arg("--allow-read")
        .arg(&script)
        .arg("--")
        .arg(system_python())
        .arg(&script)
        .arg(&config_path)
        .current_dir(&project)
        .env("HOME", &home)
        .env("VAULT_DIR", root.join("vault"))
        .env_remove("HTTP_PROXY")
        .env_remove("HTTPS_PROXY")
        .env_remove("ALL_PROXY")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out = c.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "vault run failed: {stderr}");
    let text = std::fs::read_to_string(&report)
        .unwrap_or_else(|e| panic!("the attacker wrote no report ({e}): {stderr}"));
    (serde_json::from_str(&text).unwrap(), stderr)
}

#[test]
fn an_attacker_inside_sends_the_project_nowhere_but_to_the_allowed_host() {
    let root = world_root("netexfil").unwrap();
    if !run_unprivileged("an_attacker_inside_sends_the_project_nowhere_but_to_the_allowed_host") {
        let _ = std::fs::remove_dir_all(&root);
        return;
    }
    assert!(!is_root(), "the attacker must be an unprivileged uid");
    let project = root.join("home/project");
    std::fs::create_dir_all(&project).unwrap();
    let decoy = format!("DECOYnetexfil{}x7f3a", std::process::id());
    std::fs::write(project.join("decoy.txt"), format!("{decoy}\n")).unwrap();

    let allowed = HttpTarget::start("not-a-secret");
    let tcp = Counter::tcp("127.0.0.1:0");
    let tcp2 = Counter::tcp_beside("127.0.0.2", &tcp);
    let tcp6 = Counter::tcp("[::1]:0");
    let udp = Counter::udp("127.0.0.1:0");
    let udp6 = Counter::udp("[::1]:0");
    let resolver = Counter::udp("127.0.0.1:0");
    let listeners = [
        ("tcp 127.0.0.1", &tcp),
        ("tcp 127.0.0.2", &tcp2),
        ("tcp ::1", &tcp6),
        ("udp 127.0.0.1", &udp),
        ("udp ::1", &udp6),
        ("a resolver", &resolver),
    ];
    let config = json!({
        "tcp": tcp.port, "tcp6": tcp6.port, "udp": udp.port, "udp6": udp6.port,
        "resolver": resolver.port, "allowed": allowed.port,
    });
    let allow = vec![
        "--allow-host".to_owned(),
        format!("127.0.0.1:{}", allowed.port),
    ];

    let (report, stderr) = attack(&root, &config, &allow);
    std::thread::sleep(Duration::from_millis(500));
    for (name, l) in &listeners {
        assert_eq!(
            l.arrivals(),
            0,
            "{name} received something from inside: {report}"
        );
    }
    // The allowed host got the tunnel's request and the plain one, and never the decoy.
    let paths: Vec<String> = allowed
        .requests()
        .iter()
        .map(|r| r["path"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(paths, ["/host-mismatch", "/through-the-proxy"], "{report}");
    for r in allowed.requests() {
        use base64::Engine;
        let body = base64::engine::general_purpose::STANDARD
            .decode(r["body_b64"].as_str().unwrap_or(""))
            .unwrap();
        let seen = format!("{r}{}", String::from_utf8_lossy(&body));
        assert!(!seen.contains(&decoy), "{seen}");
    }
    // The proxy answered the refusals itself, saying why; the allowed ways worked.
    for label in [
        "connect_not_allowed",
        "connect_not_allowed_v6",
        "plain_not_allowed",
    ] {
        assert_eq!(report[label], "HTTP/1.1 403 Forbidden", "{label}: {report}");
    }
    assert_eq!(
        report["tunnel_allowed"], "HTTP/1.1 200 Connection established",
        "{report}"
    );
    assert_eq!(report["allowed_status"], 200, "{report}");
    assert!(stderr.contains("through the vault's proxy"), "{stderr}");

    // The control: the same program with the person's network reaches the same listeners.
    let (open, stderr) = attack(&root, &config, &["--network".to_owned(), "open".to_owned()]);
    std::thread::sleep(Duration::from_millis(500));
    assert!(stderr.contains("OPEN"), "{stderr}");
    for (name, l) in &listeners {
        assert!(
            l.holds(decoy.as_bytes()),
            "{name}: the control did not reach it, so its silence above proves nothing: {open}"
        );
    }
    let _ = std::fs::remove_dir_all(&root);
}

/// The program inside for the card tests: for each `label=host:port` argument, a CONNECT
/// through the proxy (from `HTTPS_PROXY`), all at once (one after another after `--in-turn`);
/// on `200` it sends `PAYLOAD-label` and closes. Prints `{label: {"status": first line, "body":
/// what followed}}` as JSON.
const ASKS_INSIDE: &str = r#"
import json, os, socket, sys, threading
proxy = os.environ["HTTPS_PROXY"].split("//")[1].rstrip("/")
phost, pport = proxy.rsplit(":", 1)
out = {}
def one(label, target):
    s = socket.create_connection((phost, int(pport)))
    s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target, target)).encode())
    got = b""
    while b"\r\n\r\n" not in got:
        chunk = s.recv(4096)
        if not chunk:
            break
        got += chunk
    status = got.split(b"\r\n", 1)[0].decode()
    if status.split(" ")[1:2] == ["200"]:
        s.sendall(("PAYLOAD-" + label).encode())
        s.shutdown(socket.SHUT_WR)
        s.recv(100)
        body = ""
    else:
        rest = got.split(b"\r\n\r\n", 1)[1]
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            rest += chunk
        body = rest.decode(errors="replace")
    out[label] = {"status": status, "body": body}
if sys.argv[1] == "--in-turn":
    for a in sys.argv[2:]:
        one(*a.split("=", 1))
else:
    ts = [threading.Thread(target=one, args=a.split("=", 1)) for a in sys.argv[1:]]
    for t in ts: t.start()
    for t in ts: t.join()
print(json.dumps(out))
"#;

/// Starts `ASKS_INSIDE` under `vault run` in `root`'s project (`flags` before the asks, e.g.
/// `--in-turn`), its report on stdout.
fn ask_inside(v: &TestVault, root: &std::path::Path, flags: &[&str], asks: &[String]) -> Child {
    let (home, project) = (root.join("home"), root.join("home/project"));
    std::fs::create_dir_all(&project).unwrap();
    let python = system_python();
    let mut args = vec!["run", "--", python.to_str().unwrap(), "-c", ASKS_INSIDE];
    args.extend(flags);
    args.extend(asks.iter().map(String::as_str));
    let mut c = v.command(&args);
    c.current_dir(&project)
        .env("HOME", &home)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c.spawn().unwrap()
}

/// Waits for `vault run` of `ask_inside`, which must succeed: the report and its stderr.
fn finished(run: Child) -> (Value, String) {
    let out = run.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "vault run failed: {stderr}");
    let report =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("no report ({e}): {stderr}"));
    (report, stderr)
}

/// A host the allow list does not name waits for the person (issue 47, item 2): a program
/// inside, run by an unprivileged user, asks for two hosts on the person's loopback at once.
/// While the cards wait, nothing has arrived at either (counted at the listeners, from
/// outside). The person approves one and denies the other: the approved host gets the payload,
/// once; the denied one gets nothing, and its client gets the proxy's 403 with the reason. The
/// journal records both `network` actions, the approved one dispatched and completed with the
/// bytes it carried, and verifies.
#[test]
fn a_host_not_allowed_waits_for_the_card_and_opens_only_once_approved() {
    let root = world_root("netcard").unwrap();
    if !run_unprivileged("a_host_not_allowed_waits_for_the_card_and_opens_only_once_approved") {
        let _ = std::fs::remove_dir_all(&root);
        return;
    }
    let mut v = TestVault::init("netcard");
    let yes = Counter::tcp("127.0.0.1:0");
    let no = Counter::tcp_beside("127.0.0.2", &yes);
    let asks = [
        format!("yes=127.0.0.1:{}", yes.port),
        format!("no=127.0.0.2:{}", no.port),
    ];
    let run = ask_inside(&v, &root, &[], &asks);

    let pending = v.wait_pending(2);
    let id_of = |host: &str| {
        pending
            .iter()
            .find(|p| p["summary"].as_str().unwrap_or("").contains(host))
            .unwrap_or_else(|| panic!("no card for {host}: {pending:?}"))["action_id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let (yes_id, no_id) = (id_of("127.0.0.1:"), id_of("127.0.0.2:"));
    assert_eq!(
        pending[0]["tool"], "network",
        "a host waits as a network action: {pending:?}"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        (yes.arrivals(), no.arrivals()),
        (0, 0),
        "a connection opened before the person decided"
    );
    v.run_pp(&["approve", "--id", &yes_id, "--approve"], None)
        .ok();
    v.run_pp(
        &[
            "approve",
            "--id",
            &no_id,
            "--deny",
            "--reason",
            "not this one",
        ],
        None,
    )
    .ok();
    let (report, _) = finished(run);
    assert_eq!(
        report["yes"]["status"], "HTTP/1.1 200 Connection established",
        "{report}"
    );
    assert_eq!(report["no"]["status"], "HTTP/1.1 403 Forbidden", "{report}");
    let why = report["no"]["body"].as_str().unwrap_or("");
    assert!(
        why.contains("denied") && why.contains("not this one"),
        "{report}"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(yes.arrivals(), 1, "the approved host was reached once");
    assert!(yes.holds(b"PAYLOAD-yes"));
    assert_eq!(no.arrivals(), 0, "the denied host was reached");

    let kinds = support::journal::kinds(&v);
    let count = |k: &str| kinds.iter().filter(|x| *x == k).count();
    assert_eq!(
        (
            count("action.pending"),
            count("action.approved"),
            count("action.denied")
        ),
        (2, 1, 1),
        "{kinds:?}"
    );
    assert_eq!(
        (count("action.dispatched"), count("action.completed")),
        (1, 1),
        "{kinds:?}"
    );
    let log = v.run(&["log", "--json"], None).ok().stdout;
    assert!(
        log.contains(&format!("CONNECT 127.0.0.1:{}", yes.port)),
        "{log}"
    );
    v.run(&["verify"], None).ok();
    let _ = std::fs::remove_dir_all(&root);
}

/// `[network] allow` counts only as the approver signed it (issue 47, item 2): the person
/// signs one host with `vault config --sign`; then a second process of the same uid, outside,
/// adds its own host to `config.toml`. Under `vault run` the signed host passes at once, with
/// no card; the planted one waits on a card and, denied, is never reached (counted at the
/// listeners, from outside). `vault run` says which host is not signed, and the journal's
/// `network.allow` row verifies.
#[test]
fn a_host_planted_in_config_toml_without_the_signature_waits_for_the_card() {
    let root = world_root("netallow").unwrap();
    if !run_unprivileged("a_host_planted_in_config_toml_without_the_signature_waits_for_the_card") {
        let _ = std::fs::remove_dir_all(&root);
        return;
    }
    let mut v = TestVault::init("netallow");
    let signed = Counter::tcp("127.0.0.1:0");
    let planted = Counter::tcp_beside("127.0.0.2", &signed);
    let config = v.vault_dir().join("config.toml");
    let host = format!("127.0.0.1:{}", signed.port);
    std::fs::write(&config, format!("[network]\nallow = [\"{host}\"]\n")).unwrap();
    let out = v.run_pp(&["config", "--sign"], None).ok().stdout;
    assert!(out.contains(&host), "{out}");
    // The attacker, a second process: adds its host to the file, unsigned.
    let plant = format!(
        "import sys; p = sys.argv[1]; t = open(p).read(); open(p, 'w').write(t.replace('\"]', '\", \"127.0.0.2:{}\"]'))",
        planted.port
    );
    let planted_by = Command::new(system_python())
        .args(["-c", &plant])
        .arg(&config)
        .status()
        .unwrap();
    assert!(planted_by.success());
    assert!(std::fs::read_to_string(&config)
        .unwrap()
        .contains("127.0.0.2:"));

    let asks = [
        format!("signed={host}"),
        format!("planted=127.0.0.2:{}", planted.port),
    ];
    let run = ask_inside(&v, &root, &[], &asks);
    let pending = v.wait_pending(1);
    assert_eq!(pending.len(), 1, "{pending:?}");
    let summary = pending[0]["summary"].as_str().unwrap_or("");
    assert_eq!(summary, format!("CONNECT 127.0.0.2:{}", planted.port));
    wait_until(
        Duration::from_secs(20),
        "the signed host was not reached",
        || signed.arrivals() == 1,
    );
    assert_eq!(planted.arrivals(), 0, "the planted host was reached");
    let id = pending[0]["action_id"].as_str().unwrap();
    v.run_pp(&["approve", "--id", id, "--deny"], None).ok();
    let (report, stderr) = finished(run);
    assert!(
        stderr.contains("which you have not signed") && stderr.contains("127.0.0.2:"),
        "{stderr}"
    );
    assert_eq!(
        report["signed"]["status"], "HTTP/1.1 200 Connection established",
        "{report}"
    );
    assert_eq!(
        report["planted"]["status"], "HTTP/1.1 403 Forbidden",
        "{report}"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(signed.holds(b"PAYLOAD-signed"));
    assert_eq!(planted.arrivals(), 0, "the planted host was reached");
    let kinds = support::journal::kinds(&v);
    assert_eq!(
        kinds.iter().filter(|k| *k == "network.allow").count(),
        1,
        "{kinds:?}"
    );
    v.run(&["verify"], None).ok();
    let _ = std::fs::remove_dir_all(&root);
}

/// The card in a real tmux pane (issue 47, item 2): the person presses `s` and types the PIN,
/// and the same host passes for the rest of the session, and nothing else does. A program
/// inside, run by the unprivileged user, connects to host A, then to A twice more, then to B,
/// one after another. Counted at the listeners: A got its three payloads, B none; the journal
/// shows one grant, A's first dispatch on the decision and the next two on the grant, B denied,
/// and it verifies. `vault sessions` lists the proxy's session, contained.
#[test]
fn on_the_card_s_with_the_pin_lets_that_host_through_for_the_session_and_nothing_else() {
    let root = world_root("netgrant").unwrap();
    if !run_unprivileged(
        "on_the_card_s_with_the_pin_lets_that_host_through_for_the_session_and_nothing_else",
    ) {
        let _ = std::fs::remove_dir_all(&root);
        return;
    }
    let mut v = TestVault::init("netgrant");
    let a = Counter::tcp("127.0.0.1:0");
    let b = Counter::tcp_beside("127.0.0.2", &a);
    let tmux = support::tmux::Tmux::start(
        "netgrant",
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

    let (ha, hb) = (
        format!("127.0.0.1:{}", a.port),
        format!("127.0.0.2:{}", b.port),
    );
    let asks = [
        format!("a1={ha}"),
        format!("a2={ha}"),
        format!("a3={ha}"),
        format!("b={hb}"),
    ];
    let run = ask_inside(&v, &root, &["--in-turn"], &asks);

    let card = tmux.wait_for(&format!("CONNECT {ha}"), Duration::from_secs(30));
    assert!(
        card.contains(&format!("connections to exactly {ha}")),
        "the card does not say what [s] covers: {card}"
    );
    assert_eq!(a.arrivals(), 0, "A was reached before the person decided");
    // A key pressed as a card appears is ignored (the card asks to read it first).
    std::thread::sleep(Duration::from_millis(800));
    tmux.press("s");
    tmux.wait_for("PIN to approve", Duration::from_secs(10));
    tmux.type_text(PIN);
    tmux.press("Enter");
    tmux.wait_for(&format!("CONNECT {hb}"), Duration::from_secs(30));
    assert_eq!(a.arrivals(), 3, "A's three connections, one card");
    assert_eq!(b.arrivals(), 0, "B was reached before the person decided");
    std::thread::sleep(Duration::from_millis(800));
    tmux.press("d");
    tmux.wait_for("Reason for the agent", Duration::from_secs(10));
    tmux.press("Enter");

    let (report, _) = finished(run);
    for label in ["a1", "a2", "a3"] {
        assert_eq!(
            report[label]["status"], "HTTP/1.1 200 Connection established",
            "{label}: {report}"
        );
    }
    assert_eq!(report["b"]["status"], "HTTP/1.1 403 Forbidden", "{report}");
    std::thread::sleep(Duration::from_millis(300));
    for label in ["a1", "a2", "a3"] {
        assert!(a.holds(format!("PAYLOAD-{label}").as_bytes()), "{label}");
    }
    assert_eq!(b.arrivals(), 0, "the denied host was reached");

    let vault = support::journal::open(&v);
    let bases: Vec<String> = vault
        .store
        .conn()
        .prepare(
            "SELECT json_extract(body, '$.basis') FROM audit WHERE kind = 'action.dispatched' ORDER BY seq",
        )
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    drop(vault);
    assert_eq!(bases.len(), 3, "{bases:?}");
    assert!(bases[0].contains("decision"), "{bases:?}");
    assert!(
        bases[1].contains("grant") && bases[2].contains("grant"),
        "{bases:?}"
    );
    let kinds = support::journal::kinds(&v);
    let count = |k: &str| kinds.iter().filter(|x| *x == k).count();
    assert_eq!(
        (count("grant.add"), count("action.denied")),
        (1, 1),
        "{kinds:?}"
    );
    let sessions = v.run(&["sessions", "--json"], None).ok().stdout;
    assert!(sessions.contains(" (network)"), "{sessions}");
    v.run_pp(&["verify"], None).ok();
    let _ = std::fs::remove_dir_all(&root);
}
