//! Communicators, groups, topologies and error codes beyond the first part's:
//! MPI_Comm_create_group, MPI_Comm_dup_with_info, MPI_Comm_idup(_with_info),
//! MPI_Comm_set_info/get_info, the group set operations and ranges, graph and distributed
//! graph topologies with their queries and maps, MPI-1's attribute calls (MPI_Keyval_create,
//! MPI_Attr_put/get/delete), the error classes, codes and strings a program adds or removes,
//! and MPI_Info_get_string / MPI_Info_create_env.

use crate::abi::{self, Handle};
use crate::state::{self, ok_or_code, with_comm, write, write_str};
use crate::{array, c_str, len, read_handle, self_ok, CopyFunction, DeleteFunction};
use earlybird::{Comparison, Error, ErrorClass};
use std::ffi::{c_char, c_int, c_void};

/// A new communicator (or MPI_COMM_NULL) into `*out`.
fn made_comm(out: *mut Handle, r: earlybird::Result<Option<earlybird::Comm>>) -> c_int {
    let r = r.map(|c| c.map_or(abi::COMM_NULL, state::add_comm));
    // SAFETY: a handle to write (MPI's contract), checked for null.
    ok_or_code(r.map(|h| unsafe { write(out, h) }))
}

/// The tag that MPI_Comm_create_from_group and MPI_Intercomm_create_from_groups use for the
/// communicator they make over MPI_COMM_WORLD: the string tag hashed (FNV-1a), the same on
/// every process. MPI asks concurrent calls to give different string tags; two that hash
/// alike would have to overlap in time and in members to be confused.
fn string_tag(s: &str) -> c_int {
    let h = s.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    (h & 0x3fff_ffff) as c_int
}

/// The communicator over `group` that the *_from_group(s) calls make: as
/// MPI_Comm_create_group on MPI_COMM_WORLD, which holds every process of the job (sessions
/// are not implemented, so every group comes from it; a group of endpoints is refused by
/// that call). The error handler given is set on it.
fn from_group(group: Handle, tag: c_int) -> earlybird::Result<Option<earlybird::Comm>> {
    let g = state::group_of(group)?;
    state::with_comm_aside(abi::COMM_WORLD, |w| w.create_group(&g, tag))
}

/// Set `eh` (unless MPI_ERRHANDLER_NULL) on the new communicator `h`.
fn with_errhandler(h: Handle, eh: Handle) -> c_int {
    if eh == abi::c::MPI_ERRHANDLER_NULL || h == abi::COMM_NULL {
        return abi::MPI_SUCCESS;
    }
    // SAFETY: a valid communicator handle, made here.
    unsafe { crate::PMPI_Comm_set_errhandler(h, eh) }
}

/// A new group into `*out`.
fn made_group(out: *mut Handle, r: earlybird::Result<earlybird::Group>) -> c_int {
    // SAFETY: a handle to write (MPI's contract), checked for null.
    self_ok(
        r.and_then(state::add_group)
            .map(|h| unsafe { write(out, h) }),
    )
}

/// MPI's comparison results.
pub(crate) fn comparison(c: Comparison) -> c_int {
    match c {
        Comparison::Ident => abi::c::MPI_IDENT,
        Comparison::Congruent => abi::c::MPI_CONGRUENT,
        Comparison::Similar => abi::c::MPI_SIMILAR,
        Comparison::Unequal => abi::c::MPI_UNEQUAL,
        Comparison::Aliased => abi::c::MPIX_ALIASED,
    }
}

/// The `n` (first, last, stride) triples of a group range call.
///
/// # Safety
/// `ranges` points to `n` triples of ints.
unsafe fn ranges(n: c_int, ranges: *const [c_int; 3]) -> earlybird::Result<Vec<(i32, i32, i32)>> {
    // SAFETY: the function's contract.
    Ok(unsafe { array(ranges, n) }?
        .iter()
        .map(|r| (r[0], r[1], r[2]))
        .collect())
}

/// An info handle's object (MPI_INFO_NULL as an empty one).
pub(crate) fn info_of(h: Handle) -> earlybird::Result<earlybird::Info> {
    if h == abi::INFO_NULL {
        Ok(earlybird::Info::new())
    } else {
        state::with_info(h, |i| Ok(i.dup()))
    }
}

