//! What the all-to-all and neighbourhood algorithms share: each peer's outgoing and incoming
//! block, and the packed copies an in-place all-to-all sends from.
#![forbid(unsafe_code)]

use super::super::sched::Sink;
use super::super::Args;
use crate::coll::sched::Block;
use crate::sys::sig::Sig;

/// The block received from rank `i`: alltoallw's receive view of it, else the (v form's)
/// receive block.
pub(super) fn incoming(a: &Args, i: usize) -> Block {
    match &a.wblocks {
        Some(w) => w[i].1.clone(),
        None => a.rblock_of(i as i32),
    }
}

/// The block sent to rank `i` as the call gave it (in place: the receive block).
fn given(a: &Args, i: usize) -> Block {
    match &a.wblocks {
        Some(w) => w[i].0.clone(),
        None => a.sblock_of(i as i32),
    }
}

/// The message for every rank `0..n`. In place, every block but this rank's own is first
/// copied, packed, into scratch (a copy step before any receive is posted), so that what
/// arrives may overwrite the receive buffer; this rank's own block stays where it is.
pub(super) fn outgoing(a: &Args, s: &mut dyn Sink, n: usize) -> Vec<Block> {
    let blocks: Vec<Block> = (0..n).map(|i| given(a, i)).collect();
    if a.send.is_some() {
        return blocks;
    }
    let me = a.rank as usize;
    let total = blocks
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != me)
        .map(|(_, b)| b.packed_len())
        .sum();
    let buf = s.scratch(total);
    let mut off = 0;
    blocks
        .into_iter()
        .enumerate()
        .map(|(i, b)| {
            if i == me {
                return b;
            }
            let len = b.packed_len();
            let c = packed(&buf, off, len, b.sig());
            off += len;
            s.copy(b, c.clone());
            c
        })
        .collect()
}

/// Bytes `off..off + len` of the scratch buffer `buf` as a message of signature `sig`.
pub(super) fn packed(buf: &Block, off: usize, len: usize, sig: Sig) -> Block {
    buf.sub(off, len, None).with_sig(sig)
}

/// This rank's own block: copied from the send side (in place it is already there).
pub(super) fn keep_own(a: &Args, s: &mut dyn Sink, out: &[Block]) {
    let me = a.rank as usize;
    if a.send.is_some() {
        s.copy(out[me].clone(), incoming(a, me));
    }
}
