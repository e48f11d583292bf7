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

/// The attached buffer's accounting.
#[derive(Debug, Default)]
pub(crate) struct Bsends {
    /// The attached capacity, in bytes (`None`: nothing attached).
    capacity: Option<usize>,
    in_use: usize,
    /// Copies still on their way (rendezvous sends): their operation and the bytes they
    /// hold of the capacity. An eager copy is in the ring at once and holds nothing.
    pending: Vec<(OpId, usize)>,
}

impl Bsends {
    pub(crate) fn attached(&self) -> bool {
        self.capacity.is_some()
    }
}

impl Engine {
    /// MPI_Buffer_attach: make `capacity` bytes available to buffered sends.
    pub(crate) fn buffer_attach(&mut self, capacity: usize) -> Result<()> {
        if let Some(c) = self.core.bsend.capacity {
            return Err(Error::new(
                ErrorClass::Buffer,
                format!("a buffer of {c} bytes is already attached; detach it before attaching one of {capacity} bytes"),
            ));
        }
        self.core.bsend.capacity = Some(capacity);
        Ok(())
    }

    /// MPI_Buffer_detach: wait until every buffered send has left, then detach. Returns the
    /// capacity that was attached.
    pub(crate) fn buffer_detach(&mut self) -> Result<usize> {
        let Some(cap) = self.core.bsend.capacity else {
            return Err(Error::new(
                ErrorClass::Buffer,
                "buffer_detach with no buffer attached",
            ));
        };
        self.wait_for(Blocked::in_call(BlockedIn::BufferDetach), |e| {
            e.reap_bsends();
            e.core.bsend.pending.is_empty().then_some(())
        })?;
        self.core.bsend.capacity = None;
        Ok(cap)
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
        let Some(cap) = self.core.bsend.capacity else {
            return Err(Error::new(
                ErrorClass::Buffer,
                format!("buffered send of {len} bytes with no buffer attached (call buffer_attach first)"),
            ));
        };
        let need = len + BSEND_OVERHEAD;
        self.reap_bsends();
        if self.core.bsend.in_use + need > cap {
            // Space held by earlier buffered sends is released by their FIN, which may be
            // sitting in a ring: look before saying it does not fit.
            self.progress();
            self.reap_bsends();
        }
        if self.core.bsend.in_use + need > cap {
            return Err(Error::new(
                ErrorClass::Buffer,
                format!(
                    "buffered send of {len} bytes (+{BSEND_OVERHEAD} overhead) does not fit: attached buffer {cap} bytes, {} in use",
                    self.core.bsend.in_use
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
            self.core.bsend.in_use += need;
            self.core.bsend.pending.push((op, need));
        }
        Ok(Started::Done)
    }

    /// Forget the copies that have left, giving their bytes back to the capacity.
    fn reap_bsends(&mut self) {
        let Engine { core, .. } = self;
        let b = &mut core.bsend;
        let ops = &mut core.ops;
        b.pending.retain(|&(op, bytes)| {
            if !ops.is_done(op) {
                return true;
            }
            let _ = ops.take(op);
            b.in_use -= bytes;
            false
        });
    }
}
