//! The MPI state of the thread that called `MPI_Init`: the universe, the tables behind the
//! handles this library makes, and the conversions every function shares.

use crate::abi::{self, Handle, MpiStatus, MPI_SUCCESS};
use earlybird::{Comm, Datatype, Error, ErrorClass, Request, Result, Typed, TypedMut, Universe};
use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering};

static INITIALIZED: AtomicBool = AtomicBool::new(false);
static FINALIZED: AtomicBool = AtomicBool::new(false);

struct State {
    uni: Universe,
    /// The scope every nonblocking operation lends its buffer to (it never ends: each
    /// operation is completed through its request, as MPI says).
    scope: &'static earlybird::Scope<'static, 'static>,
    comms: Vec<Option<Comm>>,
    reqs: Vec<Option<Pending>>,
}

thread_local! {
    static STATE: RefCell<Option<State>> = const { RefCell::new(None) };
}

/// The buffer description a nonblocking operation borrows for as long as it runs.
enum Kept {
    Send(*mut Typed<'static>),
    Recv(*mut TypedMut<'static>),
}

/// A nonblocking operation: its request, the communicator it reports errors on, and the view
/// of the caller's buffer it was made from (freed after the request).
struct Pending {
    req: Option<Request<'static>>,
    comm: Comm,
    kept: Kept,
}

impl Drop for Pending {
    fn drop(&mut self) {
        // The request first: it may still use the view.
        drop(self.req.take());
        match self.kept {
            // SAFETY: the pointer came from `Box::into_raw` in `start_send` and is freed here
            // only, after the request that borrowed it is gone.
            Kept::Send(p) => drop(unsafe { Box::from_raw(p) }),
            // SAFETY: as above, from `start_recv`.
            Kept::Recv(p) => drop(unsafe { Box::from_raw(p) }),
        }
    }
}

fn with_state<R>(f: impl FnOnce(&mut Option<State>) -> R) -> R {
    STATE.with(|s| f(&mut s.borrow_mut()))
}

/// MPI_Init.
pub(crate) fn init() -> c_int {
    if INITIALIZED.load(Ordering::Acquire) {
        eprintln!("earlybird: MPI_Init called twice");
        return ErrorClass::Other.code();
    }
    match earlybird::init() {
        Ok(uni) => {
            with_state(|s| {
                *s = Some(State {
                    uni,
                    scope: earlybird::endless_scope(),
                    comms: Vec::new(),
                    reqs: Vec::new(),
                })
            });
            INITIALIZED.store(true, Ordering::Release);
            MPI_SUCCESS
        }
        Err(e) => {
            eprintln!("earlybird: MPI_Init: {e}");
            e.code()
        }
    }
}

pub(crate) fn initialized() -> bool {
    INITIALIZED.load(Ordering::Acquire)
}

pub(crate) fn finalized() -> bool {
    FINALIZED.load(Ordering::Acquire)
}

pub(crate) fn is_main_thread() -> bool {
    with_state(|s| s.is_some())
}

/// MPI_Finalize: pending requests are completed (dropped), then the universe finalizes.
pub(crate) fn finalize() -> c_int {
    let Some(st) = with_state(|s| s.take()) else {
        return not_initialized("MPI_Finalize").code();
    };
    let State {
        uni, comms, reqs, ..
    } = st;
    drop(reqs);
    drop(comms);
    FINALIZED.store(true, Ordering::Release);
    match uni.finalize() {
        Ok(()) => MPI_SUCCESS,
        Err(e) => e.code(),
    }
}

fn not_initialized(what: &str) -> Error {
    Error::new(
        ErrorClass::Other,
        format!("{what} before MPI_Init, after MPI_Finalize, or from a thread other than the one that called MPI_Init"),
    )
}

/// The communicator behind `h`.
fn comm_of(h: Handle) -> Result<Comm> {
    with_state(|s| {
        let Some(st) = s.as_ref() else {
            return Err(not_initialized("an MPI call"));
        };
        match h {
            abi::COMM_WORLD => Ok(st.uni.world().clone()),
            abi::COMM_SELF => Ok(st.uni.comm_self().clone()),
            abi::COMM_NULL => Err(Error::new(
                ErrorClass::Comm,
                "MPI_COMM_NULL is not a communicator to use",
            )),
            h => {
                let i = h.wrapping_sub(abi::COMM_USER) as u32 as usize;
                match st.comms.get(i) {
                    Some(Some(c)) => Ok(c.clone()),
                    _ => Err(Error::new(ErrorClass::Comm, format!("communicator handle {h:#x} is not a communicator (never made, or freed)"))),
                }
            }
        }
    })
}

/// `f` on the communicator behind `h`. An error goes through the communicator's error
/// handler (MPI_COMM_WORLD's when `h` is no communicator): with MPI_ERRORS_ARE_FATAL the job
/// ends there, with MPI_ERRORS_RETURN it comes back.
pub(crate) fn with_comm<R>(h: Handle, f: impl FnOnce(&Comm) -> Result<R>) -> Result<R> {
    match comm_of(h) {
        Ok(c) => f(&c).or_else(|e| c.call_errhandler(e)),
        Err(e) => world_error(e),
    }
}

fn world_error<R>(e: Error) -> Result<R> {
    match comm_of(abi::COMM_WORLD) {
        Ok(w) => w.call_errhandler(e),
        Err(_) => {
            // Not initialized: MPI's default handler, fatal.
            eprintln!("earlybird: fatal error: {e}");
            std::process::exit(1)
        }
    }
}

/// An error this layer found, through `comm`'s error handler; the code to return.
pub(crate) fn fail(comm: Handle, what: &str, e: Error) -> c_int {
    let e = Error::new(e.class(), format!("{what}: {e}"));
    match with_comm(comm, |_| Err::<(), _>(e)) {
        Ok(()) => MPI_SUCCESS,
        Err(e) => e.code(),
    }
}

/// MPI_SUCCESS, or the error's code.
pub(crate) fn ok_or_code<T>(r: Result<T>) -> c_int {
    match r {
        Ok(_) => MPI_SUCCESS,
        Err(e) => e.code(),
    }
}

/// Put `x` in the first free entry of a handle table; its index.
fn slot<T>(table: &mut Vec<Option<T>>, x: T) -> usize {
    match table.iter().position(Option::is_none) {
        Some(i) => {
            table[i] = Some(x);
            i
        }
        None => {
            table.push(Some(x));
            table.len() - 1
        }
    }
}

pub(crate) fn add_comm(c: Comm) -> Handle {
    with_state(|s| {
        let st = s
            .as_mut()
            .expect("a communicator made while MPI is initialized");
        abi::COMM_USER.wrapping_add(slot(&mut st.comms, c) as i32)
    })
}

/// The communicator `h` names, out of the table (MPI_Comm_free).
pub(crate) fn take_comm(h: Handle) -> Result<Comm> {
    if h == abi::COMM_WORLD || h == abi::COMM_SELF {
        return Err(Error::new(
            ErrorClass::Comm,
            "MPI_COMM_WORLD and MPI_COMM_SELF cannot be freed",
        ));
    }
    with_state(|s| {
        let st = s.as_mut().ok_or_else(|| not_initialized("MPI_Comm_free"))?;
        let i = h.wrapping_sub(abi::COMM_USER) as u32 as usize;
        st.comms.get_mut(i).and_then(Option::take).ok_or_else(|| {
            Error::new(
                ErrorClass::Comm,
                format!("communicator handle {h:#x} is not a communicator (never made, or freed)"),
            )
        })
    })
}

pub(crate) fn bad_type(dt: Handle) -> Error {
    Error::new(
        ErrorClass::Type,
        format!("datatype handle {dt:#x} is not a predefined datatype this library knows"),
    )
}

pub(crate) fn op_of(h: Handle) -> Result<earlybird::Op> {
    abi::op(h).ok_or_else(|| {
        Error::new(
            ErrorClass::Op,
            format!("operation handle {h:#x} is not a predefined operation"),
        )
    })
}

/// The datatype and byte length of `count` elements of `dt`.
fn shape(count: c_int, dt: Handle) -> Result<(Datatype, usize)> {
    let b = abi::basic_type(dt).ok_or_else(|| bad_type(dt))?;
    if count < 0 {
        return Err(Error::new(
            ErrorClass::Count,
            format!("count {count} is negative"),
        ));
    }
    Ok((Datatype::basic(b), count as usize * b.size()))
}

/// `count` elements of `dt` at `buf`, to read.
///
/// # Safety
/// `buf` points to `count` elements of `dt` that stay valid and unwritten for `'static` as far
/// as the caller uses the view (the call, or the nonblocking operation it starts).
pub(crate) unsafe fn buf_in(
    buf: *const c_void,
    count: c_int,
    dt: Handle,
) -> Result<Typed<'static>> {
    let (d, bytes) = shape(count, dt)?;
    let s: &'static [u8] = if bytes == 0 {
        &[]
    } else if buf.is_null() {
        return Err(Error::new(
            ErrorClass::Buffer,
            format!("a null buffer for {count} elements"),
        ));
    } else {
        // SAFETY: the function's contract: `bytes` readable bytes at `buf`.
        unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), bytes) }
    };
    Typed::new(s, count as usize, &d)
}

