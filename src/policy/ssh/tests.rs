//! The command allowlist on shell words: the argument-injection spellings of git, rsync, tar,
//! find and ssh under plausible patterns are refused; plain commands are accepted and sent with
//! every word single-quoted; `shell_syntax` names what a person should look at twice.
use crate::credentials::{Approval, Credential, SshAuth, SshTarget, Target};
use crate::policy::{shell_syntax, validate_ssh, PolicyError, SshArgs, ValidatedRequest};

fn target(allow: &[&str]) -> SshTarget {
    SshTarget {
        presence: crate::wire::touch::Presence::None,
        host: "10.0.0.5".into(),
        port: 22,
        user: "deploy".into(),
        host_key: format!("SHA256:{}", "a".repeat(43)),
        auth: SshAuth::Password,
        allow_commands: allow.iter().map(|s| (*s).to_owned()).collect(),
    }
}

fn cred(allow: &[&str]) -> Credential {
    Credential {
        id: "cred_1".into(),
        profile: "default".into(),
        name: "box".into(),
        version: 1,
        approval: Approval::Each,
        target: Target::Ssh(target(allow)),
        created_at: String::new(),
        updated_at: String::new(),
    }
}

fn run(allow: &[&str], cmd: &str) -> Result<String, PolicyError> {
    let args = SshArgs {
        credential: "box".into(),
        command: cmd.into(),
        ..SshArgs::default()
    };
    match validate_ssh(&cred(allow), args)? {
        ValidatedRequest::Ssh(s) => Ok(s.command),
        other => panic!("not an SSH request: {other:?}"),
    }
}

#[track_caller]
fn refused(allow: &[&str], cmd: &str) {
    all_refused(allow, &[cmd]);
}

/// Every command must be refused with `policy_denied`; the panic names each one that was not.
#[track_caller]
fn all_refused(allow: &[&str], cmds: &[&str]) {
    assert_none(not_refused(allow, cmds));
}

/// The commands not refused with `policy_denied` under `allow`, described.
fn not_refused(allow: &[&str], cmds: &[&str]) -> Vec<String> {
    cmds.iter()
        .filter_map(|cmd| match run(allow, cmd) {
            Err(PolicyError::Denied { .. }) => None,
            other => Some(format!("{cmd:?} under {allow:?}: {other:?}")),
        })
        .collect()
}

