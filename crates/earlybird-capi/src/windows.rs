//! One-sided communication in C (MPI 4.1 chapter 12): windows over the Rust API's [`Win`],
//! their operations and their synchronisation.
//!
//! The Rust API keeps a lock or a PSCW epoch as a value; C opens and ends it in two calls, so
//! the value is given up at the opening call (`keep_open`) and the epoch ended by the
//! window's call of the same name (`unlock_rank`, `complete_access`, ...). Every operation is
//! complete when its call returns (see the `rma` module of `earlybird`), so the request of
//! MPI_Rput and its kin is complete when it is made.

use crate::abi::{self, c, Handle, MPI_SUCCESS};
use crate::attribute_keys::{self, Attr, AttrKeyval};
use crate::state::{self, ok_or_code, with_win, write};
use earlybird::{At, Error, ErrorClass, ExposedMemory, LockType, Win, WinErrHandler};
use std::cell::{Cell, RefCell};
use std::ffi::{c_char, c_int, c_void};

/// A window and the values MPI_Win_get_attr hands out pointers to (boxed: they stay put
/// while the window lives), the program's attributes on it, and the handle of its error
/// handler.
pub(crate) struct CWin {
    pub(crate) win: Win,
    attrs: Box<Attrs>,
    /// The program's attributes, in setting order.
    user: RefCell<Vec<Attr>>,
    errh: Cell<Handle>,
}

/// A window error handler of the program's (MPI_Win_create_errhandler).
pub(crate) type WinErrFunction = crate::ErrhandlerFunction;

struct Attrs {
    size: isize,
    disp_unit: c_int,
    flavor: c_int,
    model: c_int,
}

impl CWin {
    fn new(win: Win) -> CWin {
        let attrs = Box::new(Attrs {
            size: win.size() as isize,
            disp_unit: win.disp_unit() as c_int,
            flavor: win.flavor() as c_int,
            model: win.model() as c_int,
        });
        CWin {
            win,
            attrs,
            user: RefCell::new(Vec::new()),
            errh: Cell::new(abi::ERRORS_ARE_FATAL),
        }
    }
}

/// The program's memory given to MPI_Win_create or MPI_Win_attach.
struct ProgramMemory {
    addr: u64,
    bytes: usize,
}

// SAFETY: MPI's contract for MPI_Win_create and MPI_Win_attach: the program keeps the `bytes`
// bytes at `addr` valid and accesses them only as MPI's rules allow (through loads and stores
// it synchronises with the window's epochs, never through Rust references) until the window
// is freed or the region detached, which is when the window drops this value.
unsafe impl ExposedMemory for ProgramMemory {
    fn address(&self) -> u64 {
        self.addr
    }

    fn bytes(&self) -> usize {
        self.bytes
    }
}

/// The window `h` out of the table, for a call that ends it here (MPI_Win_free, a rank
/// leaving it by MPIX_Win_change_comm): the program's attributes are deleted first, with the
/// window still usable by their delete functions (MPI 4.1 §7.7.1), last set first; the
/// result of those deletions beside it. An unknown handle is reported as every window call
/// reports it.
fn release(h: Handle, what: &str) -> Result<(CWin, earlybird::Result<()>), c_int> {
    let attrs = with_win(h, what, |w| Ok(std::mem::take(&mut *w.user.borrow_mut())))
        .map_err(|e| e.code())?;
    let mut r = Ok(());
    for (k, v, kv) in attrs.into_iter().rev() {
        r = r.and(kv.delete(h, k, v));
    }
    let w = state::take_win(h).map_err(|e| state::fail(abi::COMM_WORLD, what, e))?;
    let w = std::rc::Rc::try_unwrap(w).map_err(|_| {
        state::fail(
            abi::COMM_WORLD,
            what,
            Error::new(
                ErrorClass::Win,
                "the window is in use by a call in progress",
            ),
        )
    })?;
    Ok((w, r))
}

