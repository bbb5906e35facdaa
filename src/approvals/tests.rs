//! Lifecycle tests on a real SQLCipher file: submit, idempotency, withdraw, expiry, journal rows.
use super::*;
use crate::credentials::{self, Approval, HttpAuth, HttpTarget, NewCredential, Secret, Target};
use crate::keys::MasterKey;
use crate::policy::{validate_http, HttpArgs};
use crate::store::set_meta;

fn setup(tag: &str) -> (Store, Credential) {
    let dir = std::env::temp_dir().join(format!("av-appr-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut s = Store::create(&dir.join("vault.db"), &MasterKey::generate()).unwrap();
    let tx = s.write().unwrap();
    set_meta(&tx, "vault_id", "vlt_t").unwrap();
    tx.commit().unwrap();
    let c = credentials::add(
        &mut s,
        NewCredential {
            profile: "default".into(),
            name: "api".into(),
            approval: Approval::Each,
            target: Target::Http(HttpTarget {
                scheme: "https".into(),
                host: "api.example.com".into(),
                port: 443,
                path_prefix: "/".into(),
                methods: None,
                auth: HttpAuth::Bearer,
                ca_file: None,
            }),
            secret: Secret::new(b"tok".to_vec()),
        },
    )
    .unwrap();
    (s, c)
}

fn submit_get<'a>(
    s: &mut Store,
    c: &'a Credential,
    url: &str,
    key: Option<&'a str>,
    expiry: Duration,
) -> Submitted {
    let req = validate_http(
        c,
        HttpArgs {
            credential: "api".into(),
            method: "GET".into(),
            url: url.into(),
            ..HttpArgs::default()
        },
    )
    .unwrap();
    submit(
        s,
        Submission {
            session_id: "ses_1",
            client: "test-client",
            profile: "default",
            credential: c,
            request: &req,
            idempotency_key: key,
            expiry,
            replay_window: Duration::from_secs(600),
        },
    )
    .unwrap()
}

#[test]
fn the_same_call_while_pending_is_the_same_action() {
    let (mut s, c) = setup("idem");
    let Submitted::Created(a) = submit_get(
        &mut s,
        &c,
        "https://api.example.com/x",
        None,
        Duration::from_secs(60),
    ) else {
        panic!()
    };
    assert_eq!(a.state, State::Pending);
    assert!(a.id.starts_with("act_"));
    let Submitted::Existing(b) = submit_get(
        &mut s,
        &c,
        "https://api.example.com/x",
        None,
        Duration::from_secs(60),
    ) else {
        panic!()
    };
    assert_eq!(a.id, b.id);
    let Submitted::Created(other) = submit_get(
        &mut s,
        &c,
        "https://api.example.com/x",
        Some("k2"),
        Duration::from_secs(60),
    ) else {
        panic!()
    };
    assert_ne!(other.id, a.id);
    assert_eq!(list_pending(&s).unwrap().len(), 2);
    assert!(matches!(
        get(&s, "other-profile", &a.id),
        Err(ApprovalError::NotFound(_))
    ));
}

#[test]
fn withdraw_expire_and_journal() {
    let (mut s, c) = setup("life");
    let Submitted::Created(a) = submit_get(
        &mut s,
        &c,
        "https://api.example.com/a",
        None,
        Duration::from_secs(60),
    ) else {
        panic!()
    };
    let w = withdraw(&mut s, "default", &a.id, "client cancelled").unwrap();
    assert_eq!(w.state, State::Withdrawn);
    assert!(matches!(
        withdraw(&mut s, "default", &a.id, "again"),
        Err(ApprovalError::NotPending { .. })
    ));
    let Submitted::Created(e) = submit_get(
        &mut s,
        &c,
        "https://api.example.com/b",
        None,
        Duration::ZERO,
    ) else {
        panic!()
    };
    let expired = expire_due(&mut s).unwrap();
    assert_eq!(
        expired.iter().map(|x| x.id.as_str()).collect::<Vec<_>>(),
        [e.id.as_str()]
    );
    let Submitted::Created(_) = submit_get(
        &mut s,
        &c,
        "https://api.example.com/c",
        None,
        Duration::from_secs(60),
    ) else {
        panic!()
    };
    assert_eq!(
        withdraw_session(&mut s, "ses_1", "client went away").unwrap(),
        1
    );
    let kinds: Vec<String> = s
        .conn()
        .prepare("SELECT kind FROM audit WHERE action_id IS NOT NULL ORDER BY seq")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        kinds,
        [
            "action.pending",
            "action.withdrawn",
            "action.pending",
            "action.expired",
            "action.pending",
            "action.withdrawn"
        ]
    );
    // The journal's last transition equals every action's state.
    for a in list_recent(&s, "default", None, 50).unwrap() {
        let last: String = s
            .conn()
            .query_row(
                "SELECT kind FROM audit WHERE action_id = ?1 ORDER BY seq DESC LIMIT 1",
                [&a.id],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(last, format!("action.{}", a.state));
    }
}
