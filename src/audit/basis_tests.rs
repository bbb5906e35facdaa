//! Verification of what allowed each dispatch (`verify/basis.rs`), with no key: every bad basis
//! and every contradicting grant row fails `vault verify` at its row, in `vault.db` (sequential
//! and parallel) and in an export checked offline, while a journal of each legal basis verifies.
use super::tests::{store, verify_both};
use super::*;

/// One row to append: kind, session, action, body fields.
type Row = (&'static str, &'static str, Option<&'static str>, Value);

fn action(kind: &'static str, session: &'static str, id: &'static str, extra: Value) -> Row {
    let mut body = json!({"state": kind.strip_prefix("action.").unwrap(), "tool": "http_request",
        "credential": "api", "summary": "GET /", "hash": "ab"});
    for (k, v) in extra.as_object().into_iter().flatten() {
        body[k] = v.clone();
    }
    (kind, session, Some(id), body)
}

fn dispatched(session: &'static str, id: &'static str, basis: Value) -> Row {
    action("action.dispatched", session, id, json!({"basis": basis}))
}

fn grant_add(session: &'static str, grant: &'static str, expires: &'static str) -> Row {
    let body = json!({"grant": grant, "session": session, "action": "act_g", "credential": "api",
        "credential_id": "cred_1", "credential_version": 1,
        "scope": {"kind": "http_reads", "methods": ["GET", "HEAD"], "prefix": "/"},
        "expires_at": expires});
    ("grant.add", session, None, body)
}

fn grant_revoke(session: &'static str, grant: &'static str) -> Row {
    let body = json!({"grant": grant, "session": session, "nonce": "n".repeat(32)});
    ("grant.revoke", session, None, body)
}

const LATER: &str = "2999-01-01T00:00:00.000Z";

fn received_on(session: &'static str, id: &'static str, basis: Value) -> [Row; 2] {
    [
        action("action.received", session, id, json!({})),
        dispatched(session, id, basis),
    ]
}

/// The verdict on a journal of `rows` after `vault.init`, from the store and from its export
/// (with no key): they must agree.
fn verdict(tag: &str, rows: &[Row]) -> Report {
    let mut s = store(tag);
    let tx = s.write().unwrap();
    append_row(
        &tx,
        "vault.init",
        None,
        None,
        &json!({"vault_id": "vlt_test"}),
    )
    .unwrap();
    for (kind, session, action, body) in rows {
        append_row(&tx, kind, Some(session), *action, body).unwrap();
    }
    tx.commit().unwrap();
    let report = verify_both(&s, "vlt_test", &[]).unwrap();
    let file = std::env::temp_dir().join(format!("vault-basis-{tag}-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&file);
    export(s.conn(), &file).unwrap();
    let offline = verify_file(&file, &[], None).unwrap();
    std::fs::remove_file(&file).unwrap();
    assert_eq!(
        (
            offline.ok(),
            offline.failure.as_ref().map(|f| (f.seq, f.reason))
        ),
        (
            report.ok(),
            report.failure.as_ref().map(|f| (f.seq, f.reason))
        ),
        "{tag}: the export's verdict differs"
    );
    report
}

/// `rows` must fail at the last row, for `reason`.
#[track_caller]
fn fails_last(tag: &str, reason: Reason, rows: &[Row]) {
    let r = verdict(tag, rows);
    let f = r.failure.unwrap_or_else(|| panic!("{tag}: verified"));
    assert_eq!(
        (f.reason, f.seq),
        (reason, Some(rows.len() as i64 + 1)),
        "{tag}: {}",
        f.detail
    );
}

fn decision() -> Value {
    json!({"decision": "dec_1", "nonce": "n1"})
}

fn grant(id: &str) -> Value {
    json!({"grant": id, "grant_nonce": "g"})
}

#[test]
fn each_legal_basis_verifies() {
    let mut rows = vec![
        action("action.pending", "ses_1", "act_a", json!({})),
        action("action.approved", "ses_1", "act_a", json!({})),
        dispatched("ses_1", "act_a", decision()),
        action("action.completed", "ses_1", "act_a", json!({})),
        grant_add("ses_1", "grt_1", LATER),
    ];
    rows.extend(received_on("ses_1", "act_b", json!({"policy": "never"})));
    rows.extend(received_on("ses_1", "act_c", json!({"policy": "writes"})));
    rows.extend(received_on("ses_1", "act_d", grant("grt_1")));
    rows.push(grant_revoke("ses_1", "grt_1"));
    let r = verdict("basis-ok", &rows);
    assert!(r.ok(), "{:?}", r.failure);
}

#[test]
fn a_dispatch_with_no_basis_or_one_its_previous_row_does_not_allow_fails() {
    let approved = || {
        vec![
            action("action.pending", "ses_1", "act_a", json!({})),
            action("action.approved", "ses_1", "act_a", json!({})),
        ]
    };
    // No basis at all.
    let mut rows = approved();
    rows.push(action("action.dispatched", "ses_1", "act_a", json!({})));
    fails_last("basis-none", Reason::NoValidBasis, &rows);
    // A decision on an action that was never approved (it was received: no card).
    fails_last(
        "basis-decision-received",
        Reason::NoValidBasis,
        &received_on("ses_1", "act_a", decision()),
    );
    // A policy on an approved action, and on a received one, a policy that never runs alone.
    let mut rows = approved();
    rows.push(dispatched("ses_1", "act_a", json!({"policy": "never"})));
    fails_last("basis-policy-approved", Reason::NoValidBasis, &rows);
    for policy in ["each", "session"] {
        fails_last(
            &format!("basis-policy-{policy}"),
            Reason::NoValidBasis,
            &received_on("ses_1", "act_a", json!({"policy": policy})),
        );
    }
    // A grant on an action that went through a card.
    let mut rows = vec![grant_add("ses_1", "grt_1", LATER)];
    rows.extend(approved());
    rows.push(dispatched("ses_1", "act_a", grant("grt_1")));
    fails_last("basis-grant-approved", Reason::NoValidBasis, &rows);
}

#[test]
fn a_dispatch_on_a_grant_the_journal_does_not_back_fails() {
    // Never recorded.
    fails_last(
        "grant-unknown",
        Reason::NoValidBasis,
        &received_on("ses_1", "act_a", grant("grt_x")),
    );
    // Revoked before.
    let mut rows = vec![
        grant_add("ses_1", "grt_1", LATER),
        grant_revoke("ses_1", "grt_1"),
    ];
    rows.extend(received_on("ses_1", "act_a", grant("grt_1")));
    fails_last("grant-revoked", Reason::NoValidBasis, &rows);
    // Another session's.
    let mut rows = vec![grant_add("ses_1", "grt_1", LATER)];
    rows.extend(received_on("ses_2", "act_a", grant("grt_1")));
    fails_last("grant-session", Reason::NoValidBasis, &rows);
    // Expired.
    let mut rows = vec![grant_add("ses_1", "grt_1", "2001-01-01T00:00:00.000Z")];
    rows.extend(received_on("ses_1", "act_a", grant("grt_1")));
    fails_last("grant-expired", Reason::NoValidBasis, &rows);
    // Recorded only after the dispatch.
    let mut rows = received_on("ses_1", "act_a", grant("grt_1")).to_vec();
    rows.push(grant_add("ses_1", "grt_1", LATER));
    let f = verdict("grant-late", &rows).failure.unwrap();
    assert_eq!(
        (f.reason, f.seq),
        (Reason::NoValidBasis, Some(3)),
        "{}",
        f.detail
    );
}

#[test]
fn grant_rows_that_contradict_the_journal_fail() {
    fails_last(
        "grant-revoke-unknown",
        Reason::GrantMismatch,
        &[grant_revoke("ses_1", "grt_x")],
    );
    fails_last(
        "grant-twice",
        Reason::GrantMismatch,
        &[
            grant_add("ses_1", "grt_1", LATER),
            grant_add("ses_1", "grt_1", LATER),
        ],
    );
    fails_last(
        "grant-revoked-twice",
        Reason::GrantMismatch,
        &[
            grant_add("ses_1", "grt_1", LATER),
            grant_revoke("ses_1", "grt_1"),
            grant_revoke("ses_1", "grt_1"),
        ],
    );
    // A grant row standing in another session's rows than its body names.
    let (kind, _, action, body) = grant_add("ses_1", "grt_1", LATER);
    fails_last(
        "grant-moved",
        Reason::GrantMismatch,
        &[(kind, "ses_2", action, body)],
    );
    let (kind, session, action, mut body) = grant_add("ses_1", "grt_1", LATER);
    body["expires_at"] = json!("soon");
    fails_last(
        "grant-expiry",
        Reason::GrantMismatch,
        &[(kind, session, action, body)],
    );
    let unreadable = ("grant.add", "ses_1", None, json!({"grant": 7}));
    fails_last("grant-unreadable", Reason::GrantMismatch, &[unreadable]);
}

/// Seeded: random journals of grants (recorded, some expired, some revoked) and actions in two
/// sessions, each dispatched on a basis picked at random, fit or not; the verdict is what a
/// plain model of the rules says: the first dispatch whose basis does not fit fails, for `no
/// valid basis`, and a journal with none verifies.
#[test]
fn random_journals_fail_at_the_first_dispatch_the_model_refuses() {
    use super::proptests::Rng;
    const IDS: [&str; 6] = ["grt_0", "grt_1", "grt_2", "grt_3", "grt_4", "grt_5"];
    const ACTS: [&str; 12] = [
        "act_0", "act_1", "act_2", "act_3", "act_4", "act_5", "act_6", "act_7", "act_8", "act_9",
        "act_10", "act_11",
    ];
    const SESSIONS: [&str; 2] = ["ses_1", "ses_2"];
    let mut outcomes = [0; 2];
    for seed in 1..=40u64 {
        let mut rng = Rng(0x6a09_e667_f3bc_c908 ^ seed);
        let mut rows: Vec<Row> = Vec::new();
        // The model: each grant's session, whether it expired, whether it was revoked.
        let mut grants: Vec<(&str, bool, bool)> = Vec::new();
        let mut first_bad: Option<usize> = None;
        let n = 3 + rng.below(ACTS.len() - 2);
        for &act in ACTS.iter().take(n) {
            let session = SESSIONS[rng.below(2)];
            if grants.len() < IDS.len() && rng.below(3) == 0 {
                let expired = rng.below(5) == 0;
                let at = if expired {
                    "2001-01-01T00:00:00.000Z"
                } else {
                    LATER
                };
                rows.push(grant_add(session, IDS[grants.len()], at));
                grants.push((session, expired, false));
            }
            if let Some(i) = (rng.below(4) == 0).then(|| rng.below(grants.len().max(1))) {
                if let Some(g) = grants.get_mut(i).filter(|g| !g.2) {
                    rows.push(grant_revoke(g.0, IDS[i]));
                    g.2 = true;
                }
            }
            let carded = rng.below(2) == 0;
            if carded {
                rows.push(action("action.pending", session, act, json!({})));
                rows.push(action("action.approved", session, act, json!({})));
            } else {
                rows.push(action("action.received", session, act, json!({})));
            }
            // Mostly a basis that fits (so some journals are all good), else any.
            let fitting = grants
                .iter()
                .position(|g| g.0 == session && !g.1 && !g.2 && !carded);
            let pick = match (rng.below(8), fitting) {
                (0, _) => rng.below(5),
                (_, _) if carded => 1,
                (1..=3, Some(i)) => 5 + i,
                _ => 2,
            };
            let (basis, fits) = match pick {
                0 => (json!({}), false),
                1 => (json!({"decision": "dec", "nonce": act}), carded),
                2 => (json!({"policy": "never"}), !carded),
                3 => (json!({"policy": "each"}), false),
                _ => {
                    let i = if pick > 4 {
                        pick - 5
                    } else {
                        rng.below(IDS.len())
                    };
                    let fits = grants
                        .get(i)
                        .is_some_and(|g| g.0 == session && !g.1 && !g.2 && !carded);
                    (grant(IDS[i]), fits)
                }
            };
            let basis = if pick == 0 { None } else { Some(basis) };
            let extra = basis.map_or(json!({}), |b| json!({"basis": b}));
            rows.push(action("action.dispatched", session, act, extra));
            if !fits && first_bad.is_none() {
                first_bad = Some(rows.len());
            }
        }
        let r = verdict(&format!("basis-seed-{seed}"), &rows);
        let got = r.failure.map(|f| (f.reason, f.seq));
        let want = first_bad.map(|n| (Reason::NoValidBasis, Some(n as i64 + 1)));
        assert_eq!(got, want, "seed {seed}");
        outcomes[usize::from(want.is_some())] += 1;
    }
    // Both verdicts occur, so neither side of the model is vacuous.
    assert!(outcomes[0] > 0 && outcomes[1] > 0, "{outcomes:?}");
}