/// MPIX_Win_change_comm (seed 001): the window `*win` moves to `new_comm` (the Rust API's
/// `Win::change_comm`), keeping its attributes and error handler under a new handle; a
/// member not in `new_comm` passes MPI_COMM_NULL and leaves (its attributes are deleted as at
/// MPI_Win_free, and `*win` becomes MPI_WIN_NULL); a rank of `new_comm` that is not a member
/// passes MPI_WIN_NULL in `*win` and gets the window's new handle (`Comm::win_join`).
///
/// # Safety
/// `win` is null or points to a window handle to read and write.
pub(crate) unsafe fn change_comm(new_comm: Handle, peer: c_int, win: *mut Handle) -> c_int {
    const WHAT: &str = "MPIX_Win_change_comm";
    if win.is_null() {
        return state::fail(
            abi::COMM_WORLD,
            WHAT,
            Error::new(ErrorClass::Win, "a null window pointer"),
        );
    }
    // SAFETY: the function's contract, checked for null.
    let h = unsafe { win.read() };
    if h == abi::WIN_NULL {
        return made(win, state::with_comm_owned(new_comm, |c| c.win_join(peer)));
    }
    let w = match state::take_win(h).map(std::rc::Rc::try_unwrap) {
        Ok(Ok(w)) => w,
        Ok(Err(w)) => {
            // Back in the table, under a handle the program is told.
            if let Ok(h2) = state::keep_win(w) {
                // SAFETY: as above.
                unsafe { win.write(h2) };
            }
            return state::fail(
                abi::COMM_WORLD,
                WHAT,
                Error::new(
                    ErrorClass::Win,
                    "the window is in use by a call in progress",
                ),
            );
        }
        Err(e) => return state::fail(abi::COMM_WORLD, WHAT, e),
    };
    let CWin {
        win: mut inner,
        attrs,
        user,
        errh,
    } = w;
    let r = if new_comm == abi::COMM_NULL {
        inner.change_comm(None, peer)
    } else {
        state::with_comm_owned(new_comm, |c| inner.change_comm(Some(c), peer))
    };
    let kept = CWin {
        win: inner,
        attrs,
        user,
        errh,
    };
    let h2 = match state::add_win(kept) {
        Ok(h2) => h2,
        Err(e) => return e.code(),
    };
    // The program's error handler is told the window's handle: the new one from now on.
    if let Some(f) = user_handler(h2, errh_of(h2)) {
        let _ = with_win(h2, WHAT, |w| {
            w.win.set_errhandler(f);
            Ok(())
        });
    }
    if r.is_ok() && new_comm == abi::COMM_NULL {
        // Left: the window ends here as at MPI_Win_free (its attributes deleted first).
        let r = release(h2, WHAT).map(|(_, r)| r);
        // SAFETY: as above.
        unsafe { win.write(abi::WIN_NULL) };
        return match r {
            Ok(r) => ok_or_code(r),
            Err(code) => code,
        };
    }
    // SAFETY: as above.
    unsafe { win.write(h2) };
    ok_or_code(r)
}

/// The handle of the error handler set on window `h` (MPI_ERRORS_ARE_FATAL if unknown).
fn errh_of(h: Handle) -> Handle {
    with_win(h, "MPIX_Win_change_comm", |w| Ok(w.errh.get())).unwrap_or(abi::ERRORS_ARE_FATAL)
}

/// The window error handler the program made as `eh` (MPI_Win_create_errhandler), told the
/// window handle `win`; `None` for a predefined handler or an unknown one.
fn user_handler(win: Handle, eh: Handle) -> Option<WinErrHandler> {
    let f = state::win_errhandler_of(eh)?;
    state::user_handler_made();
    Some(Win::create_errhandler(move |_: &Win, e: &Error| {
        let (mut w, mut code) = (win, e.code());
        state::note_user_handler_ran();
        // SAFETY: the program's handler, called as MPI's C binding says (a pointer to the
        // window's handle and one to the error code).
        unsafe { f(&mut w, &mut code) }
    }))
}

/// A made window: its handle into `*out`.
fn made(out: *mut Handle, r: earlybird::Result<Win>) -> c_int {
    let r = r.and_then(|w| state::add_win(CWin::new(w)));
    // SAFETY: a handle to write (MPI's contract), checked for null.
    ok_or_code(r.map(|h| unsafe { write(out, h) }))
}

/// The window's memory address into `*baseptr` (MPI_Win_allocate's `void *` out argument).
///
/// # Safety
/// `baseptr` is null or points to a `void *` to write.
unsafe fn base_out(baseptr: *mut c_void, addr: u64) {
    // SAFETY: the function's contract; `write` checks for null.
    unsafe { write(baseptr.cast::<*mut c_void>(), addr as usize as *mut c_void) }
}

/// A size argument in bytes: a negative one becomes a size no window may have, which the
/// collective creation reports on every rank (MPI_ERR_SIZE), so that none waits for this one.
fn bytes(size: isize) -> usize {
    usize::try_from(size).unwrap_or(usize::MAX)
}

/// A displacement unit: a nonpositive one becomes 0, which the creation reports on every
/// rank (MPI_ERR_DISP).
fn unit(d: isize) -> usize {
    usize::try_from(d).unwrap_or(0)
}

/// `count` elements of `dt` on one side of an operation (`what`): the datatype, the count,
/// and their bytes (MPI_ERR_COUNT for a negative count).
fn sized(
    what: &str,
    count: c_int,
    dt: Handle,
) -> earlybird::Result<(earlybird::Datatype, usize, usize)> {
    let n = usize::try_from(count).map_err(|_| {
        Error::new(
            ErrorClass::Count,
            format!("{what} count {count} is negative"),
        )
    })?;
    let d = state::type_of(dt)?;
    let bytes = d.size() * n;
    Ok((d, n, bytes))
}

/// Whether a target of datatype `tdt` receives the origin's bytes contiguously: a predefined
/// type, as many bytes as the origin's. Then the operation takes the road without a target
/// datatype (one copy, not one per element).
fn contiguous(tdt: Handle, origin_bytes: usize, target_bytes: usize) -> bool {
    abi::basic_type(tdt).is_some() && origin_bytes == target_bytes
}

/// A target rank of a lock, unlock or flush: `None` for MPI_PROC_NULL, with which each of
/// them does nothing (MPI 4.1 §12.5: MPI_PROC_NULL is a valid target rank of every RMA call).
fn target(rank: c_int) -> Option<i32> {
    let r = abi::rank_in(rank);
    (r != earlybird::PROC_NULL).then_some(r)
}

