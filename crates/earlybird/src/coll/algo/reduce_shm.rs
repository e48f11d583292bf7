//! Reduce through the communicator's collective region (`coll/shm.rs`): every rank but the
//! root copies its contribution into its slot and publishes it; the root waits for them all
//! and combines them in the canonical association (see [`fold`]), its own taken from its
//! buffer. Contributions up to `shm::PAYLOAD` bytes of a type without gaps, on
//! intracommunicators of one host up to `shm::MAX_RANKS` ranks.
#![forbid(unsafe_code)]

use super::super::registry::Algorithm;
use super::super::sched::{shm_block, Block, ShmStep, Sink};
use super::super::{Args, Coll};

pub(in super::super) static ALGO: Algorithm = Algorithm {
    coll: Coll::Reduce,
    name: crate::coll::api::SHM,
    restrictions: super::SHM_REDUCTION_RESTRICTIONS,
    fits: super::shm_reduction_fits,
    run,
};

fn run(a: &Args, s: &mut dyn Sink) {
    let bytes = a.count * a.elem.size;
    if a.rank != a.root {
        s.shm(ShmStep::Put(a.sblock(0, a.count)));
        s.shm(ShmStep::Done);
        return;
    }
    s.shm(ShmStep::Await(None));
    // In place, the receive buffer holds the root's part and takes the result: a copy first.
    let own = super::own_contribution(a, s);
    let dst = a.elem.run(&a.recv, 0, a.count);
    fold(a, s, &dst, &|r| {
        if r == a.root {
            own.clone()
        } else {
            shm_block(r, bytes)
        }
    });
    s.shm(ShmStep::Done);
}

/// Combine the contributions `part(r)` of every rank `r` into `dst` in the association of
/// the binomial tree over rank order (`coll/mod.rs`, "Reductions are reproducible"): the
/// result over `[lo, hi)` is `[lo, lo + 2^(k-1)) op [lo + 2^(k-1), hi)`, `2^k` the least
/// power of two at least `hi - lo`. The same bits as the message-based algorithms, whatever
/// the operation. Scratch: one run per level of the tree, none for two ranks.
pub(super) fn fold(a: &Args, s: &mut dyn Sink, dst: &Block, part: &dyn Fn(i32) -> Block) {
    fold_with(a.size, dst, part, &mut Steps { a, s });
}

/// What [`fold_with`] combines the contributions with: the steps of a schedule, or the
/// loans of a call that runs straight through the region (`coll/shm_blocking.rs`).
pub(in super::super) trait Folder {
    /// A run of the collective's elements.
    type Part: Clone;
    /// `dst = src`.
    fn copy(&mut self, src: Self::Part, dst: Self::Part);
    /// `dst = src op dst`.
    fn reduce(&mut self, src: Self::Part, dst: Self::Part);
    /// A run of the collective's count of elements for a partial result.
    fn scratch(&mut self) -> Self::Part;
}

/// [`fold`] as a schedule's steps.
struct Steps<'a, 's> {
    a: &'a Args,
    s: &'s mut dyn Sink,
}

impl Folder for Steps<'_, '_> {
    type Part = Block;

    fn copy(&mut self, src: Block, dst: Block) {
        self.s.copy(src, dst);
    }

    fn reduce(&mut self, src: Block, dst: Block) {
        self.s.reduce(src, dst);
    }

    fn scratch(&mut self) -> Block {
        let raw = self.s.scratch(self.a.count * self.a.elem.size);
        self.a.elem.run(&raw, 0, self.a.count)
    }
}

/// [`fold`] over the `size` ranks' contributions `part(r)`, through `f`.
pub(in super::super) fn fold_with<F: Folder>(
    size: i32,
    dst: &F::Part,
    part: &dyn Fn(i32) -> F::Part,
    f: &mut F,
) {
    let mut levels: Vec<Option<F::Part>> = Vec::new();
    span(f, 0, size, dst, part, 0, &mut levels);
}

fn span<F: Folder>(
    f: &mut F,
    lo: i32,
    hi: i32,
    dst: &F::Part,
    part: &dyn Fn(i32) -> F::Part,
    depth: usize,
    levels: &mut Vec<Option<F::Part>>,
) {
    if hi - lo == 1 {
        f.copy(part(lo), dst.clone());
        return;
    }
    let half = ((hi - lo) as u32).next_power_of_two() as i32 / 2;
    let mid = lo + half;
    span(f, mid, hi, dst, part, depth + 1, levels);
    let left = if half == 1 {
        part(lo)
    } else {
        if levels.len() <= depth {
            levels.resize(depth + 1, None);
        }
        let t = match &levels[depth] {
            Some(t) => t.clone(),
            None => {
                let t = f.scratch();
                levels[depth] = Some(t.clone());
                t
            }
        };
        span(f, lo, mid, &t, part, depth + 1, levels);
        t
    };
    f.reduce(left, dst.clone());
}
