//! Context ids: the one place that says which contexts exist, which are reserved, and which
//! of an endpoint's are taken.
//!
//! A communicator owns a context *pair* `p`: context `2p` carries its point-to-point traffic
//! and `2p + 1` the library's own (collectives, communicator creation). Pair 0 is
//! MPI_COMM_WORLD's, pair 1 MPI_COMM_SELF's (every endpoint's own: no message on it ever
//! leaves the endpoint). Every endpoint keeps a bitmap of the pairs its communicators use, 64 x
//! 64 = 4096 of them; the members of a new communicator agree on a pair free on all of them
//! (see [`agree`](super::agree)). Partitioned communication of pair `p` runs on two contexts
//! of its own, `PARTITIONED + 2p` (the hellos that match a send with its receive) and
//! `PARTITIONED + 2p + 1` (the partitions' data), apart from the pair's matching. The two
//! contexts above all of those carry the bind handshake of channels (seed 000), which no
//! communicator's matching ever sees.
#![forbid(unsafe_code)]

use crate::p2p::engine::Engine;

/// Words of the context-pair bitmap: 64 x 64 = 4096 pairs per endpoint.
pub(crate) const CTX_WORDS: usize = 64;

/// A bitmap of context pairs (bit p = pair p).
pub(crate) type Mask = [u64; CTX_WORDS];

/// A context: what a message's envelope carries and a receive matches on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ContextId(u32);

impl ContextId {
    /// MPI_COMM_WORLD's point-to-point context.
    pub(crate) const WORLD: ContextId = ContextId(0);
    /// MPI_COMM_SELF's point-to-point context.
    pub(crate) const SELF: ContextId = ContextId(2);
    /// Bind offers of channels (above every communicator's contexts: 2 x pair < 8192).
    pub(crate) const CHANNEL_OFFERS: ContextId = ContextId(u32::MAX - 1);
    /// Bind replies of channels.
    pub(crate) const CHANNEL_REPLIES: ContextId = ContextId(u32::MAX);

    /// Where the contexts of partitioned communication start (above every pair's two).
    const PARTITIONED: u32 = 2 * CTX_WORDS as u32 * 64;

    /// The contexts of partitioned communication of this context's pair: its hellos, and its
    /// partitions' data (see `partitioned.rs`).
    pub(crate) const fn partitioned(self) -> (ContextId, ContextId) {
        let c = ContextId::PARTITIONED + 2 * self.pair();
        (ContextId(c), ContextId(c + 1))
    }

    /// The point-to-point context of pair `pair`.
    pub(crate) const fn of_pair(pair: u32) -> ContextId {
        ContextId(2 * pair)
    }

    /// The pair this context belongs to.
    pub(crate) const fn pair(self) -> u32 {
        self.0 / 2
    }

    /// The library's own context of the same pair.
    pub(crate) const fn internal(self) -> ContextId {
        ContextId(self.0 | 1)
    }

    /// The number envelopes carry.
    #[inline(always)]
    pub(crate) const fn raw(self) -> u32 {
        self.0
    }
}

/// The pairs an endpoint's communicators use.
struct Taken(Mask);

impl Default for Taken {
    fn default() -> Self {
        let mut m = [0u64; CTX_WORDS];
        m[0] = 0b11; // pair 0: WORLD, pair 1: SELF
        Taken(m)
    }
}

/// The pairs this endpoint has free (bit set = free).
pub(crate) fn free_mask(e: &mut Engine) -> Mask {
    e.ext.get::<Taken>().0.map(|w| !w)
}

/// Take pair `pair` for a new communicator.
pub(crate) fn claim(e: &mut Engine, pair: u32) {
    e.ext.get::<Taken>().0[pair as usize / 64] |= 1 << (pair % 64);
}

/// Give pair `pair` back (its communicator was freed). WORLD's and SELF's are never given
/// back.
pub(crate) fn release(e: &mut Engine, pair: u32) {
    if pair > ContextId::SELF.pair() {
        e.ext.get::<Taken>().0[pair as usize / 64] &= !(1 << (pair % 64));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_and_reserved_contexts_do_not_meet() {
        let c = ContextId::of_pair(4095);
        assert_eq!((c.raw(), c.internal().raw(), c.pair()), (8190, 8191, 4095));
        assert!(ContextId::CHANNEL_OFFERS.raw() > c.internal().raw());
        let (hello, data) = c.partitioned();
        assert_eq!((hello.raw(), data.raw()), (8192 + 8190, 8192 + 8191));
        assert!(ContextId::WORLD.partitioned().0.raw() > c.internal().raw());
        assert!(ContextId::CHANNEL_OFFERS.raw() > data.raw());
        assert_eq!(ContextId::WORLD, ContextId::of_pair(0));
        assert_eq!(ContextId::SELF, ContextId::of_pair(1));
    }
}
