//! earlybird's C ABI: `libmpi.so.12` with MPICH's ABI, so that a program compiled against
//! MPICH's `mpi.h` (Debian's `mpicc.mpich`, the mpi4py wheel, Intel's binaries) runs on earlybird
//! when this library is found first (`LD_LIBRARY_PATH`), under `ebrun` or alone (a singleton).
//!
//! # Design
//!
//! Handles are MPICH's `int`s: predefined objects have MPICH's values (`abi`); objects this
//! library makes are an index into a table of the calling thread's MPI state, with a kind
//! pattern in the top bits. Each function converts its arguments once (handles to earlybird
//! objects, `(pointer, count, datatype)` to a typed view of the caller's memory, ranks to
//! earlybird's numbering), calls the Rust API, and converts back (status layout, ranks, error
//! codes). Every function exists as `PMPI_X` and as `MPI_X`, which calls it, so that tools can
//! interpose on `MPI_X`.
//!
//! Errors: an error the Rust API raises goes through the communicator's error handler there
//! (MPI_ERRORS_ARE_FATAL ends the job, as MPI's default says); one this layer finds (a bad
//! handle, a null pointer) goes through the same handler here. With MPI_ERRORS_RETURN the
//! function returns the error's class.
//!
//! Threads: `MPI_Init_thread` provides the level asked for. Below SERIALIZED the MPI state
//! lives in the thread that called `MPI_Init`, and a call from another thread finds none
//! (MPI_ERR_OTHER); from SERIALIZED it is the process's. Under SERIALIZED it is used by one
//! thread at a time as the program promises; under MULTIPLE a call reaches it holding one
//! lock, and the blocking calls that wait on other processes or threads (point-to-point,
//! probes, the waits, every collective) run as their nonblocking form and a wait that lets
//! the lock go between tries, so a blocking call blocks only its own thread (`state::Entry`,
//! `state::Wait`). Threads that drive endpoints keep tables of their own at every level
//! (`endpoints.rs`) and take no lock.
//!
//! # Safety
//!
//! These functions take raw pointers from C. Each trusts what MPI's C binding promises about
//! them (a buffer of `count` elements of `datatype`, an `MPI_Status` to write, a request that
//! stays valid), checks what it can (null pointers, handles, counts), and never keeps a pointer
//! past the call except for a nonblocking operation's buffer, which MPI says the program
//! leaves alone until the operation completes.
//!
//! What this first part covers: init and finalize with their queries, communicators (rank,
//! size, dup, split, free, compare, error handlers), point-to-point (blocking, nonblocking,
//! wait/test, probe, get_count), and the blocking collectives barrier, bcast, reduce,
//! allreduce, gather, scatter, allgather, alltoall, on the predefined datatypes and operations.
#![allow(clippy::missing_safety_doc, non_snake_case)]

mod abi;
mod signature_check;
mod state;
pub mod unsupported;

use abi::{Handle, MpiStatus, MPI_SUCCESS};
use earlybird::{Datatype, Error, ErrorClass, Status};
use state::{buf_in, buf_out, by_elem, fail, ok_or_code, slice_in, slice_out, with_comm, write};
use std::ffi::{c_char, c_double, c_int, c_void};

thread_local! {
    /// The C function behind each operation MPI_Op_create made, by handle.
    static USER_FUNCTIONS: std::cell::RefCell<std::collections::HashMap<Handle, UserFn>> =
        std::cell::RefCell::new(std::collections::HashMap::new());
}

/// C's `MPI_User_function`.
pub(crate) type UserFunction =
    unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_int, *mut Handle);

/// A detached buffer's address and size into `buf` (where MPI's C binding stores the
/// address: a `void **` passed as `void *`) and `size`. An automatic buffer is given back as
/// MPI_BUFFER_AUTOMATIC with size 0.
///
/// # Safety
/// `buf` is null or points to a `void *`, `size` is null or points to an int.
unsafe fn detached((p, n): (usize, i64), buf: *mut c_void, size: *mut c_int) {
    // SAFETY: the function's contract; both checked for null.
    unsafe {
        write(buf.cast::<usize>(), p);
        write(size, c_int::try_from(n).unwrap_or(c_int::MAX));
    }
}

/// This host's name (MPI_Get_processor_name's).
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".to_string())
}

/// C's `MPI_User_function_c` (MPI_Op_create_c): the length as an `MPI_Count`.
pub(crate) type UserFunctionC =
    unsafe extern "C" fn(*mut c_void, *mut c_void, *mut i64, *mut Handle);

/// The C function of an operation the program made: by MPI_Op_create or MPI_Op_create_c.
#[derive(Clone, Copy)]
enum UserFn {
    Int(UserFunction),
    Count(UserFunctionC),
}

impl UserFn {
    /// Call it on `n` elements of the datatype `h` names.
    ///
    /// # Safety
    /// `a` and `b` hold `n` such elements; the function reads `a` and writes `b`.
    unsafe fn call(self, a: *mut c_void, b: *mut c_void, n: usize, mut h: Handle) {
        // SAFETY: the function's contract, with MPI's `len` and `datatype` pointers.
        unsafe {
            match self {
                UserFn::Int(f) => f(a, b, &mut c_int::try_from(n).unwrap_or(c_int::MAX), &mut h),
                UserFn::Count(f) => f(a, b, &mut (n as i64), &mut h),
            }
        }
    }
}

/// MPI_Op_create and MPI_Op_create_c: an operation that calls `f` with the two buffers, the
/// element count and the datatype's handle.
fn op_create(commute: c_int, op: *mut Handle, f: UserFn) -> c_int {
    let user = earlybird::Op::user_bytes(
        commute != 0,
        move |a: &[u8], b: &mut [u8], n: usize, dt: &Datatype| {
            // SAFETY: `a` and `b` hold `n` elements of `dt` (the library's contract with the
            // operation); the function reads `a` and writes `b` as MPI says it may.
            unsafe {
                f.call(
                    a.as_ptr() as *mut c_void,
                    b.as_mut_ptr().cast(),
                    n,
                    state::handle_of(dt),
                )
            }
        },
    );
    let r = state::add_op(user).inspect(|&h| {
        USER_FUNCTIONS.with(|m| m.borrow_mut().insert(h, f));
    });
    // SAFETY: a handle to write, checked for null.
    self_ok(r.map(|h| unsafe { write(op, h) }))
}

/// C's `MPI_Comm_errhandler_function` (variadic in C; called with the two arguments MPI
/// defines).
pub(crate) type ErrhandlerFunction = unsafe extern "C" fn(*mut Handle, *mut c_int, ...);

/// C's `MPI_Comm_copy_attr_function`.
pub(crate) type CopyFunction =
    unsafe extern "C" fn(Handle, c_int, *mut c_void, *mut c_void, *mut c_void, *mut c_int) -> c_int;
/// C's `MPI_Comm_delete_attr_function`.
pub(crate) type DeleteFunction =
    unsafe extern "C" fn(Handle, c_int, *mut c_void, *mut c_void) -> c_int;

/// MPI_COMM_DUP_FN (MPICH's header names it `MPIR_Dup_fn`): the copy carries the value.
///
/// # Safety
/// `out` points to a `void *` and `flag` to an int, as the C binding says.
#[no_mangle]
pub unsafe extern "C" fn MPIR_Dup_fn(
    _old: Handle,
    _keyval: c_int,
    _extra: *mut c_void,
    value_in: *mut c_void,
    value_out: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    // SAFETY: the function's contract; both checked for null.
    unsafe {
        write(value_out.cast::<*mut c_void>(), value_in);
        write(flag, 1);
    }
    MPI_SUCCESS
}

/// Each function as `PMPI_name` (the implementation) and `MPI_name` (calls it).
macro_rules! mpi {
    ($(fn $name:ident / $pname:ident ($($a:ident : $t:ty),* $(,)?) $body:block)*) => {$(
        #[no_mangle]
        pub unsafe extern "C" fn $pname($($a: $t),*) -> c_int {
            let _entry = crate::state::enter();
            $body
        }

        #[no_mangle]
        pub unsafe extern "C" fn $name($($a: $t),*) -> c_int {
            // SAFETY: the same arguments, under the same contract.
            unsafe { $pname($($a),*) }
        }
    )*};
}

pub mod assertions;
mod attribute_keys;
pub mod channels;
pub mod collectives;
pub mod comms;
pub mod datatypes;
pub mod endpoints;
mod f90_types;
pub mod fault_tolerance;
pub mod large_count;
pub mod partitioned;
pub mod pmem;
pub mod pt2pt;
pub mod sessions;
pub mod sync_counters;
pub mod type_attributes;
pub mod type_constructors;
mod widths;
pub mod windows;

fn status_out(s: *mut MpiStatus, st: &Status) {
    status_fields(
        s,
        st.bytes() as u64,
        st.is_cancelled(),
        abi::rank_out(st.source()),
        st.tag(),
    );
}

/// Write a status's count, cancelled flag, source and tag. MPI_ERROR is left as it is: MPI
/// sets it only when a call that completes several requests returns MPI_ERR_IN_STATUS, which
/// no call here does (each reports its first error as its result).
fn status_fields(s: *mut MpiStatus, bytes: u64, cancelled: bool, source: c_int, tag: c_int) {
    if s.is_null() || s as usize == abi::STATUS_IGNORE {
        return;
    }
    // SAFETY: a status pointer that is not MPI_STATUS_IGNORE points to an MPI_Status (MPI's
    // contract); null was checked. The fields are written one by one, through the pointer.
    unsafe {
        (&raw mut (*s).count_lo).write(bytes as u32 as i32);
        (&raw mut (*s).count_hi_and_cancelled)
            .write((((bytes >> 32) as i32) << 1) | i32::from(cancelled));
        (&raw mut (*s).source).write(source);
        (&raw mut (*s).tag).write(tag);
    }
}