/// MPI_Win_lock's lock type.
fn lock_type(t: c_int) -> earlybird::Result<LockType> {
    match t {
        c::MPI_LOCK_EXCLUSIVE => Ok(LockType::Exclusive),
        c::MPI_LOCK_SHARED => Ok(LockType::Shared),
        t => Err(Error::new(
            ErrorClass::Locktype,
            format!(
                "lock type {t} (MPI_LOCK_EXCLUSIVE is {}, MPI_LOCK_SHARED {})",
                c::MPI_LOCK_EXCLUSIVE,
                c::MPI_LOCK_SHARED
            ),
        )),
    }
}

/// An assertion argument (MPI_ERR_ASSERT for a negative one; the window checks the bits).
pub(crate) fn assert(a: c_int) -> earlybird::Result<u32> {
    u32::try_from(a)
        .map_err(|_| Error::new(ErrorClass::Assert, format!("assertion {a} is negative")))
}

/// The origin buffer of a put or accumulate.
///
/// # Safety
/// As [`state::buf_in`], for the call.
unsafe fn origin_in(
    buf: *const c_void,
    n: c_int,
    dt: Handle,
) -> earlybird::Result<earlybird::Typed<'static>> {
    // SAFETY: the function's contract.
    unsafe { state::buf_in(buf, n, dt) }
}

/// The target side of an operation: rank, displacement, count and datatype.
#[derive(Clone, Copy)]
struct Target {
    rank: c_int,
    disp: isize,
    count: c_int,
    dt: Handle,
}

impl Target {
    fn rank(&self) -> i32 {
        abi::rank_in(self.rank)
    }
}

/// Put, checked and done on `w`.
///
/// # Safety
/// `origin` holds `ocount` elements of `odt` (MPI's contract for MPI_Put).
#[allow(clippy::too_many_arguments)]
unsafe fn put(
    w: &Win,
    origin: *const c_void,
    ocount: c_int,
    odt: Handle,
    to: Target,
) -> earlybird::Result<()> {
    let (_, _, ob) = sized("origin", ocount, odt)?;
    let (t, n, tb) = sized("target", to.count, to.dt)?;
    // No bytes at both ends: nothing, whatever the datatypes (MPICH's badrma mixes them).
    if ob == 0 && tb == 0 {
        return Ok(());
    }
    // SAFETY: the function's contract.
    let b = unsafe { origin_in(origin, ocount, odt) }?;
    if contiguous(to.dt, ob, tb) {
        return w.put(&b, to.rank(), to.disp);
    }
    w.put_to(&b, to.rank(), to.disp, At::new(n, &t))
}

/// Get, checked and done on `w`.
///
/// # Safety
/// `result` has room for `rcount` elements of `rdt` (MPI's contract for MPI_Get).
#[allow(clippy::too_many_arguments)]
unsafe fn get(
    w: &Win,
    result: *mut c_void,
    rcount: c_int,
    rdt: Handle,
    from: Target,
) -> earlybird::Result<()> {
    let (_, _, rb) = sized("result", rcount, rdt)?;
    let (t, n, tb) = sized("target", from.count, from.dt)?;
    if rb == 0 && tb == 0 {
        return Ok(());
    }
    // SAFETY: the function's contract.
    let mut b = unsafe { state::buf_out(result, rcount, rdt) }?;
    if contiguous(from.dt, rb, tb) {
        return w.get(&mut b, from.rank(), from.disp);
    }
    w.get_from(&mut b, from.rank(), from.disp, At::new(n, &t))
}

/// Accumulate, checked and done on `w`.
///
/// # Safety
/// As [`put`].
#[allow(clippy::too_many_arguments)]
unsafe fn accumulate(
    w: &Win,
    origin: *const c_void,
    ocount: c_int,
    odt: Handle,
    to: Target,
    op: Handle,
) -> earlybird::Result<()> {
    let (_, _, ob) = sized("origin", ocount, odt)?;
    let (t, n, tb) = sized("target", to.count, to.dt)?;
    if ob == 0 && tb == 0 {
        return Ok(());
    }
    let op = state::op_of(op)?;
    if odt == to.dt && ocount == to.count {
        // The same predefined type on both sides: the slice road, without a target datatype.
        macro_rules! slice_road {
            ($T:ty) => {{
                // SAFETY: the function's contract.
                if let Some(o) = unsafe { state::slice_in::<$T>(origin, ocount) }? {
                    return w.accumulate(o, to.rank(), to.disp, &op);
                }
            }};
        }
        use earlybird::BasicType as B;
        match abi::basic_type(odt) {
            Some(B::Int | B::Int32) => slice_road!(i32),
            Some(B::Unsigned | B::Uint32) => slice_road!(u32),
            Some(B::Long | B::LongLong | B::Int64) => slice_road!(i64),
            Some(B::UnsignedLong | B::UnsignedLongLong | B::Uint64) => slice_road!(u64),
            Some(B::Short | B::Int16) => slice_road!(i16),
            Some(B::UnsignedShort | B::Uint16) => slice_road!(u16),
            Some(B::Float) => slice_road!(f32),
            Some(B::Double) => slice_road!(f64),
            _ => {}
        }
    }
    // SAFETY: the function's contract.
    let b = unsafe { origin_in(origin, ocount, odt) }?;
    w.accumulate_typed(b, to.rank(), to.disp, At::new(n, &t), &op)
}

