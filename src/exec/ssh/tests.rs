//! The executor against the in-process russh server (`demo::ssh_target`): what reaches the
//! target is counted there (logins, commands, signals, connections).
use super::*;
use crate::credentials::SshAuth;
use crate::demo::ssh_target::{Accept, SshTarget};
use russh::keys::ssh_key::private::Ed25519Keypair;
use russh::keys::{HashAlg, PrivateKey};
use serde_json::Value;
use std::time::Instant;

const PASSWORD: &str = "pw-DECOY-8f3a/+=x";

fn limits(grace: u64) -> crate::config::Limits {
    let mut l = crate::config::Config::default().limits;
    l.shutdown_grace_seconds = grace;
    l
}

fn shared(grace: u64) -> Arc<Shared> {
    SshExecutor::new(&limits(grace)).shared
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn password_target() -> SshTarget {
    SshTarget::start("deploy", Accept::Password(Zeroizing::new(PASSWORD.into()))).unwrap()
}

fn job(t: &SshTarget, auth: SshAuth, secret: &[u8], command: &str, timeout_s: u64) -> Job {
    let target = SshTarget_ {
        presence: crate::wire::touch::Presence::None,
        host: "127.0.0.1".into(),
        port: t.port,
        user: "deploy".into(),
        host_key: t.host_key(),
        auth,
        allow_commands: vec![],
    };
    Job {
        key: ("cred_test".into(), 1),
        credential: "box".into(),
        request: SshRequest {
            host: target.host.clone(),
            port: target.port,
            user: target.user.clone(),
            host_key: target.host_key.clone(),
            command: command.into(),
            timeout_s,
            max_output_bytes: 65536,
        },
        target,
        secret: Zeroizing::new(secret.to_vec()),
    }
}

use crate::credentials::SshTarget as SshTarget_;

fn pw_job(t: &SshTarget, command: &str, timeout_s: u64) -> Job {
    job(
        t,
        SshAuth::Password,
        PASSWORD.as_bytes(),
        command,
        timeout_s,
    )
}

fn ssh(o: &Outcome) -> &Value {
    &o.result["ssh"]
}

fn text<'a>(o: &'a Outcome, stream: &str) -> &'a str {
    ssh(o)[stream]["untrusted_text"]
        .as_str()
        .unwrap_or_default()
}

#[test]
fn echo_completes_and_the_second_command_reuses_the_connection() {
    let t = password_target();
    let s = shared(1);
    let rt = rt();
    let first = rt.block_on(s.run(pw_job(&t, "echo hi", 5), &Cancel::never()));
    assert_eq!(first.state, State::Completed, "{first:?}");
    assert_eq!(ssh(&first)["exit_status"], 0);
    assert_eq!(text(&first, "stdout"), "hi\n");
    assert_eq!(ssh(&first)["stream_end"], "eof");
    assert_eq!(ssh(&first)["stdout_truncated"], false);
    let second = rt.block_on(s.run(pw_job(&t, "exit 3", 5), &Cancel::never()));
    assert_eq!(
        second.state,
        State::Completed,
        "a non-zero exit is an answer"
    );
    assert_eq!(ssh(&second)["exit_status"], 3);
    assert_eq!(t.commands(), ["echo hi", "exit 3"]);
    assert_eq!(t.logins(), 1, "one login for both commands");
    assert_eq!(t.connections().0, 1);
    assert_eq!(s.pool.connects.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[test]
fn a_private_key_logs_in_and_its_pem_is_scrubbed() {
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).unwrap();
    let key = PrivateKey::from(Ed25519Keypair::from_seed(&seed));
    let pem = key
        .to_openssh(russh::keys::ssh_key::LineEnding::LF)
        .unwrap();
    let t = SshTarget::start("deploy", Accept::Key(key.public_key().clone())).unwrap();
    let auth = SshAuth::Key {
        algorithm: "ssh-ed25519".into(),
        fingerprint: key.public_key().fingerprint(HashAlg::Sha256).to_string(),
    };
    let s = shared(1);
    let o = rt().block_on(s.run(job(&t, auth, pem.as_bytes(), "whoami", 5), &Cancel::never()));
    assert_eq!(o.state, State::Completed, "{o:?}");
    assert_eq!(text(&o, "stdout"), "deploy\n");
    // The scrubber for a key credential replaces the key text.
    let mut scrub = Shared::scrubber(&job(&t, SshAuth::Password, pem.as_bytes(), "x", 1));
    let mut out = scrub.push(format!("cat id:\n{}done", pem.as_str()).as_bytes());
    out.extend(scrub.finish());
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "cat id:\n[REDACTED:box]done"
    );
}

