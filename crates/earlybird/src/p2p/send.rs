//! The send side: eager or rendezvous, flow control, and cancellation of a send.
#![forbid(unsafe_code)]

use super::engine::{Core, Engine, SendMode, Started};
use super::ops::{OpId, OpKind};
use super::wire::{Head, Msg};
use crate::error::{Error, ErrorClass, Result};
use crate::fabric::{bulk, Fabric};
use crate::status::PROC_NULL;
use crate::sys::lend::Loan;

impl Engine {
    /// Start a send of `buf` to endpoint `peer` (or PROC_NULL). Arguments are checked by the
    /// caller. Buffered mode copies into the attached buffer first.
    #[inline(always)]
    pub(crate) fn send_start(
        &mut self,
        peer: i32,
        ctx: u32,
        tag: i32,
        buf: &Loan,
        mode: SendMode,
    ) -> Result<Started> {
        self.send_start_as(peer, ctx, tag, buf, mode, false)
    }

    /// [`send_start`](Self::send_start) of a persistent send (`persistent`), whose messages
    /// say so (PERSISTENT_ONLY is checked against them).
    #[inline(always)]
    pub(crate) fn send_start_as(
        &mut self,
        peer: i32,
        ctx: u32,
        tag: i32,
        buf: &Loan,
        mode: SendMode,
        persistent: bool,
    ) -> Result<Started> {
        if peer == PROC_NULL {
            return Ok(Started::Done);
        }
        let peer = peer as u32;
        let how = How {
            sync: mode == SendMode::Synchronous,
            persistent,
        };
        match mode {
            SendMode::Buffered => self.bsend_start(peer, ctx, tag, buf, persistent),
            _ => self.core.send(&mut self.fabric, peer, ctx, tag, buf, how),
        }
    }

    /// Cancel `op` (MPI_Cancel): a posted receive is withdrawn at once; a send still waiting
    /// for its match asks the receiver to withdraw it. Completion follows through wait/test.
    pub(crate) fn cancel(&mut self, op: OpId) {
        self.core.cancel(&mut self.fabric, op)
    }
}

/// How a message is sent: synchronous mode (its sender waits for the match), and whether a
/// persistent send sends it.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct How {
    pub(crate) sync: bool,
    pub(crate) persistent: bool,
}

impl Core {
    /// Send `buf` to `peer`: eager (its bytes into the ring now) when it is small (the limit
    /// is higher towards another host) and the flow limit allows, else a rendezvous request
    /// that exposes it for the receiver to pull.
    #[inline(always)]
    pub(crate) fn send(
        &mut self,
        fabric: &mut Fabric,
        peer: u32,
        ctx: u32,
        tag: i32,
        buf: &Loan,
        how: How,
    ) -> Result<Started> {
        let len = buf.packed_len();
        let head = Head {
            ctx,
            tag,
            sig: buf.sig(),
            persistent: how.persistent,
        };
        let eager = (len <= self.limits.eager_limit_bytes
            || (len <= self.limits.far_eager_limit_bytes && !fabric.shares_memory_with(peer)))
            && (peer == self.me
                || self.flow_allows(fabric, peer, len)
                || (self.unthrottled && len <= UNTHROTTLED_MAX));
        if eager {
            let op = how.sync.then(|| {
                self.ops.alloc(OpKind::Send {
                    peer,
                    cancel_sent: false,
                    rndv: None,
                })
            });
            let f = Msg::Eager { head, sync_op: op }.encode();
            if let Err(u) = fabric.send_loan(peer, &f, buf) {
                if let Some(op) = op {
                    self.ops.complete(op, crate::status::Status::empty(), None);
                    let _ = self.ops.take(op);
                }
                return Err(unusable(u));
            }
            self.flow[peer as usize].eager_sent += flow_cost(len);
            return Ok(op.map_or(Started::Done, Started::Op));
        }
        let exposed = bulk::expose(buf, len).map_err(unusable)?;
        let remote = exposed.remote();
        let op = self.ops.alloc(OpKind::Send {
            peer,
            cancel_sent: false,
            rndv: Some((buf.clone(), exposed)),
        });
        let f = Msg::Rts {
            head,
            sender_op: op,
            len: len as u64,
            remote,
        }
        .encode();
        fabric.send(peer, &f, &[]);
        Ok(Started::Op(op))
    }

    /// Whether `len` more eager bytes to `peer` stay within the flow limit. Reads the peer's
    /// delivered count (a line the peer writes) only when the cached one says no.
    #[inline(always)]
    fn flow_allows(&mut self, fabric: &Fabric, peer: u32, len: usize) -> bool {
        use crate::fabric::Transport;
        let out = &mut self.flow[peer as usize];
        let limit = out.limit;
        if out.eager_sent - out.seen_delivered + flow_cost(len) <= limit {
            return true;
        }
        out.seen_delivered = fabric.delivered_by(peer);
        out.eager_sent - out.seen_delivered + flow_cost(len) <= limit
    }

    /// Cancel `op` (see [`Engine::cancel`]).
    pub(crate) fn cancel(&mut self, fabric: &mut Fabric, op: OpId) {
        let Some(s) = self.ops.get_mut(op) else {
            return;
        };
        if s.done {
            return;
        }
        match s.kind {
            OpKind::Recv { .. } => {
                if self.matcher.remove_posted(|&id| id == op).is_some() {
                    self.ops.complete(op, cancelled(), None);
                }
            }
            OpKind::Send {
                peer,
                ref mut cancel_sent,
                ..
            } => {
                if !*cancel_sent {
                    *cancel_sent = true;
                    fabric.send(peer, &Msg::Cancel { op }.encode(), &[]);
                }
            }
            OpKind::Free => {}
        }
    }

    /// Take a rendezvous send to this endpoint itself back out of the loopback queue or the
    /// unexpected queue (where its request waits), completing it as cancelled. If a receive
    /// has already matched it, the copy is done and it is complete already.
    pub(crate) fn withdraw_self_rts(&mut self, fabric: &mut Fabric, op: OpId) {
        let me = self.me;
        let removed = fabric.withdraw_loopback(
            |f| matches!(Msg::decode(f), Ok(Msg::Rts { sender_op, .. }) if sender_op == op),
        ) || self
            .matcher
            .remove_unexpected(|e, h| e.src == me && h.is_rendezvous_of(op))
            .is_some();
        if removed {
            self.ops.complete(op, cancelled(), None);
        }
    }
}

/// The status of a cancelled operation.
pub(crate) fn cancelled() -> crate::status::Status {
    crate::status::Status {
        cancelled: true,
        ..crate::status::Status::empty()
    }
}

/// Under NO_EAGER_THROTTLE, messages up to this size go eager whatever the flow limit says.
/// Larger ones past the limit still go by rendezvous: not to throttle, but because on one
/// host its single copy beats eager's three (into the ring, out into the unexpected queue,
/// into the receive buffer) from about 4 KiB on (`earlybird-bench assert`, `eager_burst`).
pub(crate) const UNTHROTTLED_MAX: usize = 4096;

/// What one eager message counts against the flow limit: its payload, and at least a frame's
/// worth, so that a flood of empty messages is bounded too (each costs the receiver an entry
/// in its unexpected queue).
#[inline]
pub(crate) fn flow_cost(len: usize) -> u64 {
    len.max(64) as u64
}

/// A send or receive whose buffer is no longer lent (its scope or call ended under it).
#[cold]
pub(crate) fn unusable(u: crate::sys::lend::Unusable) -> Error {
    Error::new(ErrorClass::Intern, format!("point-to-point operation: {u}"))
}