mpi! {
    // ---- init, finalize, queries ---------------------------------------------------------

    fn MPI_Init / PMPI_Init(_argc: *mut c_int, _argv: *mut *mut *mut c_char) {
        state::init()
    }

    fn MPI_Init_thread / PMPI_Init_thread(
        _argc: *mut c_int,
        _argv: *mut *mut *mut c_char,
        required: c_int,
        provided: *mut c_int,
    ) {
        let r = state::init_with(abi::thread_level(required), earlybird::Assertions::empty());
        if r == MPI_SUCCESS {
            // SAFETY: `provided` is an int to write (MPI's contract), checked for null.
            unsafe { write(provided, abi::thread_level_code(state::thread_level())) };
        }
        r
    }

    fn MPI_Initialized / PMPI_Initialized(flag: *mut c_int) {
        // SAFETY: an int to write, checked for null.
        unsafe { write(flag, c_int::from(state::initialized())) };
        MPI_SUCCESS
    }

    fn MPI_Finalized / PMPI_Finalized(flag: *mut c_int) {
        // SAFETY: an int to write, checked for null.
        unsafe { write(flag, c_int::from(state::finalized())) };
        MPI_SUCCESS
    }

    fn MPI_Finalize / PMPI_Finalize() {
        state::finalize()
    }

    fn MPI_Abort / PMPI_Abort(comm: Handle, code: c_int) {
        let c = with_comm(comm, |c| Ok(c.clone()));
        match c {
            Ok(c) => c.abort(code),
            Err(_) => std::process::exit(code),
        }
    }

    fn MPI_Query_thread / PMPI_Query_thread(provided: *mut c_int) {
        // SAFETY: an int to write, checked for null.
        unsafe { write(provided, abi::thread_level_code(state::thread_level())) };
        MPI_SUCCESS
    }

    fn MPI_Is_thread_main / PMPI_Is_thread_main(flag: *mut c_int) {
        // SAFETY: an int to write, checked for null.
        unsafe { write(flag, c_int::from(state::is_main_thread())) };
        MPI_SUCCESS
    }

    fn MPI_Get_version / PMPI_Get_version(version: *mut c_int, subversion: *mut c_int) {
        // SAFETY: ints to write, checked for null.
        unsafe {
            write(version, 4);
            write(subversion, 1);
        }
        MPI_SUCCESS
    }

    fn MPI_Get_library_version / PMPI_Get_library_version(out: *mut c_char, len: *mut c_int) {
        let text = format!("earlybird {} (MPICH ABI)", env!("CARGO_PKG_VERSION"));
        // SAFETY: `out` holds MPI_MAX_LIBRARY_VERSION_STRING chars, `len` is an int.
        unsafe { state::write_str(out, abi::MAX_LIBRARY_VERSION_STRING, &text, len) };
        MPI_SUCCESS
    }

    fn MPI_Get_processor_name / PMPI_Get_processor_name(out: *mut c_char, len: *mut c_int) {
        // SAFETY: `out` holds MPI_MAX_PROCESSOR_NAME chars, `len` is an int.
        unsafe { state::write_str(out, abi::MAX_PROCESSOR_NAME, &host_name(), len) };
        MPI_SUCCESS
    }

    fn MPI_Get_hw_resource_info / PMPI_Get_hw_resource_info(hw_info: *mut Handle) {
        // MPI 4.1 leaves the keys to the implementation: the host (as MPI_Get_processor_name
        // names it) and the number of CPUs this process may run on, now.
        let r = (|| {
            let mut info = earlybird::Info::new();
            info.set("earlybird_host", &host_name())?;
            let cpus = std::thread::available_parallelism().map_or(1, usize::from);
            info.set("earlybird_cpus", &cpus.to_string())?;
            state::add_info(info)
        })();
        // SAFETY: a handle to write (MPI's contract), checked for null.
        self_ok(r.map(|h| unsafe { write(hw_info, h) }))
    }

    fn MPI_Error_string / PMPI_Error_string(code: c_int, out: *mut c_char, len: *mut c_int) {
        let text = earlybird::error_string(code).unwrap_or_else(|_| format!("unknown error code {code}"));
        // SAFETY: `out` holds MPI_MAX_ERROR_STRING chars, `len` is an int.
        unsafe { state::write_str(out, abi::MAX_ERROR_STRING, &text, len) };
        MPI_SUCCESS
    }

    fn MPI_Error_class / PMPI_Error_class(code: c_int, class: *mut c_int) {
        match earlybird::error_class(code) {
            Ok(c) => {
                // SAFETY: an int to write, checked for null.
                unsafe { write(class, c.code()) };
                MPI_SUCCESS
            }
            Err(e) => e.code(),
        }
    }

    // ---- communicators ---------------------------------------------------------------------

    fn MPI_Comm_rank / PMPI_Comm_rank(comm: Handle, rank: *mut c_int) {
        ok_or_code(with_comm(comm, |c| {
            // SAFETY: an int to write, checked for null.
            unsafe { write(rank, c.rank()) };
            Ok(())
        }))
    }

    fn MPI_Comm_size / PMPI_Comm_size(comm: Handle, size: *mut c_int) {
        ok_or_code(with_comm(comm, |c| {
            // SAFETY: an int to write, checked for null.
            unsafe { write(size, c.size()) };
            Ok(())
        }))
    }

    fn MPI_Comm_dup / PMPI_Comm_dup(comm: Handle, out: *mut Handle) {
        // Copy callbacks run: the communicator is taken out of the state for the call.
        let r = state::with_comm_aside(comm, |c| c.dup()).map(state::add_comm);
        ok_or_code(r.map(|h| {
            // SAFETY: a handle to write, checked for null.
            unsafe { write(out, h) }
        }))
    }

    fn MPI_Comm_split / PMPI_Comm_split(comm: Handle, color: c_int, key: c_int, out: *mut Handle) {
        let color = if color == abi::UNDEFINED { earlybird::UNDEFINED } else { color };
        let r = state::with_comm_aside(comm, |c| c.split(color, key))
            .map(|d| d.map_or(abi::COMM_NULL, state::add_comm));
        ok_or_code(r.map(|h| {
            // SAFETY: a handle to write, checked for null.
            unsafe { write(out, h) }
        }))
    }

    fn MPI_Comm_free / PMPI_Comm_free(comm: *mut Handle) {
        if comm.is_null() {
            return fail(abi::COMM_WORLD, "MPI_Comm_free", Error::new(ErrorClass::Arg, "a null communicator pointer"));
        }
        // SAFETY: a handle to read and write, checked for null.
        let h = unsafe { comm.read() };
        match state::free_comm(h) {
            Ok(()) => {
                // SAFETY: as above.
                unsafe { comm.write(abi::COMM_NULL) };
                MPI_SUCCESS
            }
            Err(code) => code,
        }
    }

    fn MPI_Comm_compare / PMPI_Comm_compare(a: Handle, b: Handle, result: *mut c_int) {
        crate::endpoints::attach_pending(b);
        let r = with_comm(a, |a| with_comm(b, |b| Ok(a.compare(b))));
        ok_or_code(r.map(|c| {
            let v = comms::comparison(c);
            // SAFETY: an int to write, checked for null.
            unsafe { write(result, v) }
        }))
    }

    fn MPI_Comm_get_parent / PMPI_Comm_get_parent(parent: *mut Handle) {
        // No process of an earlybird job was spawned by another: MPI_COMM_NULL.
        // SAFETY: a handle to write, checked for null.
        unsafe { write(parent, abi::COMM_NULL) };
        MPI_SUCCESS
    }

    fn MPI_Comm_set_errhandler / PMPI_Comm_set_errhandler(comm: Handle, eh: Handle) {
        let h = match state::errhandler_of(eh) {
            Ok(h) => h,
            Err(e) => return fail(comm, "MPI_Comm_set_errhandler", e),
        };
        ok_or_code(with_comm(comm, |c| {
            c.set_errhandler(h);
            Ok(())
        }))
    }

    fn MPI_Comm_get_errhandler / PMPI_Comm_get_errhandler(comm: Handle, out: *mut Handle) {
        ok_or_code(with_comm(comm, |c| {
            let h = state::errhandler_handle(&c.errhandler());
            // SAFETY: a handle to write, checked for null.
            unsafe { write(out, h) };
            Ok(())
        }))
    }

    fn MPI_Comm_create_errhandler / PMPI_Comm_create_errhandler(f: Option<ErrhandlerFunction>, out: *mut Handle) {
        let Some(f) = f else {
            return self_ok(Err::<(), _>(Error::new(ErrorClass::Arg, "MPI_Comm_create_errhandler: a null function")));
        };
        state::user_handler_made();
        let h = earlybird::Comm::create_errhandler(move |c: &earlybird::Comm, e: &Error| {
            let mut comm = state::handle_of_comm(c);
            let mut code = e.code();
            state::note_user_handler_ran();
            // SAFETY: the program's handler, called as MPI's C binding says (a pointer to the
            // communicator's handle and one to the error code).
            unsafe { f(&mut comm, &mut code) }
        });
        // SAFETY: a handle to write, checked for null.
        self_ok(state::add_errhandler(h).map(|x| unsafe { write(out, x) }))
    }

    fn MPI_Errhandler_free / PMPI_Errhandler_free(eh: *mut Handle) {
        // SAFETY: a handle to read (MPI's contract).
        let r = unsafe { read_handle(eh) }.and_then(state::take_errhandler);
        if r.is_ok() {
            // SAFETY: as above, checked for null by `read_handle`.
            unsafe { eh.write(abi::ERRHANDLER_NULL) };
        }
        self_ok(r)
    }

    fn MPI_Comm_call_errhandler / PMPI_Comm_call_errhandler(comm: Handle, code: c_int) {
        let e = Error::new(earlybird::error_class(code).unwrap_or(ErrorClass::Other), format!("error code {code} raised by the program"));
        match with_comm(comm, |_| Err::<(), _>(e)) {
            Ok(()) | Err(_) => MPI_SUCCESS,
        }
    }

    // ---- intercommunicators ------------------------------------------------------------------------

    fn MPI_Intercomm_create / PMPI_Intercomm_create(local: Handle, local_leader: c_int, peer: Handle, remote_leader: c_int, tag: c_int, out: *mut Handle) {
        crate::endpoints::attach_pending(peer);
        let r = state::with_comm_aside(local, |l| {
            // The peer communicator matters at the leaders only.
            let p = if l.rank() == local_leader { with_comm(peer, |p| Ok(p.clone()))? } else { l.clone() };
            l.intercomm_create(local_leader, &p, remote_leader, tag)
        })
        .map(state::add_comm);
        // SAFETY: a handle to write, checked for null.
        ok_or_code(r.map(|h| unsafe { write(out, h) }))
    }

    fn MPI_Intercomm_merge / PMPI_Intercomm_merge(inter: Handle, high: c_int, out: *mut Handle) {
        let r = state::with_comm_aside(inter, |c| c.intercomm_merge(high != 0)).map(state::add_comm);
        // SAFETY: a handle to write, checked for null.
        ok_or_code(r.map(|h| unsafe { write(out, h) }))
    }

    fn MPI_Comm_remote_size / PMPI_Comm_remote_size(comm: Handle, size: *mut c_int) {
        // SAFETY: an int to write, checked for null.
        ok_or_code(with_comm(comm, |c| c.remote_size().map(|n| unsafe { write(size, n) })))
    }

    fn MPI_Comm_remote_group / PMPI_Comm_remote_group(comm: Handle, group: *mut Handle) {
        let r = with_comm(comm, |c| c.remote_group()).and_then(state::add_group);
        // SAFETY: a handle to write, checked for null.
        ok_or_code(r.map(|h| unsafe { write(group, h) }))
    }

    // ---- point to point ----------------------------------------------------------------------

    fn MPI_Send / PMPI_Send(buf: *const c_void, count: c_int, dt: Handle, dest: c_int, tag: c_int, comm: Handle) {
        // SAFETY: `buf` holds `count` elements of `dt` (MPI's contract).
        unsafe { send(buf, count, dt, dest, tag, comm, Blocking::Standard) }
    }

    fn MPI_Ssend / PMPI_Ssend(buf: *const c_void, count: c_int, dt: Handle, dest: c_int, tag: c_int, comm: Handle) {
        // SAFETY: as for MPI_Send.
        unsafe { send(buf, count, dt, dest, tag, comm, Blocking::Synchronous) }
    }

    fn MPI_Rsend / PMPI_Rsend(buf: *const c_void, count: c_int, dt: Handle, dest: c_int, tag: c_int, comm: Handle) {
        // SAFETY: as for MPI_Send.
        unsafe { send(buf, count, dt, dest, tag, comm, Blocking::Ready) }
    }

    fn MPI_Bsend / PMPI_Bsend(buf: *const c_void, count: c_int, dt: Handle, dest: c_int, tag: c_int, comm: Handle) {
        // SAFETY: as for MPI_Send.
        unsafe { send(buf, count, dt, dest, tag, comm, Blocking::Buffered) }
    }

    fn MPI_Buffer_attach / PMPI_Buffer_attach(buf: *mut c_void, size: c_int) {
        self_ok(state::buffer_attach(None, buf, size.into()))
    }

    fn MPI_Buffer_detach / PMPI_Buffer_detach(buf: *mut c_void, size: *mut c_int) {
        // SAFETY: MPI's C binding (see `detached`).
        self_ok(state::buffer_detach(None).map(|d| unsafe { detached(d, buf, size) }))
    }

    fn MPI_Buffer_flush / PMPI_Buffer_flush() {
        self_ok(state::buffer_flush(None))
    }

    fn MPI_Buffer_iflush / PMPI_Buffer_iflush(req: *mut Handle) {
        // SAFETY: a handle to write, checked for null.
        self_ok(state::buffer_iflush(None).map(|h| unsafe { write(req, h) }))
    }

    fn MPI_Comm_attach_buffer / PMPI_Comm_attach_buffer(comm: Handle, buf: *mut c_void, size: c_int) {
        ok_or_code(state::buffer_attach(Some(comm), buf, size.into()))
    }

    fn MPI_Comm_detach_buffer / PMPI_Comm_detach_buffer(comm: Handle, buf: *mut c_void, size: *mut c_int) {
        // SAFETY: MPI's C binding (see `detached`).
        ok_or_code(state::buffer_detach(Some(comm)).map(|d| unsafe { detached(d, buf, size) }))
    }

    fn MPI_Comm_flush_buffer / PMPI_Comm_flush_buffer(comm: Handle) {
        ok_or_code(state::buffer_flush(Some(comm)))
    }

    fn MPI_Comm_iflush_buffer / PMPI_Comm_iflush_buffer(comm: Handle, req: *mut Handle) {
        // SAFETY: a handle to write, checked for null.
        ok_or_code(state::buffer_iflush(Some(comm)).map(|h| unsafe { write(req, h) }))
    }

    fn MPI_Pack_size / PMPI_Pack_size(count: c_int, dt: Handle, _comm: Handle, size: *mut c_int) {
        let r = len(count).and_then(|n| state::type_of(dt)?.pack_size(n)).and_then(|n| {
            c_int::try_from(n).map_err(|_| Error::new(ErrorClass::ValueTooLarge, format!("MPI_Pack_size: {n} bytes, beyond INT_MAX (MPI_Pack_size_c gives it)")))
        });
        // SAFETY: an int to write, checked for null.
        self_ok(r.map(|n| unsafe { write(size, n) }))
    }

    fn MPI_Pack / PMPI_Pack(inbuf: *const c_void, count: c_int, dt: Handle, outbuf: *mut c_void, outsize: c_int, position: *mut c_int, _comm: Handle) {
        // SAFETY: the caller's contract.
        self_ok(unsafe { pack(inbuf, count, dt, outbuf, outsize, position) })
    }

    fn MPI_Pack_c / PMPI_Pack_c(inbuf: *const c_void, count: i64, dt: Handle, outbuf: *mut c_void, outsize: i64, position: *mut i64, _comm: Handle) {
        // SAFETY: the caller's contract.
        self_ok(unsafe { pack(inbuf, count, dt, outbuf, outsize, position) })
    }

    fn MPI_Unpack / PMPI_Unpack(inbuf: *const c_void, insize: c_int, position: *mut c_int, outbuf: *mut c_void, count: c_int, dt: Handle, _comm: Handle) {
        // SAFETY: the caller's contract.
        self_ok(unsafe { unpack(inbuf, insize, position, outbuf, count, dt) })
    }

    fn MPI_Unpack_c / PMPI_Unpack_c(inbuf: *const c_void, insize: i64, position: *mut i64, outbuf: *mut c_void, count: i64, dt: Handle, _comm: Handle) {
        // SAFETY: the caller's contract.
        self_ok(unsafe { unpack(inbuf, insize, position, outbuf, count, dt) })
    }

    fn MPI_Recv / PMPI_Recv(buf: *mut c_void, count: c_int, dt: Handle, src: c_int, tag: c_int, comm: Handle, status: *mut MpiStatus) {
        if state::waits_let_go() {
            // SAFETY: MPI_Irecv's contract, the request completed here.
            return state::via_request(|r| unsafe { PMPI_Irecv(buf, count, dt, src, tag, comm, r) }, status);
        }
        // SAFETY: `buf` has room for `count` elements of `dt` (MPI's contract).
        if let Some(r) = unsafe { state::quick::recv(buf, count, dt, src, tag, comm) } {
            return ok_or_code(r.map(|st| status_out(status, &st)));
        }
        ok_or_code(with_comm(comm, |c| {
            let src = abi::rank_in(src);
            by_elem!(dt, T => {
                // SAFETY: `buf` has room for `count` elements of `dt`, here `T`s (MPI's
                // contract).
                if let Some(b) = unsafe { slice_out::<T>(buf, count) }? {
                    let st = c.recv(b, src, tag)?;
                    status_out(status, &st);
                    return Ok(());
                }
            });
            // SAFETY: `buf` has room for `count` elements of `dt` (MPI's contract).
            let mut b = unsafe { buf_out(buf, count, dt) }?;
            let st = c.recv(&mut b, src, tag)?;
            status_out(status, &st);
            Ok(())
        }))
    }

    fn MPI_Sendrecv / PMPI_Sendrecv(
        sbuf: *const c_void, scount: c_int, sdt: Handle, dest: c_int, stag: c_int,
        rbuf: *mut c_void, rcount: c_int, rdt: Handle, src: c_int, rtag: c_int,
        comm: Handle, status: *mut MpiStatus,
    ) {
        if state::waits_let_go() {
            // SAFETY: MPI_Isendrecv's contract, the request completed here.
            return state::via_request(|r| unsafe { pt2pt::PMPI_Isendrecv(sbuf, scount, sdt, dest, stag, rbuf, rcount, rdt, src, rtag, comm, r) }, status);
        }
        ok_or_code(with_comm(comm, |c| {
            // SAFETY: the two buffers as MPI's contract says.
            let (s, mut r) = unsafe { (buf_in(sbuf, scount, sdt)?, buf_out(rbuf, rcount, rdt)?) };
            let st = c.sendrecv(&s, abi::rank_in(dest), stag, &mut r, abi::rank_in(src), rtag)?;
            status_out(status, &st);
            Ok(())
        }))
    }

    fn MPI_Isend / PMPI_Isend(buf: *const c_void, count: c_int, dt: Handle, dest: c_int, tag: c_int, comm: Handle, req: *mut Handle) {
        // SAFETY: MPI's contract for the call, as below.
        if let Some(code) = unsafe { state::quick::isend(buf, count, dt, dest, tag, comm, req) } {
            return code;
        }
        // SAFETY: MPI's contract for the call (the buffer left alone until the request
        // completes, or for a persistent request for its whole life).
        unsafe { pt2pt::send_request(buf, count, dt, dest, tag, comm, req, state::Mode::Standard) }
    }

    fn MPI_Issend / PMPI_Issend(buf: *const c_void, count: c_int, dt: Handle, dest: c_int, tag: c_int, comm: Handle, req: *mut Handle) {
        // SAFETY: MPI's contract for the call (the buffer left alone until the request
        // completes, or for a persistent request for its whole life).
        unsafe { pt2pt::send_request(buf, count, dt, dest, tag, comm, req, state::Mode::Synchronous) }
    }

    fn MPI_Irecv / PMPI_Irecv(buf: *mut c_void, count: c_int, dt: Handle, src: c_int, tag: c_int, comm: Handle, req: *mut Handle) {
        // SAFETY: MPI's contract for the call, as below.
        if let Some(code) = unsafe { state::quick::irecv(buf, count, dt, src, tag, comm, req) } {
            return code;
        }
        // SAFETY: `buf` has room for `count` elements of `dt` and is left alone until the
        // request completes (MPI's contract).
        ok_or_code(unsafe { state::start_recv(buf, count, dt, src, tag, comm, false) }.map(|h| {
            // SAFETY: a handle to write, checked for null.
            unsafe { write(req, h) }
        }))
    }

    fn MPI_Send_init / PMPI_Send_init(buf: *const c_void, count: c_int, dt: Handle, dest: c_int, tag: c_int, comm: Handle, req: *mut Handle) {
        // SAFETY: MPI's contract for the call (the buffer left alone until the request
        // completes, or for a persistent request for its whole life).
        unsafe { pt2pt::send_request(buf, count, dt, dest, tag, comm, req, state::Mode::StandardInit) }
    }

    fn MPI_Ssend_init / PMPI_Ssend_init(buf: *const c_void, count: c_int, dt: Handle, dest: c_int, tag: c_int, comm: Handle, req: *mut Handle) {
        // SAFETY: MPI's contract for the call (the buffer left alone until the request
        // completes, or for a persistent request for its whole life).
        unsafe { pt2pt::send_request(buf, count, dt, dest, tag, comm, req, state::Mode::SynchronousInit) }
    }

    fn MPI_Recv_init / PMPI_Recv_init(buf: *mut c_void, count: c_int, dt: Handle, src: c_int, tag: c_int, comm: Handle, req: *mut Handle) {
        // SAFETY: `buf` has room for `count` elements of `dt` for as long as the request
        // lives (MPI's contract).
        ok_or_code(unsafe { state::start_recv(buf, count, dt, src, tag, comm, true) }.map(|h| {
            // SAFETY: a handle to write, checked for null.
            unsafe { write(req, h) }
        }))
    }

    fn MPI_Start / PMPI_Start(req: *mut Handle) {
        // SAFETY: a request handle to read (MPI's contract).
        let r = unsafe { read_handle(req) }.and_then(state::start);
        self_ok(r)
    }

    fn MPI_Startall / PMPI_Startall(n: c_int, reqs: *mut Handle) {
        // SAFETY: `n` request handles (MPI's contract).
        let r = unsafe { array(reqs, n) }.and_then(|hs| hs.iter().try_for_each(|&h| state::start(h)));
        self_ok(r)
    }

    fn MPI_Wait / PMPI_Wait(req: *mut Handle, status: *mut MpiStatus) {
        if state::waits_let_go() && !req.is_null() {
            // SAFETY: a request handle to read (MPI's contract).
            if let Err(c) = state::until_ready(&[unsafe { req.read() }]) {
                return c;
            }
        }
        // SAFETY: a request handle to read and write, and a status (MPI's contract).
        unsafe { state::complete(req, status, true) }.map_or_else(|c| c, |_| MPI_SUCCESS)
    }

    fn MPI_Test / PMPI_Test(req: *mut Handle, flag: *mut c_int, status: *mut MpiStatus) {
        // SAFETY: as for MPI_Wait.
        match unsafe { state::complete(req, status, false) } {
            Ok(done) => {
                // SAFETY: an int to write, checked for null.
                unsafe { write(flag, c_int::from(done)) };
                MPI_SUCCESS
            }
            Err(code) => code,
        }
    }

    fn MPI_Waitall / PMPI_Waitall(n: c_int, reqs: *mut Handle, statuses: *mut MpiStatus) {
        if state::waits_let_go() && !reqs.is_null() && n > 0 {
            // SAFETY: `reqs` holds `n` handles (MPI's contract).
            if let Err(c) = state::until_ready(unsafe { std::slice::from_raw_parts(reqs, n as usize) }) {
                return c;
            }
        }
        // SAFETY: `reqs` holds `n` handles and `statuses` `n` statuses (MPI's contract).
        unsafe { state::wait_all(n, reqs, statuses) }
    }

    fn MPI_Testall / PMPI_Testall(n: c_int, reqs: *mut Handle, flag: *mut c_int, statuses: *mut MpiStatus) {
        // MPI: true only when every request has completed; those that did are completed
        // (and nulled) here either way.
        let mut all = true;
        for i in 0..n.max(0) as usize {
            let st = pt2pt::nth_status(statuses, i);
            // SAFETY: `reqs` holds `n` handles and `statuses` `n` statuses (MPI's contract).
            match unsafe { state::complete(reqs.wrapping_add(i), st, false) } {
                Ok(done) => {
                    if done {
                        // As MPI_Waitall's statuses (see state::wait_all).
                        state::status_error(st, MPI_SUCCESS);
                    }
                    all &= done;
                }
                Err(c) => return c,
            }
        }
        // SAFETY: an int to write, checked for null.
        unsafe { write(flag, c_int::from(all)) };
        MPI_SUCCESS
    }

    fn MPI_Waitany / PMPI_Waitany(n: c_int, reqs: *mut Handle, index: *mut c_int, status: *mut MpiStatus) {
        let n = n.max(0) as usize;
        let mut w = state::Wait::new();
        loop {
            let mut live = false;
            for i in 0..n {
                let r = reqs.wrapping_add(i);
                // SAFETY: `reqs` holds `n` handles (MPI's contract).
                if r.is_null() || !state::request_active(unsafe { r.read() }) {
                    continue;
                }
                live = true;
                // SAFETY: as above; `status` is a status or MPI_STATUS_IGNORE.
                match unsafe { state::complete(r, status, false) } {
                    Ok(true) => {
                        // SAFETY: an int to write, checked for null.
                        unsafe { write(index, i as c_int) };
                        return MPI_SUCCESS;
                    }
                    Ok(false) => {}
                    Err(c) => return c,
                }
            }
            if !live {
                // SAFETY: an int to write, checked for null.
                unsafe { write(index, abi::UNDEFINED) };
                state::empty_status(status);
                return MPI_SUCCESS;
            }
            if let Err(c) = w.pause() {
                return c;
            }
        }
    }

    fn MPI_Testany / PMPI_Testany(n: c_int, reqs: *mut Handle, index: *mut c_int, flag: *mut c_int, status: *mut MpiStatus) {
        // SAFETY: `reqs` holds `n` handles, `status` is a status or ignored (MPI's contract).
        match unsafe { any(n, reqs, status) } {
            Ok((done, i)) => {
                // SAFETY: ints to write, checked for null.
                unsafe {
                    write(flag, c_int::from(done));
                    write(index, i);
                }
                MPI_SUCCESS
            }
            Err(c) => c,
        }
    }

    fn MPI_Waitsome / PMPI_Waitsome(n: c_int, reqs: *mut Handle, outcount: *mut c_int, indices: *mut c_int, statuses: *mut MpiStatus) {
        let mut w = state::Wait::new();
        loop {
            // SAFETY: `n` handles, room for `n` indices and statuses (MPI's contract).
            match unsafe { some(n, reqs, outcount, indices, statuses) } {
                Ok(0) => {
                    if let Err(c) = w.pause() {
                        return c;
                    }
                }
                Ok(_) => return MPI_SUCCESS,
                Err(c) => return c,
            }
        }
    }

    fn MPI_Testsome / PMPI_Testsome(n: c_int, reqs: *mut Handle, outcount: *mut c_int, indices: *mut c_int, statuses: *mut MpiStatus) {
        // SAFETY: `n` handles, room for `n` indices and statuses (MPI's contract).
        unsafe { some(n, reqs, outcount, indices, statuses) }.map_or_else(|c| c, |_| MPI_SUCCESS)
    }

    fn MPI_Cancel / PMPI_Cancel(req: *mut Handle) {
        // SAFETY: a request handle to read (MPI's contract).
        self_ok(unsafe { read_handle(req) }.and_then(state::cancel))
    }

    fn MPI_Test_cancelled / PMPI_Test_cancelled(status: *const MpiStatus, flag: *mut c_int) {
        if status.is_null() {
            return self_ok(Err::<(), _>(Error::new(ErrorClass::Arg, "MPI_Test_cancelled: a null status")));
        }
        // SAFETY: a status to read, checked for null; an int to write.
        unsafe { write(flag, status.read().count_hi_and_cancelled & 1) };
        MPI_SUCCESS
    }

    fn MPI_Request_free / PMPI_Request_free(req: *mut Handle) {
        // SAFETY: a request handle to read and write (MPI's contract).
        unsafe { state::free_request(req) }
    }

    fn MPI_Probe / PMPI_Probe(src: c_int, tag: c_int, comm: Handle, status: *mut MpiStatus) {
        if state::waits_let_go() {
            // SAFETY: the caller's status; an int of ours.
            return state::probe_until_found(|found| unsafe { PMPI_Iprobe(src, tag, comm, found, status) });
        }
        ok_or_code(with_comm(comm, |c| {
            let st = c.probe(abi::rank_in(src), tag)?;
            status_out(status, &st);
            Ok(())
        }))
    }

    fn MPI_Iprobe / PMPI_Iprobe(src: c_int, tag: c_int, comm: Handle, flag: *mut c_int, status: *mut MpiStatus) {
        ok_or_code(with_comm(comm, |c| {
            let st = c.iprobe(abi::rank_in(src), tag)?;
            // SAFETY: an int to write, checked for null.
            unsafe { write(flag, c_int::from(st.is_some())) };
            if let Some(st) = st {
                status_out(status, &st);
            }
            Ok(())
        }))
    }

    fn MPI_Get_count / PMPI_Get_count(status: *const MpiStatus, dt: Handle, count: *mut c_int) {
        // SAFETY: a status to read (MPI's contract).
        let r = unsafe { datatypes::whole_count("MPI_Get_count", status, dt) };
        // SAFETY: an int to write, checked for null.
        self_ok(r.map(|n| unsafe { write(count, datatypes::int_or_undefined(n)) }))
    }

    fn MPI_Comm_get_attr / PMPI_Comm_get_attr(comm: Handle, key: c_int, value: *mut c_void, flag: *mut c_int) {
        if key as u32 & 0xfc00_0000 == abi::KEYVAL_USER as u32 {
            return ok_or_code(with_comm(comm, |c| {
                let v = c.get_attr(&state::keyval_of(key)?)?;
                // SAFETY: `value` is where MPI's C binding stores the attribute (a `void **`
                // passed as `void *`), `flag` an int; both checked for null.
                unsafe {
                    if let Some(v) = v {
                        write(value.cast::<usize>(), v);
                    }
                    write(flag, c_int::from(v.is_some()));
                }
                Ok(())
            }));
        }
        ok_or_code(with_comm(comm, |_| {
            // The predefined attributes, MPI's "pointer to the value" (a static int here).
            let v: Option<&'static c_int> = match key {
                abi::TAG_UB => Some(&abi::TAG_UB_VALUE),
                abi::WTIME_IS_GLOBAL => Some(&abi::ZERO),
                abi::HOST | abi::IO => Some(&abi::PROC_NULL_VALUE),
                abi::c::MPI_APPNUM => Some(&abi::ZERO),
                abi::c::MPI_UNIVERSE_SIZE => Some(state::world_size_value()),
                abi::c::MPI_LASTUSEDCODE => Some(state::last_used_code_value()),
                _ => None,
            };
            // SAFETY: `value` is where MPI's C binding stores a pointer (a `void **` passed as
            // `void *`), `flag` an int; both checked for null.
            unsafe {
                if let Some(v) = v {
                    write(value.cast::<*const c_int>(), v as *const c_int);
                }
                write(flag, c_int::from(v.is_some()));
            }
            Ok(())
        }))
    }

    fn MPI_Reduce_local / PMPI_Reduce_local(inbuf: *const c_void, inoutbuf: *mut c_void, count: c_int, dt: Handle, op: Handle) {
        if let Some(f) = USER_FUNCTIONS.with(|m| m.borrow().get(&op).copied()) {
            // A C operation: called on the buffers as they are, with the program's own
            // datatype handle (any datatype, derived ones too), as MPI_Reduce_local says.
            if let Err(e) = state::type_of(dt).and_then(|_| len(count)) {
                return self_ok(Err::<(), _>(e));
            }
            // SAFETY: both buffers hold `count` elements of `dt` (MPI's contract); the
            // function reads the first and writes the second.
            unsafe { f.call(inbuf.cast_mut(), inoutbuf, count as usize, dt) };
            return MPI_SUCCESS;
        }
        self_ok((|| {
            let op = state::op_of(op)?;
            let b = abi::basic_type(dt).ok_or_else(|| state::bad_type(dt))?;
            macro_rules! local {
                ($T:ty) => {{
                    // SAFETY: both buffers hold `count` elements of `dt` (MPI's contract),
                    // here of the Rust type picked for it below.
                    let a = unsafe { slice_in::<$T>(inbuf, count) }?;
                    // SAFETY: as above.
                    let z = unsafe { slice_out::<$T>(inoutbuf, count) }?;
                    match (a, z) {
                        (Some(a), Some(z)) => earlybird::reduce_local(a, z, &op),
                        _ => Err(Error::new(ErrorClass::Buffer, "MPI_Reduce_local: a buffer not aligned for its datatype")),
                    }
                }};
            }
            use earlybird::BasicType as B;
            match b {
                B::Char | B::SignedChar | B::Int8 => local!(i8),
                B::UnsignedChar | B::Byte | B::Uint8 => local!(u8),
                B::Short | B::Int16 => local!(i16),
                B::UnsignedShort | B::Uint16 => local!(u16),
                B::Int | B::Int32 => local!(i32),
                B::Unsigned | B::Uint32 => local!(u32),
                B::Long | B::LongLong | B::Int64 | B::Aint | B::Offset | B::Count => local!(i64),
                B::UnsignedLong | B::UnsignedLongLong | B::Uint64 => local!(u64),
                B::Float => local!(f32),
                B::Double => local!(f64),
                B::LongDouble => local!(earlybird::LongDouble),
                B::CFloatComplex => local!(earlybird::Complex<f32>),
                B::CDoubleComplex => local!(earlybird::Complex<f64>),
                B::CLongDoubleComplex => local!(earlybird::Complex<earlybird::LongDouble>),
                B::CBool => local!(earlybird::CBool),
                B::FloatInt => local!(earlybird::ValueIndex<f32>),
                B::DoubleInt => local!(earlybird::ValueIndex<f64>),
                B::LongInt => local!(earlybird::ValueIndex<i64>),
                B::TwoInt => local!(earlybird::ValueIndex<i32>),
                B::ShortInt => local!(earlybird::ValueIndex<i16>),
                B::LongDoubleInt => local!(earlybird::ValueIndex<earlybird::LongDouble>),
                b => Err(Error::new(ErrorClass::Type, format!("MPI_Reduce_local on {}: not a type this library reduces locally", b.mpi_name()))),
            }
        })())
    }

    fn MPI_Sendrecv_replace / PMPI_Sendrecv_replace(buf: *mut c_void, count: c_int, dt: Handle, dest: c_int, stag: c_int, src: c_int, rtag: c_int, comm: Handle, status: *mut MpiStatus) {
        if state::waits_let_go() {
            // SAFETY: MPI_Isendrecv_replace's contract, the request completed here.
            return state::via_request(|r| unsafe { pt2pt::PMPI_Isendrecv_replace(buf, count, dt, dest, stag, src, rtag, comm, r) }, status);
        }
        ok_or_code(with_comm(comm, |c| {
            // SAFETY: `buf` holds `count` elements of `dt` (MPI's contract).
            let mut b = unsafe { buf_out(buf, count, dt) }?;
            let st = c.sendrecv_replace(&mut b, abi::rank_in(dest), stag, abi::rank_in(src), rtag)?;
            status_out(status, &st);
            Ok(())
        }))
    }

    fn MPI_Alloc_mem / PMPI_Alloc_mem(size: isize, _info: Handle, baseptr: *mut c_void) {
        match state::alloc_mem(size) {
            Ok(p) => {
                // SAFETY: `baseptr` is where MPI's C binding stores the pointer (a `void **`
                // passed as `void *`), checked for null.
                unsafe { write(baseptr.cast::<*mut c_void>(), p) };
                MPI_SUCCESS
            }
            Err(e) => self_ok(Err::<(), _>(e)),
        }
    }

    fn MPI_Free_mem / PMPI_Free_mem(base: *mut c_void) {
        // SAFETY: `base` came from MPI_Alloc_mem (MPI's contract).
        self_ok(unsafe { state::free_mem(base) })
    }

    fn MPI_Op_create / PMPI_Op_create(f: Option<UserFunction>, commute: c_int, op: *mut Handle) {
        let Some(f) = f else {
            return self_ok(Err::<(), _>(Error::new(ErrorClass::Arg, "MPI_Op_create: a null function")));
        };
        // The C function sees the datatype's handle, and MPI's `int *len` and
        // `MPI_Datatype *` arguments.
        op_create(commute, op, UserFn::Int(f))
    }

    fn MPI_Op_create_c / PMPI_Op_create_c(f: Option<UserFunctionC>, commute: c_int, op: *mut Handle) {
        let Some(f) = f else {
            return self_ok(Err::<(), _>(Error::new(ErrorClass::Arg, "MPI_Op_create_c: a null function")));
        };
        // As MPI_Op_create's, with an `MPI_Count *len`.
        op_create(commute, op, UserFn::Count(f))
    }

    fn MPI_Op_free / PMPI_Op_free(op: *mut Handle) {
        // SAFETY: an operation handle to read (MPI's contract).
        let r = unsafe { read_handle(op) }.and_then(|h| {
            USER_FUNCTIONS.with(|m| m.borrow_mut().remove(&h));
            state::take_op(h)
        });
        if r.is_ok() {
            // SAFETY: as above, checked for null by `read_handle`.
            unsafe { op.write(abi::OP_NULL) };
        }
        self_ok(r)
    }

    fn MPI_Op_commutative / PMPI_Op_commutative(op: Handle, commute: *mut c_int) {
        // SAFETY: an int to write, checked for null.
        self_ok(state::op_of(op).map(|o| unsafe { write(commute, c_int::from(o.is_commutative())) }))
    }

    // ---- attributes ---------------------------------------------------------------------------------

    fn MPI_Comm_create_keyval / PMPI_Comm_create_keyval(copy: Option<CopyFunction>, delete: Option<DeleteFunction>, keyval: *mut c_int, extra: *mut c_void) {
        let extra = extra as usize;
        let r = state::add_keyval(|me| {
            earlybird::Keyval::<usize>::new(
                move |old: &earlybird::Comm, v: &usize| {
                    // MPI_COMM_NULL_COPY_FN (a null function): the attribute stays behind.
                    let Some(f) = copy else { return Ok(None) };
                    let (mut out, mut flag) = (0usize, 0 as c_int);
                    // SAFETY: the program's copy function, called as MPI's C binding says.
                    let rc = unsafe { f(state::handle_of_comm(old), me, extra as *mut c_void, *v as *mut c_void, (&mut out as *mut usize).cast(), &mut flag) };
                    if rc != MPI_SUCCESS {
                        return Err(Error::new(ErrorClass::Other, format!("the copy function of keyval {me:#x} returned {rc}")));
                    }
                    Ok((flag != 0).then_some(out))
                },
                move |c: &earlybird::Comm, v: &usize| {
                    let Some(f) = delete else { return Ok(()) };
                    // SAFETY: the program's delete function, called as MPI's C binding says.
                    let rc = unsafe { f(state::handle_of_comm(c), me, *v as *mut c_void, extra as *mut c_void) };
                    if rc != MPI_SUCCESS {
                        return Err(Error::new(ErrorClass::Other, format!("the delete function of keyval {me:#x} returned {rc}")));
                    }
                    Ok(())
                },
            )
        });
        // SAFETY: an int to write, checked for null.
        self_ok(r.map(|h| unsafe { write(keyval, h) }))
    }

    fn MPI_Comm_free_keyval / PMPI_Comm_free_keyval(keyval: *mut c_int) {
        // SAFETY: a keyval to read (MPI's contract).
        let r = unsafe { read_handle(keyval) }.and_then(state::free_keyval);
        if r.is_ok() {
            // SAFETY: as above, checked for null by `read_handle`.
            unsafe { keyval.write(abi::KEYVAL_INVALID) };
        }
        self_ok(r)
    }

    fn MPI_Comm_set_attr / PMPI_Comm_set_attr(comm: Handle, keyval: c_int, value: *mut c_void) {
        // A replaced attribute's delete callback runs: see `with_comm_owned`.
        ok_or_code(state::with_comm_owned(comm, |c| c.set_attr(&state::keyval_of(keyval)?, value as usize)))
    }

    fn MPI_Comm_delete_attr / PMPI_Comm_delete_attr(comm: Handle, keyval: c_int) {
        // The delete callback runs: see `with_comm_owned`.
        ok_or_code(state::with_comm_owned(comm, |c| c.delete_attr(&state::keyval_of(keyval)?)))
    }

    // ---- info and names ----------------------------------------------------------------------------

    fn MPI_Info_create / PMPI_Info_create(info: *mut Handle) {
        // SAFETY: a handle to write, checked for null.
        self_ok(state::add_info(earlybird::Info::new()).map(|h| unsafe { write(info, h) }))
    }

    fn MPI_Info_set / PMPI_Info_set(info: Handle, key: *const c_char, value: *const c_char) {
        // SAFETY: NUL-terminated strings (MPI's contract).
        let kv = unsafe { (c_str(key), c_str(value)) };
        self_ok(kv.0.and_then(|k| kv.1.and_then(|v| state::with_info(info, |i| i.set(&k, &v)))))
    }

    fn MPI_Info_get / PMPI_Info_get(info: Handle, key: *const c_char, valuelen: c_int, value: *mut c_char, flag: *mut c_int) {
        // SAFETY: a NUL-terminated key (MPI's contract).
        let r = unsafe { c_str(key) }.and_then(|k| state::with_info(info, |i| Ok(i.get(&k)?.map(str::to_string))));
        self_ok(r.map(|v| {
            // SAFETY: `value` has room for `valuelen + 1` chars, `flag` is an int.
            unsafe {
                write(flag, c_int::from(v.is_some()));
                if let Some(v) = v {
                    state::write_str(value, valuelen.max(0) as usize + 1, &v, std::ptr::null_mut());
                }
            }
        }))
    }

    fn MPI_Info_get_valuelen / PMPI_Info_get_valuelen(info: Handle, key: *const c_char, valuelen: *mut c_int, flag: *mut c_int) {
        // SAFETY: a NUL-terminated key (MPI's contract).
        let r = unsafe { c_str(key) }.and_then(|k| state::with_info(info, |i| Ok(i.get(&k)?.map(str::len))));
        self_ok(r.map(|v| {
            // SAFETY: ints to write, checked for null.
            unsafe {
                write(flag, c_int::from(v.is_some()));
                if let Some(n) = v {
                    write(valuelen, n as c_int);
                }
            }
        }))
    }

    fn MPI_Info_delete / PMPI_Info_delete(info: Handle, key: *const c_char) {
        // SAFETY: a NUL-terminated key (MPI's contract).
        self_ok(unsafe { c_str(key) }.and_then(|k| state::with_info(info, |i| i.delete(&k))))
    }

    fn MPI_Info_get_nkeys / PMPI_Info_get_nkeys(info: Handle, nkeys: *mut c_int) {
        // SAFETY: an int to write, checked for null.
        self_ok(state::with_info(info, |i| Ok(i.nkeys())).map(|n| unsafe { write(nkeys, n as c_int) }))
    }

    fn MPI_Info_get_nthkey / PMPI_Info_get_nthkey(info: Handle, n: c_int, key: *mut c_char) {
        let r = state::with_info(info, |i| {
            let n = usize::try_from(n).map_err(|_| Error::new(ErrorClass::Arg, format!("key number {n}")))?;
            i.nthkey(n).map(str::to_string)
        });
        // SAFETY: `key` has room for MPI_MAX_INFO_KEY + 1 chars.
        self_ok(r.map(|k| unsafe { state::write_str(key, 256, &k, std::ptr::null_mut()) }))
    }

    fn MPI_Info_dup / PMPI_Info_dup(info: Handle, new: *mut Handle) {
        let r = state::with_info(info, |i| Ok(i.dup())).and_then(state::add_info);
        // SAFETY: a handle to write, checked for null.
        self_ok(r.map(|h| unsafe { write(new, h) }))
    }

    fn MPI_Info_free / PMPI_Info_free(info: *mut Handle) {
        // SAFETY: an info handle to read (MPI's contract).
        let r = unsafe { read_handle(info) }.and_then(state::take_info);
        if r.is_ok() {
            // SAFETY: as above, checked for null by `read_handle`.
            unsafe { info.write(abi::INFO_NULL) };
        }
        self_ok(r)
    }

    fn MPI_Comm_set_name / PMPI_Comm_set_name(comm: Handle, name: *const c_char) {
        // SAFETY: a NUL-terminated name (MPI's contract).
        let n = unsafe { c_str(name) };
        ok_or_code(with_comm(comm, |c| c.set_name(&n?)))
    }

    fn MPI_Comm_get_name / PMPI_Comm_get_name(comm: Handle, name: *mut c_char, len: *mut c_int) {
        if comm == abi::COMM_NULL {
            // The null handle's name, as MPICH gives it.
            // SAFETY: room for MPI_MAX_OBJECT_NAME chars, an int.
            unsafe { state::write_str(name, abi::MAX_OBJECT_NAME, "MPI_COMM_NULL", len) };
            return MPI_SUCCESS;
        }
        ok_or_code(with_comm(comm, |c| {
            // SAFETY: room for MPI_MAX_OBJECT_NAME chars, an int.
            unsafe { state::write_str(name, abi::MAX_OBJECT_NAME, &c.name(), len) };
            Ok(())
        }))
    }

    fn MPI_Type_set_name / PMPI_Type_set_name(dt: Handle, name: *const c_char) {
        // SAFETY: a NUL-terminated name (MPI's contract).
        let n = unsafe { c_str(name) };
        self_ok(n.and_then(|n| state::set_type_name(dt, &n)))
    }

    fn MPI_Type_get_name / PMPI_Type_get_name(dt: Handle, name: *mut c_char, len: *mut c_int) {
        if dt == abi::c::MPI_DATATYPE_NULL {
            // The null handle's name, as MPICH gives it.
            // SAFETY: room for MPI_MAX_OBJECT_NAME chars, an int.
            unsafe { state::write_str(name, abi::MAX_OBJECT_NAME, "MPI_DATATYPE_NULL", len) };
            return MPI_SUCCESS;
        }
        // SAFETY: room for MPI_MAX_OBJECT_NAME chars, an int.
        self_ok(state::type_name(dt).map(|n| unsafe { state::write_str(name, abi::MAX_OBJECT_NAME, &n, len) }))
    }

    // ---- topologies and more communicators -------------------------------------------------------

    fn MPI_Comm_split_type / PMPI_Comm_split_type(comm: Handle, split_type: c_int, key: c_int, info: Handle, out: *mut Handle) {
        let t = match split_type {
            abi::UNDEFINED => earlybird::SplitType::Undefined,
            1 => earlybird::SplitType::Shared,
            // MPI 4.1's MPI_COMM_TYPE_RESOURCE_GUIDED is MPI_COMM_TYPE_HW_GUIDED's rule (the
            // resource named by the mpi_hw_resource_type hint) for any kind of resource.
            2 | abi::c::MPI_COMM_TYPE_RESOURCE_GUIDED => earlybird::SplitType::HwGuided,
            3 => earlybird::SplitType::HwUnguided,
            abi::c::MPIX_COMM_TYPE_ENDPOINTS => earlybird::SplitType::Endpoints,
            t => return fail(comm, "MPI_Comm_split_type", Error::new(ErrorClass::Arg, format!("split type {t} is not one MPI defines"))),
        };
        // The hints (mpi_hw_resource_type among them), read before the communicator is
        // borrowed.
        let hints = comms::info_of(info);
        let r = hints
            .and_then(|h| state::with_comm_aside(comm, |c| c.split_type(t, key, &h)))
            .map(|d| d.map_or(abi::COMM_NULL, state::add_comm));
        // SAFETY: a handle to write, checked for null.
        ok_or_code(r.map(|h| unsafe { write(out, h) }))
    }

    fn MPI_Comm_test_inter / PMPI_Comm_test_inter(comm: Handle, flag: *mut c_int) {
        ok_or_code(with_comm(comm, |c| {
            // SAFETY: an int to write, checked for null.
            unsafe { write(flag, c_int::from(c.is_inter())) };
            Ok(())
        }))
    }

    fn MPI_Dims_create / PMPI_Dims_create(nnodes: c_int, ndims: c_int, dims: *mut c_int) {
        self_ok((|| {
            let n = len(ndims)?;
            if n > 0 && dims.is_null() {
                return Err(Error::new(ErrorClass::Arg, "a null dims array"));
            }
            // SAFETY: `ndims` ints to read and write (MPI's contract), checked for null.
            let d = if n == 0 { &mut [][..] } else { unsafe { std::slice::from_raw_parts_mut(dims, n) } };
            earlybird::dims_create(nnodes, d)
        })())
    }

    fn MPI_Cart_create / PMPI_Cart_create(comm: Handle, ndims: c_int, dims: *const c_int, periods: *const c_int, reorder: c_int, out: *mut Handle) {
        let r = state::with_comm_aside(comm, |c| {
            // SAFETY: `ndims` ints in each array (MPI's contract).
            let (d, p) = unsafe { (array(dims, ndims)?, array(periods, ndims)?) };
            let p: Vec<bool> = p.iter().map(|&x| x != 0).collect();
            c.cart_create(d, &p, reorder != 0)
        })
        .map(|d| d.map_or(abi::COMM_NULL, state::add_comm));
        // SAFETY: a handle to write, checked for null.
        ok_or_code(r.map(|h| unsafe { write(out, h) }))
    }

    fn MPI_Topo_test / PMPI_Topo_test(comm: Handle, status: *mut c_int) {
        ok_or_code(with_comm(comm, |c| {
            let t = match c.topo_test()? {
                earlybird::Topology::Graph => 1,
                earlybird::Topology::Cartesian => 2,
                earlybird::Topology::DistGraph => 3,
                _ => abi::UNDEFINED,
            };
            // SAFETY: an int to write, checked for null.
            unsafe { write(status, t) };
            Ok(())
        }))
    }

    fn MPI_Cartdim_get / PMPI_Cartdim_get(comm: Handle, ndims: *mut c_int) {
        // SAFETY: an int to write, checked for null.
        ok_or_code(with_comm(comm, |c| c.cartdim_get().map(|n| unsafe { write(ndims, n) })))
    }

    fn MPI_Cart_get / PMPI_Cart_get(comm: Handle, maxdims: c_int, dims: *mut c_int, periods: *mut c_int, coords: *mut c_int) {
        ok_or_code(with_comm(comm, |c| {
            let t = c.cart_get()?;
            let n = t.dims.len().min(len(maxdims)?);
            for i in 0..n {
                // SAFETY: `maxdims` ints in each array (MPI's contract).
                unsafe {
                    write(dims.wrapping_add(i), t.dims[i]);
                    write(periods.wrapping_add(i), c_int::from(t.periods[i]));
                    write(coords.wrapping_add(i), t.coords[i]);
                }
            }
            Ok(())
        }))
    }

    fn MPI_Cart_rank / PMPI_Cart_rank(comm: Handle, coords: *const c_int, rank: *mut c_int) {
        ok_or_code(with_comm(comm, |c| {
            let n = c.cartdim_get()?;
            // SAFETY: `ndims` coordinates (MPI's contract).
            let r = c.cart_rank(unsafe { array(coords, n) }?)?;
            // SAFETY: an int to write, checked for null.
            unsafe { write(rank, r) };
            Ok(())
        }))
    }

    fn MPI_Cart_coords / PMPI_Cart_coords(comm: Handle, rank: c_int, maxdims: c_int, coords: *mut c_int) {
        ok_or_code(with_comm(comm, |c| {
            let v = c.cart_coords(rank)?;
            for (i, x) in v.iter().take(len(maxdims)?).enumerate() {
                // SAFETY: room for `maxdims` ints (MPI's contract).
                unsafe { write(coords.wrapping_add(i), *x) };
            }
            Ok(())
        }))
    }

    fn MPI_Cart_shift / PMPI_Cart_shift(comm: Handle, direction: c_int, disp: c_int, source: *mut c_int, dest: *mut c_int) {
        ok_or_code(with_comm(comm, |c| {
            let (s, d) = c.cart_shift(direction, disp)?;
            // SAFETY: ints to write, checked for null.
            unsafe {
                write(source, abi::rank_out(s));
                write(dest, abi::rank_out(d));
            }
            Ok(())
        }))
    }

    fn MPI_Cart_sub / PMPI_Cart_sub(comm: Handle, remain: *const c_int, out: *mut Handle) {
        let r = state::with_comm_aside(comm, |c| {
            let n = c.cartdim_get()?;
            // SAFETY: `ndims` flags (MPI's contract).
            let keep: Vec<bool> = unsafe { array(remain, n) }?.iter().map(|&x| x != 0).collect();
            c.cart_sub(&keep)
        })
        .map(state::add_comm);
        // SAFETY: a handle to write, checked for null.
        ok_or_code(r.map(|h| unsafe { write(out, h) }))
    }

    // ---- groups ----------------------------------------------------------------------------------

    fn MPI_Comm_group / PMPI_Comm_group(comm: Handle, group: *mut Handle) {
        let r = with_comm(comm, |c| Ok(c.group())).and_then(state::add_group);
        // SAFETY: a handle to write, checked for null.
        ok_or_code(r.map(|h| unsafe { write(group, h) }))
    }

    fn MPI_Group_size / PMPI_Group_size(group: Handle, size: *mut c_int) {
        // SAFETY: an int to write, checked for null.
        self_ok(state::group_of(group).map(|g| unsafe { write(size, g.size()) }))
    }

    fn MPI_Group_rank / PMPI_Group_rank(group: Handle, rank: *mut c_int) {
        // SAFETY: an int to write, checked for null.
        self_ok(state::group_of(group).map(|g| unsafe { write(rank, g.rank().unwrap_or(abi::UNDEFINED)) }))
    }

    fn MPI_Group_incl / PMPI_Group_incl(group: Handle, n: c_int, ranks: *const c_int, new: *mut Handle) {
        // SAFETY: `n` ranks (MPI's contract).
        let r = state::group_of(group).and_then(|g| g.incl(unsafe { array(ranks, n) }?)).and_then(state::add_group);
        // SAFETY: a handle to write, checked for null.
        self_ok(r.map(|h| unsafe { write(new, h) }))
    }

    fn MPI_Group_excl / PMPI_Group_excl(group: Handle, n: c_int, ranks: *const c_int, new: *mut Handle) {
        // SAFETY: `n` ranks (MPI's contract).
        let r = state::group_of(group).and_then(|g| g.excl(unsafe { array(ranks, n) }?)).and_then(state::add_group);
        // SAFETY: a handle to write, checked for null.
        self_ok(r.map(|h| unsafe { write(new, h) }))
    }

    fn MPI_Group_translate_ranks / PMPI_Group_translate_ranks(g1: Handle, n: c_int, ranks1: *const c_int, g2: Handle, ranks2: *mut c_int) {
        self_ok((|| {
            let (a, b) = (state::group_of(g1)?, state::group_of(g2)?);
            // SAFETY: `n` ranks (MPI's contract).
            let rs: Vec<i32> = unsafe { array(ranks1, n) }?.iter().map(|&r| abi::rank_in(r)).collect();
            let out = a.translate_ranks(&rs, &b)?;
            for (i, r) in out.into_iter().enumerate() {
                // SAFETY: room for `n` ranks (MPI's contract).
                unsafe { write(ranks2.wrapping_add(i), abi::rank_out(r)) };
            }
            Ok(())
        })())
    }

    fn MPI_Group_free / PMPI_Group_free(group: *mut Handle) {
        // SAFETY: a group handle to read (MPI's contract).
        let r = unsafe { read_handle(group) }.and_then(state::take_group);
        if r.is_ok() {
            // SAFETY: as above, checked for null by `read_handle`.
            unsafe { group.write(abi::GROUP_NULL) };
        }
        self_ok(r)
    }

    fn MPI_Comm_create / PMPI_Comm_create(comm: Handle, group: Handle, new: *mut Handle) {
        let r = state::group_of(group)
            .and_then(|g| state::with_comm_aside(comm, |c| c.create(&g)))
            .map(|d| d.map_or(abi::COMM_NULL, state::add_comm));
        // SAFETY: a handle to write, checked for null.
        ok_or_code(r.map(|h| unsafe { write(new, h) }))
    }

    // ---- datatypes -------------------------------------------------------------------------------

    fn MPI_Type_size / PMPI_Type_size(dt: Handle, size: *mut c_int) {
        self_ok(state::type_of(dt).map(|d| {
            // SAFETY: an int to write, checked for null.
            unsafe { write(size, datatypes::int_or_undefined(d.size() as i64)) }
        }))
    }

    fn MPI_Type_get_extent / PMPI_Type_get_extent(dt: Handle, lb: *mut isize, extent: *mut isize) {
        self_ok(state::type_of(dt).map(|d| {
            let (l, e) = d.get_extent();
            // SAFETY: two MPI_Aints to write, checked for null.
            unsafe {
                write(lb, l);
                write(extent, e);
            }
        }))
    }

    fn MPI_Type_get_true_extent / PMPI_Type_get_true_extent(dt: Handle, lb: *mut isize, extent: *mut isize) {
        self_ok(state::type_of(dt).map(|d| {
            let (l, e) = d.get_true_extent();
            // SAFETY: two MPI_Aints to write, checked for null.
            unsafe {
                write(lb, l);
                write(extent, e);
            }
        }))
    }

    fn MPI_Get_address / PMPI_Get_address(location: *const c_void, address: *mut isize) {
        // SAFETY: an MPI_Aint to write, checked for null.
        unsafe { write(address, location as isize) };
        MPI_SUCCESS
    }

    fn MPI_Type_commit / PMPI_Type_commit(dt: *mut Handle) {
        // SAFETY: a datatype handle to read (MPI's contract).
        let h = unsafe { read_handle(dt) };
        self_ok(h.and_then(state::type_of).and_then(|d| d.commit()))
    }

    fn MPI_Type_free / PMPI_Type_free(dt: *mut Handle) {
        // SAFETY: a datatype handle to read (MPI's contract).
        let h = match unsafe { read_handle(dt) } {
            Ok(h) => h,
            Err(e) => return self_ok(Err::<(), _>(e)),
        };
        if f90_types::envelope(h).is_some() {
            let e = Error::new(ErrorClass::Type, format!("MPI_Type_free of datatype {h:#x}, made by MPI_Type_create_f90_*: a predefined datatype"));
            return self_ok(Err::<(), _>(e));
        }
        // The program's attributes are deleted first, the datatype still there for their
        // delete functions.
        let deleted = state::type_of(h).and_then(|_| type_attributes::delete_all(h));
        let r = state::take_type(h).and_then(|d| d.free()).and(deleted);
        if r.is_ok() {
            // SAFETY: as above, checked for null by `read_handle`.
            unsafe { dt.write(abi::DATATYPE_NULL) };
        }
        self_ok(r)
    }

    fn MPI_Type_dup / PMPI_Type_dup(old: Handle, new: *mut Handle) {
        // SAFETY: a handle to write.
        let rc = unsafe { made(new, state::type_of(old).and_then(|d| d.dup())) };
        if rc != MPI_SUCCESS {
            return rc;
        }
        // The attributes, through their copy functions (MPI 4.1 §7.7.4); when one fails, the
        // new datatype is freed and the handle is MPI_DATATYPE_NULL.
        // SAFETY: the handle just written.
        let h = unsafe { new.read() };
        let r = type_attributes::copy_all(old, h);
        if r.is_err() {
            let _ = type_attributes::delete_all(h);
            let _ = state::take_type(h).and_then(|d| d.free());
            // SAFETY: as above.
            unsafe { new.write(abi::DATATYPE_NULL) };
        }
        self_ok(r)
    }

}