#[test]
fn a_wrong_host_key_is_refused_before_any_login_or_command() {
    let t = password_target();
    let other = password_target();
    let mut j = pw_job(&t, "echo should-not-run", 5);
    j.target.host_key = other.host_key();
    let o = rt().block_on(shared(1).run(j, &Cancel::never()));
    assert_eq!(o.state, State::FailedBeforeSend);
    let reason = o.reason.unwrap();
    assert!(
        reason.contains(&t.host_key()) && reason.contains(&other.host_key()),
        "both fingerprints: {reason}"
    );
    assert_eq!(t.logins(), 0, "the password was never offered");
    assert!(t.commands().is_empty());
}

#[test]
fn a_refused_password_sends_no_command() {
    let t = password_target();
    let j = job(&t, SshAuth::Password, b"wrong", "echo no", 5);
    let o = rt().block_on(shared(1).run(j, &Cancel::never()));
    assert_eq!(o.state, State::FailedBeforeSend, "{o:?}");
    assert!(o
        .reason
        .unwrap()
        .contains("refused the credential's password"));
    assert!(t.commands().is_empty());
}

#[test]
fn a_timeout_sends_term_and_keeps_a_bounded_tail() {
    let t = password_target();
    let start = Instant::now();
    let o = rt().block_on(shared(1).run(pw_job(&t, "yes diag 1>&2", 1), &Cancel::never()));
    let took = start.elapsed();
    // 1 s, TERM honoured at once (exit_signal below); generous for a loaded machine.
    assert!(took < Duration::from_secs(4), "took {took:?}");
    assert_eq!(o.state, State::Indeterminate, "{o:?}");
    let r = ssh(&o);
    assert_eq!(r["exit_status"], Value::Null);
    assert_eq!(r["exit_signal"], "TERM");
    assert_eq!(r["stream_end"], "timeout");
    assert_eq!(r["stderr_truncated"], true);
    assert!(r["stderr_bytes_retained"].as_u64().unwrap() <= 16384);
    assert!(r["stderr_bytes_seen"].as_u64().unwrap() > 100_000);
    let e = text(&o, "stderr");
    assert!(
        e.starts_with("[stderr truncated: kept last 16384 of "),
        "{}",
        &e[..80]
    );
    assert!(e.ends_with("diag\n"));
    assert_eq!(t.signals(), ["TERM"]);
}

#[test]
fn a_command_ignoring_term_is_closed_after_the_grace_period() {
    let t = password_target();
    let start = Instant::now();
    let o = rt().block_on(shared(1).run(pw_job(&t, "stubborn-yes x", 1), &Cancel::never()));
    let took = start.elapsed();
    assert!(
        // timeout 1 s + grace 1 s, then at most 1 s for the server's close (+ a loaded machine).
        took >= Duration::from_secs(2) && took < Duration::from_secs(5),
        "took {took:?}"
    );
    assert_eq!(o.state, State::Indeterminate);
    assert_eq!(ssh(&o)["exit_signal"], Value::Null);
    assert_eq!(ssh(&o)["stream_end"], "timeout");
}

