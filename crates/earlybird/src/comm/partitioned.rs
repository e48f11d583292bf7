//! Partitioned point-to-point communication (MPI 4.0, MPI 4.1 §4): a persistent send whose
//! buffer is made of partitions the program marks ready one at a time ([`Comm::psend_init`],
//! [`Request::pready`]), and a persistent receive whose partitions can be checked one at a
//! time ([`Comm::precv_init`], [`Request::parrived`]). A request kind of its own, behind the
//! completion seam: [`Request::start`], [`Request::wait`], [`Request::test`] and the rest
//! work on it as on any persistent request.
//!
//! ```no_run
//! # fn main() -> earlybird::Result<()> {
//! let universe = earlybird::init()?;
//! let world = universe.world();
//! let info = earlybird::Info::new();
//! let (data, mut got) = ([1.0f64; 64], [0.0f64; 64]);
//! earlybird::scope(|s| -> earlybird::Result<()> {
//!     if world.rank() == 0 {
//!         let mut req = world.psend_init(s, &data, 8, 1, 0, &info)?;
//!         req.start()?;
//!         for p in 0..8 {
//!             req.pready(p)?; // partition p (8 doubles) may leave now
//!         }
//!         req.wait()?;
//!     } else if world.rank() == 1 {
//!         let mut req = world.precv_init(s, &mut got, 4, 0, 0, &info)?;
//!         req.start()?;
//!         while !req.parrived(0)? {} // the first 16 doubles
//!         req.wait()?;
//!     }
//!     Ok(())
//! })
//! # }
//! ```
//!
//! # How it works
//!
//! - **Matching at init, as MPI orders it.** A partitioned send and receive match by
//!   communicator, source and tag like any point-to-point pair, and where those do not single
//!   one out, in the order their init calls were made. Each `psend_init` therefore sends a
//!   small *hello* at once (metadata, not the buffer: the partitions, their size and the tags
//!   its data will use), and each `precv_init` posts the receive that matches one, on a context
//!   of the communicator's pair that only partitioned communication uses. The messages of one
//!   pair of endpoints on one context keep their order, so the k-th init of a sender matches
//!   the k-th init of its receiver for the same tag, whatever order the requests are started
//!   in. Init stays local: nothing waits for the peer.
//! - **Each partition leaves when it is ready** (the early-bird transfer partitioned
//!   communication exists for), in *transfer units*: a partition of at least
//!   [`PARTITION_UNIT_KEY`]'s bytes (2 KiB unless the info argument of `psend_init` says
//!   otherwise; 0 makes every partition its own unit) is a unit of its own, and smaller
//!   consecutive partitions are grouped into units of about that size, since below it a
//!   message costs more than the bytes it carries. [`Request::pready`] of a unit's last
//!   partition starts an ordinary send of the unit's bytes, eager or single-copy rendezvous by
//!   size, with a tag of its own on the data context. The receiver, once it knows the sender's
//!   units (from the hello), posts one receive per unit into the bytes of its own buffer that
//!   unit covers, so the two sides may use different partition counts: a receive partition has
//!   arrived when every unit overlapping it has. Both contexts are matched in buckets by
//!   source and tag, so many units in flight cost no queue scans.
//! - **Rounds.** The same tags serve every round; a round's messages keep their order behind
//!   the previous round's, and a receive posts its round's receives only at its start, after
//!   the previous round completed.
//!
//! # Semantics chosen where MPI leaves room
//!
//! - A partitioned receive names its source and tag: MPI_ANY_SOURCE is MPI_ERR_RANK and
//!   MPI_ANY_TAG MPI_ERR_TAG (MPI 4.1 §4.2.2 does not allow wildcards). MPI_PROC_NULL is a
//!   peer that sends and receives nothing: its requests complete at once.
//! - The message is the sender's whole buffer; a receive buffer shorter than it is
//!   MPI_ERR_TRUNCATE (the bytes that fit are delivered), a longer one is fine (its status
//!   counts the bytes that came; partitions past the message arrive when the message has).
//! - [`Request::pready`] on a receive, on an inactive request, twice for one partition in a
//!   round, or for a partition out of range, is an error (MPI_ERR_REQUEST or MPI_ERR_ARG naming
//!   it), and nothing is sent. [`Request::parrived`] on an inactive request says `true`
//!   (MPI 4.1 §4.2.4); on a send it is MPI_ERR_REQUEST.
//! - Waiting for a send whose partitions are not all marked ready could never return (the
//!   waiting thread is the only one that can mark them in the Rust API): it is
//!   MPI_ERR_REQUEST naming the first missing partition. A test just says "not yet".
//! - Freeing or cancelling an active partitioned request is MPI_ERR_REQUEST (MPI calls both
//!   erroneous); the request is then settled as when dropped: the partitions already sent are
//!   waited for, receives still posted are withdrawn.
//! - The info argument is accepted and kept for nothing: MPI defines no key for it.
//! - **The buffer in the Rust API** is lent to the request for its scope, as a persistent
//!   request's is: the program writes a send's next round (or reads what a receive brought)
//!   through [`Request::buffer_mut`] between rounds. Handing out one partition while the
//!   others are in flight (what a C program does between MPI_Start and each MPI_Pready) is
//!   not offered yet; the C interface has it, since its buffer is the program's.
//!
//! # Standard section(s)
//! MPI 4.1 §4 (partitioned point-to-point communication).
#![forbid(unsafe_code)]

