//! Linear gatherv: every rank sends its block straight to the root, which receives them all
//! at once at their displacements (the same steps as the linear gather).
#![forbid(unsafe_code)]

use super::super::registry::Algorithm;
use super::super::Coll;

pub(in super::super) static ALGO: Algorithm = Algorithm {
    coll: Coll::Gatherv,
    name: "linear",
    restrictions: "none",
    fits: |_| true,
    run: super::gather_linear::run,
};
