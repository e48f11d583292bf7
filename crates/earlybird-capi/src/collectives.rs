//! The collectives, each in its three forms (blocking `MPI_X`, nonblocking `MPI_IX`,
//! persistent `MPI_X_init`) from one description: a function that turns the C arguments into
//! the Rust API's (buffers as views of the caller's memory, `MPI_IN_PLACE`, counts and
//! displacements, the root), and the three methods of `earlybird::Comm` that take them.
//!
//! On an intercommunicator the sizes that shape the buffers are the remote group's, and the
//! root is `MPI_ROOT` in the root's group (`MPI_PROC_NULL` for its other members), as MPI
//! says; the Rust API gets the same arguments.

use crate::abi::{self, Handle};
use crate::array;
use crate::state::{self, buf_in, buf_out, by_elem, ok_or_code, slice_in, slice_out, with_comm};
use crate::widths::{self, Width};
use earlybird::{Comm, Dst, DstOrInPlace, Error, ErrorClass, Op, Src};
use std::ffi::{c_int, c_void};

type R<T> = earlybird::Result<T>;

/// The ranks a rooted or all-to-all collective's buffers are shaped by: the group's size, or
/// on an intercommunicator the remote group's.
fn peers(c: &Comm) -> R<c_int> {
    if c.is_inter() {
        c.remote_size()
    } else {
        Ok(c.size())
    }
}

/// Whether this rank is the root, the one whose receive (or send) buffer holds every block.
fn is_root(c: &Comm, root: c_int) -> bool {
    if c.is_inter() {
        root == abi::ROOT
    } else {
        c.rank() == root
    }
}

/// Whether this process's non-root buffer takes part in a rooted collective: on an
/// intercommunicator the root's group (MPI_ROOT at the root, MPI_PROC_NULL elsewhere) only
/// receives or only sends, and the other group's processes do the rest.
fn in_other_group(c: &Comm, root: c_int) -> bool {
    !(c.is_inter() && (root == abi::ROOT || root == abi::PROC_NULL))
}

/// A send argument of no data.
fn no_src() -> Src<'static> {
    Src::from(&[][..] as &[u8])
}

fn in_place(p: *const c_void) -> bool {
    p as usize == abi::IN_PLACE
}

/// Whom an all-to-all collective's blocks come from and go to.
#[derive(Clone, Copy)]
enum Over {
    /// Every rank (of the remote group on an intercommunicator).
    Group,
    /// The topology's neighbours: blocks from the sources, to the destinations.
    Neighbors,
}

/// The number of blocks received and sent.
fn blocks_of(c: &Comm, over: Over) -> R<(c_int, c_int)> {
    match over {
        Over::Group => peers(c).map(|p| (p, p)),
        Over::Neighbors => {
            let n = c.neighbors()?;
            Ok((n.sources.len() as c_int, n.destinations.len() as c_int))
        }
    }
}

/// An argument the call does not use here: no elements of MPI_DATATYPE_NULL (a receive
/// buffer off the root, for example, where programs pass the null datatype).
fn unused(count: c_int, dt: Handle) -> bool {
    count == 0 && dt == abi::DATATYPE_NULL
}

/// Whether a buffer of `dt` may go to a reduction by `op` as a slice of its element type:
/// only under a predefined operation (a user function is told the caller's datatype, which
/// a slice does not carry), and not for the types `by_elem` takes as bytes (MPI_BYTE, the
/// char types, MPI_PACKED, MPI_C_BOOL), whose slice would reduce signed chars as unsigned and
/// admit operations MPI does not define on them. Moving data, a slice always serves (see
/// [`src`]).
fn reducible_slice(dt: Handle, op: Handle) -> bool {
    abi::op(op).is_some() && !abi::basic_type(dt).is_some_and(state::taken_as_bytes)
}

/// A send argument: MPI_IN_PLACE, or `count` elements of `dt` at `buf`. With `as_slice`, a
/// basic type's elements (at an address aligned for them) go as a slice of the element
/// type, the Rust API's own path with no datatype object made for the call: a slice and the
/// typed view of a basic type carry the same bytes under the same signature (the byte types
/// as unchecked bytes, like MPI_BYTE).
///
/// # Safety
/// Unless `buf` is MPI_IN_PLACE, it holds `count` elements of `dt` for as long as the
/// operation runs (MPI's contract).
unsafe fn src(buf: *const c_void, count: c_int, dt: Handle, as_slice: bool) -> R<Src<'static>> {
    if in_place(buf) {
        return Ok(earlybird::IN_PLACE.into());
    }
    if unused(count, dt) {
        return Ok(no_src());
    }
    if as_slice {
        by_elem!(dt, T => {
            // SAFETY: the function's contract, here `T`s.
            if let Some(b) = unsafe { slice_in::<T>(buf, count) }? {
                return Ok(b.into());
            }
        });
    }
    // SAFETY: the function's contract.
    Ok(unsafe { buf_in(buf, count, dt) }?.into())
}

/// A receive argument (`as_slice` as for [`src`]).
///
/// # Safety
/// `buf` has room for `count` elements of `dt` for as long as the operation runs.
unsafe fn dst(buf: *mut c_void, count: c_int, dt: Handle, as_slice: bool) -> R<Dst<'static>> {
    if unused(count, dt) {
        return Ok(Dst::from(Vec::<u8>::new().leak()));
    }
    if as_slice {
        by_elem!(dt, T => {
            // SAFETY: the function's contract, here `T`s.
            if let Some(b) = unsafe { slice_out::<T>(buf, count) }? {
                return Ok(b.into());
            }
        });
    }
    // SAFETY: the function's contract.
    Ok(unsafe { buf_out(buf, count, dt) }?.into())
}

