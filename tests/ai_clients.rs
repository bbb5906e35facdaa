//! `vault mcp` inside the real AI clients people run, offline: Claude Code (with its tool search
//! and without) and Gemini CLI, installed by `.ci/run` into `.ci/ai-clients` at pinned versions.
//! Each client is configured with the command `packaging/mcp-clients.md` gives (read from that
//! file), in a throwaway HOME, and runs one headless turn against `model_standin.py`, a local
//! stand-in for its model API that asks for `http_request` on a bearer credential (approval
//! `each`) to the loopback target's `/inject` route. A person approves through `vault approve`
//! while the turn waits. Then everything the client sent its model is read back: the call
//! completed, no form of the secret is anywhere in it, and the target's injection canary appears
//! only under an `untrusted…` key of the tool result the client forwarded.
mod support;

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use support::ai::*;
use support::standin::*;
use support::target::HttpTarget;
use support::*;

const SECRET: &str = "DECOY_ai_client_tok_51f0c7a2";
const CANARY: &str = "IGNOREALLPREVIOUSINSTRUCTIONSzr4";
/// A turn (one approval included) that takes longer than this has stalled.
const TURN_LIMIT: Duration = Duration::from_secs(120);
const SETUP_LIMIT: Duration = Duration::from_secs(60);

/// One test's world: the target, a vault whose credential `api` is bound to it, a HOME for the
/// client and a project folder to run it in.
struct World {
    target: HttpTarget,
    vault: TestVault,
    home: TempDir,
    project: PathBuf,
    started: Instant,
}

impl World {
    fn new(tag: &str) -> Self {
        let started = Instant::now();
        let target = HttpTarget::start(SECRET);
        let mut vault = TestVault::init(tag);
        vault.add_bearer_with("api", &target.base(), SECRET, &["--approval", "each"]);
        // Outside /tmp (which `vault run` makes private): the contained turns then meet the
        // real home's rules (only the client's own state writable), as a person's would.
        let home = TempDir(
            Path::new(env!("CARGO_TARGET_TMPDIR"))
                .join(format!("{tag}-home-{}", std::process::id())),
        );
        let _ = std::fs::remove_dir_all(home.path());
        let project = home.path().join("project");
        std::fs::create_dir_all(&project).unwrap();
        // A repository of its own, as projects are: the clients take its root as the project
        // (not the checkout this test runs in).
        let init = Command::new("git")
            .arg("init")
            .arg("-q")
            .arg(&project)
            .output()
            .unwrap();
        assert!(init.status.success(), "git init: {init:?}");
        Self {
            target,
            vault,
            home,
            project,
            started,
        }
    }

    fn url(&self) -> String {
        format!("{}/inject?c={}", self.target.base(), hex::encode(CANARY))
    }

    /// The stand-in's plan: this credential and URL, and the tool search's query (if it is to
    /// search first).
    fn plan(&self, search: Option<&str>) -> Value {
        json!({"credential": "api", "url": self.url(), "wait_s": 60, "search_query": search})
    }

    fn prompt(&self) -> String {
        format!(
            "Use the agent-vault tools: GET {} with the credential api.",
            self.url()
        )
    }

    fn command(&self, program: &Path) -> Command {
        client_command(
            program,
            self.home.path(),
            &self.project,
            &self.vault.vault_dir(),
        )
    }

    /// Runs a line of the docs in the project folder, as a user types it into a shell.
    fn doc_line(&self, line: &str) -> ClientRun {
        let mut sh = self.command(Path::new("sh"));
        sh.args(["-c", line]);
        run_ok(line, sh, SETUP_LIMIT)
    }

    /// The secret reached the target, once, as the bearer token: the credential was used.
    fn target_got_the_secret_once(&self) {
        let got = self.target.requests();
        assert_eq!(got.len(), 1, "one request reached the target: {got:?}");
        assert!(got[0]["path"].as_str().unwrap().starts_with("/inject"));
        assert_eq!(
            got[0]["headers"]["authorization"],
            format!("Bearer {SECRET}")
        );
    }
}

