//! `vault setup CLIENT` through the real binary, in a throwaway HOME with a project folder in it.
//! For every client and scope: a config that already holds another server, a stale entry of
//! ours and unrelated keys (for Codex a comment and another table) gets our entry (this binary's
//! absolute path, `mcp`, VAULT_DIR) and keeps everything else and its mode; a second run changes
//! no byte; `--print` writes nothing and prints exactly what a fresh setup writes; a malformed
//! config is refused and left byte for byte. Then the real Claude Code and Gemini CLI that
//! `.ci/ai-clients` installs list `vault` as connected (a missing client fails the test).
mod support;

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;
use support::ai::{client_bin, client_command, run_ok};
use support::*;

const CLIENT_LIMIT: Duration = Duration::from_secs(60);

/// One client and scope: the file it reads (`~/` in HOME, `./` in the project folder), the key
/// of its servers, and whether its entry names the transport.
struct Case {
    client: &'static str,
    scope: &'static str,
    file: &'static str,
    servers: &'static str,
    typed: bool,
}

#[rustfmt::skip]
const CASES: &[Case] = &[
    Case { client: "claude", scope: "user", file: "~/.claude.json", servers: "mcpServers", typed: true },
    Case { client: "claude", scope: "project", file: "./.mcp.json", servers: "mcpServers", typed: true },
    Case { client: "cursor", scope: "user", file: "~/.cursor/mcp.json", servers: "mcpServers", typed: false },
    Case { client: "cursor", scope: "project", file: "./.cursor/mcp.json", servers: "mcpServers", typed: false },
    Case { client: "vscode", scope: "user", file: "~/.config/Code/User/mcp.json", servers: "servers", typed: true },
    Case { client: "vscode", scope: "project", file: "./.vscode/mcp.json", servers: "servers", typed: true },
    Case { client: "codex", scope: "user", file: "~/.codex/config.toml", servers: "mcp_servers", typed: false },
    Case { client: "codex", scope: "project", file: "./.codex/config.toml", servers: "mcp_servers", typed: false },
    Case { client: "gemini", scope: "user", file: "~/.gemini/settings.json", servers: "mcpServers", typed: false },
    Case { client: "gemini", scope: "project", file: "./.gemini/settings.json", servers: "mcpServers", typed: false },
];

impl Case {
    fn label(&self) -> String {
        format!("vault setup {} --scope {}", self.client, self.scope)
    }
    fn args(&self) -> [&'static str; 3] {
        [self.client, "--scope", self.scope]
    }
    fn toml(&self) -> bool {
        self.file.ends_with(".toml")
    }
}

/// A vault directory, a HOME, and a project folder inside that HOME.
struct World {
    vault: TestVault,
    home: PathBuf,
    project: PathBuf,
}

impl World {
    fn around(vault: TestVault) -> Self {
        let home = vault.dir.path().join("home");
        let project = home.join("project");
        std::fs::create_dir_all(&project).unwrap();
        std::fs::create_dir_all(vault.dir.path().join("no-clients")).unwrap();
        Self {
            vault,
            home,
            project,
        }
    }

    fn file(&self, case: &Case) -> PathBuf {
        match case.file.split_at(2) {
            ("~/", rest) => self.home.join(rest),
            (_, rest) => self.project.join(rest),
        }
    }

    /// `vault setup ARGS` in the project folder, with no client on PATH (nothing else touches
    /// the files) and none of the clients' location overrides.
    fn setup(&mut self, args: &[&str]) -> Run {
        let mut c = self.vault.command(&[&["setup"], args].concat());
        c.current_dir(&self.project)
            .env("HOME", &self.home)
            .env("PATH", self.vault.dir.path().join("no-clients"));
        for var in [
            "XDG_CONFIG_HOME",
            "CLAUDE_CONFIG_DIR",
            "CODEX_HOME",
            "GEMINI_CLI_TRUSTED_FOLDERS_PATH",
        ] {
            c.env_remove(var);
        }
        self.vault.run_command(&mut c, None)
    }

