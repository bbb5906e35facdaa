//! A shell's own completion protocol, run for real: the script `vault completions SHELL` prints
//! is loaded into bash or fish, and the shell is asked what it offers for a command line (bash:
//! `COMP_WORDS`/`COMP_CWORD` and the function that `complete -p COMMAND` names (the line's first word), reading `COMPREPLY`;
//! fish: `complete -C LINE`).
use std::path::Path;
use std::process::Command;

/// What `shell` offers after `line` (a trailing space: a new, empty word), with `PATH` and `env`.
pub fn offered(
    shell: &str,
    script: &Path,
    path: &str,
    line: &str,
    env: &[(&str, &str)],
) -> Vec<String> {
    let mut c = match shell {
        "bash" => {
            let mut words: Vec<&str> = line.split_whitespace().collect();
            if line.ends_with(' ') {
                words.push("");
            }
            let mut c = Command::new("bash");
            c.args(["--norc", "--noprofile", "-c"])
                .arg(
                    r#"source "$1"; shift
                    f=$(complete -p "$1" | sed -E 's/.* -F ([^ ]+) .*/\1/')
                    COMP_WORDS=("$@"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
                    COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}; COMP_TYPE=9
                    "$f" "$1" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
                    printf '%s\n' "${COMPREPLY[@]}""#,
                )
                .arg("bash")
                .arg(script)
                .args(words);
            c
        }
        "fish" => {
            let mut c = Command::new("fish");
            c.args(["--no-config", "-c", "source $argv[1]; complete -C $argv[2]"])
                .arg(script)
                .arg(line);
            c
        }
        other => panic!("no completion protocol for {other}"),
    };
    c.env("PATH", path).env_remove("COMPLETE");
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c
        .output()
        .unwrap_or_else(|e| panic!("{shell} (apt-get install -y {shell}; .ci/run does): {e}"));
    assert!(
        out.status.success(),
        "{shell}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.split('\t').next().unwrap_or("").to_owned())
        .filter(|w| !w.is_empty())
        .collect()
}
