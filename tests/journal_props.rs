//! Every row the vault writes itself verifies (issue 46, item 1): seeded random sequences of the
//! person's and the agent's operations, run through the vault's own services on a real SQLCipher
//! store (credential add, edit and rm; sessions that start and end; calls on `each`, `writes`,
//! `session` and `never` credentials; approvals with the right PIN, a wrong one, the passphrase,
//! `s` for a session grant, a key's touch; denials; dispatches that complete or are cut off by a
//! restart; withdrawals; expiries; grant revocations; pause and resume; PIN changes; security keys
//! registered and removed; agent restarts with their lock, reap and unlock rows). After every
//! step the journal verifies, held to the approver's key; after the last one also in parallel
//! (the same verdict) and from its export. A tour takes every kind of row first; then the random
//! sequences (8 by default; `JOURNAL_PROPS_CASES=N JOURNAL_PROPS_SEED=S` for more), which must
//! reach every kind of row between them. A failing sequence is shrunk, by deleting steps while it
//! still fails, to the shortest one, which the failure prints with its seed.
//!
//! The agent's own glue (the socket, its start and stop) is not run here: its start and stop are
//! the rows it appends (`vault.lock`, `reap_orphans`, `vault.unlock`) and `session.start` /
//! `session.end` as `services` writes them. tests/forged_exports.rs runs the real agent.
mod support;

#[path = "journal_props/steps.rs"]
mod steps;
#[path = "journal_props/world.rs"]
mod world;

use steps::{random_steps, tour, Step};
use world::World;

/// Runs `steps` on a fresh vault, verifying after each; the first step after which the journal
/// is not held (its index, and why), if any. A panicking step counts as a failure at it.
fn first_failure(tag: &str, steps: &[Step]) -> Option<(usize, String)> {
    let mut w = World::new(tag);
    for (i, step) in steps.iter().enumerate() {
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| w.step(*step)));
        if let Err(p) = ran {
            let why = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            return Some((i, format!("the step panicked: {why}")));
        }
        if let Some(why) = w.broken(i + 1 == steps.len()) {
            return Some((i, why));
        }
    }
    REACHED.lock().unwrap().extend(w.kinds());
    None
}

/// Every kind of row (with its basis or touch) the passing sequences reached.
static REACHED: std::sync::Mutex<std::collections::BTreeSet<String>> =
    std::sync::Mutex::new(std::collections::BTreeSet::new());

/// The shortest sequence (by deleting steps, one at a time and in halves) that still fails.
fn shrink(tag: &str, mut steps: Vec<Step>) -> (Vec<Step>, String) {
    let (at, mut why) = first_failure(tag, &steps).expect("it failed");
    steps.truncate(at + 1);
    let mut chunk = steps.len() / 2;
    while chunk >= 1 {
        let mut i = 0;
        while i + chunk <= steps.len() {
            let mut fewer = steps.clone();
            fewer.drain(i..i + chunk);
            match first_failure(tag, &fewer) {
                Some((at, w)) => {
                    fewer.truncate(at + 1);
                    steps = fewer;
                    why = w;
                }
                None => i += 1,
            }
        }
        chunk /= 2;
    }
    (steps, why)
}

#[test]
fn every_journal_the_vault_writes_verifies_held_to_its_key_after_every_step() {
    let cases: u64 = std::env::var("JOURNAL_PROPS_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(8);
    let seed0: u64 = std::env::var("JOURNAL_PROPS_SEED")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0x46_0001);
    // First a tour that takes every kind of row the services write, then random sequences.
    if let Some((at, why)) = first_failure("tour", &tour()) {
        panic!("the tour: after step {at} the journal is not held to the key: {why}");
    }
    for case in 0..cases {
        let seed = seed0 + case;
        // A vault in use: a credential of each kind of policy, one that needs a touch, a key.
        let mut steps = vec![
            Step::AddCredential {
                approval: 0,
                keyed: false,
            },
            Step::AddCredential {
                approval: 3,
                keyed: false,
            },
            Step::AddCredential {
                approval: 4,
                keyed: false,
            },
            Step::AddCredential {
                approval: 2,
                keyed: true,
            },
            Step::AddKey,
            Step::StartSession,
        ];
        steps.extend(random_steps(seed, 44));
        let tag = format!("{seed:x}");
        if first_failure(&tag, &steps).is_some() {
            let (shortest, why) = shrink(&tag, steps);
            panic!(
                "seed {seed:#x} (JOURNAL_PROPS_SEED={seed} JOURNAL_PROPS_CASES=1): after these {} steps the journal is not held to the key: {why}\n{shortest:#?}",
                shortest.len()
            );
        }
    }
    // The default sequences reach every kind of row the vault writes in these services.
    if cases >= 8 && std::env::var("JOURNAL_PROPS_SEED").is_err() {
        let reached = REACHED.lock().unwrap().clone();
        for want in [
            "action.approved touch",
            "action.dispatched decision",
            "action.dispatched grant",
            "action.dispatched policy",
            "action.completed",
            "action.denied",
            "action.expired",
            "action.withdrawn",
            "action.failed_before_send",
            "action.indeterminate",
            "approval.pin_wrong",
            "approval.pin_set",
            "approver.key_add",
            "approver.key_remove",
            "credential.edit",
            "credential.rm",
            "grant.add",
            "grant.revoke",
            "session.end",
            "vault.pause",
            "vault.resume",
            "vault.lock",
        ] {
            assert!(
                reached.contains(want),
                "no sequence reached {want}: {reached:?}"
            );
        }
    }
}

/// The shrinker keeps only what a failure needs: a forger's approval dropped among honest steps
/// shrinks to a credential, a session, a call and the forgery.
#[test]
fn the_shrinker_keeps_only_the_steps_that_fail() {
    let mut steps = vec![
        Step::AddCredential {
            approval: 0,
            keyed: false,
        },
        Step::StartSession,
    ];
    // Noise that leaves the waiting call waiting (no pause, decision, expiry, end or restart).
    let noise = |seed| {
        random_steps(seed, 12).into_iter().filter(|s| {
            matches!(
                s,
                Step::AddCredential { .. }
                    | Step::StartSession
                    | Step::Call { write: false, .. }
                    | Step::Dispatch { .. }
                    | Step::SetPin
                    | Step::AddKey
                    | Step::RemoveKey
                    | Step::Revoke { .. }
                    | Step::Resume
            )
        })
    };
    steps.extend(noise(0x5eed));
    steps.push(Step::Call {
        session: 0,
        cred: 0,
        write: true,
        path: 0,
        expiring: false,
    });
    steps.extend(noise(0xbeef));
    steps.push(Step::Forge);
    steps.extend(noise(0xfeed));
    assert!(first_failure("shrink", &steps).is_some());
    let (shortest, why) = shrink("shrink", steps);
    assert!(why.contains("unsigned"), "{why}");
    assert!(shortest.len() <= 4, "{shortest:#?}");
    assert!(
        matches!(shortest.last(), Some(Step::Forge)),
        "{shortest:#?}"
    );
}
