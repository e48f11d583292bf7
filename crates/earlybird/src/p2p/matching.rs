//! MPI message matching, free of I/O: posted receives against arriving envelopes.
//!
//! Rules (MPI 4.1 §3.5): an arriving message matches the **first** posted receive (in
//! posting order) whose pattern it satisfies; a newly posted receive matches the **first**
//! unexpected message (in arrival order) it satisfies. Since messages from one sender arrive
//! in the order they were sent, this gives non-overtaking per (sender, receiver, context).
//! The queues are generic over what they carry so the engine and the property test (against
//! a naive reference matcher) share them.
//!
//! # Keyed contexts
//!
//! A context whose receives promise never to use ANY_SOURCE, or ANY_TAG, or both (seed 002's
//! NO_ANY_SOURCE, MPI 4's `mpi_assert_no_any_tag`: see [`crate::assertions`]) is *keyed*: its
//! posted receives and unexpected messages live in buckets named by the envelope parts that
//! are never wildcards, so a message only ever meets the receives of its own bucket. Every
//! receive that could accept a message is in the message's bucket, and each bucket keeps
//! MPI's order, so matching is unchanged; it just stops scanning receives that cannot match.
//! A context's entries are all in the general queues or all in buckets: changing a context's
//! keying moves them, in the order they came (each keyed entry carries a sequence number).
//! A wildcard that reaches a keyed context (a broken promise the layer above did not stop)
//! turns its keying off, so matching stays correct.
#![forbid(unsafe_code)]

use std::collections::{HashMap, VecDeque};

/// Who sent what where: the matching key of a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Envelope {
    pub ctx: u32,
    /// The sender's endpoint index.
    pub src: u32,
    pub tag: i32,
}

/// What a receive (or probe) accepts. `None` is a wildcard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pattern {
    pub ctx: u32,
    pub src: Option<u32>,
    pub tag: Option<i32>,
}

impl Pattern {
    #[inline]
    pub fn accepts(&self, e: &Envelope) -> bool {
        self.ctx == e.ctx
            && self.src.is_none_or(|s| s == e.src)
            && self.tag.is_none_or(|t| t == e.tag)
    }
}

/// Which parts of an envelope the receives of a context always name (never a wildcard).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Keying {
    pub src: bool,
    pub tag: bool,
}

impl Keying {
    /// Not keyed: the general queues.
    pub const NONE: Keying = Keying {
        src: false,
        tag: false,
    };

    fn is_keyed(self) -> bool {
        self.src || self.tag
    }

    /// The bucket of a message, or of a pattern that names every keyed part.
    #[inline(always)]
    fn key(self, ctx: u32, src: Option<u32>, tag: Option<i32>) -> Option<u128> {
        let s = if self.src { src? } else { u32::MAX };
        let t = if self.tag { tag? as u32 } else { u32::MAX };
        Some(((ctx as u128) << 64) | ((s as u128) << 32) | t as u128)
    }
}

/// Posted and unexpected queues.
#[derive(Debug)]
pub struct Matcher<P, U> {
    posted: VecDeque<(Pattern, P)>,
    unexpected: VecDeque<(Envelope, U)>,
    /// Buckets of keyed contexts; `None` until a context is keyed (one test on the path of
    /// everything else).
    keyed: Option<Box<Keyed<P, U>>>,
}

impl<P, U> Default for Matcher<P, U> {
    fn default() -> Self {
        Matcher {
            posted: VecDeque::with_capacity(64),
            unexpected: VecDeque::with_capacity(64),
            keyed: None,
        }
    }
}

/// A multiply-rotate hash of a bucket key (small integers; no need for SipHash's defences:
/// keys come from this process's own communicators and tags).
#[derive(Default)]
struct KeyHasher(u64);

impl std::hash::Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }

    #[inline(always)]
    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(26) ^ x).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    #[inline(always)]
    fn write_u128(&mut self, x: u128) {
        self.write_u64(x as u64);
        self.write_u64((x >> 64) as u64);
    }
}

/// The buckets: a slab, an index from key to slot, and the slot of the last key looked up
/// (a stream of messages on one key, the common case, skips the hash).
#[derive(Debug)]
struct Buckets<P, U> {
    index: HashMap<u128, u32, std::hash::BuildHasherDefault<KeyHasher>>,
    slab: Vec<(u128, Bucket<P, U>)>,
    last: (u128, u32),
}