/// A scatter's receive argument: MPI_IN_PLACE (at the root), or a receive buffer.
///
/// # Safety
/// As for [`dst`], unless `buf` is MPI_IN_PLACE.
unsafe fn dst_or_in_place(buf: *mut c_void, count: c_int, dt: Handle) -> R<DstOrInPlace<'static>> {
    if in_place(buf) {
        return Ok(earlybird::IN_PLACE.into());
    }
    by_elem!(dt, T => {
        // SAFETY: the function's contract, here `T`s.
        if let Some(b) = unsafe { slice_out::<T>(buf, count) }? {
            return Ok(b.into());
        }
    });
    // SAFETY: the function's contract.
    Ok(unsafe { buf_out(buf, count, dt) }?.into())
}

/// `count` blocks of `n` elements, as a count (MPI_ERR_COUNT past `int`).
fn blocks(n: c_int, count: c_int) -> R<c_int> {
    n.checked_mul(count)
        .ok_or_else(|| Error::new(ErrorClass::Count, format!("{count} blocks of {n} elements")))
}

/// A count as the `int` the buffer conversions take: MPI_ERR_COUNT past `INT_MAX` (the most
/// earlybird's C interface moves per buffer argument for now).
fn count<N: Width>(n: N) -> R<c_int> {
    let n = n.wide();
    c_int::try_from(n).map_err(|_| {
        Error::new(
            ErrorClass::Count,
            format!("count {n} is beyond INT_MAX, the most earlybird's C interface moves per buffer argument"),
        )
    })
}

/// `n` entries at `p` as lengths (MPI_ERR_COUNT if one is negative).
///
/// # Safety
/// `p` points to `n` entries (or `n` is 0).
unsafe fn lengths<N: Width>(p: *const N, n: c_int) -> R<Vec<usize>> {
    // SAFETY: the function's contract.
    widths::counts(unsafe { array(p, n) }?)
}

/// The counts and displacements of a v-collective, `n` of each (MPI_ERR_COUNT for a negative
/// count, MPI_ERR_ARG for a negative displacement or a null array).
///
/// # Safety
/// `counts` and `displs` each point to `n` entries.
unsafe fn vspec<N: Width, D: Width>(
    n: c_int,
    counts: *const N,
    displs: *const D,
) -> R<(Vec<usize>, Vec<usize>)> {
    // SAFETY: the function's contract.
    let ds = unsafe { array(displs, n) }?;
    let d = ds
        .iter()
        .map(|&x| {
            usize::try_from(x.wide()).map_err(|_| {
                Error::new(
                    ErrorClass::Arg,
                    format!("displacement {} is negative", x.wide()),
                )
            })
        })
        .collect::<R<Vec<_>>>()?;
    // SAFETY: as above.
    Ok((unsafe { lengths(counts, n) }?, d))
}

/// Elements a v-collective's buffer reaches: the largest displacement plus its count.
fn reach(counts: &[usize], displs: &[usize]) -> R<c_int> {
    let n = counts
        .iter()
        .zip(displs)
        .map(|(c, d)| c + d)
        .max()
        .unwrap_or(0);
    c_int::try_from(n)
        .map_err(|_| Error::new(ErrorClass::Count, format!("a buffer of {n} elements")))
}

/// MPI_Alltoallw's blocks: per rank, (count, byte displacement, datatype), and the bytes
/// they reach from the buffer: `(start, len)` from its address. For MPI_BOTTOM (`bottom`: the
/// displacements and datatypes hold absolute addresses) the bytes start at the lowest one,
/// and each block is moved to be relative to it, as one element of a datatype of its own.
///
/// # Safety
/// The three arrays each hold `n` entries.
unsafe fn wspec<N: Width, D: Width>(
    n: c_int,
    counts: *const N,
    displs: *const D,
    types: *const Handle,
    bottom: bool,
) -> R<(Specs, isize, usize)> {
    // SAFETY: the function's contract.
    let (cs, ds, ts) = unsafe { (lengths(counts, n)?, array(displs, n)?, array(types, n)?) };
    let mut blocks = Vec::with_capacity(cs.len());
    // Each block's first and last bytes (from the buffer), for those with data.
    let (mut lo, mut hi) = (isize::MAX, 0isize);
    for ((&count, &d), &t) in cs.iter().zip(ds).zip(ts) {
        let d: i64 = d.wide();
        let disp = isize::try_from(d)
            .ok()
            .filter(|&x| x >= 0 || bottom)
            .ok_or_else(|| Error::new(ErrorClass::Arg, format!("displacement {d} is negative")))?;
        let dt = state::type_of(t)?;
        if count > 0 && dt.size() > 0 {
            let extent = dt.extent();
            let (tlb, textent) = dt.get_true_extent();
            let reps = (count as isize - 1) * extent;
            lo = lo.min(disp + tlb + reps.min(0));
            hi = hi.max(disp + tlb + textent + reps.max(0));
        }
        blocks.push((count, disp, dt));
    }
    if !bottom {
        // Displacements checked not negative above.
        let specs = blocks
            .into_iter()
            .map(|(c, d, t)| (c, d as usize, t))
            .collect();
        return Ok((specs, 0, usize::try_from(hi).unwrap_or(0)));
    }
    if lo > hi {
        // No data: nothing to move (a null buffer of no bytes).
        let specs = blocks.into_iter().map(|(c, _, t)| (c, 0, t)).collect();
        return Ok((specs, 0, 0));
    }
    let moved = blocks
        .into_iter()
        .map(|(count, disp, dt)| {
            if count == 0 || dt.size() == 0 {
                return Ok((count, 0, dt));
            }
            let m = earlybird::Datatype::hindexed(&[count], &[disp - lo], &dt)?;
            m.commit()?;
            Ok((1, 0, m))
        })
        .collect::<R<Specs>>()?;
    Ok((moved, lo, (hi - lo) as usize))
}

/// The caller's bytes `[buf, buf + len)` as a slice for the run of an operation.
///
/// # Safety
/// They are readable (and for `_mut`, writable and touched by nothing else) for as long as
/// the operation runs.
unsafe fn bytes(buf: *const c_void, len: usize) -> R<&'static [u8]> {
    if len == 0 {
        return Ok(&[]);
    }
    if buf.is_null() {
        return Err(Error::new(
            ErrorClass::Buffer,
            "a null buffer with data in it",
        ));
    }
    // SAFETY: the function's contract.
    Ok(unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), len) })
}

