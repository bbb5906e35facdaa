//! The agent's world (SECURITY.md "Containment"): `vault run -- CLIENT` starts the client where it
//! cannot reach the person's approval, desktop or other secrets. One test is the attacker: a
//! prompt-injected client (`support/contained_attacker.py`), run by `vault run` as the same
//! non-root uid (CI: `vaulttest`) with the environment of a client started in a tmux pane, tries
//! the person's tmux server (where `vault approve` runs), every socket of their desktop and
//! agents, signals, `/proc` and ptrace on their processes, files that run later, the secrets
//! outside the vault, the person's other terminals and a process that outlives the run. Every
//! attempt is counted from outside: 0 work. In the same run its normal work works, and a GET the
//! person approves outside reaches the target with the secret, marked contained.
mod support;

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use support::target::HttpTarget;
use support::uid::{is_root, run_unprivileged};
use support::world::*;
use support::*;

const SECRET: &str = "DECOY_contained_tok_5e0b31c7";
const DECOY: &str = "DECOY_outside_secret_91c4";

#[test]
fn the_contained_client_reaches_nothing_of_the_person_and_still_does_its_work() {
    let root = world_root("contain").unwrap();
    if !run_unprivileged(
        "the_contained_client_reaches_nothing_of_the_person_and_still_does_its_work",
    ) {
        let _ = std::fs::remove_dir_all(&root);
        return;
    }
    assert!(!is_root(), "the attacker must be an unprivileged uid");
    let uid = rustix::process::getuid().as_raw();
    let target = HttpTarget::start(SECRET);
    let model = HttpTarget::start("not-a-secret");
    let home = root.join("home");
    let p = Person {
        root: root.clone(),
        home: home.clone(),
        run: root.join("run"),
        project: home.join("project"),
        vault_dir: home.join(".local/share/agent-vault"),
        bin: home.join("bin/vault"),
    };
    use std::os::unix::fs::PermissionsExt;
    for d in [&p.run, &p.project, &home.join("bin")] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::set_permissions(&p.run, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::copy(bin(), &p.bin).unwrap();
    // The person's vault, unlocked by their own copy of `vault`, with a credential for the target.
    p.ok(
        &["init", "--passphrase-stdin", "--pin-stdin"],
        Some(&format!("{PASSPHRASE}\n{PIN}\n")),
    );
    let pp = root.join("passphrase");
    std::fs::write(&pp, format!("{PASSPHRASE}\n")).unwrap();
    let mut add = p.cmd(&[
        "add",
        "http",
        "api",
        "--host",
        &target.base(),
        "--bearer",
        "--secret-stdin",
    ]);
    add.env("VAULT_PASSPHRASE_FILE", &pp);
    let added = run_input(&mut add, &format!("{SECRET}\n"));
    assert!(added.status.success(), "vault add: {added:?}");
    // Secrets outside the vault, start-up files, and a git project.
    let decoys = [
        ".ssh/id_ed25519",
        ".aws/credentials",
        ".netrc",
        ".config/gh/hosts.yml",
        ".gnupg/private-keys-v1.d/key",
    ];
    for d in decoys {
        let f = home.join(d);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(&f, format!("{DECOY} {d}\n")).unwrap();
    }
    std::fs::write(home.join(".bashrc"), "# the person's own\n").unwrap();
    std::fs::write(p.project.join("README"), "project\n").unwrap();
    git(&home, &p.project, &["init", "-q"]);
    git(&home, &p.project, &["add", "README"]);
    git(&home, &p.project, &["commit", "-q", "-m", "start"]);

    // The person's desktop, terminal and agents, each a listener that counts.
    let x11_dir = Path::new("/tmp/.X11-unix");
    if !x11_dir.exists() {
        let _ = std::fs::create_dir(x11_dir);
        let _ = std::fs::set_permissions(x11_dir, std::fs::Permissions::from_mode(0o1777));
    }
    let display = 90 + (std::process::id() % 9);
    let ssh_dir = PathBuf::from(format!("/tmp/ssh-avtest{}", std::process::id()));
    let listeners = vec![
        listen(&p.run.join("bus")),
        listen(&p.run.join("systemd/private")),
        listen(&p.run.join("wayland-0")),
        listen(&p.run.join("gnupg/S.gpg-agent")),
        listen(&home.join(".gnupg/S.gpg-agent")),
        listen(&x11_dir.join(format!("X{display}"))),
        listen(&ssh_dir.join("agent.1")),
        listen_abstract(&format!("/tmp/.X11-unix/X{display}")),
        listen_abstract(&format!("avtest-dbus-{}", std::process::id())),
    ];

    // The person's `vault approve` in a pane of a tmux server at its default socket.
    support::tmux::require();
    let tmux = |args: &[&str]| {
        Command::new("tmux")
            .env("SHELL", "/bin/sh") // see support::tmux::Tmux::command
            .env_remove("TMUX")
            .env_remove("TMUX_TMPDIR")
            .args(args)
            .output()
            .unwrap()
    };
    let tmux_socket = PathBuf::from(format!("/tmp/tmux-{uid}/default"));
    tmux(&["kill-server"]);
    let started = tmux(&[
        "-f",
        "/dev/null",
        "new-session",
        "-d",
        "-s",
        "person",
        "-x",
        "120",
        "-y",
        "40",
        "-e",
        &format!("HOME={}", home.display()),
        "-e",
        &format!("XDG_RUNTIME_DIR={}", p.run.display()),
        "-e",
        &format!("VAULT_DIR={}", p.vault_dir.display()),
        "-e",
        "PS1=$ ",
        "sh",
    ]);
    assert!(started.status.success(), "{started:?}");
    let screen = || {
        String::from_utf8_lossy(&tmux(&["capture-pane", "-p", "-t", "person"]).stdout).into_owned()
    };
    let wait_screen = |text: &str| {
        let t0 = Instant::now();
        while !screen().contains(text) {
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "the pane never showed {text:?}:\n{}",
                screen()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    tmux(&[
        "send-keys",
        "-t",
        "person",
        "-l",
        &format!("{} approve", p.bin.display()),
    ]);
    tmux(&["send-keys", "-t", "person", "Enter"]);
    wait_screen("Vault passphrase");
    tmux(&["send-keys", "-t", "person", "-l", PASSPHRASE]);
    tmux(&["send-keys", "-t", "person", "Enter"]);
    wait_screen("No action waits");
    let server_pid: u32 = String::from_utf8_lossy(&tmux(&["display", "-p", "#{pid}"]).stdout)
        .trim()
        .parse()
        .unwrap();
    let shell_pid: u32 =
        String::from_utf8_lossy(&tmux(&["display", "-p", "-t", "person", "#{pane_pid}"]).stdout)
            .trim()
            .parse()
            .unwrap();
    let approver_pid = *children(shell_pid)
        .first()
        .expect("vault approve runs in the pane");
    let agent_pid = agent_pid_in(&p.ok(&["doctor", "--json"], None)).expect("the agent runs");
    let id = std::fs::read_to_string(p.vault_dir.join("vault.id")).unwrap();
    let agent_socket = p.run.join(format!("agent-vault/{}.sock", id.trim()));

    // What must not change.
    let watched: Vec<PathBuf> = [
        home.join(".bashrc"),
        home.join(".zshrc"),
        home.join(".profile"),
        home.join(".config/autostart/agent.desktop"),
        home.join(".config/systemd/user/agent.service"),
        home.join(".local/bin/vault"),
        p.bin.clone(),
        home.join("bin/planted"),
        p.project.join(".git/hooks/pre-commit"),
        p.project.join(".git/config"),
        p.vault_dir.join("planted"),
        p.vault_dir.join("config.toml"),
    ]
    .to_vec();
    let before: Vec<Option<String>> = watched.iter().map(|f| digest(f)).collect();
    // Every file of the home but the project and the vault: path, bytes, mode, times.
    let home_now = || -> Vec<(PathBuf, Option<String>, u32, i64, i64)> {
        use std::os::unix::fs::MetadataExt;
        let mut all: Vec<_> = files_under(&home)
            .into_iter()
            .filter(|f| !f.starts_with(&p.project) && !f.starts_with(&p.vault_dir))
            .map(|f| {
                let m = std::fs::symlink_metadata(&f).unwrap();
                (f.clone(), digest(&f), m.mode(), m.mtime(), m.ctime())
            })
            .collect();
        all.sort();
        all
    };
    let home_before = home_now();
    assert!(home_before.len() >= 8, "{home_before:?}");
    let marker = format!("avtest-marker-{}", std::process::id());
    let report_path = p.project.join("report.json");
    let config = json!({
        "vault_bin": p.bin, "project": p.project, "report": report_path,
        "target_url": format!("{}/echo", target.base()),
        "model_url": format!("{}/v1/messages", model.base()),
        "sockets": listeners.iter().filter(|l| !l.name.starts_with('@')).map(|l| l.name.clone())
            .chain([tmux_socket.display().to_string()]).collect::<Vec<_>>(),
        "abstract": listeners.iter().filter_map(|l| l.name.strip_prefix('@').map(str::to_owned)).collect::<Vec<_>>(),
        "tmux_socket": tmux_socket,
        "pids": {"approver": approver_pid, "tmux_server": server_pid, "agent": agent_pid},
        "writes": watched,
        "decoys": decoys.iter().map(|d| home.join(d)).collect::<Vec<_>>(),
        "marker": marker,
    });
    let config_path = p.project.join("attack.json");
    std::fs::write(&config_path, config.to_string()).unwrap();

    // The client, started by `vault run` with the environment of a client in a tmux pane.
    // The attacker's script is shown read-only (nothing outside the project is, unless named).
    let script = support_file("contained_attacker.py");
    let mut run = p.cmd(&[
        "run",
        "--allow-host",
        &format!("127.0.0.1:{}", model.port),
        "--allow-read",
        &script.display().to_string(),
        "--",
        &system_python().display().to_string(),
    ]);
    run.arg(&script)
        .arg(&config_path)
        .current_dir(&p.project)
        .env("TMUX", format!("{},{server_pid},0", tmux_socket.display()))
        .env("TMUX_PANE", "%0")
        .env("DISPLAY", format!(":{display}"))
        .env("WAYLAND_DISPLAY", "wayland-0")
        .env(
            "DBUS_SESSION_BUS_ADDRESS",
            format!("unix:path={}", p.run.join("bus").display()),
        )
        .env("SSH_AUTH_SOCK", ssh_dir.join("agent.1"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = run.spawn().unwrap();
    // The person approves the contained GET outside, with the passphrase (scripted).
    let t0 = Instant::now();
    let pending = loop {
        let listed: Vec<Value> =
            serde_json::from_str(p.ok(&["pending", "--json"], None).trim()).unwrap();
        if let Some(a) = listed
            .into_iter()
            .find(|a| a["summary"].as_str().is_some_and(|s| s.contains("/echo")))
        {
            break a;
        }
        if t0.elapsed() > Duration::from_secs(60) || child.try_wait().unwrap().is_some() {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "the contained GET never became pending: {}\n{}",
                String::from_utf8_lossy(&out.stderr),
                std::fs::read_to_string(&report_path).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(pending["contained"], true, "{pending}");
    p.ok(
        &[
            "approve",
            "--id",
            pending["action_id"].as_str().unwrap(),
            "--approve",
            "--passphrase-stdin",
        ],
        Some(&format!("{PASSPHRASE}\n")),
    );
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "vault run: {stderr}");
    // One line on stderr says what is contained.
    let said: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("vault run:"))
        .collect();
    assert_eq!(said.len(), 1, "{stderr}");
    assert!(
        said[0].contains("Landlock ABI") && said[0].contains("namespaces"),
        "{stderr}"
    );
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(&report_path).unwrap()).unwrap();

    // 0 of the ways out worked, counted from outside.
    for l in &listeners {
        assert_eq!(
            l.hits.load(Ordering::SeqCst),
            0,
            "{} was reached: {report}",
            l.name
        );
    }
    // The tmux server still answers (an empty answer from a dead one would pass the checks).
    assert!(alive(server_pid), "the tmux server was stopped: {report}");
    let keys = String::from_utf8_lossy(&tmux(&["list-keys"]).stdout).into_owned();
    assert!(
        keys.contains("send-prefix"),
        "the tmux server lists no key bindings:\n{keys}"
    );
    assert!(
        !keys.contains("/tmp/logged"),
        "a key binding was planted:\n{keys}"
    );
    let shown = screen();
    assert!(
        shown.contains("No action waits") || shown.contains("[a]pprove once"),
        "the person's pane no longer shows vault approve:\n{shown}"
    );
    assert!(
        !shown.contains("PIN to approve") && !shown.contains("FAKE CARD"),
        "the pane was typed or written into:\n{shown}"
    );
    // /proc of the person's processes: nothing read.
    for (name, got) in report["proc"].as_object().unwrap() {
        for (f, r) in got.as_object().unwrap() {
            let r = r.as_str().unwrap_or_default();
            assert!(
                !r.starts_with("read "),
                "/proc/{name}/{f} was read from inside: {r}"
            );
        }
    }
    assert_eq!(report["proc"].as_object().unwrap().len(), 3, "{report}");
    for (name, pid) in [
        ("approver", approver_pid),
        ("tmux server", server_pid),
        ("agent", agent_pid),
    ] {
        assert!(alive(pid), "the {name} (pid {pid}) was stopped: {report}");
    }
    for (f, was) in watched.iter().zip(&before) {
        assert_eq!(
            &digest(f),
            was,
            "{} changed: {}",
            f.display(),
            report["writes"]
        );
    }
    // Nothing else of the home changed either: every file outside the project and the vault
    // (whose journal grows), by path, bytes, mode and times, as seen before the run.
    assert_eq!(
        home_now(),
        home_before,
        "a file of the home changed: {}",
        report["writes"]
    );
    // No decoy anywhere the client could leave it: every file under the project (at any depth),
    // what vault run printed, what the model stand-in and the target received.
    let mut everything = files_under(&p.project)
        .into_iter()
        .map(|f| String::from_utf8_lossy(&std::fs::read(f).unwrap_or_default()).into_owned())
        .collect::<String>();
    everything.push_str(&String::from_utf8_lossy(&out.stdout));
    everything.push_str(&stderr);
    everything.push_str(&serde_json::to_string(&model.requests()).unwrap());
    everything.push_str(&serde_json::to_string(&target.requests()).unwrap());
    assert_no_leak("what the client left", everything.as_bytes(), DECOY);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        with_marker(&marker),
        Vec::<u32>::new(),
        "a process outlived the run"
    );
    assert_eq!(
        report["detached"], "running",
        "the attempt itself must have run: {report}"
    );
    for (label, r) in report["tmux"].as_object().unwrap() {
        assert_ne!(r["rc"], 0, "tmux {label} worked: {r}");
    }
    for what in ["signals", "ptrace"] {
        for (name, r) in report[what].as_object().unwrap() {
            assert!(r != "sent" && r != "attached", "{what} on {name}: {r}");
        }
    }
    assert!(report.get("dev_pts_written").is_none(), "{report}");
    // The environment of a tmux pane did not come in.
    let env = report["env"].as_object().unwrap();
    for k in [
        "TMUX",
        "TMUX_PANE",
        "DISPLAY",
        "WAYLAND_DISPLAY",
        "DBUS_SESSION_BUS_ADDRESS",
        "SSH_AUTH_SOCK",
    ] {
        assert!(!env.contains_key(k), "{k} came in");
    }

    // The agent's normal work worked.
    let work = &report["work"];
    assert_eq!(work["file"], true, "{work}");
    assert_eq!(work["git"]["rc"], 0, "{work}");
    assert_eq!(work["model_status"], 200, "{work}");
    assert_eq!(model.requests().len(), 1);
    assert_eq!(work["mcp_result"]["state"], "completed", "{work}");
    let sent: Vec<Value> = target.requests();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(
        sent[0]["headers"]["authorization"],
        format!("Bearer {SECRET}")
    );
    assert_eq!(
        std::fs::read_to_string(p.project.join("notes.txt")).unwrap(),
        "work done inside\n"
    );
    let log = Command::new("git")
        .env("HOME", &home)
        .arg("-C")
        .arg(&p.project)
        .args(["log", "--oneline"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&log.stdout).contains("work done inside"));
    let logged = p.ok(&["log", "--json"], None);
    let entry: Value = logged
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["action_id"] == pending["action_id"])
        .unwrap();
    assert_eq!(entry["contained"], true, "{entry}");
    assert!(agent_socket.exists());

    // The flag cannot be faked: `vault mcp` started outside with the contained client's entire
    // environment is not contained, and a program other than `vault` that says "contained" on
    // the agent's socket is refused.
    let mut mcp_cmd = Command::new(&p.bin);
    mcp_cmd.arg("mcp").env_clear().current_dir(&p.project);
    for (k, val) in env {
        mcp_cmd.env(k, val.as_str().unwrap());
    }
    let mut mcp = support::mcp::McpProc::spawn(mcp_cmd);
    mcp.initialize();
    mcp.send(&json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "http_request",
        "arguments": {"credential": "api", "method": "GET", "url": format!("{}/outside", target.base()), "wait_s": 1}}}));
    let (_, _) = mcp.until_id(&json!(5), Duration::from_secs(30));
    let listed: Vec<Value> =
        serde_json::from_str(p.ok(&["pending", "--json"], None).trim()).unwrap();
    let outside = listed
        .iter()
        .find(|a| {
            a["summary"]
                .as_str()
                .is_some_and(|s| s.contains("/outside"))
        })
        .expect("the uncontained GET waits");
    assert_eq!(outside["contained"], false, "{outside}");
    drop(mcp);
    let contained_sessions = |p: &Person| -> usize {
        let listed: Vec<Value> =
            serde_json::from_str(p.ok(&["sessions", "--json"], None).trim()).unwrap();
        listed.iter().filter(|s| s["contained"] == true).count()
    };
    let contained_before = contained_sessions(&p);
    let forged = Command::new(system_python())
        .arg("-c")
        .arg(
            "import socket,sys\n\
             s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])\n\
             s.sendall(b'{\"id\":1,\"req\":{\"op\":\"contained\",\"pid\":1}}\\n')\n\
             s.sendall(b'{\"id\":2,\"req\":{\"op\":\"hello\",\"v\":6,\"role\":\"mcp\"}}\\n')\n\
             print(s.recv(4096).decode())",
        )
        .arg(&agent_socket)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&forged.stdout);
    assert!(said.contains("only by `vault run`"), "{said}{forged:?}");
    // Judged by its effect too: no session was marked contained by it.
    assert_eq!(
        contained_sessions(&p),
        contained_before,
        "a forged frame opened a contained session"
    );
    tmux(&["kill-server"]);
    p.ok(&["lock"], None);
    let _ = std::fs::remove_dir_all(&ssh_dir);
    let _ = std::fs::remove_dir_all(&p.root);
}

