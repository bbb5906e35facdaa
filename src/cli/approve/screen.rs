//! The interactive approval queue on the controlling terminal (never stdin/stdout, so
//! `yes | vault approve` cannot answer it): passphrase once, then one card per waiting action.
//! Keys: [a] approve once, [s] approve for this session, [d] deny (with an optional reason),
//! [v] view in full, [q] quit. A bell (and a desktop notification where `notify-send` exists)
//! marks a new card; the screen is redrawn only when the queue changes or a key is pressed; after
//! 15 idle minutes the passphrase is asked again.
use super::card::{self, CardData};
use crate::approvals::{self, Action, Verdict};
use crate::keys::{KeyMaterial, PassphraseSource};
use crate::paths::VaultPaths;
use crate::term::escape;
use crate::vault::Vault;
use crate::Exit;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::time::Instant;

const TICK_MS: i32 = 250;

/// The terminal in no-echo, one-key-at-a-time mode; restored on drop.
struct Tty {
    file: File,
    saved: libc::termios,
}

impl Tty {
    fn open() -> anyhow::Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/tty")
            .map_err(|_| anyhow::anyhow!("`vault approve` needs a terminal; without one use `vault approve --id ACT --approve|--deny --passphrase-stdin`"))?;
        // SAFETY: termios is plain data; tcgetattr fills it for a valid fd.
        let mut saved: libc::termios = unsafe { std::mem::zeroed() };
        if unsafe { libc::tcgetattr(file.as_raw_fd(), &mut saved) } != 0 {
            anyhow::bail!("cannot read the terminal's settings");
        }
        let tty = Self { file, saved };
        tty.raw(true);
        Ok(tty)
    }

    fn raw(&self, on: bool) {
        let mut t = self.saved;
        if on {
            t.c_lflag &= !(libc::ICANON | libc::ECHO);
            t.c_cc[libc::VMIN] = 0;
            t.c_cc[libc::VTIME] = 0;
        }
        // SAFETY: valid fd and a termios derived from the one the terminal gave us.
        unsafe { libc::tcsetattr(self.file.as_raw_fd(), libc::TCSANOW, &t) };
    }

    /// One key, or None after `TICK_MS`.
    fn key(&mut self) -> Option<u8> {
        let mut pfd = libc::pollfd {
            fd: self.file.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        if unsafe { libc::poll(&mut pfd, 1, TICK_MS) } <= 0 {
            return None;
        }
        let mut b = [0u8; 1];
        match self.file.read(&mut b) {
            Ok(1) => Some(b[0]),
            _ => None,
        }
    }

    fn line(&mut self, prompt: &str) -> String {
        self.raw(false);
        let _ = write!(self.file, "{prompt}");
        let _ = self.file.flush();
        let mut s = String::new();
        let mut b = [0u8; 1];
        while let Ok(1) = self.file.read(&mut b) {
            if b[0] == b'\n' {
                break;
            }
            s.push(b[0] as char);
        }
        self.raw(true);
        s.trim()
            .chars()
            .filter(|c| !c.is_control())
            .take(500)
            .collect()
    }

    /// Rows of the terminal (24 when it does not say).
    fn rows(&self) -> usize {
        match rustix::termios::tcgetwinsize(&self.file) {
            Ok(w) if w.ws_row > 0 => usize::from(w.ws_row),
            _ => 24,
        }
    }

    fn show(&mut self, text: &str) {
        let _ = self.file.write_all(text.replace('\n', "\r\n").as_bytes());
        let _ = self.file.flush();
    }
}

impl Drop for Tty {
    fn drop(&mut self) {
        // SAFETY: restores the settings read in `open`.
        unsafe { libc::tcsetattr(self.file.as_raw_fd(), libc::TCSANOW, &self.saved) };
    }
}

fn unlock(
    paths: &VaultPaths,
    source: &PassphraseSource,
    tty: &mut Tty,
) -> anyhow::Result<(Vault, KeyMaterial)> {
    tty.raw(false);
    let passphrase = source.read("Vault passphrase: ");
    tty.raw(true);
    Ok(Vault::open_with_passphrase(paths.clone(), &passphrase?)?)
}