/// As [`bytes`], to write.
///
/// # Safety
/// As for [`bytes`].
unsafe fn bytes_mut(buf: *mut c_void, len: usize) -> R<&'static mut [u8]> {
    if len == 0 {
        return Ok(&mut []);
    }
    if buf.is_null() {
        return Err(Error::new(
            ErrorClass::Buffer,
            "a null buffer with data in it",
        ));
    }
    // SAFETY: the function's contract.
    Ok(unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), len) })
}

/// A nonblocking or persistent collective: `f` makes its request on the communicator behind
/// `comm` in the endless scope; the request's handle into `*req` (null or a handle to write,
/// MPI's contract).
pub(crate) fn started(
    comm: Handle,
    req: *mut Handle,
    f: impl FnOnce(&Comm, &'static earlybird::Scope<'static, 'static>) -> R<earlybird::Request<'static>>,
) -> c_int {
    let r = with_comm(comm, |c| {
        Ok(state::pending(
            f(c, state::scope()?)?,
            comm,
            state::Kept::Slice,
        ))
    });
    // SAFETY: the caller's contract (see above).
    unsafe { state::request_out(req, r) }
}

/// Whether the blocking collective `name` (the Rust method's) runs under
/// MPI_THREAD_MULTIPLE as the core's blocking call with its waits set aside
/// (`earlybird::waits_aside`), rather than as its nonblocking form and a wait: those whose
/// blocking form may take another algorithm than the nonblocking one (the barrier, the
/// small bcast and the small allreduce run straight through the collective region,
/// `coll/shm_blocking.rs`), so that a process under MULTIPLE meets a process that is not,
/// or a call made from one of the program's callbacks.
fn runs_aside_in_core(name: &str) -> bool {
    matches!(name, "barrier" | "bcast" | "allreduce")
}

/// The three forms of each collective. `args(c, ...)` converts the C arguments (it runs
/// inside the call, on the communicator `c`); `=> (...)` are the Rust method's arguments after
/// the scope, in terms of the names the conversion bound.
macro_rules! collectives {
    ($(
        $b:ident / $pb:ident, $i:ident / $pi:ident, $init:ident / $pinit:ident
        ($($a:ident : $t:ty),*)
        let ($($out:pat),*) = $args:ident($($x:expr),*);
        $mb:ident, $mi:ident, $minit:ident ($($call:expr),*)
    )*) => {$(
        mpi! {
            fn $b / $pb($($a: $t,)* comm: Handle) {
                if state::waits_let_go() {
                    state::prepare_blocking_collective(comm);
                    if runs_aside_in_core(stringify!($mb)) {
                        return ok_or_code(state::with_comm_aside(comm, |c| {
                            // SAFETY: as below.
                            #[allow(unused_parens)]
                            let ($($out),*) = unsafe { $args(c, $($x),*) }?;
                            c.$mb($($call),*)
                        }));
                    }
                    // SAFETY: the nonblocking form's contract, its request completed here.
                    return state::via_request(|r| unsafe { $pi($($a,)* comm, r) }, state::IGNORED);
                }
                ok_or_code(with_comm(comm, |c| {
                    // SAFETY: the C caller's buffers and arrays, as MPI's contract says.
                    #[allow(unused_parens)]
                    let ($($out),*) = unsafe { $args(c, $($x),*) }?;
                    c.$mb($($call),*)
                }))
            }

            fn $i / $pi($($a: $t,)* comm: Handle, req: *mut Handle) {
                started(comm, req, |c, s| {
                    // SAFETY: as above; the buffers are left alone until the request completes.
                    #[allow(unused_parens)]
                    let ($($out),*) = unsafe { $args(c, $($x),*) }?;
                    c.$mi(s, $($call),*)
                })
            }

            fn $init / $pinit($($a: $t,)* comm: Handle, info: Handle, req: *mut Handle) {
                // MPI 4.1 lets info hints be ignored; the handle must still name an info object.
                if let Err(e) = crate::comms::info_of(info) {
                    return ok_or_code(with_comm(comm, |_| Err::<(), _>(e)));
                }
                started(comm, req, |c, s| {
                    // SAFETY: as above, for the request's whole life.
                    #[allow(unused_parens)]
                    let ($($out),*) = unsafe { $args(c, $($x),*) }?;
                    c.$minit(s, $($call),*)
                })
            }
        }
    )*};
}

/// No arguments.
///
/// # Safety
/// Nothing to trust.
unsafe fn none(_c: &Comm) -> R<()> {
    Ok(())
}

/// MPI_Bcast's.
///
/// # Safety
/// `buf` holds `count` elements of `dt`.
unsafe fn bcast_args(
    _c: &Comm,
    buf: *mut c_void,
    count: c_int,
    dt: Handle,
    root: c_int,
) -> R<(Dst<'static>, i32)> {
    // SAFETY: the function's contract.
    Ok((unsafe { dst(buf, count, dt, true) }?, abi::rank_in(root)))
}

/// A reduction's: the send (or MPI_IN_PLACE), the receive buffer (at the root only for
/// MPI_Reduce, `root` being `Some` then) and the operation.
///
/// # Safety
/// The buffers hold `count` elements of `dt`.
unsafe fn reduction_args(
    c: &Comm,
    sbuf: *const c_void,
    rbuf: *mut c_void,
    count: c_int,
    dt: Handle,
    op: Handle,
    root: Option<c_int>,
) -> R<(Src<'static>, Dst<'static>, Op, i32)> {
    let slice = reducible_slice(dt, op);
    let op = state::op_of(op)?;
    let here = root.is_none_or(|r| is_root(c, r));
    // On an intercommunicator only the root group's MPI_ROOT receives, and only the other
    // group sends.
    let sends = root.is_none_or(|r| in_other_group(c, r));
    let s = if sends {
        // SAFETY: the function's contract.
        unsafe { src(sbuf, count, dt, slice) }?
    } else {
        no_src()
    };
    // SAFETY: as above.
    let r = unsafe { dst(rbuf, if here { count } else { 0 }, dt, slice) }?;
    Ok((s, r, op, root.map_or(0, abi::rank_in)))
}

/// MPI_Gather's: every block at the root.
///
/// # Safety
/// MPI_Gather's buffers.
#[allow(clippy::too_many_arguments)]
unsafe fn gather_args(
    c: &Comm,
    sbuf: *const c_void,
    scount: c_int,
    sdt: Handle,
    rbuf: *mut c_void,
    rcount: c_int,
    rdt: Handle,
    root: c_int,
) -> R<(Src<'static>, Dst<'static>, i32)> {
    let n = if is_root(c, root) {
        blocks(rcount, peers(c)?)?
    } else {
        0
    };
    let sends = in_other_group(c, root);
    let s = if sends {
        // SAFETY: the function's contract.
        unsafe { src(sbuf, scount, sdt, true) }?
    } else {
        no_src()
    };
    // SAFETY: as above.
    Ok((s, unsafe { dst(rbuf, n, rdt, true) }?, abi::rank_in(root)))
}

/// MPI_Gatherv's: the counts and displacements matter at the root only.
///
/// # Safety
/// MPI_Gatherv's buffers and arrays.
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
unsafe fn gatherv_args<S: Width, N: Width, D: Width>(
    c: &Comm,
    sbuf: *const c_void,
    scount: S,
    sdt: Handle,
    rbuf: *mut c_void,
    rcounts: *const N,
    displs: *const D,
    rdt: Handle,
    root: c_int,
) -> R<(Src<'static>, Dst<'static>, Vec<usize>, Vec<usize>, i32)> {
    let (counts, displs) = if is_root(c, root) {
        // SAFETY: the function's contract (the arrays at the root only).
        unsafe { vspec(peers(c)?, rcounts, displs) }?
    } else {
        (vec![], vec![])
    };
    let sends = in_other_group(c, root);
    let s = if sends {
        // SAFETY: as above.
        unsafe { src(sbuf, count(scount)?, sdt, true) }?
    } else {
        no_src()
    };
    // SAFETY: as above.
    let r = unsafe { dst(rbuf, reach(&counts, &displs)?, rdt, true) }?;
    Ok((s, r, counts, displs, abi::rank_in(root)))
}

/// MPI_Scatter's: every block at the root.
///
/// # Safety
/// MPI_Scatter's buffers.
#[allow(clippy::too_many_arguments)]
unsafe fn scatter_args(
    c: &Comm,
    sbuf: *const c_void,
    scount: c_int,
    sdt: Handle,
    rbuf: *mut c_void,
    rcount: c_int,
    rdt: Handle,
    root: c_int,
) -> R<(Src<'static>, DstOrInPlace<'static>, i32)> {
    let n = if is_root(c, root) {
        blocks(scount, peers(c)?)?
    } else {
        0
    };
    let receives = in_other_group(c, root);
    // SAFETY: the function's contract.
    let s = unsafe { src(sbuf, n, sdt, true) }?;
    let r = if receives {
        // SAFETY: as above.
        unsafe { dst_or_in_place(rbuf, rcount, rdt) }?
    } else {
        DstOrInPlace::from(Vec::<u8>::new().leak())
    };
    Ok((s, r, abi::rank_in(root)))
}

/// MPI_Scatterv's.
///
/// # Safety
/// MPI_Scatterv's buffers and arrays.
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
unsafe fn scatterv_args<S: Width, N: Width, D: Width>(
    c: &Comm,
    sbuf: *const c_void,
    scounts: *const N,
    displs: *const D,
    sdt: Handle,
    rbuf: *mut c_void,
    rcount: S,
    rdt: Handle,
    root: c_int,
) -> R<(
    Src<'static>,
    Vec<usize>,
    Vec<usize>,
    DstOrInPlace<'static>,
    i32,
)> {
    let (counts, displs) = if is_root(c, root) {
        // SAFETY: the function's contract (the arrays at the root only).
        unsafe { vspec(peers(c)?, scounts, displs) }?
    } else {
        (vec![], vec![])
    };
    let receives = in_other_group(c, root);
    // SAFETY: as above.
    let s = unsafe { src(sbuf, reach(&counts, &displs)?, sdt, true) }?;
    let r = if receives {
        // SAFETY: as above.
        unsafe { dst_or_in_place(rbuf, count(rcount)?, rdt) }?
    } else {
        DstOrInPlace::from(Vec::<u8>::new().leak())
    };
    Ok((s, counts, displs, r, abi::rank_in(root)))
}

/// MPI_Allgather's and MPI_Alltoall's, and their neighbourhood forms (`each` = the send
/// buffer holds a block per destination).
///
/// # Safety
/// The buffers as MPI's contract says.
#[allow(clippy::too_many_arguments)]
unsafe fn all_args(
    c: &Comm,
    sbuf: *const c_void,
    scount: c_int,
    sdt: Handle,
    rbuf: *mut c_void,
    rcount: c_int,
    rdt: Handle,
    each: bool,
    over: Over,
) -> R<(Src<'static>, Dst<'static>)> {
    let (from, to) = blocks_of(c, over)?;
    let sn = if each { blocks(scount, to)? } else { scount };
    // SAFETY: the function's contract.
    let s = unsafe { src(sbuf, sn, sdt, true) }?;
    // SAFETY: as above.
    let r = unsafe { dst(rbuf, blocks(rcount, from)?, rdt, true) }?;
    Ok((s, r))
}

/// MPI_Allgatherv's and MPI_Neighbor_allgatherv's.
///
/// # Safety
/// The buffers and arrays as MPI's contract says.
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
unsafe fn allgatherv_args<S: Width, N: Width, D: Width>(
    c: &Comm,
    sbuf: *const c_void,
    scount: S,
    sdt: Handle,
    rbuf: *mut c_void,
    rcounts: *const N,
    displs: *const D,
    rdt: Handle,
    over: Over,
) -> R<(Src<'static>, Dst<'static>, Vec<usize>, Vec<usize>)> {
    let (from, _) = blocks_of(c, over)?;
    // SAFETY: the function's contract.
    let (counts, displs) = unsafe { vspec(from, rcounts, displs) }?;
    // SAFETY: as above.
    let s = unsafe { src(sbuf, count(scount)?, sdt, true) }?;
    // SAFETY: as above.
    let r = unsafe { dst(rbuf, reach(&counts, &displs)?, rdt, true) }?;
    Ok((s, r, counts, displs))
}

/// MPI_Alltoallv's and MPI_Neighbor_alltoallv's.
///
/// # Safety
/// The buffers and arrays as MPI's contract says (the send arrays are ignored with
/// MPI_IN_PLACE).
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
unsafe fn alltoallv_args<N: Width, D: Width>(
    c: &Comm,
    sbuf: *const c_void,
    scounts: *const N,
    sdispls: *const D,
    sdt: Handle,
    rbuf: *mut c_void,
    rcounts: *const N,
    rdispls: *const D,
    rdt: Handle,
    over: Over,
) -> R<(
    Src<'static>,
    Vec<usize>,
    Vec<usize>,
    Dst<'static>,
    Vec<usize>,
    Vec<usize>,
)> {
    let (from, to) = blocks_of(c, over)?;
    // SAFETY: the function's contract.
    let (rc, rd) = unsafe { vspec(from, rcounts, rdispls) }?;
    let (s, sc, sd) = if in_place(sbuf) {
        (Src::from(earlybird::IN_PLACE), vec![], vec![])
    } else {
        // SAFETY: as above.
        let (sc, sd) = unsafe { vspec(to, scounts, sdispls) }?;
        // SAFETY: as above.
        (unsafe { src(sbuf, reach(&sc, &sd)?, sdt, true) }?, sc, sd)
    };
    // SAFETY: as above.
    let r = unsafe { dst(rbuf, reach(&rc, &rd)?, rdt, true) }?;
    Ok((s, sc, sd, r, rc, rd))
}

/// The specs of MPI_Alltoallw as the Rust API takes them (borrowing the datatypes).
type Specs = Vec<(usize, usize, earlybird::Datatype)>;

fn wspecs(v: &Specs) -> Vec<earlybird::WSpec<'_>> {
    v.iter().map(|(n, d, t)| (*n, *d, t)).collect()
}

