//! MPI message matching, free of I/O: posted receives against arriving envelopes.
//!
//! Rules (MPI 4.1 §3.5): an arriving message matches the **first** posted receive (in
//! posting order) whose pattern it satisfies; a newly posted receive matches the **first**
//! unexpected message (in arrival order) it satisfies. Since messages from one sender arrive
//! in the order they were sent, this gives non-overtaking per (sender, receiver, context).
//! The queues are generic over what they carry so the engine and the property test (against
//! a naive reference matcher) share them.
#![forbid(unsafe_code)]

use std::collections::VecDeque;

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

/// Posted and unexpected queues.
#[derive(Debug)]
pub struct Matcher<P, U> {
    posted: VecDeque<(Pattern, P)>,
    unexpected: VecDeque<(Envelope, U)>,
}

impl<P, U> Default for Matcher<P, U> {
    fn default() -> Self {
        Matcher {
            posted: VecDeque::with_capacity(64),
            unexpected: VecDeque::with_capacity(64),
        }
    }
}

impl<P, U> Matcher<P, U> {
    /// A message arrived: take the first posted receive that accepts it.
    #[inline(always)]
    pub fn take_posted(&mut self, env: &Envelope) -> Option<P> {
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
        self.unexpected.push_back((env, u));
    }

    /// A receive is posted: take the first unexpected message it accepts...
    #[inline(always)]
    pub fn take_unexpected(&mut self, pat: &Pattern) -> Option<(Envelope, U)> {
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
        self.posted.push_back((pat, p));
    }

    /// The first unexpected message a probe with `pat` would see.
    pub fn peek_unexpected(&self, pat: &Pattern) -> Option<&(Envelope, U)> {
        self.unexpected.iter().find(|(e, _)| pat.accepts(e))
    }

    /// Remove a posted receive (cancel). True if it was still posted.
    pub fn remove_posted(&mut self, pred: impl Fn(&P) -> bool) -> Option<P> {
        let i = self.posted.iter().position(|(_, p)| pred(p))?;
        self.posted.remove(i).map(|(_, p)| p)
    }

    /// Remove an unexpected message (a sender's cancel). True if it was still unmatched.
    pub fn remove_unexpected(
        &mut self,
        pred: impl Fn(&Envelope, &U) -> bool,
    ) -> Option<(Envelope, U)> {
        let i = self.unexpected.iter().position(|(e, u)| pred(e, u))?;
        self.unexpected.remove(i)
    }

    pub fn posted_len(&self) -> usize {
        self.posted.len()
    }

    pub fn unexpected_len(&self) -> usize {
        self.unexpected.len()
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

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        #[test]
        fn matcher_agrees_with_reference(events in proptest::collection::vec(ev(), 0..200)) {
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
                        if let Some(p) = r.arrive(env, id) { pairs_r.push(p); }
                    }
                    Ev::Recv { src, tag, ctx } => {
                        let pat = Pattern { ctx, src, tag };
                        match m.take_unexpected(&pat) {
                            Some((_, mid)) => pairs_m.push((id, mid)),
                            None => m.post(pat, id),
                        }
                        if let Some(p) = r.post(pat, id) { pairs_r.push(p); }
                    }
                }
            }
            prop_assert_eq!(pairs_m, pairs_r);
        }
    }
}