/// The weights argument of a distributed graph call: `None` for MPI_UNWEIGHTED, none for
/// MPI_WEIGHTS_EMPTY, else `n` weights.
///
/// # Safety
/// Unless a sentinel, `w` points to `n` ints.
unsafe fn weights<'a>(w: *const c_int, n: c_int) -> earlybird::Result<Option<&'a [i32]>> {
    if std::ptr::eq(w, crate::MPI_UNWEIGHTED.0) {
        Ok(None)
    } else if std::ptr::eq(w, crate::MPI_WEIGHTS_EMPTY.0) {
        Ok(Some(&[]))
    } else {
        // SAFETY: the function's contract.
        unsafe { array(w, n) }.map(Some)
    }
}

/// Write `v` to the first `max` ints at `out`.
///
/// # Safety
/// `out` has room for `max` ints (or `max` is 0).
unsafe fn write_ints(out: *mut c_int, max: c_int, v: &[i32]) -> earlybird::Result<()> {
    for (i, x) in v.iter().take(len(max)?).enumerate() {
        // SAFETY: the function's contract.
        unsafe { write(out.wrapping_add(i), *x) };
    }
    Ok(())
}

mpi! {
    fn MPI_Comm_create_group / PMPI_Comm_create_group(comm: Handle, group: Handle, tag: c_int, out: *mut Handle) {
        made_comm(out, state::group_of(group).and_then(|g| state::with_comm_aside(comm, |c| c.create_group(&g, tag))))
    }

    fn MPI_Comm_create_from_group / PMPI_Comm_create_from_group(group: Handle, stringtag: *const c_char, _info: Handle, eh: Handle, out: *mut Handle) {
        // SAFETY: a C string (MPI's contract), checked for null.
        let tag = match unsafe { c_str(stringtag) } {
            Ok(t) => string_tag(&t),
            Err(e) => return self_ok(Err::<(), _>(e)),
        };
        let rc = made_comm(out, from_group(group, tag));
        if rc != abi::MPI_SUCCESS {
            return rc;
        }
        // SAFETY: written just above.
        with_errhandler(unsafe { out.read() }, eh)
    }

    fn MPI_Intercomm_create_from_groups / PMPI_Intercomm_create_from_groups(
        local: Handle, local_leader: c_int, remote: Handle, remote_leader: c_int,
        stringtag: *const c_char, _info: Handle, eh: Handle, out: *mut Handle,
    ) {
        // SAFETY: a C string (MPI's contract), checked for null.
        let tag = match unsafe { c_str(stringtag) } {
            Ok(t) => string_tag(&t),
            Err(e) => return self_ok(Err::<(), _>(e)),
        };
        // The local group's communicator (over MPI_COMM_WORLD), then an intercommunicator from
        // it whose leaders meet on MPI_COMM_WORLD (the remote leader by its rank there).
        let r = (|| {
            let rg = state::group_of(remote)?;
            let world = with_comm(abi::COMM_WORLD, |w| Ok(w.clone()))?;
            let leader = rg.translate_ranks(&[remote_leader], &world.group())?[0];
            let Some(l) = from_group(local, tag)? else {
                return Err(Error::new(ErrorClass::Group, "MPI_Intercomm_create_from_groups: this process is not in the local group"));
            };
            let inter = state::let_go_aside(|| l.intercomm_create(local_leader, &world, leader, tag));
            let freed = l.free();
            let inter = inter?;
            freed.map(|()| Some(inter))
        })();
        let rc = made_comm(out, r);
        if rc != abi::MPI_SUCCESS {
            return rc;
        }
        // SAFETY: written just above.
        with_errhandler(unsafe { out.read() }, eh)
    }

    fn MPI_Comm_dup_with_info / PMPI_Comm_dup_with_info(comm: Handle, info: Handle, out: *mut Handle) {
        made_comm(out, info_of(info).and_then(|i| state::with_comm_aside(comm, |c| c.dup_with_info(&i).map(Some))))
    }

    fn MPI_Comm_idup / PMPI_Comm_idup(comm: Handle, out: *mut Handle, req: *mut Handle) {
        // SAFETY: MPI's contract: `out` is written when the request completes, and left alone
        // by the program until then.
        unsafe { idup(comm, None, out, req) }
    }

    fn MPI_Comm_idup_with_info / PMPI_Comm_idup_with_info(comm: Handle, info: Handle, out: *mut Handle, req: *mut Handle) {
        match info_of(info) {
            // SAFETY: as for MPI_Comm_idup.
            Ok(i) => unsafe { idup(comm, Some(i), out, req) },
            Err(e) => self_ok(Err::<(), _>(e)),
        }
    }

    fn MPI_Comm_set_info / PMPI_Comm_set_info(comm: Handle, info: Handle) {
        // The info object is read before the communicator is borrowed (both are the state's).
        ok_or_code(info_of(info).and_then(|i| with_comm(comm, |c| c.set_info(&i))))
    }

    fn MPI_Comm_get_info / PMPI_Comm_get_info(comm: Handle, out: *mut Handle) {
        let r = with_comm(comm, |c| c.get_info()).and_then(state::add_info);
        // SAFETY: a handle to write, checked for null.
        ok_or_code(r.map(|h| unsafe { write(out, h) }))
    }

    fn MPI_Group_range_incl / PMPI_Group_range_incl(group: Handle, n: c_int, rs: *const [c_int; 3], out: *mut Handle) {
        // SAFETY: `n` triples (MPI's contract).
        made_group(out, state::group_of(group).and_then(|g| g.range_incl(&unsafe { ranges(n, rs) }?)))
    }

    fn MPI_Group_range_excl / PMPI_Group_range_excl(group: Handle, n: c_int, rs: *const [c_int; 3], out: *mut Handle) {
        // SAFETY: `n` triples (MPI's contract).
        made_group(out, state::group_of(group).and_then(|g| g.range_excl(&unsafe { ranges(n, rs) }?)))
    }

    fn MPI_Group_union / PMPI_Group_union(a: Handle, b: Handle, out: *mut Handle) {
        made_group(out, state::group_of(a).and_then(|a| a.union(&state::group_of(b)?)))
    }

    fn MPI_Group_intersection / PMPI_Group_intersection(a: Handle, b: Handle, out: *mut Handle) {
        made_group(out, state::group_of(a).and_then(|a| a.intersection(&state::group_of(b)?)))
    }

    fn MPI_Group_difference / PMPI_Group_difference(a: Handle, b: Handle, out: *mut Handle) {
        made_group(out, state::group_of(a).and_then(|a| a.difference(&state::group_of(b)?)))
    }

    fn MPI_Group_compare / PMPI_Group_compare(a: Handle, b: Handle, result: *mut c_int) {
        let r = state::group_of(a).and_then(|a| Ok(a.compare(&state::group_of(b)?)));
        // SAFETY: an int to write, checked for null.
        self_ok(r.map(|c| unsafe { write(result, comparison(c)) }))
    }

    // ---- graph topologies

    fn MPI_Graph_create / PMPI_Graph_create(comm: Handle, nnodes: c_int, index: *const c_int, edges: *const c_int, reorder: c_int, out: *mut Handle) {
        made_comm(out, state::with_comm_aside(comm, |c| {
            // SAFETY: `nnodes` indices, and as many edges as the last index says (MPI's contract).
            let ix = unsafe { array(index, nnodes) }?;
            let ne = ix.last().copied().unwrap_or(0);
            // SAFETY: as above.
            let ed = unsafe { array(edges, ne) }?;
            c.graph_create(ix, ed, reorder != 0)
        }))
    }

    fn MPI_Graphdims_get / PMPI_Graphdims_get(comm: Handle, nnodes: *mut c_int, nedges: *mut c_int) {
        ok_or_code(with_comm(comm, |c| {
            let (n, e) = c.graphdims_get()?;
            // SAFETY: ints to write, checked for null.
            unsafe {
                write(nnodes, n);
                write(nedges, e);
            }
            Ok(())
        }))
    }

    fn MPI_Graph_get / PMPI_Graph_get(comm: Handle, maxindex: c_int, maxedges: c_int, index: *mut c_int, edges: *mut c_int) {
        ok_or_code(with_comm(comm, |c| {
            let (ix, ed) = c.graph_get()?;
            // SAFETY: room for `maxindex` and `maxedges` ints (MPI's contract).
            unsafe {
                write_ints(index, maxindex, &ix)?;
                write_ints(edges, maxedges, &ed)
            }
        }))
    }

    fn MPI_Graph_neighbors_count / PMPI_Graph_neighbors_count(comm: Handle, rank: c_int, n: *mut c_int) {
        // SAFETY: an int to write, checked for null.
        ok_or_code(with_comm(comm, |c| c.graph_neighbors(rank).map(|v| unsafe { write(n, v.len() as c_int) })))
    }

    fn MPI_Graph_neighbors / PMPI_Graph_neighbors(comm: Handle, rank: c_int, max: c_int, out: *mut c_int) {
        // SAFETY: room for `max` ints (MPI's contract).
        ok_or_code(with_comm(comm, |c| c.graph_neighbors(rank).and_then(|v| unsafe { write_ints(out, max, &v) })))
    }

    fn MPI_Graph_map / PMPI_Graph_map(comm: Handle, nnodes: c_int, index: *const c_int, edges: *const c_int, newrank: *mut c_int) {
        ok_or_code(with_comm(comm, |c| {
            // SAFETY: as for MPI_Graph_create.
            let ix = unsafe { array(index, nnodes) }?;
            // SAFETY: as above.
            let ed = unsafe { array(edges, ix.last().copied().unwrap_or(0)) }?;
            let r = c.graph_map(ix, ed)?;
            // SAFETY: an int to write, checked for null.
            unsafe { write(newrank, r.unwrap_or(abi::UNDEFINED)) };
            Ok(())
        }))
    }

    fn MPI_Cart_map / PMPI_Cart_map(comm: Handle, ndims: c_int, dims: *const c_int, periods: *const c_int, newrank: *mut c_int) {
        ok_or_code(with_comm(comm, |c| {
            // SAFETY: `ndims` ints in each array (MPI's contract).
            let (d, p) = unsafe { (array(dims, ndims)?, array(periods, ndims)?) };
            let p: Vec<bool> = p.iter().map(|&x| x != 0).collect();
            let r = c.cart_map(d, &p)?;
            // SAFETY: an int to write, checked for null.
            unsafe { write(newrank, r.unwrap_or(abi::UNDEFINED)) };
            Ok(())
        }))
    }

    fn MPI_Dist_graph_create_adjacent / PMPI_Dist_graph_create_adjacent(
        comm: Handle, indegree: c_int, sources: *const c_int, sourceweights: *const c_int,
        outdegree: c_int, destinations: *const c_int, destweights: *const c_int,
        info: Handle, reorder: c_int, out: *mut Handle,
    ) {
        let info = info_of(info);
        made_comm(out, state::with_comm_aside(comm, |c| {
            // SAFETY: `indegree` sources and `outdegree` destinations, with weights unless a
            // sentinel (MPI's contract).
            let (s, sw, d, dw) = unsafe { (array(sources, indegree)?, weights(sourceweights, indegree)?, array(destinations, outdegree)?, weights(destweights, outdegree)?) };
            c.dist_graph_create_adjacent(s, sw, d, dw, info.as_ref().map_err(Clone::clone)?, reorder != 0).map(Some)
        }))
    }

    fn MPI_Dist_graph_create / PMPI_Dist_graph_create(
        comm: Handle, n: c_int, sources: *const c_int, degrees: *const c_int,
        destinations: *const c_int, w: *const c_int, info: Handle, reorder: c_int, out: *mut Handle,
    ) {
        let info = info_of(info);
        made_comm(out, state::with_comm_aside(comm, |c| {
            // SAFETY: `n` sources and degrees, as many destinations (and weights) as the
            // degrees sum to (MPI's contract).
            let (s, deg) = unsafe { (array(sources, n)?, array(degrees, n)?) };
            let total: c_int = deg.iter().map(|&x| x.max(0)).sum();
            // SAFETY: as above.
            let (d, wt) = unsafe { (array(destinations, total)?, weights(w, total)?) };
            c.dist_graph_create(s, deg, d, wt, info.as_ref().map_err(Clone::clone)?, reorder != 0).map(Some)
        }))
    }

    fn MPI_Dist_graph_neighbors_count / PMPI_Dist_graph_neighbors_count(comm: Handle, indegree: *mut c_int, outdegree: *mut c_int, weighted: *mut c_int) {
        ok_or_code(with_comm(comm, |c| {
            let (i, o, w) = c.dist_graph_neighbors_count()?;
            // SAFETY: ints to write, checked for null.
            unsafe {
                write(indegree, i);
                write(outdegree, o);
                write(weighted, c_int::from(w));
            }
            Ok(())
        }))
    }

    fn MPI_Dist_graph_neighbors / PMPI_Dist_graph_neighbors(
        comm: Handle, maxin: c_int, sources: *mut c_int, sourceweights: *mut c_int,
        maxout: c_int, destinations: *mut c_int, destweights: *mut c_int,
    ) {
        ok_or_code(with_comm(comm, |c| {
            let g = c.dist_graph_neighbors()?;
            // SAFETY: room for `maxin` and `maxout` ints in each array; the weight arrays may
            // be MPI_UNWEIGHTED (MPI's contract), which is never written.
            unsafe {
                write_ints(sources, maxin, &g.sources)?;
                write_ints(destinations, maxout, &g.destinations)?;
                if let (Some(w), false) = (&g.source_weights, std::ptr::eq(sourceweights, crate::MPI_UNWEIGHTED.0)) {
                    write_ints(sourceweights, maxin, w)?;
                }
                if let (Some(w), false) = (&g.destination_weights, std::ptr::eq(destweights, crate::MPI_UNWEIGHTED.0)) {
                    write_ints(destweights, maxout, w)?;
                }
            }
            Ok(())
        }))
    }

    // ---- MPI-1's attribute calls (deprecated, still in MPI 4.1): the communicator ones

    fn MPI_Keyval_create / PMPI_Keyval_create(copy: Option<CopyFunction>, delete: Option<DeleteFunction>, keyval: *mut c_int, extra: *mut c_void) {
        // SAFETY: the same contract as MPI_Comm_create_keyval.
        unsafe { crate::PMPI_Comm_create_keyval(copy, delete, keyval, extra) }
    }

    fn MPI_Keyval_free / PMPI_Keyval_free(keyval: *mut c_int) {
        // SAFETY: as MPI_Comm_free_keyval.
        unsafe { crate::PMPI_Comm_free_keyval(keyval) }
    }

    fn MPI_Attr_put / PMPI_Attr_put(comm: Handle, keyval: c_int, value: *mut c_void) {
        // SAFETY: as MPI_Comm_set_attr.
        unsafe { crate::PMPI_Comm_set_attr(comm, keyval, value) }
    }

    fn MPI_Attr_get / PMPI_Attr_get(comm: Handle, keyval: c_int, value: *mut c_void, flag: *mut c_int) {
        // SAFETY: as MPI_Comm_get_attr.
        unsafe { crate::PMPI_Comm_get_attr(comm, keyval, value, flag) }
    }

    fn MPI_Attr_delete / PMPI_Attr_delete(comm: Handle, keyval: c_int) {
        // SAFETY: as MPI_Comm_delete_attr.
        unsafe { crate::PMPI_Comm_delete_attr(comm, keyval) }
    }

    // ---- error classes, codes and strings the program adds

    fn MPI_Add_error_class / PMPI_Add_error_class(class: *mut c_int) {
        // SAFETY: an int to write, checked for null.
        self_ok(earlybird::add_error_class().map(|c| unsafe { write(class, c.code()) }))
    }

    fn MPI_Add_error_code / PMPI_Add_error_code(class: c_int, code: *mut c_int) {
        let r = earlybird::error_class(class).and_then(earlybird::add_error_code);
        // SAFETY: an int to write, checked for null.
        self_ok(r.map(|c| unsafe { write(code, c.code()) }))
    }

    fn MPI_Add_error_string / PMPI_Add_error_string(code: c_int, s: *const c_char) {
        // SAFETY: a NUL-terminated string (MPI's contract).
        self_ok(unsafe { c_str(s) }.and_then(|s| earlybird::add_error_string(code, &s)))
    }

    fn MPI_Remove_error_class / PMPI_Remove_error_class(class: c_int) {
        self_ok(earlybird::error_class(class).and_then(earlybird::remove_error_class))
    }

    fn MPI_Remove_error_code / PMPI_Remove_error_code(code: c_int) {
        self_ok(earlybird::remove_error_code(code))
    }

    fn MPI_Remove_error_string / PMPI_Remove_error_string(code: c_int) {
        self_ok(earlybird::remove_error_string(code))
    }

    fn MPIX_Delete_error_class / PMPIX_Delete_error_class(class: c_int) {
        // SAFETY: the same call under MPICH 4.0's name.
        unsafe { PMPI_Remove_error_class(class) }
    }

    fn MPIX_Delete_error_code / PMPIX_Delete_error_code(code: c_int) {
        // SAFETY: the same call under MPICH 4.0's name.
        unsafe { PMPI_Remove_error_code(code) }
    }

    fn MPIX_Delete_error_string / PMPIX_Delete_error_string(code: c_int) {
        // SAFETY: the same call under MPICH 4.0's name.
        unsafe { PMPI_Remove_error_string(code) }
    }

    // ---- info

    fn MPI_Info_get_string / PMPI_Info_get_string(info: Handle, key: *const c_char, buflen: *mut c_int, value: *mut c_char, flag: *mut c_int) {
        self_ok((|| {
            // SAFETY: a NUL-terminated key and an int to read and write (MPI's contract).
            let (k, room) = unsafe { (c_str(key)?, read_handle(buflen)?) };
            let got = state::with_info(info, |i| i.get_string(&k, len(room)?))?;
            // SAFETY: `value` has room for `*buflen` chars (none when it is 0); ints to write.
            unsafe {
                write(flag, c_int::from(got.is_some()));
                if let Some((v, need)) = got {
                    if room > 0 {
                        write_str(value, room as usize, &v, std::ptr::null_mut());
                    }
                    write(buflen, c_int::try_from(need).unwrap_or(c_int::MAX));
                }
            }
            Ok(())
        })())
    }

    fn MPI_Info_create_env / PMPI_Info_create_env(_argc: c_int, _argv: *mut *mut c_char, info: *mut Handle) {
        // MPI_INFO_ENV's contents (earlybird keeps nothing of the command line there).
        let r = state::with_info(abi::INFO_ENV, |i| Ok(i.dup())).and_then(state::add_info);
        // SAFETY: a handle to write, checked for null.
        self_ok(r.map(|h| unsafe { write(info, h) }))
    }
}

