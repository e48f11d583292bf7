//! Binomial-tree scatter, the gather's tree run backwards: rank `vr` (relative to the root)
//! receives the blocks of its subtree from its parent in one message, keeps the first and
//! passes each child its subtree's, farthest first. The root sends straight from its send
//! buffer when it is rank 0, else from scratch it first fills in relative order. ceil(log2
//! n) rounds: for small messages.
#![forbid(unsafe_code)]

use super::super::registry::Algorithm;
use super::super::sched::Sink;
use super::super::{Args, Coll};
use super::gather_binomial::{actual, blocks, children, wrapped, Node};

pub(in super::super) static ALGO: Algorithm = Algorithm {
    coll: Coll::Scatter,
    name: "binomial",
    restrictions: "none",
    fits: |_| true,
    run,
};

fn run(a: &Args, s: &mut dyn Sink) {
    let me = Node::of(a);
    if me.leaf() {
        s.recv(me.parent, a.rblock(0, a.count));
        s.wait();
        return;
    }
    // The root 0 scatters straight from its send buffer; the others through packed scratch.
    let (buf, e) = match &a.send {
        Some(sb) if a.root == 0 => (sb.clone(), a.selem.clone()),
        _ => {
            let e = if me.vr == 0 { &a.selem } else { &a.elem };
            let p = e.packed();
            (s.scratch(me.sub as usize * a.count * p.size), p)
        }
    };
    if me.vr != 0 {
        s.recv(me.parent, blocks(a, &e, &buf, 0, me.sub));
        s.wait();
    } else if a.root != 0 {
        let send = a.send.as_ref().expect("the root's send buffer");
        for (user, rel) in wrapped(a, (send, &a.selem), &buf) {
            s.copy(user, rel);
        }
    }
    for (child, k) in children(me.vr, a.size) {
        s.send(actual(a, child), blocks(a, &e, &buf, child - me.vr, k));
    }
    if me.vr != 0 {
        s.copy(blocks(a, &e, &buf, 0, 1), a.rblock(0, a.count));
    } else if !a.recv.is_empty() {
        s.copy(a.sblock_of(a.root), a.rblock(0, a.count));
    }
    s.wait();
}
