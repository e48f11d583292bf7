//! The point-to-point protocol's messages, and how each travels as a frame header.
//!
//! | message | frame words | payload | answer |
//! |---|---|---|---|
//! | [`Msg::Eager`] | ctx, tag, sig, persistent flag; `a` = the sender's op when synchronous | the message | [`Msg::Ack`] when synchronous, once matched |
//! | [`Msg::Rts`] | ctx, tag, sig, persistent flag; `a` = the sender's op; `b` = message bytes; the exposed buffer (fabric) | none | [`Msg::Fin`] once the receiver has pulled |
//! | [`Msg::Ack`], [`Msg::Fin`] | `a` = the sender's op | none | |
//! | [`Msg::Cancel`] | `a` = the sender's op | none | [`Msg::CancelReply`] |
//! | [`Msg::CancelReply`] | `a` = the op; `b` = 1 if the message was withdrawn | none | |
//!
//! Decoding is total: any header decodes to a message or to a [`WireError`] naming what is
//! wrong with it.
#![forbid(unsafe_code)]

use super::ops::OpId;
use crate::fabric::bulk::RemoteRef;
use crate::fabric::frame::Frame;
use crate::sys::sig::Sig;

const K_EAGER: u8 = 1;
const K_RTS: u8 = 2;
const K_ACK: u8 = 3;
const K_FIN: u8 = 4;
const K_CANCEL: u8 = 5;
const K_CANCEL_REPLY: u8 = 6;
/// An eager message whose sender waits for an acknowledgement (synchronous mode).
const F_SYNC: u8 = 1;
/// A message of a persistent send (checked against the receive under PERSISTENT_ONLY).
const F_PERSISTENT: u8 = 2;

/// The envelope words of a message: its context, tag and signature, and whether a
/// persistent send sent it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Head {
    pub(crate) ctx: u32,
    pub(crate) tag: i32,
    pub(crate) sig: Sig,
    pub(crate) persistent: bool,
}

/// One protocol message (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Msg {
    Eager {
        head: Head,
        sync_op: Option<OpId>,
    },
    Rts {
        head: Head,
        sender_op: OpId,
        len: u64,
        remote: RemoteRef,
    },
    Ack {
        op: OpId,
    },
    Fin {
        op: OpId,
    },
    Cancel {
        op: OpId,
    },
    CancelReply {
        op: OpId,
        removed: bool,
    },
}

/// A header that is no message of this protocol: a corrupted segment, or mixed versions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WireError {
    UnknownKind(u8),
    RtsWithoutBuffer,
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WireError::UnknownKind(k) => write!(f, "unknown frame kind {k}"),
            WireError::RtsWithoutBuffer => f.write_str("a rendezvous request that names no buffer"),
        }
    }
}

impl Msg {
    /// The frame header of this message.
    #[inline(always)]
    pub(crate) fn encode(&self) -> Frame {
        let op_only = |kind: u8, op: OpId| {
            let mut f = Frame::new(kind, 0, 0);
            f.a = op.to_wire();
            f
        };
        match *self {
            Msg::Eager { ref head, sync_op } => {
                let mut f = head_of(head, K_EAGER);
                if let Some(op) = sync_op {
                    f = f.with_flags(f.flags() | F_SYNC);
                    f.a = op.to_wire();
                }
                f
            }
            Msg::Rts {
                ref head,
                sender_op,
                len,
                ref remote,
            } => {
                let mut f = head_of(head, K_RTS).with_word(len).with_remote(remote);
                f.a = sender_op.to_wire();
                f
            }
            Msg::Ack { op } => op_only(K_ACK, op),
            Msg::Fin { op } => op_only(K_FIN, op),
            Msg::Cancel { op } => op_only(K_CANCEL, op),
            Msg::CancelReply { op, removed } => {
                op_only(K_CANCEL_REPLY, op).with_word(removed as u64)
            }
        }
    }

    /// The message a frame header carries.
    #[inline(always)]
    pub(crate) fn decode(f: &Frame) -> Result<Msg, WireError> {
        let head = || Head {
            ctx: f.ctx,
            tag: f.tag,
            sig: Sig::from_wire(f.sig),
            persistent: f.flags() & F_PERSISTENT != 0,
        };
        let op = || OpId::from_wire(f.a);
        Ok(match f.kind {
            K_EAGER => Msg::Eager {
                head: head(),
                sync_op: (f.flags() & F_SYNC != 0).then(op),
            },
            K_RTS => Msg::Rts {
                head: head(),
                sender_op: op(),
                len: f.word(),
                remote: f.remote().ok_or(WireError::RtsWithoutBuffer)?,
            },
            K_ACK => Msg::Ack { op: op() },
            K_FIN => Msg::Fin { op: op() },
            K_CANCEL => Msg::Cancel { op: op() },
            K_CANCEL_REPLY => Msg::CancelReply {
                op: op(),
                removed: f.word() == 1,
            },
            k => return Err(WireError::UnknownKind(k)),
        })
    }
}

/// The header of a message of `kind` with envelope `h`.
#[inline(always)]
fn head_of(h: &Head, kind: u8) -> Frame {
    let mut f = Frame::new(kind, h.ctx, h.tag);
    f.sig = h.sig.to_wire();
    if h.persistent {
        f = f.with_flags(F_PERSISTENT);
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::lend::Loan;
    use proptest::prelude::*;

    fn remote() -> RemoteRef {
        // A real reference, as only the fabric makes them: the exposed bytes of a loan.
        let l = Loan::zeroed(64);
        crate::fabric::bulk::expose(&l, 64).unwrap().remote()
    }

    fn arb_msg() -> impl Strategy<Value = Msg> {
        let head = (any::<u32>(), any::<i32>(), any::<u16>(), any::<bool>()).prop_map(
            |(ctx, tag, sig, persistent)| Head {
                ctx,
                tag,
                sig: Sig::from_wire(sig),
                persistent,
            },
        );
        let op = any::<u64>().prop_map(OpId::from_wire);
        prop_oneof![
            (head.clone(), proptest::option::of(op.clone()))
                .prop_map(|(head, sync_op)| Msg::Eager { head, sync_op }),
            (head, op.clone(), any::<u64>()).prop_map(|(head, sender_op, len)| Msg::Rts {
                head,
                sender_op,
                len,
                remote: remote(),
            }),
            op.clone().prop_map(|op| Msg::Ack { op }),
            op.clone().prop_map(|op| Msg::Fin { op }),
            op.clone().prop_map(|op| Msg::Cancel { op }),
            (op, any::<bool>()).prop_map(|(op, removed)| Msg::CancelReply { op, removed }),
        ]
    }

    proptest! {
        #[test]
        fn every_message_decodes_to_itself(m in arb_msg()) {
            prop_assert_eq!(Msg::decode(&m.encode()), Ok(m));
        }

        #[test]
        fn any_header_decodes_or_says_why(bytes in proptest::collection::vec(any::<u8>(), 56)) {
            let f: Frame = bytemuck::pod_read_unaligned(&bytes);
            match Msg::decode(&f) {
                Ok(m) => {
                    // What decodes re-encodes to a header that decodes the same.
                    prop_assert_eq!(Msg::decode(&m.encode()), Ok(m));
                }
                Err(WireError::UnknownKind(k)) => prop_assert!(!(1..=6).contains(&k)),
                Err(WireError::RtsWithoutBuffer) => prop_assert_eq!(f.kind, K_RTS),
            }
        }
    }
}
