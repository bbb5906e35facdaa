//! `--secret-from SOURCE` through the built binary, against the real programs: a dotenv file
//! (export, quotes, escapes, a comment, `=` in the value, CRLF, no final line break), a real
//! `pass` store under a throwaway gpg key, a Bitwarden JSON export (a login password and a custom
//! field), a real KeePassXC database made and read with `keepassxc-cli`. Each imported value must
//! reach a loopback target exactly; `--remove-from-source` leaves the dotenv file byte for byte
//! as described; every error names what is missing; and no decoy (imported or merely present in
//! the source) appears in any command's output, the agent's trace log or any file of the vault.
//! Needs `pass`, `gnupg` and `keepassxc` (`.ci/run` installs them).
mod support;

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use support::leak::assert_clean;
use support::mcp::McpProc;
use support::target::HttpTarget;
use support::*;

/// The value of GITHUB_TOKEN as the dotenv file below spells it, decoded.
const ENV_TOKEN: &str = r#"DECOYenv~1 a=b #c "q" \ z'"#;
/// Another key of the file: never imported, never anywhere.
const ENV_OTHER: &str = "DECOYother=9f2";
/// The key `vault edit` takes from the same file.
const ENV_ROTATED: &str = "DECOYrot#8c1=x";
const PASS_VALUE: &str = "DECOYpass~3 k=v/+";
const PASS_NOTES: &str = "DECOYpassnote77";
const BW_PASSWORD: &str = "DECOYbwpw~4 \"j\" \\u=";
const BW_FIELD: &str = "DECOYbwfield~5";
const BW_OTHER: &str = "DECOYbwother~6";
const KP_VALUE: &str = "DECOYkp~7 p=q";
const KP_DB_PASSWORD: &str = "DECOYkpdbpw~8";

/// The dotenv file: GITHUB_TOKEN's line ends with CRLF; the last line has no line break.
fn dotenv() -> String {
    let token = ENV_TOKEN.replace('\\', "\\\\").replace('"', "\\\"");
    format!(
        "# service settings\nexport DEBUG=1\n\nAPI_URL=https://api.example.test/v1?a=b\n  export GITHUB_TOKEN=\"{token}\"   # the token\r\nOTHER='{ENV_OTHER}'\nROTATED={ENV_ROTATED}"
    )
}

/// A Bitwarden unencrypted JSON export: GitHub (a login and a custom field), a secure note, and
/// two items both named Twin.
fn bitwarden() -> String {
    json!({
        "encrypted": false,
        "folders": [],
        "items": [
            {"id": "0b7e-1", "type": 1, "name": "GitHub", "notes": null,
             "login": {"username": "bot", "password": BW_PASSWORD, "totp": null},
             "fields": [{"name": "api_key", "value": BW_FIELD, "type": 1}]},
            {"id": "0b7e-2", "type": 2, "name": "Note", "notes": BW_OTHER},
            {"id": "0b7e-3", "type": 1, "name": "Twin", "login": {"password": BW_OTHER}},
            {"id": "0b7e-4", "type": 1, "name": "Twin", "login": {"password": BW_OTHER}}
        ]
    })
    .to_string()
}

/// A `pass` store under a throwaway gpg key (no passphrase) in `dir`, holding `web/github`.
struct PassStore {
    gnupg: PathBuf,
    store: PathBuf,
}

impl PassStore {
    fn new(dir: &Path) -> Self {
        let gnupg = dir.join("g");
        let store = dir.join("store");
        std::fs::create_dir(&gnupg).unwrap();
        chmod(&gnupg, 0o700);
        let s = Self { gnupg, store };
        s.run(
            "gpg",
            &["--batch", "--passphrase", "", "--quick-gen-key"],
            &[
                "vault test <vault@example.test>",
                "future-default",
                "default",
                "never",
            ],
            "",
        );
        s.run("pass", &["init"], &["vault@example.test"], "");
        s.run(
            "pass",
            &["insert", "-m"],
            &["web/github"],
            &format!("{PASS_VALUE}\nlogin: bot\n{PASS_NOTES}\n"),
        );
        s
    }