/// No key (`Buckets::last` before any lookup): a context above every real one.
const NO_KEY: u128 = u128::MAX;

impl<P, U> Default for Buckets<P, U> {
    fn default() -> Self {
        Buckets {
            index: HashMap::default(),
            slab: Vec::new(),
            last: (NO_KEY, 0),
        }
    }
}

impl<P, U> Buckets<P, U> {
    #[inline(always)]
    fn find(&mut self, key: u128) -> Option<usize> {
        if self.last.0 == key {
            return Some(self.last.1 as usize);
        }
        let i = *self.index.get(&key)?;
        self.last = (key, i);
        Some(i as usize)
    }

    #[inline(always)]
    fn get_mut(&mut self, key: u128) -> Option<&mut Bucket<P, U>> {
        let i = self.find(key)?;
        Some(&mut self.slab[i].1)
    }

    fn get(&self, key: u128) -> Option<&Bucket<P, U>> {
        let i = *self.index.get(&key)?;
        Some(&self.slab[i as usize].1)
    }

    /// The bucket of `key`, made if there is none; `true` with it when it was made.
    fn get_or_make(&mut self, key: u128) -> (&mut Bucket<P, U>, bool) {
        match self.find(key) {
            Some(i) => (&mut self.slab[i].1, false),
            None => {
                let i = self.slab.len() as u32;
                self.slab.push((key, Bucket::default()));
                self.index.insert(key, i);
                self.last = (key, i);
                (&mut self.slab[i as usize].1, true)
            }
        }
    }

    /// Drop the empty buckets.
    fn sweep(&mut self) {
        self.slab.retain(|(_, b)| !b.is_empty());
        self.index = self
            .slab
            .iter()
            .enumerate()
            .map(|(i, (k, _))| (*k, i as u32))
            .collect();
        self.last = (NO_KEY, 0);
    }

    fn iter_mut(&mut self) -> impl Iterator<Item = (u128, &mut Bucket<P, U>)> {
        self.slab.iter_mut().map(|(k, b)| (*k, b))
    }

    fn values(&self) -> impl Iterator<Item = &Bucket<P, U>> {
        self.slab.iter().map(|(_, b)| b)
    }
}

/// A context's posted receives and unexpected messages, taken out in the order they came.
type Drained<P, U> = (Vec<(Pattern, P)>, Vec<(Envelope, U)>);

/// The entries of one bucket, each with its sequence number.
#[derive(Debug)]
struct Bucket<P, U> {
    posted: VecDeque<(Pattern, P, u64)>,
    unexpected: VecDeque<(Envelope, U, u64)>,
}

impl<P, U> Default for Bucket<P, U> {
    fn default() -> Self {
        Bucket {
            posted: VecDeque::new(),
            unexpected: VecDeque::new(),
        }
    }
}

impl<P, U> Bucket<P, U> {
    fn is_empty(&self) -> bool {
        self.posted.is_empty() && self.unexpected.is_empty()
    }
}

/// The keyed contexts and their buckets.
#[derive(Debug)]
struct Keyed<P, U> {
    /// Keying of each context (index: the context); contexts beyond are not keyed.
    modes: Vec<Keying>,
    buckets: Buckets<P, U>,
    /// The next sequence number.
    seq: u64,
    /// Buckets made since empty ones were last dropped.
    made: u32,
}

/// Buckets made between two sweeps of the empty ones (a program that keeps using new tags
/// does not grow the table without bound; one that reuses its tags never sweeps).
const SWEEP_EVERY: u32 = 4096;

