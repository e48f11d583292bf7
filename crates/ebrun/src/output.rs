//! `--tag-output`: forward each rank's stdout and stderr line by line, prefixed `[rank] `.
//!
//! One reader thread per pipe. A line is written with one `write_all` while ebrun's stdout
//! (or stderr) is locked, so lines of different ranks never interleave. A line longer than
//! [`MAX_LINE`] is cut there (memory stays bounded); a last line without a newline gets one.
//! If ebrun's own output is gone (a closed pipe), the reader keeps draining the rank's pipe
//! so the rank never blocks on a full pipe.

use std::io::{BufRead, BufReader, Read, Write};
use std::sync::mpsc::{Receiver, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Longest line forwarded whole.
pub(crate) const MAX_LINE: usize = 1 << 20;

/// Which of ebrun's streams a pipe goes to.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Stream {
    Stdout,
    Stderr,
}

/// The reader threads of a job; they report on a channel when they end.
pub(crate) struct Forwarders {
    threads: Vec<JoinHandle<()>>,
    done_tx: Sender<()>,
    done_rx: Receiver<()>,
}

impl Default for Forwarders {
    fn default() -> Self {
        Self::new()
    }
}

impl Forwarders {
    pub(crate) fn new() -> Forwarders {
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        Forwarders {
            threads: Vec::new(),
            done_tx,
            done_rx,
        }
    }

    /// Forward `pipe` to `to`, each line prefixed with `[rank] `.
    pub(crate) fn add<R: Read + Send + 'static>(&mut self, rank: u32, pipe: R, to: Stream) {
        let done = self.done_tx.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("ebrun-out-{rank}"))
            .spawn(move || {
                forward(rank, pipe, to);
                let _ = done.send(());
            });
        match spawned {
            Ok(h) => self.threads.push(h),
            // Without a thread the pipe is dropped and the rank gets EPIPE on output; say so.
            Err(e) => eprintln!("ebrun: cannot start an output thread for rank {rank}: {e}"),
        }
    }

    /// Wait until every pipe reached end of file, or `limit` passed (a grandchild of a rank
    /// may hold a pipe open forever; ebrun does not wait for it).
    pub(crate) fn finish(self, limit: Duration) {
        let end = Instant::now() + limit;
        let mut left = self.threads.len();
        while left > 0 {
            let now = Instant::now();
            if now >= end || self.done_rx.recv_timeout(end - now).is_err() {
                return;
            }
            left -= 1;
        }
        for t in self.threads {
            let _ = t.join();
        }
    }
}

fn forward<R: Read>(rank: u32, pipe: R, to: Stream) {
    let prefix = format!("[{rank}] ");
    let mut reader = BufReader::with_capacity(64 << 10, pipe);
    let mut line: Vec<u8> = Vec::with_capacity(256);
    let mut sink_ok = true;
    let emit = |line: &mut Vec<u8>, sink_ok: &mut bool| {
        if line.last() != Some(&b'\n') {
            line.push(b'\n');
        }
        if *sink_ok {
            let mut out = Vec::with_capacity(prefix.len() + line.len());
            out.extend_from_slice(prefix.as_bytes());
            out.extend_from_slice(line);
            let r = match to {
                Stream::Stdout => {
                    let mut o = std::io::stdout().lock();
                    o.write_all(&out).and_then(|_| o.flush())
                }
                Stream::Stderr => std::io::stderr().lock().write_all(&out),
            };
            *sink_ok = r.is_ok();
        }
        line.clear();
    };
    loop {
        let avail = match reader.fill_buf() {
            Ok([]) => break,
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let room = MAX_LINE - line.len();
        let (take, complete) = match avail.iter().position(|&b| b == b'\n') {
            Some(i) if i < room => (i + 1, true),
            _ if avail.len() >= room => (room, true),
            _ => (avail.len(), false),
        };
        line.extend_from_slice(&avail[..take]);
        reader.consume(take);
        if complete {
            emit(&mut line, &mut sink_ok);
        }
    }
    if !line.is_empty() {
        emit(&mut line, &mut sink_ok);
    }
}
