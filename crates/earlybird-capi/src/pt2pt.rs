//! Point-to-point calls beyond the first part's: the nonblocking and persistent ready and
//! buffered sends, MPI_Isendrecv(_replace), matched probes and receives (MPI_Mprobe,
//! MPI_Improbe, MPI_Mrecv, MPI_Imrecv), MPI_Request_get_status, and the status accessors
//! MPI 4.1 defines (MPI_Status_get/set_*).

use crate::abi::{self, Handle, MpiStatus, MPI_SUCCESS};
use crate::state::{self, buf_in, buf_out, ok_or_code, with_comm, write, Mode};
use crate::{self_ok, status_out};
use earlybird::{Error, ErrorClass};
use std::ffi::{c_int, c_void};

/// A nonblocking or persistent send of `mode`; its request's handle into `*req`.
///
/// # Safety
/// MPI_Isend's contract (`buf` holds `count` elements of `dt`, left alone until the request
/// completes; `req` is null or a handle to write).
#[allow(clippy::too_many_arguments)] // MPI_Isend's, and the mode
pub(crate) unsafe fn send_request(
    buf: *const c_void,
    count: c_int,
    dt: Handle,
    dest: c_int,
    tag: c_int,
    comm: Handle,
    req: *mut Handle,
    mode: Mode,
) -> c_int {
    // SAFETY: the function's contract.
    ok_or_code(
        unsafe { state::start_send(buf, count, dt, dest, tag, comm, mode) }.map(|h| {
            // SAFETY: a handle to write, checked for null.
            unsafe { write(req, h) }
        }),
    )
}

/// A status the caller passes to be read or written: null is an error of MPI_ERR_ARG.
fn status_ptr<T>(what: &str, s: *const T) -> earlybird::Result<()> {
    if s.is_null() || s as usize == abi::STATUS_IGNORE {
        Err(Error::new(
            ErrorClass::Arg,
            format!("{what}: no status (null or MPI_STATUS_IGNORE)"),
        ))
    } else {
        Ok(())
    }
}

/// Read a field of a status, or write one: `f` gets the status (checked) to act on.
///
/// # Safety
/// `s` is null, MPI_STATUS_IGNORE or points to an MPI_Status.
unsafe fn on_status(what: &str, s: *mut MpiStatus, f: impl FnOnce(&mut MpiStatus)) -> c_int {
    self_ok(status_ptr(what, s).map(|()| {
        // SAFETY: the function's contract; checked above.
        f(unsafe { &mut *s })
    }))
}

/// The status of a receive from MPI_PROC_NULL: source MPI_PROC_NULL, tag MPI_ANY_TAG, no
/// data (MPI_ERROR untouched, as for any single completion).
fn proc_null_status(status: *mut MpiStatus) {
    crate::status_fields(status, 0, false, abi::PROC_NULL, abi::c::MPI_ANY_TAG);
}

