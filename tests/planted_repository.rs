//! Nothing planted for later, the repository case (issue 45, item 3; SECURITY.md "Containment"):
//! the creation gate of `vault run` against a client that tries every way to make a repository
//! (or what makes one) for the person's git to open later, with a control run that shows the
//! same attacker plants, and the person's git runs it, when the gate is off. Judged from
//! outside, as the person: the entries, and what `git status` runs. Moved out of
//! `tests/containment.rs`, which holds the other attackers of the contained client's world.
mod support;

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use support::uid::{is_root, run_unprivileged};
use support::world::*;
use support::*;

/// A project for the gate's attacker: a git repository with one commit, made by the person.
fn gate_project(home: &Path, name: &str) -> PathBuf {
    let project = home.join(name);
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("README"), "project\n").unwrap();
    git(home, &project, &["init", "-q", "-b", "main"]);
    git(home, &project, &["add", "README"]);
    git(home, &project, &["commit", "-q", "-m", "start"]);
    project
}

/// Runs the gate's attacker under `vault run` in `project` (the gate off: a debug build's
/// switch, for the control); returns its report and `vault run`'s stderr.
fn gate_attack(home: &Path, project: &Path, marker: &Path, gate: bool) -> (Value, String) {
    let config = project.join("gate-attack.json");
    std::fs::write(
        &config,
        json!({"project": project, "marker": marker}).to_string(),
    )
    .unwrap();
    // The attacker's script is shown read-only (nothing outside the project is, unless named).
    let script = support_file("gate_attacker.py");
    let mut c = Command::new(bin());
    c.args(["run", "--allow-read"])
        .arg(&script)
        .args(["--", &system_python().display().to_string()])
        .arg(&script)
        .arg(&config)
        .current_dir(project)
        .env("HOME", home)
        .env("VAULT_DIR", home.join(".local/share/agent-vault"))
        .env_remove("VAULT_RUN_GATE");
    if !gate {
        c.env("VAULT_RUN_GATE", "off");
    }
    let out = run_limited(&mut c, Duration::from_secs(120)).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        out.status.and_then(|s| s.code()),
        Some(0),
        "vault run: {stderr}"
    );
    let report = std::fs::read_to_string(project.join("gate-report.json"))
        .unwrap_or_else(|e| panic!("no report ({e}): {stderr}"));
    (serde_json::from_str(&report).unwrap(), stderr)
}

