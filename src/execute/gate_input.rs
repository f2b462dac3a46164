//! The standard input of a command sent ahead through an async stream (a local client's
//! pipe, an API exec stream), where the word that starts it ([`GO`]) is
//! written once: by the pass that releases a step's nodes together
//! ([`super::primed::PrimedCommands::release`]), or else by the call that hears it out.
//! (Over SSH the word goes through a blocking channel: [`super::ssh::Primed`].)

use std::time::{Duration, Instant};

use tokio::io::{AsyncWrite, AsyncWriteExt};

/// A waiting command's input, whatever carries it (a client's pipe, an engine's exec
/// stream), as one type.
pub(super) type BoxedInput = std::pin::Pin<Box<dyn AsyncWrite + Send>>;

/// The word a primed command waits for on its standard input before it runs.
pub(super) const GO: &str = "go";

/// How long sending the word to one waiting command may take when it is released: a
/// few bytes on an established connection or an open stream, never worth a stalled loop.
pub(super) const RELEASE_LIMIT: Duration = Duration::from_millis(500);

/// A waiting command's input, and when the word was written to it. Dropped, the input
/// closes: the gate of one not yet released reads end-of-file and runs nothing.
pub(super) struct GateInput<W> {
    input: Option<W>,
    released: Option<Instant>,
}

impl<W: AsyncWrite + Unpin> GateInput<W> {
    /// `input`, the word not written to it yet (`None`: there is none to write to).
    pub(super) fn new(input: Option<W>) -> GateInput<W> {
        GateInput {
            input,
            released: None,
        }
    }

    /// Writes the word, unless it was written already: once only, whoever asks first.
    /// A write that fails or hangs past [`RELEASE_LIMIT`] counts as made: the command
    /// then ends as its client or stream says, and is never sent a second word.
    pub(super) async fn release(&mut self) {
        if self.released.is_some() {
            return;
        }
        self.released = Some(Instant::now());
        let word = format!("{GO}\n");
        let written = match self.input.as_mut() {
            Some(input) => tokio::time::timeout(RELEASE_LIMIT, async {
                input.write_all(word.as_bytes()).await?;
                input.flush().await
            })
            .await
            .unwrap_or_else(|_| Err(std::io::ErrorKind::TimedOut.into())),
            None => Err(std::io::Error::other("no standard input")),
        };
        if let Err(e) = written {
            tracing::debug!("the word did not reach a primed command: {e}");
        }
    }

    /// When the word was written, if it was: a released command runs (or ran), so what
    /// it says must never be taken for a sign that it had gone before it was due.
    pub(super) fn released_at(&self) -> Option<Instant> {
        self.released
    }

    /// Whether there is an input to write the word to.
    pub(super) fn is_open(&self) -> bool {
        self.input.is_some()
    }
}
