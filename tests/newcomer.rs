//! A newcomer's path, tested end to end (issue 48): README.md's "Quick start" and "Bring your
//! secrets in" followed as written, from an empty HOME, with nothing but what a person types.
//! `vault init` on a real terminal (passphrase and PIN typed at its prompts, the vault in the
//! default `~/.local/share/agent-vault`); `vault scan` finds a `.env` token; the README's `vault
//! add http … --secret-from env:.env#KEY --remove-from-source` line imports it (its host the
//! loopback target); `vault scan --no-home` is clean; `vault setup claude`; `vault run -- claude
//! -p …` (the real Claude Code, contained, its model the stand-in) while the person approves the
//! card in `vault approve` in a real tmux pane (passphrase, `a`, PIN). Then the effects: the
//! target got the secret once, `vault log` says completed, `vault verify` holds, the `.env` line
//! is a comment, and the token is nowhere else: not in any output, in what the model saw, or in
//! a file of the home. `tests/readme.rs` runs the README's lines without a terminal.
mod support;

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use support::ai::{client_bin, client_command};
use support::pty::PtySession;
use support::standin::*;
use support::target::HttpTarget;
use support::tmux::Tmux;
use support::*;

/// The token the newcomer's `.env` holds (a decoy; `sk_live_` makes `vault scan` call it Stripe's).
const TOKEN: &str = "sk_live_DECOY_newcomer_7f3a91c2e5";
/// How long one prompt or screen may take to show.
const STEP: Duration = Duration::from_secs(30);
/// How long the whole headless turn may take (one approval included).
const TURN_LIMIT: Duration = Duration::from_secs(90);

/// The README's `sh` lines, comments cut (`# …` after a space; `env:.env#KEY` keeps its `#`).
fn readme_lines() -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md");
    let readme = std::fs::read_to_string(path).expect("read README.md");
    let (mut out, mut in_sh) = (Vec::new(), false);
    for line in readme.lines() {
        if line.starts_with("```") {
            in_sh = line == "```sh";
        } else if in_sh {
            let cmd = line.split(" # ").next().unwrap_or("").trim();
            if !cmd.is_empty() {
                out.push(cmd.to_owned());
            }
        }
    }
    out
}

/// The README's line that starts with `prefix`, as written.
fn readme_line(lines: &[String], prefix: &str) -> String {
    lines
        .iter()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("README.md has no `{prefix}…` line: {lines:#?}"))
        .clone()
}

/// The newcomer's machine: an empty HOME (outside /tmp, which `vault run` makes private) with
/// a project in it. Locks the vault on drop, which stops its agent.
struct Newcomer {
    home: TempDir,
    project: PathBuf,
    /// Everything any step printed, for the leak checks.
    said: Vec<(String, String)>,
}

impl Newcomer {
    fn new() -> Self {
        let home = TempDir(
            Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("newcomer-{}", std::process::id())),
        );
        let _ = std::fs::remove_dir_all(home.path());
        let project = home.path().join("project");
        std::fs::create_dir_all(&project).expect("make the project folder");
        let git = Command::new("git")
            .args(["init", "-q"])
            .arg(&project)
            .output();
        assert!(
            git.is_ok_and(|o| o.status.success()),
            "git init the project"
        );
        Self {
            home,
            project,
            said: Vec::new(),
        }
    }

    /// Where `vault init` puts the vault when nothing says otherwise.
    fn vault_dir(&self) -> PathBuf {
        self.home.path().join(".local/share/agent-vault")
    }

    /// A shell line as the person types it in the project: their HOME, `vault` and `claude` on
    /// PATH, no VAULT_DIR or passphrase file, nothing of the developer's own client set-up.
    fn line(&self, line: &str) -> Command {
        let mut c = client_command(
            Path::new("sh"),
            self.home.path(),
            &self.project,
            Path::new(""),
        );
        c.env_remove("VAULT_DIR").args(["-c", line]);
        c
    }

    /// Runs `line` with no terminal; its exit code and output (kept for the leak checks).
    fn run(&mut self, line: &str) -> (Option<i32>, String) {
        let f = run_limited(&mut self.line(line), STEP).expect("start sh");
        let out = String::from_utf8_lossy(&f.stdout).into_owned();
        let err = String::from_utf8_lossy(&f.stderr).into_owned();
        self.said.push((format!("`{line}`"), format!("{out}{err}")));
        (f.status.and_then(|s| s.code()), format!("{out}{err}"))
    }

    /// Runs `line` on a real terminal, typing each answer once its prompt shows; its output.
    fn on_terminal(&mut self, line: &str, script: &[(&str, &str)]) -> String {
        let mut term = PtySession::spawn(self.line(line), None);
        for (prompt, answer) in script {
            let shown = term.wait_for(prompt, STEP);
            assert!(shown, "`{line}` never asked {prompt:?}:\n{}", term.output());
            // A prompt shows before echo is off; a person answers a moment later.
            std::thread::sleep(Duration::from_millis(200));
            term.send(&format!("{answer}\r"));
        }
        let code = term.finish(STEP);
        let out = term.output();
        self.said
            .push((format!("`{line}` (terminal)"), out.clone()));
        assert_eq!(code, Some(0), "`{line}` on a terminal:\n{out}");
        out
    }
}