/// MPI_Alltoallw's and MPI_Neighbor_alltoallw's (displacements in bytes, `int`s for the one,
/// `MPI_Aint`s for the other): the buffers as byte slices reaching every block.
///
/// # Safety
/// The buffers and arrays as MPI's contract says.
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
unsafe fn alltoallw_args<N: Width, D: Width>(
    c: &Comm,
    sbuf: *const c_void,
    scounts: *const N,
    sdispls: *const D,
    stypes: *const Handle,
    rbuf: *mut c_void,
    rcounts: *const N,
    rdispls: *const D,
    rtypes: *const Handle,
    over: Over,
) -> R<(Src<'static>, Specs, Dst<'static>, Specs)> {
    let (from, to) = blocks_of(c, over)?;
    // SAFETY: the function's contract.
    let (rs, rstart, rlen) = unsafe { wspec(from, rcounts, rdispls, rtypes, rbuf.is_null()) }?;
    let (s, ss) = if in_place(sbuf) {
        (Src::from(earlybird::IN_PLACE), vec![])
    } else {
        // SAFETY: as above.
        let (ss, sstart, slen) = unsafe { wspec(to, scounts, sdispls, stypes, sbuf.is_null()) }?;
        // SAFETY: as above; `wspec` says where the blocks' bytes start.
        (
            Src::from(unsafe { bytes(sbuf.wrapping_byte_offset(sstart), slen) }?),
            ss,
        )
    };
    // SAFETY: as above.
    let r = Dst::from(unsafe { bytes_mut(rbuf.wrapping_byte_offset(rstart), rlen) }?);
    Ok((s, ss, r, rs))
}

