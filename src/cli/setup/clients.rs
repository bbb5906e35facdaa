//! What `vault setup` knows of each MCP client: where its config lives in each scope (and the
//! environment overrides the client honours), the entry it reads, Gemini CLI's trusted folders,
//! and the client's own health command.
use super::jsonc::{set_jsonc, Jsonc};
use super::merge::{set_json, set_toml_server, Node, Server};
use anyhow::Context;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// The clients `vault setup` writes for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum Client {
    /// Claude Code: ~/.claude.json, or .mcp.json in this folder.
    Claude,
    /// Cursor: ~/.cursor/mcp.json, or .cursor/mcp.json.
    Cursor,
    /// VS Code: the user mcp.json, or .vscode/mcp.json.
    Vscode,
    /// Codex: ~/.codex/config.toml, or .codex/config.toml.
    Codex,
    /// Gemini CLI: ~/.gemini/settings.json, or .gemini/settings.json (and the folder trusted).
    Gemini,
}

/// Whose config: the person's (every project) or this folder's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum Scope {
    User,
    Project,
}

/// Where the person's files are: their home, the folder `vault setup` runs in, and the
/// overrides the clients themselves honour.
pub(super) struct Places {
    pub(super) home: PathBuf,
    pub(super) cwd: PathBuf,
    /// The platform config dir (VS Code's user `mcp.json` is under it).
    config_dir: Option<PathBuf>,
    /// `$CLAUDE_CONFIG_DIR` (Claude Code then keeps `.claude.json` there).
    claude_dir: Option<PathBuf>,
    /// `$CODEX_HOME` (default `~/.codex`).
    codex_home: Option<PathBuf>,
    /// `$GEMINI_CLI_TRUSTED_FOLDERS_PATH` (default `~/.gemini/trustedFolders.json`).
    gemini_trust: Option<PathBuf>,
}

impl Places {
    pub(super) fn from_env() -> anyhow::Result<Self> {
        let var = |k: &str| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let home = dirs::home_dir().context(
            "cannot find your home directory, where the clients keep their config: set HOME",
        )?;
        let cwd = std::env::current_dir()
            .and_then(std::fs::canonicalize)
            .context(
                "cannot read the current folder; cd into a folder that exists and run it again",
            )?;
        Ok(Self {
            home,
            cwd,
            config_dir: dirs::config_dir(),
            claude_dir: var("CLAUDE_CONFIG_DIR"),
            codex_home: var("CODEX_HOME"),
            gemini_trust: var("GEMINI_CLI_TRUSTED_FOLDERS_PATH"),
        })
    }

    /// Claude Code's user config, `~/.claude.json` (or in `$CLAUDE_CONFIG_DIR`).
    pub(super) fn claude_config(&self) -> PathBuf {
        self.claude_dir
            .as_ref()
            .unwrap_or(&self.home)
            .join(".claude.json")
    }

    /// Gemini CLI's record of trusted folders.
    pub(super) fn gemini_trusted_folders(&self) -> PathBuf {
        self.gemini_trust
            .clone()
            .unwrap_or_else(|| self.home.join(".gemini/trustedFolders.json"))
    }
}

