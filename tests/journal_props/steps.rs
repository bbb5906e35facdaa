//! The steps of tests/journal_props.rs: what the person and the agent do, drawn at random from a
//! seed (`random_steps`), and a tour that takes every kind of row the services write (`tour`).

/// One step. Indices pick among what exists when the step runs (modulo), so a sequence with
/// steps deleted still means something.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Step {
    AddCredential {
        approval: u8,
        keyed: bool,
    },
    Edit {
        cred: u8,
        approval: u8,
    },
    Remove {
        cred: u8,
    },
    StartSession,
    EndSession {
        session: u8,
    },
    Call {
        session: u8,
        cred: u8,
        write: bool,
        path: u8,
        expiring: bool,
    },
    Approve {
        action: u8,
        how: u8,
    },
    /// A read next to an earlier one, in its session and on its credential (what a grant given
    /// on that earlier read may cover).
    ReadAgain {
        action: u8,
    },
    Deny {
        action: u8,
    },
    Dispatch {
        action: u8,
        finish: bool,
    },
    Withdraw {
        action: u8,
    },
    Expire,
    Revoke {
        all: bool,
    },
    Pause,
    Resume,
    SetPin,
    AddKey,
    RemoveKey,
    Restart,
    /// Not the vault's: a forger with the database key approves a waiting action (never drawn at
    /// random; the shrinker's own test).
    Forge,
}

fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    s.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

pub(crate) fn random_steps(seed: u64, n: usize) -> Vec<Step> {
    // splitmix64 of the seed: neighbouring seeds start far apart (and never at 0).
    let mut s = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    s = (s ^ (s >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    s = (s ^ (s >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    s = (s ^ (s >> 31)) | 1;
    let mut r = move |k: u64| (xorshift(&mut s) % k) as u8;
    (0..n)
        .map(|_| match r(50) {
            0..=1 => Step::AddCredential {
                approval: r(6),
                keyed: r(3) == 0,
            },
            2 => Step::Edit {
                cred: r(8),
                approval: r(6),
            },
            3 => Step::Remove { cred: r(8) },
            4 => Step::StartSession,
            5 => Step::EndSession { session: r(4) },
            6..=15 | 43 => Step::Call {
                session: r(2),
                cred: r(4),
                write: r(3) == 0,
                path: r(2),
                expiring: r(8) == 0,
            },
            16..=23 => Step::Approve {
                action: r(8),
                how: r(6),
            },
            24 => Step::Deny { action: r(8) },
            25..=30 => Step::Dispatch {
                action: r(8),
                finish: r(5) != 0,
            },
            31 => Step::Withdraw { action: r(8) },
            32 => Step::Expire,
            33 | 44 => Step::Revoke { all: r(2) == 0 },
            34 => Step::Pause,
            35..=36 => Step::Resume,
            37 => Step::SetPin,
            38 | 45 => Step::Restart,
            46.. => Step::ReadAgain { action: r(2) },
            39..=41 => Step::AddKey,
            42 => Step::RemoveKey,
        })
        .collect()
}

/// A sequence that reaches every kind of row these services write (the random ones reach most).
pub(crate) fn tour() -> Vec<Step> {
    use Step::*;
    let call = |cred, write| Call {
        session: 0,
        cred,
        write,
        path: 0,
        expiring: false,
    };
    vec![
        AddCredential {
            approval: 0,
            keyed: false,
        },
        AddCredential {
            approval: 4,
            keyed: false,
        },
        AddCredential {
            approval: 2,
            keyed: true,
        },
        AddKey,
        StartSession,
        // A read approved for the session, a read its grant covers, both run.
        call(0, false),
        Approve { action: 0, how: 1 },
        ReadAgain { action: 0 },
        Dispatch {
            action: 0,
            finish: true,
        },
        Dispatch {
            action: 0,
            finish: true,
        },
        // The `never` policy; a touched approval; a wrong PIN then the right one.
        call(1, true),
        Dispatch {
            action: 0,
            finish: true,
        },
        call(2, true),
        Approve { action: 0, how: 0 },
        Dispatch {
            action: 0,
            finish: true,
        },
        call(0, true),
        Approve { action: 0, how: 3 },
        Approve { action: 0, how: 4 },
        // Cut off by a restart: indeterminate.
        Dispatch {
            action: 0,
            finish: false,
        },
        Restart,
        StartSession,
        call(0, true),
        Deny { action: 0 },
        call(0, true),
        Withdraw { action: 0 },
        Call {
            session: 0,
            cred: 0,
            write: true,
            path: 1,
            expiring: true,
        },
        Expire,
        Revoke { all: true },
        call(0, true),
        Pause,
        Resume,
        SetPin,
        Edit {
            cred: 0,
            approval: 3,
        },
        Remove { cred: 1 },
        RemoveKey,
        EndSession { session: 0 },
    ]
}