/// What every client must have sent its model, given the tool results it forwarded (parsed):
/// no form of the secret (or the passphrase) in any request, raw or decoded; the call
/// completed; the canary came back in every field the target planted it in, and everywhere it
/// occurs in any request it sits under an `untrusted…` key of a forwarded tool result, beside
/// the note.
fn assert_what_the_model_saw(label: &str, requests: &[(String, Value)], results: &[Value]) {
    assert!(
        !requests.is_empty(),
        "{label}: the client never asked its model"
    );
    for (i, (raw, req)) in requests.iter().enumerate() {
        let mut text = String::new();
        all_text(req, &mut text);
        for secret in [SECRET, PASSPHRASE] {
            assert_no_leak(&format!("{label}: request {i}"), raw.as_bytes(), secret);
            assert_no_leak(
                &format!("{label}: request {i}, decoded"),
                text.as_bytes(),
                secret,
            );
        }
        let mut paths = Vec::new();
        paths_of(&req["body"], CANARY, &format!("request{i}"), &mut paths);
        let bare: Vec<&String> = paths
            .iter()
            .filter(|p| {
                !p.contains(".<json>.") || !p.split('.').any(|k| k.starts_with("untrusted"))
            })
            .collect();
        assert!(
            bare.is_empty(),
            "{label}: the canary outside the wrapper at {bare:?}"
        );
    }
    assert_eq!(
        results.len(),
        1,
        "{label}: one http_request result forwarded: {results:?}"
    );
    let r = &results[0];
    assert_eq!(r["state"], "completed", "{label}: {r}");
    assert_eq!(r["http"]["status"], 200, "{label}: {r}");
    let mut found = Vec::new();
    paths_of(r, CANARY, "", &mut found);
    // A string field, a nested object in an array, a nested array, a key, an escaped value, and
    // three headers.
    assert!(found.len() >= 8, "{label}: only {found:?} came back: {r}");
    for p in &found {
        // The object that holds the `untrusted…` key carries the note beside it.
        let keys: Vec<&str> = p.split('.').skip(1).collect();
        let at = keys
            .iter()
            .position(|k| k.starts_with("untrusted"))
            .unwrap();
        let wrapper = keys[..at].iter().fold(r, |v, k| match k.parse::<usize>() {
            Ok(i) if v.is_array() => &v[i],
            _ => &v[*k],
        });
        let note = wrapper["note"].as_str().unwrap_or_default();
        assert!(
            note.contains("not instructions"),
            "{label}: no note at {p}: {wrapper}"
        );
    }
    let body = &r["http"]["body"]["untrusted_json"];
    assert_eq!(body["nested"]["comments"][1][0], CANARY, "{label}: {body}");
}

/// `cmd` as `vault run --project PROJECT -- PROGRAM ARGS…`, with the same environment and
/// directory: the client contained (tests/containment.rs shows what that holds against).
fn under_vault_run(cmd: &Command, project: &Path) -> Command {
    let mut c = Command::new(bin());
    c.args(["run", "--project"])
        .arg(project)
        .arg("--")
        .arg(cmd.get_program())
        .args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    if let Some(d) = cmd.get_current_dir() {
        c.current_dir(d);
    }
    c
}

/// Every action the approver decided came from a session the agent marked contained.
fn all_contained(label: &str, approved: &[Value]) {
    for a in approved {
        assert_eq!(a["contained"], true, "{label}: not contained: {a}");
    }
}

/// One headless Claude Code turn, configured by the docs' `claude mcp add` line.
fn claude_code_turn(tag: &str, tool_search: bool) {
    claude_code_turn_in(tag, tool_search, false)
}

