//! Seed 000's pipeline: rank 0 streams messages of 1,024 doubles to rank 1 over a K = 5
//! slack channel whose buffer, on each side, is a circular buffer of 5 x 1,024 doubles with
//! an address increment of 1,024 elements (start j uses window j mod 5). Element k of message
//! j is `j * 1024 + k`; rank 1 checks every element of every message and the count, and
//! prints one line (starts, bytes, seconds, GB/s). Other ranks take no part.
//!
//! ```text
//! ebrun -n 2 target/release/examples/channel_pipeline [--mode ready|sync] [--starts N] [--in-place]
//! ```
//!
//! * `--mode ready` (the default) binds from `rsend_init`: a send may start only once its
//!   receive has (earlier is MPI_ERR_REQUEST). Rank 1 tells rank 0 how many receives it has
//!   started with "credit" messages (one `u64` count each) on the world communicator, and
//!   rank 0 spends one credit per start. `--mode sync` binds from `ssend_init`: a send waits
//!   for its receive, and no credits are sent (except on the in-place path, see below).
//! * The copy path (the default) is the seed's own model: the sender writes window j of its
//!   circular buffer (through `Request::buffer_mut`, which a channel hands out between its
//!   calls even with starts outstanding), then starts j, keeping up to K starts outstanding;
//!   the receiver keeps K receives started, and its wait j copies message j into window j of
//!   its circular buffer, which it reads before starting receive j + K.
//! * `--in-place` streams without copies: the sender fills the next slot through
//!   `next_slot_mut` and publishes it with `start_filled`; the receiver reads each message in
//!   its slot with `wait_in_place`/`arrived`, then restarts. A slot can be handed out only
//!   once its receive is posted: the ready mode spends credits as above, and in synchronous
//!   mode `next_slot_mut` waits for it.
//!
//! `tests/channel_pipeline.rs` includes this file as a module and runs [`run`] as thread and
//! process jobs, and runs the built example under `ebrun -n 2`.

use earlybird::{
    bind_slack_channel, scope, unbind_channel, Channel, Comm, ErrHandler, ErrorClass, Info, Result,
};
use std::process::ExitCode;
use std::time::Instant;

/// Slackness: starts outstanding at most on each end, and windows per circular buffer.
pub(crate) const K: u32 = 5;
/// Doubles per message (and the address increment, in elements).
pub(crate) const COUNT: usize = 1024;
/// The channel's tag.
const TAG: i32 = 11;
/// The tag of the credit messages (ready mode).
const CREDIT: i32 = 12;

/// Element `k` of message `j`.
#[inline]
pub(crate) fn value(j: u64, k: usize) -> f64 {
    (j * COUNT as u64 + k as u64) as f64
}

/// How the send end is bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// From `rsend_init`: a send may start only after its receive.
    Ready,
    /// From `ssend_init`: a send waits for its receive.
    Sync,
}

/// One run of the pipeline.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Config {
    pub mode: Mode,
    pub starts: u64,
    pub in_place: bool,
}

/// What rank 1 saw.
#[derive(Clone, Debug)]
pub(crate) struct Outcome {
    pub config: Config,
    /// Messages received.
    pub received: u64,
    /// Elements checked.
    pub checked: u64,
    /// Elements that differed from [`value`].
    pub mismatches: u64,
    /// The first one: (message, element, value found).
    pub first_bad: Option<(u64, usize, f64)>,
    /// Bytes per message, as the channel reports them.
    pub bytes_per_start: usize,
    pub seconds: f64,
}

impl Outcome {
    /// The summary line.
    pub(crate) fn line(&self) -> String {
        let c = &self.config;
        let bytes = self.received * self.bytes_per_start as u64;
        let verdict = match self.first_bad {
            None if self.received == c.starts && self.checked == c.starts * COUNT as u64 => {
                "OK".to_string()
            }
            None => format!(
                "SHORT ({} messages, {} elements checked)",
                self.received, self.checked
            ),
            Some((j, k, v)) => format!(
                "MISMATCH ({} elements; first: message {j} element {k} is {v}, not {})",
                self.mismatches,
                value(j, k)
            ),
        };
        format!(
            "channel_pipeline: {verdict}: {} starts of {COUNT} doubles, K = {K}, {} mode, {} path: {bytes} bytes in {:.3} s, {:.2} GB/s",
            self.received,
            match c.mode {
                Mode::Ready => "ready",
                Mode::Sync => "sync",
            },
            if c.in_place { "in-place" } else { "copy" },
            self.seconds,
            bytes as f64 / self.seconds.max(1e-9) / 1e9,
        )
    }

