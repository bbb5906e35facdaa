//! `vault scan`: every usual credential file under a seeded `$HOME` and every `.env*` file of a
//! project (nested ones too) is named with its line, kind and a `vault add` command; no decoy
//! value appears in any output, in any encoding, with logs at trace; `--json` holds the same
//! findings; an encrypted SSH key, non-secret keys and skipped directories give nothing; a clean
//! scan exits 0 in one line; no vault directory is ever created.
mod support;

use std::path::Path;
use std::process::{Command, Output};
use support::*;

/// (path under the root, file text, decoy values in it).
type Seed = (&'static str, &'static str, &'static [&'static str]);

const HOME_FILES: &[Seed] = &[
    (".npmrc", "registry=https://registry.npmjs.org/\n//registry.npmjs.org/:_authToken=npm_DecoyNpmrc0000000000000001\n", &["npm_DecoyNpmrc0000000000000001"]),
    (".netrc", "machine api.example.com\n  login alice\n  password decoy-netrc-pw-0002\n", &["decoy-netrc-pw-0002"]),
    (".git-credentials", "https://alice:decoy-gitcred-0003@github.com\n", &["decoy-gitcred-0003"]),
    (".aws/credentials", "[default]\naws_access_key_id = AKIADECOYDECOY000004\naws_secret_access_key = decoyAwsSecret00000000000000000000000005\n", &["AKIADECOYDECOY000004", "decoyAwsSecret00000000000000000000000005"]),
    (".config/gh/hosts.yml", "github.com:\n    user: alice\n    oauth_token: gho_DecoyGhHosts00000000000006\n    git_protocol: https\n", &["gho_DecoyGhHosts00000000000006"]),
    (".docker/config.json", "{\n  \"auths\": {\n    \"registry.example.com\": {\n      \"auth\": \"DecoyDockerAuth0007\"\n    }\n  }\n}\n", &["DecoyDockerAuth0007"]),
    (".pypirc", "[distutils]\nindex-servers =\n    pypi\n\n[pypi]\nusername = __token__\npassword = pypi-DecoyPypirc000000000008\n", &["pypi-DecoyPypirc000000000008"]),
    (".cargo/credentials.toml", "[registry]\ntoken = \"cioDecoyCargo0000000000000009\"\n", &["cioDecoyCargo0000000000000009"]),
    (".config/hub", "github.com:\n- user: alice\n  oauth_token: DecoyHubToken0010\n  protocol: https\n", &["DecoyHubToken0010"]),
    (".kube/config", "apiVersion: v1\nclusters:\n- cluster:\n    server: https://k8s.example.com\n  name: c\nusers:\n- name: u\n  user:\n    token: DecoyKubeToken0011\n", &["DecoyKubeToken0011"]),
    (".gem/credentials", "---\n:rubygems_api_key: rubygems_DecoyGem0012\n", &["rubygems_DecoyGem0012"]),
    (".terraform.d/credentials.tfrc.json", "{\n  \"credentials\": {\n    \"app.terraform.io\": {\n      \"token\": \"DecoyTerraform0013\"\n    }\n  }\n}\n", &["DecoyTerraform0013"]),
    (".pgpass", "# host:port:db:user:password\ndb.example.com:5432:app:alice:DecoyPgpass0014\n", &["DecoyPgpass0014"]),
    (".composer/auth.json", "{\n  \"github-oauth\": {\n    \"github.com\": \"DecoyComposer0015\"\n  }\n}\n", &["DecoyComposer0015"]),
    (".config/gcloud/application_default_credentials.json", "{\n  \"client_id\": \"x.apps.googleusercontent.com\",\n  \"client_secret\": \"DecoyGcloudClient0016\",\n  \"refresh_token\": \"DecoyGcloudRefresh0017\",\n  \"type\": \"authorized_user\"\n}\n", &["DecoyGcloudClient0016", "DecoyGcloudRefresh0017"]),
    (".config/gcloud/legacy_credentials/alice@example.com/adc.json", "{\n  \"refresh_token\": \"DecoyGcloudLegacy0018\"\n}\n", &["DecoyGcloudLegacy0018"]),
];