impl<P, U> Keyed<P, U> {
    #[inline(always)]
    fn mode(&self, ctx: u32) -> Keying {
        self.modes
            .get(ctx as usize)
            .copied()
            .unwrap_or(Keying::NONE)
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    fn bucket(&mut self, key: u128) -> &mut Bucket<P, U> {
        if self.made >= SWEEP_EVERY {
            self.made = 0;
            self.buckets.sweep();
        }
        let (b, made) = self.buckets.get_or_make(key);
        self.made += made as u32;
        b
    }

    /// Take every entry of context `ctx` out of the buckets, in the order they came.
    fn drain_ctx(&mut self, ctx: u32) -> Drained<P, U> {
        let mut posted = vec![];
        let mut unexpected = vec![];
        for (k, b) in self.buckets.iter_mut() {
            if k >> 64 == ctx as u128 {
                posted.extend(b.posted.drain(..));
                unexpected.extend(b.unexpected.drain(..));
            }
        }
        posted.sort_by_key(|e| e.2);
        unexpected.sort_by_key(|e| e.2);
        (
            posted.into_iter().map(|(p, x, _)| (p, x)).collect(),
            unexpected.into_iter().map(|(e, u, _)| (e, u)).collect(),
        )
    }
}

impl<P, U> Matcher<P, U> {
    /// The keying of context `ctx` and, when keyed, the keyed part.
    #[inline(always)]
    fn keyed_for(&mut self, ctx: u32) -> Option<(&mut Keyed<P, U>, Keying)> {
        let k = self.keyed.as_deref_mut()?;
        let m = k.mode(ctx);
        m.is_keyed().then_some((k, m))
    }

    /// How context `ctx` is matched from now on. Its queued entries move to the new place in
    /// the order they came.
    pub fn set_keying(&mut self, ctx: u32, keying: Keying) {
        let old = self.keying(ctx);
        if old == keying {
            return;
        }
        // Out of where they are...
        let (posted, unexpected) = if old.is_keyed() {
            self.keyed.as_mut().expect("keyed").drain_ctx(ctx)
        } else {
            let (mine, others): (VecDeque<_>, VecDeque<_>) =
                self.posted.drain(..).partition(|(p, _)| p.ctx == ctx);
            self.posted = others;
            let (mine_u, others_u): (VecDeque<_>, VecDeque<_>) =
                self.unexpected.drain(..).partition(|(e, _)| e.ctx == ctx);
            self.unexpected = others_u;
            (mine.into_iter().collect(), mine_u.into_iter().collect())
        };
        if keying.is_keyed() {
            let k = self.keyed.get_or_insert_with(|| {
                Box::new(Keyed {
                    modes: vec![],
                    buckets: Buckets::default(),
                    seq: 0,
                    made: 0,
                })
            });
            if k.modes.len() <= ctx as usize {
                k.modes.resize(ctx as usize + 1, Keying::NONE);
            }
            k.modes[ctx as usize] = keying;
        } else if let Some(k) = self.keyed.as_mut() {
            if let Some(m) = k.modes.get_mut(ctx as usize) {
                *m = Keying::NONE;
            }
        }
        // ...and into where they go (a pattern with a wildcard on a keyed part cannot be in
        // a bucket: then the context is not keyed after all).
        let fits = posted
            .iter()
            .all(|(p, _)| keying.key(ctx, p.src, p.tag).is_some());
        if keying.is_keyed() && !fits {
            self.set_keying_general(ctx, posted, unexpected);
            return;
        }
        for (p, x) in posted {
            self.post(p, x);
        }
        for (e, u) in unexpected {
            self.push_unexpected(e, u);
        }
    }

    fn set_keying_general(
        &mut self,
        ctx: u32,
        posted: Vec<(Pattern, P)>,
        unexpected: Vec<(Envelope, U)>,
    ) {
        if let Some(m) = self
            .keyed
            .as_mut()
            .and_then(|k| k.modes.get_mut(ctx as usize))
        {
            *m = Keying::NONE;
        }
        self.posted.extend(posted);
        self.unexpected.extend(unexpected);
    }

    /// The keying of context `ctx`.
    pub fn keying(&self, ctx: u32) -> Keying {
        self.keyed.as_ref().map_or(Keying::NONE, |k| k.mode(ctx))
    }

    /// A pattern with a wildcard on a part its keyed context promised to name: the context
    /// goes back to the general queues first.
    #[cold]
    fn unkey(&mut self, ctx: u32) {
        self.set_keying(ctx, Keying::NONE);
    }