/// MPI_Pack(_c): `count` elements of `dt` at `inbuf` into the `outsize` bytes at `outbuf`
/// from `*position` on, which moves past them.
///
/// # Safety
/// `inbuf` holds the elements, `outbuf` `outsize` bytes, `position` a `W` (MPI's contract).
unsafe fn pack<W: widths::Width>(
    inbuf: *const c_void,
    count: W,
    dt: Handle,
    outbuf: *mut c_void,
    outsize: W,
    position: *mut W,
) -> earlybird::Result<()> {
    let (d, n, from, bytes) = state::pack_span(inbuf, count.wide(), dt)?;
    // SAFETY: the function's contract; `pack_span` located the elements' bytes, and both
    // runs are checked for null where their length is not 0.
    let (src, dst, mut at) = unsafe {
        (
            bytes_at(from, bytes)?,
            bytes_at_mut(outbuf.cast(), widths::count(outsize)?)?,
            read_position(position)?,
        )
    };
    d.pack(src, n, dst, &mut at)?;
    // SAFETY: as above.
    unsafe { write_position(position, at) }
}

/// MPI_Unpack(_c): `count` elements of `dt` at `outbuf` from the `insize` bytes at `inbuf`
/// from `*position` on, which moves past them.
///
/// # Safety
/// `inbuf` holds `insize` bytes, `outbuf` room for the elements, `position` a `W` (MPI's
/// contract).
unsafe fn unpack<W: widths::Width>(
    inbuf: *const c_void,
    insize: W,
    position: *mut W,
    outbuf: *mut c_void,
    count: W,
    dt: Handle,
) -> earlybird::Result<()> {
    let (d, n, to, bytes) = state::pack_span(outbuf, count.wide(), dt)?;
    // SAFETY: as in `pack`.
    let (src, dst, mut at) = unsafe {
        (
            bytes_at(inbuf.cast(), widths::count(insize)?)?,
            bytes_at_mut(to.cast_mut(), bytes)?,
            read_position(position)?,
        )
    };
    d.unpack(src, &mut at, dst, n)?;
    // SAFETY: as above.
    unsafe { write_position(position, at) }
}