/// Get_accumulate, checked and done on `w`. With MPI_NO_OP the origin is not read (MPI lets
/// it be anything).
///
/// # Safety
/// As [`put`] for the origin and [`get`] for the result.
#[allow(clippy::too_many_arguments)]
unsafe fn get_accumulate(
    w: &Win,
    origin: *const c_void,
    ocount: c_int,
    odt: Handle,
    result: *mut c_void,
    rcount: c_int,
    rdt: Handle,
    at: Target,
    op: Handle,
) -> earlybird::Result<()> {
    let no_op = op == c::MPI_NO_OP;
    let ob = if no_op {
        0
    } else {
        sized("origin", ocount, odt)?.2
    };
    let (_, _, rb) = sized("result", rcount, rdt)?;
    let (t, n, tb) = sized("target", at.count, at.dt)?;
    if ob == 0 && rb == 0 && tb == 0 {
        return Ok(());
    }
    // SAFETY: the function's contract (nothing is read for MPI_NO_OP: an empty view).
    let o = unsafe {
        if no_op {
            origin_in(std::ptr::null(), 0, rdt)
        } else {
            origin_in(origin, ocount, odt)
        }
    }?;
    // SAFETY: the function's contract.
    let r = unsafe { state::buf_out(result, rcount, rdt) }?;
    let op = state::op_of(op)?;
    w.get_accumulate_typed(o, r, at.rank(), at.disp, At::new(n, &t), &op)
}

/// MPI_Win_create and its `_c` form.
fn create(
    base: *mut c_void,
    size: isize,
    disp_unit: isize,
    info: Handle,
    comm: Handle,
    win: *mut Handle,
) -> c_int {
    let mem = ProgramMemory {
        addr: base as u64,
        bytes: bytes(size),
    };
    let r = crate::comms::info_of(info).and_then(|i| {
        state::with_comm_aside(comm, |c| c.win_create_exposed(mem, unit(disp_unit), &i))
    });
    made(win, r)
}

/// MPI_Win_allocate (`shared`: MPI_Win_allocate_shared) and their `_c` forms.
///
/// # Safety
/// As [`base_out`] for `baseptr`.
unsafe fn allocate(
    shared: bool,
    size: isize,
    disp_unit: isize,
    info: Handle,
    comm: Handle,
    baseptr: *mut c_void,
    win: *mut Handle,
) -> c_int {
    let r = crate::comms::info_of(info).and_then(|i| {
        state::with_comm_aside(comm, |c| {
            if shared {
                c.win_allocate_shared(bytes(size), unit(disp_unit), &i)
            } else {
                c.win_allocate(bytes(size), unit(disp_unit), &i)
            }
        })
    });
    // SAFETY: the function's contract.
    let r = r.inspect(|w| unsafe { base_out(baseptr, w.base()) });
    made(win, r)
}

/// MPI_Win_shared_query's answers: bytes, displacement unit and address of `rank`'s memory.
fn shared_query(w: &Win, rank: c_int) -> earlybird::Result<(isize, isize, u64)> {
    let (v, du) = w.shared_query::<u8>(abi::rank_in(rank))?;
    Ok((v.len() as isize, du as isize, v.address()))
}

/// A request-based operation's request (complete already) into `*req`.
fn done_request(out: *mut Handle, r: earlybird::Result<earlybird::Request<'static>>) -> c_int {
    let r = r.map(|q| state::add_request(state::pending(q, abi::COMM_WORLD, state::Kept::Slice)));
    // SAFETY: a handle to write (MPI's contract), checked for null.
    ok_or_code(r.map(|h| unsafe { write(out, h) }))
}

