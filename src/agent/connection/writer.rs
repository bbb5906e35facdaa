//! The writing half of one client connection: whole frames, one at a time, sealed once the
//! encrypted channel is open; and the sink that carries a tool call's events to it.
use crate::agent::channel::Sealer;
use crate::agent::protocol::{self, AgentFrame, Event, Reply};
use crate::services::tools::EventSink;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use tokio::io::AsyncWriteExt;
use tokio::net::unix::OwnedWriteHalf;

/// Writes frames to one connection, one whole frame at a time (sealed once the connection runs
/// over the encrypted channel).
pub(super) struct Writer(tokio::sync::Mutex<Out>);

struct Out {
    half: OwnedWriteHalf,
    sealer: Option<Sealer>,
}

impl Writer {
    pub(super) fn new(half: OwnedWriteHalf) -> Self {
        Self(tokio::sync::Mutex::new(Out { half, sealer: None }))
    }

    pub(super) async fn frame(&self, frame: &AgentFrame) {
        let line = protocol::encode(frame);
        let mut w = self.0.lock().await;
        let Out { half, sealer } = &mut *w;
        let _ = match sealer {
            Some(s) => half.write_all(&s.seal(&line[..line.len() - 1])).await,
            None => half.write_all(&line).await,
        };
    }

    /// The handshake's answer (plain), then every later frame sealed.
    pub(super) async fn start_channel(&self, accept: &[u8], sealer: Sealer) {
        let mut w = self.0.lock().await;
        let _ = w.half.write_all(accept).await;
        w.sealer = Some(sealer);
    }
    pub(super) async fn reply(&self, id: u64, reply: Reply) {
        self.frame(&AgentFrame::Reply {
            id,
            reply: Box::new(reply),
        })
        .await;
    }
}

/// Where a tool call's events (progress, the card's state) go: its request's id on the writer.
pub(super) struct Sink {
    writer: Arc<Writer>,
    id: u64,
}

impl Sink {
    pub(super) fn new(writer: Arc<Writer>, id: u64) -> Self {
        Self { writer, id }
    }
}

impl EventSink for Sink {
    fn send(&self, event: Event) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(async move {
            self.writer
                .frame(&AgentFrame::Event { id: self.id, event })
                .await
        })
    }
}