/// `count` elements of `dt` at `buf`, to write.
///
/// # Safety
/// `buf` points to room for `count` elements of `dt`, which nothing else touches while the
/// view is used (the call, or the nonblocking operation it starts).
pub(crate) unsafe fn buf_out(
    buf: *mut c_void,
    count: c_int,
    dt: Handle,
) -> Result<TypedMut<'static>> {
    let (d, bytes) = shape(count, dt)?;
    let s: &'static mut [u8] = if bytes == 0 {
        &mut []
    } else if buf.is_null() || buf as usize == abi::IN_PLACE {
        return Err(Error::new(
            ErrorClass::Buffer,
            format!("a null buffer for {count} elements"),
        ));
    } else {
        // SAFETY: the function's contract: `bytes` writable bytes at `buf`, used by this view
        // alone. (A receive buffer may not be initialised; the library only writes it.)
        unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), bytes) }
    };
    TypedMut::new(s, count as usize, &d)
}

/// Write `v` to `p` unless it is null.
///
/// # Safety
/// `p` is null or points to a writable `T`.
pub(crate) unsafe fn write<T>(p: *mut T, v: T) {
    if !p.is_null() {
        // SAFETY: the function's contract.
        unsafe { p.write(v) }
    }
}

/// Copy `text` (cut to `max - 1` bytes) with a NUL into `out`, its length into `len`.
///
/// # Safety
/// `out` is null or has room for `max` chars; `len` is null or an int.
pub(crate) unsafe fn write_str(out: *mut c_char, max: usize, text: &str, len: *mut c_int) {
    let b = &text.as_bytes()[..text.len().min(max - 1)];
    if !out.is_null() {
        // SAFETY: the function's contract: `max` chars at `out`, and `b.len() + 1 <= max`.
        unsafe {
            std::ptr::copy_nonoverlapping(b.as_ptr(), out.cast::<u8>(), b.len());
            out.add(b.len()).write(0);
        }
    }
    // SAFETY: the function's contract.
    unsafe { write(len, b.len() as c_int) };
}