    /// Whether every message arrived, whole and right.
    pub(crate) fn ok(&self) -> bool {
        self.first_bad.is_none()
            && self.received == self.config.starts
            && self.checked == self.config.starts * COUNT as u64
    }

    fn check(&mut self, j: u64, got: &[f64]) {
        self.received += 1;
        for (k, v) in got.iter().enumerate() {
            self.checked += 1;
            if *v != value(j, k) {
                self.mismatches += 1;
                self.first_bad.get_or_insert((j, k, *v));
            }
        }
    }
}

/// The window (in elements) of start `j` in a circular buffer of K messages bound with an
/// address increment of COUNT: `(j * COUNT) mod (K * COUNT)`.
#[inline]
fn window(j: u64) -> std::ops::Range<usize> {
    let w = (j % K as u64) as usize * COUNT;
    w..w + COUNT
}

/// Run the pipeline from rank 0 to rank 1 of `world` (at least 2 ranks). Rank 1 returns what
/// it saw; every other rank returns `None` (ranks 2 and up do nothing).
pub(crate) fn run(world: &Comm, config: Config) -> Result<Option<Outcome>> {
    let rank = world.rank();
    if world.size() < 2 {
        return Err(earlybird::Error::new(
            ErrorClass::Arg,
            "channel_pipeline needs at least 2 ranks",
        ));
    }
    if rank > 1 {
        return Ok(None);
    }
    // Errors come back as values, for the summary line.
    world.set_errhandler(ErrHandler::Return);
    let mut ring = vec![0.0f64; K as usize * COUNT];
    scope(|s| -> Result<Option<Outcome>> {
        let mut req = match (rank, config.mode) {
            (0, Mode::Ready) => world.rsend_init(s, &mut ring, 1, TAG)?,
            (0, Mode::Sync) => world.ssend_init(s, &mut ring, 1, TAG)?,
            _ => world.recv_init(s, &mut ring, 0, TAG)?,
        };
        let mut ch = bind_slack_channel(&mut req, K, COUNT as isize, &Info::new())?;
        let t0 = Instant::now();
        let out = if rank == 0 {
            if config.in_place {
                send_in_place(world, &mut ch, config)?;
            } else {
                send_copy(world, &mut ch, config)?;
            }
            None
        } else {
            let mut o = Outcome {
                config,
                received: 0,
                checked: 0,
                mismatches: 0,
                first_bad: None,
                bytes_per_start: ch.partner().bytes(),
                seconds: 0.0,
            };
            if config.in_place {
                recv_in_place(world, &mut ch, config, &mut o)?;
            } else {
                recv_copy(world, &mut ch, config, &mut o)?;
            }
            o.seconds = t0.elapsed().as_secs_f64();
            Some(o)
        };
        unbind_channel(&mut ch)?;
        Ok(out)
    })
}

/// The sender's count of receives rank 1 has started and rank 0 has not sent to yet.
struct Credits {
    left: u64,
}

impl Credits {
    /// Spend one credit, waiting for rank 1's next credit message when none is left.
    fn take(&mut self, world: &Comm) -> Result<()> {
        while self.left == 0 {
            let mut n = [0u64];
            world.recv(&mut n, 1, CREDIT)?;
            self.left += n[0];
        }
        self.left -= 1;
        Ok(())
    }
}

/// Tell rank 0 that `n` more receives are started.
fn give_credits(world: &Comm, n: u64) -> Result<()> {
    world.send(&[n], 0, CREDIT)
}

