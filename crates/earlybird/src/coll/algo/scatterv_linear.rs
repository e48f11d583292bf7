//! Linear scatterv: the root sends every rank its block, from its displacement, at once (the
//! same steps as the linear scatter).
#![forbid(unsafe_code)]

use super::super::registry::Algorithm;
use super::super::Coll;

pub(in super::super) static ALGO: Algorithm = Algorithm {
    coll: Coll::Scatterv,
    name: "linear",
    restrictions: "none",
    fits: |_| true,
    run: super::scatter_linear::run,
};
