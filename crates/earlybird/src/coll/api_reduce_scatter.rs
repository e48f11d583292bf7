//! The reduce-scatters and the scans on [`Comm`]: MPI_Reduce_scatter_block,
//! MPI_Reduce_scatter, MPI_Scan and MPI_Exscan, each blocking, nonblocking and persistent.
#![forbid(unsafe_code)]

use super::api::{Call, Src};
use super::op::Op;
use super::{check_len, Args, Coll, Elem};
use crate::comm::Comm;
use crate::datatype::Equivalence;
use crate::error::{Error, ErrorClass, Result};
use crate::request::{Request, Scope};
use crate::sys::lend::Lent;
use std::rc::Rc;

impl Comm {
    /// The arguments of a reduce-scatter: `counts` per rank (MPI_Reduce_scatter), or (`None`)
    /// the receive buffer's length for every rank (MPI_Reduce_scatter_block). `Args.count`
    /// is this rank's block; `rcounts`/`rdispls` place the blocks in the whole vector, whose
    /// size in bytes is `Args.bytes`.
    fn reduce_scatter_call<'a, T: Equivalence>(
        &self,
        what: &'static str,
        send: Src<'a, T>,
        recv: &mut [T],
        counts: Option<&[usize]>,
        op: &Op,
    ) -> Call {
        let n = self.size as usize;
        let me = self.rank as usize;
        let mut writable = false;
        let args = (|| {
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
            let (sb, w) = send.lend();
            writable = w;
            a.send = sb;
            a.recv = Lent::of_elems_mut(&mut recv[..if in_place { total } else { mine }]);
            Ok((a, reducer))
        })();
        Call::reduction(what, args, writable)
    }

    // ---- reduce_scatter_block -----------------------------------------------------------

    /// MPI_Reduce_scatter_block: combine every rank's `send` (size blocks of `recv.len()`
    /// elements) with `op`, and leave block i of the result in rank i's `recv`. With
    /// [`IN_PLACE`](super::IN_PLACE), `recv` holds the whole vector (size equal blocks) and
    /// the result is left in its first block.
    pub fn reduce_scatter_block<'a, T: Equivalence>(
        &self,
        send: impl Into<Src<'a, T>>,
        recv: &mut [T],
        op: &Op,
    ) -> Result<()> {
        self.blocking(self.reduce_scatter_call("reduce_scatter_block", send.into(), recv, None, op))
    }

    /// MPI_Ireduce_scatter_block.
    pub fn ireduce_scatter_block<'s, T: Equivalence>(
        &self,
        s: &'s Scope<'s, '_>,
        send: impl Into<Src<'s, T>>,
        recv: &'s mut [T],
        op: &Op,
    ) -> Result<Request<'s>> {
        self.started(
            self.reduce_scatter_call("ireduce_scatter_block", send.into(), recv, None, op),
            s,
        )
    }

    /// MPI_Reduce_scatter_block_init.
    pub fn reduce_scatter_block_init<'s, T: Equivalence>(
        &self,
        s: &'s Scope<'s, '_>,
        send: impl Into<Src<'s, T>>,
        recv: &'s mut [T],
        op: &Op,
    ) -> Result<Request<'s>> {
        self.inactive(
            self.reduce_scatter_call("reduce_scatter_block_init", send.into(), recv, None, op),
            s,
        )
    }

    // ---- reduce_scatter -----------------------------------------------------------------

    /// MPI_Reduce_scatter: combine every rank's `send` (`counts` summed elements) with `op`,
    /// and leave the `counts[i]` elements of block i of the result (blocks in rank order) in
    /// rank i's `recv`, which holds at least that many. With [`IN_PLACE`](super::IN_PLACE),
    /// `recv` holds the whole vector and the result is left at its start.
    pub fn reduce_scatter<'a, T: Equivalence>(
        &self,
        send: impl Into<Src<'a, T>>,
        recv: &mut [T],
        counts: &[usize],
        op: &Op,
    ) -> Result<()> {
        self.blocking(self.reduce_scatter_call(
            "reduce_scatter",
            send.into(),
            recv,
            Some(counts),
            op,
        ))
    }

    /// MPI_Ireduce_scatter.
    pub fn ireduce_scatter<'s, T: Equivalence>(
        &self,
        s: &'s Scope<'s, '_>,
        send: impl Into<Src<'s, T>>,
        recv: &'s mut [T],
        counts: &[usize],
        op: &Op,
    ) -> Result<Request<'s>> {
        self.started(
            self.reduce_scatter_call("ireduce_scatter", send.into(), recv, Some(counts), op),
            s,
        )
    }

    /// MPI_Reduce_scatter_init.
    pub fn reduce_scatter_init<'s, T: Equivalence>(
        &self,
        s: &'s Scope<'s, '_>,
        send: impl Into<Src<'s, T>>,
        recv: &'s mut [T],
        counts: &[usize],
        op: &Op,
    ) -> Result<Request<'s>> {
        self.inactive(
            self.reduce_scatter_call("reduce_scatter_init", send.into(), recv, Some(counts), op),
            s,
        )
    }

    // ---- scan, exscan -------------------------------------------------------------------

    /// MPI_Scan: rank i's `recv` gets the combination with `op` of the `send` of ranks 0..=i
    /// (association: see the `coll` module doc). `send` may be [`IN_PLACE`](super::IN_PLACE).
    pub fn scan<'a, T: Equivalence>(
        &self,
        send: impl Into<Src<'a, T>>,
        recv: &mut [T],
        op: &Op,
    ) -> Result<()> {
        self.blocking(self.reduction_call("scan", Coll::Scan, send.into(), recv, op, None))
    }

    /// MPI_Iscan.
    pub fn iscan<'s, T: Equivalence>(
        &self,
        s: &'s Scope<'s, '_>,
        send: impl Into<Src<'s, T>>,
        recv: &'s mut [T],
        op: &Op,
    ) -> Result<Request<'s>> {
        self.started(
            self.reduction_call("iscan", Coll::Scan, send.into(), recv, op, None),
            s,
        )
    }

    /// MPI_Scan_init.
    pub fn scan_init<'s, T: Equivalence>(
        &self,
        s: &'s Scope<'s, '_>,
        send: impl Into<Src<'s, T>>,
        recv: &'s mut [T],
        op: &Op,
    ) -> Result<Request<'s>> {
        self.inactive(
            self.reduction_call("scan_init", Coll::Scan, send.into(), recv, op, None),
            s,
        )
    }

    /// MPI_Exscan: rank i's `recv` gets the combination with `op` of the `send` of ranks
    /// 0..i; rank 0's `recv` is left as it was (MPI leaves it undefined). `send` may be
    /// [`IN_PLACE`](super::IN_PLACE).
    pub fn exscan<'a, T: Equivalence>(
        &self,
        send: impl Into<Src<'a, T>>,
        recv: &mut [T],
        op: &Op,
    ) -> Result<()> {
        self.blocking(self.reduction_call("exscan", Coll::Exscan, send.into(), recv, op, None))
    }

    /// MPI_Iexscan.
    pub fn iexscan<'s, T: Equivalence>(
        &self,
        s: &'s Scope<'s, '_>,
        send: impl Into<Src<'s, T>>,
        recv: &'s mut [T],
        op: &Op,
    ) -> Result<Request<'s>> {
        self.started(
            self.reduction_call("iexscan", Coll::Exscan, send.into(), recv, op, None),
            s,
        )
    }

    /// MPI_Exscan_init.
    pub fn exscan_init<'s, T: Equivalence>(
        &self,
        s: &'s Scope<'s, '_>,
        send: impl Into<Src<'s, T>>,
        recv: &'s mut [T],
        op: &Op,
    ) -> Result<Request<'s>> {
        self.inactive(
            self.reduction_call("exscan_init", Coll::Exscan, send.into(), recv, op, None),
            s,
        )
    }
}