use super::Comm;
use super::{pt2pt::SendLoan, SendBuf};
use crate::datatype::buffer::{lend_mut, BufferMut};
use crate::error::{Error, ErrorClass, Result};
use crate::info::Info;
use crate::p2p::engine::{Engine, SendMode, Started};
use crate::p2p::matching::Pattern;
use crate::p2p::ops::OpId;
use crate::p2p::wait::Blocked;
use crate::p2p::{Status, ANY_SOURCE, ANY_TAG, PROC_NULL};
use crate::request::completion::Completion;
use crate::request::{Request, Scope};
use crate::sys::layout::Layout;
use crate::sys::lend::Loan;
use std::rc::Rc;

/// Bytes of a hello: five little-endian u64 (mark, transfer units, bytes per unit, bytes of
/// the whole message, first data tag).
const HELLO_BYTES: usize = 40;
/// What the first word of a hello holds.
const HELLO_MARK: u64 = u64::from_le_bytes(*b"EBPART02");

/// Info key: the fewest bytes a transfer unit of a partitioned send carries (partitions smaller
/// than that leave together, as one message, once all of them are ready); 0 sends every
/// partition alone.
pub const PARTITION_UNIT_KEY: &str = "earlybird_partition_unit_bytes";

/// The default of [`PARTITION_UNIT_KEY`]: below about this size a message costs more than
/// copying the bytes, so waiting for the neighbours of a small partition loses little.
const PARTITION_UNIT_BYTES: usize = 2048;

/// The next data tag of this endpoint's partitioned sends: each send takes one tag per
/// partition, so the tags of live sends never meet (the space wraps after 2^31 partitions).
#[derive(Default)]
struct DataTags {
    next: u32,
}

/// `n` consecutive data tags of endpoint `e`; the first.
fn take_tags(e: &mut Engine, n: usize) -> Result<i32> {
    let span = u32::try_from(n)
        .ok()
        .filter(|&n| n <= i32::MAX as u32)
        .ok_or_else(|| {
            Error::new(
                ErrorClass::Arg,
                format!("psend_init: {n} partitions (at most {})", i32::MAX),
            )
        })?;
    let t = e.ext.get::<DataTags>();
    if t.next as u64 + span as u64 > i32::MAX as u64 {
        t.next = 0;
    }
    let base = t.next;
    t.next += span;
    Ok(base as i32)
}

/// A buffer cut into partitions: all its bytes as one run, and where the message's bytes are
/// in it (a datatype's layout, or the run itself).
#[derive(Debug)]
struct Parts {
    run: Loan,
    layout: Option<Rc<Layout>>,
    /// How many partitions, and message bytes in each.
    count: usize,
    bytes: usize,
}

impl Parts {
    /// `loan` (a buffer's whole view) in `count` partitions: its message must divide evenly.
    fn new(what: &str, loan: Loan, count: usize) -> Result<Parts> {
        let (loan, layout) = loan.into_run();
        let total = layout.as_ref().map_or(loan.len(), |l| l.packed_len());
        if count == 0 && total > 0 {
            return Err(Error::new(
                ErrorClass::Arg,
                format!("{what}: 0 partitions of a buffer of {total} bytes"),
            ));
        }
        let bytes = total.checked_div(count).unwrap_or(0);
        if bytes * count != total {
            return Err(Error::new(
                ErrorClass::Count,
                format!("{what}: a message of {total} bytes does not split into {count} equal partitions"),
            ));
        }
        Ok(Parts {
            run: loan,
            layout,
            count,
            bytes,
        })
    }

    fn total(&self) -> usize {
        self.count * self.bytes
    }

    /// Message bytes `off..off + len` of the buffer, lent alike.
    fn cut(&self, off: usize, len: usize) -> Loan {
        let sig = self.run.sig();
        match &self.layout {
            None => self.run.sub(off, len, None),
            Some(l) => self
                .run
                .sub(0, self.run.len(), Some(Rc::new(l.bytes(off, len)))),
        }
        .expect("a partition lies within its checked buffer")
        .with_sig(sig)
    }
}

