//! `vault setup CLIENT` through the real binary, in a throwaway HOME with a project folder in it.
//! For every client and scope: a config that already holds another server, a stale entry of
//! ours and unrelated keys (for Codex a comment and another table) gets our entry, `agent-vault`
//! (user scope: this binary's absolute path, `mcp`, VAULT_DIR; project scope: the command
//! `agent-vault` and no path of this machine), and keeps everything else and its mode; a second
//! run changes no byte; `--print` writes nothing and prints exactly what a fresh setup writes; a
//! malformed config is refused and left byte for byte; a JSONC config keeps its comments and
//! trailing commas. Then the real Claude Code and Gemini CLI that `.ci/ai-clients` installs list
//! `agent-vault` as connected (a missing client fails the test).
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

    /// The entry `vault setup` must have written for `case`: for a project, only what works on
    /// a teammate's machine.
    fn entry(&self, case: &Case) -> Value {
        let mut want = match case.scope {
            "project" => json!({"command": "agent-vault", "args": ["mcp"]}),
            _ => json!({"command": exe(), "args": ["mcp"],
                "env": {"VAULT_DIR": self.vault.vault_dir().to_str().unwrap()}}),
        };
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
                "agent-vault": {"command": "vault"}});
            let mut v = json!({"theme": "dark", "nested": {"keep": [1, {"x": null}]}});
            v[case.servers] = servers;
            serde_json::to_string_pretty(&v).unwrap()
        };
        write_with_mode(&file, &before, 0o640);
        let before = read_config(&file);

        let run = w.setup(&case.args()).ok();
        let command = match case.scope {
            "project" => "agent-vault".to_owned(),
            _ => exe(),
        };
        let wrote = format!(
            "Wrote {}: {}.agent-vault runs {command} mcp",
            file.display(),
            case.servers,
        );
        assert!(run.stdout.starts_with(&wrote), "{label}: {}", run.stdout);
        let after = read_config(&file);
        assert_eq!(after[case.servers]["agent-vault"], w.entry(case), "{label}");
        assert!(Path::new(&exe()).is_absolute() && Path::new(&exe()).is_file());
        let rest = |mut v: Value| {
            v[case.servers]
                .as_object_mut()
                .unwrap()
                .remove("agent-vault");
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
            read_config(&file)[case.servers]["agent-vault"],
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
    let run = w.setup(&["cursor", "--name", "vault"]).ok();
    assert!(
        run.stdout.contains("mcpServers.vault runs"),
        "{}",
        run.stdout
    );
    let link = std::fs::symlink_metadata(w.home.join(".cursor/mcp.json")).unwrap();
    assert!(
        link.file_type().is_symlink(),
        "the link was replaced by a file"
    );
    let case = &CASES[2];
    assert_eq!(read_config(&dotfile)["mcpServers"]["vault"], w.entry(case));
}