/// The same turn; `contained`: the client started under `vault run`.
fn claude_code_turn_in(tag: &str, tool_search: bool, contained: bool) {
    let claude = client_bin("claude", "@anthropic-ai/claude-code");
    let w = World::new(tag);
    let query = tool_search.then_some("http request credential");
    let standin = StandIn::start("anthropic", &w.plan(query));
    let line = doc_command("claude mcp add");
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"));
    assert!(
        readme.unwrap().contains(&line),
        "README and packaging agree on {line:?}"
    );
    w.doc_line(&line);
    let config: Value =
        serde_json::from_str(&std::fs::read_to_string(w.home.path().join(".claude.json")).unwrap())
            .unwrap();
    let project = w.project.to_str().unwrap();
    let server = &config["projects"][project]["mcpServers"]["agent-vault"];
    assert_eq!(
        server["command"],
        bin(),
        "an absolute path to vault: {config}"
    );
    let setup = w.started.elapsed();

    let approver = Approver::start(w.vault.vault_dir());
    let mut cmd = w.command(&claude);
    cmd.args(["-p", &w.prompt(), "--allowedTools", "mcp__agent-vault"])
        .args(["--output-format", "json"])
        .env("ANTHROPIC_BASE_URL", standin.base())
        .env("ANTHROPIC_API_KEY", "sk-ant-standin-dummy")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1");
    if !tool_search {
        cmd.env("ENABLE_TOOL_SEARCH", "false");
    }
    if contained {
        cmd = under_vault_run(&cmd, &w.project);
    }
    let run = run_ok(tag, cmd, TURN_LIMIT);
    let approved = approver.finish();
    assert_eq!(
        approved.len(),
        1,
        "{tag}: one action approved: {approved:?}"
    );
    if contained {
        all_contained(tag, &approved);
    }
    let out: Value = serde_json::from_str(&run.stdout).expect("claude prints its result as JSON");
    assert_eq!(out["result"], STANDIN_FINAL, "{tag}: the turn ended: {out}");
    w.target_got_the_secret_once();

    let requests = standin.requests();
    let first = &requests[0].1["body"];
    let tools = first["tools"].as_array().unwrap();
    let offered = |name: &str| tools.iter().find(|t| t["name"] == name);
    let http = offered("mcp__agent-vault__http_request");
    if tool_search {
        assert!(offered("ToolSearch").is_some(), "{tag}: no ToolSearch");
        assert!(
            http.is_none_or(|t| t["defer_loading"] == true),
            "{tag}: http_request was not deferred: {http:?}"
        );
        let found = claude_tool_results(&requests, SEARCH_CALL_ID);
        let names: Vec<&Value> = found
            .iter()
            .flat_map(|r| r["content"].as_array().into_iter().flatten())
            .filter(|b| b["type"] == "tool_reference")
            .map(|b| &b["tool_name"])
            .collect();
        assert!(
            names.iter().any(|n| *n == "mcp__agent-vault__http_request"),
            "{tag}: the tool search did not find http_request: {found:?}"
        );
    } else {
        let http = http.expect("http_request offered up front");
        assert!(http.get("defer_loading").is_none(), "{tag}: {http}");
        let description = http["description"].as_str().unwrap();
        assert!(
            description.starts_with(&http_request_opening()),
            "{description}"
        );
    }
    assert_what_the_model_saw(tag, &requests, &claude_results(&requests));
    println!(
        "{tag}: {} requests to the model; setup {:.1} s, turn {:.1} s, test {:.1} s",
        requests.len(),
        setup.as_secs_f64(),
        run.wall.as_secs_f64(),
        w.started.elapsed().as_secs_f64()
    );
}

#[test]
fn claude_code_with_tool_search_finds_http_request_and_forwards_only_wrapped_text() {
    claude_code_turn("claude-search", true);
}

#[test]
fn claude_code_without_tool_search_forwards_only_wrapped_text() {
    claude_code_turn("claude-plain", false);
}

#[test]
fn claude_code_under_vault_run_does_a_whole_gated_turn_contained() {
    claude_code_turn_in("claude-contained", false, true);
}