/// The partitioned send request.
#[derive(Debug)]
pub(crate) struct PartitionedSend {
    /// The destination endpoint (`None`: MPI_PROC_NULL).
    peer: Option<i32>,
    /// The data context, and the tag of partition 0 on it.
    ctx: u32,
    base: i32,
    parts: Parts,
    /// Partitions per transfer unit: unit `u` is partitions `u * per_unit ..`, sent as one
    /// message when all of them are ready (the last unit may have fewer).
    per_unit: usize,
    /// The hello, while it is still on its way (its bytes are the loan's own).
    hello: Option<OpId>,
    /// This round's state: which partitions are marked ready, how many, the partitions of
    /// each unit still to be marked, and the sends in flight.
    ready: Vec<bool>,
    unit_left: Vec<u32>,
    nready: usize,
    sends: Vec<OpId>,
    err: Option<Error>,
    active: bool,
    scope: u32,
    blocked: Blocked,
}

impl PartitionedSend {
    /// Mark partition `p` ready and send it.
    fn ready_one(&mut self, e: &mut Engine, p: usize) -> Result<()> {
        if !self.active {
            return Err(Error::new(
                ErrorClass::Request,
                format!("pready of partition {p} on an inactive partitioned send (start it first)"),
            ));
        }
        if p >= self.parts.count {
            return Err(Error::new(
                ErrorClass::Arg,
                format!(
                    "pready of partition {p} of a send of {} partitions",
                    self.parts.count
                ),
            ));
        }
        if self.ready[p] {
            return Err(Error::new(
                ErrorClass::Arg,
                format!("pready of partition {p}, already marked ready in this round"),
            ));
        }
        let u = p / self.per_unit;
        if self.unit_left[u] == 1 {
            self.send_unit(e, u)?;
        }
        self.unit_left[u] -= 1;
        self.ready[p] = true;
        self.nready += 1;
        Ok(())
    }

    /// Send transfer unit `u` (its partitions are all ready).
    fn send_unit(&mut self, e: &mut Engine, u: usize) -> Result<()> {
        let Some(peer) = self.peer else {
            return Ok(());
        };
        let (off, len) = unit_span(u, self.per_unit * self.parts.bytes, self.parts.total());
        let loan = self.parts.cut(off, len);
        let tag = self.base + u as i32;
        match e.send_start_as(peer, self.ctx, tag, &loan, SendMode::Standard, true)? {
            Started::Done => {}
            Started::Op(op) => {
                e.set_scope(op, self.scope);
                self.sends.push(op);
            }
        }
        Ok(())
    }

    /// The partitions of each unit, as a round starts.
    fn reset_units(&mut self) {
        let (n, k) = (self.parts.count, self.per_unit);
        for (u, left) in self.unit_left.iter_mut().enumerate() {
            *left = (n - u * k).min(k) as u32;
        }
    }

    /// Check that partitions `ps` (in range) are active and not marked ready yet, none
    /// listed twice, before any is marked.
    fn check_unready(&mut self, ps: impl Iterator<Item = usize>) -> Result<()> {
        if !self.active {
            return Err(Error::new(
                ErrorClass::Request,
                "pready on an inactive partitioned send (start it first)",
            ));
        }
        let mut marked = Vec::new();
        let mut r = Ok(());
        for p in ps {
            if self.ready[p] {
                r = Err(Error::new(
                    ErrorClass::Arg,
                    format!("pready of partition {p}, already marked ready in this round (or listed twice)"),
                ));
                break;
            }
            self.ready[p] = true;
            marked.push(p);
        }
        // The marks are `ready_one`'s to make, as it sends.
        for p in marked {
            self.ready[p] = false;
        }
        r
    }

    /// Collect the sends (and the hello) that completed; whether the round is complete.
    fn advance(&mut self, e: &mut Engine) -> bool {
        if let Some(op) = self.hello {
            if e.is_done(op) {
                self.hello = None;
                if let Err(err) = e.take(op) {
                    self.err.get_or_insert(err);
                }
            }
        }
        let err = &mut self.err;
        self.sends.retain(|&op| {
            if !e.is_done(op) {
                return true;
            }
            if let Err(x) = e.take(op) {
                err.get_or_insert(x);
            }
            false
        });
        self.nready == self.parts.count && self.sends.is_empty()
    }

    fn result(&self) -> Result<Status> {
        match &self.err {
            Some(e) => Err(e.clone()),
            None => Ok(Status::empty()),
        }
    }

