//! The authenticated, encrypted channel between a person's command and the agent: Noise
//! `NNpsk0` (snow) with a pre-shared key derived from the master key, so only a process that
//! holds the vault's key can complete the handshake on either side. A process on the socket path
//! that relays the bytes sees ciphertext only, and can neither read, change, reorder, drop
//! nor replay a frame unnoticed (every message is sealed under the next nonce of its direction).
//!
//! On the wire the handshake is two JSON lines: the client's `Open`, the agent's `Accept`. After
//! that each direction is a run of Noise transport messages, each sent as its length (a
//! big-endian `u16`, Noise's own framing) and the message, binary: no base64 to encode and
//! decode, a third fewer bytes. A message's plaintext is a flag byte (1: the frame's last chunk)
//! and up to `CHUNK` bytes of the frame's JSON. Frames are reassembled under `MAX_FRAME`, in
//! buffers wiped as they grow and when dropped.
use super::protocol::{reserve_wiped, MAX_FRAME};
use crate::keys::MasterKey;
use base64::Engine;
use serde::{Deserialize, Serialize};
use snow::StatelessTransportState;
use std::sync::Arc;
use zeroize::Zeroizing;

/// The Noise protocol name both ends use.
const NOISE: &str = "Noise_NNpsk0_25519_ChaChaPoly_SHA256";

/// The domain of the channel's pre-shared key.
const PSK_CONTEXT: &str = "agent-vault channel psk v1";

/// The largest Noise message (the spec's limit) and its authentication tag.
const MAX_MESSAGE: usize = 65535;
const TAG: usize = 16;
/// Frame bytes per chunk: a Noise message less its tag and the flag byte.
const CHUNK: usize = MAX_MESSAGE - TAG - 1;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// Why the channel could not be opened or a message read.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    #[error("the other end does not hold this vault's key (the encrypted handshake failed)")]
    Handshake,
    #[error("a message on the encrypted channel was altered, replayed, reordered or dropped")]
    Tampered,
    #[error("a frame on the encrypted channel is longer than {MAX_FRAME} bytes")]
    TooLong,
    #[error("the channel message is not readable: {0}")]
    Malformed(String),
}

/// The channel's pre-shared key, derived from the master key (never the key itself).
pub fn channel_key(master: &MasterKey) -> Zeroizing<[u8; 32]> {
    Zeroizing::new(blake3::derive_key(PSK_CONTEXT, master.expose()))
}

/// The client's first line: the protocol version and the first handshake message.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Open {
    pub channel: u32,
    pub noise: String,
}

/// The agent's answer: the second handshake message.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Accept {
    pub noise: String,
}

/// The version of this channel (`Open.channel`).
/// 2: transport messages as length and bytes (1 sent them as base64 lines).
pub const CHANNEL_VERSION: u32 = 2;

fn builder<'a>(psk: &'a [u8; 32], prologue: &'a [u8]) -> Result<snow::Builder<'a>, ChannelError> {
    let params = NOISE
        .parse()
        .map_err(|_| ChannelError::Malformed("noise parameters".into()))?;
    snow::Builder::new(params)
        .psk(0, psk)
        .and_then(|b| b.prologue(prologue))
        .map_err(|_| ChannelError::Handshake)
}

/// The prologue both ends mix in: the channel version and the vault, so a handshake for one
/// vault never completes against another's agent.
fn prologue(vault_id: &str) -> Vec<u8> {
    format!("agent-vault channel v{CHANNEL_VERSION}\n{vault_id}").into_bytes()
}

/// The client's side of a handshake in progress.
pub struct Initiator(snow::HandshakeState);

impl Initiator {
    /// Starts a handshake; returns the state and the `Open` line to send.
    pub fn start(psk: &[u8; 32], vault_id: &str) -> Result<(Self, Vec<u8>), ChannelError> {
        let p = prologue(vault_id);
        let mut hs = builder(psk, &p)?
            .build_initiator()
            .map_err(|_| ChannelError::Handshake)?;
        let mut buf = [0u8; 128];
        let n = hs
            .write_message(&[], &mut buf)
            .map_err(|_| ChannelError::Handshake)?;
        let open = Open {
            channel: CHANNEL_VERSION,
            noise: B64.encode(&buf[..n]),
        };
        let mut line = serde_json::to_vec(&open).expect("Open serializes");
        line.push(b'\n');
        Ok((Self(hs), line))
    }

    /// Reads the agent's `Accept` line (without its newline) and opens the channel.
    pub fn finish(mut self, line: &[u8]) -> Result<(Sealer, Opener), ChannelError> {
        let accept: Accept = serde_json::from_slice(line).map_err(|_| ChannelError::Handshake)?;
        let msg = B64
            .decode(accept.noise)
            .map_err(|_| ChannelError::Handshake)?;
        let mut buf = [0u8; 128];
        self.0
            .read_message(&msg, &mut buf)
            .map_err(|_| ChannelError::Handshake)?;
        split(self.0)
    }
}