    fn env(&self, c: &mut Command) {
        c.env("GNUPGHOME", &self.gnupg)
            .env("PASSWORD_STORE_DIR", &self.store);
    }

    fn run(&self, program: &str, args: &[&str], more: &[&str], stdin: &str) {
        use std::io::Write;
        let mut c = Command::new(program);
        c.args(args).args(more);
        self.env(&mut c);
        let mut child = c
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{program} (apt-get install pass gnupg): {e}"));
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        let o = child.wait_with_output().unwrap();
        assert!(
            o.status.success(),
            "{program} {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

impl Drop for PassStore {
    fn drop(&mut self) {
        let _ = Command::new("gpgconf")
            .args(["--kill", "gpg-agent"])
            .env("GNUPGHOME", &self.gnupg)
            .status();
    }
}

/// A KeePassXC database at `path` (password KP_DB_PASSWORD, the fastest key derivation allowed)
/// with the entry `api-token`.
fn keepass(path: &Path) {
    let kp = |args: &[&str], stdin: String| {
        use std::io::Write;
        let mut child = Command::new("keepassxc-cli")
            .args(args)
            .arg(path)
            .args(if args[0] == "add" {
                &["api-token"][..]
            } else {
                &[]
            })
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("keepassxc-cli (apt-get install keepassxc)");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        let o = child.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    kp(
        &["db-create", "-q", "-p", "-t", "100"],
        format!("{KP_DB_PASSWORD}\n{KP_DB_PASSWORD}\n"),
    );
    kp(
        &["add", "-q", "-p", "-u", "bot"],
        format!("{KP_DB_PASSWORD}\n{KP_VALUE}\n"),
    );
}

fn chmod(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn decoys() -> Vec<(&'static str, Vec<u8>)> {
    [
        ("env token", ENV_TOKEN),
        ("env other", ENV_OTHER),
        ("env rotated", ENV_ROTATED),
        ("pass value", PASS_VALUE),
        ("pass notes", PASS_NOTES),
        ("bitwarden password", BW_PASSWORD),
        ("bitwarden field", BW_FIELD),
        ("bitwarden other", BW_OTHER),
        ("keepassxc value", KP_VALUE),
        ("keepassxc database password", KP_DB_PASSWORD),
    ]
    .into_iter()
    .map(|(k, v)| (k, v.as_bytes().to_vec()))
    .collect()
}

/// `vault add http NAME --host BASE --bearer --approval never --secret-from SOURCE [more]`,
/// with the passphrase from VAULT_PASSPHRASE_FILE and `stdin`.
fn add(v: &mut TestVault, name: &str, base: &str, source: &str, more: &[&str], stdin: &str) -> Run {
    let mut args = vec![
        "add",
        "http",
        name,
        "--host",
        base,
        "--bearer",
        "--approval",
        "never",
        "--secret-from",
        source,
    ];
    args.extend_from_slice(more);
    v.run_pp(&args, Some(stdin))
}

/// The sweep: no decoy in any form in any CLI run, the agent's log or any vault file.
#[track_caller]
fn sweep(v: &TestVault, extra: &[(&str, String)]) {
    let decoys = decoys();
    assert_clean("every CLI run", v.transcript.join("\n").as_bytes(), &decoys);
    for (what, text) in extra {
        assert_clean(what, text.as_bytes(), &decoys);
    }
    let files = files_under(&v.vault_dir());
    assert!(files.iter().any(|f| f.ends_with("vault.db")));
    for f in files {
        assert_clean(
            &f.display().to_string(),
            &std::fs::read(&f).unwrap(),
            &decoys,
        );
    }
}

#[test]
fn every_source_reaches_the_target_exactly_and_no_value_leaks() {
    let t = HttpTarget::start("unused");
    let base = t.base();
    let src = TempDir::new("import-src");
    let env_file = src.path().join("app.env");
    std::fs::write(&env_file, dotenv()).unwrap();
    chmod(&env_file, 0o640);
    let bw = src.path().join("bitwarden.json");
    std::fs::write(&bw, bitwarden()).unwrap();
    let kdbx = src.path().join("keys.kdbx");
    keepass(&kdbx);
    let store = PassStore::new(src.path());

    let mut v = TestVault::init("import");
    v.restart_agent_logging("trace");
    let envf = env_file.to_str().unwrap();
    // env: with --remove-from-source.
    let r = add(
        &mut v,
        "github",
        &base,
        &format!("env:{envf}#GITHUB_TOKEN"),
        &["--remove-from-source"],
        "",
    )
    .ok();
    assert!(
        r.stdout.contains("Replaced GITHUB_TOKEN in"),
        "{}",
        r.stdout
    );
    let want = dotenv().replace(
        &dotenv()[dotenv().find("  export GITHUB").unwrap()..dotenv().find("\r\n").unwrap()],
        "# GITHUB_TOKEN: moved to agent-vault credential github (profile default)",
    );
    assert_eq!(
        String::from_utf8(std::fs::read(&env_file).unwrap()).unwrap(),
        want
    );
    assert!(
        want.ends_with(&format!("ROTATED={ENV_ROTATED}"))
            && want.contains("moved to agent-vault credential github (profile default)\r\nOTHER=")
    );
    assert_eq!(mode(&env_file), 0o640, "the file keeps its mode");
    let mut names: Vec<String> = std::fs::read_dir(src.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["app.env", "bitwarden.json", "g", "keys.kdbx", "store"],
        "no file left beside it"
    );

    // pass: through the real pass and gpg.
    let mut c = v.command(&[
        "add",
        "http",
        "pass",
        "--host",
        &base,
        "--bearer",
        "--approval",
        "never",
        "--secret-from",
        "pass:web/github",
    ]);
    store.env(&mut c);
    c.env("VAULT_PASSPHRASE_FILE", v.dir.path().join("passphrase"));
    v.run_command(&mut c, None).ok();

    // bitwarden: a login's password and a custom field.
    let bwf = bw.to_str().unwrap();
    add(
        &mut v,
        "bw",
        &base,
        &format!("bitwarden:{bwf}#GitHub"),
        &[],
        "",
    )
    .ok();
    add(
        &mut v,
        "bwfield",
        &base,
        &format!("bitwarden:{bwf}#GitHub/api_key"),
        &[],
        "",
    )
    .ok();

    // keepassxc: keepassxc-cli asks for the database password on stdin.
    let r = add(
        &mut v,
        "kp",
        &base,
        &format!("keepassxc:{}#api-token", kdbx.display()),
        &[],
        &format!("{KP_DB_PASSWORD}\n"),
    )
    .ok();
    assert!(
        r.stderr.contains("Enter password to unlock"),
        "keepassxc-cli's own prompt is passed on: {}",
        r.stderr
    );

    let mut p = McpProc::spawn(v.command(&["mcp"]));
    p.initialize();
    let mut id = 0;
    // Every reply, swept at the end: the target echoes the request back, scrubbed by the vault.
    let mut replies: Vec<String> = Vec::new();
    let mut seen = |p: &mut McpProc, cred: &str| {
        id += 1;
        let r = p.call(id, "http_request", json!({"credential": cred, "method": "GET", "url": format!("{base}/echo?c={cred}"), "wait_s": 20}));
        replies.push(r.to_string());
        assert_eq!(
            r["result"]["structuredContent"]["state"], "completed",
            "{cred}: {r}"
        );
        let reqs = t.requests();
        let last: &Value = reqs.last().unwrap();
        assert_eq!(last["path"], format!("/echo?c={cred}"));
        last["headers"]["authorization"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    for (cred, value) in [
        ("github", ENV_TOKEN),
        ("pass", PASS_VALUE),
        ("bw", BW_PASSWORD),
        ("bwfield", BW_FIELD),
        ("kp", KP_VALUE),
    ] {
        assert_eq!(seen(&mut p, cred), format!("Bearer {value}"), "{cred}");
    }

    // vault edit takes a new value from the same file, and removes that line too.
    let r = v
        .run_pp(
            &[
                "edit",
                "github",
                "--secret-from",
                &format!("env:{envf}#ROTATED"),
                "--remove-from-source",
            ],
            None,
        )
        .ok();
    assert!(
        r.stdout.contains("Updated github (version 2)"),
        "{}",
        r.stdout
    );
    assert_eq!(seen(&mut p, "github"), format!("Bearer {ENV_ROTATED}"));
    let now = String::from_utf8(std::fs::read(&env_file).unwrap()).unwrap();
    assert_eq!(
        now,
        want.replace(
            &format!("ROTATED={ENV_ROTATED}"),
            "# ROTATED: moved to agent-vault credential github (profile default)"
        ),
        "the last line stays without a line break"
    );

    let (code, rest, stderr) = p.finish(Duration::from_secs(10));
    assert_eq!(code, 0);
    let log = std::fs::read_to_string(v.vault_dir().join("agent.log")).unwrap_or_default();
    assert!(
        log.contains("TRACE") || log.contains("DEBUG"),
        "the agent logged: {log}"
    );
    let journal = v.run(&["log", "--json"], None).ok();
    assert!(journal.stdout.contains("credential"), "{}", journal.stdout);
    assert_eq!(replies.len(), 6, "every http_request reply is swept");
    assert!(
        replies.iter().all(|r| r.contains("/echo?c=")),
        "each reply echoes its request: {replies:?}"
    );
    sweep(
        &v,
        &[
            ("vault mcp stdout", rest.join("\n")),
            ("vault mcp stderr", stderr),
            ("the http_request replies", replies.join("\n")),
        ],
    );
}

#[test]
fn errors_name_the_source_and_what_is_missing_never_a_value() {
    let src = TempDir::new("import-err");
    let env_file = src.path().join("app.env");
    std::fs::write(&env_file, format!("{}\nOTHER=again\n", dotenv())).unwrap();
    let bw = src.path().join("bitwarden.json");
    std::fs::write(&bw, bitwarden()).unwrap();
    let kdbx = src.path().join("keys.kdbx");
    keepass(&kdbx);
    let empty_store = src.path().join("no-store");
    std::fs::create_dir(&empty_store).unwrap();
    let (envf, bwf, kdbxf) = (
        env_file.to_str().unwrap(),
        bw.to_str().unwrap(),
        kdbx.to_str().unwrap(),
    );
    let before = std::fs::read(&env_file).unwrap();
    let base = "http://127.0.0.1:9";
    let mut v = TestVault::init("import-err");

    // (source, extra flags, stdin, what stderr must say)
    let none = String::new;
    #[rustfmt::skip]
    let cases: Vec<(String, Vec<&str>, String, Vec<String>)> = vec![
        (format!("env:{envf}.missing#K"), vec![], none(), vec![format!("cannot read {envf}.missing")]),
        (format!("env:{envf}#NOPE"), vec![], none(), vec!["has no key NOPE".into(), "API_URL, DEBUG, GITHUB_TOKEN".into()]),
        (format!("env:{envf}#OTHER"), vec![], none(), vec!["OTHER is defined more than once".into(), "lines 6, 8".into()]),
        (format!("bitwarden:{bwf}#Gitlab"), vec![], none(), vec!["no item named \"Gitlab\"".into()]),
        (format!("bitwarden:{bwf}#GitHub/token"), vec![], none(), vec!["no custom field \"token\"".into(), "its fields: api_key".into()]),
        (format!("bitwarden:{bwf}#Twin"), vec![], none(), vec!["2 items are named \"Twin\"".into(), "0b7e-3, 0b7e-4".into()]),
        (format!("bitwarden:{bwf}#Note"), vec![], none(), vec!["item \"Note\" has no login password".into()]),
        (format!("bitwarden:{envf}#GitHub"), vec![], none(), vec!["is not a Bitwarden JSON export".into()]),
        (format!("keepassxc:{kdbxf}#nope"), vec![], format!("{KP_DB_PASSWORD}\n"), vec!["no entry \"nope\" in the KeePassXC database".into()]),
        (format!("keepassxc:{kdbxf}#api-token"), vec![], "wrong\n".into(), vec!["database password was not accepted".into()]),
        (format!("keepassxc:{kdbxf}#api-token"), vec!["--passphrase-stdin"], format!("{PASSPHRASE}\n"), vec!["--passphrase-stdin also reads".into()]),
        (format!("bitwarden:{bwf}#GitHub"), vec!["--remove-from-source"], none(), vec!["goes only with --secret-from env:FILE#KEY".into()]),
        ("openbao:kv/app#token".into(), vec![], none(), vec!["not logged in to OpenBao".into(), "vault openbao login".into()]),
        (ENV_OTHER.into(), vec![], none(), vec!["give one of env:FILE#KEY".into()]),
    ];
    for (source, more, stdin, says) in &cases {
        let r = add(&mut v, "x", base, source, more, stdin);
        assert_ne!(r.code, 0, "{source}: {r:?}");
        for s in says {
            assert!(
                r.stderr.contains(s.as_str()),
                "{source}: stderr lacks {s:?}: {}",
                r.stderr
            );
        }
    }
    // pass: an entry that is not there, and the program missing (with the package to install).
    let mut c = v.command(&[
        "add",
        "http",
        "x",
        "--host",
        base,
        "--bearer",
        "--secret-from",
        "pass:web/none",
    ]);
    c.env("PASSWORD_STORE_DIR", &empty_store)
        .env("VAULT_PASSPHRASE_FILE", v.dir.path().join("passphrase"));
    let r = v.run_command(&mut c, None);
    assert!(
        r.code != 0 && r.stderr.contains("no entry web/none in the password store"),
        "{r:?}"
    );
    let no_path = src.path().join("bin");
    std::fs::create_dir(&no_path).unwrap();
    std::fs::write(empty_store.join("web.gpg"), "x").unwrap();
    let mut c = v.command(&[
        "add",
        "http",
        "x",
        "--host",
        base,
        "--bearer",
        "--secret-from",
        "pass:web",
    ]);
    c.env("PASSWORD_STORE_DIR", &empty_store)
        .env("PATH", &no_path);
    let r = v.run_command(&mut c, None);
    assert!(
        r.code != 0 && r.stderr.contains("install the package pass"),
        "{r:?}"
    );
    // Conflicting sources are a usage error.
    let r = v.run(
        &[
            "add",
            "http",
            "x",
            "--host",
            base,
            "--bearer",
            "--secret-stdin",
            "--secret-from",
            "pass:web",
        ],
        None,
    );
    assert_eq!(r.code, 2, "{r:?}");

    // The agent refuses the credential (the name is taken): the source keeps its line.
    v.add_bearer("taken", base, "DECOYunrelated");
    let r = add(
        &mut v,
        "taken",
        base,
        &format!("env:{envf}#GITHUB_TOKEN"),
        &["--remove-from-source"],
        "",
    );
    assert!(r.code != 0 && r.stderr.contains("already exists"), "{r:?}");

    // Nothing else was added, and the dotenv file is untouched.
    let listed = v.run(&["list", "--json"], None).ok();
    let listed: Vec<Value> = serde_json::from_str(&listed.stdout).unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(std::fs::read(&env_file).unwrap(), before);
    sweep(&v, &[]);
}