    /// The first partition not marked ready in this round.
    fn missing(&self) -> Option<usize> {
        self.ready.iter().position(|r| !r)
    }
}

/// Wait for operations `ops` (a request going away) and drop their results; if the job is
/// ending, abandon those still in flight.
fn finish_all(eng: &mut Engine, mut ops: Vec<OpId>, blocked: Blocked) {
    if ops.is_empty() {
        return;
    }
    let r = eng.wait_for(blocked, |e| {
        ops.retain(|&op| {
            let done = e.is_done(op);
            if done {
                let _ = e.take(op);
            }
            !done
        });
        ops.is_empty().then_some(())
    });
    if r.is_err() {
        for op in ops {
            eng.abandon(op);
        }
    }
}

/// Message bytes of transfer unit `u`, units of `unit` bytes in a message of `total`:
/// `(offset, length)`, clipped to the message.
fn unit_span(u: usize, unit: usize, total: usize) -> (usize, usize) {
    let off = (u * unit).min(total);
    (off, unit.min(total - off))
}

/// MPI_Cancel of a partitioned request: erroneous while active, pointless while inactive.
fn cancel_error(active: bool) -> Error {
    if active {
        active_misuse("cancel")
    } else {
        Error::new(
            ErrorClass::Request,
            "cancel of an inactive partitioned request",
        )
    }
}

fn active_misuse(what: &str) -> Error {
    Error::new(
        ErrorClass::Request,
        format!("{what} of an active partitioned request (MPI calls it erroneous): complete it with wait or test first"),
    )
}

impl Completion for PartitionedSend {
    fn kind(&self) -> &'static str {
        "partitioned"
    }

    fn start(&mut self, _eng: &mut Engine) -> Result<Option<Result<Status>>> {
        if self.active {
            return Err(Error::new(
                ErrorClass::Request,
                "start of an active partitioned send (wait for it or test it to completion first)",
            ));
        }
        self.ready.iter_mut().for_each(|r| *r = false);
        self.reset_units();
        self.nready = 0;
        self.err = None;
        self.active = true;
        Ok(None)
    }

    fn poll(&mut self, eng: &mut Engine) -> Option<Result<Status>> {
        let r = self.peek(eng)?;
        self.active = false;
        Some(r)
    }

    fn peek(&mut self, eng: &mut Engine) -> Option<Result<Status>> {
        if !self.active {
            return None;
        }
        self.advance(eng).then(|| self.result())
    }

    fn wait(&mut self, eng: &mut Engine) -> Result<Status> {
        if let Some(p) = self.missing() {
            return Err(Error::new(
                ErrorClass::Request,
                format!("wait on a partitioned send whose partition {p} is not marked ready (MPI_Pready): it could never complete"),
            ));
        }
        let blocked = self.blocked;
        eng.wait_for(blocked, |e| self.poll(e))?
    }

    fn cancel(&mut self, _eng: &mut Engine) -> Result<()> {
        Err(cancel_error(self.active))
    }

    fn blocked_in(&self) -> Blocked {
        self.blocked
    }

    fn abandon(&mut self, eng: &mut Engine) {
        for op in self.sends.drain(..) {
            eng.abandon(op);
        }
        self.active = false;
    }

    fn is_active(&self) -> bool {
        self.active
    }

    fn is_persistent(&self) -> bool {
        true
    }

    /// Going away: the partitions sent are waited for (their bytes are the program's); the
    /// hello, whose bytes are the request's own, is left to the engine.
    fn settle(&mut self, eng: &mut Engine) {
        finish_all(eng, std::mem::take(&mut self.sends), self.blocked);
        if let Some(op) = self.hello.take() {
            eng.detach(op);
        }
        self.active = false;
    }

    fn free(&mut self, _eng: &mut Engine) -> Result<()> {
        if self.active {
            return Err(active_misuse("request_free"));
        }
        Ok(())
    }

    fn buffer(&mut self, send: bool) -> Result<&mut [u8]> {
        let _ = send;
        buffer_of(self.active, &mut self.parts)
    }
}

/// The bytes of an inactive partitioned request's buffer (see [`Request::buffer_mut`]).
fn buffer_of(active: bool, parts: &mut Parts) -> Result<&mut [u8]> {
    if active {
        return Err(Error::new(
            ErrorClass::Request,
            "buffer_mut on an active partitioned request (wait for it first)",
        ));
    }
    if parts.layout.is_some() {
        return Err(Error::new(
            ErrorClass::Buffer,
            "buffer_mut on a partitioned request whose buffer is a datatype's view",
        ));
    }
    parts.run.bytes_mut().ok_or_else(|| {
        Error::new(
            ErrorClass::Buffer,
            "buffer_mut on a partitioned request whose buffer was lent read-only (&[T]); lend it as &mut [T]",
        )
    })
}

