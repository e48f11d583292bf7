//! Recursive-doubling exclusive scan (MPI_Exscan): as `scan_recursive_doubling`, whose
//! module doc gives the association, without the rank's own contribution. Rank 0's receive
//! buffer is left as it was (MPI leaves it undefined). Any number of ranks, any operation.
#![forbid(unsafe_code)]

use super::super::registry::Algorithm;
use super::super::Coll;

pub(in super::super) static ALGO: Algorithm = Algorithm {
    coll: Coll::Exscan,
    name: "recursive_doubling",
    restrictions: "none",
    fits: |_| true,
    run: |a, s| super::scan_recursive_doubling::prefix(a, s, false),
};