    /// A message arrived: take the first posted receive that accepts it.
    #[inline(always)]
    pub fn take_posted(&mut self, env: &Envelope) -> Option<P> {
        if let Some((k, m)) = self.keyed_for(env.ctx) {
            let key = m.key(env.ctx, Some(env.src), Some(env.tag))?;
            let b = k.buckets.get_mut(key)?;
            if b.posted.front()?.0.accepts(env) {
                return b.posted.pop_front().map(|(_, p, _)| p);
            }
            let i = b.posted.iter().position(|(p, _, _)| p.accepts(env))?;
            return b.posted.remove(i).map(|(_, p, _)| p);
        }
        // The common case: the oldest posted receive is the one (a window of receives for a
        // stream of messages, or a single receive).
        if self.posted.front()?.0.accepts(env) {
            return self.posted.pop_front().map(|(_, p)| p);
        }
        let i = self.posted.iter().position(|(p, _)| p.accepts(env))?;
        self.posted.remove(i).map(|(_, p)| p)
    }

    /// No posted receive accepted it: queue it as unexpected.
    pub fn push_unexpected(&mut self, env: Envelope, u: U) {
        if let Some((k, m)) = self.keyed_for(env.ctx) {
            let key = m
                .key(env.ctx, Some(env.src), Some(env.tag))
                .expect("an envelope names all");
            let seq = k.next_seq();
            k.bucket(key).unexpected.push_back((env, u, seq));
            return;
        }
        self.unexpected.push_back((env, u));
    }

    /// A receive is posted: take the first unexpected message it accepts...
    #[inline(always)]
    pub fn take_unexpected(&mut self, pat: &Pattern) -> Option<(Envelope, U)> {
        if let Some((k, m)) = self.keyed_for(pat.ctx) {
            match m.key(pat.ctx, pat.src, pat.tag) {
                Some(key) => {
                    let b = k.buckets.get_mut(key)?;
                    if pat.accepts(&b.unexpected.front()?.0) {
                        return b.unexpected.pop_front().map(|(e, u, _)| (e, u));
                    }
                    let i = b.unexpected.iter().position(|(e, _, _)| pat.accepts(e))?;
                    return b.unexpected.remove(i).map(|(e, u, _)| (e, u));
                }
                None => self.unkey(pat.ctx),
            }
        }
        self.take_general(pat)
    }

    /// A receive `p` with `pat` is posted: the first unexpected message it accepts, or `None`
    /// once `p` is posted (one look at the context's keying for both).
    #[inline(always)]
    pub fn take_unexpected_or_post(&mut self, pat: Pattern, p: P) -> Option<(Envelope, U)> {
        if self.keyed.is_none() {
            if let Some(m) = self.take_general(&pat) {
                return Some(m);
            }
            self.posted.push_back((pat, p));
            return None;
        }
        if let Some(m) = self.take_unexpected(&pat) {
            return Some(m);
        }
        self.post(pat, p);
        None
    }

    /// The first message of the general unexpected queue `pat` accepts.
    #[inline(always)]
    fn take_general(&mut self, pat: &Pattern) -> Option<(Envelope, U)> {
        if self.unexpected.is_empty() {
            return None;
        }
        if pat.accepts(&self.unexpected.front()?.0) {
            return self.unexpected.pop_front();
        }
        let i = self.unexpected.iter().position(|(e, _)| pat.accepts(e))?;
        self.unexpected.remove(i)
    }

    /// ...or, when there is none, post it.
    #[inline]
    pub fn post(&mut self, pat: Pattern, p: P) {
        if let Some((k, m)) = self.keyed_for(pat.ctx) {
            match m.key(pat.ctx, pat.src, pat.tag) {
                Some(key) => {
                    let seq = k.next_seq();
                    k.bucket(key).posted.push_back((pat, p, seq));
                    return;
                }
                None => self.unkey(pat.ctx),
            }
        }
        self.posted.push_back((pat, p));
    }

    /// The first unexpected message a probe with `pat` would see.
    pub fn peek_unexpected(&mut self, pat: &Pattern) -> Option<(&Envelope, &U)> {
        if let Some((_, m)) = self.keyed_for(pat.ctx) {
            match m.key(pat.ctx, pat.src, pat.tag) {
                Some(key) => {
                    let k = self.keyed.as_deref()?;
                    let b = k.buckets.get(key)?;
                    return b
                        .unexpected
                        .iter()
                        .find(|(e, _, _)| pat.accepts(e))
                        .map(|(e, u, _)| (e, u));
                }
                None => self.unkey(pat.ctx),
            }
        }
        self.unexpected
            .iter()
            .find(|(e, _)| pat.accepts(e))
            .map(|(e, u)| (e, u))
    }