/// The position of a pack or unpack as an offset (MPI_ERR_ARG if negative or `p` null).
///
/// # Safety
/// `p` is null or points to a `W`.
pub(crate) unsafe fn read_position<W: widths::Width>(p: *const W) -> earlybird::Result<usize> {
    if p.is_null() {
        return Err(Error::new(ErrorClass::Arg, "a null position"));
    }
    // SAFETY: the function's contract, checked for null.
    let v = unsafe { p.read() };
    usize::try_from(v.wide()).map_err(|_| Error::new(ErrorClass::Arg, format!("position {v}")))
}

/// The position after a pack or unpack (MPI_ERR_VALUE_TOO_LARGE beyond what a `W` holds).
///
/// # Safety
/// `p` points to a `W` (checked for null by [`read_position`]).
pub(crate) unsafe fn write_position<W: widths::Width>(
    p: *mut W,
    at: usize,
) -> earlybird::Result<()> {
    let v = W::narrowed(at as i64).ok_or_else(|| {
        Error::new(
            ErrorClass::ValueTooLarge,
            format!("position {at} is beyond INT_MAX (the _c call gives it)"),
        )
    })?;
    // SAFETY: the function's contract.
    unsafe { p.write(v) };
    Ok(())
}

/// The `n` bytes at `p` (see [`widths::entries`]).
///
/// # Safety
/// `p` points to `n` readable bytes that outlive the borrow (or `n` is 0).
pub(crate) unsafe fn bytes_at<'a>(p: *const u8, n: usize) -> earlybird::Result<&'a [u8]> {
    // SAFETY: the function's contract.
    unsafe { widths::entries(p, n) }
}