    /// `vault setup ARGS` as a person with the clients installed runs it (`client_command`: a
    /// clean client environment, the clients on PATH), or with `path` as PATH.
    fn setup_with_clients(&mut self, args: &[&str], path: Option<&str>) -> Run {
        let vault_dir = self.vault.vault_dir();
        let mut c = client_command(Path::new(bin()), &self.home, &self.project, &vault_dir);
        c.arg("setup").args(args);
        if let Some(path) = path {
            c.env("PATH", path);
        }
        self.vault.run_command(&mut c, None)
    }

    /// The entry `vault setup` must have written for `case`.
    fn entry(&self, case: &Case) -> Value {
        let mut want = json!({"command": exe(), "args": ["mcp"],
            "env": {"VAULT_DIR": self.vault.vault_dir().to_str().unwrap()}});
        if case.typed {
            want["type"] = json!("stdio");
        }
        want
    }
}

/// The `vault` under test as a client must start it: absolute, links resolved.
fn exe() -> String {
    let exe = std::fs::canonicalize(bin()).unwrap();
    exe.to_str().unwrap().to_owned()
}

/// A config file as JSON (Codex's TOML converted).
fn read_config(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    if path.extension().is_some_and(|e| e == "toml") {
        let table: toml::Table = toml::from_str(&text).unwrap();
        serde_json::to_value(table).unwrap()
    } else {
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}\n{text}", path.display()))
    }
}

fn sorted_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = files_under(dir);
    files.sort();
    files
}

const CODEX_BEFORE: &str = "# keep this comment\nmodel = \"o3\"\n\n[mcp_servers.other]\ncommand = \"/usr/bin/other\"\nargs = [\"--flag\"]\n\n[profiles.fast] # another table\nmodel = \"o4-mini\"\n";

fn write_with_mode(path: &Path, text: &str, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn each_client_gets_our_entry_and_keeps_everything_else() {
    let mut w = World::around(TestVault::empty("setup-merge"));
    for case in CASES {
        let label = case.label();
        let file = w.file(case);
        let before = if case.toml() {
            CODEX_BEFORE.to_owned()
        } else {
            let servers = json!({"other": {"command": "/usr/bin/other", "args": ["--flag"]},
                "vault": {"command": "vault"}});
            let mut v = json!({"theme": "dark", "nested": {"keep": [1, {"x": null}]}});
            v[case.servers] = servers;
            serde_json::to_string_pretty(&v).unwrap()
        };
        write_with_mode(&file, &before, 0o640);
        let before = read_config(&file);

        let run = w.setup(&case.args()).ok();
        let wrote = format!(
            "Wrote {}: {}.vault runs {} mcp",
            file.display(),
            case.servers,
            exe()
        );
        assert!(run.stdout.starts_with(&wrote), "{label}: {}", run.stdout);
        let after = read_config(&file);
        assert_eq!(after[case.servers]["vault"], w.entry(case), "{label}");
        assert!(Path::new(&exe()).is_absolute() && Path::new(&exe()).is_file());
        let rest = |mut v: Value| {
            v[case.servers].as_object_mut().unwrap().remove("vault");
            v
        };
        assert_eq!(rest(after), rest(before), "{label}: only our entry changed");
        assert_eq!(mode(&file), 0o640, "{label}: the file's mode is kept");
        if case.toml() {
            let text = std::fs::read_to_string(&file).unwrap();
            assert!(
                text.starts_with(CODEX_BEFORE),
                "{label}: lines kept:\n{text}"
            );
        }

        let bytes = std::fs::read(&file).unwrap();
        let again = w.setup(&case.args()).ok();
        assert!(
            again.stdout.starts_with("Unchanged "),
            "{label}: {}",
            again.stdout
        );
        assert_eq!(std::fs::read(&file).unwrap(), bytes, "{label}: idempotent");
        let dir = std::fs::read_dir(file.parent().unwrap()).unwrap();
        let names: Vec<String> = dir
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            !names.iter().any(|n| n.contains("vault-setup")),
            "{label}: a temp file left: {names:?}"
        );
    }
    // Gemini's project scope trusted the folder.
    let trusted = read_config(&w.home.join(".gemini/trustedFolders.json"));
    assert_eq!(
        trusted,
        json!({w.project.to_str().unwrap(): "TRUST_FOLDER"})
    );
}

