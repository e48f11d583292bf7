//! Bruck's alltoall (Bruck, Ho, Kipnis, Upfal and Weathersby, 1997): every rank lines its
//! blocks up in scratch rotated by its rank (slot j holds the block for rank `r + j`); in
//! round k (k = 1, 2, 4, ...) it sends every slot whose index has bit k set, packed into one
//! message, to rank `r + k` and puts what rank `r - k` sends in the same slots. After
//! ceil(log2 n) rounds slot j holds the block from rank `r - j`. Any number of ranks; fewer,
//! larger messages than the other algorithms at the price of moving each block up to log2 n
//! times, so best for small blocks on many ranks.
#![forbid(unsafe_code)]

use super::super::registry::Algorithm;
use super::super::sched::Sink;
use super::super::{Args, Coll};
use super::exchange::packed;

pub(in super::super) static ALGO: Algorithm = Algorithm {
    coll: Coll::Alltoall,
    name: "bruck",
    restrictions: "none",
    fits: |_| true,
    run,
};

fn run(a: &Args, s: &mut dyn Sink) {
    let (r, n) = (a.rank, a.size);
    let nu = n as usize;
    // Bytes of one block as a message.
    let b = a.rblock(0, a.count).packed_len();
    let sig = a.elem.sig;
    let tmp = s.scratch(nu * b);
    let slot = |j: usize| packed(&tmp, j * b, b, sig);
    // In place, every block is read here before anything arrives.
    for j in 0..n {
        s.copy(a.sblock_of((r + j) % n), slot(j as usize));
    }
    if n > 1 {
        let most = nu / 2 + 1;
        let sbuf = s.scratch(most * b);
        let rbuf = s.scratch(most * b);
        let mut k = 1;
        while k < nu {
            let slots: Vec<usize> = (1..nu).filter(|j| j & k != 0).collect();
            let m = slots.len();
            for (q, &j) in slots.iter().enumerate() {
                s.copy(slot(j), packed(&sbuf, q * b, b, sig));
            }
            s.send((r + k as i32) % n, packed(&sbuf, 0, m * b, sig));
            s.recv((r - k as i32 + n) % n, packed(&rbuf, 0, m * b, sig));
            s.wait();
            for (q, &j) in slots.iter().enumerate() {
                s.copy(packed(&rbuf, q * b, b, sig), slot(j));
            }
            k <<= 1;
        }
    }
    for j in 0..n {
        s.copy(slot(j as usize), a.rblock_of((r - j + n) % n));
    }
}
