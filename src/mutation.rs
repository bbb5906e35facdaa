//! Switches that turn one security guard off, compiled in only with the `mutation` feature, for
//! `.ci/mutants`: every security test must go red when the guard it covers is off (issue 49,
//! "a check on the checks"). `AV_MUTATE=name[,name…]` in the environment of the `vault`
//! processes names the guards to switch off. Without the feature, `off` is `false` and the
//! compiler removes every branch it guards: no shipped build can be told to skip a guard.

/// Whether the guard `name` is switched off for this run (only ever with `--features mutation`).
#[cfg(feature = "mutation")]
pub(crate) fn off(name: &str) -> bool {
    std::env::var("AV_MUTATE").is_ok_and(|v| v.split(',').any(|g| g.trim() == name))
}

/// Whether the guard `name` is switched off: never, in a build without the `mutation` feature.
#[cfg(not(feature = "mutation"))]
#[inline(always)]
pub(crate) fn off(_name: &str) -> bool {
    false
}
