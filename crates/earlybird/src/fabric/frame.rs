//! The header every frame carries between endpoints: 56 bytes, the body of one ring slot.
//!
//! The protocol above (p2p) owns `kind`, its flags, `sig`, `ctx`, `tag` and the word `a`,
//! and the word `b` of a frame without a payload; the fabric owns the rest: the payload's
//! length and place (`b` of a frame whose payload is in the ring's data area), and a
//! [`RemoteRef`] (in the inline area of a frame without a payload), which only the fabric can
//! put there ([`Frame::with_remote`]) or read back ([`Frame::remote`]). So a reference to a
//! peer's memory cannot be made up by the layers above: it comes from the peer's own
//! [`expose`](super::bulk::expose).

use super::bulk::RemoteRef;
use bytemuck::{Pod, Zeroable};

/// Bytes of payload carried inside the frame itself.
pub(crate) const INLINE_BYTES: usize = 24;

/// Flag bits the protocol above may use.
pub(crate) const PROTOCOL_FLAGS: u8 = 0x3f;
/// The frame carries a remote reference in its inline area.
const F_REMOTE: u8 = 0x80;
/// The remote reference is a segment table (else one run).
const F_REMOTE_SEGMENTS: u8 = 0x40;

/// A frame's header (see the module doc for who owns which word).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable, PartialEq, Eq)]
pub(crate) struct Frame {
    pub(crate) kind: u8,
    flags: u8,
    /// The signature of the message's basic type (`Sig::to_wire`).
    pub(crate) sig: u16,
    pub(crate) ctx: u32,
    pub(crate) tag: i32,
    /// Payload bytes carried by this frame (inline or in the data area).
    pub(super) len: u32,
    /// A protocol word.
    pub(crate) a: u64,
    /// A protocol word when the frame has no payload; the payload's offset in the ring's
    /// data area when it has one that does not fit inline.
    pub(super) b: u64,
    /// The payload when it fits; a remote reference on a frame without payload.
    pub(super) inline: [u8; INLINE_BYTES],
}

const _: () = assert!(std::mem::size_of::<Frame>() == 56);
const _: () = assert!(std::mem::offset_of!(Frame, a) == 16);
const _: () = assert!(std::mem::offset_of!(Frame, inline) == 32);

impl Frame {
    /// A header of `kind` on context `ctx` with `tag`.
    #[inline(always)]
    pub(crate) const fn new(kind: u8, ctx: u32, tag: i32) -> Frame {
        Frame {
            kind,
            flags: 0,
            sig: 0,
            ctx,
            tag,
            len: 0,
            a: 0,
            b: 0,
            inline: [0; INLINE_BYTES],
        }
    }

    /// The protocol's flags.
    #[inline(always)]
    pub(crate) fn flags(&self) -> u8 {
        self.flags & PROTOCOL_FLAGS
    }

    /// The same header with the protocol's flags `f` (bits outside [`PROTOCOL_FLAGS`] are
    /// ignored).
    #[inline(always)]
    pub(crate) fn with_flags(mut self, f: u8) -> Frame {
        self.flags = (self.flags & !PROTOCOL_FLAGS) | (f & PROTOCOL_FLAGS);
        self
    }

    /// The second protocol word (frames without payload only; see the module doc).
    #[inline(always)]
    pub(crate) fn word(&self) -> u64 {
        self.b
    }

    /// The same header with the second protocol word `w` (for a frame sent without
    /// payload: a payload's place overwrites it).
    #[inline(always)]
    pub(crate) fn with_word(mut self, w: u64) -> Frame {
        self.b = w;
        self
    }

    /// The same header carrying `r` (a frame sent without payload).
    pub(crate) fn with_remote(mut self, r: &RemoteRef) -> Frame {
        let (addr, entries) = r.words();
        self.inline[..8].copy_from_slice(&addr.to_le_bytes());
        self.inline[8..16].copy_from_slice(&entries.unwrap_or(0).to_le_bytes());
        self.flags |= F_REMOTE;
        if entries.is_some() {
            self.flags |= F_REMOTE_SEGMENTS;
        } else {
            self.flags &= !F_REMOTE_SEGMENTS;
        }
        self
    }

    /// The remote reference a peer put in this frame, if it carries one.
    pub(crate) fn remote(&self) -> Option<RemoteRef> {
        if self.flags & F_REMOTE == 0 || self.len != 0 {
            return None;
        }
        let word = |r: std::ops::Range<usize>| {
            u64::from_le_bytes(self.inline[r].try_into().expect("8 bytes"))
        };
        let entries = (self.flags & F_REMOTE_SEGMENTS != 0).then(|| word(8..16));
        Some(RemoteRef::from_words(word(0..8), entries))
    }
}
