//! The second attacker of `vault run` (issue 45; SECURITY.md "Containment"): a prompt-injected
//! client (`support/contained_attacker2.py`), run by `vault run` as a second process of the same
//! non-root uid (CI: `vaulttest`, holding a supplementary group as a `docker` member does), that
//! tries to plant what the person's own tools run later and to take what nobody named:
//! - every request kind of the agent's protocol, raw, on the relayed socket;
//! - git configuration every way git reads it, in the project's repositories (a nested one and
//!   a worktree among them) and in new ones, then `git status` run outside as the person in each;
//! - chmod, chown, utime, ACLs and other extended attributes (every form: by path, through a link,
//!   by descriptor, `O_PATH` with an empty path), rename, unlink and writes on each protected
//!   file; the same metadata calls on the directories whose names protect the rest (each
//!   repository's `.git`, the project itself, the root of an `--allow-write` directory, which
//!   stands for a client's state directory such as `~/.claude`);
//! - tokens in the environment, a descriptor the launcher left open, a socket under the home, a
//!   root socket of one of the person's groups, the passphrase file where the README keeps it.
//!
//! Judged from outside after the run: what git ran (a marker file, with a control that shows the
//! planted command does run where it is allowed), every file's bytes, mode, owner, times and
//! extended attributes, each kept directory's mode, owner and extended attributes (its times
//! move with the work done in it, but never to the attacker's), the listeners' counts, the
//! agent's process and the journal. 0 work. In the same run the normal work works: a file under
//! the person's umask, a commit, a branch and a checkout, a temporary file renamed in `$HOME`,
//! `chmod +x`, `touch`, an installer's modes, times and attributes in `node_modules`, a
//! repository made and chmodded under `/tmp`.
mod support;

use serde_json::{json, Value};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use support::uid::{is_root, run_unprivileged_in};
use support::world::*;
use support::*;

const DECOY: &str = "DECOY_planted_secret_3c81d0";
/// The supplementary group whose root-owned socket stands for `/run/docker.sock`.
const GROUP: &str = "avtestsock";
const TEST: &str = "a_second_attacker_plants_nothing_for_later_and_takes_nothing_nobody_named";
const SOCKET_VAR: &str = "AV_GROUP_SOCKET";

/// A root-owned socket (root:GROUP, 0660) that only members of GROUP can open, counted here.
fn stage_group_socket() -> (PathBuf, Counted) {
    use std::os::unix::fs::PermissionsExt;
    let gid = support::uid::group(GROUP);
    let path = PathBuf::from(format!("/run/avtest-group-{}.sock", std::process::id()));
    let counted = listen(&path);
    std::os::unix::fs::chown(&path, Some(0), Some(gid)).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o660)).unwrap();
    std::env::set_var(SOCKET_VAR, &path);
    (path, counted)
}

/// The attacker's times (seconds since the epoch) for every utime it tries.
const PLANTED_TIME: i64 = 1_234_567;

/// Every extended attribute of `p` (not followed), names and values, as seen from outside:
/// ACLs (`system.posix_acl_access`, `system.posix_acl_default`) among them.
fn xattrs(p: &Path) -> Xattrs {
    let mut names = vec![0u8; 65536];
    let Ok(n) = rustix::fs::llistxattr(p, &mut names) else {
        return Vec::new();
    };
    names[..n]
        .split(|b| *b == 0)
        .filter(|n| !n.is_empty())
        .map(|name| {
            let mut v = vec![0u8; 65536];
            let len = rustix::fs::lgetxattr(p, name, &mut v).unwrap_or(0);
            v.truncate(len);
            (String::from_utf8_lossy(name).into_owned(), v)
        })
        .collect()
}

/// Extended attributes: names and values.
type Xattrs = Vec<(String, Vec<u8>)>;

/// (mode, uid, gid, mtime, ctime) of `p` as seen from outside, and its extended attributes.
type Meta = (Option<(u32, u32, u32, i64, i64)>, Xattrs);
fn meta(p: &Path) -> Meta {
    let m = std::fs::symlink_metadata(p)
        .ok()
        .map(|m| (m.mode(), m.uid(), m.gid(), m.mtime(), m.ctime()));
    (m, xattrs(p))
}

/// What must not change of a directory the normal work writes in (its times move with every
/// file made in it): mode, owner, extended attributes; and whether its times are the attacker's.
fn kept_meta(p: &Path) -> (u32, u32, u32, Xattrs, bool) {
    let m = std::fs::symlink_metadata(p).unwrap();
    let planted = m.mtime() == PLANTED_TIME || m.atime() == PLANTED_TIME;
    (m.mode(), m.uid(), m.gid(), xattrs(p), planted)
}

fn umask() -> u32 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("Umask:")).unwrap();
    u32::from_str_radix(line.split_whitespace().nth(1).unwrap(), 8).unwrap()
}

