//! Collectives on intercommunicators (MPI 4.1 §6.2.2), one algorithm each: every member
//! talks to the remote group directly, and never to its own group. Rooted collectives go
//! between the root (root argument MPI_ROOT) and each member of the remote group; the other
//! members of the root's group (root argument PROC_NULL) take no part. The all-to-all
//! kinds post a receive from and a send to every remote rank at once. A reduction combines
//! the remote group's contributions in its rank order, `c0 op (c1 op (... op c_{m-1}))`, so
//! non-commutative operations see MPI's order.
//!
//! One round each, any group sizes. Linear in the remote group's size: intercommunicator
//! collectives are for coupling two groups, not for the hot loop of either.
//!
//! Reduce-scatter with per-rank counts: a group does not know the other group's counts, so
//! each member sends its whole input vector to every remote member, which reduces only its
//! own part of what it receives.
#![forbid(unsafe_code)]

use super::super::registry::Algorithm;
use super::super::sched::{Block, Sink};
use super::super::{Args, Coll};
use super::exchange::incoming;
use crate::status::{PROC_NULL, ROOT};

macro_rules! inter {
    ($name:ident, $coll:expr, $run:expr) => {
        pub(in super::super) static $name: Algorithm = Algorithm {
            coll: $coll,
            name: "inter_linear",
            restrictions: "intercommunicators only",
            fits: |a| a.remote.is_some(),
            run: $run,
        };
    };
}

inter!(BARRIER, Coll::Barrier, barrier);
inter!(BCAST, Coll::Bcast, bcast);
inter!(GATHER, Coll::Gather, gather);
inter!(GATHERV, Coll::Gatherv, gather);
inter!(SCATTER, Coll::Scatter, scatter);
inter!(SCATTERV, Coll::Scatterv, scatter);
inter!(ALLGATHER, Coll::Allgather, allgather);
inter!(ALLGATHERV, Coll::Allgatherv, allgather);
inter!(ALLTOALL, Coll::Alltoall, alltoall);
inter!(ALLTOALLV, Coll::Alltoallv, alltoall);
inter!(ALLTOALLW, Coll::Alltoallw, alltoall);
inter!(REDUCE, Coll::Reduce, reduce);
inter!(ALLREDUCE, Coll::Allreduce, allreduce);
inter!(REDUCE_SCATTER, Coll::ReduceScatter, reduce_scatter);
inter!(
    REDUCE_SCATTER_BLOCK,
    Coll::ReduceScatterBlock,
    reduce_scatter
);

/// The remote group's size.
fn remote(a: &Args) -> i32 {
    a.remote.expect("an intercommunicator call")
}

/// Every member enters by sending to every remote member and leaves once every remote
/// member has entered.
fn barrier(a: &Args, s: &mut dyn Sink) {
    for i in 0..remote(a) {
        s.recv(i, Block::EMPTY);
    }
    for i in 0..remote(a) {
        s.send(i, Block::EMPTY);
    }
    s.wait();
}

fn bcast(a: &Args, s: &mut dyn Sink) {
    match a.root {
        ROOT => (0..remote(a)).for_each(|i| s.send(i, a.rblock(0, a.count))),
        PROC_NULL => {}
        r => s.recv(r, a.rblock(0, a.count)),
    }
    s.wait();
}

/// Gather and gatherv: the root receives remote rank `i`'s block at its place.
fn gather(a: &Args, s: &mut dyn Sink) {
    match a.root {
        ROOT => (0..remote(a)).for_each(|i| s.recv(i, a.rblock_of(i))),
        PROC_NULL => {}
        r => s.send(r, a.sblock(0, a.count)),
    }
    s.wait();
}

/// Scatter and scatterv: the root sends remote rank `i` its block.
fn scatter(a: &Args, s: &mut dyn Sink) {
    match a.root {
        ROOT => (0..remote(a)).for_each(|i| s.send(i, a.sblock_of(i))),
        PROC_NULL => {}
        r => s.recv(r, a.rblock(0, a.count)),
    }
    s.wait();
}

/// Allgather and allgatherv: this member's block to every remote member; remote rank `i`'s
/// block to its place.
fn allgather(a: &Args, s: &mut dyn Sink) {
    for i in 0..remote(a) {
        s.recv(i, a.rblock_of(i));
    }
    for i in 0..remote(a) {
        s.send(i, a.sblock(0, a.count));
    }
    s.wait();
}

/// Alltoall, v and w: block `i` to remote rank `i`, remote rank `i`'s block to place `i`.
fn alltoall(a: &Args, s: &mut dyn Sink) {
    for i in 0..remote(a) {
        s.recv(i, incoming(a, i as usize));
    }
    for i in 0..remote(a) {
        let out = match &a.wblocks {
            Some(w) => w[i as usize].0.clone(),
            None => a.sblock_of(i),
        };
        s.send(i, out);
    }
    s.wait();
}

/// Receive `n` elements from every remote member and combine them, in remote rank order,
/// into `dst`; `part` picks the `count` elements of each received vector that count (from
/// element `part`).
fn receive_and_combine(a: &Args, s: &mut dyn Sink, n: usize, part: usize, dst: Block) {
    let m = remote(a) as usize;
    let raw: Vec<Block> = (0..m).map(|_| s.scratch(n * a.elem.size)).collect();
    for (i, r) in raw.iter().enumerate() {
        s.recv(i as i32, a.elem.block(r, 0, n));
    }
    s.wait();
    let piece = |r: &Block| a.elem.block(r, part, a.count);
    s.copy(piece(&raw[m - 1]), dst.clone());
    for r in raw[..m - 1].iter().rev() {
        s.reduce(piece(r), dst.clone());
    }
}

/// The root combines the remote group's vectors; the remote group sends them.
fn reduce(a: &Args, s: &mut dyn Sink) {
    match a.root {
        ROOT => receive_and_combine(a, s, a.count, 0, a.rblock(0, a.count)),
        PROC_NULL => {}
        r => {
            s.send(r, a.sblock(0, a.count));
            s.wait();
        }
    }
}

/// Every member sends its vector to every remote member and combines the remote group's.
fn allreduce(a: &Args, s: &mut dyn Sink) {
    for i in 0..remote(a) {
        s.send(i, a.sblock(0, a.count));
    }
    receive_and_combine(a, s, a.count, 0, a.rblock(0, a.count));
}

/// Reduce-scatter (block and v): send remote rank `i` its part (`sblock_of`: the whole
/// vector for the v form), then combine this member's part of what the remote group sent.
fn reduce_scatter(a: &Args, s: &mut dyn Sink) {
    for i in 0..remote(a) {
        s.send(i, a.sblock_of(i));
    }
    let (n, part) = match &a.rcounts {
        Some(c) => (c.iter().sum(), c[..a.rank as usize].iter().sum()),
        None => (a.count, 0),
    };
    receive_and_combine(a, s, n, part, a.rblock(0, a.count));
}