mpi! {
    fn MPI_Irsend / PMPI_Irsend(buf: *const c_void, count: c_int, dt: Handle, dest: c_int, tag: c_int, comm: Handle, req: *mut Handle) {
        // SAFETY: MPI_Isend's contract.
        unsafe { send_request(buf, count, dt, dest, tag, comm, req, Mode::Ready) }
    }

    fn MPI_Ibsend / PMPI_Ibsend(buf: *const c_void, count: c_int, dt: Handle, dest: c_int, tag: c_int, comm: Handle, req: *mut Handle) {
        // SAFETY: MPI_Isend's contract.
        unsafe { send_request(buf, count, dt, dest, tag, comm, req, Mode::Buffered) }
    }

    fn MPI_Rsend_init / PMPI_Rsend_init(buf: *const c_void, count: c_int, dt: Handle, dest: c_int, tag: c_int, comm: Handle, req: *mut Handle) {
        // SAFETY: MPI_Send_init's contract.
        unsafe { send_request(buf, count, dt, dest, tag, comm, req, Mode::ReadyInit) }
    }

    fn MPI_Bsend_init / PMPI_Bsend_init(buf: *const c_void, count: c_int, dt: Handle, dest: c_int, tag: c_int, comm: Handle, req: *mut Handle) {
        // SAFETY: MPI_Send_init's contract.
        unsafe { send_request(buf, count, dt, dest, tag, comm, req, Mode::BufferedInit) }
    }

    fn MPI_Isendrecv / PMPI_Isendrecv(
        sbuf: *const c_void, scount: c_int, sdt: Handle, dest: c_int, stag: c_int,
        rbuf: *mut c_void, rcount: c_int, rdt: Handle, src: c_int, rtag: c_int,
        comm: Handle, req: *mut Handle,
    ) {
        let r = with_comm(comm, |c| {
            // SAFETY: the two buffers as MPI's contract says, left alone until the request
            // completes.
            let (s, r) = unsafe { (buf_in(sbuf, scount, sdt)?, buf_out(rbuf, rcount, rdt)?) };
            let (kept, s, r) = state::kept_pair(s, r);
            let q = c.isendrecv(state::scope()?, s, abi::rank_in(dest), stag, r, abi::rank_in(src), rtag)?;
            Ok(state::pending(q, comm, kept))
        });
        // SAFETY: a handle to write (MPI's contract).
        unsafe { state::request_out(req, r) }
    }

    fn MPI_Isendrecv_replace / PMPI_Isendrecv_replace(buf: *mut c_void, count: c_int, dt: Handle, dest: c_int, stag: c_int, src: c_int, rtag: c_int, comm: Handle, req: *mut Handle) {
        let r = with_comm(comm, |c| {
            // SAFETY: `buf` as MPI's contract says, left alone until the request completes.
            let b = unsafe { buf_out(buf, count, dt) }?;
            let (kept, b) = state::kept_recv(b);
            let q = c.isendrecv_replace(state::scope()?, b, abi::rank_in(dest), stag, abi::rank_in(src), rtag)?;
            Ok(state::pending(q, comm, kept))
        });
        // SAFETY: a handle to write (MPI's contract).
        unsafe { state::request_out(req, r) }
    }

    fn MPI_Mprobe / PMPI_Mprobe(src: c_int, tag: c_int, comm: Handle, msg: *mut Handle, status: *mut MpiStatus) {
        if state::waits_let_go() {
            // SAFETY: the caller's message handle and status; an int of ours.
            return state::probe_until_found(|found| unsafe { PMPI_Improbe(src, tag, comm, found, msg, status) });
        }
        // The message is kept after the communicator is given back (both are the state's).
        let r = with_comm(comm, |c| c.mprobe(abi::rank_in(src), tag)).and_then(|(m, st)| {
            let h = state::add_message(m, &st)?;
            // SAFETY: a handle to write, checked for null.
            unsafe { write(msg, h) };
            status_out(status, &st);
            Ok(())
        });
        ok_or_code(r)
    }

    fn MPI_Improbe / PMPI_Improbe(src: c_int, tag: c_int, comm: Handle, flag: *mut c_int, msg: *mut Handle, status: *mut MpiStatus) {
        let r = with_comm(comm, |c| c.improbe(abi::rank_in(src), tag)).and_then(|found| {
            // SAFETY: an int to write, checked for null.
            unsafe { write(flag, c_int::from(found.is_some())) };
            if let Some((m, st)) = found {
                let h = state::add_message(m, &st)?;
                // SAFETY: a handle to write, checked for null.
                unsafe { write(msg, h) };
                status_out(status, &st);
            }
            Ok(())
        });
        ok_or_code(r)
    }

    fn MPI_Mrecv / PMPI_Mrecv(buf: *mut c_void, count: c_int, dt: Handle, msg: *mut Handle, status: *mut MpiStatus) {
        if state::waits_let_go() {
            // SAFETY: MPI_Imrecv's contract, the request completed here.
            return state::via_request(|r| unsafe { PMPI_Imrecv(buf, count, dt, msg, r) }, status);
        }
        self_ok((|| {
            // SAFETY: a message handle to read and write (MPI's contract).
            let h = unsafe { crate::read_handle(msg) }?;
            match state::take_message(h)? {
                // Nothing to receive: the status of a receive from MPI_PROC_NULL.
                None => proc_null_status(status),
                Some(m) => {
                    // SAFETY: `buf` has room for `count` elements of `dt` (MPI's contract).
                    let mut b = unsafe { buf_out(buf, count, dt) }?;
                    status_out(status, &m.recv(&mut b)?);
                }
            }
            // SAFETY: as above.
            unsafe { msg.write(abi::c::MPI_MESSAGE_NULL) };
            Ok(())
        })())
    }

    fn MPI_Imrecv / PMPI_Imrecv(buf: *mut c_void, count: c_int, dt: Handle, msg: *mut Handle, req: *mut Handle) {
        self_ok((|| {
            // SAFETY: a message handle to read and write (MPI's contract).
            let h = unsafe { crate::read_handle(msg) }?;
            let p = match state::take_message(h)? {
                None => {
                    // Nothing to receive: an empty receive from MPI_PROC_NULL.
                    let q = with_comm(abi::COMM_SELF, |c| c.irecv(state::scope()?, Vec::<u8>::new().leak(), earlybird::PROC_NULL, 0))?;
                    state::pending(q, abi::COMM_SELF, state::Kept::Slice)
                }
                Some(m) => {
                    // SAFETY: `buf` as MPI's contract says, left alone until the request
                    // completes.
                    let b = unsafe { buf_out(buf, count, dt) }?;
                    let (kept, b) = state::kept_recv(b);
                    state::pending(m.irecv(state::scope()?, b)?, abi::COMM_WORLD, kept)
                }
            };
            // SAFETY: handles to write, checked for null.
            unsafe {
                write(req, state::add_request(p));
                msg.write(abi::c::MPI_MESSAGE_NULL);
            }
            Ok(())
        })())
    }

    fn MPI_Request_get_status / PMPI_Request_get_status(req: Handle, flag: *mut c_int, status: *mut MpiStatus) {
        self_ok(state::request_status(req).map(|st| {
            // SAFETY: an int to write, checked for null.
            unsafe { write(flag, c_int::from(st.is_some())) };
            if let Some(st) = st {
                status_out(status, &st);
            }
        }))
    }

    fn MPI_Status_set_cancelled / PMPI_Status_set_cancelled(status: *mut MpiStatus, flag: c_int) {
        // SAFETY: a status to change (MPI's contract).
        unsafe {
            on_status("MPI_Status_set_cancelled", status, |s| {
                s.count_hi_and_cancelled = (s.count_hi_and_cancelled & !1) | c_int::from(flag != 0);
            })
        }
    }

    fn MPI_Status_set_elements / PMPI_Status_set_elements(status: *mut MpiStatus, dt: Handle, count: c_int) {
        // SAFETY: as for the _x form.
        unsafe { PMPI_Status_set_elements_x(status, dt, i64::from(count)) }
    }

    fn MPI_Status_set_elements_c / PMPI_Status_set_elements_c(status: *mut MpiStatus, dt: Handle, count: i64) {
        // SAFETY: the same contract.
        unsafe { PMPI_Status_set_elements_x(status, dt, count) }
    }

    fn MPI_Status_set_elements_x / PMPI_Status_set_elements_x(status: *mut MpiStatus, dt: Handle, count: i64) {
        let size = match state::type_of(dt) {
            Ok(d) => d.size() as i64,
            Err(e) => return self_ok(Err::<(), _>(e)),
        };
        // 63 bits of count: every byte count an MPI_Count (non-negative) can say.
        let Some(bytes) = count.checked_mul(size).filter(|b| *b >= 0) else {
            return self_ok(Err::<(), _>(Error::new(ErrorClass::Count, format!("MPI_Status_set_elements: count {count}"))));
        };
        // SAFETY: a status to change (MPI's contract).
        unsafe {
            on_status("MPI_Status_set_elements", status, |s| {
                s.count_lo = bytes as u32 as i32;
                s.count_hi_and_cancelled = (((bytes >> 32) as i32) << 1) | (s.count_hi_and_cancelled & 1);
            })
        }
    }

    fn MPI_Status_set_source / PMPI_Status_set_source(status: *mut MpiStatus, source: c_int) {
        // SAFETY: a status to change (MPI's contract).
        unsafe { on_status("MPI_Status_set_source", status, |s| s.source = source) }
    }

    fn MPI_Status_set_tag / PMPI_Status_set_tag(status: *mut MpiStatus, tag: c_int) {
        // SAFETY: a status to change (MPI's contract).
        unsafe { on_status("MPI_Status_set_tag", status, |s| s.tag = tag) }
    }

    fn MPI_Status_set_error / PMPI_Status_set_error(status: *mut MpiStatus, err: c_int) {
        // SAFETY: a status to change (MPI's contract).
        unsafe { on_status("MPI_Status_set_error", status, |s| s.error = err) }
    }

    fn MPI_Status_get_source / PMPI_Status_get_source(status: *const MpiStatus, source: *mut c_int) {
        // SAFETY: a status to read (MPI's contract); an int to write, checked for null.
        unsafe { on_status("MPI_Status_get_source", status.cast_mut(), |s| write(source, s.source)) }
    }

    fn MPI_Status_get_tag / PMPI_Status_get_tag(status: *const MpiStatus, tag: *mut c_int) {
        // SAFETY: as above.
        unsafe { on_status("MPI_Status_get_tag", status.cast_mut(), |s| write(tag, s.tag)) }
    }

    fn MPI_Status_get_error / PMPI_Status_get_error(status: *const MpiStatus, err: *mut c_int) {
        // SAFETY: as above.
        unsafe { on_status("MPI_Status_get_error", status.cast_mut(), |s| write(err, s.error)) }
    }

    fn MPI_Pcontrol / PMPI_Pcontrol(_level: c_int) {
        // MPI: profiling control for a profiling library interposed on MPI_; with none, the
        // call does nothing.
        MPI_SUCCESS
    }
}