const PROJECT_FILES: &[Seed] = &[
    (".env", "# app\nPORT=8080\nOPENAI_API_KEY=sk-DecoyEnvOpenai00000000000019\nexport DATABASE_URL=\"postgres://app:DecoyEnvDbPw0020@db:5432/app\"\n", &["sk-DecoyEnvOpenai00000000000019", "DecoyEnvDbPw0020"]),
    (".env.local", "STRIPE_SECRET='DecoyEnvLocal0021' # live\nDEBUG=1\n", &["DecoyEnvLocal0021"]),
    ("services/api/.env", "GITHUB_TOKEN=ghp_DecoyNested000000000000000022\n", &["ghp_DecoyNested000000000000000022"]),
    // Never entered: dependencies and version control.
    ("node_modules/pkg/.env", "API_KEY=DecoyIgnored0023\n", &["DecoyIgnored0023"]),
    (".git/.env", "API_KEY=DecoyIgnored0024\n", &["DecoyIgnored0024"]),
];

/// (path under home or project, line, kind): what the seeded scan must report, and only that.
const HOME_EXPECTED: &[(&str, usize, &str)] = &[
    (".npmrc", 2, "npm-token"),
    (".netrc", 3, "netrc-password"),
    (".git-credentials", 1, "git-credentials"),
    (".aws/credentials", 3, "aws-credentials"),
    (".config/gh/hosts.yml", 3, "gh-token"),
    (".docker/config.json", 4, "docker-auth"),
    (".pypirc", 7, "pypi-password"),
    (".cargo/credentials.toml", 2, "cargo-token"),
    (".config/hub", 3, "hub-token"),
    (".kube/config", 9, "kube-token"),
    (".gem/credentials", 2, "gem-credentials"),
    (".terraform.d/credentials.tfrc.json", 4, "terraform-token"),
    (".pgpass", 2, "pgpass"),
    (".composer/auth.json", 3, "composer-auth"),
    (
        ".config/gcloud/application_default_credentials.json",
        4,
        "gcloud-credentials",
    ),
    (
        ".config/gcloud/legacy_credentials/alice@example.com/adc.json",
        2,
        "gcloud-credentials",
    ),
    (".ssh/id_ed25519", 1, "ssh-key"),
];
const PROJECT_EXPECTED: &[(&str, usize, &str)] = &[
    (".env", 3, "openai-key"),
    (".env", 4, "url-password"),
    (".env.local", 1, "env-secret"),
    ("services/api/.env", 1, "github-token"),
];