/// MPI_Reduce_scatter_block's: the send buffer holds a block per rank.
///
/// # Safety
/// The buffers as MPI's contract says.
unsafe fn reduce_scatter_block_args(
    c: &Comm,
    sbuf: *const c_void,
    rbuf: *mut c_void,
    count: c_int,
    dt: Handle,
    op: Handle,
) -> R<(Src<'static>, Dst<'static>, Op)> {
    let slice = reducible_slice(dt, op);
    let op = state::op_of(op)?;
    // `count` blocks per process of the local group (on an intercommunicator too: each block
    // is the receive count of the remote process it goes to, which MPI makes the same).
    let whole = blocks(count, c.size())?;
    // With MPI_IN_PLACE the receive buffer holds the whole vector.
    let rn = if in_place(sbuf) { whole } else { count };
    // SAFETY: the function's contract.
    Ok((
        unsafe { src(sbuf, whole, dt, slice) }?,
        unsafe { dst(rbuf, rn, dt, slice) }?,
        op,
    ))
}

/// MPI_Reduce_scatter's.
///
/// # Safety
/// The buffers and the counts as MPI's contract says.
unsafe fn reduce_scatter_args<N: Width>(
    c: &Comm,
    sbuf: *const c_void,
    rbuf: *mut c_void,
    rcounts: *const N,
    dt: Handle,
    op: Handle,
) -> R<(Src<'static>, Dst<'static>, Vec<usize>, Op)> {
    let slice = reducible_slice(dt, op);
    let op = state::op_of(op)?;
    // SAFETY: one count per rank (MPI's contract).
    let counts = unsafe { lengths(rcounts, c.size()) }?;
    let total = c_int::try_from(counts.iter().sum::<usize>()).map_err(|_| {
        Error::new(
            ErrorClass::Count,
            "reduce_scatter: more than INT_MAX elements in all",
        )
    })?;
    let mine = counts.get(c.rank() as usize).copied().unwrap_or(0) as c_int;
    let rn = if in_place(sbuf) { total } else { mine };
    // SAFETY: the function's contract.
    Ok((
        unsafe { src(sbuf, total, dt, slice) }?,
        unsafe { dst(rbuf, rn, dt, slice) }?,
        counts,
        op,
    ))
}

