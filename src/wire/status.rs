//! What a custody agent says of itself: the hardening it got (for `vault doctor` and its startup
//! row).

/// What hardening the custody agent got, for `vault doctor` and its startup row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Hardening {
    /// Linux `PR_SET_DUMPABLE` is 0 (no same-uid ptrace attach, no `/proc/PID/mem`), or macOS
    /// `PT_DENY_ATTACH` succeeded.
    pub undumpable: bool,
    /// The core-dump size limit is 0.
    pub no_core: bool,
    /// The master key's page is locked in memory (never swapped).
    pub key_locked: bool,
}
