//! The controlling terminal of `vault approve` (`/dev/tty`, never stdin/stdout, so `yes | vault
//! approve` cannot answer it), in no-echo, one-key-at-a-time mode and restored on drop: a key
//! within a tick, a line, the terminal's size, typed-ahead input flushed, a PIN read with nothing
//! shown (not even how many characters), and the full view shown a page at a time.
use super::layout::Size;
use crate::wire::Secret;
use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::termios::{
    self, LocalModes, OptionalActions, QueueSelector, SpecialCodeIndex, Termios,
};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::time::{Duration, Instant};

/// Ctrl-C, read as a key while the card is up.
pub(super) const CTRL_C: u8 = 3;
/// How long `Tty::key` waits for a key before the queue is looked at again.
const TICK: Duration = Duration::from_millis(250);
/// A PIN prompt with no key for this long is cancelled.
const PIN_WAIT: Duration = Duration::from_secs(60);
/// The longest PIN input read (longer input is cut; the agent refuses it).
const PIN_INPUT_MAX: usize = 64;
const ESC: u8 = 27;

/// The terminal in no-echo, one-key-at-a-time mode; restored on drop.
pub(super) struct Tty {
    file: File,
    saved: Termios,
}

impl Tty {
    pub(super) fn open() -> anyhow::Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/tty")
            .map_err(|_| anyhow::anyhow!("`vault approve` needs a terminal; without one use `vault approve --id ACT --approve|--deny --passphrase-stdin`"))?;
        let saved = termios::tcgetattr(&file)
            .map_err(|e| anyhow::anyhow!("cannot read the terminal's settings: {e}"))?;
        let tty = Self { file, saved };
        tty.raw(true);
        Ok(tty)
    }

    pub(super) fn raw(&self, on: bool) {
        let mut t = self.saved.clone();
        if on {
            // ISIG off too: Ctrl-C arrives as a key (quit), so the terminal is restored on the
            // way out instead of being left without echo by a signal.
            t.local_modes
                .remove(LocalModes::ICANON | LocalModes::ECHO | LocalModes::ISIG);
            t.special_codes[SpecialCodeIndex::VMIN] = 0;
            t.special_codes[SpecialCodeIndex::VTIME] = 0;
        }
        let _ = termios::tcsetattr(&self.file, OptionalActions::Now, &t);
    }

    /// Discards every key typed but not read yet: after a redraw, only keys pressed while the
    /// new screen was visible count.
    pub(super) fn flush_input(&self) {
        let _ = termios::tcflush(&self.file, QueueSelector::IFlush);
    }

    /// One key, or None after `TICK`.
    pub(super) fn key(&mut self) -> Option<u8> {
        let timeout = Timespec {
            tv_sec: 0,
            tv_nsec: TICK.as_nanos() as _,
        };
        let mut fds = [PollFd::new(&self.file, PollFlags::IN)];
        match rustix::event::poll(&mut fds, Some(&timeout)) {
            Ok(n) if n > 0 => {}
            _ => return None,
        }
        let mut b = [0u8; 1];
        match self.file.read(&mut b) {
            Ok(1) => Some(b[0]),
            _ => None,
        }
    }

    pub(super) fn line(&mut self, prompt: &str) -> String {
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
    pub(super) fn rows(&self) -> usize {
        self.size().rows
    }

    /// The terminal's size now (80×24 when it does not say): asked at every draw, so a
    /// resized window gets a card that fits.
    pub(super) fn size(&self) -> Size {
        match termios::tcgetwinsize(&self.file) {
            Ok(w) if w.ws_row > 0 && w.ws_col > 0 => Size {
                cols: usize::from(w.ws_col),
                rows: usize::from(w.ws_row),
            },
            _ => Size { cols: 80, rows: 24 },
        }
    }

    pub(super) fn show(&mut self, text: &str) {
        let _ = self.file.write_all(text.replace('\n', "\r\n").as_bytes());
        let _ = self.file.flush();
    }
}

impl Drop for Tty {
    fn drop(&mut self) {
        let _ = termios::tcsetattr(&self.file, OptionalActions::Now, &self.saved);
    }
}

/// Reads a PIN on the last line of the screen: nothing is shown as it is typed (not even how
/// many characters); Enter ends it, Esc or Ctrl-C cancels, and so does `PIN_WAIT` without a key.
pub(super) fn read_pin(tty: &mut Tty, prompt: &str) -> Option<Secret> {
    match read_pin_or_quit(tty, prompt) {
        PinRead::Typed(pin) => Some(pin),
        PinRead::Cancelled | PinRead::Quit => None,
    }
}

/// What a PIN prompt got: a PIN, nothing (Esc, Enter alone, or no key for a while), or Ctrl-C,
/// which means what it means everywhere else: quit.
pub(super) enum PinRead {
    Typed(Secret),
    Cancelled,
    Quit,
}

/// `read_pin`, telling Ctrl-C (quit `vault approve`) from Esc (back to the card).
pub(super) fn read_pin_or_quit(tty: &mut Tty, prompt: &str) -> PinRead {
    let rows = tty.rows();
    tty.show(&format!("\x1b[{rows};1H\x1b[2K{prompt}"));
    let mut typed = zeroize::Zeroizing::new(Vec::with_capacity(PIN_INPUT_MAX));
    let mut last = Instant::now();
    loop {
        let Some(k) = tty.key() else {
            if last.elapsed() > PIN_WAIT {
                return PinRead::Cancelled;
            }
            continue;
        };
        last = Instant::now();
        match k {
            b'\r' | b'\n' => break,
            CTRL_C => return PinRead::Quit,
            ESC => return PinRead::Cancelled,
            127 | 8 => {
                typed.pop();
            }
            k if k >= 0x20 && typed.len() < PIN_INPUT_MAX => typed.push(k),
            _ => {}
        }
    }
    if typed.is_empty() {
        return PinRead::Cancelled;
    }
    PinRead::Typed(Secret::new(std::mem::take(&mut *typed)))
}

/// Shows the full view a page at a time: space for the next page, any other key goes back.
pub(super) fn page_through(tty: &mut Tty, lines: &[String]) {
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