#[test]
fn print_writes_nothing_and_is_what_a_fresh_setup_writes() {
    let mut w = World::around(TestVault::empty("setup-print"));
    for case in CASES {
        let label = case.label();
        let printed = w.setup(&[&case.args()[..], &["--print"]].concat()).ok();
        assert!(
            files_under(&w.home).is_empty(),
            "{label} --print wrote {:?}",
            files_under(&w.home)
        );
        assert!(
            printed.stderr.contains("Nothing was written"),
            "{label}: {}",
            printed.stderr
        );
        let file = w.file(case);
        w.setup(&case.args()).ok();
        let written = std::fs::read_to_string(&file).unwrap();
        assert_eq!(printed.stdout, written, "{label}");
        assert_eq!(
            read_config(&file)[case.servers]["vault"],
            w.entry(case),
            "{label}"
        );
        assert_eq!(mode(&file), 0o600, "{label}: a new file is 0600");
        for f in files_under(&w.home) {
            std::fs::remove_file(f).unwrap();
        }
    }
}

#[test]
fn a_malformed_config_is_refused_and_left_as_it_was() {
    let mut w = World::around(TestVault::empty("setup-malformed"));
    for case in CASES {
        let label = case.label();
        let file = w.file(case);
        let (broken, says) = match case.toml() {
            true => ("[mcp_servers\ncommand = \"x\"\n", "is not valid TOML"),
            false => ("{\"mcpServers\": {\"other\": {},}\n", "is not valid JSON"),
        };
        write_with_mode(&file, broken, 0o644);
        let listed = sorted_files(&w.home);
        let run = w.setup(&case.args()).code(1);
        assert!(
            run.stderr.contains(&format!("{} {says}", file.display()))
                && run.stderr.contains("leaves it as it is")
                && run.stderr.contains("--print"),
            "{label}: {}",
            run.stderr
        );
        assert_eq!(std::fs::read_to_string(&file).unwrap(), broken, "{label}");
        assert_eq!(mode(&file), 0o644, "{label}");
        assert_eq!(
            sorted_files(&w.home),
            listed,
            "{label}: nothing else written"
        );
        std::fs::remove_file(&file).unwrap();
    }
    // Gemini's trust file is read before anything is written: a broken one leaves the settings
    // unwritten too.
    let trust = w.home.join(".gemini/trustedFolders.json");
    write_with_mode(&trust, "{ \"/x\": ", 0o600);
    let run = w.setup(&["gemini", "--scope", "project"]).code(1);
    assert!(
        run.stderr
            .contains("trustedFolders.json is not a JSON object"),
        "{}",
        run.stderr
    );
    assert!(!w.project.join(".gemini/settings.json").exists());
}

#[test]
fn usage_errors_exit_2_and_a_symlinked_config_stays_a_link() {
    let mut w = World::around(TestVault::empty("setup-usage"));
    for args in [
        &["cursor", "--client-bin", "/bin/true"][..],
        &["claude", "--name", "two words"],
        &["notepad"],
        &["codex", "--scope", "global"],
    ] {
        let run = w.setup(args).code(2);
        assert!(run.stderr.contains("error:"), "{args:?}: {}", run.stderr);
    }
    let dotfile = w.home.join("dotfiles/cursor.json");
    write_with_mode(&dotfile, "{\"mcpServers\": {}}", 0o600);
    std::fs::create_dir_all(w.home.join(".cursor")).unwrap();
    std::os::unix::fs::symlink("../dotfiles/cursor.json", w.home.join(".cursor/mcp.json")).unwrap();
    let run = w.setup(&["cursor", "--name", "agent-vault"]).ok();
    assert!(
        run.stdout.contains("mcpServers.agent-vault runs"),
        "{}",
        run.stdout
    );
    let link = std::fs::symlink_metadata(w.home.join(".cursor/mcp.json")).unwrap();
    assert!(
        link.file_type().is_symlink(),
        "the link was replaced by a file"
    );
    let case = &CASES[2];
    assert_eq!(
        read_config(&dotfile)["mcpServers"]["agent-vault"],
        w.entry(case)
    );
}