/// Send modes of the nonblocking sends.
pub(crate) enum Mode {
    Standard,
    Synchronous,
}

fn scope() -> Result<&'static earlybird::Scope<'static, 'static>> {
    with_state(|s| {
        s.as_ref()
            .map(|st| st.scope)
            .ok_or_else(|| not_initialized("a nonblocking call"))
    })
}

fn add_request(p: Pending) -> Handle {
    with_state(|s| {
        let st = s.as_mut().expect("a request made while MPI is initialized");
        abi::REQUEST_USER.wrapping_add(slot(&mut st.reqs, p) as i32)
    })
}

/// MPI_Isend / MPI_Issend.
///
/// # Safety
/// `buf` holds `count` elements of `dt` and stays valid and unwritten until the request
/// completes or is freed.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn start_send(
    buf: *const c_void,
    count: c_int,
    dt: Handle,
    dest: c_int,
    tag: c_int,
    comm: Handle,
    mode: Mode,
) -> Result<Handle> {
    with_comm(comm, |c| {
        // SAFETY: the function's contract.
        let b = unsafe { buf_in(buf, count, dt) }?;
        let kept = Box::into_raw(Box::new(b));
        // SAFETY: `kept` is alive until `Pending::drop`, which drops the request first.
        let view: &'static Typed<'static> = unsafe { &*kept };
        let r = match mode {
            Mode::Standard => c.isend(scope()?, view, abi::rank_in(dest), tag),
            Mode::Synchronous => c.issend(scope()?, view, abi::rank_in(dest), tag),
        };
        match r {
            Ok(req) => Ok(add_request(Pending {
                req: Some(req),
                comm: c.clone(),
                kept: Kept::Send(kept),
            })),
            Err(e) => {
                // SAFETY: no request holds it.
                drop(unsafe { Box::from_raw(kept) });
                Err(e)
            }
        }
    })
}