/// The `n` bytes at `p`, to write ([`bytes_at`]'s rules).
///
/// # Safety
/// `p` points to `n` writable bytes used by nothing else while borrowed (or `n` is 0).
pub(crate) unsafe fn bytes_at_mut<'a>(p: *mut u8, n: usize) -> earlybird::Result<&'a mut [u8]> {
    if n == 0 {
        return Ok(&mut []);
    }
    if p.is_null() {
        return Err(Error::new(
            ErrorClass::Arg,
            format!("a null buffer of {n} bytes"),
        ));
    }
    // SAFETY: the function's contract.
    Ok(unsafe { std::slice::from_raw_parts_mut(p, n) })
}

/// The modes of the blocking sends.
#[derive(Clone, Copy)]
enum Blocking {
    Standard,
    Synchronous,
    Ready,
    Buffered,
}

/// A blocking send of `mode`: the common predefined types as plain slices, others as typed
/// views.
///
/// # Safety
/// `buf` holds `count` elements of `dt`.
unsafe fn send(
    buf: *const c_void,
    count: c_int,
    dt: Handle,
    dest: c_int,
    tag: c_int,
    comm: Handle,
    mode: Blocking,
) -> c_int {
    if state::waits_let_go() {
        let start = match mode {
            Blocking::Standard => PMPI_Isend,
            Blocking::Synchronous => PMPI_Issend,
            Blocking::Ready => pt2pt::PMPI_Irsend,
            Blocking::Buffered => pt2pt::PMPI_Ibsend,
        };
        // SAFETY: the function's contract is the nonblocking call's, whose buffer is left
        // alone until the request completes here.
        return state::via_request(
            |r| unsafe { start(buf, count, dt, dest, tag, comm, r) },
            state::IGNORED,
        );
    }
    if let Blocking::Standard = mode {
        // SAFETY: the function's contract.
        if let Some(r) = unsafe { state::quick::send(buf, count, dt, dest, tag, comm) } {
            return ok_or_code(r);
        }
    }
    macro_rules! in_mode {
        ($c:expr, $b:expr, $dest:expr) => {
            match mode {
                Blocking::Standard => $c.send($b, $dest, tag),
                Blocking::Synchronous => $c.ssend($b, $dest, tag),
                Blocking::Ready => $c.rsend($b, $dest, tag),
                Blocking::Buffered => $c.bsend($b, $dest, tag),
            }
        };
    }
    ok_or_code(with_comm(comm, |c| {
        let dest = abi::rank_in(dest);
        by_elem!(dt, T => {
            // SAFETY: the function's contract, here `T`s.
            if let Some(b) = unsafe { slice_in::<T>(buf, count) }? {
                return in_mode!(c, b, dest);
            }
        });
        // SAFETY: the function's contract.
        let b = unsafe { buf_in(buf, count, dt) }?;
        in_mode!(c, &b, dest)
    }))
}

