//! The CLI edge: a reader that goes away (`vault log | head -1`) ends a command as a success with
//! nothing on stderr. The read end of stdout is closed before the command runs, so its first
//! write fails with EPIPE whatever the size of its output (a pipe buffer cannot hide it).
mod support;

use std::process::Stdio;
use support::*;

#[test]
fn a_closed_stdout_is_success_with_nothing_on_stderr() {
    let mut v = TestVault::init("pipe");
    v.add_bearer("api", "https://127.0.0.1", "tok-pipe");
    for args in [
        &["log"][..],
        &["log", "--json"],
        &["sessions"],
        &["sessions", "--json"],
        &["list"],
        &["list", "--json"],
        &["pending"],
        &["doctor", "--json"],
        &["verify"],
        &["completions", "bash"],
        &["man"],
    ] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = v
            .command(args)
            .stdin(Stdio::null())
            .stdout(Stdio::from(writer))
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "vault {args:?}: {stderr}");
        assert!(
            stderr.is_empty(),
            "vault {args:?} wrote to stderr: {stderr}"
        );
    }
}

#[test]
fn tables_are_laid_out_by_width() {
    let mut v = TestVault::init("widths");
    let long = "a-credential-name-longer-than-any-fixed-column";
    for name in ["api", long] {
        v.add_bearer(name, "https://127.0.0.1", "tok-width");
    }
    let listed = v.run(&["list"], None).ok().stdout;
    let lines: Vec<&str> = listed.lines().collect();
    assert_eq!(lines.len(), 3, "{listed}");
    // Every row's second column starts where the header's does.
    let at = lines[0].find("PROFILE").unwrap();
    assert_eq!(at, long.len() + 2, "{listed}");
    for l in &lines[1..] {
        assert_eq!(&l[at..at + "default".len()], "default", "{listed}");
    }
}
