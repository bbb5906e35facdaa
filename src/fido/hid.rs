//! The USB transport: a FIDO2 key as a Linux hidraw device. CTAPHID framing (init, CBOR messages,
//! keep-alives, continuation packets) is 1Password's `passkey-transports`; this file finds the
//! device (sysfs report descriptors that declare the FIDO usage page, no libudev), writes each
//! 64-byte report behind hidraw's report-id byte, and reads with a deadline.
use super::{FidoError, Transport};
use passkey_transports::hid::{ChannelHandler, Command, Message};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// CTAPHID's broadcast channel, where a client asks for a channel of its own.
const BROADCAST: u32 = 0xffff_ffff;
/// A full-speed HID report.
const REPORT: usize = 64;

/// Every `/dev/hidrawN` whose report descriptor declares the FIDO alliance usage page (0xF1D0),
/// sorted.
pub fn devices() -> Vec<PathBuf> {
    let Ok(dir) = std::fs::read_dir("/sys/class/hidraw") else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = dir
        .flatten()
        .filter_map(|e| {
            let desc = std::fs::read(e.path().join("device/report_descriptor")).ok()?;
            is_fido(&desc).then(|| Path::new("/dev").join(e.file_name()))
        })
        .collect();
    found.sort();
    found
}

/// Whether a HID report descriptor has a Usage Page item (a global short item, tag 0) of 0xF1D0.
fn is_fido(desc: &[u8]) -> bool {
    let mut i = 0;
    while i < desc.len() {
        let prefix = desc[i];
        if prefix == 0xFE {
            // A long item: its size is the next byte.
            let size = desc.get(i + 1).copied().map_or(0, usize::from);
            i += 3 + size;
            continue;
        }
        let size = match prefix & 0x03 {
            3 => 4,
            n => usize::from(n),
        };
        let data = desc.get(i + 1..i + 1 + size).unwrap_or(&[]);
        if prefix & 0xFC == 0x04 {
            let page = data
                .iter()
                .rev()
                .fold(0u32, |acc, b| (acc << 8) | u32::from(*b));
            if page == 0xF1D0 {
                return true;
            }
        }
        i += 1 + size;
    }
    false
}

/// One opened key, on the channel it gave this process.
pub struct HidKey {
    file: File,
    path: String,
    channel: u32,
    /// How long one command may wait for the person's touch.
    wait: Duration,
}

/// Writes each 64-byte packet `Message::send` produces as one hidraw report (report id 0 first).
struct Reports<'a>(&'a mut File);

impl Write for Reports<'_> {
    fn write(&mut self, packet: &[u8]) -> std::io::Result<usize> {
        let mut report = [0u8; REPORT + 1];
        let n = packet.len().min(REPORT);
        report[1..=n].copy_from_slice(&packet[..n]);
        self.0.write_all(&report)?;
        Ok(packet.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl HidKey {
    /// The first FIDO key plugged in, opened, with a channel of its own.
    pub fn first(wait: Duration) -> Result<Self, FidoError> {
        let path = devices().into_iter().next().ok_or(FidoError::NoDevice)?;
        Self::open(&path, wait)
    }

    /// Opens `path` and runs CTAPHID_INIT for a channel.
    pub fn open(path: &Path, wait: Duration) -> Result<Self, FidoError> {
        let shown = path.display().to_string();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(rustix::fs::OFlags::CLOEXEC.bits() as i32)
            .open(path)
            .map_err(|source| FidoError::Device {
                path: shown.clone(),
                source,
            })?;
        let mut key = Self {
            file,
            path: shown,
            channel: BROADCAST,
            wait,
        };
        let mut nonce = [0u8; 8];
        getrandom::fill(&mut nonce).expect("the OS random number generator failed");
        let reply = key.exchange(Command::Init, &nonce, Duration::from_secs(3))?;
        if reply.len() < 17 || reply[..8] != nonce {
            return Err(FidoError::Malformed(
                "a CTAPHID_INIT reply for another request",
            ));
        }
        key.channel = u32::from_ne_bytes(reply[8..12].try_into().expect("4 bytes"));
        Ok(key)
    }

    fn io(&self, source: std::io::Error) -> FidoError {
        FidoError::Device {
            path: self.path.clone(),
            source,
        }
    }

    /// Sends one message on this key's channel and reads the reply to it, skipping keep-alives
    /// and other channels' traffic, until `wait` has passed (then the request is cancelled).
    fn exchange(
        &mut self,
        command: Command,
        payload: &[u8],
        wait: Duration,
    ) -> Result<Vec<u8>, FidoError> {
        let message = Message::new(self.channel, command, payload)
            .map_err(|_| FidoError::Malformed("a request too large for CTAPHID"))?;
        message
            .send(&mut Reports(&mut self.file))
            .map_err(|e| self.io(e))?;
        let deadline = Instant::now() + wait;
        let mut handler = ChannelHandler::default();
        let mut packet = [0u8; REPORT];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                if let Ok(cancel) = Message::new(self.channel, Command::Cancel, &[]) {
                    let _ = cancel.send(&mut Reports(&mut self.file));
                }
                return Err(FidoError::Timeout(wait.as_secs()));
            }
            let timeout = rustix::event::Timespec::try_from(left.min(Duration::from_millis(250)))
                .expect("a short duration");
            let mut fds = [rustix::event::PollFd::new(
                &self.file,
                rustix::event::PollFlags::IN,
            )];
            match rustix::event::poll(&mut fds, Some(&timeout)) {
                Ok(0) | Err(rustix::io::Errno::INTR) => continue,
                Ok(_) => {}
                Err(e) => return Err(self.io(e.into())),
            }
            let n = self.file.read(&mut packet).map_err(|e| self.io(e))?;
            if n != REPORT {
                return Err(FidoError::Malformed("a HID report that is not 64 bytes"));
            }
            let Some(reply) = handler.handle_packet(&packet) else {
                continue;
            };
            if reply.channel != self.channel {
                continue;
            }
            match reply.command {
                Command::KeepAlive => continue,
                Command::Err => {
                    return Err(FidoError::Status(
                        reply.payload.first().copied().unwrap_or(0),
                    ))
                }
                _ => return Ok(reply.payload),
            }
        }
    }
}

impl Transport for HidKey {
    fn call(&mut self, command: u8, cbor: &[u8]) -> Result<Vec<u8>, FidoError> {
        let mut payload = Vec::with_capacity(cbor.len() + 1);
        payload.push(command);
        payload.extend_from_slice(cbor);
        self.exchange(Command::Cbor, &payload, self.wait)
    }
}

#[cfg(test)]
mod tests {
    use super::is_fido;

    #[test]
    fn a_fido_report_descriptor_is_told_from_a_keyboard() {
        // The start of a YubiKey's FIDO interface: Usage Page (0xF1D0), Usage (1).
        assert!(is_fido(&[0x06, 0xD0, 0xF1, 0x09, 0x01, 0xA1, 0x01]));
        // A keyboard: Usage Page (Generic Desktop), Usage (Keyboard).
        assert!(!is_fido(&[0x05, 0x01, 0x09, 0x06, 0xA1, 0x01]));
        // A long item is skipped whole, and a cut-off item ends the walk.
        assert!(is_fido(&[0xFE, 0x01, 0x00, 0xAA, 0x06, 0xD0, 0xF1]));
        assert!(!is_fido(&[0x06, 0xD0]));
    }
}