/// What a partitioned receive knows of its sender once the hello arrived.
#[derive(Debug)]
enum Hello {
    /// The hello's receive, posted at init, and the bytes it lands in (the request's own).
    Posted(OpId, Loan),
    /// The sender's transfer units (each `bytes` long but the last, which ends with the
    /// message's `total` bytes), and the tag of its unit 0.
    Known {
        count: usize,
        bytes: usize,
        total: usize,
        base: i32,
    },
    /// The hello's receive failed (or was withdrawn): every start reports this.
    Failed(Error),
}

/// The partitioned receive request.
#[derive(Debug)]
pub(crate) struct PartitionedRecv {
    /// The source endpoint (`None`: MPI_PROC_NULL).
    src: Option<u32>,
    /// The data context, and the program's tag (for the status).
    ctx: u32,
    tag: i32,
    parts: Parts,
    hello: Hello,
    /// This round: the receive of each sender unit (`None` once it has arrived and been
    /// collected), how many are still out, and whether they are posted.
    recvs: Vec<Option<OpId>>,
    out: usize,
    posted: bool,
    err: Option<Error>,
    active: bool,
    scope: u32,
    blocked: Blocked,
}

impl PartitionedRecv {
    /// Read the hello if it has come.
    fn read_hello(&mut self, e: &mut Engine) {
        let Hello::Posted(op, hello_buf) = &self.hello else {
            return;
        };
        let op = *op;
        if !e.is_done(op) {
            return;
        }
        let b = hello_buf.to_packed().unwrap_or_default();
        self.hello = match e.take(op) {
            Err(err) => Hello::Failed(err),
            Ok(st) if st.is_cancelled() => Hello::Failed(Error::new(
                ErrorClass::Request,
                "partitioned receive: its matching was withdrawn",
            )),
            Ok(_) => {
                let word = |i: usize| {
                    b.get(i * 8..i * 8 + 8)
                        .map_or(0, |w| u64::from_le_bytes(w.try_into().expect("8 bytes")))
                };
                if b.len() != HELLO_BYTES || word(0) != HELLO_MARK {
                    Hello::Failed(Error::new(
                        ErrorClass::Intern,
                        "partitioned receive: a malformed hello from its sender",
                    ))
                } else {
                    Hello::Known {
                        count: word(1) as usize,
                        bytes: word(2) as usize,
                        total: word(3) as usize,
                        base: word(4) as i32,
                    }
                }
            }
        };
    }

    /// Post this round's receives, once the sender's partitions are known.
    fn post(&mut self, e: &mut Engine) {
        let (
            Some(src),
            Hello::Known {
                count,
                bytes,
                total,
                base,
            },
        ) = (self.src, &self.hello)
        else {
            return;
        };
        let (count, bytes, total, base) = (*count, *bytes, *total, *base);
        if self.recvs.len() != count {
            self.recvs = vec![None; count];
        }
        let have = self.parts.total();
        for i in 0..count {
            // The bytes of this sender unit that fit (none past the buffer's end: the
            // engine then reports the truncation, which the round reports as a whole).
            let (off, len) = unit_span(i, bytes, total);
            let off = off.min(have);
            let loan = self.parts.cut(off, len.min(have - off));
            let pat = Pattern {
                ctx: self.ctx,
                src: Some(src),
                tag: Some(base + i as i32),
            };
            let op = e.recv_start(pat, loan);
            e.set_scope(op, self.scope);
            self.recvs[i] = Some(op);
        }
        self.out = count;
        self.posted = true;
    }

    /// Collect the receives of sender partitions `range` that completed.
    fn advance(&mut self, e: &mut Engine, range: std::ops::Range<usize>) {
        for i in range {
            let Some(op) = self.recvs[i] else {
                continue;
            };
            if !e.is_done(op) {
                continue;
            }
            self.recvs[i] = None;
            self.out -= 1;
            if let Err(x) = e.take(op) {
                // A truncation is the round's, reported once with the whole status.
                if x.class() != ErrorClass::Truncate {
                    self.err.get_or_insert(x);
                }
            }
        }
    }

    /// Drive the round: read the hello, post, collect; whether it is complete.
    fn step(&mut self, e: &mut Engine) -> bool {
        if self.src.is_none() {
            return true;
        }
        self.read_hello(e);
        if let Hello::Failed(_) = self.hello {
            return true;
        }
        if !self.posted {
            self.post(e);
        }
        if self.posted {
            let n = self.recvs.len();
            self.advance(e, 0..n);
        }
        self.posted && self.out == 0
    }