/// MPI_Comm_idup(_with_info): the request completes when the processes agreed on the new
/// communicator; its handle goes into `*out` then.
///
/// # Safety
/// `out` stays valid and untouched by the program until the request completes (MPI's
/// contract); `req` is null or a handle to write.
unsafe fn idup(
    comm: Handle,
    info: Option<earlybird::Info>,
    out: *mut Handle,
    req: *mut Handle,
) -> c_int {
    if out.is_null() {
        return state::fail(
            comm,
            "MPI_Comm_idup",
            Error::new(ErrorClass::Arg, "a null newcomm pointer"),
        );
    }
    // Copy callbacks run: see `with_comm_owned`.
    let r = state::with_comm_owned(comm, |c| {
        let s = state::scope()?;
        let (q, pending) = match &info {
            Some(i) => c.idup_with_info(s, i)?,
            None => c.idup(s)?,
        };
        // Until it completes the handle names no communicator.
        // SAFETY: the function's contract.
        unsafe { out.write(abi::COMM_NULL) };
        let out = out as usize;
        let mut p = state::pending(q, comm, state::Kept::Slice);
        p.then(Box::new(move || {
            let h = pending.comm().map_or(abi::COMM_NULL, state::add_comm);
            // SAFETY: the function's contract: `out` is still the program's newcomm.
            unsafe { (out as *mut Handle).write(h) };
        }));
        Ok(p)
    });
    // SAFETY: the function's contract.
    unsafe { state::request_out(req, r) }
}
