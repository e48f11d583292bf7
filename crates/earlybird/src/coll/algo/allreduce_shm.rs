//! Allreduce through the communicator's collective region (`coll/shm.rs`): every rank
//! copies its contribution into its slot and publishes it, waits for every other rank's,
//! and combines them all in the canonical association (`reduce_shm::fold`), so every rank
//! computes the same bits. One round: n - 1 loads of a line and n - 1 combining steps per
//! rank. Contributions up to `shm::PAYLOAD` bytes of a type without gaps, on
//! intracommunicators of one host up to `shm::MAX_RANKS` ranks.
#![forbid(unsafe_code)]

use super::super::registry::Algorithm;
use super::super::sched::{shm_block, ShmStep, Sink};
use super::super::{Args, Coll};

pub(in super::super) static ALGO: Algorithm = Algorithm {
    coll: Coll::Allreduce,
    name: crate::coll::api::SHM,
    restrictions: super::SHM_REDUCTION_RESTRICTIONS,
    fits: super::shm_reduction_fits,
    run,
};

fn run(a: &Args, s: &mut dyn Sink) {
    let bytes = a.count * a.elem.size;
    // In place, the receive buffer's part goes into the slot before the result overwrites it.
    s.shm(ShmStep::Put(a.sblock(0, a.count)));
    s.shm(ShmStep::Await(None));
    let dst = a.elem.run(&a.recv, 0, a.count);
    super::reduce_shm::fold(a, s, &dst, &|r| shm_block(r, bytes));
    s.shm(ShmStep::Done);
}
