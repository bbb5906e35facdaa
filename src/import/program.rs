//! `pass:ENTRY` and `keepassxc:FILE#ENTRY`: the password manager's own program run once, its
//! stdout read into one zeroizing buffer allocated up front (never grown, so no copy is left in
//! freed memory); the terminal and stdin stay the program's, for gpg's pinentry or the database
//! password.
use super::{exact, ImportError};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{ChildStderr, Command, ExitStatus, Stdio};
use zeroize::Zeroizing;

/// Most bytes read from a program's stdout (a `pass` entry may hold notes after its first line).
const MAX_OUTPUT: usize = 64 * 1024;

/// The first line of `pass show ENTRY`. gpg asks for its passphrase itself (pinentry), and
/// `pass`'s messages go to the terminal as they would.
pub(super) fn pass(label: &str, entry: &str) -> Result<Zeroizing<Vec<u8>>, ImportError> {
    let store = match std::env::var_os("PASSWORD_STORE_DIR") {
        Some(d) => PathBuf::from(d),
        None => dirs::home_dir().unwrap_or_default().join(".password-store"),
    };
    if !store.join(format!("{entry}.gpg")).is_file() {
        return Err(ImportError::NoEntry {
            label: label.into(),
            entry: entry.into(),
            store,
        });
    }
    let mut cmd = Command::new("pass");
    cmd.args(["show", "--", entry])
        .stdin(Stdio::inherit())
        .stderr(Stdio::inherit());
    let (out, status) = run(label, "pass", "pass", cmd, |_| {})?;
    if !status.success() {
        return Err(failed(label, "pass", status));
    }
    Ok(first_line(&out))
}

/// The Password attribute of ENTRY through `keepassxc-cli show -a Password FILE ENTRY`, which
/// asks for the database password itself (on the terminal, or stdin). Its stderr is passed on to
/// ours as it comes (the prompt, its errors) and its last lines kept, to name a missing entry.
pub(super) fn keepassxc(
    label: &str,
    file: &Path,
    entry: &str,
) -> Result<Zeroizing<Vec<u8>>, ImportError> {
    if let Err(err) = std::fs::metadata(file) {
        return Err(ImportError::File {
            label: label.into(),
            path: file.into(),
            err,
        });
    }
    let mut cmd = Command::new("keepassxc-cli");
    cmd.args(["show", "-a", "Password"])
        .arg(file)
        .arg(entry)
        .stdin(Stdio::inherit())
        .stderr(Stdio::piped());
    let mut tail = Vec::new();
    let (out, status) = run(label, "keepassxc-cli", "keepassxc", cmd, |err| {
        let Some(mut err) = err else {
            return;
        };
        let mut chunk = [0u8; 512];
        let mut stderr = std::io::stderr();
        while let Ok(n @ 1..) = err.read(&mut chunk) {
            // The program's own words on its terminal: its prompt and its errors, never the
            // password (that goes to stdout, read below).
            let _ = stderr.write_all(&chunk[..n]);
            let _ = stderr.flush();
            tail.extend_from_slice(&chunk[..n]);
            if tail.len() > 4096 {
                tail.drain(..tail.len() - 4096);
            }
        }
    })?;
    if !status.success() {
        let said = String::from_utf8_lossy(&tail);
        return Err(if said.contains("Could not find entry") {
            ImportError::NoKeepassEntry {
                label: label.into(),
                entry: entry.into(),
            }
        } else if said.contains("Invalid credentials") {
            ImportError::WrongPassword {
                label: label.into(),
            }
        } else {
            failed(label, "keepassxc-cli", status)
        });
    }
    // `show -a` prints the attribute and a line break.
    Ok(first_line(&out))
}

fn failed(label: &str, program: &'static str, status: ExitStatus) -> ImportError {
    ImportError::Failed {
        label: label.into(),
        program,
        status: status.to_string(),
    }
}

/// Runs `cmd` with stdout captured; `stderr` handles the child's stderr on a thread of its own
/// while stdout is read here.
fn run(
    label: &str,
    program: &'static str,
    package: &'static str,
    mut cmd: Command,
    stderr: impl FnOnce(Option<ChildStderr>) + Send,
) -> Result<(Zeroizing<Vec<u8>>, ExitStatus), ImportError> {
    let mut child = cmd.stdout(Stdio::piped()).spawn().map_err(|err| {
        if err.kind() == std::io::ErrorKind::NotFound {
            ImportError::Missing {
                label: label.into(),
                program,
                package,
            }
        } else {
            ImportError::Spawn {
                label: label.into(),
                program,
                err,
            }
        }
    })?;
    let mut stdout = child.stdout.take().expect("stdout is piped");
    let err = child.stderr.take();
    let mut buf = Zeroizing::new(vec![0u8; MAX_OUTPUT + 1]);
    let mut n = 0;
    let read = std::thread::scope(|s| {
        s.spawn(|| stderr(err));
        let read = loop {
            if n == buf.len() {
                break Ok(());
            }
            match stdout.read(&mut buf[n..]) {
                Ok(0) => break Ok(()),
                Ok(k) => n += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => break Err(e),
            }
        };
        // A child left writing into a pipe no one reads would never close its stderr, and the
        // scope waits for that thread: stop it first.
        if read.is_err() || n > MAX_OUTPUT {
            let _ = child.kill();
        }
        read
    });
    drop(stdout);
    if n > MAX_OUTPUT {
        let _ = child.wait();
        return Err(ImportError::TooLong {
            label: label.into(),
            program,
            max: MAX_OUTPUT,
        });
    }
    let status = child.wait();
    let spawn = |err| ImportError::Spawn {
        label: label.into(),
        program,
        err,
    };
    read.map_err(spawn)?;
    let status = status.map_err(spawn)?;
    buf.truncate(n);
    Ok((buf, status))
}

/// The bytes before the first line break (and a `\r` before it), copied exactly.
fn first_line(out: &[u8]) -> Zeroizing<Vec<u8>> {
    let line = out.split(|&b| b == b'\n').next().unwrap_or_default();
    exact(line.strip_suffix(b"\r").unwrap_or(line))
}
