//! Ring allgatherv: the blocks travel round the ring, one hop per round (the same steps as
//! the ring allgather, with each rank's own count and displacement).
#![forbid(unsafe_code)]

use super::super::registry::Algorithm;
use super::super::Coll;

pub(in super::super) static ALGO: Algorithm = Algorithm {
    coll: Coll::Allgatherv,
    name: "ring",
    restrictions: "none",
    fits: |_| true,
    run: super::allgather_ring::run,
};