/// C's `MPI_Grequest_query_function`.
type QueryFunction = unsafe extern "C" fn(*mut c_void, *mut MpiStatus) -> c_int;
/// C's `MPI_Grequest_free_function`.
type FreeFunction = unsafe extern "C" fn(*mut c_void) -> c_int;
/// C's `MPI_Grequest_cancel_function`.
type CancelFunction = unsafe extern "C" fn(*mut c_void, c_int) -> c_int;

/// The completers of the generalized requests still active, by request handle: any thread
/// may complete one (MPI_Grequest_complete names the request).
static COMPLETERS: std::sync::Mutex<Vec<(Handle, earlybird::GrequestCompleter)>> =
    std::sync::Mutex::new(Vec::new());

/// A C callback's result as the Rust API's: its code's class, and the code in the message.
fn callback_result(what: &str, rc: c_int) -> earlybird::Result<()> {
    if rc == MPI_SUCCESS {
        return Ok(());
    }
    let class = earlybird::error_class(rc).map_or(ErrorClass::Other, |c| c);
    Err(Error::new(
        class,
        format!("the generalized request's {what} function returned {rc}"),
    ))
}

mpi! {
    fn MPI_Grequest_start / PMPI_Grequest_start(query: Option<QueryFunction>, free: Option<FreeFunction>, cancel: Option<CancelFunction>, extra: *mut c_void, req: *mut Handle) {
        let (Some(query), Some(free), Some(cancel)) = (query, free, cancel) else {
            return self_ok(Err::<(), _>(Error::new(ErrorClass::Arg, "MPI_Grequest_start: a null callback")));
        };
        // The program's state, handed back to each callback as MPI says (an address only).
        let extra = extra as usize;
        let r = with_comm(abi::COMM_WORLD, |c| {
            c.grequest_start(
                move |st: &mut earlybird::Status| {
                    let mut s = MpiStatus::default();
                    // SAFETY: the program's query function, called as MPI's C binding says,
                    // with a status of ours to fill.
                    let rc = unsafe { query(extra as *mut c_void, &mut s) };
                    callback_result("query", rc)?;
                    let bytes = s.bytes();
                    st.set_source(abi::rank_in(s.source));
                    st.set_tag(s.tag);
                    st.set_elements::<u8>(bytes as usize);
                    st.set_cancelled(s.count_hi_and_cancelled & 1 != 0);
                    Ok(())
                },
                move || {
                    // SAFETY: the program's free function, called once, as MPI says.
                    callback_result("free", unsafe { free(extra as *mut c_void) })
                },
                move |complete: bool| {
                    // SAFETY: the program's cancel function, as MPI says.
                    callback_result("cancel", unsafe { cancel(extra as *mut c_void, c_int::from(complete)) })
                },
            )
        })
        .map(|(q, completer)| {
            let h = state::add_request(state::pending(q, abi::COMM_WORLD, state::Kept::Slice));
            COMPLETERS.lock().unwrap_or_else(|e| e.into_inner()).push((h, completer));
            h
        });
        // SAFETY: a handle to write, checked for null.
        ok_or_code(r.map(|h| unsafe { write(req, h) }))
    }

    fn MPI_Grequest_complete / PMPI_Grequest_complete(req: Handle) {
        let found = {
            let mut all = COMPLETERS.lock().unwrap_or_else(|e| e.into_inner());
            all.iter().position(|(h, _)| *h == req).map(|i| all.swap_remove(i).1)
        };
        match found {
            Some(c) => self_ok(c.complete()),
            None => self_ok(Err::<(), _>(Error::new(ErrorClass::Request, format!("MPI_Grequest_complete: request {req:#x} is no active generalized request")))),
        }
    }
}