/// What pushes keys into the terminal from inside: each byte of `PUSHEDKEYS` with `TIOCSTI`.
const PUSH: &str = "import fcntl,termios,errno\n\
try:\n    [fcntl.ioctl(0, termios.TIOCSTI, bytes([c])) for c in b'PUSHED' + b'KEYS']\n    print('push: ok')\n\
except OSError as e:\n    print('push: ' + errno.errorcode[e.errno])\n";

#[test]
fn keys_pushed_into_the_terminal_from_inside_reach_nothing() {
    // The pusher is a second process of the same non-root uid (CI: the test user), not root.
    if !run_unprivileged("keys_pushed_into_the_terminal_from_inside_reach_nothing") {
        return;
    }
    assert!(!is_root());
    let legacy = std::fs::read_to_string("/proc/sys/dev/tty/legacy_tiocsti")
        .map(|s| s.trim() == "1")
        .unwrap_or(true);
    // The control: outside any sandbox the push works (the terminal echoes the keys as typed)
    // wherever the kernel still allows TIOCSTI.
    let mut direct = Command::new(system_python());
    direct.args(["-c", PUSH]);
    let mut bare = support::pty::PtySession::spawn(direct, None);
    assert!(
        bare.wait_for("push:", Duration::from_secs(20)),
        "{}",
        bare.output()
    );
    bare.finish(Duration::from_secs(10));
    if legacy {
        assert!(
            bare.output().contains("push: ok") && bare.output().contains("PUSHEDKEYS"),
            "{}",
            bare.output()
        );
    }
    let v = TestVault::init("tiocsti");
    let mut c = v.command(&[
        "run",
        "--",
        &system_python().display().to_string(),
        "-c",
        PUSH,
    ]);
    c.current_dir(v.dir.path());
    let mut inside = support::pty::PtySession::spawn(c, None);
    assert!(
        inside.wait_for("push:", Duration::from_secs(30)),
        "{}",
        inside.output()
    );
    assert_eq!(
        inside.finish(Duration::from_secs(10)),
        Some(0),
        "{}",
        inside.output()
    );
    let out = inside.output();
    assert!(out.contains("push: EPERM"), "{out}");
    assert!(
        !out.contains("PUSHEDKEYS"),
        "keys reached the terminal: {out}"
    );
}

