//! The receive side: arriving messages against posted receives (MPI's matching), eager
//! payloads copied in, rendezvous payloads pulled with one copy, probes, matched probes, and
//! the answers a sender waits for (ACK, FIN, CANCEL_REPLY).
#![forbid(unsafe_code)]

use super::engine::{Core, Engine};
use super::matching::{Envelope, Pattern};
use super::ops::{OpId, OpKind};
use super::send::{cancelled, flow_cost, unusable};
use super::wire::{Head, Msg};
use crate::error::{Error, ErrorClass, Result};
use crate::fabric::bulk::RemoteRef;
use crate::fabric::frame::{Frame, INLINE_BYTES};
use crate::fabric::{Fabric, Transport};
use crate::status::Status;
use crate::sys::lend::Loan;
use crate::sys::sig::Sig;

/// A message that arrived before its receive (or was taken by a matched probe).
#[derive(Debug)]
pub(crate) enum Held {
    /// A small eager payload kept without a heap allocation.
    Inline {
        data: [u8; INLINE_BYTES],
        len: u8,
        sync_op: Option<OpId>,
        sig: Sig,
        persistent: bool,
    },
    Eager {
        data: Vec<u8>,
        sync_op: Option<OpId>,
        sig: Sig,
        persistent: bool,
    },
    Rndv {
        sender_op: OpId,
        remote: RemoteRef,
        len: usize,
        sig: Sig,
        persistent: bool,
    },
}

impl Held {
    pub(crate) fn len(&self) -> usize {
        match self {
            Held::Inline { len, .. } => *len as usize,
            Held::Eager { data, .. } => data.len(),
            Held::Rndv { len, .. } => *len,
        }
    }

    /// Whether this is the rendezvous request of the sender's operation `op`.
    pub(crate) fn is_rendezvous_of(&self, op: OpId) -> bool {
        matches!(self, Held::Rndv { sender_op, .. } if *sender_op == op)
    }

    /// Whether this is a message of the sender's operation `op` (which asks to cancel it).
    fn is_of(&self, op: OpId) -> bool {
        match self {
            Held::Eager { sync_op, .. } | Held::Inline { sync_op, .. } => *sync_op == Some(op),
            Held::Rndv { sender_op, .. } => *sender_op == op,
        }
    }

    fn eager(payload: &[u8], sync_op: Option<OpId>, head: &Head) -> Held {
        let (sig, persistent) = (head.sig, head.persistent);
        if payload.len() <= INLINE_BYTES {
            let mut data = [0u8; INLINE_BYTES];
            data[..payload.len()].copy_from_slice(payload);
            Held::Inline {
                data,
                len: payload.len() as u8,
                sync_op,
                sig,
                persistent,
            }
        } else {
            Held::Eager {
                data: payload.to_vec(),
                sync_op,
                sig,
                persistent,
            }
        }
    }
}

/// A message taken out of matching by a matched probe (MPI_Mprobe), waiting for `mrecv`.
#[derive(Debug)]
pub(crate) struct Matched {
    env: Envelope,
    held: Held,
}

impl Matched {
    pub(crate) fn envelope(&self) -> Envelope {
        self.env
    }

    pub(crate) fn len(&self) -> usize {
        self.held.len()
    }

    /// How the message is held (tests).
    #[cfg(test)]
    pub(crate) fn held(&self) -> &Held {
        &self.held
    }
}

impl Engine {
    /// Start a receive into `buf` of a message matching `pat`.
    #[inline(always)]
    pub(crate) fn recv_start(&mut self, pat: Pattern, buf: Loan) -> OpId {
        let op = self.core.ops.alloc(OpKind::Recv { buf });
        self.core.post_or_match(&mut self.fabric, op, pat);
        op
    }

    /// Start a receive of a message matching `pat` into the buffer `lend` lends, made once
    /// its slot is found and written straight into it (see [`Ops::alloc_with`](super::ops::Ops::alloc_with)); `lend`'s
    /// error, with nothing started, if it fails.
    #[inline(always)]
    pub(crate) fn recv_start_lent(
        &mut self,
        pat: Pattern,
        lend: impl FnOnce() -> Result<Loan>,
    ) -> Result<OpId> {
        let op = self
            .core
            .ops
            .alloc_with(|| lend().map(|buf| OpKind::Recv { buf }))?;
        self.core.post_or_match(&mut self.fabric, op, pat);
        Ok(op)
    }