/// MPI_Testany's pass: `(true, i)` when request `i` completed now (its status into
/// `status`), `(true, MPI_UNDEFINED)` when every request is null, `(false, MPI_UNDEFINED)`
/// otherwise. `Err` holds the code to return.
///
/// # Safety
/// `reqs` holds `n` handles; `status` is a status or MPI_STATUS_IGNORE.
unsafe fn any(n: c_int, reqs: *mut Handle, status: *mut MpiStatus) -> Result<(bool, c_int), c_int> {
    let mut live = false;
    for i in 0..n.max(0) as usize {
        let r = reqs.wrapping_add(i);
        // SAFETY: the function's contract.
        if !state::request_active(unsafe { r.read() }) {
            continue;
        }
        live = true;
        // SAFETY: as above.
        if unsafe { state::complete(r, status, false) }? {
            return Ok((true, i as c_int));
        }
    }
    if !live {
        state::empty_status(status);
    }
    Ok((!live, abi::UNDEFINED))
}

/// One pass of MPI_Testsome / MPI_Waitsome: the requests that completed now, their indices
/// and statuses; MPI_UNDEFINED into `outcount` when every request is null. The count of
/// completed ones (1 for "all null", so that a wait ends).
///
/// # Safety
/// `reqs` holds `n` handles; `indices` has room for `n` ints and `statuses` for `n`
/// statuses (or is MPI_STATUSES_IGNORE).
unsafe fn some(
    n: c_int,
    reqs: *mut Handle,
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut MpiStatus,
) -> Result<usize, c_int> {
    let (mut done, mut live) = (0usize, false);
    for i in 0..n.max(0) as usize {
        let r = reqs.wrapping_add(i);
        // SAFETY: the function's contract.
        if !state::request_active(unsafe { r.read() }) {
            continue;
        }
        live = true;
        let st = pt2pt::nth_status(statuses, done);
        // SAFETY: as above.
        if unsafe { state::complete(r, st, false) }? {
            // As MPI_Waitall's statuses (see state::wait_all).
            state::status_error(st, MPI_SUCCESS);
            // SAFETY: room for `n` indices.
            unsafe { write(indices.wrapping_add(done), i as c_int) };
            done += 1;
        }
    }
    // SAFETY: an int to write, checked for null.
    unsafe { write(outcount, if live { done as c_int } else { abi::UNDEFINED }) };
    Ok(if live { done } else { 1 })
}

