//! Recursive-doubling scan (MPI_Scan): in round k every rank swaps the partial result of its
//! aligned block of `2^k` ranks with rank `r xor 2^k` (when there is one) and combines; a
//! block received from lower ranks also joins the rank's prefix. ceil(log2 n) rounds, any
//! number of ranks, any operation.
//!
//! # Association
//!
//! Cut the ranks below `r` into aligned blocks by the set bits of `r`, highest first:
//! `B_1 = [0, 2^a)`, `B_2 = [2^a, 2^a + 2^b)`, ... (`a > b > ...`), and let `T(B)` be the
//! canonical binomial reduction over block `B` (see the module doc of `coll`). Then
//!
//! * scan at `r`   = `T(B_1) op (T(B_2) op ( ... op (T(B_m) op x_r)))`,
//! * exscan at `r` = `T(B_1) op (T(B_2) op ( ... op T(B_m)))` (`exscan_recursive_doubling`).
//!
//! Every scan algorithm of earlybird associates this way, so the same ranks and inputs give
//! the same bits on every call.
#![forbid(unsafe_code)]

use super::super::registry::Algorithm;
use super::super::sched::Sink;
use super::super::{Args, Coll};
use super::msg;

pub(in super::super) static ALGO: Algorithm = Algorithm {
    coll: Coll::Scan,
    name: "recursive_doubling",
    restrictions: "none",
    fits: |_| true,
    run: |a, s| prefix(a, s, true),
};

/// The scan (`inclusive`) or the exscan into the receive buffer (left alone at rank 0 of
/// an exscan).
pub(super) fn prefix(a: &Args, s: &mut dyn Sink, inclusive: bool) {
    let (r, n) = (a.rank, a.size);
    let bytes = a.count * a.elem.size;
    let res = a.elem.run(&a.recv, 0, a.count);
    if inclusive && a.send.is_some() {
        s.copy(a.sblock(0, a.count), a.rblock(0, a.count));
    }
    if n == 1 {
        return;
    }
    // The partial result over this rank's aligned block, and room for the partner's.
    let mut total = s.scratch(bytes);
    let mut tmp = s.scratch(bytes);
    s.copy(a.sblock(0, a.count), msg(a, &total));
    let mut have = inclusive;
    let mut d = 1;
    while d < n {
        let partner = r ^ d;
        if partner < n {
            s.send(partner, msg(a, &total));
            s.recv(partner, msg(a, &tmp));
            s.wait();
            let more = d << 1 < n;
            if partner < r {
                if have {
                    s.reduce(tmp.clone(), res.clone());
                } else {
                    s.copy(msg(a, &tmp), msg(a, &res));
                    have = true;
                }
                if more {
                    s.reduce(tmp.clone(), total.clone());
                }
            } else if more {
                // total op theirs, into the received buffer, which becomes the total.
                s.reduce(total.clone(), tmp.clone());
                std::mem::swap(&mut total, &mut tmp);
            }
        }
        d <<= 1;
    }
}