    /// A receive slot bound for a persistent request: kept from init to free, so a start
    /// only re-arms it (no allocation, no lookup of a new slot). Inactive (done) until the
    /// first [`recv_rearm`](Self::recv_rearm).
    pub(crate) fn recv_bind(&mut self) -> OpId {
        let op = self.core.ops.alloc(OpKind::Recv { buf: Loan::EMPTY });
        self.core.ops.complete(op, Status::empty(), None);
        if let Some(s) = self.core.ops.get_mut(op) {
            s.persistent = true;
        }
        op
    }

    /// Start a bound receive again, into `buf`. The caller guarantees it is inactive
    /// (collected).
    #[inline(always)]
    pub(crate) fn recv_rearm(&mut self, op: OpId, pat: Pattern, buf: Loan) {
        if let Some(s) = self.core.ops.get_mut(op) {
            s.done = false;
            s.error = None;
            s.kind = OpKind::Recv { buf };
        }
        self.core.post_or_match(&mut self.fabric, op, pat);
    }

    /// The result of a completed bound receive, leaving the slot bound (inactive) and its
    /// buffer no longer held.
    #[inline(always)]
    pub(crate) fn collect(&mut self, op: OpId) -> Result<Status> {
        if let Some(s) = self.core.ops.get_mut(op) {
            s.kind = OpKind::Recv { buf: Loan::EMPTY };
        }
        self.core.ops.collect(op)
    }

    /// Release a bound receive's slot (its request is gone). It must be inactive.
    pub(crate) fn unbind(&mut self, op: OpId) {
        if self.is_done(op) {
            let _ = self.core.ops.take(op);
        }
    }

    /// MPI_Iprobe: the envelope and byte length of the first message `pat` would receive.
    pub(crate) fn iprobe(&mut self, pat: &Pattern) -> Option<(Envelope, usize)> {
        self.progress();
        self.core
            .matcher
            .peek_unexpected(pat)
            .map(|(e, h)| (*e, h.len()))
    }

    /// MPI_Improbe: take the message out of matching.
    pub(crate) fn improbe(&mut self, pat: &Pattern) -> Option<Matched> {
        self.progress();
        self.core
            .matcher
            .take_unexpected(pat)
            .map(|(env, held)| Matched { env, held })
    }

    /// MPI_Imrecv: receive a message taken by `improbe` into `buf`. Complete when it
    /// returns.
    pub(crate) fn mrecv_start(&mut self, m: Matched, buf: Loan) -> OpId {
        let op = self.core.ops.alloc(OpKind::Recv { buf });
        if let Some(r) = self.core.deliver_held(&self.fabric, op, m.env, m.held) {
            self.fabric.send(m.env.src, &r, &[]);
        }
        op
    }
}

impl Core {
    /// Handle one frame from `src` (its payload borrowed from the fabric). Returns the
    /// answer to send back to `src`, if any.
    #[inline(always)]
    pub(crate) fn receive(
        &mut self,
        fabric: &Fabric,
        src: u32,
        f: &Frame,
        payload: &[u8],
    ) -> Option<Frame> {
        let msg = match Msg::decode(f) {
            Ok(m) => m,
            Err(e) => {
                // A corrupted segment or mixed versions: nothing can be trusted any more.
                let e = Error::new(ErrorClass::Intern, format!("{e} from endpoint {src}"));
                eprintln!("earlybird: {e}");
                fabric
                    .job()
                    .abort(self.me as i32, ErrorClass::Intern.code());
                return None;
            }
        };
        match msg {
            Msg::Eager { head, sync_op } => {
                let env = envelope(src, &head);
                if let Some(op) = self.matcher.take_posted(&env) {
                    self.deliver_eager(op, env, payload, sync_op, head.sig, head.persistent)
                } else {
                    self.matcher
                        .push_unexpected(env, Held::eager(payload, sync_op, &head));
                    None
                }
            }
            Msg::Rts {
                head,
                sender_op,
                len,
                remote,
            } => {
                let env = envelope(src, &head);
                let held = Held::Rndv {
                    sender_op,
                    remote,
                    len: len as usize,
                    sig: head.sig,
                    persistent: head.persistent,
                };
                if let Some(op) = self.matcher.take_posted(&env) {
                    self.deliver_held(fabric, op, env, held)
                } else {
                    self.matcher.push_unexpected(env, held);
                    None
                }
            }
            Msg::Ack { op } | Msg::Fin { op } => {
                self.ops.complete(op, Status::empty(), None);
                None
            }
            Msg::Cancel { op } => {
                let removed = self
                    .matcher
                    .remove_unexpected(|e, h| e.src == src && h.is_of(op));
                if let Some((_, h @ (Held::Eager { .. } | Held::Inline { .. }))) = &removed {
                    // Its bytes leave our buffers: they count as delivered for flow control.
                    self.credit(src, flow_cost(h.len()));
                }
                Some(
                    Msg::CancelReply {
                        op,
                        removed: removed.is_some(),
                    }
                    .encode(),
                )
            }
            Msg::CancelReply { op, removed } => {
                if removed {
                    self.ops.complete(op, cancelled(), None);
                }
                None
            }
        }
    }