pub fn run(
    paths: VaultPaths,
    source: PassphraseSource,
    config: &crate::config::Config,
) -> anyhow::Result<Exit> {
    let idle = config.approver_idle();
    let mut tty = Tty::open()?;
    let (mut vault, mut keys) = unlock(&paths, &source, &mut tty)?;
    let style = card::Style {
        color: std::env::var_os("NO_COLOR").is_none(),
    };
    let mut last_ids: Vec<String> = Vec::new();
    let mut last_key = Instant::now();
    let mut dirty = true;
    let mut note = String::from("Unlocked. Waiting for actions.");
    loop {
        let _ = approvals::reap_orphans(&mut vault.store);
        let _ = approvals::expire_due(&mut vault.store);
        let queue = approvals::list_pending(&vault.store)?;
        let ids: Vec<String> = queue.iter().map(|a| a.id.clone()).collect();
        if ids.iter().any(|id| !last_ids.contains(id)) {
            tty.show("\x07");
            notify(&queue[0]);
            dirty = true;
        }
        if ids != last_ids {
            dirty = true;
            last_ids = ids;
        }
        if dirty {
            let screen = match queue.first() {
                Some(a) => card::card(&card_data(&vault, a), queue.len(), style, &note),
                None => format!(
                    "\x1b[2J\x1b[H{}\nNo action waits. [q] quit\n",
                    escape(&note)
                ),
            };
            tty.show(&screen);
            dirty = false;
        }
        let Some(k) = tty.key() else { continue };
        if last_key.elapsed() > idle {
            tty.show(&format!(
                "\x1b[2J\x1b[HIdle for {} minutes: the passphrase is needed again.\n",
                idle.as_secs() / 60
            ));
            (vault, keys) = unlock(&paths, &source, &mut tty)?;
            last_key = Instant::now();
            dirty = true;
            continue;
        }
        last_key = Instant::now();
        let current = queue.first();
        let verdict = match (k, current) {
            (b'q' | b'Q', _) => {
                tty.show("\r\n");
                return Ok(Exit::Ok);
            }
            (b'a' | b's', Some(a)) => match card_data(&vault, a).approvable() {
                Ok(()) if k == b'a' => Some(Verdict::Approve),
                Ok(()) => Some(Verdict::ApproveSession),
                Err(why) => {
                    note = format!("Not approved: {} {why}.", a.id);
                    dirty = true;
                    None
                }
            },
            (b'd', Some(_)) => {
                let reason = tty.line("Reason for the agent (Enter for none): ");
                Some(Verdict::Deny((!reason.is_empty()).then_some(reason)))
            }
            (b'v', Some(a)) => {
                page_through(&mut tty, &card::full_view(&card_data(&vault, a)));
                dirty = true;
                None
            }
            _ => None,
        };
        if let (Some(v), Some(a)) = (verdict, current) {
            note = match approvals::decide(
                &mut vault.store,
                &keys.approver,
                &a.id,
                v,
                config.session_grant(),
            ) {
                Ok(d) => format!("{} {}: {}", capital(d.state.as_str()), d.id, d.summary),
                Err(e) => format!("Not decided: {e}"),
            };
            dirty = true;
        }
    }
}

fn capital(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
        .unwrap_or_default()
}

// The data a card shows, read from the vault: these few functions are the only reads.

fn client_of(vault: &Vault, a: &Action) -> (String, String, String) {
    let body: Option<String> = vault
        .store
        .conn()
        .query_row(
            "SELECT body FROM audit WHERE kind = 'session.start' AND session_id = ?1 LIMIT 1",
            [&a.session_id],
            |r| r.get(0),
        )
        .ok();
    let v: serde_json::Value = body
        .and_then(|b| serde_json::from_str(&b).ok())
        .unwrap_or_default();
    (
        v["client"]["name"].as_str().unwrap_or(&a.client).to_owned(),
        v["client"]["version"].as_str().unwrap_or("").to_owned(),
        v["parent"]["exe"].as_str().unwrap_or("?").to_owned(),
    )
}

fn stored_request(vault: &Vault, a: &Action) -> (serde_json::Value, Option<Vec<u8>>) {
    vault
        .store
        .conn()
        .query_row(
            "SELECT normalized, body FROM actions WHERE id = ?1",
            [&a.id],
            |r| Ok((r.get::<_, String>(0)?, r.get::<_, Option<Vec<u8>>>(1)?)),
        )
        .map(|(n, b)| (serde_json::from_str(&n).unwrap_or_default(), b))
        .unwrap_or_default()
}

/// Everything the card of `a` shows.
fn card_data(vault: &Vault, a: &Action) -> CardData {
    let (client_name, client_version, parent_exe) = client_of(vault, a);
    let (normalized, body) = stored_request(vault, a);
    CardData {
        id: a.id.clone(),
        tool: a.tool.clone(),
        credential: a.credential_name.clone(),
        summary: a.summary.clone(),
        action_hash: a.action_hash.clone(),
        created_at: a.created_at.clone(),
        expires_at: a.expires_at.clone(),
        client_name,
        client_version,
        parent_exe,
        normalized,
        body,
    }
}

/// Shows the full view a page at a time: space for the next page, any other key goes back.
fn page_through(tty: &mut Tty, lines: &[String]) {
    let per_page = tty.rows().saturating_sub(2).max(8);
    let pages = lines.len().div_ceil(per_page).max(1);
    for (n, page) in lines.chunks(per_page).enumerate() {
        let footer = if n + 1 == pages {
            "(end of the action: any key to go back)".to_owned()
        } else {
            format!(
                "-- page {} of {pages}: [space] next page, any other key to go back --",
                n + 1
            )
        };
        tty.show(&format!("\x1b[2J\x1b[H{}\n{footer}\n", page.join("\n")));
        let key = loop {
            if let Some(k) = tty.key() {
                break k;
            }
        };
        if key != b' ' {
            return;
        }
    }
}

/// A desktop notification where one is available; failures are silent.
fn notify(a: &Action) {
    if let Ok(mut child) = std::process::Command::new("notify-send")
        .args(["agent-vault: approval needed", &escape(&a.summary)])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
    {
        std::thread::spawn(move || child.wait());
    }
}