#[test]
fn cancellation_stops_the_command_and_says_so() {
    let t = password_target();
    let (tx, rx) = tokio::sync::watch::channel(false);
    let cancel = Cancel::new(rx);
    let s = shared(1);
    let o = rt().block_on(async {
        let fire = async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            let _ = tx.send(true);
            std::future::pending::<()>().await;
        };
        tokio::select! {
            o = s.run(pw_job(&t, "yes x 1>&2", 30), &cancel) => o,
            _ = fire => unreachable!(),
        }
    });
    assert_eq!(o.state, State::Indeterminate);
    assert_eq!(ssh(&o)["stream_end"], "cancelled");
    assert_eq!(t.signals(), ["TERM"]);
    // Cancelled before anything was sent: nothing runs.
    let o = rt().block_on(s.run(pw_job(&t, "echo late", 5), &cancel));
    assert_eq!(o.state, State::FailedBeforeSend);
    assert_eq!(t.commands(), ["yes x 1>&2"]);
}

#[test]
fn a_cancel_during_the_grace_period_closes_at_once() {
    let t = password_target();
    let (tx, rx) = tokio::sync::watch::channel(false);
    let cancel = Cancel::new(rx);
    let s = shared(10);
    let start = Instant::now();
    let o = rt().block_on(async {
        let fire = async {
            tokio::time::sleep(Duration::from_millis(1500)).await;
            let _ = tx.send(true);
            std::future::pending::<()>().await;
        };
        tokio::select! {
            o = s.run(pw_job(&t, "stubborn-yes x", 1), &cancel) => o,
            _ = fire => unreachable!(),
        }
    });
    let took = start.elapsed();
    // Without the cancel: 1 s + the 10 s grace.
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert_eq!(o.state, State::Indeterminate);
    assert_eq!(ssh(&o)["stream_end"], "timeout", "the first cause is kept");
    assert_eq!(t.signals(), ["TERM"]);
}

#[test]
fn an_exit_with_the_stream_held_open_is_completed_after_the_grace() {
    let t = password_target();
    let o = rt().block_on(shared(1).run(pw_job(&t, "exit-then-flood bg", 30), &Cancel::never()));
    assert_eq!(o.state, State::Completed, "{o:?}");
    assert_eq!(ssh(&o)["exit_status"], 0);
    assert_eq!(ssh(&o)["stream_end"], "timeout");
    assert!(o.reason.unwrap().contains("kept its output open"));
}

#[test]
fn a_dropped_connection_is_replaced_once_and_the_pin_checked_again() {
    let t = password_target();
    let s = shared(1);
    let rt = rt();
    let run = |cmd: &str| rt.block_on(s.run(pw_job(&t, cmd, 5), &Cancel::never()));
    assert_eq!(run("echo 1").state, State::Completed);
    t.drop_connections();
    let o = run("echo 2");
    assert_eq!(o.state, State::Completed, "{o:?}");
    assert_eq!(t.connections().0, 2, "reconnected once");
    let pinned = t.host_key();
    t.drop_connections();
    t.rotate_host_key();
    let mut j = pw_job(&t, "echo 3", 5);
    j.target.host_key = pinned;
    let o = rt.block_on(s.run(j, &Cancel::never()));
    assert_eq!(o.state, State::FailedBeforeSend, "{o:?}");
    let reason = o.reason.clone().unwrap_or_default();
    assert!(
        reason.contains(&t.host_key()),
        "the new key is named: {o:?}"
    );
    assert_eq!(t.commands(), ["echo 1", "echo 2"]);
}

