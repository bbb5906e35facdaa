//! Who runs a test: root (CI) or the unprivileged user `vaulttest` that `.ci/run` creates, so an
//! attack is played by a real second process of the same non-root uid as the vault's agent.
use std::process::Command;

/// Set in the re-run child, so it runs the test instead of re-running it again.
const CHILD: &str = "AV_UNPRIVILEGED_CHILD";
/// The unprivileged test user.
pub const USER: &str = "vaulttest";

pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

pub fn uid_of(user: &str) -> Option<u32> {
    id_of(user, "-u")
}

pub fn id_of(user: &str, flag: &str) -> Option<u32> {
    let out = Command::new("id").args([flag, user]).output().ok()?;
    String::from_utf8(out.stdout).ok()?.trim().parse().ok()
}

/// The unprivileged test user (created here if `.ci/run` did not).
pub fn test_user() -> u32 {
    if uid_of(USER).is_none() {
        let ok = Command::new("useradd")
            .args([
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                USER,
            ])
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            ok,
            "cannot create the test user {USER}; run .ci/run as root"
        );
    }
    uid_of(USER).unwrap()
}

/// `program args…` as `user` (setpriv: no new privileges, no supplementary groups).
pub fn as_user(user: &str, program: &str) -> Command {
    as_user_in(user, &[], program)
}

/// `as_user`, with these supplementary groups (names), as a person in the `docker` group has.
pub fn as_user_in(user: &str, groups: &[&str], program: &str) -> Command {
    let mut c = Command::new("setpriv");
    let gid = id_of(user, "-g").expect("the user has a group");
    let groups = if groups.is_empty() {
        "--clear-groups".to_owned()
    } else {
        format!("--groups={}", groups.join(","))
    };
    c.args([
        &format!("--reuid={user}"),
        &format!("--regid={gid}"),
        &groups,
        "--",
        program,
    ]);
    c
}

/// A group (created here if missing, as root): the test user is given it as a supplementary
/// group by `run_unprivileged_in`.
pub fn group(name: &str) -> u32 {
    let gid = |n: &str| -> Option<u32> {
        let out = Command::new("getent").args(["group", n]).output().ok()?;
        String::from_utf8(out.stdout)
            .ok()?
            .split(':')
            .nth(2)?
            .trim()
            .parse()
            .ok()
    };
    if gid(name).is_none() {
        let ok = Command::new("groupadd")
            .args(["--system", name])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "cannot create the group {name}; run .ci/run as root");
    }
    gid(name).unwrap()
}

/// Re-runs this test as `vaulttest`; true when this process is that child (or not root: then the
/// test runs as it is, already unprivileged).
pub fn run_unprivileged(test: &str) -> bool {
    run_unprivileged_in(test, &[])
}

/// `run_unprivileged`, the test user holding these supplementary groups.
pub fn run_unprivileged_in(test: &str, groups: &[&str]) -> bool {
    if std::env::var_os(CHILD).is_some() || !is_root() {
        return true;
    }
    test_user();
    let exe = std::env::current_exe().unwrap();
    let out = as_user_in(USER, groups, exe.to_str().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the unprivileged run failed:\n{text}");
    assert!(
        text.contains("1 passed"),
        "the unprivileged run ran nothing:\n{text}"
    );
    false
}
