//! What `vault run` knows of each AI client it may start, by the name of its executable: the
//! state it keeps (writable inside), the files of that state it runs or trusts later (read-only
//! inside, whatever else is writable), the config file it rewrites in the home (a private copy
//! inside), its own model API key (the one secret-looking variable it keeps), and what it is
//! told inside (no self-update: its installation is read-only there). Any other program gets
//! none of these: no state of the person's, no key.
use std::path::Path;

/// One client's facts. Paths are relative to the home.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientFacts {
    /// Its executable's file name (`claude`, `gemini`, `codex`).
    pub program: &'static str,
    /// What it is called in messages.
    pub label: &'static str,
    /// Directories of its own state, writable inside (made if missing).
    pub state: &'static [&'static str],
    /// Inside `state`, what it runs or trusts later outside: read-only inside.
    pub runs_later: &'static [&'static str],
    /// Config files in the home it rewrites (atomically, by rename): each gets a private copy in
    /// the sandbox's home, and what the client writes there is not kept.
    pub private_copies: &'static [&'static str],
    /// Its model API key variables: kept in its environment.
    pub model_keys: &'static [&'static str],
    /// Variables set inside, with why in the docs.
    pub env: &'static [(&'static str, &'static str)],
    /// Its model API's hosts (and sign-in's): the proxy lets them through, as tunnels.
    pub api_hosts: &'static [&'static str],
    /// Variables that point it at another model endpoint: that URL's host passes too.
    pub base_url_vars: &'static [&'static str],
}

/// The clients `vault run` knows (the same ones `vault setup` writes for that are CLIs).
pub const CLIENTS: &[ClientFacts] = &[
    ClientFacts {
        program: "claude",
        label: "Claude Code",
        state: &[".claude", ".local/state/claude"],
        runs_later: &[
            ".claude/settings.json",
            ".claude/settings.local.json",
            ".claude/commands",
            ".claude/agents",
            ".claude/hooks",
            ".claude/plugins",
            ".claude/skills",
            ".claude/output-styles",
        ],
        private_copies: &[".claude.json"],
        model_keys: &[
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_AUTH_TOKEN",
            "CLAUDE_CODE_OAUTH_TOKEN",
        ],
        // Its installation is read-only inside: an update would fail half-way.
        env: &[("DISABLE_AUTOUPDATER", "1")],
        api_hosts: &["api.anthropic.com:443", "console.anthropic.com:443"],
        base_url_vars: &["ANTHROPIC_BASE_URL"],
    },
    ClientFacts {
        program: "gemini",
        label: "Gemini CLI",
        state: &[".gemini"],
        runs_later: &[
            ".gemini/settings.json",
            ".gemini/trustedFolders.json",
            ".gemini/commands",
            ".gemini/extensions",
        ],
        private_copies: &[],
        model_keys: &["GEMINI_API_KEY", "GOOGLE_API_KEY"],
        env: &[],
        api_hosts: &[
            "generativelanguage.googleapis.com:443",
            "cloudcode-pa.googleapis.com:443",
            "oauth2.googleapis.com:443",
        ],
        base_url_vars: &["GOOGLE_GEMINI_BASE_URL"],
    },
    ClientFacts {
        program: "codex",
        label: "Codex",
        state: &[".codex"],
        runs_later: &[".codex/config.toml", ".codex/prompts"],
        private_copies: &[],
        model_keys: &["OPENAI_API_KEY", "CODEX_API_KEY"],
        env: &[],
        api_hosts: &["api.openai.com:443", "auth.openai.com:443"],
        base_url_vars: &["OPENAI_BASE_URL"],
    },
];

/// The facts of the client whose executable (as named on the command line, or its link's
/// target) is `program`.
pub fn known(program: &Path) -> Option<&'static ClientFacts> {
    let names = [
        Some(program.to_path_buf()),
        std::fs::canonicalize(program).ok(),
    ];
    names.iter().flatten().find_map(|p| {
        let name = p.file_name()?.to_str()?;
        let name = name.strip_suffix(".exe").unwrap_or(name);
        let name = name.strip_suffix(".js").unwrap_or(name);
        CLIENTS.iter().find(|c| c.program == name)
    })
}

/// Files and directories in a project that editors, MCP clients and git run or trust when the
/// person opens it later, outside: read-only inside (and not to be created: issue 45).
pub const PROJECT_RUNS_LATER: &[&str] = &[
    ".mcp.json",
    ".vscode",
    ".idea",
    ".devcontainer",
    ".cursor",
    ".codex",
    ".claude/settings.json",
    ".claude/settings.local.json",
    ".claude/commands",
    ".claude/agents",
    ".claude/hooks",
    ".gemini/settings.json",
    ".gemini/commands",
    ".gitmodules",
];

/// Whether an environment variable's name says it holds a secret (Codex's rule, widened):
/// such a variable is not passed inside unless it is the client's own model key or named with
/// `--pass-env`.
pub fn secret_like(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    [
        "KEY",
        "SECRET",
        "TOKEN",
        "PASSWORD",
        "PASSWD",
        "CREDENTIAL",
        "PASSPHRASE",
        "AUTH",
    ]
    .iter()
    .any(|w| upper.contains(w))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clients_are_known_by_their_executables_name_and_secrets_by_their_variables_name() {
        assert_eq!(
            known(Path::new("/x/node_modules/.bin/claude"))
                .unwrap()
                .label,
            "Claude Code"
        );
        assert_eq!(known(Path::new("gemini.js")).unwrap().program, "gemini");
        assert!(known(Path::new("/usr/bin/python3")).is_none());
        for name in [
            "GH_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "npm_config_//registry:_authToken",
            "PGPASSWORD",
        ] {
            assert!(secret_like(name), "{name}");
        }
        for name in ["PATH", "HOME", "LANG", "TERM", "EDITOR", "COLORTERM"] {
            assert!(!secret_like(name), "{name}");
        }
    }
}