fn seed(root: &Path, files: &[Seed]) {
    for (rel, text, _) in files {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
}

fn keygen(path: &Path, passphrase: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let st = Command::new("ssh-keygen")
        .args([
            "-q",
            "-t",
            "ed25519",
            "-C",
            "scan-test",
            "-N",
            passphrase,
            "-f",
        ])
        .arg(path)
        .status()
        .expect("ssh-keygen (apt-get install openssh-client)");
    assert!(st.success());
}

/// `vault scan ARGS` in `cwd` with `HOME=home`, no `VAULT_DIR` (so the default vault directory
/// would be under this home), logs at trace.
fn scan(home: &Path, cwd: &Path, args: &[&str]) -> Output {
    Command::new(bin())
        .arg("scan")
        .args(args)
        .current_dir(cwd)
        .env("HOME", home)
        .env_remove("VAULT_DIR")
        .env_remove("XDG_DATA_HOME")
        .env("VAULT_LOG", "trace")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}

fn expected(home: &Path, project: &Path) -> Vec<(String, usize, String)> {
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap();
    let mut want: Vec<_> = PROJECT_EXPECTED
        .iter()
        .map(|(rel, line, kind)| (canon(project).join(rel), *line, *kind))
        .chain(
            HOME_EXPECTED
                .iter()
                .map(|(rel, line, kind)| (home.join(rel), *line, *kind)),
        )
        .map(|(p, l, k)| (p.to_string_lossy().into_owned(), l, k.to_owned()))
        .collect();
    want.sort();
    want
}

#[test]
fn every_usual_place_is_named_with_its_line_and_kind_and_no_value() {
    let t = TempDir::new("scan");
    let (home, project) = (t.path().join("home"), t.path().join("project"));
    seed(&home, HOME_FILES);
    seed(&project, PROJECT_FILES);
    let key = home.join(".ssh/id_ed25519");
    keygen(&key, "");
    keygen(&home.join(".ssh/id_encrypted"), "a passphrase");
    // The unencrypted key's body is a decoy too.
    let key_text = std::fs::read_to_string(&key).unwrap();
    let key_body = key_text.lines().nth(1).unwrap().to_owned();

    let text = scan(&home, &project, &[]);
    let json = scan(&home, &project, &["--json"]);
    let explicit = scan(&home, t.path(), &[project.to_str().unwrap()]);
    for out in [&text, &json, &explicit] {
        assert_eq!(
            out.status.code(),
            Some(1),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        for (what, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
            for (_, _, decoys) in HOME_FILES.iter().chain(PROJECT_FILES) {
                for d in *decoys {
                    assert_no_leak(what, bytes, d);
                }
            }
            assert_no_leak(what, bytes, &key_body);
        }
    }
    let want = expected(&home, &project);

    // Text: `PATH:LINE: KIND`, then the command, indented; then one summary line.
    let stdout = String::from_utf8(text.stdout).unwrap();
    let mut got: Vec<(String, usize, String)> = stdout
        .lines()
        .filter(|l| !l.starts_with(' ') && l.contains(": "))
        .filter_map(|l| {
            let (loc, kind) = l.rsplit_once(": ")?;
            let (path, line) = loc.rsplit_once(':')?;
            Some((path.to_owned(), line.parse().ok()?, kind.to_owned()))
        })
        .collect();
    got.sort();
    assert_eq!(got, want, "{stdout}");
    assert!(!stdout.contains("id_encrypted"), "{stdout}");
    assert!(
        !stdout.contains("node_modules") && !stdout.contains(".git/"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("{} secret(s)", want.len())),
        "{stdout}"
    );
    // The last line names what to fill in (the commands hold NAME, HOST and USER here) and what
    // is left to do by hand (the .env lines go with --remove-from-source; the others do not).
    let last = stdout.lines().last().unwrap();
    assert!(
        last.contains("(fill in NAME, HOST and USER)")
            && last.contains("where the command does not (--remove-from-source does)"),
        "{last}"
    );
    assert_eq!(
        String::from_utf8(explicit.stdout).unwrap(),
        stdout,
        "DIR given or the working directory: the same report"
    );

    // JSON: the same findings, each with a command.
    let arr: Vec<serde_json::Value> = serde_json::from_slice(&json.stdout).unwrap();
    let mut from_json: Vec<(String, usize, String)> = arr
        .iter()
        .map(|f| {
            let obj = f.as_object().unwrap();
            let mut keys: Vec<_> = obj.keys().map(String::as_str).collect();
            keys.sort();
            assert_eq!(keys, ["command", "kind", "line", "path"]);
            let cmd = f["command"].as_str().unwrap();
            assert!(
                cmd.starts_with("vault add ")
                    || cmd.starts_with("# ")
                    || cmd.starts_with("gh auth token"),
                "{cmd}"
            );
            assert!(stdout.contains(&format!("    {cmd}\n")), "{cmd}");
            (
                f["path"].as_str().unwrap().to_owned(),
                f["line"].as_u64().unwrap() as usize,
                f["kind"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    from_json.sort();
    assert_eq!(from_json, want);

    // The commands: dotenv lines through `env:FILE#KEY`, known hosts named, keys by file.
    let command_of = |suffix: &str, line: usize| -> String {
        arr.iter()
            .find(|f| f["path"].as_str().unwrap().ends_with(suffix) && f["line"] == line)
            .unwrap_or_else(|| panic!("no finding for {suffix}:{line}"))["command"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let env = std::fs::canonicalize(&project)
        .unwrap()
        .join("services/api/.env");
    assert_eq!(
        command_of("services/api/.env", 1),
        format!(
            "vault add http github-token --host api.github.com --bearer --secret-from env:{}#GITHUB_TOKEN --remove-from-source",
            env.display()
        )
    );
    assert!(
        command_of("project/.env", 3).contains("--host api.openai.com --bearer --secret-from env:")
    );
    assert!(command_of("project/.env.local", 1).contains("--host HOST --bearer --secret-from env:"));
    assert!(command_of(".npmrc", 2)
        .starts_with("vault add http npm --host registry.npmjs.org --bearer --secret-stdin"));
    assert!(command_of("gh/hosts.yml", 3).starts_with(
        "gh auth token --hostname github.com | vault add http github --host api.github.com"
    ));
    let ssh = command_of("id_ed25519", 1);
    assert!(
        ssh.starts_with(&format!(
            "vault add ssh NAME --host HOST --user USER --key-file {} --fetch-host-key",
            key.display()
        )),
        "{ssh}"
    );
    assert!(command_of("project/.env", 4).starts_with("# a password inside a URL"));
    assert!(command_of(".aws/credentials", 3).starts_with("# "));

    // No vault: neither the default directory under this home nor anything else was created.
    assert!(
        !home.join(".local").exists(),
        "a vault directory was created"
    );
}

#[test]
fn a_clean_home_and_project_exit_0_in_one_line() {
    let t = TempDir::new("scan-clean");
    let (home, project) = (t.path().join("home"), t.path().join("project"));
    seed(
        &project,
        &[(
            ".env",
            "PORT=8080\nDEBUG=1\nAPI_KEY=\nTOKEN_URL=https://example.com/token\n",
            &[],
        )],
    );
    keygen(&home.join(".ssh/id_ed25519"), "a passphrase");
    let out = scan(&home, &project, &[]);
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    assert!(stdout.starts_with("Clean: "), "{stdout}");
    // The folder is named by its path, never as "." (it said "in .'s .env files").
    let canon = std::fs::canonicalize(&project).unwrap();
    assert!(
        stdout.contains(&format!("the .env files under {}", canon.display())),
        "{stdout}"
    );
    let out = scan(&home, &project, &["--json"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8(out.stdout).unwrap().trim(), "[]");
    let vault_dir = t.path().join("vault");
    let out = Command::new(bin())
        .args(["scan", "--json"])
        .arg(&project)
        .env("HOME", &home)
        .env("VAULT_DIR", &vault_dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(!vault_dir.exists() && !home.join(".local").exists());
}

#[test]
fn no_home_judges_the_project_alone() {
    let t = TempDir::new("scan-nohome");
    let (home, project) = (t.path().join("home"), t.path().join("project"));
    seed(&project, &[(".env", "PORT=8080\n", &[])]);
    keygen(&home.join(".ssh/id_ed25519"), "");
    // The home's unencrypted key is a finding; with --no-home only the clean project counts.
    assert_eq!(scan(&home, &project, &[]).status.code(), Some(1));
    let out = scan(&home, &project, &["--no-home"]);
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.starts_with("Clean: ") && !stdout.contains("HOME"),
        "{stdout}"
    );
    std::fs::write(
        project.join(".env"),
        "STRIPE_KEY=sk_live_DECOY_nohome_51a\n",
    )
    .unwrap();
    let out = scan(&home, &project, &["--no-home", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let found: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(found.as_array().unwrap().len(), 1, "{found}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("DECOY_nohome"));
}

#[test]
fn a_directory_that_cannot_be_scanned_is_a_usage_error() {
    let t = TempDir::new("scan-usage");
    let missing = t.path().join("missing");
    let out = scan(t.path(), t.path(), &[missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("cannot scan") && stderr.contains("missing"),
        "{stderr}"
    );
}