#[track_caller]
fn assert_none(wrong: Vec<String>) {
    assert!(
        wrong.is_empty(),
        "{} not refused:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

const GIT: &[&str] = &["git pull *", "git ls-remote *"];

#[test]
fn git_argument_injection_is_refused() {
    all_refused(
        GIT,
        &[
            // The reported smuggle: bash decodes `$'…'`, git runs the value through `sh -c`.
            r"git pull --upload-pack=$'id\x3e/tmp/PWNED\x3b false #' origin",
            r"git ls-remote --upload-pack=$'touch\x20/tmp/PWNED' /srv",
            // The same option with no shell syntax at all: a program planted earlier.
            "git pull --upload-pack=/tmp/evil.sh origin",
            "git pull origin --upload-pack=/tmp/evil.sh",
            "git pull --upload-pack /tmp/evil.sh origin",
            "git ls-remote --receive-pack=/tmp/evil.sh /srv",
            "git pull --config=core.sshCommand=/tmp/evil.sh origin",
            "git pull -ccore.sshCommand=/tmp/evil.sh origin",
            "git pull -- origin",
            // An option hidden by quoting, expansion or escapes.
            "git pull '--upload-pack=/tmp/evil.sh' origin",
            "git pull \"--upload-pack=/tmp/evil.sh\" origin",
            r"git pull $'\x2d-upload-pack=/tmp/evil.sh' origin",
            "git pull $\"--upload-pack=/tmp/evil.sh\" origin",
            r"git pull \--upload-pack=/tmp/evil.sh origin",
            "git pull origin${IFS}--upload-pack=/tmp/evil.sh",
            "git pull origin$IFS--upload-pack=/tmp/evil.sh",
            "git pull {origin,--upload-pack=/tmp/evil.sh}",
            "git pull origin\\ main",
            "git pull o'ri'gin main",
            "git pull 'origin main'",
            "git pull \"origin\"",
            "git pull ''",
            "git pull 'unterminated",
            "git pull ~/repo",
            "git pull ~root/repo",
            "git pull origin ma*",
            "git pull origin ma?n",
            "git pull origin [m]ain",
            "git pull origin #comment",
            "git pull origin !",
            "git pull (origin)",
            "git pull origin ma\u{ad}in",
            "git pull origin m\u{e4}in",
            "git pull\u{a0}origin",
        ],
    );
}

#[test]
fn rsync_tar_find_and_ssh_argument_injection_is_refused() {
    let mut wrong = not_refused(
        &["rsync * /backup/", "rsync -a * /backup/"],
        &[
            "rsync -e 'sh -c id' /srv /backup/",
            "rsync -e sh /srv /backup/",
            "rsync -esh /srv /backup/",
            "rsync --rsh=/tmp/evil.sh h:/srv /backup/",
            "rsync --rsh='sh -c id' h:/srv /backup/",
            "rsync --rsync-path=/tmp/evil.sh h:/srv /backup/",
            "rsync -a -e /tmp/evil.sh h:/srv /backup/",
            "rsync -a /srv /backup/ --rsh=/tmp/evil.sh",
            "rsync -a /srv/* /backup/",
        ],
    );
    wrong.extend(not_refused(
        &["tar czf /tmp/x.tgz *"],
        &[
            "tar czf /tmp/x.tgz --checkpoint=1 --checkpoint-action=exec=/tmp/evil.sh /srv",
            "tar czf /tmp/x.tgz --checkpoint-action=exec='sh -c id' /srv",
            "tar czf /tmp/x.tgz --to-command=/tmp/evil.sh /srv",
            "tar czf /tmp/x.tgz --use-compress-program=/tmp/evil.sh /srv",
            "tar czf /tmp/x.tgz -I /tmp/evil.sh /srv",
            "tar czf /tmp/x.tgz /srv/*",
        ],
    ));
    wrong.extend(not_refused(
        &["find /srv *", "find /srv -name *"],
        &[
            r"find /srv -exec id \;",
            "find /srv -exec id ';'",
            "find /srv -exec id {} +",
            "find /srv -execdir /tmp/evil.sh +",
            "find /srv -fprintf /etc/cron.d/x %p",
            "find /srv -delete",
            "find /srv ( -name x )",
            "find /srv ! -name x",
            "find /srv -name x -exec id ;",
        ],
    ));
    wrong.extend(not_refused(
        &["ssh *"],
        &[
            "ssh -oProxyCommand=/tmp/evil.sh h",
            "ssh -o ProxyCommand=/tmp/evil.sh h",
            "ssh -o 'ProxyCommand sh -c id' h",
            "ssh -oLocalCommand=id -oPermitLocalCommand=yes h",
            "ssh -F /tmp/evil h",
            "ssh h 'id; uname'",
            "ssh h id\\;uname",
        ],
    ));
    assert_none(wrong);
}

#[test]
fn operators_stand_only_where_the_pattern_spells_them() {
    all_refused(
        &["cd /srv/app && make *", "make * > /tmp/build.log"],
        &[
            "cd /srv/app ; make x",
            "cd /srv/app & make x",
            "cd /srv/app || make x",
            "cd /srv/app &&& make x",
            "cd /srv/app && make x && id",
            "cd /srv/app && make x; id",
            "cd /srv/app && make x | sh",
            "cd /srv/app && make x |& sh",
            "cd /srv/app && make x > /etc/motd",
            "cd /srv/app && make x 2>/tmp/e",
            "cd /srv/app && make x < /dev/zero",
            "cd /srv/app && make x &",
            "cd /srv/app && make $(id)",
            "cd /srv/app && make `id`",
            "make x > /etc/motd",
            "make x >> /tmp/build.log",
            "make x 2> /tmp/build.log",
            "make x >| /tmp/build.log",
            "make x > /tmp/build.log; id",
        ],
    );
}

#[test]
fn control_characters_stay_invalid_arguments() {
    for bad in [
        "git pull origin\nid",
        "git pull origin\r",
        "git pull\u{0}origin",
        "git pull \u{7f}origin",
        "git pull \u{1b}[2Jorigin",
        "git pull origin\u{2028}id",
    ] {
        let e = run(GIT, bad).expect_err(bad);
        if bad.contains('\u{2028}') {
            // Not a control character (a line separator): refused as a non-plain word.
            assert_eq!(e.code(), "policy_denied", "{bad:?}");
        } else {
            assert_eq!(e.code(), "invalid_argument", "{bad:?}");
        }
    }
}

/// Pattern => command => what is sent.
const ACCEPTED: &str = r"
git pull *                 => git pull origin main                 => 'git' 'pull' 'origin' 'main'
git pull *                 => git  pull   origin                   => 'git' 'pull' 'origin'
git pull *                 => git pull origin 'feature/x'          => 'git' 'pull' 'origin' 'feature/x'
git pull *                 => git pull origin release-1.2_rc+3     => 'git' 'pull' 'origin' 'release-1.2_rc+3'
git pull --rebase *        => git pull --rebase origin main        => 'git' 'pull' '--rebase' 'origin' 'main'
git fetch --depth=* origin => git fetch --depth=5 origin           => 'git' 'fetch' '--depth=5' 'origin'
git checkout release-*     => git checkout release-2.0             => 'git' 'checkout' 'release-2.0'
rsync -a * /backup/        => rsync -a /srv deploy@db:/var /backup/ => 'rsync' '-a' '/srv' 'deploy@db:/var' '/backup/'
tar czf /tmp/x.tgz *       => tar czf /tmp/x.tgz /srv/app /etc/ssl => 'tar' 'czf' '/tmp/x.tgz' '/srv/app' '/etc/ssl'
find /srv -name *          => find /srv -name a=b,c%d              => 'find' '/srv' '-name' 'a=b,c%d'
ssh *                      => ssh backup.example.com uptime        => 'ssh' 'backup.example.com' 'uptime'
systemctl status ?*        => systemctl status nginx.service       => 'systemctl' 'status' 'nginx.service'
cd /srv/app && make *      => cd /srv/app && make deploy           => 'cd' '/srv/app' && 'make' 'deploy'
cd /srv/app && make *      => cd /srv/app&&make deploy             => 'cd' '/srv/app' && 'make' 'deploy'
make * > /tmp/build.log    => make all>/tmp/build.log              => 'make' 'all' > '/tmp/build.log'
make * 2>/dev/null         => make all 2>/dev/null                 => 'make' 'all' 2> '/dev/null'
uptime                     => uptime                               => 'uptime'
";

#[test]
fn plain_commands_are_accepted_and_sent_as_quoted_words() {
    for line in ACCEPTED.lines().filter(|l| !l.is_empty()) {
        let [allow, cmd, sent]: [&str; 3] = line
            .split(" => ")
            .map(str::trim)
            .collect::<Vec<_>>()
            .try_into()
            .unwrap();
        let got = run(&[allow], cmd).unwrap_or_else(|e| panic!("{cmd:?} under {allow:?}: {e}"));
        assert_eq!(got, sent, "{cmd:?} under {allow:?}");
        // What is stored is validated again at dispatch and must come out the same.
        assert_eq!(
            run(&[allow], &got).unwrap(),
            sent,
            "the sent form of {cmd:?}"
        );
    }
}

#[test]
fn a_lone_star_is_one_or_more_whole_words() {
    refused(&["git pull *"], "git pull");
    refused(&["rsync * /backup/"], "rsync /backup/");
    refused(&["rsync * /backup/"], "rsync /srv /backup/ /tmp");
    assert!(run(&["rsync * /backup/"], "rsync /srv /opt /backup/").is_ok());
    // A star inside a word stays inside that word.
    refused(&["git checkout release-*"], "git checkout release-1 main");
    refused(&["systemctl status ?*"], "systemctl status");
}

#[test]
fn without_an_allowlist_the_command_is_sent_as_written() {
    let cmd = r#"cd /srv && git pull $'x' "$HOME" | tee ~/log"#;
    assert_eq!(run(&[], cmd).unwrap(), cmd);
}

#[test]
fn patterns_are_checked_when_a_credential_is_added() {
    for ok in [
        "git pull *",
        "systemctl status ?*",
        "cd /srv/app && make *",
        "git fetch --depth=* origin",
        "make * 2>/dev/null",
    ] {
        assert!(target(&[ok]).check().is_ok(), "{ok:?}");
    }
    for bad in [
        "echo $HOME",
        "echo \"x\"",
        "ls [ab]*",
        "ls ~",
        "echo {a,b}",
        "x 'a",
    ] {
        assert!(target(&[bad]).check().is_err(), "{bad:?}");
    }
}

#[test]
fn shell_syntax_names_ansi_c_quoting_and_option_values() {
    let has = |cmd: &str, needle: &str| {
        let s = shell_syntax(cmd);
        assert!(
            s.iter().any(|n| n.contains(needle)),
            "{cmd:?}: {needle:?} not in {s:?}"
        );
    };
    let smuggle = r"git pull --upload-pack=$'id\x3e/tmp/PWNED\x3b false #' origin";
    has(smuggle, "$'");
    has(smuggle, "--opt=");
    has("echo $\"hi\"", "$\"");
    has("rsync --rsh='sh -c id' h:/ /b", "--opt=");
    has("ssh -oProxyCommand=$(id) h", "--opt=");
    has("git pull ~/x", "`~`");
    has("git pull ${IFS}x", "variable");
    has("git pull origin #x", "`#`");
    has(
        "git pull --upload-pack=/tmp/evil.sh origin",
        "option that runs",
    );
    has("find / -exec id ;", "option that runs");
    has("rsync -e 'sh -c id' h:/ /b", "option that runs");
    // A value without shell syntax is no option injection; the vault's own quoting is no warning.
    assert!(shell_syntax("git fetch --depth=5 origin").is_empty());
    assert!(shell_syntax("'git' 'pull' 'origin' 'main'").is_empty());
    let s = shell_syntax("'cd' '/srv/app' && 'make' 'deploy'");
    assert_eq!(s.len(), 1, "{s:?}");
    assert!(s[0].contains("`&&`"));
}

#[test]
fn refusals_say_what_is_wrong() {
    let e = run(GIT, "git pull $BRANCH").unwrap_err().to_string();
    assert!(e.contains("expansion (`$`, character 10)"), "{e}");
    let e = run(GIT, "git pull --upload-pack=x origin")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("`git pull *`") && e.contains("never an option"),
        "{e}"
    );
    // A pattern stored before patterns were words, and no longer valid, is named.
    let e = run(&["echo $HOME", "git pull *"], "echo x")
        .unwrap_err()
        .to_string();
    assert!(e.contains("`echo $HOME` (expansion"), "{e}");
    // The quoted form must fit the bound too: it is stored and validated again at dispatch.
    let long = format!("git pull{}", " a".repeat(6000));
    assert!(long.len() < super::MAX_COMMAND_BYTES);
    assert_eq!(run(GIT, &long).unwrap_err().code(), "invalid_argument");
    // The command's own bound, with no allowlist: up to it passes, a byte past it does not.
    let at = format!("echo {}", "a".repeat(super::MAX_COMMAND_BYTES - 5));
    assert_eq!(run(&[], &at).unwrap(), at);
    let over = format!("{at}a");
    let e = run(&[], &over).unwrap_err();
    assert!(e.to_string().contains("bytes or contains NUL"), "{e}");
}

#[test]
fn a_redirection_to_a_descriptor_is_not_the_background() {
    let bg = "`&` runs a command in the background";
    for cmd in ["echo oops >&2", "make 2>&1", "cat <&3", "build &>log"] {
        let named = super::shell_syntax(cmd);
        assert!(!named.contains(&bg), "{cmd}: {named:?}");
    }
    for cmd in ["sleep 9 &", "echo x >&2 & rm y", "a&b"] {
        assert!(super::shell_syntax(cmd).contains(&bg), "{cmd}");
    }
    // The redirection itself is still named.
    assert!(super::shell_syntax("echo oops >&2")
        .iter()
        .any(|n| n.contains("`>`")));
}