impl Drop for Newcomer {
    fn drop(&mut self) {
        if self.vault_dir().join("vault.id").exists() {
            let _ = self.line("vault lock").output();
        }
    }
}

#[test]
fn a_newcomer_follows_the_readme_from_an_empty_home_to_an_approved_call() {
    let started = Instant::now();
    // Installed by `.ci/run`; missing, the test fails and says how to install it.
    client_bin("claude", "@anthropic-ai/claude-code");
    support::tmux::require();
    let readme = readme_lines();
    let target = HttpTarget::start(TOKEN);
    let mut me = Newcomer::new();

    // Quick start: `vault init`, on a terminal, the passphrase and the PIN typed twice each.
    let init = readme_line(&readme, "vault init");
    let said = me.on_terminal(
        &init,
        &[
            ("New vault passphrase", PASSPHRASE),
            ("Repeat the passphrase", PASSPHRASE),
            ("New approval PIN", PIN),
            ("Repeat the PIN", PIN),
        ],
    );
    let dir = me.vault_dir();
    assert!(
        said.contains("Created vault") && said.contains(dir.to_str().unwrap()),
        "init names the default vault directory {}:\n{said}",
        dir.display()
    );
    assert!(said.contains("Unlocked: agent pid"), "{said}");
    assert!(
        dir.join("vault.db").exists(),
        "no vault in {}",
        dir.display()
    );

    // Bring your secrets in: the project's `.env` holds a token.
    let env_file = me.project.join(".env");
    std::fs::write(&env_file, format!("PORT=8080\nSTRIPE_KEY={TOKEN}\n")).expect("write .env");
    let scan = readme_line(&readme, "vault scan");
    assert_eq!(scan, "vault scan", "the README's first scan line changed");
    let (code, said) = me.run(&scan);
    assert_eq!(code, Some(1), "`vault scan` finds the token:\n{said}");
    assert!(
        said.contains(".env:2") && said.contains("stripe") && said.contains("vault add http"),
        "`vault scan` names the line, its kind and the command:\n{said}"
    );
    // The README's import line, its host the loopback target (which needs its scheme).
    let add = readme_line(&readme, "vault add http stripe");
    assert!(
        add.contains("--secret-from env:.env#STRIPE_KEY --remove-from-source"),
        "{add}"
    );
    let add = add.replace("api.stripe.com", &target.base());
    let said = me.on_terminal(&add, &[("passphrase", PASSPHRASE)]);
    assert!(said.contains("Added stripe"), "{said}");
    let env_now = std::fs::read_to_string(&env_file).expect("read .env back");
    let lines: Vec<&str> = env_now.lines().collect();
    assert_eq!(lines.first(), Some(&"PORT=8080"), "{env_now}");
    assert!(
        lines
            .get(1)
            .is_some_and(|l| l.starts_with('#') && l.contains("stripe")),
        "the token's line is a comment naming the credential:\n{env_now}"
    );
    let clean = readme_line(&readme, "vault scan --no-home");
    let (code, said) = me.run(&clean);
    assert_eq!(code, Some(0), "`{clean}` after the import:\n{said}");

    // `vault setup claude`: writes ~/.claude.json and checks with `claude mcp get`.
    let setup = readme_line(&readme, "vault setup claude");
    let (code, said) = me.run(&setup);
    assert_eq!(code, Some(0), "`{setup}`:\n{said}");
    let config = std::fs::read_to_string(me.home.path().join(".claude.json"));
    let config: Value = serde_json::from_str(&config.expect("setup wrote ~/.claude.json"))
        .expect("~/.claude.json is JSON");
    let entry = &config["mcpServers"]["agent-vault"];
    assert_eq!(entry["command"], bin(), "{config}");
    assert_eq!(entry["env"]["VAULT_DIR"], dir.to_str().unwrap(), "{config}");

    // The person's terminal for approvals: `vault approve` in a tmux pane, the passphrase typed.
    let url = format!("{}/v1/charges?limit=1", target.base());
    let plan = json!({"credential": "stripe", "url": url, "wait_s": 30,
        "search_query": "http request credential"});
    let standin = StandIn::start("anthropic", &plan);
    let shell = me.line("");
    let path = shell
        .get_envs()
        .find(|(k, _)| *k == "PATH")
        .and_then(|(_, v)| v);
    let path = path.expect("a PATH").to_string_lossy().into_owned();
    let empty = String::new;
    let tmux = Tmux::start(
        "newcomer",
        &[
            ("HOME", me.home.path().display().to_string()),
            // Empty is unset to `vault`: nothing of the developer's own set-up comes in.
            ("VAULT_DIR", empty()),
            ("VAULT_PASSPHRASE_FILE", empty()),
            ("XDG_DATA_HOME", empty()),
        ],
        120,
        40,
    );
    let approve = readme_line(&readme, "vault approve");
    // tmux gives a new pane its client's PATH whatever `-e` says: the person's shell has `vault`
    // on its PATH (the README's install puts it there), so the pane's is set as theirs is.
    tmux.type_text(&format!(
        "export PATH='{path}'; cd {} && {approve}",
        me.project.display()
    ));
    tmux.press("Enter");
    tmux.wait_for("Vault passphrase", STEP);
    tmux.type_text(PASSPHRASE);
    tmux.press("Enter");
    tmux.wait_for("No action waits", STEP);

    // `vault run -- claude`, headless: one turn whose model asks for the imported credential.
    let run = readme_line(&readme, "vault run -- claude");
    assert_eq!(run, "vault run -- claude", "the README's run line changed");
    let prompt = format!("Use the agent-vault tools: GET {url} with the credential stripe.");
    let mut turn = me.line(&format!(
        "{run} -p \"$PROMPT\" --allowedTools mcp__agent-vault --output-format json"
    ));
    turn.env("PROMPT", &prompt)
        .env("ANTHROPIC_BASE_URL", standin.base())
        .env("ANTHROPIC_API_KEY", "sk-ant-standin-dummy")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1");
    // Bounded: killed after TURN_LIMIT (the test then fails on what reached the target).
    let turn = std::thread::spawn(move || run_limited(&mut turn, TURN_LIMIT));

    // The card shows in the pane; the person reads it, presses `a` and types the PIN.
    let card = tmux.wait_for("[a]pprove once", Duration::from_secs(60));
    for want in [
        "http_request",
        "stripe",
        "GET",
        "/v1/charges",
        "contained by vault run",
    ] {
        assert!(card.contains(want), "the card shows {want:?}:\n{card}");
    }
    std::thread::sleep(Duration::from_millis(800));
    tmux.press("a");
    tmux.wait_for("PIN to approve", STEP);
    tmux.type_text(PIN);
    tmux.press("Enter");

    let f = turn
        .join()
        .expect("the turn's thread")
        .expect("start `vault run`");
    let code = f.status.and_then(|s| s.code());
    let stdout = String::from_utf8_lossy(&f.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&f.stderr).into_owned();
    let said = format!(
        "`vault run -- claude -p`: exit {code:?} (None: killed after {TURN_LIMIT:?})\n\
         stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    // The effects. The target got one request, carrying the imported token.
    let got = target.requests();
    assert_eq!(
        got.len(),
        1,
        "one request reached the target: {got:?}\n{said}"
    );
    assert_eq!(code, Some(0), "{said}");
    me.said.push(("claude's stdout".into(), stdout.clone()));
    me.said.push(("vault run's stderr".into(), stderr));
    let shown = tmux.wait_for("No action waits", STEP);
    me.said.push(("the approver's pane".into(), shown));
    tmux.press("q");
    let out: Value = serde_json::from_str(&stdout).expect("claude prints its result as JSON");
    assert_eq!(out["result"], STANDIN_FINAL, "the turn ended: {out}");
    assert_eq!(got[0]["path"], "/v1/charges?limit=1", "{got:?}");
    assert_eq!(
        got[0]["headers"]["authorization"],
        format!("Bearer {TOKEN}")
    );
    // What the model saw: the call completed, and no form of the token (or the passphrase).
    let requests = standin.requests();
    let results = claude_results(&requests);
    assert_eq!(results.len(), 1, "one http_request result: {results:?}");
    assert_eq!(results[0]["state"], "completed", "{}", results[0]);
    assert_eq!(results[0]["http"]["status"], 200, "{}", results[0]);
    for (i, (raw, body)) in requests.iter().enumerate() {
        let mut text = String::new();
        all_text(body, &mut text);
        for secret in [TOKEN, PASSPHRASE] {
            assert_no_leak(&format!("model request {i}"), raw.as_bytes(), secret);
            assert_no_leak(
                &format!("model request {i}, decoded"),
                text.as_bytes(),
                secret,
            );
        }
    }
    // `vault log`: the action, completed; `vault verify`: the journal holds.
    let (code, log) = me.run("vault log");
    assert_eq!(code, Some(0), "vault log:\n{log}");
    let row = log
        .lines()
        .find(|l| l.contains("http_request") && l.contains("stripe"));
    let row = row.unwrap_or_else(|| panic!("no http_request row for stripe in vault log:\n{log}"));
    assert!(
        row.contains("completed") && row.contains("/v1/charges"),
        "{log}"
    );
    let (code, said) = me.run("vault verify");
    assert_eq!(code, Some(0), "vault verify:\n{said}");
    // The token is in no output of any step, and in no file of the home (the vault's own files
    // are encrypted).
    for (what, text) in &me.said {
        assert_no_leak(what, text.as_bytes(), TOKEN);
    }
    for file in files_under(me.home.path()) {
        if let Ok(bytes) = std::fs::read(&file) {
            assert_no_leak(&file.display().to_string(), &bytes, TOKEN);
        }
    }
    println!(
        "newcomer: {} model requests; turn {:.1} s, test {:.1} s",
        requests.len(),
        f.wall.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
}