    fn result(&self) -> Result<Status> {
        let Some(src) = self.src else {
            return Ok(Status::proc_null());
        };
        let sent = match &self.hello {
            Hello::Failed(e) => return Err(e.clone()),
            Hello::Known { total, .. } => *total,
            Hello::Posted(..) => unreachable!("a complete round knows its sender"),
        };
        let have = self.parts.total();
        let st = Status {
            source: src as i32,
            tag: self.tag,
            bytes: sent.min(have),
            cancelled: false,
            error: ErrorClass::Success,
        };
        if let Some(e) = &self.err {
            return Err(e.clone().with_status(st));
        }
        if sent > have {
            let st = Status {
                error: ErrorClass::Truncate,
                ..st
            };
            return Err(Error::new(
                ErrorClass::Truncate,
                format!("partitioned receive: the message of {sent} bytes is longer than the buffer of {have} bytes"),
            )
            .with_status(st));
        }
        Ok(st)
    }

    /// Whether receive partition `p` has arrived in this round.
    fn arrived(&mut self, e: &mut Engine, p: usize) -> Result<bool> {
        if p >= self.parts.count {
            return Err(Error::new(
                ErrorClass::Arg,
                format!(
                    "parrived of partition {p} of a receive of {} partitions",
                    self.parts.count
                ),
            ));
        }
        if !self.active || self.src.is_none() {
            return Ok(true);
        }
        e.progress();
        self.read_hello(e);
        if !self.posted {
            self.post(e);
        }
        let Hello::Known { bytes, total, .. } = self.hello else {
            // Failed: the round is complete (with its error); still matching: not yet.
            return Ok(matches!(self.hello, Hello::Failed(_)));
        };
        let (lo, hi) = (p * self.parts.bytes, (p + 1) * self.parts.bytes);
        if bytes == 0 || hi > total {
            // Bytes past the message (or a message of none): there once all of it is.
            let n = self.recvs.len();
            self.advance(e, 0..n);
            return Ok(self.out == 0);
        }
        if lo == hi {
            return Ok(true);
        }
        let range = lo / bytes..hi.div_ceil(bytes);
        self.advance(e, range.clone());
        // Posted (the hello is known): a unit has arrived once its receive was collected.
        Ok(range.into_iter().all(|i| self.recvs[i].is_none()))
    }
}

impl Completion for PartitionedRecv {
    fn kind(&self) -> &'static str {
        "partitioned"
    }

    fn start(&mut self, eng: &mut Engine) -> Result<Option<Result<Status>>> {
        if self.active {
            return Err(Error::new(
                ErrorClass::Request,
                "start of an active partitioned receive (wait for it or test it to completion first)",
            ));
        }
        self.active = true;
        self.posted = false;
        self.err = None;
        self.out = 0;
        self.step(eng);
        Ok(None)
    }

    fn poll(&mut self, eng: &mut Engine) -> Option<Result<Status>> {
        let res = self.peek(eng)?;
        self.active = false;
        Some(res)
    }

    fn peek(&mut self, eng: &mut Engine) -> Option<Result<Status>> {
        if !self.active {
            return None;
        }
        self.step(eng).then(|| self.result())
    }

    fn cancel(&mut self, _eng: &mut Engine) -> Result<()> {
        Err(cancel_error(self.active))
    }

    fn blocked_in(&self) -> Blocked {
        self.blocked
    }

    fn abandon(&mut self, eng: &mut Engine) {
        for op in self.recvs.iter_mut().filter_map(Option::take) {
            eng.abandon(op);
        }
        self.active = false;
    }

    fn is_active(&self) -> bool {
        self.active
    }

    fn is_persistent(&self) -> bool {
        true
    }

    /// Going away: the receives still posted (this round's, and the hello's) are withdrawn
    /// and waited for.
    fn settle(&mut self, eng: &mut Engine) {
        let mut ops: Vec<OpId> = self.recvs.iter_mut().filter_map(Option::take).collect();
        if let Hello::Posted(op, _) = self.hello {
            ops.push(op);
            self.hello = Hello::Failed(Error::new(
                ErrorClass::Request,
                "partitioned receive: freed",
            ));
        }
        for &op in &ops {
            eng.cancel(op);
        }
        finish_all(eng, ops, self.blocked);
        self.active = false;
    }

    fn free(&mut self, _eng: &mut Engine) -> Result<()> {
        if self.active {
            return Err(active_misuse("request_free"));
        }
        Ok(())
    }

    fn buffer(&mut self, _send: bool) -> Result<&mut [u8]> {
        buffer_of(self.active, &mut self.parts)
    }
}

