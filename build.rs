//! Link-time settings of the `vault` binary only. `-z pack-relative-relocs` (DT_RELR; GNU ld
//! 2.38+, glibc 2.36+) packs the binary's 34,000 relative relocations into a small bitmap the
//! loader applies in one pass, instead of an 800 KiB table it reads and walks at every start:
//! every `vault mcp` an AI client spawns pays that start. The binary stays position-independent
//! (ASLR). Only on Linux with GNU ld, and only for the binaries, so no dependency is rebuilt.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    let gnu = std::env::var("CARGO_CFG_TARGET_ENV").is_ok_and(|env| env == "gnu");
    if linux && gnu {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}