collectives! {
    MPI_Neighbor_allgather / PMPI_Neighbor_allgather, MPI_Ineighbor_allgather / PMPI_Ineighbor_allgather, MPI_Neighbor_allgather_init / PMPI_Neighbor_allgather_init
    (sbuf: *const c_void, scount: c_int, sdt: Handle, rbuf: *mut c_void, rcount: c_int, rdt: Handle)
    let (s, r) = all_args(sbuf, scount, sdt, rbuf, rcount, rdt, false, Over::Neighbors);
    neighbor_allgather, ineighbor_allgather, neighbor_allgather_init (s, r)

    MPI_Neighbor_allgatherv / PMPI_Neighbor_allgatherv, MPI_Ineighbor_allgatherv / PMPI_Ineighbor_allgatherv, MPI_Neighbor_allgatherv_init / PMPI_Neighbor_allgatherv_init
    (sbuf: *const c_void, scount: c_int, sdt: Handle, rbuf: *mut c_void, rcounts: *const c_int, displs: *const c_int, rdt: Handle)
    let (s, r, counts, displs) = allgatherv_args(sbuf, scount, sdt, rbuf, rcounts, displs, rdt, Over::Neighbors);
    neighbor_allgatherv, ineighbor_allgatherv, neighbor_allgatherv_init (s, r, &counts, &displs)

    MPI_Neighbor_alltoall / PMPI_Neighbor_alltoall, MPI_Ineighbor_alltoall / PMPI_Ineighbor_alltoall, MPI_Neighbor_alltoall_init / PMPI_Neighbor_alltoall_init
    (sbuf: *const c_void, scount: c_int, sdt: Handle, rbuf: *mut c_void, rcount: c_int, rdt: Handle)
    let (s, r) = all_args(sbuf, scount, sdt, rbuf, rcount, rdt, true, Over::Neighbors);
    neighbor_alltoall, ineighbor_alltoall, neighbor_alltoall_init (s, r)

    MPI_Neighbor_alltoallv / PMPI_Neighbor_alltoallv, MPI_Ineighbor_alltoallv / PMPI_Ineighbor_alltoallv, MPI_Neighbor_alltoallv_init / PMPI_Neighbor_alltoallv_init
    (sbuf: *const c_void, scounts: *const c_int, sdispls: *const c_int, sdt: Handle, rbuf: *mut c_void, rcounts: *const c_int, rdispls: *const c_int, rdt: Handle)
    let (s, sc, sd, r, rc, rd) = alltoallv_args(sbuf, scounts, sdispls, sdt, rbuf, rcounts, rdispls, rdt, Over::Neighbors);
    neighbor_alltoallv, ineighbor_alltoallv, neighbor_alltoallv_init (s, &sc, &sd, r, &rc, &rd)

    MPI_Neighbor_alltoallw / PMPI_Neighbor_alltoallw, MPI_Ineighbor_alltoallw / PMPI_Ineighbor_alltoallw, MPI_Neighbor_alltoallw_init / PMPI_Neighbor_alltoallw_init
    (sbuf: *const c_void, scounts: *const c_int, sdispls: *const isize, stypes: *const Handle, rbuf: *mut c_void, rcounts: *const c_int, rdispls: *const isize, rtypes: *const Handle)
    let (s, ss, r, rs) = alltoallw_args(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, Over::Neighbors);
    neighbor_alltoallw, ineighbor_alltoallw, neighbor_alltoallw_init (s, &wspecs(&ss), r, &wspecs(&rs))
}

