//! Buffered mode (MPI_Bsend): a send copies its message into library memory and completes
//! at once; the copy travels like any send, and its bytes count against the capacity the
//! program attached until the receiver has them.
#![forbid(unsafe_code)]

use super::engine::{Engine, Started};
use super::ops::OpId;
use super::send::unusable;
use super::wait::Blocked;
use super::BSEND_OVERHEAD;
use crate::error::{Error, ErrorClass, Result};
use crate::fabric::job::BlockedIn;
use crate::sys::lend::Loan;

/// One attached buffer's accounting.
#[derive(Debug, Default)]
struct Pool {
    /// The attached capacity, in bytes (`None`: nothing attached; [`AUTOMATIC`]: no limit).
    capacity: Option<usize>,
    in_use: usize,
    /// Copies still on their way (rendezvous sends): their operation and the bytes they
    /// hold of the capacity. An eager copy is in the ring at once and holds nothing.
    pending: Vec<(OpId, usize)>,
}

/// The capacity of a buffer attached as MPI_BUFFER_AUTOMATIC (MPI 4.1): the library takes
/// what buffered sends need.
pub(crate) const AUTOMATIC: usize = usize::MAX;

/// The attached buffers: the process's (MPI_Buffer_attach) and those attached to
/// communicators (MPI 4.1's MPI_Comm_attach_buffer), by the communicator's context. A
/// buffered send uses its communicator's buffer if it has one, else the process's.
#[derive(Debug, Default)]
pub(crate) struct Bsends {
    process: Pool,
    comms: Vec<(u32, Pool)>,
}

impl Bsends {
    pub(crate) fn attached(&self) -> bool {
        self.process.capacity.is_some() || !self.comms.is_empty()
    }

    /// The pool of context `ctx`'s communicator (`None`: the process's), if attached there.
    fn of(&mut self, ctx: Option<u32>) -> Option<&mut Pool> {
        match ctx {
            None => Some(&mut self.process),
            Some(c) => self.comms.iter_mut().find(|(x, _)| *x == c).map(|(_, p)| p),
        }
    }

    /// The pool a buffered send on context `ctx` takes its room from.
    fn for_send(&mut self, ctx: u32) -> &mut Pool {
        match self.comms.iter().position(|(x, _)| *x == ctx) {
            Some(i) => &mut self.comms[i].1,
            None => &mut self.process,
        }
    }
}

/// Where a buffer is attached, for messages.
fn whose(ctx: Option<u32>) -> &'static str {
    if ctx.is_some() {
        "the communicator"
    } else {
        "the process"
    }
}

impl Engine {
    /// MPI_Buffer_attach (`ctx` `None`) or MPI_Comm_attach_buffer (the communicator's
    /// context): make `capacity` bytes available to buffered sends ([`AUTOMATIC`]: as many
    /// as they need).
    pub(crate) fn buffer_attach(&mut self, ctx: Option<u32>, capacity: usize) -> Result<()> {
        if let Some(c) = self.core.bsend.of(ctx).and_then(|p| p.capacity) {
            let size = |n: usize| {
                if n == AUTOMATIC {
                    "an automatic buffer".to_string()
                } else {
                    format!("a buffer of {n} bytes")
                }
            };
            return Err(Error::new(
                ErrorClass::Buffer,
                format!(
                    "{} is already attached to {}; detach it before attaching {}",
                    size(c),
                    whose(ctx),
                    size(capacity)
                ),
            ));
        }
        match ctx {
            None => self.core.bsend.process.capacity = Some(capacity),
            Some(c) => self.core.bsend.comms.push((
                c,
                Pool {
                    capacity: Some(capacity),
                    ..Pool::default()
                },
            )),
        }
        Ok(())
    }

    /// MPI_Buffer_detach / MPI_Comm_detach_buffer: wait until every buffered send from the
    /// buffer has left, then detach it. Returns the capacity that was attached.
    pub(crate) fn buffer_detach(&mut self, ctx: Option<u32>) -> Result<usize> {
        let cap = self.buffer_flush(ctx)?;
        match ctx {
            None => self.core.bsend.process.capacity = None,
            Some(c) => self.core.bsend.comms.retain(|(x, _)| *x != c),
        }
        Ok(cap)
    }