#[test]
fn claude_code_lists_vault_as_connected() {
    let claude = client_bin("claude", "@anthropic-ai/claude-code");
    let mut w = World::around(TestVault::init("setup-claude"));
    w.vault.run(&["lock"], None).ok();
    let claude_arg = claude.to_str().unwrap();
    // Project scope first: Claude Code waits for the person's approval of .mcp.json.
    let run = w
        .setup_with_clients(&["claude", "--scope", "project"], None)
        .ok();
    assert!(
        run.stdout
            .contains("claude mcp get vault: Scope: Project config")
            && run.stdout.contains("Pending approval")
            && run
                .stdout
                .contains("vault: configured; Claude Code asks once"),
        "{}",
        run.stdout
    );
    // User scope, the client given by path (none on PATH): connected, on a locked vault.
    let run = w
        .setup_with_clients(
            &["claude", "--client-bin", claude_arg],
            Some("/usr/bin:/bin"),
        )
        .ok();
    assert!(
        run.stdout
            .contains("claude mcp get vault: Scope: User config")
            && run.stdout.contains("Status: ✔ Connected")
            && run.stdout.contains(
                "vault: connected; the vault is locked: run `vault unlock` to serve tools"
            )
            // It says how to start the client contained.
            && run.stdout.contains("Start it contained: `vault run -- claude`"),
        "{}",
        run.stdout
    );
    let mut list = client_command(&claude, &w.home, &w.project, &w.vault.vault_dir());
    list.args(["mcp", "list"]);
    let listed = run_ok("claude mcp list", list, CLIENT_LIMIT).stdout;
    let line = listed
        .lines()
        .find(|l| l.starts_with("vault: "))
        .unwrap_or_else(|| {
            panic!("claude mcp list does not list vault:\n{listed}");
        });
    assert_eq!(
        line,
        format!("vault: {} mcp - ✔ Connected", exe()),
        "{listed}"
    );
}

#[test]
fn gemini_cli_lists_vault_as_connected_in_the_folder_setup_trusted() {
    let gemini = client_bin("gemini", "@google/gemini-cli");
    let mut w = World::around(TestVault::init("setup-gemini"));
    let trust = w.home.join(".gemini/trustedFolders.json");
    write_with_mode(&trust, "{\"/srv/elsewhere\": \"DO_NOT_TRUST\"}", 0o600);
    // User scope, in a folder nobody trusted: configured, and Gemini says it is disabled here.
    let run = w.setup_with_clients(&["gemini"], None).ok();
    assert!(
        run.stdout.contains("gemini mcp list: ○ vault: ")
            && run.stdout.contains("- Disabled")
            && run.stdout.contains("a folder you have not trusted"),
        "{}",
        run.stdout
    );
    // Project scope trusts the folder: connected (the vault is unlocked).
    let run = w
        .setup_with_clients(&["gemini", "--scope", "project"], None)
        .ok();
    let project = w.project.to_str().unwrap();
    assert!(
        run.stdout
            .contains(&format!("Trusted {project} in {}", trust.display()))
            && run.stdout.contains("- Connected")
            && run
                .stdout
                .contains("vault: connected; the vault is unlocked"),
        "{}",
        run.stdout
    );
    let trusted = read_config(&trust);
    assert_eq!(
        trusted,
        json!({"/srv/elsewhere": "DO_NOT_TRUST", project: "TRUST_FOLDER"})
    );
    let mut list = client_command(&gemini, &w.home, &w.project, &w.vault.vault_dir());
    list.args(["mcp", "list"]);
    let out = run_ok("gemini mcp list", list, CLIENT_LIMIT);
    let said = out.stdout + &out.stderr;
    let line = said
        .lines()
        .find(|l| l.contains(" vault: "))
        .unwrap_or_else(|| {
            panic!("gemini mcp list does not list vault:\n{said}");
        });
    assert_eq!(
        line,
        format!("✓ vault: {} mcp (stdio) - Connected", exe()),
        "{said}"
    );
}