collectives! {
    MPI_Barrier / PMPI_Barrier, MPI_Ibarrier / PMPI_Ibarrier, MPI_Barrier_init / PMPI_Barrier_init
    ()
    let (()) = none();
    barrier, ibarrier, barrier_init ()

    MPI_Bcast / PMPI_Bcast, MPI_Ibcast / PMPI_Ibcast, MPI_Bcast_init / PMPI_Bcast_init
    (buf: *mut c_void, count: c_int, dt: Handle, root: c_int)
    let (b, root) = bcast_args(buf, count, dt, root);
    bcast, ibcast, bcast_init (b, root)

    MPI_Reduce / PMPI_Reduce, MPI_Ireduce / PMPI_Ireduce, MPI_Reduce_init / PMPI_Reduce_init
    (sbuf: *const c_void, rbuf: *mut c_void, count: c_int, dt: Handle, op: Handle, root: c_int)
    let (s, r, op, root) = reduction_args(sbuf, rbuf, count, dt, op, Some(root));
    reduce, ireduce, reduce_init (s, r, &op, root)

    MPI_Allreduce / PMPI_Allreduce, MPI_Iallreduce / PMPI_Iallreduce, MPI_Allreduce_init / PMPI_Allreduce_init
    (sbuf: *const c_void, rbuf: *mut c_void, count: c_int, dt: Handle, op: Handle)
    let (s, r, op, _) = reduction_args(sbuf, rbuf, count, dt, op, None);
    allreduce, iallreduce, allreduce_init (s, r, &op)

    MPI_Scan / PMPI_Scan, MPI_Iscan / PMPI_Iscan, MPI_Scan_init / PMPI_Scan_init
    (sbuf: *const c_void, rbuf: *mut c_void, count: c_int, dt: Handle, op: Handle)
    let (s, r, op, _) = reduction_args(sbuf, rbuf, count, dt, op, None);
    scan, iscan, scan_init (s, r, &op)

    MPI_Exscan / PMPI_Exscan, MPI_Iexscan / PMPI_Iexscan, MPI_Exscan_init / PMPI_Exscan_init
    (sbuf: *const c_void, rbuf: *mut c_void, count: c_int, dt: Handle, op: Handle)
    let (s, r, op, _) = reduction_args(sbuf, rbuf, count, dt, op, None);
    exscan, iexscan, exscan_init (s, r, &op)

    MPI_Gather / PMPI_Gather, MPI_Igather / PMPI_Igather, MPI_Gather_init / PMPI_Gather_init
    (sbuf: *const c_void, scount: c_int, sdt: Handle, rbuf: *mut c_void, rcount: c_int, rdt: Handle, root: c_int)
    let (s, r, root) = gather_args(sbuf, scount, sdt, rbuf, rcount, rdt, root);
    gather, igather, gather_init (s, r, root)

    MPI_Gatherv / PMPI_Gatherv, MPI_Igatherv / PMPI_Igatherv, MPI_Gatherv_init / PMPI_Gatherv_init
    (sbuf: *const c_void, scount: c_int, sdt: Handle, rbuf: *mut c_void, rcounts: *const c_int, displs: *const c_int, rdt: Handle, root: c_int)
    let (s, r, counts, displs, root) = gatherv_args(sbuf, scount, sdt, rbuf, rcounts, displs, rdt, root);
    gatherv, igatherv, gatherv_init (s, r, &counts, &displs, root)

    MPI_Scatter / PMPI_Scatter, MPI_Iscatter / PMPI_Iscatter, MPI_Scatter_init / PMPI_Scatter_init
    (sbuf: *const c_void, scount: c_int, sdt: Handle, rbuf: *mut c_void, rcount: c_int, rdt: Handle, root: c_int)
    let (s, r, root) = scatter_args(sbuf, scount, sdt, rbuf, rcount, rdt, root);
    scatter, iscatter, scatter_init (s, r, root)

    MPI_Scatterv / PMPI_Scatterv, MPI_Iscatterv / PMPI_Iscatterv, MPI_Scatterv_init / PMPI_Scatterv_init
    (sbuf: *const c_void, scounts: *const c_int, displs: *const c_int, sdt: Handle, rbuf: *mut c_void, rcount: c_int, rdt: Handle, root: c_int)
    let (s, counts, displs, r, root) = scatterv_args(sbuf, scounts, displs, sdt, rbuf, rcount, rdt, root);
    scatterv, iscatterv, scatterv_init (s, &counts, &displs, r, root)

    MPI_Allgather / PMPI_Allgather, MPI_Iallgather / PMPI_Iallgather, MPI_Allgather_init / PMPI_Allgather_init
    (sbuf: *const c_void, scount: c_int, sdt: Handle, rbuf: *mut c_void, rcount: c_int, rdt: Handle)
    let (s, r) = all_args(sbuf, scount, sdt, rbuf, rcount, rdt, false, Over::Group);
    allgather, iallgather, allgather_init (s, r)

    MPI_Allgatherv / PMPI_Allgatherv, MPI_Iallgatherv / PMPI_Iallgatherv, MPI_Allgatherv_init / PMPI_Allgatherv_init
    (sbuf: *const c_void, scount: c_int, sdt: Handle, rbuf: *mut c_void, rcounts: *const c_int, displs: *const c_int, rdt: Handle)
    let (s, r, counts, displs) = allgatherv_args(sbuf, scount, sdt, rbuf, rcounts, displs, rdt, Over::Group);
    allgatherv, iallgatherv, allgatherv_init (s, r, &counts, &displs)

    MPI_Alltoall / PMPI_Alltoall, MPI_Ialltoall / PMPI_Ialltoall, MPI_Alltoall_init / PMPI_Alltoall_init
    (sbuf: *const c_void, scount: c_int, sdt: Handle, rbuf: *mut c_void, rcount: c_int, rdt: Handle)
    let (s, r) = all_args(sbuf, scount, sdt, rbuf, rcount, rdt, true, Over::Group);
    alltoall, ialltoall, alltoall_init (s, r)

    MPI_Alltoallv / PMPI_Alltoallv, MPI_Ialltoallv / PMPI_Ialltoallv, MPI_Alltoallv_init / PMPI_Alltoallv_init
    (sbuf: *const c_void, scounts: *const c_int, sdispls: *const c_int, sdt: Handle, rbuf: *mut c_void, rcounts: *const c_int, rdispls: *const c_int, rdt: Handle)
    let (s, sc, sd, r, rc, rd) = alltoallv_args(sbuf, scounts, sdispls, sdt, rbuf, rcounts, rdispls, rdt, Over::Group);
    alltoallv, ialltoallv, alltoallv_init (s, &sc, &sd, r, &rc, &rd)

    MPI_Alltoallw / PMPI_Alltoallw, MPI_Ialltoallw / PMPI_Ialltoallw, MPI_Alltoallw_init / PMPI_Alltoallw_init
    (sbuf: *const c_void, scounts: *const c_int, sdispls: *const c_int, stypes: *const Handle, rbuf: *mut c_void, rcounts: *const c_int, rdispls: *const c_int, rtypes: *const Handle)
    let (s, ss, r, rs) = alltoallw_args(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, Over::Group);
    alltoallw, ialltoallw, alltoallw_init (s, &wspecs(&ss), r, &wspecs(&rs))

    MPI_Reduce_scatter_block / PMPI_Reduce_scatter_block, MPI_Ireduce_scatter_block / PMPI_Ireduce_scatter_block, MPI_Reduce_scatter_block_init / PMPI_Reduce_scatter_block_init
    (sbuf: *const c_void, rbuf: *mut c_void, count: c_int, dt: Handle, op: Handle)
    let (s, r, op) = reduce_scatter_block_args(sbuf, rbuf, count, dt, op);
    reduce_scatter_block, ireduce_scatter_block, reduce_scatter_block_init (s, r, &op)

    MPI_Reduce_scatter / PMPI_Reduce_scatter, MPI_Ireduce_scatter / PMPI_Ireduce_scatter, MPI_Reduce_scatter_init / PMPI_Reduce_scatter_init
    (sbuf: *const c_void, rbuf: *mut c_void, rcounts: *const c_int, dt: Handle, op: Handle)
    let (s, r, counts, op) = reduce_scatter_args(sbuf, rbuf, rcounts, dt, op);
    reduce_scatter, ireduce_scatter, reduce_scatter_init (s, r, &counts, &op)
}