impl Client {
    /// The name `vault setup` takes.
    pub(super) fn arg(self) -> &'static str {
        match self {
            Client::Claude => "claude",
            Client::Cursor => "cursor",
            Client::Vscode => "vscode",
            Client::Codex => "codex",
            Client::Gemini => "gemini",
        }
    }

    /// The program a person starts in a terminal (and so under `vault run`), if it is one.
    pub(super) fn terminal_program(self) -> Option<&'static str> {
        match self {
            Client::Claude => Some("claude"),
            Client::Codex => Some("codex"),
            Client::Gemini => Some("gemini"),
            Client::Cursor | Client::Vscode => None,
        }
    }

    pub(super) fn label(self) -> &'static str {
        match self {
            Client::Claude => "Claude Code",
            Client::Cursor => "Cursor",
            Client::Vscode => "VS Code",
            Client::Codex => "Codex",
            Client::Gemini => "Gemini CLI",
        }
    }

    /// The file this client reads its MCP servers from, in `scope`.
    pub(super) fn config_path(self, scope: Scope, at: &Places) -> anyhow::Result<PathBuf> {
        let (home, cwd) = (&at.home, &at.cwd);
        Ok(match (self, scope) {
            (Client::Claude, Scope::User) => at.claude_config(),
            (Client::Claude, Scope::Project) => cwd.join(".mcp.json"),
            (Client::Cursor, Scope::User) => home.join(".cursor/mcp.json"),
            (Client::Cursor, Scope::Project) => cwd.join(".cursor/mcp.json"),
            (Client::Vscode, Scope::User) => at
                .config_dir
                .as_ref()
                .context("cannot find your config directory (VS Code keeps its user mcp.json there): set HOME, or use --scope project")?
                .join("Code/User/mcp.json"),
            (Client::Vscode, Scope::Project) => cwd.join(".vscode/mcp.json"),
            (Client::Codex, Scope::User) => {
                at.codex_home.clone().unwrap_or_else(|| home.join(".codex")).join("config.toml")
            }
            (Client::Codex, Scope::Project) => cwd.join(".codex/config.toml"),
            (Client::Gemini, Scope::User) => home.join(".gemini/settings.json"),
            (Client::Gemini, Scope::Project) => cwd.join(".gemini/settings.json"),
        })
    }

    /// Where the entry sits in the file, as the output names it (`mcpServers.vault`).
    pub(super) fn entry_key(self, name: &str) -> String {
        format!("{}.{name}", self.servers_key())
    }

    fn servers_key(self) -> &'static str {
        match self {
            Client::Vscode => "servers",
            Client::Codex => "mcp_servers",
            _ => "mcpServers",
        }
    }

    /// The JSON entry, its members in the order people write them. Claude Code and VS Code name
    /// the transport (`type`); Cursor and Gemini CLI read a `command` as stdio.
    fn json_entry(self, s: &Server) -> Node<'static> {
        let mut members = Vec::new();
        if matches!(self, Client::Claude | Client::Vscode) {
            members.push(("type".to_owned(), Node::New(json!("stdio"))));
        }
        members.push(("command".to_owned(), Node::New(json!(s.command))));
        members.push(("args".to_owned(), Node::New(json!(["mcp"]))));
        if let Some(dir) = &s.vault_dir {
            members.push(("env".to_owned(), Node::New(json!({"VAULT_DIR": dir}))));
        }
        if self == Client::Gemini && s.trust {
            members.push(("trust".to_owned(), Node::New(json!(true))));
        }
        Node::Object(members)
    }

    /// What the client reads beyond JSON, and so what `vault setup` keeps when it edits the file:
    /// VS Code's JSONC; Gemini CLI's comments. Claude Code, Cursor: JSON.
    fn jsonc(self) -> Option<Jsonc> {
        match self {
            Client::Vscode => Some(Jsonc::CommentsAndTrailingCommas),
            Client::Gemini => Some(Jsonc::Comments),
            _ => None,
        }
    }

    /// The file's new text: `existing` (None: no file) with our entry set and nothing else
    /// changed. An existing file that does not parse, or whose shape is not the client's, is
    /// refused: it is never rewritten.
    pub(super) fn render(
        self,
        existing: Option<&str>,
        file: &Path,
        s: &Server,
    ) -> anyhow::Result<String> {
        let path = [self.servers_key(), s.name.as_str()];
        let plain = |t: &str| serde_json::from_str::<serde::de::IgnoredAny>(t).is_ok();
        match (self, self.jsonc(), existing) {
            (Client::Codex, ..) => set_toml_server(existing, file, s),
            // A file only its client's dialect reads (comments, trailing commas) is edited in
            // place, those kept; plain JSON as before.
            (_, Some(dialect), Some(text)) if !text.trim().is_empty() && !plain(text) => {
                set_jsonc(text, dialect, file, &path, self.json_entry(s))
            }
            _ => set_json(existing, file, &path, self.json_entry(s)),
        }
    }

    /// The client's own check of a configured server: program and arguments.
    pub(super) fn health(self, name: &str) -> Option<(&'static str, Vec<String>)> {
        match self {
            Client::Claude => Some(("claude", vec!["mcp".into(), "get".into(), name.into()])),
            Client::Gemini => Some(("gemini", vec!["mcp".into(), "list".into()])),
            _ => None,
        }
    }

    /// How a person checks by hand that the client started the server.
    pub(super) fn check_by_hand(self, name: &str) -> String {
        match self {
            Client::Claude => format!("`claude mcp get {name}` should say \"Connected\""),
            Client::Gemini => format!("`gemini mcp list` should list {name} as \"Connected\""),
            Client::Cursor => format!("Cursor Settings → MCP should list {name} with a green dot"),
            Client::Vscode => {
                format!("in VS Code, \"MCP: List Servers\" should show {name} running")
            }
            Client::Codex => format!(
                "`codex mcp list` should list {name}; `/mcp` in a Codex session shows its tools"
            ),
        }
    }
}