mpi! {
    // ---- creation and destruction --------------------------------------------------------

    fn MPI_Win_create / PMPI_Win_create(base: *mut c_void, size: isize, disp_unit: c_int, info: Handle, comm: Handle, win: *mut Handle) {
        create(base, size, disp_unit as isize, info, comm, win)
    }

    fn MPI_Win_create_c / PMPI_Win_create_c(base: *mut c_void, size: isize, disp_unit: isize, info: Handle, comm: Handle, win: *mut Handle) {
        create(base, size, disp_unit, info, comm, win)
    }

    fn MPI_Win_allocate / PMPI_Win_allocate(size: isize, disp_unit: c_int, info: Handle, comm: Handle, baseptr: *mut c_void, win: *mut Handle) {
        // SAFETY: MPI's contract for `baseptr`.
        unsafe { allocate(false, size, disp_unit as isize, info, comm, baseptr, win) }
    }

    fn MPI_Win_allocate_c / PMPI_Win_allocate_c(size: isize, disp_unit: isize, info: Handle, comm: Handle, baseptr: *mut c_void, win: *mut Handle) {
        // SAFETY: MPI's contract for `baseptr`.
        unsafe { allocate(false, size, disp_unit, info, comm, baseptr, win) }
    }

    fn MPI_Win_allocate_shared / PMPI_Win_allocate_shared(size: isize, disp_unit: c_int, info: Handle, comm: Handle, baseptr: *mut c_void, win: *mut Handle) {
        // SAFETY: MPI's contract for `baseptr`.
        unsafe { allocate(true, size, disp_unit as isize, info, comm, baseptr, win) }
    }

    fn MPI_Win_allocate_shared_c / PMPI_Win_allocate_shared_c(size: isize, disp_unit: isize, info: Handle, comm: Handle, baseptr: *mut c_void, win: *mut Handle) {
        // SAFETY: MPI's contract for `baseptr`.
        unsafe { allocate(true, size, disp_unit, info, comm, baseptr, win) }
    }

    fn MPI_Win_create_dynamic / PMPI_Win_create_dynamic(info: Handle, comm: Handle, win: *mut Handle) {
        let r = crate::comms::info_of(info).and_then(|i| state::with_comm_aside(comm, |c| c.win_create_dynamic(&i)));
        made(win, r)
    }

    fn MPI_Win_attach / PMPI_Win_attach(win: Handle, base: *mut c_void, size: isize) {
        let mem = ProgramMemory { addr: base as u64, bytes: bytes(size) };
        ok_or_code(with_win(win, "MPI_Win_attach", |w| w.win.attach_exposed(mem)))
    }

    fn MPI_Win_detach / PMPI_Win_detach(win: Handle, base: *const c_void) {
        ok_or_code(with_win(win, "MPI_Win_detach", |w| w.win.detach_address(base as u64)))
    }

    fn MPI_Win_free / PMPI_Win_free(win: *mut Handle) {
        if win.is_null() {
            return state::fail(abi::COMM_WORLD, "MPI_Win_free", Error::new(ErrorClass::Win, "a null window pointer"));
        }
        // SAFETY: a window handle to read and write (MPI's contract), not null.
        let h = unsafe { win.read() };
        // The program's attributes are deleted first, the window still usable by their
        // delete functions (MPI 4.1 §7.7.1), last set first. An unknown handle is reported
        // here, as every window call reports it.
        let (w, r) = match release(h, "MPI_Win_free") {
            Ok(x) => x,
            Err(code) => return code,
        };
        // The window's own error handler takes a failure (an epoch still open). The window
        // is out of the state: its collectives may let the lock go (MULTIPLE).
        let r = r.and(state::let_go_aside(|| w.win.free()));
        // SAFETY: as above.
        unsafe { win.write(abi::WIN_NULL) };
        ok_or_code(r)
    }

    fn MPI_Win_shared_query / PMPI_Win_shared_query(win: Handle, rank: c_int, size: *mut isize, disp_unit: *mut c_int, baseptr: *mut c_void) {
        ok_or_code(with_win(win, "MPI_Win_shared_query", |w| {
            let (bytes, du, addr) = shared_query(&w.win, rank)?;
            // SAFETY: an MPI_Aint, an int and a `void *` to write (MPI's contract), each
            // checked for null.
            unsafe {
                write(size, bytes);
                write(disp_unit, du as c_int);
                base_out(baseptr, addr);
            }
            Ok(())
        }))
    }

    fn MPI_Win_shared_query_c / PMPI_Win_shared_query_c(win: Handle, rank: c_int, size: *mut isize, disp_unit: *mut isize, baseptr: *mut c_void) {
        ok_or_code(with_win(win, "MPI_Win_shared_query_c", |w| {
            let (bytes, du, addr) = shared_query(&w.win, rank)?;
            // SAFETY: two MPI_Aints and a `void *` to write (MPI's contract), each checked
            // for null.
            unsafe {
                write(size, bytes);
                write(disp_unit, du);
                base_out(baseptr, addr);
            }
            Ok(())
        }))
    }

    // ---- queries, names, info, error handlers ---------------------------------------------

    fn MPI_Win_get_group / PMPI_Win_get_group(win: Handle, group: *mut Handle) {
        let r = with_win(win, "MPI_Win_get_group", |w| Ok(w.win.group())).and_then(state::add_group);
        // SAFETY: a handle to write, checked for null.
        ok_or_code(r.map(|h| unsafe { write(group, h) }))
    }

    fn MPI_Win_get_attr / PMPI_Win_get_attr(win: Handle, keyval: c_int, value: *mut c_void, flag: *mut c_int) {
        ok_or_code(with_win(win, "MPI_Win_get_attr", |w| {
            let a = &*w.attrs;
            let v: Option<*mut c_void> = match keyval {
                // MPI_WIN_BASE is the address itself; the others point to the value.
                c::MPI_WIN_BASE => Some(w.win.base() as usize as *mut c_void),
                c::MPI_WIN_SIZE => Some((&raw const a.size).cast_mut().cast()),
                c::MPI_WIN_DISP_UNIT => Some((&raw const a.disp_unit).cast_mut().cast()),
                c::MPI_WIN_CREATE_FLAVOR => Some((&raw const a.flavor).cast_mut().cast()),
                c::MPI_WIN_MODEL => Some((&raw const a.model).cast_mut().cast()),
                k => w.user.borrow().iter().find(|a| a.0 == k).map(|a| a.1 as *mut c_void),
            };
            // SAFETY: a `void *` and an int to write (MPI's contract), checked for null.
            unsafe {
                if let Some(v) = v {
                    write(value.cast::<*mut c_void>(), v);
                }
                write(flag, c_int::from(v.is_some()));
            }
            Ok(())
        }))
    }

    fn MPI_Win_set_name / PMPI_Win_set_name(win: Handle, name: *const c_char) {
        // SAFETY: a NUL-terminated name (MPI's contract).
        let n = unsafe { crate::c_str(name) };
        ok_or_code(with_win(win, "MPI_Win_set_name", |w| {
            w.win.set_name(&n?);
            Ok(())
        }))
    }

    fn MPI_Win_get_name / PMPI_Win_get_name(win: Handle, name: *mut c_char, len: *mut c_int) {
        if win == abi::c::MPI_WIN_NULL {
            // The null handle's name, as MPICH gives it.
            // SAFETY: room for MPI_MAX_OBJECT_NAME chars, an int (MPI's contract).
            unsafe { state::write_str(name, abi::MAX_OBJECT_NAME, "MPI_WIN_NULL", len) };
            return MPI_SUCCESS;
        }
        ok_or_code(with_win(win, "MPI_Win_get_name", |w| {
            // SAFETY: room for MPI_MAX_OBJECT_NAME chars, an int (MPI's contract).
            unsafe { state::write_str(name, abi::MAX_OBJECT_NAME, &w.win.name(), len) };
            Ok(())
        }))
    }

    fn MPI_Win_set_errhandler / PMPI_Win_set_errhandler(win: Handle, eh: Handle) {
        let h = match eh {
            abi::ERRORS_ARE_FATAL => WinErrHandler::Fatal,
            abi::ERRORS_RETURN => WinErrHandler::Return,
            abi::ERRORS_ABORT => WinErrHandler::Abort,
            eh => match user_handler(win, eh) {
                // The program's handler, told this window's handle.
                Some(f) => f,
                None => {
                    let e = Error::new(ErrorClass::Arg, format!("error handler {eh:#x} is not one for windows (MPI_ERRORS_ARE_FATAL, MPI_ERRORS_RETURN, MPI_ERRORS_ABORT, or one MPI_Win_create_errhandler made)"));
                    return ok_or_code(with_win(win, "MPI_Win_set_errhandler", |_| Err::<(), _>(e)));
                }
            },
        };
        ok_or_code(with_win(win, "MPI_Win_set_errhandler", |w| {
            w.win.set_errhandler(h);
            w.errh.set(eh);
            Ok(())
        }))
    }

    fn MPI_Win_get_errhandler / PMPI_Win_get_errhandler(win: Handle, out: *mut Handle) {
        ok_or_code(with_win(win, "MPI_Win_get_errhandler", |w| {
            // SAFETY: a handle to write, checked for null.
            unsafe { write(out, w.errh.get()) };
            Ok(())
        }))
    }

    fn MPI_Win_create_errhandler / PMPI_Win_create_errhandler(f: Option<WinErrFunction>, out: *mut Handle) {
        let Some(f) = f else {
            return crate::self_ok(Err::<(), _>(Error::new(ErrorClass::Arg, "MPI_Win_create_errhandler: a null function")));
        };
        // SAFETY: a handle to write (MPI's contract), checked for null.
        crate::self_ok(state::add_win_errhandler(f).map(|h| unsafe { write(out, h) }))
    }

    // ---- attributes of the program's --------------------------------------------------------

    fn MPI_Win_create_keyval / PMPI_Win_create_keyval(copy: Option<crate::CopyFunction>, delete: Option<crate::DeleteFunction>, keyval: *mut c_int, extra: *mut c_void) {
        // Windows are never duplicated: the copy function is kept but never called.
        let r = state::add_win_keyval(AttrKeyval { copy, delete, extra: extra as usize, freed: false });
        // SAFETY: an int to write (MPI's contract), checked for null.
        crate::self_ok(r.map(|k| unsafe { write(keyval, k) }))
    }

    fn MPI_Win_free_keyval / PMPI_Win_free_keyval(keyval: *mut c_int) {
        attribute_keys::free_keyval("MPI_Win_free_keyval", keyval, state::free_win_keyval)
    }

    fn MPI_Win_set_attr / PMPI_Win_set_attr(win: Handle, keyval: c_int, value: *mut c_void) {
        let kv = match state::win_keyval_of(keyval) {
            Ok(kv) => kv,
            Err(e) => return ok_or_code(with_win(win, "MPI_Win_set_attr", |_| Err::<(), _>(e))),
        };
        // The old value's delete function runs after the window is back in the state.
        let old = with_win(win, "MPI_Win_set_attr", |w| {
            Ok(attribute_keys::set(&mut w.user.borrow_mut(), (keyval, value as usize, kv)))
        });
        ok_or_code(old.and_then(|old| old.map_or(Ok(()), |(k, v, kv)| kv.delete(win, k, v))))
    }

    fn MPI_Win_delete_attr / PMPI_Win_delete_attr(win: Handle, keyval: c_int) {
        let gone = with_win(win, "MPI_Win_delete_attr", |w| {
            let mut user = w.user.borrow_mut();
            let i = user.iter().position(|a| a.0 == keyval).ok_or_else(|| Error::new(ErrorClass::Keyval, format!("MPI_Win_delete_attr: the window has no attribute under keyval {keyval:#x}")))?;
            Ok(user.remove(i))
        });
        ok_or_code(gone.and_then(|(k, v, kv)| kv.delete(win, k, v)))
    }

    fn MPI_Win_call_errhandler / PMPI_Win_call_errhandler(win: Handle, code: c_int) {
        let e = Error::new(earlybird::error_class(code).unwrap_or(ErrorClass::Other), format!("error code {code} raised by the program"));
        match with_win(win, "MPI_Win_call_errhandler", |_| Err::<(), _>(e)) {
            Ok(()) | Err(_) => MPI_SUCCESS,
        }
    }

    fn MPI_Win_get_info / PMPI_Win_get_info(win: Handle, out: *mut Handle) {
        let r = with_win(win, "MPI_Win_get_info", |w| Ok(w.win.info())).and_then(state::add_info);
        // SAFETY: a handle to write, checked for null.
        ok_or_code(r.map(|h| unsafe { write(out, h) }))
    }

    fn MPI_Win_set_info / PMPI_Win_set_info(win: Handle, info: Handle) {
        ok_or_code(crate::comms::info_of(info).and_then(|i| with_win(win, "MPI_Win_set_info", |w| w.win.set_info(&i))))
    }

    // ---- synchronisation ------------------------------------------------------------------

    fn MPI_Win_fence / PMPI_Win_fence(a: c_int, win: Handle) {
        ok_or_code(state::with_win_aside(win, "MPI_Win_fence", |w| w.win.fence(assert(a)?)))
    }

    fn MPI_Win_post / PMPI_Win_post(group: Handle, a: c_int, win: Handle) {
        ok_or_code(with_win(win, "MPI_Win_post", |w| {
            let g = state::group_of(group)?;
            w.win.post(&g, assert(a)?).map(earlybird::ExposureEpoch::keep_open)
        }))
    }

    fn MPI_Win_start / PMPI_Win_start(group: Handle, a: c_int, win: Handle) {
        ok_or_code(state::with_win_aside(win, "MPI_Win_start", |w| {
            let g = state::group_of(group)?;
            w.win.start(&g, assert(a)?).map(earlybird::AccessEpoch::keep_open)
        }))
    }

    fn MPI_Win_complete / PMPI_Win_complete(win: Handle) {
        ok_or_code(state::with_win_aside(win, "MPI_Win_complete", |w| w.win.complete_access()))
    }

    fn MPI_Win_wait / PMPI_Win_wait(win: Handle) {
        ok_or_code(state::with_win_aside(win, "MPI_Win_wait", |w| w.win.wait_exposure()))
    }

    fn MPI_Win_test / PMPI_Win_test(win: Handle, flag: *mut c_int) {
        let r = with_win(win, "MPI_Win_test", |w| w.win.test_exposure());
        // SAFETY: an int to write, checked for null.
        ok_or_code(r.map(|done| unsafe { write(flag, c_int::from(done)) }))
    }

    fn MPI_Win_lock / PMPI_Win_lock(lt: c_int, rank: c_int, a: c_int, win: Handle) {
        ok_or_code(state::with_win_aside(win, "MPI_Win_lock", |w| {
            let (lt, a) = (lock_type(lt)?, assert(a)?);
            match target(rank) {
                Some(r) => w.win.lock(lt, r, a).map(earlybird::Lock::keep_open),
                None => Ok(()),
            }
        }))
    }

    fn MPI_Win_unlock / PMPI_Win_unlock(rank: c_int, win: Handle) {
        ok_or_code(state::with_win_aside(win, "MPI_Win_unlock", |w| target(rank).map_or(Ok(()), |r| w.win.unlock_rank(r))))
    }

    fn MPI_Win_lock_all / PMPI_Win_lock_all(a: c_int, win: Handle) {
        ok_or_code(state::with_win_aside(win, "MPI_Win_lock_all", |w| w.win.lock_all(assert(a)?).map(earlybird::LockAll::keep_open)))
    }

    fn MPI_Win_unlock_all / PMPI_Win_unlock_all(win: Handle) {
        ok_or_code(state::with_win_aside(win, "MPI_Win_unlock_all", |w| w.win.unlock_all_ranks()))
    }

    fn MPI_Win_flush / PMPI_Win_flush(rank: c_int, win: Handle) {
        ok_or_code(state::with_win_aside(win, "MPI_Win_flush", |w| target(rank).map_or(Ok(()), |r| w.win.flush(r))))
    }

    fn MPI_Win_flush_all / PMPI_Win_flush_all(win: Handle) {
        ok_or_code(state::with_win_aside(win, "MPI_Win_flush_all", |w| w.win.flush_all()))
    }

    fn MPI_Win_flush_local / PMPI_Win_flush_local(rank: c_int, win: Handle) {
        ok_or_code(state::with_win_aside(win, "MPI_Win_flush_local", |w| target(rank).map_or(Ok(()), |r| w.win.flush_local(r))))
    }

    fn MPI_Win_flush_local_all / PMPI_Win_flush_local_all(win: Handle) {
        ok_or_code(state::with_win_aside(win, "MPI_Win_flush_local_all", |w| w.win.flush_local_all()))
    }

    fn MPI_Win_sync / PMPI_Win_sync(win: Handle) {
        ok_or_code(with_win(win, "MPI_Win_sync", |w| w.win.sync()))
    }

    // ---- operations -------------------------------------------------------------------------

    fn MPI_Put / PMPI_Put(origin: *const c_void, ocount: c_int, odt: Handle, target: c_int, disp: isize, tcount: c_int, tdt: Handle, win: Handle) {
        // SAFETY: MPI's contract for the origin buffer.
        ok_or_code(with_win(win, "MPI_Put", |w| unsafe { put(&w.win, origin, ocount, odt, Target { rank: target, disp, count: tcount, dt: tdt }) }))
    }

    fn MPI_Get / PMPI_Get(result: *mut c_void, rcount: c_int, rdt: Handle, target: c_int, disp: isize, tcount: c_int, tdt: Handle, win: Handle) {
        // SAFETY: MPI's contract for the result buffer.
        ok_or_code(with_win(win, "MPI_Get", |w| unsafe { get(&w.win, result, rcount, rdt, Target { rank: target, disp, count: tcount, dt: tdt }) }))
    }

    fn MPI_Accumulate / PMPI_Accumulate(origin: *const c_void, ocount: c_int, odt: Handle, target: c_int, disp: isize, tcount: c_int, tdt: Handle, op: Handle, win: Handle) {
        // SAFETY: MPI's contract for the origin buffer.
        ok_or_code(with_win(win, "MPI_Accumulate", |w| unsafe { accumulate(&w.win, origin, ocount, odt, Target { rank: target, disp, count: tcount, dt: tdt }, op) }))
    }

    fn MPI_Get_accumulate / PMPI_Get_accumulate(origin: *const c_void, ocount: c_int, odt: Handle, result: *mut c_void, rcount: c_int, rdt: Handle, target: c_int, disp: isize, tcount: c_int, tdt: Handle, op: Handle, win: Handle) {
        // SAFETY: MPI's contract for the origin and result buffers.
        ok_or_code(with_win(win, "MPI_Get_accumulate", |w| unsafe { get_accumulate(&w.win, origin, ocount, odt, result, rcount, rdt, Target { rank: target, disp, count: tcount, dt: tdt }, op) }))
    }

    fn MPI_Fetch_and_op / PMPI_Fetch_and_op(origin: *const c_void, result: *mut c_void, dt: Handle, target: c_int, disp: isize, op: Handle, win: Handle) {
        // One element of `dt` each: a get_accumulate of one element.
        // SAFETY: MPI's contract for the origin and result buffers.
        ok_or_code(with_win(win, "MPI_Fetch_and_op", |w| unsafe { get_accumulate(&w.win, origin, 1, dt, result, 1, dt, Target { rank: target, disp, count: 1, dt }, op) }))
    }

    fn MPI_Compare_and_swap / PMPI_Compare_and_swap(origin: *const c_void, compare: *const c_void, result: *mut c_void, dt: Handle, target: c_int, disp: isize, win: Handle) {
        ok_or_code(with_win(win, "MPI_Compare_and_swap", |w| {
            if origin.is_null() || compare.is_null() || result.is_null() {
                return Err(Error::new(ErrorClass::Buffer, "MPI_Compare_and_swap: a null buffer"));
            }
            state::by_elem!(dt, T => {
                // SAFETY: one element of `dt` at each pointer (MPI's contract), not null; read
                // and written unaligned, as C may place them anywhere.
                let (o, cmp) = unsafe { (origin.cast::<T>().read_unaligned(), compare.cast::<T>().read_unaligned()) };
                let mut r = o;
                w.win.compare_and_swap(&o, &cmp, &mut r, abi::rank_in(target), disp)?;
                // SAFETY: as above.
                unsafe { result.cast::<T>().write_unaligned(r) };
                return Ok(());
            });
            Err(Error::new(ErrorClass::Type, format!("MPI_Compare_and_swap: datatype {dt:#x} is not a predefined integer type (or MPI_BYTE)")))
        }))
    }

    fn MPI_Rput / PMPI_Rput(origin: *const c_void, ocount: c_int, odt: Handle, target: c_int, disp: isize, tcount: c_int, tdt: Handle, win: Handle, req: *mut Handle) {
        // SAFETY: MPI's contract for the origin buffer.
        done_request(req, with_win(win, "MPI_Rput", |w| unsafe { put(&w.win, origin, ocount, odt, Target { rank: target, disp, count: tcount, dt: tdt }) }.map(|()| w.win.done_request())))
    }

    fn MPI_Rget / PMPI_Rget(result: *mut c_void, rcount: c_int, rdt: Handle, target: c_int, disp: isize, tcount: c_int, tdt: Handle, win: Handle, req: *mut Handle) {
        // SAFETY: MPI's contract for the result buffer.
        done_request(req, with_win(win, "MPI_Rget", |w| unsafe { get(&w.win, result, rcount, rdt, Target { rank: target, disp, count: tcount, dt: tdt }) }.map(|()| w.win.done_request())))
    }

    fn MPI_Raccumulate / PMPI_Raccumulate(origin: *const c_void, ocount: c_int, odt: Handle, target: c_int, disp: isize, tcount: c_int, tdt: Handle, op: Handle, win: Handle, req: *mut Handle) {
        // SAFETY: MPI's contract for the origin buffer.
        done_request(req, with_win(win, "MPI_Raccumulate", |w| unsafe { accumulate(&w.win, origin, ocount, odt, Target { rank: target, disp, count: tcount, dt: tdt }, op) }.map(|()| w.win.done_request())))
    }

    fn MPI_Rget_accumulate / PMPI_Rget_accumulate(origin: *const c_void, ocount: c_int, odt: Handle, result: *mut c_void, rcount: c_int, rdt: Handle, target: c_int, disp: isize, tcount: c_int, tdt: Handle, op: Handle, win: Handle, req: *mut Handle) {
        // SAFETY: MPI's contract for the origin and result buffers.
        done_request(req, with_win(win, "MPI_Rget_accumulate", |w| unsafe { get_accumulate(&w.win, origin, ocount, odt, result, rcount, rdt, Target { rank: target, disp, count: tcount, dt: tdt }, op) }.map(|()| w.win.done_request())))
    }
}