#[test]
fn idle_connections_are_closed() {
    let t = password_target();
    let s = shared(1);
    let rt = rt();
    assert_eq!(
        rt.block_on(s.run(pw_job(&t, "true", 5), &Cancel::never()))
            .state,
        State::Completed
    );
    assert_eq!(t.connections(), (1, 1));
    assert_eq!(rt.block_on(s.pool.close_idle(Duration::from_secs(60))), 0);
    assert_eq!(rt.block_on(s.pool.close_idle(Duration::ZERO)), 1);
    // The client's session task lives on `rt`, so it is driven while the test waits.
    rt.block_on(async {
        let deadline = Instant::now() + Duration::from_secs(5);
        while t.connections().1 != 0 {
            assert!(
                Instant::now() < deadline,
                "the target still sees the connection"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
}

#[test]
fn the_password_is_scrubbed_from_what_the_remote_prints() {
    let t = password_target();
    let o = rt().block_on(shared(1).run(pw_job(&t, "login-info", 5), &Cancel::never()));
    assert_eq!(o.state, State::Completed);
    assert_eq!(
        text(&o, "stdout"),
        "debug: deploy logged in with password [REDACTED:box]\n"
    );
    assert!(!o.result.to_string().contains("DECOY"));
}

/// An `AuthorizedAction` made the only way there is: a credential with a signed `never` policy,
/// a submitted request, and `approvals::claim`.
fn authorized(t: &SshTarget, command: &str) -> crate::approvals::AuthorizedAction {
    use crate::approvals::{claim, submit, Claim, Submission, Submitted};
    use crate::credentials::{Approval, NewCredential, Secret, Target};
    let mut store = crate::store::test_store(&format!("ssh-exec-{}", t.port), "vlt_t");
    let key = crate::keys::ApproverKey::generate();
    let tx = store.write().unwrap();
    crate::store::set_meta(&tx, "approver_public_key", &key.public_hex()).unwrap();
    crate::audit::append_row(
        &tx,
        "vault.init",
        None,
        None,
        &json!({"vault_id": "vlt_t", "approver_public_key": key.public_hex()}),
    )
    .unwrap();
    tx.commit().unwrap();
    let cred = crate::credentials::add_as_approver(
        &mut store,
        &key,
        "vlt_t",
        NewCredential {
            id: crate::credentials::new_id("cred"),
            profile: "default".into(),
            name: "box".into(),
            approval: Approval::Never,
            target: Target::Ssh(SshTarget_ {
                presence: crate::wire::touch::Presence::None,
                host: "127.0.0.1".into(),
                port: t.port,
                user: "deploy".into(),
                host_key: t.host_key(),
                auth: SshAuth::Password,
                allow_commands: vec![],
            }),
            secret: Secret::new(PASSWORD.as_bytes().to_vec()),
        },
    )
    .unwrap();
    let trust = crate::approvals::Trust::new("vlt_t", &key);
    let request = crate::policy::validate_ssh(
        &cred,
        crate::policy::SshArgs {
            credential: "box".into(),
            command: command.into(),
            ..Default::default()
        },
    )
    .unwrap();
    let submitted = submit(
        &mut store,
        &trust,
        Submission {
            session_id: "ses_1",
            client: "unit",
            profile: "default",
            credential: &cred,
            request: &request,
            idempotency_key: None,
            expiry: Duration::from_secs(60),
            replay_window: Duration::from_secs(60),
            unresolved: None,
        },
    )
    .unwrap();
    let Submitted::Created(action) = submitted else {
        panic!("not created")
    };
    match claim(&mut store, &trust, &action.id).unwrap() {
        Claim::Go(a) => *a,
        other => panic!("not authorized: {other:?}"),
    }
}

#[test]
fn execute_hands_the_call_to_its_runtime_from_a_blocking_thread() {
    let t = password_target();
    let action = authorized(&t, "echo through-execute");
    let e = SshExecutor::new(&limits(1));
    // As `vault mcp` calls it: inside `spawn_blocking` of another runtime.
    let o = rt().block_on(async move {
        tokio::task::spawn_blocking(move || e.execute(&action, &Cancel::never()))
            .await
            .unwrap()
    });
    assert_eq!(o.state, State::Completed, "{o:?}");
    assert_eq!(text(&o, "stdout"), "through-execute\n");
    assert_eq!(t.commands(), ["echo through-execute"]);
}
