//! The reduce-scatters and the scans on [`Comm`]: MPI_Reduce_scatter_block,
//! MPI_Reduce_scatter, MPI_Scan and MPI_Exscan, each blocking, nonblocking and persistent.
#![forbid(unsafe_code)]

use super::api::{collective, Call, CallBufs, Src};
use super::op::Op;
use super::{check_len, Args, Coll, Elem};
use crate::comm::Comm;
use crate::datatype::Equivalence;
use crate::error::{Error, ErrorClass};
use std::rc::Rc;

impl Comm {
    /// The arguments of a reduce-scatter: `counts` per rank (MPI_Reduce_scatter), or (`None`)
    /// the receive buffer's length for every rank (MPI_Reduce_scatter_block). `Args.count`
    /// is this rank's block; `rcounts`/`rdispls` place the blocks in the whole vector, whose
    /// size in bytes is `Args.bytes`.
    fn reduce_scatter_call<'b, T: Equivalence>(
        &self,
        what: &'static str,
        send: Src<'b, T>,
        recv: &'b mut [T],
        counts: Option<&[usize]>,
        op: &Op,
    ) -> Call<'b> {
        if self.is_inter() {
            return self.inter_reduce_scatter_call(what, send, recv, counts, op);
        }
        let n = self.size as usize;
        let me = self.rank as usize;
        let mut bufs = CallBufs::default();
        let calls = &mut bufs;
        let args = (move || {
            let recv = recv;
            let send = send;
            let in_place = send.len().is_none();
            let overflow = || {
                Error::new(
                    ErrorClass::Count,
                    format!("{what}: the whole vector's element count overflows"),
                )
            };
            let (mine, total) = match counts {
                Some(c) => {
                    if c.len() != n {
                        return Err(Error::new(
                            ErrorClass::Count,
                            format!(
                                "{what}: {} receive counts given for a communicator of {n}",
                                c.len()
                            ),
                        ));
                    }
                    let total = c
                        .iter()
                        .try_fold(0usize, |t, &x| t.checked_add(x))
                        .ok_or_else(overflow)?;
                    (c[me], total)
                }
                None if in_place => {
                    if !recv.len().is_multiple_of(n) {
                        return Err(Error::new(
                            ErrorClass::Count,
                            format!(
                                "{what}: in place, the receive buffer's {} elements are not {n} equal blocks",
                                recv.len()
                            ),
                        ));
                    }
                    (recv.len() / n, recv.len())
                }
                None => (recv.len(), recv.len().checked_mul(n).ok_or_else(overflow)?),
            };
            match send.len() {
                Some(l) => check_len(what, "the send buffer", l, total)?,
                None => check_len(what, "the receive buffer (in place)", recv.len(), total)?,
            }
            check_len(what, "the receive buffer", recv.len(), mine)?;
            let reducer = super::reducer::<T>(op)?;
            let coll = match counts {
                Some(_) => Coll::ReduceScatter,
                None => Coll::ReduceScatterBlock,
            };
            let mut a = Args::new(coll, self.rank, self.size, Elem::of::<T>()?);
            a.count = mine;
            if let Some(c) = counts {
                let mut displs = Vec::with_capacity(n);
                let mut at = 0;
                for &x in c {
                    displs.push(at);
                    at += x;
                }
                a.rcounts = Some(Rc::from(c));
                a.rdispls = Some(Rc::from(displs));
            }
            a.bytes = total * std::mem::size_of::<T>();
            a.commutative = op.is_commutative();
            a.send = calls.send(send);
            a.recv = calls.recv(&mut recv[..if in_place { total } else { mine }]);
            Ok((a, reducer))
        })();
        Call::reduction(what, args, bufs)
    }

    // ---- reduce_scatter_block -----------------------------------------------------------

    collective! {
        /// MPI_Reduce_scatter_block: combine every rank's `send` (size blocks of `recv.len()`
        /// elements) with `op`, and leave block i of the result in rank i's `recv`. With
        /// [`IN_PLACE`](super::IN_PLACE), `recv` holds the whole vector (size equal blocks) and
        /// the result is left in its first block.
        reduce_scatter_block, ireduce_scatter_block, reduce_scatter_block_init ("Reduce_scatter_block", "reduce_scatter_block")
            <T: Equivalence> (send: impl Into<Src<'b, T>>, recv: &'b mut [T], op: &Op)
            => reduce_scatter_call(send.into(), recv, None, op)
    }

    // ---- reduce_scatter -----------------------------------------------------------------

    collective! {
        /// MPI_Reduce_scatter: combine every rank's `send` (`counts` summed elements) with `op`,
        /// and leave the `counts[i]` elements of block i of the result (blocks in rank order) in
        /// rank i's `recv`, which holds at least that many. With [`IN_PLACE`](super::IN_PLACE),
        /// `recv` holds the whole vector and the result is left at its start.
        reduce_scatter, ireduce_scatter, reduce_scatter_init ("Reduce_scatter", "reduce_scatter")
            <T: Equivalence> (send: impl Into<Src<'b, T>>, recv: &'b mut [T], counts: &[usize], op: &Op)
            => reduce_scatter_call(send.into(), recv, Some(counts), op)
    }

    // ---- scan, exscan -------------------------------------------------------------------

    collective! {
        /// MPI_Scan: rank i's `recv` gets the combination with `op` of the `send` of ranks 0..=i
        /// (association: see the `coll` module doc). `send` may be [`IN_PLACE`](super::IN_PLACE).
        scan, iscan, scan_init ("Scan", "scan")
            <T: Equivalence> (send: impl Into<Src<'b, T>>, recv: &'b mut [T], op: &Op)
            => reduction_call(Coll::Scan, send.into(), recv, op, None)
    }

    collective! {
        /// MPI_Exscan: rank i's `recv` gets the combination with `op` of the `send` of ranks
        /// 0..i; rank 0's `recv` is left as it was (MPI leaves it undefined). `send` may be
        /// [`IN_PLACE`](super::IN_PLACE).
        exscan, iexscan, exscan_init ("Exscan", "exscan")
            <T: Equivalence> (send: impl Into<Src<'b, T>>, recv: &'b mut [T], op: &Op)
            => reduction_call(Coll::Exscan, send.into(), recv, op, None)
    }
}