impl Comm {
    /// MPI_Psend_init: a partitioned send of `buf` in `partitions` equal partitions to rank
    /// `dest` with `tag`. Start it with [`Request::start`], mark each partition ready with
    /// [`Request::pready`] (it leaves then), and complete it with [`Request::wait`] or
    /// [`Request::test`]. As for [`send_init`](Self::send_init), lend the buffer as `&mut [T]`
    /// to change it between rounds through [`Request::buffer_mut`], or as `&[T]` for constant
    /// data. MPI_ERR_COUNT when the buffer does not split into `partitions` equal parts.
    pub fn psend_init<'s, B: SendBuf<'s>>(
        &self,
        s: &'s Scope<'s, '_>,
        buf: B,
        partitions: usize,
        dest: i32,
        tag: i32,
        info: &Info,
    ) -> Result<Request<'s>> {
        let r = buf
            .loan(s)
            .and_then(|SendLoan(l)| self.psend(s, l, partitions, dest, tag, info));
        self.ret("psend_init", r)
    }

    fn psend<'s>(
        &self,
        s: &'s Scope<'s, '_>,
        loan: Loan,
        partitions: usize,
        dest: i32,
        tag: i32,
        info: &Info,
    ) -> Result<Request<'s>> {
        let parts = Parts::new("psend_init", loan, partitions)?;
        let unit = match info.get(PARTITION_UNIT_KEY)? {
            None => PARTITION_UNIT_BYTES,
            Some(v) => v.trim().parse::<usize>().map_err(|_| {
                Error::new(
                    ErrorClass::Info,
                    format!("psend_init: info {PARTITION_UNIT_KEY}={v:?} is not a byte count"),
                )
            })?,
        };
        let per_unit = unit
            .div_ceil(parts.bytes.max(1))
            .clamp(1, partitions.max(1));
        let units = partitions.div_ceil(per_unit);
        let (peer, ctx, tag) = self.send_target(dest, tag)?;
        let (hello_ctx, data_ctx) = self.ctx.partitioned();
        s.inner().note_engine(&self.eng);
        let mut e = self.eng.borrow_mut();
        e.key_exactly(hello_ctx.raw());
        e.key_exactly(data_ctx.raw());
        let base = take_tags(&mut e, units)?;
        let mut hello = None;
        if peer != PROC_NULL {
            let mut b = [0u8; HELLO_BYTES];
            let words = [
                HELLO_MARK,
                units as u64,
                (per_unit * parts.bytes) as u64,
                parts.total() as u64,
                base as u64,
            ];
            for (i, w) in words.into_iter().enumerate() {
                b[i * 8..i * 8 + 8].copy_from_slice(&w.to_le_bytes());
            }
            let msg = Loan::copied(&b);
            let started =
                e.send_start_as(peer, hello_ctx.raw(), tag, &msg, SendMode::Standard, true)?;
            if let Started::Op(op) = started {
                hello = Some(op);
            }
        }
        drop(e);
        let kind = PartitionedSend {
            peer: (peer != PROC_NULL).then_some(peer),
            ctx: data_ctx.raw(),
            base,
            ready: vec![false; partitions],
            unit_left: vec![0; units],
            per_unit,
            nready: 0,
            sends: Vec::with_capacity(units),
            parts,
            hello,
            err: None,
            active: false,
            scope: s.inner().id(),
            blocked: Blocked::send(peer, tag, ctx),
        };
        Ok(Request::ext(&self.eng, self.origin(), Box::new(kind)))
    }

    /// MPI_Precv_init: a partitioned receive into `buf`, in `partitions` equal partitions,
    /// from rank `src` with `tag` (no wildcards). Start it with [`Request::start`], see which
    /// partitions have arrived with [`Request::parrived`], and complete it with
    /// [`Request::wait`] or [`Request::test`]; read what came through
    /// [`Request::buffer_mut`] once it is complete.
    pub fn precv_init<'s, B: BufferMut + ?Sized>(
        &self,
        s: &'s Scope<'s, '_>,
        buf: &'s mut B,
        partitions: usize,
        src: i32,
        tag: i32,
        info: &Info,
    ) -> Result<Request<'s>> {
        let r =
            lend_mut(buf, s).and_then(|l| self.precv(s, l.exclusive(), partitions, src, tag, info));
        self.ret("precv_init", r)
    }

    fn precv<'s>(
        &self,
        s: &'s Scope<'s, '_>,
        loan: Loan,
        partitions: usize,
        src: i32,
        tag: i32,
        _info: &Info,
    ) -> Result<Request<'s>> {
        if src == ANY_SOURCE {
            return Err(Error::new(
                ErrorClass::Rank,
                "precv_init: source MPI_ANY_SOURCE (a partitioned receive names its source)",
            ));
        }
        if tag == ANY_TAG {
            return Err(Error::new(
                ErrorClass::Tag,
                "precv_init: tag MPI_ANY_TAG (a partitioned receive names its tag)",
            ));
        }
        let parts = Parts::new("precv_init", loan, partitions)?;
        let pat = self.pattern("precv_init", src, tag)?;
        let (hello_ctx, data_ctx) = self.ctx.partitioned();
        s.inner().note_engine(&self.eng);
        let (src_ep, hello) = match pat {
            None => (
                None,
                Hello::Failed(Error::new(ErrorClass::Intern, "no sender")),
            ),
            Some(p) => {
                let pat = Pattern {
                    ctx: hello_ctx.raw(),
                    ..p
                };
                let mut e = self.eng.borrow_mut();
                e.key_exactly(hello_ctx.raw());
                e.key_exactly(data_ctx.raw());
                let hello_buf = Loan::zeroed(HELLO_BYTES);
                let op = e.recv_start(pat, hello_buf.clone());
                (p.src, Hello::Posted(op, hello_buf))
            }
        };
        let r = PartitionedRecv {
            src: src_ep,
            ctx: data_ctx.raw(),
            tag,
            parts,
            hello,
            recvs: Vec::new(),
            out: 0,
            posted: false,
            err: None,
            active: false,
            scope: s.inner().id(),
            blocked: Blocked::recv(src, tag, self.ctx.raw()),
        };
        Ok(Request::ext(&self.eng, self.origin(), Box::new(r)))
    }
}