/// What Gemini CLI's trusted folders say of a folder, by its own rule: the longest rule whose
/// folder (for `TRUST_PARENT`, the rule's parent) holds it wins.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Trust {
    /// Trusted already, by this rule's folder.
    Already(String),
    /// The person marked it `DO_NOT_TRUST` (this rule): left alone.
    Refused(String),
    /// No rule: the new text of the file, with the folder trusted.
    Add(String),
}

/// Gemini CLI's verdict on `folder` from `trustedFolders.json` (`existing`), and the file with
/// the folder trusted when no rule decides it.
pub(super) fn gemini_trust(
    existing: Option<&str>,
    file: &Path,
    folder: &Path,
) -> anyhow::Result<Trust> {
    let text = existing.filter(|t| !t.trim().is_empty()).unwrap_or("{}");
    let rules: serde_json::Map<String, Value> = serde_json::from_str(text).map_err(|e| {
        anyhow::anyhow!(
            "{} is not a JSON object of folders ({e}); vault setup leaves it as it is. Fix it, or trust the folder in Gemini CLI (it asks on its first start there)",
            file.display()
        )
    })?;
    let mut best: Option<(usize, &str, &str)> = None;
    for (rule, level) in &rules {
        let level = level.as_str().unwrap_or_default();
        let covers = match level {
            "TRUST_FOLDER" | "DO_NOT_TRUST" => Path::new(rule),
            "TRUST_PARENT" => Path::new(rule).parent().unwrap_or(Path::new(rule)),
            _ => continue,
        };
        let covers = std::fs::canonicalize(covers).unwrap_or_else(|_| covers.to_owned());
        if folder.starts_with(&covers) && best.is_none_or(|(n, ..)| rule.len() > n) {
            best = Some((rule.len(), rule, level));
        }
    }
    Ok(match best {
        Some((_, rule, "DO_NOT_TRUST")) => Trust::Refused(rule.to_owned()),
        Some((_, rule, _)) => Trust::Already(rule.to_owned()),
        None => {
            let key = folder.to_str().context(
                "the current folder's path is not UTF-8; Gemini CLI's trust file cannot name it",
            )?;
            Trust::Add(set_json(
                existing,
                file,
                &[key],
                Node::New(json!("TRUST_FOLDER")),
            )?)
        }
    })
}

/// The other servers a project's Gemini settings name (trusting the folder lets them start too).
pub(super) fn other_servers(text: &str, ours: &str) -> Vec<String> {
    let v: Value = Jsonc::Comments.parse(text).unwrap_or_default();
    let servers = v.get("mcpServers").and_then(Value::as_object);
    servers
        .into_iter()
        .flat_map(|m| m.keys())
        .filter(|k| *k != ours)
        .cloned()
        .collect()
}
