//! Reading another process of the same uid the way an attacker's shell would: `ptrace` attach
//! and `/proc/PID/mem` over the readable ranges of `/proc/PID/maps`.
use std::os::unix::fs::FileExt;

/// `ptrace(PTRACE_ATTACH)` on `pid`; on success it detaches at once. `Err(errno)` otherwise.
pub fn ptrace_attach(pid: u32) -> Result<(), i32> {
    // SAFETY: PTRACE_ATTACH takes no pointers; on success we detach at once.
    let r = unsafe { libc::ptrace(libc::PTRACE_ATTACH, pid as libc::pid_t, 0, 0) };
    if r == 0 {
        let mut status = 0;
        // SAFETY: waitpid on the tracee we just attached, then PTRACE_DETACH.
        unsafe {
            libc::waitpid(pid as libc::pid_t, &mut status, libc::__WALL);
            libc::ptrace(libc::PTRACE_DETACH, pid as libc::pid_t, 0, 0);
        }
        Ok(())
    } else {
        Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
    }
}

/// Every readable byte of another process's memory, through `/proc/PID/mem`.
pub fn read_memory(pid: u32) -> std::io::Result<Vec<u8>> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps"))?;
    let mem = std::fs::File::open(format!("/proc/{pid}/mem"))?;
    let mut all = Vec::new();
    for line in maps.lines() {
        let mut parts = line.split_whitespace();
        let (Some(range), Some(perms)) = (parts.next(), parts.next()) else {
            continue;
        };
        if !perms.starts_with('r') || line.contains("[vvar]") || line.contains("[vsyscall]") {
            continue;
        }
        let (a, b) = range.split_once('-').unwrap();
        let (a, b) = (
            u64::from_str_radix(a, 16).unwrap(),
            u64::from_str_radix(b, 16).unwrap(),
        );
        if b - a > 256 << 20 {
            continue;
        }
        let mut buf = vec![0u8; (b - a) as usize];
        if let Ok(n) = mem.read_at(&mut buf, a) {
            all.extend_from_slice(&buf[..n]);
        }
    }
    Ok(all)
}

pub fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// Whether `pid` is gone: no such process, or a zombie (it ran its last instruction).
pub fn is_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next())
            .is_some_and(|state| state == "Z" || state == "X"),
    }
}

/// Which of `needles` occur in `hay` (one pass, fast enough unoptimized for a process's memory).
pub fn find_any(hay: &[u8], needles: &[&[u8]]) -> Vec<bool> {
    let mut first = [false; 256];
    for n in needles.iter().filter(|n| !n.is_empty()) {
        first[n[0] as usize] = true;
    }
    let mut found = vec![false; needles.len()];
    for (i, &b) in hay.iter().enumerate() {
        if !first[b as usize] {
            continue;
        }
        for (k, n) in needles.iter().enumerate() {
            if !found[k] && hay[i..].starts_with(n) {
                found[k] = true;
            }
        }
    }
    found
}
