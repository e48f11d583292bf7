//! Barrier in the communicator's collective region (`coll/shm.rs`): every rank publishes
//! its slot's flag and waits until it sees every other rank's. One store and n - 1 loads
//! of a cache line per rank, no message. Intracommunicators of one host, up to
//! `shm::MAX_RANKS` ranks.
#![forbid(unsafe_code)]

use super::super::registry::Algorithm;
use super::super::sched::{Block, ShmStep, Sink};
use super::super::{Args, Coll};

pub(in super::super) static ALGO: Algorithm = Algorithm {
    coll: Coll::Barrier,
    name: crate::coll::api::SHM,
    restrictions: "ranks of one host sharing the communicator's collective region",
    fits: super::shm_fits,
    run,
};

fn run(_: &Args, s: &mut dyn Sink) {
    s.shm(ShmStep::Put(Block::EMPTY));
    s.shm(ShmStep::Await(None));
    s.shm(ShmStep::Done);
}
