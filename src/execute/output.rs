//! What one command produced, bounded so a chatty command cannot flood reports, nor a
//! chatty or hostile node grow faultline's memory without bound: output is cut to its
//! tail AS IT STREAMS, every transport keeping at most [`MAX_OUTPUT`] bytes of each stream
//! while it reads and discards the rest.

use std::io::Read;

use tokio::io::{AsyncRead, AsyncReadExt};

/// Output kept per command: the TAIL, where errors usually are.
pub const MAX_OUTPUT: usize = 4096;

/// Size of one read from a stream.
const CHUNK: usize = 16 * 1024;

/// The last bytes of a stream, at most `cap` of them, and how many bytes went by.
#[derive(Debug, Clone)]
pub(crate) struct Tail {
    kept: Vec<u8>,
    cap: usize,
    seen: u64,
}

impl Tail {
    /// An empty tail keeping at most `cap` bytes.
    pub(super) fn new(cap: usize) -> Tail {
        Tail {
            kept: Vec::with_capacity(cap),
            cap,
            seen: 0,
        }
    }

    /// Takes the next bytes of the stream, dropping from the front what exceeds the cap.
    pub(super) fn push(&mut self, chunk: &[u8]) {
        self.seen += chunk.len() as u64;
        if chunk.len() >= self.cap {
            self.kept.clear();
            self.kept
                .extend_from_slice(&chunk[chunk.len() - self.cap..]);
            return;
        }
        let over = (self.kept.len() + chunk.len()).saturating_sub(self.cap);
        self.kept.drain(..over);
        self.kept.extend_from_slice(chunk);
    }

    /// The bytes kept (the last ones seen).
    pub(crate) fn kept(&self) -> &[u8] {
        &self.kept
    }

    /// How many bytes the stream had in all.
    pub(super) fn seen(&self) -> u64 {
        self.seen
    }
}

/// Reads `r` to its end (or first error), keeping its tail; the error, if any, comes back
/// with what was read before it.
pub(super) fn read_tail(mut r: impl Read, cap: usize) -> (Tail, std::io::Result<()>) {
    let mut tail = Tail::new(cap);
    let mut buf = vec![0u8; CHUNK];
    loop {
        match r.read(&mut buf) {
            Ok(0) => return (tail, Ok(())),
            Ok(n) => tail.push(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return (tail, Err(e)),
        }
    }
}

/// [`read_tail`] for an async stream (a local child's pipe).
pub(crate) async fn read_tail_async(
    mut r: impl AsyncRead + Unpin,
    cap: usize,
) -> (Tail, std::io::Result<()>) {
    let mut tail = Tail::new(cap);
    let mut buf = vec![0u8; CHUNK];
    loop {
        match r.read(&mut buf).await {
            Ok(0) => return (tail, Ok(())),
            Ok(n) => tail.push(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return (tail, Err(e)),
        }
    }
}

/// Join the tails of stdout and stderr and keep at most [`MAX_OUTPUT`] bytes from the end,
/// saying how many bytes were cut.
pub(super) fn bounded(stdout: &Tail, stderr: &Tail) -> String {
    let mut all = String::from_utf8_lossy(stdout.kept()).into_owned();
    all.push_str(&String::from_utf8_lossy(stderr.kept()));
    let total = stdout.seen() + stderr.seen();
    let mut cut = all.len().saturating_sub(MAX_OUTPUT);
    while !all.is_char_boundary(cut) {
        cut += 1;
    }
    let kept = &all[cut..];
    let dropped = total.saturating_sub(kept.len() as u64);
    if dropped == 0 {
        return all;
    }
    format!("[{dropped} bytes cut]\n{kept}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tail(bytes: &[u8]) -> Tail {
        let mut t = Tail::new(MAX_OUTPUT);
        t.push(bytes);
        t
    }

    #[test]
    fn keeps_the_tail_of_long_output() {
        let long = "x".repeat(10_000) + "END";
        let out = bounded(&tail(long.as_bytes()), &tail(b""));
        assert!(out.ends_with("END"));
        assert!(out.starts_with("[5907 bytes cut]"), "{}", &out[..30]);
        assert_eq!(bounded(&tail(b"out\n"), &tail(b"err\n")), "out\nerr\n");
    }

    #[test]
    fn the_tail_of_both_streams_is_the_tail_of_stdout_then_stderr() {
        let out = bounded(&tail(&[b'o'; 3000]), &tail(&[b'e'; 3000]));
        assert!(out.starts_with("[1904 bytes cut]\n"), "{}", &out[..30]);
        assert!(out.ends_with(&"e".repeat(3000)));
        assert_eq!(out.matches('o').count(), MAX_OUTPUT - 3000);
    }

    #[test]
    fn never_splits_a_character() {
        let long = "é".repeat(5000);
        let out = bounded(&tail(long.as_bytes()), &tail(b""));
        assert!(out.len() <= MAX_OUTPUT + 32);
        let odd = "x".to_string() + &"é".repeat(5000);
        let out = bounded(&tail(odd.as_bytes()), &tail(b""));
        assert!(out.len() <= MAX_OUTPUT + 32);
    }

    /// A reader that never ends by itself: `limit` bytes of `x`, counting what was read.
    struct Endless {
        left: u64,
        read: u64,
    }

    impl Read for Endless {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = buf.len().min(self.left.try_into().unwrap_or(usize::MAX));
            buf[..n].fill(b'x');
            self.left -= n as u64;
            self.read += n as u64;
            Ok(n)
        }
    }

    #[test]
    fn the_reader_keeps_at_most_the_cap_of_an_unbounded_stream() {
        let mut r = Endless {
            left: 1 << 30,
            read: 0,
        };
        let (t, end) = read_tail(&mut r, MAX_OUTPUT);
        end.expect("no error");
        assert_eq!(r.read, 1 << 30, "read to the end, not stopped at the cap");
        assert_eq!(t.seen(), 1 << 30);
        assert_eq!(t.kept().len(), MAX_OUTPUT);
        assert!(
            t.kept.capacity() <= 2 * MAX_OUTPUT,
            "held {} bytes",
            t.kept.capacity()
        );
        // Chunks smaller and larger than the cap, mixed.
        let mut t = Tail::new(8);
        for chunk in [&b"abc"[..], b"defgh", b"ijklmnopqrstu", b"vw", b"xyz"] {
            t.push(chunk);
            assert!(t.kept().len() <= 8);
        }
        assert_eq!(t.kept(), b"qrstuvwxyz".get(2..).expect("tail"));
        assert_eq!(t.seen(), 26);
    }
}