// The large-count forms of the collectives with count arrays: the same conversions, on
// `MPI_Count` counts and `MPI_Aint` displacements.
collectives! {
    MPI_Gatherv_c / PMPI_Gatherv_c, MPI_Igatherv_c / PMPI_Igatherv_c, MPI_Gatherv_init_c / PMPI_Gatherv_init_c
    (sbuf: *const c_void, scount: i64, sdt: Handle, rbuf: *mut c_void, rcounts: *const i64, displs: *const isize, rdt: Handle, root: c_int)
    let (s, r, counts, displs, root) = gatherv_args(sbuf, scount, sdt, rbuf, rcounts, displs, rdt, root);
    gatherv, igatherv, gatherv_init (s, r, &counts, &displs, root)

    MPI_Scatterv_c / PMPI_Scatterv_c, MPI_Iscatterv_c / PMPI_Iscatterv_c, MPI_Scatterv_init_c / PMPI_Scatterv_init_c
    (sbuf: *const c_void, scounts: *const i64, displs: *const isize, sdt: Handle, rbuf: *mut c_void, rcount: i64, rdt: Handle, root: c_int)
    let (s, counts, displs, r, root) = scatterv_args(sbuf, scounts, displs, sdt, rbuf, rcount, rdt, root);
    scatterv, iscatterv, scatterv_init (s, &counts, &displs, r, root)

    MPI_Allgatherv_c / PMPI_Allgatherv_c, MPI_Iallgatherv_c / PMPI_Iallgatherv_c, MPI_Allgatherv_init_c / PMPI_Allgatherv_init_c
    (sbuf: *const c_void, scount: i64, sdt: Handle, rbuf: *mut c_void, rcounts: *const i64, displs: *const isize, rdt: Handle)
    let (s, r, counts, displs) = allgatherv_args(sbuf, scount, sdt, rbuf, rcounts, displs, rdt, Over::Group);
    allgatherv, iallgatherv, allgatherv_init (s, r, &counts, &displs)

    MPI_Alltoallv_c / PMPI_Alltoallv_c, MPI_Ialltoallv_c / PMPI_Ialltoallv_c, MPI_Alltoallv_init_c / PMPI_Alltoallv_init_c
    (sbuf: *const c_void, scounts: *const i64, sdispls: *const isize, sdt: Handle, rbuf: *mut c_void, rcounts: *const i64, rdispls: *const isize, rdt: Handle)
    let (s, sc, sd, r, rc, rd) = alltoallv_args(sbuf, scounts, sdispls, sdt, rbuf, rcounts, rdispls, rdt, Over::Group);
    alltoallv, ialltoallv, alltoallv_init (s, &sc, &sd, r, &rc, &rd)

    MPI_Alltoallw_c / PMPI_Alltoallw_c, MPI_Ialltoallw_c / PMPI_Ialltoallw_c, MPI_Alltoallw_init_c / PMPI_Alltoallw_init_c
    (sbuf: *const c_void, scounts: *const i64, sdispls: *const isize, stypes: *const Handle, rbuf: *mut c_void, rcounts: *const i64, rdispls: *const isize, rtypes: *const Handle)
    let (s, ss, r, rs) = alltoallw_args(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, Over::Group);
    alltoallw, ialltoallw, alltoallw_init (s, &wspecs(&ss), r, &wspecs(&rs))

    MPI_Reduce_scatter_c / PMPI_Reduce_scatter_c, MPI_Ireduce_scatter_c / PMPI_Ireduce_scatter_c, MPI_Reduce_scatter_init_c / PMPI_Reduce_scatter_init_c
    (sbuf: *const c_void, rbuf: *mut c_void, rcounts: *const i64, dt: Handle, op: Handle)
    let (s, r, counts, op) = reduce_scatter_args(sbuf, rbuf, rcounts, dt, op);
    reduce_scatter, ireduce_scatter, reduce_scatter_init (s, r, &counts, &op)

    MPI_Neighbor_allgatherv_c / PMPI_Neighbor_allgatherv_c, MPI_Ineighbor_allgatherv_c / PMPI_Ineighbor_allgatherv_c, MPI_Neighbor_allgatherv_init_c / PMPI_Neighbor_allgatherv_init_c
    (sbuf: *const c_void, scount: i64, sdt: Handle, rbuf: *mut c_void, rcounts: *const i64, displs: *const isize, rdt: Handle)
    let (s, r, counts, displs) = allgatherv_args(sbuf, scount, sdt, rbuf, rcounts, displs, rdt, Over::Neighbors);
    neighbor_allgatherv, ineighbor_allgatherv, neighbor_allgatherv_init (s, r, &counts, &displs)

    MPI_Neighbor_alltoallv_c / PMPI_Neighbor_alltoallv_c, MPI_Ineighbor_alltoallv_c / PMPI_Ineighbor_alltoallv_c, MPI_Neighbor_alltoallv_init_c / PMPI_Neighbor_alltoallv_init_c
    (sbuf: *const c_void, scounts: *const i64, sdispls: *const isize, sdt: Handle, rbuf: *mut c_void, rcounts: *const i64, rdispls: *const isize, rdt: Handle)
    let (s, sc, sd, r, rc, rd) = alltoallv_args(sbuf, scounts, sdispls, sdt, rbuf, rcounts, rdispls, rdt, Over::Neighbors);
    neighbor_alltoallv, ineighbor_alltoallv, neighbor_alltoallv_init (s, &sc, &sd, r, &rc, &rd)

    MPI_Neighbor_alltoallw_c / PMPI_Neighbor_alltoallw_c, MPI_Ineighbor_alltoallw_c / PMPI_Ineighbor_alltoallw_c, MPI_Neighbor_alltoallw_init_c / PMPI_Neighbor_alltoallw_init_c
    (sbuf: *const c_void, scounts: *const i64, sdispls: *const isize, stypes: *const Handle, rbuf: *mut c_void, rcounts: *const i64, rdispls: *const isize, rtypes: *const Handle)
    let (s, ss, r, rs) = alltoallw_args(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, Over::Neighbors);
    neighbor_alltoallw, ineighbor_alltoallw, neighbor_alltoallw_init (s, &wspecs(&ss), r, &wspecs(&rs))
}