    /// MPI_Buffer_flush / MPI_Comm_flush_buffer: wait until every buffered send from the
    /// buffer has left (it stays attached). Returns its capacity.
    pub(crate) fn buffer_flush(&mut self, ctx: Option<u32>) -> Result<usize> {
        self.buffer_attached(ctx)?;
        let cap = self
            .core
            .bsend
            .of(ctx)
            .and_then(|p| p.capacity)
            .unwrap_or(0);
        self.wait_for(Blocked::in_call(BlockedIn::BufferDetach), |e| {
            e.buffer_flushed(ctx).then_some(())
        })?;
        Ok(cap)
    }

    /// `Ok` if a buffer is attached to `ctx`'s communicator (`None`: to the process).
    pub(crate) fn buffer_attached(&mut self, ctx: Option<u32>) -> Result<()> {
        match self.core.bsend.of(ctx).and_then(|p| p.capacity) {
            Some(_) => Ok(()),
            None => Err(Error::new(
                ErrorClass::Buffer,
                format!("no buffer is attached to {}", whose(ctx)),
            )),
        }
    }

    /// Whether every buffered send from the buffer of `ctx` (`None`: the process's) has
    /// left; true when none is attached there.
    pub(crate) fn buffer_flushed(&mut self, ctx: Option<u32>) -> bool {
        self.reap_bsends();
        self.core.bsend.of(ctx).is_none_or(|p| p.pending.is_empty())
    }

    /// Wait until every buffered send, from any buffer, has left (finalize).
    pub(crate) fn buffers_drain(&mut self) -> Result<()> {
        if !self.core.bsend.attached() {
            return Ok(());
        }
        self.wait_for(Blocked::in_call(BlockedIn::BufferDetach), |e| {
            e.reap_bsends();
            let b = &e.core.bsend;
            (b.process.pending.is_empty() && b.comms.iter().all(|(_, p)| p.pending.is_empty()))
                .then_some(())
        })
    }

    /// The communicator of context `ctx` is gone: its buffer with it. Copies still on their
    /// way are left to complete, counted against nothing.
    pub(crate) fn buffer_forget(&mut self, ctx: u32) {
        let b = &mut self.core.bsend;
        if let Some(i) = b.comms.iter().position(|(x, _)| *x == ctx) {
            let (_, pool) = b.comms.swap_remove(i);
            b.process
                .pending
                .extend(pool.pending.into_iter().map(|(op, _)| (op, 0)));
        }
    }

    /// A buffered send of `buf` to endpoint `peer` (by a persistent request if
    /// `persistent`): complete when it returns.
    pub(super) fn bsend_start(
        &mut self,
        peer: u32,
        ctx: u32,
        tag: i32,
        buf: &Loan,
        persistent: bool,
    ) -> Result<Started> {
        let len = buf.packed_len();
        let Some(cap) = self.core.bsend.for_send(ctx).capacity else {
            return Err(Error::new(
                ErrorClass::Buffer,
                format!("buffered send of {len} bytes with no buffer attached (call buffer_attach first)"),
            ));
        };
        let need = len + BSEND_OVERHEAD;
        self.reap_bsends();
        let fits = |e: &mut Engine| e.core.bsend.for_send(ctx).in_use.saturating_add(need) <= cap;
        if !fits(self) {
            // Space held by earlier buffered sends is released by their FIN, which may be
            // sitting in a ring: look before saying it does not fit.
            self.progress();
            self.reap_bsends();
        }
        if !fits(self) {
            return Err(Error::new(
                ErrorClass::Buffer,
                format!(
                    "buffered send of {len} bytes (+{BSEND_OVERHEAD} overhead) does not fit: attached buffer {cap} bytes, {} in use",
                    self.core.bsend.for_send(ctx).in_use
                ),
            ));
        }
        let copy = Loan::copied(&buf.to_packed().map_err(unusable)?).with_sig(buf.sig());
        // The send's operation holds the copy until it has left.
        if let Started::Op(op) = self.core.send(
            &mut self.fabric,
            peer,
            ctx,
            tag,
            &copy,
            super::send::How {
                sync: false,
                persistent,
            },
        )? {
            let pool = self.core.bsend.for_send(ctx);
            pool.in_use += need;
            pool.pending.push((op, need));
        }
        Ok(Started::Done)
    }

    /// Forget the copies that have left, giving their bytes back to the capacity.
    fn reap_bsends(&mut self) {
        let Engine { core, .. } = self;
        let ops = &mut core.ops;
        let b = &mut core.bsend;
        for pool in std::iter::once(&mut b.process).chain(b.comms.iter_mut().map(|(_, p)| p)) {
            pool.pending.retain(|&(op, bytes)| {
                if !ops.is_done(op) {
                    return true;
                }
                let _ = ops.take(op);
                pool.in_use -= bytes;
                false
            });
        }
    }
}
