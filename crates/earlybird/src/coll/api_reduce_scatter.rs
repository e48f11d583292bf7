//! The reduce-scatters and the scans on [`Comm`]: MPI_Reduce_scatter_block,
//! MPI_Reduce_scatter, MPI_Scan and MPI_Exscan, each blocking, nonblocking and persistent.
#![forbid(unsafe_code)]

use super::api::{collective, reducer_of, Call, CallBufs};
use super::buffers::{place, Dst, Src};
use super::op::Op;
use super::{check_len, Args, Coll};
use crate::comm::Comm;
use crate::error::{Error, ErrorClass};
use std::rc::Rc;

impl Comm {
    /// The arguments of a reduce-scatter: `counts` per rank (MPI_Reduce_scatter), or (`None`)
    /// the receive buffer's length for every rank (MPI_Reduce_scatter_block). `Args.count`
    /// is this rank's block; `rcounts`/`rdispls` place the blocks in the whole vector, whose
    /// size in bytes is `Args.bytes`.
    fn reduce_scatter_call<'b>(
        &self,
        what: &'static str,
        send: Src<'b>,
        recv: Dst<'b>,
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
            let (mut send, mut recv) = (send.0, recv.0);
            let units = place(what, send.as_mut(), Some(&mut recv))?;
            let in_place = send.is_none();
            let overflow = || {
                Error::new(
                    ErrorClass::Count,
                    format!("{what}: the whole vector's element count overflows"),
                )
            };
            let scaled = counts.map(|c| recv.scaled(c)).transpose()?;
            let (mine, total) = match scaled.as_deref() {
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
            match send.as_ref().map(|s| s.len()) {
                Some(l) => check_len(what, "the send buffer", l, total)?,
                None => check_len(what, "the receive buffer (in place)", recv.len(), total)?,
            }
            check_len(what, "the receive buffer", recv.len(), mine)?;
            let reducer = reducer_of(what, send.as_ref(), Some(&recv), op)?;
            let coll = match counts {
                Some(_) => Coll::ReduceScatter,
                None => Coll::ReduceScatterBlock,
            };
            let mut a = Args::new(coll, self.rank, self.size, recv.elem.clone());
            a.count = mine;
            if let Some(c) = scaled {
                let mut displs = Vec::with_capacity(n);
                let mut at = 0;
                for &x in c.iter() {
                    displs.push(at);
                    at += x;
                }
                a.rcounts = Some(c);
                a.rdispls = Some(Rc::from(displs));
            }
            a.bytes = total * recv.elem.packed_size();
            a.commutative = op.is_commutative();
            a.lend_send(calls, send.as_mut());
            a.lend_recv_first(calls, &mut recv, if in_place { total } else { mine });
            a.stage(what, units, &reducer)?;
            Ok((a, Some(reducer)))
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
            <> (send: impl Into<Src<'b>>, recv: impl Into<Dst<'b>>, op: &Op)
            => reduce_scatter_call(send.into(), recv.into(), None, op)
    }

    // ---- reduce_scatter -----------------------------------------------------------------

    collective! {
        /// MPI_Reduce_scatter: combine every rank's `send` (`counts` summed elements) with `op`,
        /// and leave the `counts[i]` elements of block i of the result (blocks in rank order) in
        /// rank i's `recv`, which holds at least that many. With [`IN_PLACE`](super::IN_PLACE),
        /// `recv` holds the whole vector and the result is left at its start.
        reduce_scatter, ireduce_scatter, reduce_scatter_init ("Reduce_scatter", "reduce_scatter")
            <> (send: impl Into<Src<'b>>, recv: impl Into<Dst<'b>>, counts: &[usize], op: &Op)
            => reduce_scatter_call(send.into(), recv.into(), Some(counts), op)
    }

    // ---- scan, exscan -------------------------------------------------------------------

    collective! {
        /// MPI_Scan: rank i's `recv` gets the combination with `op` of the `send` of ranks 0..=i
        /// (association: see the `coll` module doc). `send` may be [`IN_PLACE`](super::IN_PLACE).
        scan, iscan, scan_init ("Scan", "scan")
            <> (send: impl Into<Src<'b>>, recv: impl Into<Dst<'b>>, op: &Op)
            => reduction_call(Coll::Scan, send.into(), recv.into(), op, None)
    }

    collective! {
        /// MPI_Exscan: rank i's `recv` gets the combination with `op` of the `send` of ranks
        /// 0..i; rank 0's `recv` is left as it was (MPI leaves it undefined). `send` may be
        /// [`IN_PLACE`](super::IN_PLACE).
        exscan, iexscan, exscan_init ("Exscan", "exscan")
            <> (send: impl Into<Src<'b>>, recv: impl Into<Dst<'b>>, op: &Op)
            => reduction_call(Coll::Exscan, send.into(), recv.into(), op, None)
    }
}
