//! The newcomer's papercuts of issue "(3 of 5)", each through the real binary: `vault init` asks
//! again when the two passphrases (or PINs) differ instead of exiting; `vault doctor` does not
//! say "locked" of a running agent's key; `vault config` points at what an installed binary has
//! (`vault config --defaults`), not a file of the source tree. (Times shown in local time with
//! an offset: tests/audit.rs and tests/show_status.rs; the demo's exit after a denial:
//! tests/demo.rs; `man vault` examples: tests/packaging.rs; `>&2` is not the background:
//! src/policy/ssh/tests.rs.)
mod support;

use support::*;

#[test]
fn init_asks_again_when_the_two_passphrases_or_pins_differ() {
    let mut v = TestVault::empty("init-again");
    let r = v.run_tty(
        &["init"],
        &[
            ("New vault passphrase", &format!("{PASSPHRASE}\n")),
            ("Repeat the passphrase", "a different one\n"),
            ("The two differ; type it again", &format!("{PASSPHRASE}\n")),
            ("Repeat the passphrase", &format!("{PASSPHRASE}\n")),
            ("New approval PIN", &format!("{PIN}\n")),
            ("Repeat the PIN", "1357\n"),
            ("The two differ; type it again", &format!("{PIN}\n")),
            ("Repeat the PIN", &format!("{PIN}\n")),
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert!(v.vault_dir().join("vault.db").exists());
    // The vault opens with the passphrase typed the second time.
    v.run(&["lock"], None).ok();
    v.run(
        &["status", "--passphrase-stdin"],
        Some(&format!("{PASSPHRASE}\n")),
    )
    .code(4);

    // Three mismatches: nothing is created, and the message says so.
    let mut w = TestVault::empty("init-three");
    let r = w.run_tty(
        &["init"],
        &[
            ("New vault passphrase", &format!("{PASSPHRASE}\n")),
            ("Repeat the passphrase", "one\n"),
            ("type it again", &format!("{PASSPHRASE}\n")),
            ("Repeat the passphrase", "two\n"),
            ("type it again", &format!("{PASSPHRASE}\n")),
            ("Repeat the passphrase", "three\n"),
        ],
    );
    assert_ne!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("differed three times"), "{r:?}");
    assert!(!w.vault_dir().join("vault.db").exists());
}

#[test]
fn doctor_does_not_call_a_running_agents_key_locked() {
    let mut v = TestVault::init("doctor-words");
    let d = v.run(&["doctor"], None);
    let line = d
        .stdout
        .lines()
        .find(|l| l.contains("agent: key memory"))
        .unwrap_or_else(|| panic!("{}", d.stdout));
    assert!(!line.contains("locked"), "{line}");
    assert!(
        line.contains("pinned in RAM") || line.contains("could not be pinned"),
        "{line}"
    );
}

#[test]
fn config_points_at_what_the_installed_binary_has() {
    let mut v = TestVault::init("config-defaults");
    let shown = v.run(&["config"], None).ok().stdout;
    assert!(!shown.contains("assets/"), "{shown}");
    assert!(shown.contains("vault config --defaults"), "{shown}");
    let defaults = v.run(&["config", "--defaults"], None).ok().stdout;
    assert!(defaults.contains("[approvals]") && defaults.contains("expiry_seconds = 600"));
    assert!(!defaults.contains("DESIGN"), "{defaults}");
    // Written as the default file, it is read back with every key from the file.
    std::fs::write(v.vault_dir().join("config.toml"), &defaults).unwrap();
    let json: serde_json::Value =
        serde_json::from_str(v.run(&["config", "--json"], None).ok().stdout.trim()).unwrap();
    assert!(json["keys"]
        .as_array()
        .unwrap()
        .iter()
        .all(|k| k["source"] == "config.toml"));
    // A bad key names the command that lists the keys, not a source file.
    std::fs::write(
        v.vault_dir().join("config.toml"),
        "[agent]\nno_such_key = 1\n",
    )
    .unwrap();
    let r = v.run(&["config"], None);
    assert!(r.stderr.contains("vault config --defaults"), "{r:?}");
}