    /// Remove a posted receive (cancel). True if it was still posted.
    pub fn remove_posted(&mut self, pred: impl Fn(&P) -> bool) -> Option<P> {
        if let Some(i) = self.posted.iter().position(|(_, p)| pred(p)) {
            return self.posted.remove(i).map(|(_, p)| p);
        }
        let k = self.keyed.as_deref_mut()?;
        k.buckets.iter_mut().find_map(|(_, b)| {
            let i = b.posted.iter().position(|(_, p, _)| pred(p))?;
            b.posted.remove(i).map(|(_, p, _)| p)
        })
    }

    /// Remove an unexpected message (a sender's cancel). True if it was still unmatched.
    pub fn remove_unexpected(
        &mut self,
        pred: impl Fn(&Envelope, &U) -> bool,
    ) -> Option<(Envelope, U)> {
        if let Some(i) = self.unexpected.iter().position(|(e, u)| pred(e, u)) {
            return self.unexpected.remove(i);
        }
        let k = self.keyed.as_deref_mut()?;
        k.buckets.iter_mut().find_map(|(_, b)| {
            let i = b.unexpected.iter().position(|(e, u, _)| pred(e, u))?;
            b.unexpected.remove(i).map(|(e, u, _)| (e, u))
        })
    }

    pub fn posted_len(&self) -> usize {
        self.posted.len()
            + self
                .keyed
                .as_ref()
                .map_or(0, |k| k.buckets.values().map(|b| b.posted.len()).sum())
    }

