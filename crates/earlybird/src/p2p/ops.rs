//! The table of an endpoint's operations in flight: each is a slot, named by an [`OpId`]
//! that carries the slot's generation, so a stale id (of an operation already collected)
//! never reaches the slot's next occupant.
#![forbid(unsafe_code)]

use crate::error::{Error, ErrorClass, Result};
use crate::fabric::bulk::Exposed;
use crate::status::Status;
use crate::sys::lend::Loan;

/// Names one operation of an endpoint: its slot and the slot's generation. Travels in frames
/// (a synchronous send's acknowledgement, a rendezvous FIN names the sender's operation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct OpId {
    slot: u32,
    gen: u32,
}

impl OpId {
    /// The id as a frame word.
    #[inline(always)]
    pub(crate) const fn to_wire(self) -> u64 {
        ((self.gen as u64) << 32) | self.slot as u64
    }

    /// An id read from a frame word.
    #[inline(always)]
    pub(crate) const fn from_wire(w: u64) -> OpId {
        OpId {
            slot: w as u32,
            gen: (w >> 32) as u32,
        }
    }
}

impl std::fmt::Display for OpId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.slot, self.gen)
    }
}

/// What an operation is.
#[derive(Debug)]
pub(crate) enum OpKind {
    Free,
    /// A send waiting for an answer: an eager synchronous send waits for its ACK (its data is
    /// in the ring already); a rendezvous send for its FIN, holding its buffer and what it
    /// exposed until then (fabric::bulk, rule 2).
    Send {
        peer: u32,
        cancel_sent: bool,
        rndv: Option<(Loan, Exposed)>,
    },
    /// A receive, into its buffer ([`Loan::EMPTY`] when a bound receive is inactive).
    Recv {
        buf: Loan,
    },
}

/// One operation.
#[derive(Debug)]
pub(crate) struct OpSlot {
    gen: u32,
    pub(crate) kind: OpKind,
    pub(crate) done: bool,
    /// The request-layer scope whose buffers this operation may touch (0: none).
    pub(crate) scope: u32,
    /// Nobody will collect the result (a freed request): free the slot on completion.
    pub(crate) detached: bool,
    /// A persistent request's receive (bound at its init).
    pub(crate) persistent: bool,
    pub(crate) status: Status,
    pub(crate) error: Option<Error>,
}

/// The table (slots are reused, their generation bumped each time one is freed).
#[derive(Debug, Default)]
pub(crate) struct Ops {
    slots: Vec<OpSlot>,
    free: Vec<u32>,
}

impl Ops {
    /// A new operation of `kind`, in progress.
    #[inline(always)]
    pub(crate) fn alloc(&mut self, kind: OpKind) -> OpId {
        match self.alloc_with(|| Ok::<_, std::convert::Infallible>(kind)) {
            Ok(op) => op,
            Err(never) => match never {},
        }
    }