/// Runs `git status` as the person (outside, `HOME` the test's home) in `project` and in every
/// directory under it (and every link to one); returns how many times a planted command ran (the marker's lines).
fn planted_runs(home: &Path, project: &Path, marker: &Path) -> usize {
    let mut dirs = vec![project.to_owned()];
    let mut i = 0;
    while i < dirs.len() {
        // A link to a directory is where a person may run git too; it is not walked further.
        if !dirs[i].is_symlink() {
            for e in std::fs::read_dir(&dirs[i]).unwrap().flatten() {
                if e.path().is_dir() && e.file_name() != ".git" {
                    dirs.push(e.path());
                }
            }
        }
        i += 1;
    }
    for d in &dirs {
        let _ = Command::new("git")
            .env("HOME", home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .arg("-C")
            .arg(d)
            .arg("status")
            .output();
    }
    std::fs::read_to_string(marker).map_or(0, |m| m.lines().count())
}

/// Nothing planted for later (issue 45, item 3): a client run by `vault run` in a project that
/// is a git repository tries every way to create a repository, or what makes one, for the
/// person's git to open later (`support/gate_attacker.py`): `mkdir sub/.git` (and `mkdirat`),
/// a `.git` file, a bare repository's HEAD, a prepared directory or file renamed to `.git`,
/// symbolic and hard links named `.git` and `HEAD`, an `O_TMPFILE` file linked in (through
/// `/proc/self/fd` and with `AT_EMPTY_PATH`), `O_CREAT` through a dangling link to `.git`,
/// `creat`, `mknod`, `git init`, another case, a symlinked parent, `/proc/*/cwd`, and moving the
/// project's own `.git` away. Judged from outside: none of those entries exist, and `git status`
/// run as the person in the project and in every directory under it runs nothing planted. The
/// control (the same attacker, gate off) plants, and the person's git runs it. In the same run
/// the normal work works: files, directories, renames and links with the modes of the client's
/// umask, `/dev/stdout`, `chmod +x`, `touch`, an installer's modes, times and attributes in
/// `node_modules`, a commit and a new branch in the repository, a repository under `/tmp`.
#[test]
fn a_repository_cannot_be_planted_from_inside_and_the_work_still_works() {
    let root = world_root("gate").unwrap();
    if !run_unprivileged("a_repository_cannot_be_planted_from_inside_and_the_work_still_works") {
        let _ = std::fs::remove_dir_all(&root);
        return;
    }
    assert!(!is_root(), "the attacker must be an unprivileged uid");
    let home = root.join("home");
    let marker = root.join("planted-ran");

    // The control: with the gate off the plants are made and the person's git runs them.
    let control = gate_project(&home, "control");
    let (seen, stderr) = gate_attack(&home, &control, &marker, false);
    // The switch is a debug build's: a release binary under test has no control run.
    if cfg!(debug_assertions) && std::env::var_os("VAULT_TEST_BIN").is_none() {
        assert!(stderr.contains("creation gate is OFF"), "{stderr}");
        assert_eq!(seen["plants"]["mkdir s1/.git"], "made", "{seen}");
        assert!(
            planted_runs(&home, &control, &marker) > 0,
            "the control planted nothing that ran"
        );
    }
    let _ = std::fs::remove_file(&marker);
    std::fs::remove_dir_all(&control).unwrap();

    let project = gate_project(&home, "project");
    let (report, stderr) = gate_attack(&home, &project, &marker, true);
    let plants = report["plants"].as_object().unwrap();
    for name in [
        "mkdir s1/.git",
        "mkdirat s1/.git",
        "file s2/.git",
        "s2-gitdir/HEAD",
        "s3/HEAD",
        "rename dir s4/.git",
        "rename file s4/.git",
        "rename prep4/HEAD",
        "symlink s5/.git",
        "symlink prep4/HEAD",
        "link s6/.git",
        "link prep4/HEAD",
        "tmpfile s7/.git",
        "tmpfile empty-path s7/.git",
        "open through s8/link",
        "open through abs-link",
        "creat s9/.git",
        "mknod s10/.git",
        "mknod s10/HEAD",
        "mkdir s13/.GIT",
        "mkdir s14-link/.git",
        "mkdir /proc/self/cwd/s15/.git",
        "mkdir /proc/PID/cwd/s16/.git",
        "rename .git",
        "file s17/.git",
        "mkdir .git/logs/objects",
        "mkdir .git/evil/objects",
        "file .git/evil/HEAD",
        "file .git/evil/commondir",
        "rename .git/logs out",
        "rename prep21 into .git/refs",
    ] {
        assert_eq!(plants[name], "EACCES", "{name}: {report}");
    }
    assert_ne!(plants["git init s11"], 0, "{report}");
    let escapes = &report["escapes"];
    assert_eq!(escapes["unshare(CLONE_NEWUSER)"], "EPERM", "{escapes}");
    assert_eq!(escapes["io_uring_setup"], "EPERM", "{escapes}");
    assert_eq!(escapes["openat2"], "ENOSYS", "{escapes}");
    assert_eq!(escapes["clone3"], "ENOSYS", "{escapes}");
    // The kernel keeps one listener per filter chain: the client cannot answer its own calls.
    assert_eq!(escapes["own seccomp listener"], "EBUSY", "{escapes}");
    assert_ne!(escapes["unshare -r"], 0, "{escapes}");
    for p in [
        "s1/.git",
        "s2/.git",
        "s2-gitdir/HEAD",
        "s3/HEAD",
        "s4/.git",
        "prep4/HEAD",
        "s5/.git",
        "s6/.git",
        "s7/.git",
        "s8/.git",
        "s9/.git",
        "s10/.git",
        "s10/HEAD",
        "s11/.git",
        "s13/.GIT",
        "s14/.git",
        "s15/.git",
        "s16/.git",
        "s17/.git",
        "moved-git",
        ".git/logs/objects",
        ".git/evil/objects",
        ".git/evil/HEAD",
        ".git/evil/commondir",
        "s20",
        ".git/refs/prep21",
    ] {
        assert!(
            project.join(p).symlink_metadata().is_err(),
            "{p} was made: {report}"
        );
    }
    assert!(project.join(".git/HEAD").is_file());
    assert_eq!(
        planted_runs(&home, &project, &marker),
        0,
        "a planted command ran"
    );
    // One line per refusal, naming the path and what to do.
    let s1 = format!(
        "vault run: refused creating {}: ",
        project.join("s1/.git").display()
    );
    let line = stderr
        .lines()
        .find(|l| l.starts_with(&s1))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(line.contains("clone or init it outside"), "{line}");

    // The normal work worked, with the modes of the client's umask.
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let work = &report["work"];
    let mode = |p: &str| project.join(p).metadata().unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode("work/a.txt"), 0o644);
    assert_eq!(mode("work/b.txt"), 0o640);
    assert_eq!(mode("work/d1/d2"), 0o755);
    assert_eq!(mode("work/d4"), 0o750);
    assert_eq!(mode("work/tmpfile.txt"), 0o640);
    let read = |p: &str| std::fs::read_to_string(project.join(p)).unwrap();
    assert_eq!(read("work/a.txt"), "a\nmore\n");
    assert_eq!(read("work/c.txt"), "c\n");
    assert_eq!(read("work/through-link.txt"), "through a link\n");
    assert_eq!(read("work/tmpfile.txt"), "unnamed, then named\n");
    let ino = |p: &str| project.join(p).metadata().unwrap().ino();
    assert_eq!(ino("work/a.hard"), ino("work/a.txt"));
    assert!(project
        .join("work/a.sym")
        .symlink_metadata()
        .unwrap()
        .is_symlink());
    use std::os::unix::fs::FileTypeExt;
    assert!(project
        .join("work/fifo")
        .metadata()
        .unwrap()
        .file_type()
        .is_fifo());
    // Metadata the client changes in its own files: modes, times, attributes.
    assert_eq!(mode("work/script.sh") & 0o111, 0o111, "{work}");
    assert_eq!(work["script"], "ran\n", "{work}");
    assert_eq!(work["touch -d"], 0, "{work}");
    let mtime = |p: &str| project.join(p).metadata().unwrap().mtime();
    assert_eq!(mtime("work/c.txt"), 1_000_000);
    assert_eq!(mode("node_modules/pkg"), 0o700);
    assert_eq!(mode("node_modules/pkg/bin/cli.js"), 0o750);
    assert_eq!(mtime("node_modules/pkg/bin/cli.js"), 2_000_000);
    assert_eq!(mtime("node_modules/pkg/bin"), 3_000_000);
    let cli = project.join("node_modules/pkg/bin/cli.js");
    let mut v = [0u8; 16];
    let n = rustix::fs::getxattr(&cli, "user.installer", &mut v).unwrap();
    assert_eq!(&v[..n], b"npm");
    assert_eq!(work["chmod missing"], "ENOENT", "{work}");
    assert_eq!(work["excl"], "EEXIST", "{work}");
    assert_eq!(work["mkdir again"], "EEXIST", "{work}");
    assert_eq!(work["dev_stdout"], "dev-stdout\nproc-fd\n", "{work}");
    assert_eq!(work["dev_stderr"], "err\n", "{work}");
    for step in work["git"].as_array().unwrap() {
        assert_eq!(step["rc"], 0, "{step}");
    }
    let log = Command::new("git")
        .env("HOME", &home)
        .arg("-C")
        .arg(&project)
        .args(["log", "--oneline", "inside-branch"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&log.stdout).contains("work inside"),
        "{log:?}"
    );
    let _ = std::fs::remove_dir_all(&root);
}