/// MPI_SUCCESS, or an error of a call tied to no communicator, raised on MPI_COMM_SELF (MPI
/// 4.1 §9.3).
fn self_ok<T>(r: earlybird::Result<T>) -> c_int {
    match r {
        Ok(_) => MPI_SUCCESS,
        Err(e) => ok_or_code(with_comm(abi::COMM_SELF, |_| Err::<(), _>(e))),
    }
}

/// A count or block length as a length (MPI_ERR_COUNT if negative).
fn len(n: c_int) -> earlybird::Result<usize> {
    widths::count(n)
}

/// The `n` entries at `p`.
///
/// # Safety
/// `p` points to `n` initialised `T`s that outlive the borrow (or `n` is 0).
unsafe fn array<'a, T>(p: *const T, n: c_int) -> earlybird::Result<&'a [T]> {
    // SAFETY: the function's contract.
    unsafe { widths::entries(p, n) }
}

/// The NUL-terminated string at `p` (MPI_ERR_ARG if null or not UTF-8).
///
/// # Safety
/// `p` is null or points to a NUL-terminated string.
unsafe fn c_str(p: *const c_char) -> earlybird::Result<String> {
    if p.is_null() {
        return Err(Error::new(ErrorClass::Arg, "a null string"));
    }
    // SAFETY: the function's contract.
    let s = unsafe { std::ffi::CStr::from_ptr(p) };
    s.to_str().map(str::to_string).map_err(|_| {
        Error::new(
            ErrorClass::Arg,
            format!("a string that is not UTF-8: {s:?}"),
        )
    })
}