/// Copy path, sender: window j of the circular buffer written, then start j, with up to K
/// starts outstanding (the channel reads window j at start j, or, in synchronous mode, when
/// its receive is posted: window j is not written again before start j + K, which waits for
/// start j first).
fn send_copy(world: &Comm, ch: &mut Channel<'_>, c: Config) -> Result<()> {
    let mut credits = Credits { left: 0 };
    for j in 0..c.starts {
        if j >= K as u64 {
            ch.wait()?;
        }
        for (k, v) in ch.buffer_mut::<f64>()?[window(j)].iter_mut().enumerate() {
            *v = value(j, k);
        }
        if c.mode == Mode::Ready {
            credits.take(world)?;
        }
        ch.start()?;
    }
    while ch.is_active() {
        ch.wait()?;
    }
    Ok(())
}

/// Copy path, receiver: K receives kept started; wait j copies message j into window j,
/// which is read before receive j + K (the next to use it) is started.
fn recv_copy(world: &Comm, ch: &mut Channel<'_>, c: Config, o: &mut Outcome) -> Result<()> {
    let first = c.starts.min(K as u64);
    for _ in 0..first {
        ch.start()?;
    }
    if c.mode == Mode::Ready && first > 0 {
        give_credits(world, first)?;
    }
    for j in 0..c.starts {
        ch.wait()?;
        o.check(j, &ch.buffer_mut::<f64>()?[window(j)]);
        if j + (K as u64) < c.starts {
            ch.start()?;
            if c.mode == Mode::Ready {
                give_credits(world, 1)?;
            }
        }
    }
    Ok(())
}

/// In-place path, sender: each message written in its slot and published, up to K sends
/// outstanding.
fn send_in_place(world: &Comm, ch: &mut Channel<'_>, c: Config) -> Result<()> {
    let mut credits = Credits { left: 0 };
    for j in 0..c.starts {
        if j >= K as u64 {
            ch.wait()?;
        }
        if c.mode == Mode::Ready {
            credits.take(world)?;
        }
        // Ready mode: a credit says its receive is posted. Synchronous mode: this waits
        // for it.
        let slot = ch.next_slot_mut::<f64>()?;
        for (k, v) in slot.iter_mut().enumerate() {
            *v = value(j, k);
        }
        ch.start_filled()?;
    }
    while ch.is_active() {
        ch.wait()?;
    }
    Ok(())
}

/// In-place path, receiver: K receives kept started; each message read in its slot, then
/// its receive started again.
fn recv_in_place(world: &Comm, ch: &mut Channel<'_>, c: Config, o: &mut Outcome) -> Result<()> {
    let first = c.starts.min(K as u64);
    for _ in 0..first {
        ch.start()?;
    }
    if c.mode == Mode::Ready && first > 0 {
        give_credits(world, first)?;
    }
    for j in 0..c.starts {
        ch.wait_in_place()?;
        o.check(j, ch.arrived::<f64>()?);
        if j + (K as u64) < c.starts {
            ch.start()?;
            if c.mode == Mode::Ready {
                give_credits(world, 1)?;
            }
        }
    }
    Ok(())
}

const USAGE: &str =
    "usage: channel_pipeline [--mode ready|sync] [--starts N] [--in-place]   (2 ranks or more; N default 100000)";

fn parse_args(args: &[String]) -> Option<Config> {
    let mut c = Config {
        mode: Mode::Ready,
        starts: 100_000,
        in_place: false,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--mode" => {
                c.mode = match it.next()?.as_str() {
                    "ready" => Mode::Ready,
                    "sync" => Mode::Sync,
                    _ => return None,
                }
            }
            "--starts" => c.starts = it.next()?.parse().ok()?,
            "--in-place" => c.in_place = true,
            _ => return None,
        }
    }
    Some(c)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(config) = parse_args(&args) else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let outcome = earlybird::init().and_then(|u| {
        if u.world().size() < 2 {
            u.finalize()?;
            return Ok(Err(()));
        }
        let o = run(u.world(), config)?;
        u.finalize()?;
        Ok(Ok(o))
    });
    match outcome {
        Err(e) => {
            eprintln!("channel_pipeline: {e}");
            ExitCode::FAILURE
        }
        Ok(Err(())) => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
        Ok(Ok(None)) => ExitCode::SUCCESS,
        Ok(Ok(Some(o))) => {
            println!("{}", o.line());
            if o.ok() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
    }
}