impl Request<'_> {
    /// Run `f` on this request as a partitioned send, through its error handler as call
    /// `what`.
    fn on_psend<T>(
        &mut self,
        what: &str,
        f: impl FnOnce(&mut PartitionedSend, &mut Engine) -> Result<T>,
    ) -> Result<T> {
        let eng = self.engine().clone();
        let r = match self.ext_mut::<PartitionedSend>() {
            Some(k) => match eng.try_borrow_mut() {
                Ok(mut e) => f(k, &mut e),
                Err(_) => Err(Error::new(
                    ErrorClass::Intern,
                    format!("{what}: the request's endpoint is in use by another call"),
                )),
            },
            None => Err(Error::new(
                ErrorClass::Request,
                format!("{what} on a request that is not a partitioned send"),
            )),
        };
        self.origin().apply(what, r)
    }

    /// MPI_Pready: partition `partition` of this partitioned send is ready; it leaves now.
    pub fn pready(&mut self, partition: usize) -> Result<()> {
        self.on_psend("pready", |k, e| k.ready_one(e, partition))
    }

    /// MPI_Pready_range: partitions `low..=high` are ready. Checked whole first: on an
    /// error nothing is marked or sent.
    pub fn pready_range(&mut self, low: usize, high: usize) -> Result<()> {
        self.on_psend("pready_range", |k, e| {
            if low > high || high >= k.parts.count {
                return Err(Error::new(
                    ErrorClass::Arg,
                    format!(
                        "pready_range of partitions {low} to {high} of a send of {} partitions",
                        k.parts.count
                    ),
                ));
            }
            k.check_unready(low..=high)?;
            (low..=high).try_for_each(|p| k.ready_one(e, p))
        })
    }

    /// MPI_Pready_list: the partitions listed are ready. Checked whole first: on an error
    /// nothing is marked or sent.
    pub fn pready_list(&mut self, partitions: &[usize]) -> Result<()> {
        self.on_psend("pready_list", |k, e| {
            if let Some(&p) = partitions.iter().find(|&&p| p >= k.parts.count) {
                return Err(Error::new(
                    ErrorClass::Arg,
                    format!(
                        "pready_list with partition {p} of a send of {} partitions",
                        k.parts.count
                    ),
                ));
            }
            k.check_unready(partitions.iter().copied())?;
            partitions.iter().try_for_each(|&p| k.ready_one(e, p))
        })
    }

    /// MPI_Parrived: whether partition `partition` of this partitioned receive has arrived
    /// (its bytes are in the buffer). `true` for an inactive request.
    pub fn parrived(&mut self, partition: usize) -> Result<bool> {
        let eng = self.engine().clone();
        let r = match self.ext_mut::<PartitionedRecv>() {
            Some(k) => match eng.try_borrow_mut() {
                Ok(mut e) => k.arrived(&mut e, partition),
                Err(_) => Err(Error::new(
                    ErrorClass::Intern,
                    "parrived: the request's endpoint is in use by another call",
                )),
            },
            None => Err(Error::new(
                ErrorClass::Request,
                "parrived on a request that is not a partitioned receive",
            )),
        };
        self.origin().apply("parrived", r)
    }
}
