//! The plan on its own: what a tree of files becomes in the view, with no mount made.
use super::*;
use std::path::{Path, PathBuf};

fn spec(root: &Path) -> Spec {
    Spec {
        home: root.join("home"),
        project: root.join("home/proj"),
        vault_dir: root.join("home/.local/share/agent-vault"),
        vault_exe: root.join("home/.cargo/bin/vault"),
        runtime_dir: Some(root.join("run")),
        program: root.join("home/tools/node_modules/.bin/claude"),
        allow_write: Vec::new(),
        allow_read: Vec::new(),
        pass_env: Vec::new(),
        env: vec![
            (
                "PATH".into(),
                format!("{}:/usr/bin", root.join("home/.cargo/bin").display()).into(),
            ),
            ("TMUX".into(), "/tmp/tmux-1/default,1,0".into()),
            ("SSH_AUTH_SOCK".into(), "/tmp/ssh-x/agent.1".into()),
            ("GH_TOKEN".into(), "ghp_x".into()),
            ("AWS_SECRET_ACCESS_KEY".into(), "x".into()),
            ("ANTHROPIC_API_KEY".into(), "sk-ant-x".into()),
            ("LANG".into(), "C.UTF-8".into()),
        ],
    }
}

fn tree(tag: &str) -> PathBuf {
    let root = std::env::temp_dir().join(format!("av-plan-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    for d in [
        "home/proj/.git/hooks",
        "home/proj/sub/.git",
        "home/proj/node_modules/dep/.git",
        "home/proj/.vscode",
        "home/.ssh",
        "home/.aws",
        "home/.local/share/agent-vault",
        "home/.cargo/bin",
        "home/tools/node_modules/@anthropic-ai/claude-code/bin",
        "home/tools/node_modules/.bin",
    ] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    for f in [
        "home/.netrc",
        "home/.bashrc",
        "home/.gitconfig",
        "home/proj/.git/config",
        "home/proj/sub/.git/config",
        "home/proj/.mcp.json",
        "home/.cargo/bin/vault",
        "home/tools/node_modules/@anthropic-ai/claude-code/bin/claude.exe",
    ] {
        std::fs::write(root.join(f), "x").unwrap();
    }
    std::os::unix::fs::symlink(
        "../@anthropic-ai/claude-code/bin/claude.exe",
        root.join("home/tools/node_modules/.bin/claude"),
    )
    .unwrap();
    root
}

fn shown(p: &Plan, path: &Path) -> Option<bool> {
    p.shown.iter().find(|s| s.path == path).map(|s| s.writable)
}

#[test]
fn the_view_holds_the_project_the_clients_state_and_installation_and_nothing_else_of_the_home() {
    let root = tree("view");
    let home = root.join("home");
    let p = Plan::new(&spec(&root)).unwrap();
    assert_eq!(p.client.map(|c| c.program), Some("claude"));
    assert_eq!(shown(&p, &home.join("proj")), Some(true));
    assert_eq!(shown(&p, &home.join(".claude")), Some(true));
    assert_eq!(shown(&p, &home.join("tools/node_modules")), Some(false));
    assert_eq!(shown(&p, &home.join(".cargo/bin/vault")), Some(false));
    assert_eq!(shown(&p, &home.join(".gitconfig")), Some(false));
    // The home is a private tmpfs: its secrets, rc files and the vault are simply not shown.
    assert!(p.private.contains(&home));
    for absent in [
        ".ssh",
        ".aws",
        ".netrc",
        ".bashrc",
        ".local/share/agent-vault",
        ".cargo",
    ] {
        assert!(
            !p.shown
                .iter()
                .any(|s| home.join(absent).starts_with(&s.path)),
            "{absent} is shown: {:?}",
            p.shown
        );
    }
    assert!(p.hidden_dirs.is_empty() && p.hidden_files.is_empty());
    // A link on PATH to the vault is made again inside.
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn what_runs_later_is_read_only_pinned_or_not_to_be_created() {
    let root = tree("guard");
    let home = root.join("home");
    let p = Plan::new(&spec(&root)).unwrap();
    for ro in [
        "proj/.git/config",
        "proj/.git/hooks",
        "proj/sub/.git/config",
        "proj/sub/.git/hooks",
        "proj/.vscode",
        "proj/.mcp.json",
        ".claude/settings.json",
        ".claude/commands",
    ] {
        assert!(
            p.read_only.contains(&home.join(ro)),
            "{ro}: {:?}",
            p.read_only
        );
    }
    assert!(p.pinned.contains(&home.join("proj/.git")));
    assert!(p.pinned.contains(&home.join("proj/sub/.git")));
    // The gate: the writable paths, where only the repositories' git directories may hold
    // HEAD, and the missing guarded paths may not be made.
    let writable: Vec<&PathBuf> = p.writable().filter(|w| !p.private.contains(w)).collect();
    assert_eq!(p.gate.trees.iter().collect::<Vec<_>>(), writable);
    assert_eq!(
        p.gate.allowed_under,
        [home.join("proj/.git"), home.join("proj/sub/.git")]
    );
    assert_eq!(p.gate.refused, p.must_not_create);
    for missing in [
        "proj/.git/commondir",
        "proj/.git/config.worktree",
        "proj/.idea",
        "proj/.gitmodules",
        "proj/.claude/settings.json",
    ] {
        assert!(p.must_not_create.contains(&home.join(missing)), "{missing}");
    }
    // node_modules is not searched for repositories.
    assert!(!p
        .pinned
        .iter()
        .any(|d| d.starts_with(home.join("proj/node_modules"))));
    // The client's missing hook settings are made empty first, then bound read-only.
    assert!(p
        .placeholders
        .contains(&(home.join(".claude/settings.json"), "{}\n")));
    assert!(p.to_create().contains(&home.join(".claude")));
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn the_environment_drops_other_tools_tokens_but_keeps_the_clients_own_key() {
    let root = tree("env");
    let mut s = spec(&root);
    let names = |p: &Plan| -> Vec<String> {
        p.env
            .iter()
            .map(|(k, _)| k.to_str().unwrap().to_owned())
            .collect()
    };
    let p = Plan::new(&s).unwrap();
    let have = names(&p);
    for k in ["PATH", "LANG", "ANTHROPIC_API_KEY", "DISABLE_AUTOUPDATER"] {
        assert!(have.contains(&k.to_owned()), "{k}: {have:?}");
    }
    for k in ["TMUX", "SSH_AUTH_SOCK", "GH_TOKEN", "AWS_SECRET_ACCESS_KEY"] {
        assert!(!have.contains(&k.to_owned()), "{k}: {have:?}");
    }
    // Another program keeps no key; --pass-env names one.
    s.program = PathBuf::from("/usr/bin/python3");
    s.pass_env = vec!["GH_TOKEN".into()];
    let have = names(&Plan::new(&s).unwrap());
    assert!(!have.contains(&"ANTHROPIC_API_KEY".to_owned()));
    assert!(have.contains(&"GH_TOKEN".to_owned()));
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn allowing_the_home_guards_its_rc_files_and_refuses_to_let_new_ones_be_made() {
    let root = tree("home");
    let mut s = spec(&root);
    let home = root.join("home");
    s.allow_write = vec![home.clone()];
    let e = Plan::new(&s).unwrap_err();
    assert!(matches!(e, PlanError::VaultInside(_)), "{e}");
    s.vault_dir = root.join("elsewhere");
    // ~/.zshrc does not exist: a writable home would let the client create it.
    let e = Plan::new(&s).unwrap_err();
    assert!(matches!(e, PlanError::WouldCreate { .. }), "{e}");
    // A narrower directory is fine; --allow-read ~ shows the home but hides its secrets.
    s.allow_write = vec![home.join("notes")];
    s.allow_read = vec![home.clone()];
    let p = Plan::new(&s).unwrap();
    assert!(p.hidden_dirs.contains(&home.join(".ssh")));
    assert!(p.hidden_files.contains(&home.join(".netrc")));
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn a_worktree_guards_its_git_dir_and_the_common_one() {
    let root = tree("wt");
    let common = root.join("main/.git");
    std::fs::create_dir_all(common.join("worktrees/w")).unwrap();
    std::fs::write(common.join("worktrees/w/commondir"), "../..\n").unwrap();
    let w = root.join("w");
    std::fs::create_dir_all(&w).unwrap();
    std::fs::write(
        w.join(".git"),
        format!("gitdir: {}\n", common.join("worktrees/w").display()),
    )
    .unwrap();
    let (dirs, files) = guard::repositories(&w).unwrap();
    assert!(dirs.contains(&common.join("worktrees/w/../..")), "{dirs:?}");
    assert!(dirs.contains(&common.join("worktrees/w")), "{dirs:?}");
    assert_eq!(files, [w.join(".git")]);
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn the_metadata_gate_keeps_the_roots_the_git_directories_and_what_holds_a_protected_name() {
    let root = tree("kept");
    let home = root.join("home");
    std::fs::create_dir_all(home.join("proj/.claude")).unwrap();
    std::fs::create_dir_all(home.join("notes")).unwrap();
    let mut s = spec(&root);
    s.allow_write = vec![home.join("notes")];
    let p = Plan::new(&s).unwrap();
    for kept in [
        // Each writable root: the project, the client's state, --allow-write.
        "proj",
        ".claude",
        "notes",
        // Each repository's git directory (pinned), and the directory that holds it.
        "proj/.git",
        "proj/sub/.git",
        "proj/sub",
        // What holds a name the view protects: a missing `.claude/commands` could be made
        // there by another user, were it world-writable.
        "proj/.claude",
    ] {
        assert!(p.kept.contains(&home.join(kept)), "{kept}: {:?}", p.kept);
    }
    // Nothing outside the writable paths (the home is a private tmpfs inside), nothing beneath
    // a read-only bind, no directory that merely lies in the project.
    for not in ["", "proj/.vscode", "proj/node_modules", "proj/.git/hooks"] {
        assert!(!p.kept.contains(&home.join(not)), "{not}: {:?}", p.kept);
    }
    assert!(p
        .kept
        .iter()
        .all(|k| p.gate.trees.iter().any(|t| k.starts_with(t))));
    let _ = std::fs::remove_dir_all(root);
}