/// Answers Gemini CLI's "Do you trust the files in this folder?" with "1. Trust folder", on a
/// terminal, as a person does on the first start in a folder.
fn trust_in_gemini_dialog(w: &World, mut cmd: Command) {
    let trusted = w.home.path().join(".gemini/trustedFolders.json");
    cmd.env("TERM", "xterm-256color");
    let mut term = pty::PtySession::spawn(cmd, None);
    let asked = term.wait_for("trust the files in this folder", SETUP_LIMIT);
    assert!(asked, "gemini never asked about trust:\n{}", term.output());
    let recorded = || std::fs::read_to_string(&trusted).is_ok_and(|t| t.contains("TRUST_FOLDER"));
    // A key typed while the dialog is still settling can be lost: press again, as a person would.
    let deadline = Instant::now() + SETUP_LIMIT;
    while !recorded() {
        assert!(
            Instant::now() < deadline,
            "no trust recorded:\n{}",
            term.output()
        );
        term.send("1");
        let pressed = Instant::now();
        while !recorded() && pressed.elapsed() < Duration::from_secs(3) {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let recorded: Value =
        serde_json::from_str(&std::fs::read_to_string(&trusted).unwrap()).unwrap();
    assert_eq!(
        recorded[w.project.to_str().unwrap()],
        "TRUST_FOLDER",
        "{recorded}"
    );
}

#[test]
fn gemini_cli_in_a_trusted_folder_forwards_only_wrapped_text() {
    gemini_turn("gemini", false);
}

#[test]
fn gemini_cli_under_vault_run_does_a_whole_gated_turn_contained() {
    gemini_turn("gemini-contained", true);
}

/// One headless Gemini CLI turn in a folder the person trusted; `contained`: under `vault run`.
fn gemini_turn(tag: &str, contained: bool) {
    let gemini = client_bin("gemini", "@google/gemini-cli");
    let w = World::new(tag);
    let standin = StandIn::start("gemini", &w.plan(None));
    // What a person's first start records when they pick "Use Gemini API key" (Gemini CLI needs
    // it here: with GOOGLE_GEMINI_BASE_URL set it reads the auth type from the environment as
    // "gateway", which it then rejects), and no usage statistics or update checks (no traffic
    // but to the stand-in).
    let settings = json!({"security": {"auth": {"selectedType": "gemini-api-key"}},
        "privacy": {"usageStatisticsEnabled": false},
        "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false}});
    std::fs::create_dir_all(w.home.path().join(".gemini")).unwrap();
    std::fs::write(
        w.home.path().join(".gemini/settings.json"),
        settings.to_string(),
    )
    .unwrap();
    let gemini_env = |mut c: Command| {
        c.env("GOOGLE_GEMINI_BASE_URL", standin.base())
            .env("GEMINI_API_KEY", "standin-dummy-key");
        c
    };
    w.doc_line(&doc_command("gemini mcp add"));
    let project = std::fs::read_to_string(w.project.join(".gemini/settings.json")).unwrap();
    let project: Value = serde_json::from_str(&project).unwrap();
    let server = &project["mcpServers"]["agent-vault"];
    assert_eq!(
        server["command"],
        bin(),
        "an absolute path to vault: {project}"
    );
    assert_eq!(server["trust"], true, "{project}");
    let list = || {
        let mut c = gemini_env(w.command(&gemini));
        c.args(["mcp", "list"]);
        let out = run_ok("gemini mcp list", c, SETUP_LIMIT);
        out.stdout + &out.stderr
    };
    let before = list();
    assert!(
        before.contains("agent-vault") && before.contains("Disabled"),
        "{before}"
    );
    trust_in_gemini_dialog(&w, gemini_env(w.command(&gemini)));
    let after = list();
    assert!(
        after.contains("Connected"),
        "after trusting the folder: {after}"
    );
    let setup = w.started.elapsed();

    let approver = Approver::start(w.vault.vault_dir());
    let mut cmd = gemini_env(w.command(&gemini));
    cmd.args(["-p", &w.prompt(), "--output-format", "json"]);
    if contained {
        cmd = under_vault_run(&cmd, &w.project);
    }
    let run = run_ok("gemini -p", cmd, TURN_LIMIT);
    let approved = approver.finish();
    assert_eq!(approved.len(), 1, "one action approved: {approved:?}");
    if contained {
        all_contained(tag, &approved);
    }
    let out: Value = serde_json::from_str(&run.stdout).expect("gemini prints its result as JSON");
    assert_eq!(out["response"], STANDIN_FINAL, "the turn ended: {out}");
    let calls = &out["stats"]["tools"]["byName"]["mcp_agent-vault_http_request"];
    assert_eq!(calls["success"], 1, "{out}");
    w.target_got_the_secret_once();

    let requests = standin.requests();
    let declared = requests.iter().find_map(|(_, r)| {
        let tools = r["body"]["tools"].as_array()?;
        let mut decls = tools
            .iter()
            .flat_map(|t| t["functionDeclarations"].as_array().into_iter().flatten());
        decls
            .find(|d| d["name"] == "mcp_agent-vault_http_request")
            .cloned()
    });
    let declared = declared.expect("http_request offered to the model");
    let description = declared["description"].as_str().unwrap();
    assert!(
        description.contains(&http_request_opening()),
        "{description}"
    );
    assert_what_the_model_saw(tag, &requests, &gemini_results(&requests));
    println!(
        "{tag}: {} requests to the model; setup {:.1} s, turn {:.1} s, test {:.1} s",
        requests.len(),
        setup.as_secs_f64(),
        run.wall.as_secs_f64(),
        w.started.elapsed().as_secs_f64()
    );
}

/// The first sentence of `http_request`'s description, as schema/tools/http_request.json has it:
/// what the client must have passed on to the model.
fn http_request_opening() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("schema/tools/http_request.json");
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let description = schema["description"].as_str().expect("a description");
    description.split(". ").next().unwrap().to_owned()
}

/// Claude Code started interactively under `vault run` in a tmux pane, as a person starts it
/// (issue 45): its prompt shows. Its `~/.claude.json` is a private copy inside (the client
/// rewrites it by rename, and what it writes there could name MCP servers that run later
/// outside): the person's own file is unchanged after the run, and the rename worked inside.
#[test]
fn claude_code_starts_interactively_under_vault_run_and_shows_its_prompt() {
    let claude = client_bin("claude", "@anthropic-ai/claude-code");
    let w = World::new("claude-tty");
    let key = "sk-ant-standin-dummy-interactive-0001";
    // Onboarding done, this folder trusted, the key approved: what a person's file holds.
    let config = w.home.path().join(".claude.json");
    let person = json!({"hasCompletedOnboarding": true, "theme": "dark",
        "customApiKeyResponses": {"approved": [&key[key.len() - 20..]], "rejected": []},
        "projects": {w.project.to_str().unwrap(): {"hasTrustDialogAccepted": true}}});
    std::fs::write(&config, person.to_string()).unwrap();
    let before = std::fs::read(&config).unwrap();
    let standin = StandIn::start("anthropic", &w.plan(None));
    let tmux = support::tmux::Tmux::start(
        "claude-tty",
        &[
            ("HOME", w.home.path().display().to_string()),
            ("VAULT_DIR", w.vault.vault_dir().display().to_string()),
            ("ANTHROPIC_API_KEY", key.to_owned()),
            ("ANTHROPIC_BASE_URL", standin.base()),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".to_owned()),
        ],
        120,
        40,
    );
    tmux.type_text(&format!(
        "cd {} && {} run -- {}; echo \"vault run ended: $?\"",
        w.project.display(),
        bin(),
        claude.display()
    ));
    tmux.press("Enter");
    tmux.wait_for("Claude Code v", Duration::from_secs(60));
    let prompt = tmux.wait_for("\u{276f}", Duration::from_secs(30));
    assert!(!prompt.contains("Unable to connect"), "{prompt}");
    // From outside: the client that shows it, a descendant of this pane's shell (not a Claude
    // Code another test of this file runs beside it), runs in namespaces of its own.
    let real = std::fs::canonicalize(&claude).unwrap();
    let pane = tmux
        .command()
        .args(["display-message", "-p", "#{pane_pid}"])
        .output()
        .unwrap();
    let pane: u32 = String::from_utf8_lossy(&pane.stdout)
        .trim()
        .parse()
        .expect("the pane's pid");
    let running: Vec<u32> = support::world::descendants(pane)
        .into_iter()
        .filter(|p| std::fs::read_link(format!("/proc/{p}/exe")).is_ok_and(|e| e == real))
        .collect();
    assert!(!running.is_empty(), "no Claude Code process runs");
    let ns = |p: &str| std::fs::read_link(format!("{p}/ns/mnt")).unwrap();
    for p in running {
        assert_ne!(
            ns(&format!("/proc/{p}")),
            ns("/proc/self"),
            "Claude Code is not contained"
        );
    }
    tmux.type_text("/exit");
    tmux.press("Enter");
    tmux.wait_for("vault run ended: 0", Duration::from_secs(30));
    assert_eq!(
        std::fs::read(&config).unwrap(),
        before,
        "the person's ~/.claude.json changed"
    );
}

/// `vault setup gemini` and headless use (issue 48): without `--trust`, Gemini CLI offers the
/// model none of the vault's tools in `gemini -p` (it drops every tool it would have to
/// confirm), and `vault setup` says so and what to run; with `--trust` the entry says
/// `"trust": true` and the same `gemini -p` offers them. Judged at the model stand-in, by what
/// the real Gemini CLI declared to it.
#[test]
fn vault_setup_gemini_says_what_headless_needs_and_trust_makes_it_work() {
    let gemini = client_bin("gemini", "@google/gemini-cli");
    let w = World::new("gemini-setup-trust");
    let standin = StandIn::start("gemini", &w.plan(None));
    let settings = json!({"security": {"auth": {"selectedType": "gemini-api-key"}},
        "privacy": {"usageStatisticsEnabled": false},
        "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false}});
    std::fs::create_dir_all(w.home.path().join(".gemini")).unwrap();
    std::fs::write(
        w.home.path().join(".gemini/settings.json"),
        settings.to_string(),
    )
    .unwrap();
    let offered = |extra: &[&str]| -> (String, bool) {
        let mut setup = w.command(Path::new(bin()));
        // Gemini CLI off PATH for this step: its own health check (`gemini mcp list`, seconds of
        // Node start-up) is tested in gemini_turn; here what counts is what `gemini -p` offers.
        setup
            .args(["setup", "gemini", "--scope", "project"])
            .args(extra)
            .env("PATH", "/usr/bin:/bin");
        let said = run_ok("vault setup gemini", setup, SETUP_LIMIT).stdout;
        let before = standin.requests().len();
        let mut c = w.command(&gemini);
        c.args(["-p", &w.prompt(), "--output-format", "json"])
            .env("GOOGLE_GEMINI_BASE_URL", standin.base())
            .env("GEMINI_API_KEY", "standin-dummy-key")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        // What it declares goes with the turn's first request to the model: the first that
        // declares any tool (a request of Gemini's model router, which declares none, comes
        // before it). The turn itself (which would wait for a card nobody approves here) is
        // then cut short: its whole process group.
        let declarations = |r: &Value| -> Vec<String> {
            r["body"]["tools"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|t| t["functionDeclarations"].as_array().into_iter().flatten())
                .filter_map(|d| d["name"].as_str().map(str::to_owned))
                .collect()
        };
        std::os::unix::process::CommandExt::process_group(&mut c, 0);
        let mut child = c.spawn().unwrap();
        let t0 = Instant::now();
        let turn = loop {
            let requests = standin.requests();
            let turn = requests[before..]
                .iter()
                .map(|(_, r)| declarations(r))
                .find(|d| !d.is_empty());
            if turn.is_some() || t0.elapsed() > Duration::from_secs(60) {
                break turn;
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        let group = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
        let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        let _ = child.wait();
        let turn = turn.expect("gemini never asked its model for a turn with tools");
        let declared = turn.iter().any(|d| d == "mcp_agent-vault_http_request");
        (said, declared)
    };
    let (said, declared) = offered(&[]);
    assert!(
        !declared,
        "offered without --trust: the control does not hold"
    );
    assert!(
        said.contains("Headless `gemini -p` offers the model none") && said.contains("--trust"),
        "{said}"
    );
    let (said, declared) = offered(&["--trust"]);
    assert!(
        declared,
        "vault setup gemini --trust: headless gemini still offers no vault tool"
    );
    assert!(
        !said.contains("Headless `gemini -p` offers the model none"),
        "{said}"
    );
    let entry: Value = serde_json::from_str(
        &std::fs::read_to_string(w.project.join(".gemini/settings.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(entry["mcpServers"]["agent-vault"]["trust"], true, "{entry}");
}