#[test]
fn vault_run_refuses_where_user_namespaces_are_unavailable() {
    // A user namespace of the test's own in which no further one may be made
    // (`user.max_user_namespaces` = 0 there), as on a kernel that forbids them.
    let v = TestVault::init("nouserns");
    let marker = v.dir.path().join("ran");
    let script = format!(
        "echo 0 > /proc/sys/user/max_user_namespaces && exec {} run -- touch {}",
        bin(),
        marker.display()
    );
    let mut c = Command::new("unshare");
    c.args(["--user", "--map-root-user", "sh", "-c", &script])
        .env("VAULT_DIR", v.vault_dir())
        .current_dir(v.dir.path());
    let out = run_limited(&mut c, Duration::from_secs(30)).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.and_then(|s| s.code()), Some(1), "{stderr}");
    assert!(
        stderr.contains("does not let an unprivileged user create namespaces")
            && stderr.contains("max_user_namespaces")
            && stderr.contains("starts nothing"),
        "{stderr}"
    );
    assert!(!marker.exists(), "the client ran");
    assert!(out.stdout.is_empty());
    // `vault doctor` says the same there.
    let script = format!(
        "echo 0 > /proc/sys/user/max_user_namespaces && exec {} doctor --json",
        bin()
    );
    let mut c = Command::new("unshare");
    c.args(["--user", "--map-root-user", "sh", "-c", &script])
        .env("VAULT_DIR", v.vault_dir());
    let out = run_limited(&mut c, Duration::from_secs(30)).unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let check = doc["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == "vault run (containment)")
        .cloned()
        .unwrap();
    assert!(
        check["detail"].as_str().unwrap().starts_with("unavailable"),
        "{check}"
    );
}