/// The handle at `p` (MPI_ERR_ARG if `p` is null).
///
/// # Safety
/// `p` is null or points to a handle.
unsafe fn read_handle(p: *const Handle) -> earlybird::Result<Handle> {
    if p.is_null() {
        return Err(Error::new(ErrorClass::Arg, "a null handle pointer"));
    }
    // SAFETY: the function's contract.
    Ok(unsafe { p.read() })
}

/// A datatype made by a constructor: its handle into `*new`.
///
/// # Safety
/// `new` is null or points to a handle to write.
unsafe fn made(new: *mut Handle, r: earlybird::Result<Datatype>) -> c_int {
    let r = r.and_then(state::add_type).map(|h| {
        // SAFETY: the function's contract.
        unsafe { write(new, h) }
    });
    self_ok(r)
}

/// The calls that return something other than an error code, as `PMPI_name` and `MPI_name`.
macro_rules! plain {
    ($($(#[$doc:meta])* fn $name:ident / $pname:ident ($($a:ident : $t:ty),*) -> $r:ty $body:block)*) => {$(
        $(#[$doc])*
        #[no_mangle]
        pub extern "C" fn $pname($($a: $t),*) -> $r $body

        $(#[$doc])*
        #[no_mangle]
        pub extern "C" fn $name($($a: $t),*) -> $r {
            $pname($($a),*)
        }
    )*};
}

plain! {
    /// MPI_Wtime.
    fn MPI_Wtime / PMPI_Wtime() -> c_double {
        earlybird::wtime()
    }

    /// MPI_Wtick: the resolution of MPI_Wtime (a nanosecond clock).
    fn MPI_Wtick / PMPI_Wtick() -> c_double {
        1e-9
    }

    /// MPI_Aint_add: an address plus a displacement (addresses are plain integers here).
    fn MPI_Aint_add / PMPI_Aint_add(base: isize, disp: isize) -> isize {
        base.wrapping_add(disp)
    }

    /// MPI_Aint_diff: the displacement between two addresses.
    fn MPI_Aint_diff / PMPI_Aint_diff(a: isize, b: isize) -> isize {
        a.wrapping_sub(b)
    }

    /// MPI_File_c2f: no file can exist (MPI-IO is not implemented), so every handle is
    /// MPI_FILE_NULL's Fortran value.
    fn MPI_File_c2f / PMPI_File_c2f(_file: *mut c_void) -> c_int {
        0
    }

    /// MPI_File_f2c: MPI_FILE_NULL, for the same reason.
    fn MPI_File_f2c / PMPI_File_f2c(_file: c_int) -> *mut c_void {
        std::ptr::null_mut()
    }
}

/// An address the library exports as data, for C to compare pointers with
/// (`MPI_UNWEIGHTED`, `MPI_WEIGHTS_EMPTY`); nothing is ever read or written through it.
#[repr(transparent)]
pub struct Sentinel(*const c_int);

// SAFETY: the pointer is only an address to compare with: no thread reads or writes through
// it, so sharing it between threads cannot race.
unsafe impl Sync for Sentinel {}

static UNWEIGHTED_TARGET: c_int = 0;
static WEIGHTS_EMPTY_TARGET: c_int = 0;

/// MPI_UNWEIGHTED: a distributed graph without weights.
#[no_mangle]
pub static MPI_UNWEIGHTED: Sentinel = Sentinel(&UNWEIGHTED_TARGET);

/// MPI_WEIGHTS_EMPTY: weights given for no edges.
#[no_mangle]
pub static MPI_WEIGHTS_EMPTY: Sentinel = Sentinel(&WEIGHTS_EMPTY_TARGET);

mpi! {
    // ---- MPI-1 calls removed in MPI 3.0, kept because MPICH keeps them and programs
    // (MPICH's own test suite among them) still call them: each is its successor.

    fn MPI_Address / PMPI_Address(location: *const c_void, address: *mut isize) {
        // SAFETY: the same contract as MPI_Get_address.
        unsafe { PMPI_Get_address(location, address) }
    }

    fn MPI_Type_hvector / PMPI_Type_hvector(count: c_int, blocklen: c_int, stride: isize, old: Handle, new: *mut Handle) {
        // SAFETY: the same contract as MPI_Type_create_hvector.
        unsafe { type_constructors::PMPI_Type_create_hvector(count, blocklen, stride, old, new) }
    }

    fn MPI_Type_hindexed / PMPI_Type_hindexed(count: c_int, blocklens: *const c_int, disps: *const isize, old: Handle, new: *mut Handle) {
        // SAFETY: the same contract as MPI_Type_create_hindexed.
        unsafe { type_constructors::PMPI_Type_create_hindexed(count, blocklens, disps, old, new) }
    }

    fn MPI_Type_struct / PMPI_Type_struct(count: c_int, blocklens: *const c_int, disps: *const isize, types: *const Handle, new: *mut Handle) {
        // SAFETY: the same contract as MPI_Type_create_struct.
        unsafe { type_constructors::PMPI_Type_create_struct(count, blocklens, disps, types, new) }
    }

    fn MPI_Type_extent / PMPI_Type_extent(dt: Handle, extent: *mut isize) {
        let mut lb = 0isize;
        // SAFETY: `extent` is the caller's to write (checked for null there); `lb` is ours.
        unsafe { PMPI_Type_get_extent(dt, &mut lb, extent) }
    }

    fn MPI_Type_lb / PMPI_Type_lb(dt: Handle, displacement: *mut isize) {
        let mut extent = 0isize;
        // SAFETY: as in MPI_Type_extent.
        unsafe { PMPI_Type_get_extent(dt, displacement, &mut extent) }
    }

    fn MPI_Type_ub / PMPI_Type_ub(dt: Handle, displacement: *mut isize) {
        let (mut lb, mut extent) = (0isize, 0isize);
        // SAFETY: both ours.
        let rc = unsafe { PMPI_Type_get_extent(dt, &mut lb, &mut extent) };
        if rc == MPI_SUCCESS {
            // SAFETY: an MPI_Aint to write, checked for null.
            unsafe { write(displacement, lb + extent) };
        }
        rc
    }

    fn MPI_Errhandler_create / PMPI_Errhandler_create(f: Option<ErrhandlerFunction>, out: *mut Handle) {
        // SAFETY: the same contract as MPI_Comm_create_errhandler.
        unsafe { PMPI_Comm_create_errhandler(f, out) }
    }

    fn MPI_Errhandler_set / PMPI_Errhandler_set(comm: Handle, eh: Handle) {
        // SAFETY: the same contract as MPI_Comm_set_errhandler.
        unsafe { PMPI_Comm_set_errhandler(comm, eh) }
    }

    fn MPI_Errhandler_get / PMPI_Errhandler_get(comm: Handle, out: *mut Handle) {
        // SAFETY: the same contract as MPI_Comm_get_errhandler.
        unsafe { PMPI_Comm_get_errhandler(comm, out) }
    }
}