#[test]
fn claude_code_lists_agent_vault_as_connected() {
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
            .contains("claude mcp get agent-vault: Scope: Project config")
            && run.stdout.contains("Pending approval")
            && run
                .stdout
                .contains("agent-vault: configured; Claude Code asks once"),
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
            .contains("claude mcp get agent-vault: Scope: User config")
            && run.stdout.contains("Status: ✔ Connected")
            && run.stdout.contains(
                "agent-vault: connected; the vault is locked: run `vault unlock` to serve tools"
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
        .find(|l| l.starts_with("agent-vault: "))
        .unwrap_or_else(|| {
            panic!("claude mcp list does not list agent-vault:\n{listed}");
        });
    assert_eq!(
        line,
        format!("agent-vault: {} mcp - ✔ Connected", exe()),
        "{listed}"
    );
}

#[test]
fn gemini_cli_lists_agent_vault_as_connected_in_the_folder_setup_trusted() {
    let gemini = client_bin("gemini", "@google/gemini-cli");
    let mut w = World::around(TestVault::init("setup-gemini"));
    let trust = w.home.join(".gemini/trustedFolders.json");
    write_with_mode(&trust, "{\"/srv/elsewhere\": \"DO_NOT_TRUST\"}", 0o600);
    // User scope, in a folder nobody trusted: configured, and Gemini says it is disabled here.
    let run = w.setup_with_clients(&["gemini"], None).ok();
    assert!(
        run.stdout.contains("gemini mcp list: ○ agent-vault: ")
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
                .contains("agent-vault: connected; the vault is unlocked"),
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
    // The project's entry (it wins over the user's here): the command by name, found on PATH.
    let line = said
        .lines()
        .find(|l| l.contains(" agent-vault: "))
        .unwrap_or_else(|| {
            panic!("gemini mcp list does not list agent-vault:\n{said}");
        });
    assert_eq!(
        line, "✓ agent-vault: agent-vault mcp (stdio) - Connected",
        "{said}"
    );
}

/// Project scope writes what works on a teammate's machine: no path of this one (not the home,
/// not the vault, not this binary), and it says what each teammate needs; what would keep the
/// entry from working here is said too (no `agent-vault` on PATH, a vault away from the default).
#[test]
fn project_scope_names_no_path_of_this_machine_and_says_what_teammates_need() {
    let mut w = World::around(TestVault::empty("setup-portable"));
    let home = w.home.to_str().unwrap().to_owned();
    let vault_dir = w.vault.vault_dir().to_str().unwrap().to_owned();
    let exe_dir = Path::new(&exe())
        .parent()
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    for case in CASES.iter().filter(|c| c.scope == "project") {
        let label = case.label();
        let run = w.setup(&case.args()).ok();
        let text = std::fs::read_to_string(w.file(case)).unwrap();
        for (what, path) in [("home", &home), ("vault", &vault_dir), ("binary", &exe_dir)] {
            assert!(
                !text.contains(path.as_str()),
                "{label}: the {what} path {path} is in the file:\n{text}"
            );
        }
        assert!(!text.contains("VAULT_DIR"), "{label}:\n{text}");
        let says = &run.stdout;
        assert!(
            says.contains("is meant to be committed: it names the command `agent-vault`")
                && says.contains("Each teammate needs `agent-vault` on their PATH")
                && says.contains("their own vault at its default place (`vault init`)")
                // This PATH has no agent-vault, and this vault is not at the default place.
                && says.contains("`agent-vault` is not on your PATH here")
                && says.contains(&format!("Your vault is at {vault_dir}, not at the default place"))
                && says.contains(&format!("VAULT_DIR={vault_dir}")),
            "{label}: {says}"
        );
        // The person's own scope keeps naming this machine's paths.
        let user = CASES
            .iter()
            .find(|c| c.client == case.client && c.scope == "user")
            .unwrap();
        w.setup(&user.args()).ok();
        let text = std::fs::read_to_string(w.file(user)).unwrap();
        assert!(
            text.contains(&exe()) && text.contains(&vault_dir),
            "{label} (user):\n{text}"
        );
    }
    // With agent-vault on PATH (this program) there is nothing to say about it.
    let mut c = w.vault.command(&["setup", "cursor", "--scope", "project"]);
    c.current_dir(&w.project)
        .env("HOME", &w.home)
        .env("PATH", agent_vault_dir());
    let run = w.vault.run_command(&mut c, None).ok();
    assert!(
        !run.stdout.contains("agent-vault` is not on your PATH")
            && !run.stdout.contains("not this program"),
        "{}",
        run.stdout
    );
}

/// VS Code's mcp.json is JSONC (comments, trailing commas) and Gemini CLI's settings.json may
/// hold comments: the entry is set in place, every comment and the rest of the text kept, and a
/// second run changes no byte. Claude Code's .mcp.json is JSON: comments there are refused.
#[test]
fn a_jsonc_config_keeps_its_comments_and_trailing_commas() {
    let mut w = World::around(TestVault::empty("setup-jsonc"));
    let vscode = "{\n  // Servers of this project.\n  \"servers\": {\n    /* a linter */\n    \"lint\": {\"type\": \"stdio\", \"command\": \"lint\",},\n  },\n  \"inputs\": [],\n}\n";
    let gemini = "// Gemini settings\n{\n  \"theme\": \"Dracula\", // the dark one\n  \"mcpServers\": {}\n}\n";
    for (case, before) in [(&CASES[5], vscode), (&CASES[9], gemini)] {
        let label = case.label();
        let file = w.file(case);
        write_with_mode(&file, before, 0o644);
        w.setup(&case.args()).ok();
        let after = std::fs::read_to_string(&file).unwrap();
        for line in before
            .lines()
            .filter(|l| l.contains("//") || l.contains("/*"))
        {
            assert!(after.contains(line), "{label}: lost {line:?}:\n{after}");
        }
        assert!(
            after.starts_with(before.lines().next().unwrap()),
            "{label}:\n{after}"
        );
        let dialect = jsonc_parser::ParseOptions::default();
        let v: Value = jsonc_parser::parse_to_serde_value(&after, &dialect).unwrap();
        assert_eq!(
            v[case.servers]["agent-vault"],
            w.entry(case),
            "{label}:\n{after}"
        );
        let mut rest = v.clone();
        rest[case.servers]
            .as_object_mut()
            .unwrap()
            .remove("agent-vault");
        let old: Value = jsonc_parser::parse_to_serde_value(before, &dialect).unwrap();
        assert_eq!(rest, old, "{label}: only our entry changed");
        w.setup(&case.args()).ok();
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            after,
            "{label}: idempotent"
        );
    }
    // Gemini CLI reads comments, not trailing commas; Claude Code reads neither.
    for (case, text) in [
        (&CASES[9], "{\"mcpServers\": {},}\n"),
        (&CASES[1], "{\n  // x\n  \"mcpServers\": {}\n}\n"),
    ] {
        let file = w.file(case);
        write_with_mode(&file, text, 0o644);
        let run = w.setup(&case.args()).code(1);
        assert!(
            run.stderr.contains("is not valid JSON") && run.stderr.contains("leaves it as it is"),
            "{}: {}",
            case.label(),
            run.stderr
        );
        assert_eq!(std::fs::read_to_string(&file).unwrap(), text);
    }
}