#[test]
fn killing_vault_run_ends_everything_the_client_started() {
    // The processes that try to outlive the run belong to the unprivileged test user (CI).
    if !run_unprivileged("killing_vault_run_ends_everything_the_client_started") {
        return;
    }
    assert!(!is_root());
    let v = TestVault::init("killrun");
    let marker = format!("avtest-killed-{}", std::process::id());
    let mut c = v.command(&[
        "run",
        "--",
        "sh",
        "-c",
        &format!(
            "setsid sh -c 'sleep 300; true' {marker} & sh -c 'sleep 300; true' {marker} & wait"
        ),
    ]);
    c.current_dir(v.dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut run = c.spawn().unwrap();
    let t0 = Instant::now();
    while with_marker(&marker).len() < 2 {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "the client never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    run.kill().unwrap();
    run.wait().unwrap();
    let t0 = Instant::now();
    while !with_marker(&marker).is_empty() {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "processes outlived a killed vault run: {:?}",
            with_marker(&marker)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Friction gone (issue 45, item 5): a client installed under `/tmp` (a clone of this repository
/// there, with its `.ci/ai-clients`) starts, because its installation is shown wherever it lives,
/// even inside the private `/tmp`; a program it reads beside itself is there too.
#[test]
fn a_client_installed_under_tmp_starts_with_its_installation() {
    let v = TestVault::init("tmpclient");
    let install = std::env::temp_dir().join(format!("av-tmp-client-{}", std::process::id()));
    let bin_dir = install.join("node_modules/.bin");
    let pkg = install.join("node_modules/tool");
    std::fs::create_dir_all(&bin_dir).unwrap();
    std::fs::create_dir_all(&pkg).unwrap();
    std::fs::write(pkg.join("data.txt"), "beside the client\n").unwrap();
    let client = pkg.join("client.sh");
    std::fs::write(
        &client,
        "#!/bin/sh\nprintf 'hello from %s: ' \"$0\"; cat \"$(dirname \"$(readlink -f \"$0\")\")/data.txt\"\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&client, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink("../tool/client.sh", bin_dir.join("client")).unwrap();
    let project = v.dir.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    let mut c = v.command(&["run", "--", bin_dir.join("client").to_str().unwrap()]);
    c.current_dir(&project);
    let out = run_limited(&mut c, Duration::from_secs(30)).unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.and_then(|s| s.code()), Some(0), "{stderr}");
    assert!(stdout.contains("beside the client"), "{stdout}{stderr}");
    let _ = std::fs::remove_dir_all(&install);
}