    /// A new operation of the kind `make` gives, in progress; its error, with no operation,
    /// if it fails. `make` runs once the slot is found, and its kind is written straight
    /// into the slot (the old one, free, dropped after): with no call between, the kind's
    /// fields are stored where they stay, not onto the stack first and copied from there in
    /// wider loads that wait for those stores (the receive's loan in the message rate).
    #[inline(always)]
    pub(crate) fn alloc_with<E>(
        &mut self,
        make: impl FnOnce() -> std::result::Result<OpKind, E>,
    ) -> std::result::Result<OpId, E> {
        let idx = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(OpSlot {
                    gen: 0,
                    kind: OpKind::Free,
                    done: false,
                    scope: 0,
                    detached: false,
                    persistent: false,
                    status: Status::empty(),
                    error: None,
                });
                (self.slots.len() - 1) as u32
            }
        };
        let s = &mut self.slots[idx as usize];
        let kind = match make() {
            Ok(kind) => kind,
            Err(e) => {
                self.free.push(idx);
                return Err(e);
            }
        };
        let free = std::mem::replace(&mut s.kind, kind);
        s.done = false;
        s.scope = 0;
        s.detached = false;
        s.persistent = false;
        s.status = Status::empty();
        s.error = None;
        let op = OpId {
            slot: idx,
            gen: s.gen,
        };
        drop(free);
        Ok(op)
    }

    /// The operation `op`, if it is still in the table.
    #[inline]
    pub(crate) fn get(&self, op: OpId) -> Option<&OpSlot> {
        let s = self.slots.get(op.slot as usize)?;
        (s.gen == op.gen && !matches!(s.kind, OpKind::Free)).then_some(s)
    }

    #[inline]
    pub(crate) fn get_mut(&mut self, op: OpId) -> Option<&mut OpSlot> {
        let s = self.slots.get_mut(op.slot as usize)?;
        (s.gen == op.gen && !matches!(s.kind, OpKind::Free)).then_some(s)
    }

    /// Whether `op` has completed (an unknown operation counts as complete).
    #[inline]
    pub(crate) fn is_done(&self, op: OpId) -> bool {
        self.get(op).is_none_or(|s| s.done)
    }

    /// Complete `op` with `status` (and `error`); a detached operation is freed at once.
    /// A send lets go of its buffer here.
    #[inline]
    pub(crate) fn complete(&mut self, op: OpId, status: Status, error: Option<Error>) {
        let detached = match self.get_mut(op) {
            Some(s) => {
                s.done = true;
                s.status = status;
                s.error = error;
                if let OpKind::Send { rndv, .. } = &mut s.kind {
                    *rndv = None;
                }
                s.detached
            }
            None => false,
        };
        if detached {
            let _ = self.take(op);
        }
    }

    /// The result of completed operation `op`, its slot freed.
    pub(crate) fn take(&mut self, op: OpId) -> Result<Status> {
        let Some(s) = self.get_mut(op) else {
            return Err(unknown(op));
        };
        debug_assert!(s.done);
        let status = s.status;
        let error = s.error.take();
        s.kind = OpKind::Free;
        s.gen = s.gen.wrapping_add(1);
        self.free.push(op.slot);
        match error {
            None => Ok(status),
            Some(e) => Err(e.with_status(status)),
        }
    }

    /// The result of completed operation `op`, leaving its slot (a bound receive's).
    pub(crate) fn collect(&mut self, op: OpId) -> Result<Status> {
        let Some(s) = self.get_mut(op) else {
            return Err(unknown(op));
        };
        let status = s.status;
        match s.error.take() {
            None => Ok(status),
            Some(e) => Err(e.with_status(status)),
        }
    }

    /// The operations of scope `scope` still in flight.
    pub(crate) fn in_flight_of(&self, scope: u32) -> Vec<OpId> {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.scope == scope && !s.done && !matches!(s.kind, OpKind::Free))
            .map(|(i, s)| OpId {
                slot: i as u32,
                gen: s.gen,
            })
            .collect()
    }

    /// Operations in the table (tests: everything completed is freed).
    #[cfg(test)]
    pub(crate) fn live(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| !matches!(s.kind, OpKind::Free))
            .count()
    }
}

#[cold]
fn unknown(op: OpId) -> Error {
    Error::new(
        ErrorClass::Request,
        format!("operation {op} is not known to this endpoint"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_ids_miss_the_next_occupant() {
        let mut t = Ops::default();
        let a = t.alloc(OpKind::Recv { buf: Loan::EMPTY });
        t.complete(a, Status::empty(), None);
        t.take(a).unwrap();
        let b = t.alloc(OpKind::Recv { buf: Loan::EMPTY });
        assert_ne!(a, b);
        assert!(t.get(a).is_none() && t.get(b).is_some());
        assert!(t.take(a).is_err());
        assert_eq!(OpId::from_wire(b.to_wire()), b);
        assert_eq!(t.live(), 1);
    }
}