    pub fn unexpected_len(&self) -> usize {
        self.unexpected.len()
            + self
                .keyed
                .as_ref()
                .map_or(0, |k| k.buckets.values().map(|b| b.unexpected.len()).sum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The naive reference: a log of every event, matched by scanning from the start.
    #[derive(Default)]
    struct Reference {
        posted: Vec<Option<(Pattern, usize)>>,
        unexpected: Vec<Option<(Envelope, usize)>>,
    }

    impl Reference {
        fn arrive(&mut self, e: Envelope, id: usize) -> Option<(usize, usize)> {
            for slot in self.posted.iter_mut() {
                if let Some((p, rid)) = *slot {
                    if p.accepts(&e) {
                        *slot = None;
                        return Some((rid, id));
                    }
                }
            }
            self.unexpected.push(Some((e, id)));
            None
        }
        fn post(&mut self, p: Pattern, rid: usize) -> Option<(usize, usize)> {
            for slot in self.unexpected.iter_mut() {
                if let Some((e, mid)) = *slot {
                    if p.accepts(&e) {
                        *slot = None;
                        return Some((rid, mid));
                    }
                }
            }
            self.posted.push(Some((p, rid)));
            None
        }
        fn peek(&self, p: Pattern) -> Option<usize> {
            self.unexpected
                .iter()
                .flatten()
                .find(|(e, _)| p.accepts(e))
                .map(|&(_, id)| id)
        }
    }

    #[derive(Clone, Debug)]
    enum Ev {
        Send {
            src: u32,
            tag: i32,
            ctx: u32,
        },
        Recv {
            src: Option<u32>,
            tag: Option<i32>,
            ctx: u32,
        },
        Probe {
            src: Option<u32>,
            tag: Option<i32>,
            ctx: u32,
        },
        /// A context's keying changes (matching must not).
        Key {
            ctx: u32,
            src: bool,
            tag: bool,
        },
    }

    fn ev() -> impl Strategy<Value = Ev> {
        prop_oneof![
            (0u32..3, 0i32..3, 0u32..2).prop_map(|(src, tag, ctx)| Ev::Send { src, tag, ctx }),
            (
                proptest::option::of(0u32..3),
                proptest::option::of(0i32..3),
                0u32..2
            )
                .prop_map(|(src, tag, ctx)| Ev::Recv { src, tag, ctx }),
        ]
    }

    /// Events of a program that mostly keeps a keyed context's promise (wildcards are rare,
    /// and break it now and then), with keying changes among them.
    fn keyed_ev() -> impl Strategy<Value = Ev> {
        let wild_src = prop_oneof![9 => (0u32..3).prop_map(Some), 1 => Just(None)];
        let wild_tag = prop_oneof![9 => (0i32..3).prop_map(Some), 1 => Just(None)];
        prop_oneof![
            8 => (0u32..3, 0i32..3, 0u32..2).prop_map(|(src, tag, ctx)| Ev::Send { src, tag, ctx }),
            8 => (wild_src.clone(), wild_tag.clone(), 0u32..2)
                .prop_map(|(src, tag, ctx)| Ev::Recv { src, tag, ctx }),
            2 => (wild_src, wild_tag, 0u32..2)
                .prop_map(|(src, tag, ctx)| Ev::Probe { src, tag, ctx }),
            1 => (0u32..2, any::<bool>(), any::<bool>())
                .prop_map(|(ctx, src, tag)| Ev::Key { ctx, src, tag }),
        ]
    }

    /// Run `events` on the matcher and the reference: the pairs each makes, and what each
    /// probe saw.
    type Pairs = Vec<(usize, usize)>;

    fn replay(events: Vec<Ev>) -> (Pairs, Pairs) {
        let mut m: Matcher<usize, usize> = Matcher::default();
        let mut r = Reference::default();
        let mut pairs_m = vec![];
        let mut pairs_r = vec![];
        for (id, e) in events.into_iter().enumerate() {
            match e {
                Ev::Send { src, tag, ctx } => {
                    let env = Envelope { ctx, src, tag };
                    match m.take_posted(&env) {
                        Some(rid) => pairs_m.push((rid, id)),
                        None => m.push_unexpected(env, id),
                    }
                    if let Some(p) = r.arrive(env, id) {
                        pairs_r.push(p);
                    }
                }
                Ev::Recv { src, tag, ctx } => {
                    let pat = Pattern { ctx, src, tag };
                    match m.take_unexpected(&pat) {
                        Some((_, mid)) => pairs_m.push((id, mid)),
                        None => m.post(pat, id),
                    }
                    if let Some(p) = r.post(pat, id) {
                        pairs_r.push(p);
                    }
                }
                Ev::Probe { src, tag, ctx } => {
                    let pat = Pattern { ctx, src, tag };
                    let a = m.peek_unexpected(&pat).map(|(_, &u)| u);
                    // A probe's answer is recorded as a pair with the probe's own id.
                    pairs_m.extend(a.map(|u| (id, u)));
                    pairs_r.extend(r.peek(pat).map(|u| (id, u)));
                }
                Ev::Key { ctx, src, tag } => m.set_keying(ctx, Keying { src, tag }),
            }
        }
        (pairs_m, pairs_r)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        #[test]
        fn matcher_agrees_with_reference(events in proptest::collection::vec(ev(), 0..200)) {
            let (m, r) = replay(events);
            prop_assert_eq!(m, r);
        }

        #[test]
        fn keyed_matching_agrees_with_reference(events in proptest::collection::vec(keyed_ev(), 0..300)) {
            let (m, r) = replay(events);
            prop_assert_eq!(m, r);
        }
    }

    #[test]
    fn a_keyed_context_matches_out_of_order_tags_without_scanning() {
        let mut m: Matcher<usize, usize> = Matcher::default();
        m.set_keying(
            0,
            Keying {
                src: true,
                tag: true,
            },
        );
        for t in 0..100 {
            m.post(
                Pattern {
                    ctx: 0,
                    src: Some(1),
                    tag: Some(t),
                },
                t as usize,
            );
        }
        // The general queues hold nothing; every receive is in its own bucket.
        assert!(m.posted.is_empty());
        for t in (0..100).rev() {
            assert_eq!(
                m.take_posted(&Envelope {
                    ctx: 0,
                    src: 1,
                    tag: t
                }),
                Some(t as usize)
            );
        }
        assert_eq!(m.posted_len(), 0);
        // A wildcard breaks the promise: the context goes back to the general queues.
        m.push_unexpected(
            Envelope {
                ctx: 0,
                src: 1,
                tag: 7,
            },
            7,
        );
        assert_eq!(
            m.take_unexpected(&Pattern {
                ctx: 0,
                src: None,
                tag: None
            })
            .map(|x| x.1),
            Some(7)
        );
        assert_eq!(m.keying(0), Keying::NONE);
    }
}