/// The status `i` of an array of statuses (or MPI_STATUSES_IGNORE / null, handed on).
pub(crate) fn nth_status(statuses: *mut MpiStatus, i: usize) -> *mut MpiStatus {
    if statuses.is_null() || statuses as usize == abi::STATUS_IGNORE {
        statuses
    } else {
        statuses.wrapping_add(i)
    }
}

mpi! {
    fn MPI_Request_get_status_any / PMPI_Request_get_status_any(n: c_int, reqs: *const Handle, index: *mut c_int, flag: *mut c_int, status: *mut MpiStatus) {
        self_ok((|| {
            // SAFETY: `n` handles (MPI's contract).
            let hs = unsafe { crate::array(reqs, n) }?;
            let mut live = false;
            for (i, &h) in hs.iter().enumerate() {
                if !state::request_active(h) {
                    continue;
                }
                live = true;
                if let Some(st) = state::request_status(h)? {
                    // SAFETY: ints to write, checked for null.
                    unsafe {
                        write(index, i as c_int);
                        write(flag, 1);
                    }
                    status_out(status, &st);
                    return Ok(());
                }
            }
            // SAFETY: ints to write, checked for null.
            unsafe {
                write(index, abi::UNDEFINED);
                write(flag, c_int::from(!live));
            }
            if !live {
                state::empty_status(status);
            }
            Ok(())
        })())
    }

    fn MPI_Request_get_status_all / PMPI_Request_get_status_all(n: c_int, reqs: *const Handle, flag: *mut c_int, statuses: *mut MpiStatus) {
        self_ok((|| {
            // SAFETY: `n` handles (MPI's contract).
            let hs = unsafe { crate::array(reqs, n) }?;
            let mut all = Vec::with_capacity(hs.len());
            for &h in hs {
                let st = if state::request_active(h) { state::request_status(h)? } else { Some(earlybird::Status::empty()) };
                match st {
                    Some(st) => all.push(st),
                    None => {
                        // SAFETY: an int to write, checked for null.
                        unsafe { write(flag, 0) };
                        return Ok(());
                    }
                }
            }
            for (i, st) in all.iter().enumerate() {
                status_out(nth_status(statuses, i), st);
            }
            // SAFETY: an int to write, checked for null.
            unsafe { write(flag, 1) };
            Ok(())
        })())
    }

    fn MPI_Request_get_status_some / PMPI_Request_get_status_some(n: c_int, reqs: *const Handle, outcount: *mut c_int, indices: *mut c_int, statuses: *mut MpiStatus) {
        self_ok((|| {
            // SAFETY: `n` handles (MPI's contract).
            let hs = unsafe { crate::array(reqs, n) }?;
            let (mut done, mut live) = (0usize, false);
            for (i, &h) in hs.iter().enumerate() {
                if !state::request_active(h) {
                    continue;
                }
                live = true;
                if let Some(st) = state::request_status(h)? {
                    // SAFETY: room for `n` indices (MPI's contract).
                    unsafe { write(indices.wrapping_add(done), i as c_int) };
                    status_out(nth_status(statuses, done), &st);
                    done += 1;
                }
            }
            // SAFETY: an int to write, checked for null.
            unsafe { write(outcount, if live { done as c_int } else { abi::UNDEFINED }) };
            Ok(())
        })())
    }
}