/// The agent's side: answers an `Open` line; returns the channel and the `Accept` line.
pub fn respond(
    psk: &[u8; 32],
    vault_id: &str,
    open: &Open,
) -> Result<(Sealer, Opener, Vec<u8>), ChannelError> {
    if open.channel != CHANNEL_VERSION {
        return Err(ChannelError::Malformed(format!(
            "channel version {} (this agent speaks {CHANNEL_VERSION}); run the same `vault` binary for both",
            open.channel
        )));
    }
    let p = prologue(vault_id);
    let mut hs = builder(psk, &p)?
        .build_responder()
        .map_err(|_| ChannelError::Handshake)?;
    let msg = B64
        .decode(&open.noise)
        .map_err(|_| ChannelError::Handshake)?;
    let mut buf = [0u8; 128];
    hs.read_message(&msg, &mut buf)
        .map_err(|_| ChannelError::Handshake)?;
    let n = hs
        .write_message(&[], &mut buf)
        .map_err(|_| ChannelError::Handshake)?;
    let accept = Accept {
        noise: B64.encode(&buf[..n]),
    };
    let mut line = serde_json::to_vec(&accept).expect("Accept serializes");
    line.push(b'\n');
    let (sealer, opener) = split(hs)?;
    Ok((sealer, opener, line))
}

fn split(hs: snow::HandshakeState) -> Result<(Sealer, Opener), ChannelError> {
    let state = Arc::new(
        hs.into_stateless_transport_mode()
            .map_err(|_| ChannelError::Handshake)?,
    );
    Ok((
        Sealer {
            state: state.clone(),
            next: 0,
        },
        Opener {
            state,
            next: 0,
            partial: Zeroizing::new(Vec::new()),
        },
    ))
}

/// Seals frames for one direction (each message under the next nonce).
pub struct Sealer {
    state: Arc<StatelessTransportState>,
    next: u64,
}

impl Sealer {
    /// One frame (its JSON, without a newline) as channel messages, each after its length.
    /// The result is ciphertext only; the plaintext passes through one wiped chunk buffer.
    pub fn seal(&mut self, frame: &[u8]) -> Vec<u8> {
        let chunks = frame.len().div_ceil(CHUNK).max(1);
        let mut out = Vec::with_capacity(frame.len() + chunks * (2 + 1 + TAG));
        let mut plain = Zeroizing::new(Vec::with_capacity(CHUNK.min(frame.len()) + 1));
        let mut chunks = frame.chunks(CHUNK).peekable();
        loop {
            let chunk = chunks.next().unwrap_or(&[]);
            let last = chunks.peek().is_none();
            plain.clear();
            plain.push(u8::from(last));
            plain.extend_from_slice(chunk);
            let at = out.len();
            out.resize(at + 2 + plain.len() + TAG, 0);
            let n = self
                .state
                .write_message(self.next, &plain, &mut out[at + 2..])
                .expect("a chunk always fits one Noise message");
            self.next += 1;
            let len = u16::try_from(n).expect("a Noise message is at most 65535 bytes");
            out[at..at + 2].copy_from_slice(&len.to_be_bytes());
            out.truncate(at + 2 + n);
            if last {
                return out;
            }
        }
    }
}

/// Opens the other direction's messages and reassembles frames.
pub struct Opener {
    state: Arc<StatelessTransportState>,
    next: u64,
    partial: Zeroizing<Vec<u8>>,
}

impl Opener {
    /// One channel message (without its length): `Some(frame)` when it completes a frame. It is
    /// decrypted in place at the end of the frame being reassembled.
    pub fn open(&mut self, msg: &[u8]) -> Result<Option<Zeroizing<Vec<u8>>>, ChannelError> {
        if msg.len() > MAX_MESSAGE || msg.len() <= TAG {
            return Err(ChannelError::Malformed(
                "a message of the wrong size".into(),
            ));
        }
        let at = self.partial.len();
        if at + msg.len() - TAG - 1 > MAX_FRAME {
            return Err(ChannelError::TooLong);
        }
        reserve_wiped(&mut self.partial, msg.len());
        self.partial.resize(at + msg.len(), 0);
        let opened = self
            .state
            .read_message(self.next, msg, &mut self.partial[at..]);
        let Ok(n) = opened else {
            self.partial[at..].fill(0);
            self.partial.truncate(at);
            return Err(ChannelError::Tampered);
        };
        self.next += 1;
        // Drop the flag byte: the chunk moves down over it, and what it leaves is wiped.
        let flag = self.partial[at];
        self.partial.copy_within(at + 1..at + n, at);
        let end = at + n - 1;
        self.partial[end..].fill(0);
        self.partial.truncate(end);
        match flag {
            0 => Ok(None),
            1 => Ok(Some(std::mem::take(&mut self.partial))),
            _ => Err(ChannelError::Tampered),
        }
    }
}

#[cfg(test)]
mod tests;