    /// Count `bytes` of `src`'s eager payload as delivered (reported to it after the next
    /// batch of its frames).
    #[inline(always)]
    fn credit(&mut self, src: u32, bytes: u64) {
        if src != self.me && bytes > 0 {
            let c = &mut self.credit[src as usize];
            if *c == 0 {
                self.owed.push(src);
            }
            *c += bytes;
        }
    }

    /// Copy an eager payload into receive `op` and complete it; the ACK of a synchronous
    /// sender is returned.
    #[inline]
    fn deliver_eager(
        &mut self,
        op: OpId,
        env: Envelope,
        payload: &[u8],
        sync_op: Option<OpId>,
        sig: Sig,
        persistent: bool,
    ) -> Option<Frame> {
        self.credit(env.src, flow_cost(payload.len()));
        let ack = sync_op.map(|sop| Msg::Ack { op: sop }.encode());
        let checked = self.checked_recv;
        let (strict_len, persistent_only) = (self.strict_len, self.persistent_only);
        // One lookup of the slot: copy into its buffer and complete it in place.
        let Some(s) = self.ops.get_mut(op) else {
            return ack;
        };
        let OpKind::Recv { ref buf } = s.kind else {
            return ack;
        };
        let len = payload.len();
        let cap = buf.packed_len();
        let want = buf.sig();
        if let Err(u) = buf.unpack_from(&payload[..len.min(cap)]) {
            let st = Status {
                source: env.src as i32,
                tag: env.tag,
                ..Status::empty()
            };
            self.ops.complete(op, st, Some(unusable(u)));
            return ack;
        }
        if len <= cap
            && (sig == want || want.is_mixed())
            && (!checked
                || ((len == cap || !strict_len)
                    && (!persistent_only || persistent == s.persistent)))
        {
            s.done = true;
            s.status = Status {
                source: env.src as i32,
                tag: env.tag,
                bytes: len,
                cancelled: false,
                error: ErrorClass::Success,
            };
            s.error = None;
            if s.detached {
                let _ = self.ops.take(op);
            }
        } else {
            self.finish_recv(op, env, len, cap, (sig, persistent), want);
        }
        ack
    }

    /// Deliver a message that was held (unexpected, matched-probed, or a rendezvous request
    /// just arrived) into receive `op`; returns the answer the sender waits for, if any.
    pub(crate) fn deliver_held(
        &mut self,
        fabric: &Fabric,
        op: OpId,
        env: Envelope,
        held: Held,
    ) -> Option<Frame> {
        match held {
            Held::Inline {
                data,
                len,
                sync_op,
                sig,
                persistent,
            } => self.deliver_eager(op, env, &data[..len as usize], sync_op, sig, persistent),
            Held::Eager {
                data,
                sync_op,
                sig,
                persistent,
            } => self.deliver_eager(op, env, &data, sync_op, sig, persistent),
            Held::Rndv {
                sender_op,
                remote,
                len,
                sig,
                persistent,
            } => {
                let buf = match self.ops.get(op).map(|s| &s.kind) {
                    Some(OpKind::Recv { buf }) => buf.clone(),
                    _ => Loan::EMPTY,
                };
                let cap = buf.packed_len();
                let n = len.min(cap);
                let res = fabric.pull(env.src, &remote, &buf, n);
                match res {
                    Ok(()) => self.finish_recv(op, env, len, cap, (sig, persistent), buf.sig()),
                    Err(e) => {
                        let st = Status {
                            source: env.src as i32,
                            tag: env.tag,
                            bytes: 0,
                            cancelled: false,
                            error: ErrorClass::Other,
                        };
                        let err = Error::new(
                            ErrorClass::Other,
                            format!(
                                "single-copy read of {n} bytes from rank {} failed: {e}",
                                env.src
                            ),
                        );
                        self.ops.complete(op, st, Some(err));
                    }
                }
                Some(Msg::Fin { op: sender_op }.encode())
            }
        }
    }
}

fn envelope(src: u32, h: &Head) -> Envelope {
    Envelope {
        ctx: h.ctx,
        src,
        tag: h.tag,
    }
}