/// MPI_Irecv.
///
/// # Safety
/// `buf` has room for `count` elements of `dt`, untouched by the program until the request
/// completes or is freed.
pub(crate) unsafe fn start_recv(
    buf: *mut c_void,
    count: c_int,
    dt: Handle,
    src: c_int,
    tag: c_int,
    comm: Handle,
) -> Result<Handle> {
    with_comm(comm, |c| {
        // SAFETY: the function's contract.
        let b = unsafe { buf_out(buf, count, dt) }?;
        let kept = Box::into_raw(Box::new(b));
        // SAFETY: `kept` is alive until `Pending::drop`, which drops the request first, and
        // nothing else uses it meanwhile.
        let view: &'static mut TypedMut<'static> = unsafe { &mut *kept };
        match c.irecv(scope()?, view, abi::rank_in(src), tag) {
            Ok(req) => Ok(add_request(Pending {
                req: Some(req),
                comm: c.clone(),
                kept: Kept::Recv(kept),
            })),
            Err(e) => {
                // SAFETY: no request holds it.
                drop(unsafe { Box::from_raw(kept) });
                Err(e)
            }
        }
    })
}

fn empty_status(s: *mut MpiStatus) {
    if s.is_null() || s as usize == abi::STATUS_IGNORE {
        return;
    }
    let v = MpiStatus {
        source: abi::ANY_SOURCE,
        tag: -1,
        ..MpiStatus::default()
    };
    // SAFETY: a status to write (MPI's contract), checked for null and the ignore sentinel.
    unsafe { s.write(v) }
}

fn take_request(h: Handle) -> Result<Pending> {
    with_state(|s| {
        let st = s
            .as_mut()
            .ok_or_else(|| not_initialized("a request call"))?;
        let i = h.wrapping_sub(abi::REQUEST_USER) as u32 as usize;
        st.reqs.get_mut(i).and_then(Option::take).ok_or_else(|| {
            Error::new(
                ErrorClass::Request,
                format!("request handle {h:#x} is not a request (never made, or completed)"),
            )
        })
    })
}

fn put_back(h: Handle, p: Pending) {
    with_state(|s| {
        if let Some(st) = s.as_mut() {
            let i = h.wrapping_sub(abi::REQUEST_USER) as u32 as usize;
            st.reqs[i] = Some(p);
        }
    })
}

/// MPI_Wait (`block`) or MPI_Test: whether the request completed; its status into `status`,
/// MPI_REQUEST_NULL into `*req` when it did. `Err` holds the code to return.
///
/// # Safety
/// `req` points to a request handle; `status` is MPI_STATUS_IGNORE or an MPI_Status.
pub(crate) unsafe fn complete(
    req: *mut Handle,
    status: *mut MpiStatus,
    block: bool,
) -> std::result::Result<bool, c_int> {
    if req.is_null() {
        return Err(fail(
            abi::COMM_WORLD,
            "MPI_Wait",
            Error::new(ErrorClass::Request, "a null request pointer"),
        ));
    }
    // SAFETY: the function's contract.
    let h = unsafe { req.read() };
    if h == abi::REQUEST_NULL {
        empty_status(status);
        return Ok(true);
    }
    let mut p = match take_request(h) {
        Ok(p) => p,
        Err(e) => return Err(fail(abi::COMM_WORLD, "MPI_Wait", e)),
    };
    let r = match p.req.as_mut() {
        Some(r) if block => r.wait().map(Some),
        Some(r) => r.test(),
        None => Ok(None),
    };
    match r {
        Ok(Some(st)) => {
            crate::status_out(status, &st);
            drop(p);
            // SAFETY: the function's contract.
            unsafe { req.write(abi::REQUEST_NULL) };
            Ok(true)
        }
        Ok(None) => {
            put_back(h, p);
            Ok(false)
        }
        Err(e) => {
            let comm = p.comm.clone();
            drop(p);
            // SAFETY: the function's contract.
            unsafe { req.write(abi::REQUEST_NULL) };
            Err(ok_or_code(comm.call_errhandler::<()>(e)))
        }
    }
}

/// MPI_Request_free.
///
/// # Safety
/// `req` points to a request handle.
pub(crate) unsafe fn free_request(req: *mut Handle) -> c_int {
    if req.is_null() {
        return fail(
            abi::COMM_WORLD,
            "MPI_Request_free",
            Error::new(ErrorClass::Request, "a null request pointer"),
        );
    }
    // SAFETY: the function's contract.
    let h = unsafe { req.read() };
    let mut p = match take_request(h) {
        Ok(p) => p,
        Err(e) => return fail(abi::COMM_WORLD, "MPI_Request_free", e),
    };
    let r = p.req.take().map_or(Ok(()), Request::free);
    drop(p);
    // SAFETY: the function's contract.
    unsafe { req.write(abi::REQUEST_NULL) };
    ok_or_code(r)
}
