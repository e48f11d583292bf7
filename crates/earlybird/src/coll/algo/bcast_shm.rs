//! Broadcast through the communicator's collective region (`coll/shm.rs`): the root copies
//! the message into its slot and publishes it; every other rank waits for the root's flag
//! and copies the message out. Messages up to `shm::PAYLOAD` bytes, on intracommunicators
//! of one host up to `shm::MAX_RANKS` ranks.
#![forbid(unsafe_code)]

use super::super::registry::Algorithm;
use super::super::sched::{shm_block, ShmStep, Sink};
use super::super::{Args, Coll};

pub(in super::super) static ALGO: Algorithm = Algorithm {
    coll: Coll::Bcast,
    name: crate::coll::api::SHM,
    restrictions:
        "ranks of one host sharing the communicator's collective region; up to 1008 bytes",
    fits: |a| super::shm_fits(a) && a.bytes <= crate::coll::shm::PAYLOAD,
    run,
};

fn run(a: &Args, s: &mut dyn Sink) {
    let msg = a.rblock(0, a.count);
    if a.rank == a.root {
        s.shm(ShmStep::Put(msg));
    } else {
        s.shm(ShmStep::Await(Some(a.root)));
        s.copy(shm_block(a.root, msg.packed_len()), msg);
    }
    s.shm(ShmStep::Done);
}