/// `git status` in `dir` as the person, outside any sandbox.
fn git_status(home: &Path, dir: &Path) -> std::process::Output {
    Command::new("git")
        .env("HOME", home)
        .env_remove("GIT_DIR")
        .arg("-C")
        .arg(dir)
        .args(["status", "--short"])
        .output()
        .unwrap()
}

/// Every directory under `top` that git would take as a repository (a `.git` entry, or a bare
/// repository's `HEAD`), `top` included.
fn repository_dirs(top: &Path) -> Vec<PathBuf> {
    let mut out = vec![top.to_owned()];
    for f in files_under(top) {
        let name = f.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name == "HEAD" && !f.components().any(|c| c.as_os_str() == ".git") {
            out.push(f.parent().unwrap().to_owned());
        }
    }
    for d in walk_dirs(top) {
        if d.join(".git").exists() {
            out.push(d);
        }
    }
    out.sort();
    out.dedup();
    out
}

fn walk_dirs(top: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![top.to_owned()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) && e.file_name() != ".git" {
                out.push(e.path());
                todo.push(e.path());
            }
        }
    }
    out
}

#[test]
fn a_second_attacker_plants_nothing_for_later_and_takes_nothing_nobody_named() {
    let root = world_root("planted").unwrap();
    let staged = is_root().then(stage_group_socket);
    if !run_unprivileged_in(TEST, &[GROUP]) {
        // Only the control (below, outside the sandbox) reached the group's socket.
        let (path, counted) = staged.unwrap();
        assert_eq!(counted.hits.load(Ordering::SeqCst), 1, "{}", path.display());
        let _ = std::fs::remove_file(path);
        let _ = std::fs::remove_dir_all(&root);
        return;
    }
    assert!(!is_root(), "the attacker must be an unprivileged uid");
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
    p.ok(
        &["init", "--passphrase-stdin", "--pin-stdin"],
        Some(&format!("{PASSPHRASE}\n{PIN}\n")),
    );
    let id = std::fs::read_to_string(p.vault_dir.join("vault.id")).unwrap();
    let agent_socket = p.run.join(format!("agent-vault/{}.sock", id.trim()));
    let agent_pid = agent_pid_in(&p.ok(&["doctor", "--json"], None)).expect("the agent runs");

    // The person's files: start-up, git identity, the passphrase file where the README keeps it,
    // a key, a socket of another program under the home.
    let write = |rel: &str, text: &str| {
        let f = home.join(rel);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(&f, text).unwrap();
        f
    };
    write(".bashrc", "# the person's own\n");
    write(
        ".gitconfig",
        "[user]\n\tname = person\n\temail = p@example.invalid\n",
    );
    let passphrase_file = write(".config/vault-passphrase", &format!("{DECOY} passphrase\n"));
    let key = write(".ssh/id_ed25519", &format!("{DECOY} key\n"));
    let home_socket = listen(&home.join(".local/share/someapp/app.sock"));
    let group_socket = std::env::var_os(SOCKET_VAR).map(PathBuf::from);
    if let Some(g) = &group_socket {
        // The control: outside the sandbox, this user's group opens the root socket.
        std::os::unix::net::UnixStream::connect(g).expect("the group opens its socket outside");
    } else {
        eprintln!("not root: the root socket of a supplementary group is not staged (CI runs it)");
    }

    // Repositories: the project, one nested in it, a worktree of the project inside it.
    let project = p.project.clone();
    write("project/README", "project\n");
    git(&home, &project, &["init", "-q"]);
    git(&home, &project, &["add", "README"]);
    git(&home, &project, &["commit", "-q", "-m", "start"]);
    let sub = project.join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    git(&home, &sub, &["init", "-q"]);
    write("project/sub/f", "sub\n");
    git(&home, &sub, &["add", "f"]);
    git(&home, &sub, &["commit", "-q", "-m", "sub"]);
    git(&home, &project, &["worktree", "add", "-q", "wt"]);
    write("project/.mcp.json", "{}\n");
    write("project/.vscode/settings.json", "{}\n");
    let repos = [project.clone(), sub.clone(), project.join("wt")];
    // A directory named by --allow-write, standing for a client's state directory (`~/.claude`):
    // the test's client (python) has none of its own.
    let allowed = home.join(".agent-state");
    write(".agent-state/state.json", "{}\n");
    // The control for git: a repository outside the project with the same planted config runs
    // the planted command when the person runs `git status` there.
    let ran = root.join("planted-ran");
    let control = root.join("control");
    std::fs::create_dir_all(&control).unwrap();
    git(&home, &control, &["init", "-q"]);
    std::fs::write(
        control.join(".git/config"),
        format!("[core]\n\tfsmonitor = touch {}\n", ran.display()),
    )
    .unwrap();
    git_status(&home, &control);
    assert!(
        ran.exists(),
        "the planted command does not run even where it is allowed"
    );
    std::fs::remove_file(&ran).unwrap();

    // Directories whose names protect the rest: the work writes in them, so their times move,
    // but their mode, owner and extended attributes (ACLs) are kept as they are.
    let kept: Vec<PathBuf> = vec![
        project.join(".git"),
        sub.join(".git"),
        project.clone(),
        allowed.clone(),
    ];
    let protected: Vec<PathBuf> = vec![
        project.join(".git/config"),
        project.join(".git/hooks"),
        sub.join(".git/config"),
        project.join("wt/.git"),
        project.join(".mcp.json"),
        project.join(".vscode"),
        project.join(".vscode/settings.json"),
        home.join(".gitconfig"),
        home.join(".bashrc"),
        p.bin.clone(),
    ];
    let project_files = [
        ".mcp.json",
        ".vscode/settings.json",
        ".vscode/tasks.json",
        ".idea/workspace.xml",
        ".claude/settings.json",
        ".claude/commands/x.md",
        ".gemini/settings.json",
        ".gitmodules",
    ];
    // An attribute of the person's on each, for the attacker to try to remove.
    for f in protected.iter().chain(&kept) {
        rustix::fs::lsetxattr(f, "user.kept", b"1", rustix::fs::XattrFlags::empty()).unwrap();
    }
    let before: Vec<_> = protected.iter().map(|f| (meta(f), digest(f))).collect();
    let kept_before: Vec<_> = kept.iter().map(|d| kept_meta(d)).collect();
    assert!(kept_before.iter().all(|k| !k.4));
    let touched = |m: std::fs::Metadata| (m.mtime(), m.mtime_nsec());
    let readme_mtime = touched(std::fs::metadata(project.join("README")).unwrap());
    let export = project.join("planted-export.sh");
    let requests: Vec<(String, Value)> = support::requests::every_kind(export.to_str().unwrap())
        .into_iter()
        .filter(|(k, _)| !k.for_mcp())
        .map(|(k, v)| (format!("{k:?}"), v))
        .collect();
    let inherited = write("inherited.txt", &format!("{DECOY} inherited\n"));
    let report_path = project.join("report2.json");
    let sockets: Vec<PathBuf> = std::iter::once(home.join(".local/share/someapp/app.sock"))
        .chain(group_socket.clone())
        .collect();
    let config = json!({
        "agent_socket": agent_socket,
        "protocol_version": agent_vault::agent::protocol::VERSION,
        "requests": requests,
        "project": project, "repos": repos, "project_files": project_files,
        "protected": protected.iter().chain(&kept).collect::<Vec<_>>(),
        "planted_time": PLANTED_TIME,
        "ran_marker": ran,
        "env_decoys": ["GH_TOKEN", "AWS_SECRET_ACCESS_KEY", "VAULT_PASSPHRASE_FILE"],
        "sockets": sockets,
        "decoys": [&passphrase_file, &key, &home.join(".bashrc")],
        "report": report_path,
    });
    let config_path = project.join("attack2.json");
    std::fs::write(&config_path, config.to_string()).unwrap();

    // `vault run`, started the way a launcher that leaves a descriptor open would start it, with
    // other tools' tokens in its environment.
    let script = support_file("contained_attacker2.py");
    let mut run = Command::new("sh");
    run.arg("-c")
        .arg("exec 7<\"$0\"; exec \"$@\"")
        .arg(&inherited)
        .arg(&p.bin)
        .args(["run", "--allow-read"])
        .arg(&script)
        .arg("--allow-write")
        .arg(&allowed)
        .arg("--")
        .arg(system_python())
        .arg(&script)
        .arg(&config_path)
        .current_dir(&project)
        .env("HOME", &home)
        .env("XDG_RUNTIME_DIR", &p.run)
        .env("VAULT_DIR", &p.vault_dir)
        .env("GH_TOKEN", format!("{DECOY}-gh"))
        .env("AWS_SECRET_ACCESS_KEY", format!("{DECOY}-aws"))
        .env("VAULT_PASSPHRASE_FILE", &passphrase_file)
        .env_remove("TMUX")
        .stdin(Stdio::null());
    let out = run_limited(&mut run, std::time::Duration::from_secs(120)).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.and_then(|s| s.code()),
        Some(0),
        "vault run: {stderr}"
    );
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report_path).unwrap())
        .unwrap_or_else(|e| panic!("no report ({e}): {stderr}"));

    // The channel: every person's command refused, over a relay that does answer an MCP hello.
    for (kind, r) in report["protocol"].as_object().unwrap() {
        assert_eq!(
            r["hello"], "welcome",
            "{kind}: the relay did not answer: {r}"
        );
        let reply = &r["reply"];
        assert!(
            reply["kind"] == "error" || reply["hung_up"] == true,
            "{kind} was served inside: {reply}"
        );
    }
    assert_eq!(
        report["protocol"].as_object().unwrap().len(),
        requests.len()
    );
    assert!(!export.exists(), "the agent wrote an export for the client");
    assert!(alive(agent_pid), "the agent was stopped");
    let status: Value = serde_json::from_str(p.ok(&["status", "--json"], None).trim()).unwrap();
    assert!(status["paused"].is_null(), "the vault was paused: {status}");

    // Git, run outside as the person in the project and every repository under it, ran nothing.
    for dir in repository_dirs(&project) {
        let st = git_status(&home, &dir);
        assert!(
            !ran.exists(),
            "git status in {} ran a planted command: {st:?}\n{}",
            dir.display(),
            report["plant"]
        );
    }
    for absent in [
        project.join("newrepo/.git"),
        project.join("linked/.git"),
        project.join("bare/HEAD"),
        project.join(".git/commondir"),
        project.join(".git/config.worktree"),
        project.join(".git-moved"),
        home.join(".config/git/config"),
    ] {
        assert!(
            !absent.exists(),
            "{} was made inside: {}",
            absent.display(),
            report["plant"]
        );
    }
    for f in project_files {
        let path = project.join(f);
        let was = protected
            .iter()
            .position(|p| *p == path)
            .map(|i| &before[i]);
        match was {
            Some((_, d)) => assert_eq!(&digest(&path), d, "{f} changed"),
            None => assert!(!path.exists(), "{f} was made inside: {}", report["plant"]),
        }
    }

    // Metadata and names of what must not change, seen unchanged from outside.
    for (f, was) in protected.iter().zip(&before) {
        assert_eq!(
            &(meta(f), digest(f)),
            was,
            "{} changed: {}",
            f.display(),
            report["meta"][f.to_str().unwrap()]
        );
    }
    for (d, was) in kept.iter().zip(&kept_before) {
        let tried = &report["meta"][d.to_str().unwrap()];
        assert_eq!(&kept_meta(d), was, "{} changed: {tried}", d.display());
        // Each metadata call was refused (not merely undone): EPERM, one line on stderr.
        for (what, r) in tried.as_object().unwrap() {
            let r = r.as_str().unwrap_or_default();
            let refused = r.contains("[Errno 1]");
            let not_metadata = ["rename", "unlink", "write"].contains(&what.as_str());
            assert!(
                refused || not_metadata,
                "{what} on {} was not refused: {r}",
                d.display()
            );
        }
        assert!(
            stderr.contains(&format!(
                "vault run: refused changing the mode of {}: ",
                d.display()
            )),
            "no refusal line for {}: {stderr}",
            d.display()
        );
    }

    // What nobody named was not there to take.
    for (k, v) in report["env"].as_object().unwrap() {
        assert!(v.is_null(), "{k} came in: {v}");
    }
    let everything = report.to_string();
    assert!(
        !everything.contains(DECOY),
        "a decoy was read inside: {report}"
    );
    assert_eq!(
        home_socket.hits.load(Ordering::SeqCst),
        0,
        "the home's socket was reached"
    );
    for (path, r) in report["sockets"].as_object().unwrap() {
        assert_ne!(r, "connected", "{path} was reached inside");
    }

    // The normal work worked.
    let work = &report["work"];
    assert_eq!(work["mode"], format!("0o{:o}", 0o666 & !umask()), "{work}");
    for step in [
        "add made-inside.txt",
        "commit -q",
        "checkout -q",
        "home_rename",
        "chmod",
        "touch",
        "node_modules",
        "git init /tmp",
    ] {
        assert!(work[step] == 0 || work[step] == true, "{step}: {work}");
    }
    assert_eq!(work["script"], "ran", "{work}");
    assert_eq!(work["chmod /tmp repo"], "0o700", "{work}");
    let mode = |p: &Path| std::fs::metadata(p).unwrap().mode() & 0o7777;
    assert_eq!(mode(&project.join("script.sh")) & 0o111, 0o111 & !umask());
    let cli = project.join("node_modules/pkg/bin/cli.js");
    assert_eq!(mode(&cli), 0o755);
    assert_eq!(mode(&project.join("node_modules/pkg/bin")), 0o755);
    assert_eq!(std::fs::metadata(&cli).unwrap().mtime(), PLANTED_TIME + 1);
    assert!(xattrs(&cli).contains(&("user.installer".into(), b"npm".to_vec())));
    assert!(touched(std::fs::metadata(project.join("README")).unwrap()) > readme_mtime);
    let log = Command::new("git")
        .env("HOME", &home)
        .arg("-C")
        .arg(&project)
        .args(["log", "--oneline", "--all"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&log.stdout).contains("made inside"));
    p.ok(&["lock"], None);
}
