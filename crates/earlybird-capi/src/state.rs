//! The MPI state of the thread that called `MPI_Init`: the universe, the tables behind the
//! handles this library makes, and the conversions every function shares.

use crate::abi::{self, Handle, MpiStatus, MPI_SUCCESS};
use earlybird::{
    Begun, Comm, Datatype, Error, ErrorClass, Request, Result, Typed, TypedMut, Universe,
};
use std::cell::{Cell, RefCell};
use std::ffi::{c_char, c_int, c_void};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};

/// The world model (MPI 4.1 §11.2): MPI_Init has been called; MPI_Finalize has.
static INITIALIZED: AtomicBool = AtomicBool::new(false);
static FINALIZED: AtomicBool = AtomicBool::new(false);
/// The library is up: MPI_Init or a session's MPI_Session_init started it, and it stays up
/// while the world model is initialized and not finalized, or a session is open.
static STARTED: AtomicBool = AtomicBool::new(false);
/// The library was torn down: it does not start again (the rank is made once a process).
static ENDED: AtomicBool = AtomicBool::new(false);
/// Sessions open (MPI 4.1 §11.3; `sessions.rs`).
static SESSIONS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

struct State {
    /// The rank of the thread that called MPI_Init (`None` in a thread that drives
    /// endpoints only).
    uni: Option<Universe>,
    /// Endpoints (seed 003) this thread drives, by handle (see `endpoints.rs`).
    endpoints: Vec<(Handle, earlybird::EndpointComm)>,
    /// The scope every nonblocking operation lends its buffer to (it never ends: each
    /// operation is completed through its request, as MPI says).
    scope: &'static earlybird::Scope<'static, 'static>,
    comms: Table<Comm>,
    reqs: Table<Held>,
    /// Nonblocking sends and receives that completed at their start: their statuses (a
    /// lightweight request, as MPICH's completed built-in ones: no box, no request to wait).
    done: Table<earlybird::Status>,
    /// The boxes of requests that completed or were freed, for the next ones (boxes, not
    /// requests: a box moves into the table as a pointer).
    #[allow(clippy::vec_box)]
    spare: Vec<Box<Option<Pending>>>,
    types: Table<Datatype>,
    groups: Table<earlybird::Group>,
    ops: Table<earlybird::Op>,
    infos: Table<earlybird::Info>,
    keyvals: Table<earlybird::Keyval<usize>>,
    errhandlers: Table<earlybird::ErrHandler>,
    messages: Table<earlybird::Message>,
    wins: Table<Rc<crate::windows::CWin>>,
    /// Window keyvals.
    win_keyvals: Table<crate::attribute_keys::AttrKeyval>,
    /// Datatype keyvals, and the attributes on datatypes by handle.
    type_keyvals: Table<crate::attribute_keys::AttrKeyval>,
    type_attrs: std::collections::HashMap<Handle, Vec<crate::attribute_keys::Attr>>,
    /// Names the program gave predefined datatypes (MPI_Type_set_name), by handle: each use
    /// of a predefined handle makes its datatype anew.
    type_names: std::collections::HashMap<Handle, String>,
    /// The datatypes MPI_Type_create_f90_* made (f90_types.rs).
    f90: crate::f90_types::Registry,
    /// Window error handlers: the program's functions.
    win_errhandlers: Table<crate::windows::WinErrFunction>,
    /// The buffer MPI_Buffer_attach was given, for MPI_Buffer_detach to hand back (the
    /// library buffers in memory of its own of the same size).
    attached: Option<Attached>,
    /// What the program attached to communicators, by handle.
    comm_attached: Vec<(Handle, Attached)>,
    /// MPI_INFO_ENV: empty (earlybird keeps nothing of the command line there).
    env: earlybird::Info,
    /// Open sessions (`sessions.rs`), and the program's session error handlers.
    sessions: Table<Rc<crate::sessions::CSession>>,
    session_errhandlers: Table<crate::ErrhandlerFunction>,
}

thread_local! {
    static STATE: ThreadState = const {
        ThreadState {
            state: RefCell::new(None),
            held: BigHeld {
                depth: Cell::new(0),
                opaque: Cell::new(0),
                locked: Cell::new(false),
                guard: Cell::new(None),
            },
        }
    };
}

/// A thread's state, left undropped if it is still there when the thread's locals go (the
/// process exits on a fatal error, or without MPI_Finalize): dropping it would finalize its
/// rank and run the program's delete callbacks, which call MPI, whose state is this one,
/// now unreachable. MPI_Finalize takes the state out first, so a finished program drops it.
/// Beside it (one thread-local, reached once per call), what the thread holds of `BIG`.
struct ThreadState {
    state: RefCell<Option<State>>,
    held: BigHeld,
}

impl Drop for ThreadState {
    fn drop(&mut self) {
        std::mem::forget(self.state.get_mut().take());
    }
}

/// The process's state under MPI_THREAD_SERIALIZED and MPI_THREAD_MULTIPLE: any thread may
/// call MPI, so the state lives here instead of in the initialising thread's `STATE`.
/// (Threads that drive endpoints keep tables of their own in `STATE`, at every level.)
struct SerializedState(RefCell<Option<State>>);

// SAFETY: the state is reached only through `cell`, and from here only once MPI_Init_thread
// provided MPI_THREAD_SERIALIZED or MULTIPLE. Under SERIALIZED the program's contract (MPI
// 4.1 §11.6.3) is that it never has two threads in MPI at once and orders its calls with its
// own synchronization; under MULTIPLE `cell` reaches this state only with `BIG` held, kept
// to the end of the thread's outermost call (`Entry`) but where a wait lets it go holding
// nothing of the state (`Wait::pause`, `pause_aside`). Either way one thread's accesses to
// the state (its `Rc` counts and `RefCell` flags included) are ordered before the next
// thread's, as by a lock. Values of the state a call takes out (a communicator's clone)
// are dropped before the call returns or lets the lock go.
unsafe impl Sync for SerializedState {}

static SERIALIZED: SerializedState = SerializedState(RefCell::new(None));
/// Set by MPI_Init_thread when it provides MPI_THREAD_SERIALIZED or MULTIPLE.
static SERIALIZED_MODE: AtomicBool = AtomicBool::new(false);

/// Set by MPI_Init_thread when it provides MPI_THREAD_MULTIPLE: a call then reaches the
/// process's state with `BIG` held (see [`Entry`]).
static MULTIPLE_MODE: AtomicBool = AtomicBool::new(false);
/// The lock of the process's state under MPI_THREAD_MULTIPLE.
static BIG: std::sync::Mutex<()> = std::sync::Mutex::new(());
/// What a wait with `BIG` let go watches (an abort, the launcher gone), from init.
static WATCH: std::sync::OnceLock<earlybird::Watch> = std::sync::OnceLock::new();

/// What this thread holds of `BIG`: the calls it is in (`depth`), those of them that may be
/// in the middle of an operation on the state (`opaque`: all but wrappers that only convert
/// their arguments and call another), and the guard once a call touched the process's state
/// (`locked` says whether it is there).
struct BigHeld {
    depth: Cell<u32>,
    opaque: Cell<u32>,
    locked: Cell<bool>,
    guard: Cell<Option<std::sync::MutexGuard<'static, ()>>>,
}

impl BigHeld {
    fn keep(&self, g: std::sync::MutexGuard<'static, ()>) {
        self.guard.set(Some(g));
        self.locked.set(true);
    }

    fn give_back(&self) -> Option<std::sync::MutexGuard<'static, ()>> {
        self.locked.set(false);
        self.guard.take()
    }
}

/// `f` on what this thread holds of `BIG`.
#[inline]
fn held<R>(f: impl FnOnce(&BigHeld) -> R) -> R {
    STATE.with(|t| f(&t.held))
}

/// Threads waiting to take `BIG`: a wait that holds it lets it go between its tries only
/// when some thread wants it, and otherwise spins as a wait below MULTIPLE does.
static WANTING: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

fn lock_big() -> std::sync::MutexGuard<'static, ()> {
    // A thread that panicked holding it ended the process (a panic does not unwind out
    // of an `extern "C"` call), so poison is never seen by a live program.
    if let Ok(g) = BIG.try_lock() {
        return g;
    }
    WANTING.fetch_add(1, Ordering::SeqCst);
    let g = BIG.lock().unwrap_or_else(|p| p.into_inner());
    WANTING.fetch_sub(1, Ordering::SeqCst);
    g
}

/// Under MPI_THREAD_MULTIPLE, about to touch the process's state: take `BIG` unless this
/// thread holds it. Inside a call it is kept until the thread's outermost call returns (or
/// a wait lets it go, [`Wait::pause`]); outside one (never expected) the guard is given back
/// for the caller to drop.
fn hold_big(h: &BigHeld) -> Option<std::sync::MutexGuard<'static, ()>> {
    if h.locked.get() {
        return None;
    }
    let g = lock_big();
    if h.depth.get() == 0 {
        return Some(g);
    }
    h.keep(g);
    None
}

/// A call into this library. Under MPI_THREAD_MULTIPLE the process's state is reached only
/// with `BIG` held: the call takes it when it first touches that state ([`cell`]) and keeps
/// it until the thread's outermost call returns. A thread that drives endpoints reaches
/// only its own state, and never takes it: so an endpoint thread's first call, which makes
/// its state, never waits for a thread that holds `BIG` (in a collective of its own, say,
/// that needs this endpoint). Below MULTIPLE an entry costs one load.
pub(crate) struct Entry {
    counted: bool,
    opaque: bool,
}

/// The entry of an MPI function (`mpi!`).
#[inline]
pub(crate) fn enter() -> Entry {
    enter_as(true)
}

/// The entry of a wrapper that only converts its arguments and calls another MPI function
/// (the generated `_c` forms): it holds nothing of the state across that call, so the call
/// may let the lock go while it waits.
#[inline]
pub(crate) fn enter_through() -> Entry {
    enter_as(false)
}

#[inline]
fn enter_as(opaque: bool) -> Entry {
    if !MULTIPLE_MODE.load(Ordering::Relaxed) {
        return Entry {
            counted: false,
            opaque,
        };
    }
    held(|h| {
        h.depth.set(h.depth.get() + 1);
        h.opaque.set(h.opaque.get() + u32::from(opaque));
    });
    Entry {
        counted: true,
        opaque,
    }
}

impl Drop for Entry {
    #[inline]
    fn drop(&mut self) {
        if self.counted {
            let g = held(|h| {
                h.depth.set(h.depth.get() - 1);
                h.opaque.set(h.opaque.get() - u32::from(self.opaque));
                if h.depth.get() == 0 {
                    h.give_back()
                } else {
                    None
                }
            });
            drop(g);
        }
    }
}

/// Whether a wait of the calling thread lets `BIG` go between its tries: under
/// MPI_THREAD_MULTIPLE, in the thread's outermost call (not in a callback of the program
/// that a call of ours runs, whose caller is in the middle of an operation), on the
/// process's state (not an endpoint thread's own, which its blocking calls wait on as
/// below MULTIPLE).
pub(crate) fn waits_let_go() -> bool {
    MULTIPLE_MODE.load(Ordering::Relaxed)
        && STATE
            .with(|t| t.held.opaque.get() == 1 && t.state.try_borrow().is_ok_and(|s| s.is_none()))
}

/// A wait that tries again and again: between tries it drives progress and, when
/// [`waits_let_go`], lets `BIG` go and yields, so the process's other threads make their
/// calls meanwhile (MPI 4.1 §11.6.2: a blocking call blocks only the calling thread). The
/// caller holds nothing of the state across [`pause`](Wait::pause); the next touch of the
/// state takes the lock again.
pub(crate) struct Wait {
    /// Pauses that let the lock go: another thread wants it.
    idle: Option<earlybird::Idle<'static>>,
    /// Pauses that keep it: no thread wants it.
    alone: Option<earlybird::Idle<'static>>,
}

impl Wait {
    pub(crate) fn new() -> Wait {
        Wait {
            idle: None,
            alone: None,
        }
    }

    /// Between two tries. Err (MPIX_ERR_PROC_FAILED, through MPI_COMM_WORLD's handler: its
    /// code) when the job was aborted or the launcher is gone meanwhile.
    pub(crate) fn pause(&mut self) -> std::result::Result<(), c_int> {
        if waits_let_go() {
            if let Some(w) = WATCH.get() {
                let r = if WANTING.load(Ordering::SeqCst) > 0 {
                    let_go(self.idle.get_or_insert_with(|| w.idle()))
                } else {
                    self.alone.get_or_insert_with(|| w.idle_alone()).pause()
                };
                if let Err(e) = r {
                    return Err(fail(abi::COMM_WORLD, "a wait", e));
                }
            }
        }
        progress();
        Ok(())
    }
}

/// Let `BIG` go (the next touch of the state takes it back), and pause the wait `idle`.
fn let_go(idle: &mut earlybird::Idle<'static>) -> Result<()> {
    drop(held(BigHeld::give_back));
    idle.pause()
}

/// Under MPI_THREAD_MULTIPLE ([`waits_let_go`]), until the requests `hs` may be waited for
/// without blocking (each completed, failed, inactive, or not one this thread can wait
/// for: the wait reports that), with `BIG` let go between tries. Err holds the code to
/// return (the job aborted meanwhile).
pub(crate) fn until_ready(hs: &[Handle]) -> std::result::Result<(), c_int> {
    let mut w = Wait::new();
    let mut from = 0;
    while from < hs.len() {
        if ready(hs[from]) {
            from += 1;
        } else {
            w.pause()?;
        }
    }
    Ok(())
}

/// Whether waiting for the request `h` would not block (see [`until_ready`]). A channel's
/// bind in progress counts as ready: its own wait completes it.
fn ready(h: Handle) -> bool {
    if h == abi::REQUEST_NULL || is_done_handle(h) {
        return true;
    }
    let Ok(mut p) = take_request(h) else {
        return true;
    };
    let r = p.bind.is_some() || p.req.as_mut().is_none_or(Request::is_complete);
    put_back(h, p);
    r
}

/// Before a blocking collective on `comm` runs as its nonblocking form and a wait
/// ([`via_request`]): what the blocking form does first (see
/// `Comm::prepare_blocking_collective`). A bad handle is left to the call to report.
/// Under MPI_THREAD_MULTIPLE the exchanges that make the region let `BIG` go between polls
/// ([`pause_aside`]): two threads making the first blocking collectives of two communicators
/// in opposite orders on two processes must not wait for each other's lock.
pub(crate) fn prepare_blocking_collective(comm: Handle) {
    crate::endpoints::attach_pending(comm);
    if let Ok(c) = cell(|s| comm_ref(&s.borrow(), comm).cloned()) {
        // The state is not borrowed: `c` is a clone, kept across the pauses untouched.
        let_go_aside(|| c.prepare_blocking_collective());
    }
}

thread_local! {
    /// The wait [`pause_aside`] serves (one per thread: its waits do not nest).
    static ASIDE_WAIT: RefCell<Option<earlybird::Idle<'static>>> = const { RefCell::new(None) };
}

/// `f`, a call into the core that holds nothing of the state: when [`waits_let_go`], under
/// `earlybird::waits_aside` with [`pause_aside`].
pub(crate) fn let_go_aside<R>(f: impl FnOnce() -> R) -> R {
    if !waits_let_go() {
        return f();
    }
    let r = earlybird::waits_aside(pause_aside, f);
    // The wait is over: what it told the launcher's report goes with it.
    drop(ASIDE_WAIT.with(|a| a.borrow_mut().take()));
    r
}

/// Between two polls of a wait inside the core (see `earlybird::waits_aside`): let `BIG` go,
/// yield (with the checks of a long wait), take it back. A call made inside a callback of
/// the program (an error handler, an attribute's copy function) keeps it: its caller is in
/// the middle of an operation.
fn pause_aside() -> Result<()> {
    let Some(w) = WATCH.get() else {
        return Ok(());
    };
    if held(|h| h.opaque.get()) != 1 {
        return ASIDE_WAIT.with(|a| a.borrow_mut().get_or_insert_with(|| w.idle()).pause());
    }
    let r = ASIDE_WAIT.with(|a| let_go(a.borrow_mut().get_or_insert_with(|| w.idle())));
    let g = lock_big();
    held(|h| h.keep(g));
    r
}

/// A blocking probe under MPI_THREAD_MULTIPLE ([`waits_let_go`]): `try_once` (a
/// nonblocking probe, which sets its flag when a message is there) again and again, with
/// `BIG` let go between tries. The code to return.
pub(crate) fn probe_until_found(mut try_once: impl FnMut(&mut c_int) -> c_int) -> c_int {
    let mut w = Wait::new();
    loop {
        let mut found = 0;
        let rc = try_once(&mut found);
        if rc != MPI_SUCCESS || found != 0 {
            return rc;
        }
        if let Err(c) = w.pause() {
            return c;
        }
    }
}

/// MPI_STATUS_IGNORE.
pub(crate) const IGNORED: *mut MpiStatus = abi::STATUS_IGNORE as *mut MpiStatus;

/// A blocking call under MPI_THREAD_MULTIPLE ([`waits_let_go`]): its nonblocking form
/// `start` (which writes its request), then a wait that lets `BIG` go. The code to return.
pub(crate) fn via_request(
    start: impl FnOnce(*mut Handle) -> c_int,
    status: *mut MpiStatus,
) -> c_int {
    let mut r = abi::REQUEST_NULL;
    let rc = start(&mut r);
    if rc != MPI_SUCCESS {
        return rc;
    }
    if let Err(rc) = until_ready(&[r]) {
        return rc;
    }
    // SAFETY: a request handle of ours, and the caller's status.
    unsafe { complete(&mut r, status, true) }.map_or_else(|c| c, |_| MPI_SUCCESS)
}
/// The thread that called MPI_Init (MPI_Is_thread_main).
static INIT_THREAD: std::sync::OnceLock<std::thread::ThreadId> = std::sync::OnceLock::new();

/// `f` on the state this thread's calls use: its own (the initialising thread's, or an
/// endpoint thread's tables), or under MPI_THREAD_SERIALIZED the process's, for every thread
/// that drives no endpoint of its own.
/// Under MPI_THREAD_MULTIPLE the process's state is reached with `BIG` held (see [`Entry`]).
#[inline]
fn cell<R>(f: impl FnOnce(&RefCell<Option<State>>) -> R) -> R {
    STATE.with(|ThreadState { state: tls, held }| {
        if SERIALIZED_MODE.load(Ordering::Relaxed) && tls.try_borrow().is_ok_and(|s| s.is_none()) {
            let _outside_calls = if MULTIPLE_MODE.load(Ordering::Relaxed) {
                hold_big(held)
            } else {
                None
            };
            f(&SERIALIZED.0)
        } else {
            f(tls)
        }
    })
}

/// Whether the calling thread is the one that called MPI_Init.
fn is_init_thread() -> bool {
    INIT_THREAD.get() == Some(&std::thread::current().id())
}

/// The thread level MPI_Init_thread provided (as its code, for threads other than the one
/// that called it).
static LEVEL: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

impl State {
    fn new(uni: Option<Universe>) -> State {
        State {
            uni,
            endpoints: Vec::new(),
            scope: earlybird::endless_scope(),
            comms: Table::new(),
            reqs: Table::new(),
            done: Table::new(),
            spare: Vec::new(),
            types: Table::new(),
            groups: Table::new(),
            ops: Table::new(),
            infos: Table::new(),
            keyvals: Table::new(),
            errhandlers: Table::new(),
            messages: Table::new(),
            wins: Table::new(),
            win_keyvals: Table::new(),
            win_errhandlers: Table::new(),
            type_keyvals: Table::new(),
            type_attrs: std::collections::HashMap::new(),
            type_names: std::collections::HashMap::new(),
            f90: Default::default(),
            attached: None,
            comm_attached: Vec::new(),
            env: earlybird::Info::new(),
            sessions: Table::new(),
            session_errhandlers: Table::new(),
        }
    }

    /// The rank MPI_Init made, which only its thread drives.
    fn uni(&self) -> Result<&Universe> {
        self.uni.as_ref().ok_or_else(|| {
            Error::new(
                ErrorClass::Comm,
                "this thread drives endpoints only: MPI_COMM_WORLD, MPI_COMM_SELF and the calls on the whole process (buffer attach, finalize) belong to the thread that called MPI_Init",
            )
        })
    }

    /// A communicator of this thread's whose error handler applies to errors of no
    /// communicator: MPI_COMM_WORLD, or in an endpoint thread its first endpoint's.
    fn fallback(&self) -> Option<&Comm> {
        match &self.uni {
            Some(u) => Some(u.world()),
            None => self.endpoints.first().map(|(_, e)| e.comm()),
        }
    }
}

/// The buffer description a nonblocking operation borrows for as long as it runs.
pub(crate) enum Kept {
    /// A plain slice of the caller's memory: nothing of ours to free.
    Slice,
    Send(*mut Typed<'static>),
    Recv(*mut TypedMut<'static>),
    /// MPI_Isendrecv's two views.
    Both(*mut Typed<'static>, *mut TypedMut<'static>),
    /// A view two requests use: a persistent request and the channel bound from it (the
    /// channel holds the request's buffer, and either may be freed first).
    Shared(Rc<Kept>),
    /// A bundle's: its members' views (held to be dropped after the bundle).
    All(#[allow(dead_code)] Vec<Kept>),
}

impl Kept {
    /// Another owner of this view, for a request made from the one that holds it (this one
    /// becomes shared if it was not).
    pub(crate) fn share(&mut self) -> Kept {
        match self {
            Kept::Slice => Kept::Slice,
            Kept::Shared(rc) => Kept::Shared(rc.clone()),
            _ => {
                let rc = Rc::new(std::mem::replace(self, Kept::Slice));
                *self = Kept::Shared(rc.clone());
                Kept::Shared(rc)
            }
        }
    }
}

impl Drop for Kept {
    #[inline]
    fn drop(&mut self) {
        match *self {
            Kept::Slice | Kept::Shared(_) | Kept::All(_) => {}
            // SAFETY: the pointer came from `Box::into_raw` in `start_send` and is freed here
            // only, after the request that borrowed it is gone (`Pending::drop` drops the
            // request before its view).
            Kept::Send(p) => drop(unsafe { Box::from_raw(p) }),
            // SAFETY: as above, from `start_recv`.
            Kept::Recv(p) => drop(unsafe { Box::from_raw(p) }),
            // SAFETY: as above, from `kept_pair`.
            Kept::Both(s, r) => unsafe {
                drop(Box::from_raw(s));
                drop(Box::from_raw(r));
            },
        }
    }
}

/// A nonblocking operation: its request, the communicator it reports errors on, and the view
/// of the caller's buffer it was made from (freed after the request).
///
/// Its fields drop in the order they are declared: a bind in progress first (it holds the
/// request's buffer), then the request, both of which may still use the view, dropped after
/// them. (In place: a `Drop` that took them out would move the request to drop it.)
pub(crate) struct Pending {
    /// A bind of this persistent request in progress (MPIX_Ibind_channel and the rest): the
    /// request's completion is the bind's (see `crate::channels`).
    pub(crate) bind: Option<Box<crate::channels::PendingBind>>,
    req: Option<Request<'static>>,
    kept: Kept,
    /// The communicator's handle: its error handler takes the request's errors (MPI_COMM_WORLD's
    /// if it was freed meanwhile).
    comm: Handle,
    /// What the call that made the request leaves to its completion (MPI_Comm_idup writes
    /// the new communicator's handle then).
    then: Option<Box<dyn FnOnce()>>,
}

impl Pending {
    /// Run `f` when the request completes (by wait or test).
    pub(crate) fn then(&mut self, f: Box<dyn FnOnce()>) {
        self.then = Some(f);
    }

    /// The request (none for a pending entry whose request was taken).
    pub(crate) fn request_mut(&mut self) -> Option<&mut Request<'static>> {
        self.req.as_mut()
    }

    /// The request, out of the entry (which keeps its view until dropped).
    pub(crate) fn take_request(&mut self) -> Option<Request<'static>> {
        self.req.take()
    }

    /// Put a request into the entry (the one taken, or one made from it over the same view).
    pub(crate) fn set_request(&mut self, r: Request<'static>) {
        self.req = Some(r);
    }

    /// The handle of the communicator whose error handler takes the request's errors.
    pub(crate) fn comm(&self) -> Handle {
        self.comm
    }

    /// Another owner of the view of the program's buffer the request uses, for a request
    /// made from this one (a channel bound from it).
    pub(crate) fn share_view(&mut self) -> Kept {
        self.kept.share()
    }

    /// The view, out of the entry, for a request that takes this one over (a bundle).
    pub(crate) fn take_view(&mut self) -> Kept {
        std::mem::replace(&mut self.kept, Kept::Slice)
    }
}

/// A request kept in the table. It is boxed, so that the table and the calls that take it out
/// move a pointer, and its box serves the next request once it is [`retire`]d (a window of
/// nonblocking requests then allocates nothing).
pub(crate) struct Held(Box<Option<Pending>>);

impl std::ops::Deref for Held {
    type Target = Pending;
    fn deref(&self) -> &Pending {
        self.0
            .as_ref()
            .as_ref()
            .expect("a held request is there until retired")
    }
}

impl std::ops::DerefMut for Held {
    fn deref_mut(&mut self) -> &mut Pending {
        self.0
            .as_mut()
            .as_mut()
            .expect("a held request is there until retired")
    }
}

/// Drop the request `p` holds (with the state not borrowed: a generalized request's free
/// function may call MPI), free its handle `h`, and keep its box for the next one.
pub(crate) fn retire(h: Handle, mut p: Held) {
    *p.0 = None;
    with_state(|s| {
        if let Some(st) = s.as_mut() {
            st.reqs.free_slot(REQUESTS.index(h));
            st.spare.push(p.0);
        }
    })
}

fn with_state<R>(f: impl FnOnce(&mut Option<State>) -> R) -> R {
    cell(|s| f(&mut s.borrow_mut()))
}

/// `f` reading the datatypes MPI_Type_create_f90_* made (`None` outside MPI_Init and
/// MPI_Finalize). The state is only shared meanwhile, so that the decoders work inside the
/// program's callbacks (a user operation told its datatype, say).
pub(crate) fn read_f90<R>(f: impl FnOnce(&crate::f90_types::Registry) -> R) -> Option<R> {
    cell(|s| s.borrow().as_ref().map(|st| f(&st.f90)))
}

/// `f` adding to the datatypes MPI_Type_create_f90_* made.
pub(crate) fn write_f90(f: impl FnOnce(&mut crate::f90_types::Registry)) {
    with_state(|s| s.as_mut().map(|st| f(&mut st.f90)));
}

/// One round of progress of the rank's engine (a wait over many requests polls them in turn).
pub(crate) fn progress() {
    cell(|s| {
        if let Some(st) = s.borrow().as_ref() {
            if let Some(u) = &st.uni {
                u.progress();
            }
            for (_, e) in &st.endpoints {
                e.progress();
            }
        }
    })
}

/// MPI_Init.
pub(crate) fn init() -> c_int {
    init_with(
        earlybird::ThreadLevel::Single,
        earlybird::Assertions::empty(),
    )
}

/// MPI_Init_thread, and seed 002's form with assertions.
pub(crate) fn init_with(required: earlybird::ThreadLevel, a: earlybird::Assertions) -> c_int {
    if INITIALIZED.load(Ordering::Acquire) {
        eprintln!("earlybird: MPI_Init called twice");
        return ErrorClass::Other.code();
    }
    if STARTED.load(Ordering::Acquire) {
        // A session started the library: the world model joins it, at the thread level it
        // provides (MPI_Init_thread reports that level). Its assertions stay those of then.
        INITIALIZED.store(true, Ordering::Release);
        return MPI_SUCCESS;
    }
    match start_library("MPI_Init", required, a) {
        Ok(()) => {
            INITIALIZED.store(true, Ordering::Release);
            MPI_SUCCESS
        }
        Err(e) => e.code(),
    }
}

/// A session opens (MPI_Session_init): the library starts at `required` unless it is up.
/// (The session counts once it is in the table: [`add_session`].)
pub(crate) fn session_start(required: earlybird::ThreadLevel) -> Result<()> {
    if !STARTED.load(Ordering::Acquire) {
        start_library("MPI_Session_init", required, earlybird::Assertions::empty())?;
    }
    Ok(())
}

/// A session closed (MPI_Session_finalize): the library ends with the last one, unless the
/// world model is initialized and not finalized.
pub(crate) fn session_end() -> c_int {
    let left = SESSIONS.fetch_sub(1, Ordering::AcqRel) - 1;
    if left > 0 || (INITIALIZED.load(Ordering::Acquire) && !FINALIZED.load(Ordering::Acquire)) {
        return MPI_SUCCESS;
    }
    let attrs = self_attributes_deleted();
    teardown(attrs)
}

/// Start the library: the rank and this layer's state (MPI_Init, or the first
/// MPI_Session_init; `what` says which).
fn start_library(
    what: &str,
    required: earlybird::ThreadLevel,
    a: earlybird::Assertions,
) -> Result<()> {
    if ENDED.load(Ordering::Acquire) {
        let e = Error::new(
            ErrorClass::Other,
            format!("{what}: MPI was finalized in this process, and earlybird does not initialize it again"),
        );
        eprintln!("earlybird: {e}");
        return Err(e);
    }
    // From SERIALIZED the state moves to `SERIALIZED`, which any thread reaches. The rank
    // itself is made for SERIALIZED: under MULTIPLE this layer adds the lock (`Entry`), and
    // the blocking calls wait with it let go, as `earlybird::Shared` does. Threads that drive
    // endpoints have tables of their own at every level (endpoints.rs).
    let multiple = required >= earlybird::ThreadLevel::Multiple;
    let required = required.min(earlybird::ThreadLevel::Serialized);
    match earlybird::init_with_assertions(required, a) {
        Ok(uni) => {
            let level = if multiple {
                let _ = WATCH.set(uni.watch());
                earlybird::ThreadLevel::Multiple
            } else {
                uni.query_thread()
            };
            LEVEL.store(abi::thread_level_code(level) as u8, Ordering::Release);
            let _ = INIT_THREAD.set(std::thread::current().id());
            SERIALIZED_MODE.store(
                level >= earlybird::ThreadLevel::Serialized,
                Ordering::Release,
            );
            with_state(|s| {
                let mut st = State::new(Some(uni));
                st.infos =
                    LOOSE_INFOS.with(|t| std::mem::replace(&mut *t.borrow_mut(), Table::new()));
                *s = Some(st);
            });
            MULTIPLE_MODE.store(multiple, Ordering::Release);
            STARTED.store(true, Ordering::Release);
            Ok(())
        }
        Err(e) => {
            eprintln!("earlybird: {what}: {e}");
            Err(e)
        }
    }
}

pub(crate) fn initialized() -> bool {
    INITIALIZED.load(Ordering::Acquire)
}

pub(crate) fn finalized() -> bool {
    FINALIZED.load(Ordering::Acquire)
}

/// The thread level provided at init (MPI_THREAD_SINGLE before it).
pub(crate) fn thread_level() -> earlybird::ThreadLevel {
    if !STARTED.load(Ordering::Acquire) {
        return earlybird::ThreadLevel::Single;
    }
    abi::thread_level(c_int::from(LEVEL.load(Ordering::Acquire)))
}

/// The assertions in force since init (none before it).
pub(crate) fn assertions() -> earlybird::Assertions {
    with_state(|s| {
        s.as_ref()
            .map_or(earlybird::Assertions::empty(), |st| match &st.uni {
                Some(u) => u.assertions(),
                // An endpoint thread: MPI_COMM_SELF of its endpoint holds the init-time ones.
                None => st
                    .endpoints
                    .first()
                    .map_or(earlybird::Assertions::empty(), |(_, e)| {
                        e.comm_self().assertions()
                    }),
            })
    })
}

pub(crate) fn is_main_thread() -> bool {
    is_init_thread()
}

/// MPI_Finalize: pending requests are completed (dropped), then the universe finalizes;
/// while a session is open, only the world model ends (MPI_COMM_SELF's attributes go, and
/// MPI_Finalized says so), and the library ends with the last session.
pub(crate) fn finalize() -> c_int {
    if !INITIALIZED.load(Ordering::Acquire) || FINALIZED.load(Ordering::Acquire) {
        return not_initialized("MPI_Finalize").code();
    }
    let self_comm = cell(|s| s.borrow().as_ref().map(|st| st.uni.is_some()));
    if self_comm == Some(false) && is_endpoint_thread() {
        return Error::new(
            ErrorClass::Other,
            "MPI_Finalize from a thread that drives endpoints only: the thread that called MPI_Init finalizes",
        )
        .code();
    }
    let attrs = self_attributes_deleted();
    if SESSIONS.load(Ordering::Acquire) > 0 {
        FINALIZED.store(true, Ordering::Release);
        return ok_or_code(attrs.unwrap_or(Ok(())));
    }
    teardown(attrs)
}

/// MPI_COMM_SELF's attributes deleted, while MPI is still initialized for their delete
/// callbacks (MPI 4.1 §11.2.4: MPI_Finalized is still false for them), and with the state
/// not borrowed, so that the callbacks may call MPI, free keys included. `None` in a thread
/// without the rank.
fn self_attributes_deleted() -> Option<Result<()>> {
    let me = cell(|s| {
        s.borrow()
            .as_ref()
            .and_then(|st| st.uni.as_ref().map(|u| u.comm_self().clone()))
    });
    me.map(|c| c.delete_all_attributes())
}

/// The library ends (MPI_Finalize, or the last MPI_Session_finalize after it or without
/// it): pending requests are completed (dropped), then the universe finalizes. `attrs`:
/// how deleting MPI_COMM_SELF's attributes went.
fn teardown(attrs: Option<Result<()>>) -> c_int {
    let Some(st) = with_state(|s| s.take_if(|st| st.uni.is_some())) else {
        return not_initialized("the end of MPI (MPI_Finalize, or the last MPI_Session_finalize)")
            .code();
    };
    let State {
        uni,
        endpoints,
        comms,
        reqs,
        wins,
        infos,
        ..
    } = st;
    LOOSE_INFOS.with(|t| *t.borrow_mut() = infos);
    let uni = uni.expect("a state with the rank (taken only so)");
    drop(reqs.drain().collect::<Vec<_>>());
    // Windows the program did not free: dropped as the Rust API drops them (memory given
    // to them is leaked rather than handed back while a peer might still write it).
    drop(wins.drain().collect::<Vec<_>>());
    drop(comms.drain().collect::<Vec<_>>());
    // Endpoints this thread still drives are freed as their drop frees them.
    drop(endpoints);
    if INITIALIZED.load(Ordering::Acquire) {
        FINALIZED.store(true, Ordering::Release);
    }
    STARTED.store(false, Ordering::Release);
    ENDED.store(true, Ordering::Release);
    match uni.finalize().and(attrs.unwrap_or(Ok(()))) {
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

/// The communicator behind `h` in `st`.
fn comm_ref(st: &Option<State>, h: Handle) -> Result<&Comm> {
    let Some(st) = st.as_ref() else {
        return Err(not_initialized("an MPI call"));
    };
    match h {
        abi::COMM_WORLD => st.uni().map(Universe::world),
        abi::COMM_SELF => st.uni().map(Universe::comm_self),
        h if crate::endpoints::is_endpoint_handle(h) => st
            .endpoints
            .iter()
            .find(|(x, _)| *x == h)
            .map(|(_, e)| e.comm())
            .ok_or_else(|| crate::endpoints::driven_elsewhere(h)),
        abi::COMM_NULL => Err(Error::new(
            ErrorClass::Comm,
            "MPI_COMM_NULL is not a communicator to use",
        )),
        h => st.comms.get(COMMS.index(h)).ok_or_else(|| COMMS.gone(h)),
    }
}

/// `f` on the communicator behind `h`, borrowed from the state for the call (so `f` may
/// read the state but not change it). An error goes through the communicator's error
/// handler (MPI_COMM_WORLD's when `h` is no communicator): with MPI_ERRORS_ARE_FATAL the job
/// ends there, with MPI_ERRORS_RETURN it comes back.
pub(crate) fn with_comm<R>(h: Handle, f: impl FnOnce(&Comm) -> Result<R>) -> Result<R> {
    crate::endpoints::attach_pending(h);
    cell(|s| {
        let st = s.borrow();
        match comm_ref(&st, h) {
            Ok(c) => on_comm(c, f),
            Err(e) => match st.as_ref().and_then(State::fallback) {
                Some(w) => w.call_errhandler(e),
                None => {
                    // Not initialized: MPI's default handler, fatal.
                    eprintln!("earlybird: fatal error: {e}");
                    std::process::exit(1)
                }
            },
        }
    })
}

/// `f` on `c`, its error through `c`'s error handler.
fn on_comm<R>(c: &Comm, f: impl FnOnce(&Comm) -> Result<R>) -> Result<R> {
    clear_user_handler_ran();
    f(c).or_else(|e| {
        // An error of the Rust API went through the handler there already; run a user
        // handler once only (a predefined one may run twice: it returns the error, or ends
        // the job the first time).
        if user_handler_ran() {
            Err(e)
        } else {
            c.call_errhandler(e)
        }
    })
}

/// As [`with_comm`], on a handle of the communicator taken out of the state first, so that
/// `f` runs with the state not borrowed: for calls that run the program's callbacks
/// (attribute copy and delete functions), which may call MPI, objects made and freed
/// included.
pub(crate) fn with_comm_owned<R>(h: Handle, f: impl FnOnce(&Comm) -> Result<R>) -> Result<R> {
    crate::endpoints::attach_pending(h);
    let c = cell(|s| comm_ref(&s.borrow(), h).cloned());
    match c {
        Ok(c) => on_comm(&c, f),
        // No such communicator: `with_comm` reports it (and does not run `f`).
        Err(_) => with_comm(h, f),
    }
}

/// A communicator constructor `f` on `h`: [`with_comm_owned`] (the program's copy callbacks
/// may run), under `earlybird::waits_aside` when [`waits_let_go`], so that its context
/// agreement and its region's exchanges let `BIG` go between polls (MPI 4.1 §11.6.2). Two
/// threads making communicators from two parents in opposite orders on two processes then
/// do not wait for each other's lock.
pub(crate) fn with_comm_aside<R>(h: Handle, f: impl FnOnce(&Comm) -> Result<R>) -> Result<R> {
    // The state is not borrowed: the communicator is a clone, kept across the pauses untouched.
    with_comm_owned(h, |c| let_go_aside(|| f(c)))
}

/// A window synchronization `f` on `h`: [`with_win`], run under `earlybird::waits_aside`
/// when [`waits_let_go`], so that its waits for other processes let `BIG` go between polls:
/// threads that fence (lock, ...) their own windows in different orders on different
/// processes do not wait for each other's lock.
pub(crate) fn with_win_aside<R>(
    h: Handle,
    what: &str,
    f: impl FnOnce(&crate::windows::CWin) -> Result<R>,
) -> Result<R> {
    // `with_win` holds a clone of the window, not the state; the window's error handler
    // runs after the wait.
    with_win(h, what, |w| let_go_aside(|| f(w)))
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

/// The objects behind the handles of one kind: an entry per handle, with the free entries
/// on a list so that making and freeing are O(1) (a window of nonblocking requests).
struct Table<T> {
    slots: Vec<Option<T>>,
    free: Vec<usize>,
}

impl<T> Table<T> {
    fn new() -> Table<T> {
        Table {
            slots: Vec::new(),
            free: Vec::new(),
        }
    }

    /// The index the next [`insert`](Self::insert) will use.
    fn next_index(&self) -> usize {
        self.free.last().copied().unwrap_or(self.slots.len())
    }

    /// Keep `x`; its index. (Inlined, so that a value made by the caller is written into
    /// its entry, not first onto the stack and copied from there: see `quick::begin`.)
    #[inline(always)]
    fn insert(&mut self, x: T) -> usize {
        match self.free.pop() {
            Some(i) => {
                self.slots[i] = Some(x);
                i
            }
            None => {
                self.slots.push(Some(x));
                self.slots.len() - 1
            }
        }
    }

    /// The index of the first object for which `p` holds.
    fn position(&self, p: impl Fn(&T) -> bool) -> Option<usize> {
        self.slots.iter().position(|x| x.as_ref().is_some_and(&p))
    }

    fn get(&self, i: usize) -> Option<&T> {
        self.slots.get(i).and_then(Option::as_ref)
    }

    fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        self.slots.get_mut(i).and_then(Option::as_mut)
    }

    /// The object at `i`, out of the table (its entry becomes free).
    fn take(&mut self, i: usize) -> Option<T> {
        let x = self.slots.get_mut(i).and_then(Option::take)?;
        self.free.push(i);
        Some(x)
    }

    /// The object at `i`, out of the table for a while: its entry stays reserved (nothing new
    /// goes there) until [`put_back`](Self::put_back) or [`free_slot`](Self::free_slot).
    /// ([`take`](Self::take) is for good.)
    fn check_out(&mut self, i: usize) -> Option<T> {
        self.slots.get_mut(i).and_then(Option::take)
    }

    /// Free entry `i`, checked out and not to be put back.
    fn free_slot(&mut self, i: usize) {
        debug_assert!(self.slots.get(i).is_some_and(Option::is_none));
        self.free.push(i);
    }

    /// Put back at `i` what [`check_out`](Self::check_out) took from there.
    fn put_back(&mut self, i: usize, x: T) {
        self.slots[i] = Some(x);
    }

    fn drain(self) -> impl Iterator<Item = T> {
        self.slots.into_iter().flatten()
    }
}

/// One kind of object behind the handles this library makes: the handle of entry `i` of its
/// table is `base + i`, and a handle that names none is an error of `class`.
struct Kind {
    base: Handle,
    class: ErrorClass,
    noun: &'static str,
}

const COMMS: Kind = Kind {
    base: abi::COMM_USER,
    class: ErrorClass::Comm,
    noun: "communicator",
};
const REQUESTS: Kind = Kind {
    base: abi::REQUEST_USER,
    class: ErrorClass::Request,
    noun: "request",
};
const DONE: Kind = Kind {
    base: abi::REQUEST_DONE,
    class: ErrorClass::Request,
    noun: "request",
};

/// Whether `h` is the handle of a request that completed at its start (see `State::done`).
pub(crate) fn is_done_handle(h: Handle) -> bool {
    (h.wrapping_sub(abi::REQUEST_DONE) as u32) < abi::REQUEST_DONE_SPAN
}

/// The status of the completed-at-start request `h`; `take` collects it (the handle is then
/// free).
fn done_status(h: Handle, take: bool) -> Result<earlybird::Status> {
    with_state(|s| {
        let st = s
            .as_mut()
            .ok_or_else(|| not_initialized("a request call"))?;
        let i = DONE.index(h);
        let found = if take {
            st.done.take(i)
        } else {
            st.done.get(i).copied()
        };
        found.ok_or_else(|| DONE.gone(h))
    })
}
const TYPES: Kind = Kind {
    base: abi::TYPE_USER,
    class: ErrorClass::Type,
    noun: "datatype",
};
const GROUPS: Kind = Kind {
    base: abi::GROUP_USER,
    class: ErrorClass::Group,
    noun: "group",
};
const OPS: Kind = Kind {
    base: abi::OP_USER,
    class: ErrorClass::Op,
    noun: "user operation",
};
const INFOS: Kind = Kind {
    base: abi::INFO_USER,
    class: ErrorClass::Info,
    noun: "info object",
};
const KEYVALS: Kind = Kind {
    base: abi::KEYVAL_USER,
    class: ErrorClass::Keyval,
    noun: "attribute key",
};
const MESSAGES: Kind = Kind {
    base: abi::MESSAGE_USER,
    class: ErrorClass::Request,
    noun: "message",
};
const WINS: Kind = Kind {
    base: abi::WIN_USER,
    class: ErrorClass::Win,
    noun: "window",
};
const ERRHANDLERS: Kind = Kind {
    base: abi::ERRHANDLER_USER,
    class: ErrorClass::Arg,
    noun: "error handler",
};

impl Kind {
    /// The table entry `h` would be.
    fn index(&self, h: Handle) -> usize {
        h.wrapping_sub(self.base) as u32 as usize
    }

    /// The handle of table entry `i`.
    fn handle(&self, i: usize) -> Handle {
        self.base.wrapping_add(i as i32)
    }

    /// The error for a handle that names no object of this kind.
    fn gone(&self, h: Handle) -> Error {
        Error::new(
            self.class,
            format!(
                "handle {h:#x} names no {} (never made, or freed)",
                self.noun
            ),
        )
    }
}

/// Keep `x` in the table `pick` chooses; its handle.
fn keep<T>(pick: fn(&mut State) -> &mut Table<T>, kind: &Kind, x: T) -> Result<Handle> {
    cell(|s| {
        let mut s = s.borrow_mut();
        let st = s
            .as_mut()
            .ok_or_else(|| not_initialized("a call that makes an object"))?;
        Ok(kind.handle(pick(st).insert(x)))
    })
}

/// The object handle `h` names in the table `pick` chooses, out of it (a free call).
fn release<T>(pick: fn(&mut State) -> &mut Table<T>, kind: &Kind, h: Handle) -> Result<T> {
    cell(|s| {
        let mut s = s.borrow_mut();
        let st = s
            .as_mut()
            .ok_or_else(|| not_initialized("a call that frees an object"))?;
        pick(st).take(kind.index(h)).ok_or_else(|| kind.gone(h))
    })
}

/// A clone of the object handle `h` names in the table `pick` chooses.
fn lookup<T: Clone>(pick: fn(&State) -> &Table<T>, kind: &Kind, h: Handle) -> Result<T> {
    cell(|s| {
        let s = s.borrow();
        let st = s.as_ref().ok_or_else(|| not_initialized("an MPI call"))?;
        pick(st)
            .get(kind.index(h))
            .cloned()
            .ok_or_else(|| kind.gone(h))
    })
}

/// Keep window `w`; its handle.
pub(crate) fn add_win(w: crate::windows::CWin) -> Result<Handle> {
    keep_win(Rc::new(w))
}

/// A window (shared) into the table: its handle.
pub(crate) fn keep_win(w: Rc<crate::windows::CWin>) -> Result<Handle> {
    keep(|st| &mut st.wins, &WINS, w)
}

/// The window `h` names, out of the table (MPI_Win_free).
pub(crate) fn take_win(h: Handle) -> Result<Rc<crate::windows::CWin>> {
    if h == abi::WIN_NULL {
        return Err(Error::new(
            ErrorClass::Win,
            "MPI_WIN_NULL is not a window to use",
        ));
    }
    release(|st| &mut st.wins, &WINS, h)
}

/// `f` on the window behind `h`, taken out of the state first (a shared handle), so that
/// the program's callbacks it may run (an error handler) can call MPI. An error goes through
/// the window's error handler (once: the Rust API ran a user handler already); a handle that
/// names no window is an error of MPI_COMM_WORLD's.
pub(crate) fn with_win<R>(
    h: Handle,
    what: &str,
    f: impl FnOnce(&crate::windows::CWin) -> Result<R>,
) -> Result<R> {
    let w = cell(|s| {
        s.borrow()
            .as_ref()
            .and_then(|st| st.wins.get(WINS.index(h)).cloned())
    });
    let Some(w) = w else {
        let e = if h == abi::WIN_NULL {
            Error::new(
                ErrorClass::Win,
                format!("{what}: MPI_WIN_NULL is not a window to use"),
            )
        } else {
            let e = WINS.gone(h);
            Error::new(e.class(), format!("{what}: {}", e.detail()))
        };
        return with_comm(abi::COMM_WORLD, |_| Err(e));
    };
    clear_user_handler_ran();
    f(&w).map_err(|e| {
        if user_handler_ran() {
            e
        } else {
            w.win.call_errhandler(e)
        }
    })
}

/// Window keyvals: this base plus an index (apart from communicator keyvals).
const WIN_KEYVALS: Kind = Kind {
    base: abi::KEYVAL_USER | 0x0080_0000,
    class: ErrorClass::Keyval,
    noun: "window attribute key",
};

/// Keep a window keyval; its handle.
pub(crate) fn add_win_keyval(k: crate::attribute_keys::AttrKeyval) -> Result<c_int> {
    keep(|st| &mut st.win_keyvals, &WIN_KEYVALS, k)
}

/// The window keyval `h` names, to set an attribute with (not a freed one).
pub(crate) fn win_keyval_of(h: c_int) -> Result<crate::attribute_keys::AttrKeyval> {
    live_keyval(lookup(|st| &st.win_keyvals, &WIN_KEYVALS, h)?, h)
}

/// MPI_Win_free_keyval: the window keyval `h` marked freed (see
/// `attribute_keys::free_keyval`; attributes set with it keep their delete function).
pub(crate) fn free_win_keyval(h: c_int) -> Result<()> {
    mark_freed(|st| &mut st.win_keyvals, &WIN_KEYVALS, h)
}

/// `k`, unless it was freed.
fn live_keyval(
    k: crate::attribute_keys::AttrKeyval,
    h: c_int,
) -> Result<crate::attribute_keys::AttrKeyval> {
    if k.freed {
        Err(Error::new(
            ErrorClass::Keyval,
            format!("keyval {h:#x} was freed: no attribute is set with it"),
        ))
    } else {
        Ok(k)
    }
}

/// Mark the keyval `h` of the table `pick` chooses freed (again: nothing to do).
fn mark_freed(
    pick: fn(&mut State) -> &mut Table<crate::attribute_keys::AttrKeyval>,
    kind: &Kind,
    h: c_int,
) -> Result<()> {
    cell(|s| {
        let mut s = s.borrow_mut();
        let st = s
            .as_mut()
            .ok_or_else(|| not_initialized("a call that frees an object"))?;
        let k = pick(st)
            .get_mut(kind.index(h))
            .ok_or_else(|| kind.gone(h))?;
        k.freed = true;
        Ok(())
    })
}

/// Datatype keyvals: this base plus an index (apart from communicator and window keyvals).
const TYPE_KEYVALS: Kind = Kind {
    base: abi::KEYVAL_USER | 0x0040_0000,
    class: ErrorClass::Keyval,
    noun: "datatype attribute key",
};

/// Keep a datatype keyval; its handle.
pub(crate) fn add_type_keyval(k: crate::attribute_keys::AttrKeyval) -> Result<c_int> {
    keep(|st| &mut st.type_keyvals, &TYPE_KEYVALS, k)
}

/// The datatype keyval `h` names, to set an attribute with (not a freed one).
pub(crate) fn type_keyval_of(h: c_int) -> Result<crate::attribute_keys::AttrKeyval> {
    live_keyval(lookup(|st| &st.type_keyvals, &TYPE_KEYVALS, h)?, h)
}

/// MPI_Type_free_keyval: the datatype keyval `h` marked freed.
pub(crate) fn free_type_keyval(h: c_int) -> Result<()> {
    mark_freed(|st| &mut st.type_keyvals, &TYPE_KEYVALS, h)
}

/// The attributes on datatype `dt` (a copy: callbacks run on it with the state free).
pub(crate) fn type_attrs(dt: Handle) -> Vec<crate::attribute_keys::Attr> {
    cell(|s| {
        s.borrow()
            .as_ref()
            .and_then(|st| st.type_attrs.get(&dt).cloned())
            .unwrap_or_default()
    })
}

/// Set attribute `a` on `dt`; the one it replaces.
pub(crate) fn set_type_attr(
    dt: Handle,
    a: crate::attribute_keys::Attr,
) -> Option<crate::attribute_keys::Attr> {
    with_state(|s| crate::attribute_keys::set(s.as_mut()?.type_attrs.entry(dt).or_default(), a))
}

/// The attribute on `dt` under `keyval`, removed.
pub(crate) fn remove_type_attr(dt: Handle, keyval: c_int) -> Option<crate::attribute_keys::Attr> {
    with_state(|s| {
        let attrs = s.as_mut()?.type_attrs.get_mut(&dt)?;
        let i = attrs.iter().position(|x| x.0 == keyval)?;
        Some(attrs.remove(i))
    })
}

/// Every attribute on `dt`, removed (MPI_Type_free).
pub(crate) fn take_type_attrs(dt: Handle) -> Vec<crate::attribute_keys::Attr> {
    with_state(|s| {
        s.as_mut()
            .and_then(|st| st.type_attrs.remove(&dt))
            .unwrap_or_default()
    })
}

/// Window error handlers: this base plus an index (apart from communicators' handlers).
const WIN_ERRHANDLERS: Kind = Kind {
    base: abi::ERRHANDLER_USER | 0x0040_0000,
    class: ErrorClass::Arg,
    noun: "window error handler",
};

/// Keep a window error handler; its handle.
pub(crate) fn add_win_errhandler(f: crate::windows::WinErrFunction) -> Result<Handle> {
    keep(|st| &mut st.win_errhandlers, &WIN_ERRHANDLERS, f)
}

/// The window error handler `h` names, if it names one.
pub(crate) fn win_errhandler_of(h: Handle) -> Option<crate::windows::WinErrFunction> {
    lookup(|st| &st.win_errhandlers, &WIN_ERRHANDLERS, h).ok()
}

/// Sessions: this pattern plus an index (MPICH's kind of sessions, 0xe, in its indirect form).
const SESSION_HANDLES: Kind = Kind {
    base: abi::SESSION_USER,
    class: ErrorClass::Session,
    noun: "session",
};

/// Keep session `x`, which from now on keeps the library up; its handle.
pub(crate) fn add_session(x: Rc<crate::sessions::CSession>) -> Result<Handle> {
    let h = keep(|st| &mut st.sessions, &SESSION_HANDLES, x)?;
    SESSIONS.fetch_add(1, Ordering::AcqRel);
    Ok(h)
}

/// The session `h` names.
pub(crate) fn session_of(h: Handle) -> Result<Rc<crate::sessions::CSession>> {
    lookup(|st| &st.sessions, &SESSION_HANDLES, h)
}

/// The session `h` names, out of the table (MPI_Session_finalize).
pub(crate) fn take_session(h: Handle) -> Result<Rc<crate::sessions::CSession>> {
    release(|st| &mut st.sessions, &SESSION_HANDLES, h)
}

/// Session error handlers: this base plus an index (apart from the others' handlers).
const SESSION_ERRHANDLERS: Kind = Kind {
    base: abi::ERRHANDLER_USER | 0x0080_0000,
    class: ErrorClass::Arg,
    noun: "session error handler",
};

/// Keep a session error handler; its handle.
pub(crate) fn add_session_errhandler(f: crate::ErrhandlerFunction) -> Result<Handle> {
    keep(|st| &mut st.session_errhandlers, &SESSION_ERRHANDLERS, f)
}

/// The session error handler `h` names, if it names one.
pub(crate) fn session_errhandler_of(h: Handle) -> Option<crate::ErrhandlerFunction> {
    lookup(|st| &st.session_errhandlers, &SESSION_ERRHANDLERS, h).ok()
}

pub(crate) fn add_comm(c: Comm) -> Handle {
    with_state(|s| {
        let st = s
            .as_mut()
            .expect("a communicator made while MPI is initialized");
        COMMS.handle(st.comms.insert(c))
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
    release(|st| &mut st.comms, &COMMS, h)
}

pub(crate) fn bad_type(dt: Handle) -> Error {
    Error::new(
        ErrorClass::Type,
        format!("datatype handle {dt:#x} names no datatype (not a predefined one this library knows, never made, or freed)"),
    )
}

/// The handle of a datatype the library holds: a predefined one, or one of the table
/// (MPI_DATATYPE_NULL for another, such as one made inside a call).
pub(crate) fn handle_of(dt: &Datatype) -> Handle {
    if let earlybird::Combiner::Named(b) = dt.combiner() {
        return abi::basic_handle(b).unwrap_or(abi::DATATYPE_NULL);
    }
    cell(|s| {
        let s = s.borrow();
        s.as_ref()
            .and_then(|st| st.types.position(|t| t == dt))
            .map_or(abi::DATATYPE_NULL, |i| TYPES.handle(i))
    })
}

thread_local! {
    /// Info objects made while this thread has no state (MPI 4.1 §11.2.1: the info calls
    /// work before MPI_Init and after MPI_Finalize). MPI_Init moves them into the state and
    /// MPI_Finalize back here, so their handles stay valid across both.
    static LOOSE_INFOS: RefCell<Table<earlybird::Info>> = RefCell::new(Table::new());
}

/// `f` on the info table: the state's, or the loose one when there is no state.
fn on_infos<R>(f: impl FnOnce(&mut Table<earlybird::Info>, Option<&earlybird::Info>) -> R) -> R {
    cell(|s| match s.borrow_mut().as_mut() {
        Some(st) => f(&mut st.infos, Some(&st.env)),
        None => LOOSE_INFOS.with(|t| f(&mut t.borrow_mut(), None)),
    })
}

/// `f` on the info object `h` names (MPI_INFO_ENV included, read only: empty, earlybird
/// keeps nothing of the command line there).
pub(crate) fn with_info<R>(
    h: Handle,
    f: impl FnOnce(&mut earlybird::Info) -> Result<R>,
) -> Result<R> {
    on_infos(|infos, env| {
        if h == abi::INFO_ENV {
            let mut copy = env.map_or_else(earlybird::Info::new, earlybird::Info::dup);
            return f(&mut copy);
        }
        match infos.get_mut(INFOS.index(h)) {
            Some(info) => f(info),
            None => Err(INFOS.gone(h)),
        }
    })
}

/// Keep an info object; its handle.
pub(crate) fn add_info(info: earlybird::Info) -> Result<Handle> {
    Ok(on_infos(|infos, _| INFOS.handle(infos.insert(info))))
}

/// The info object `h` names, out of the table (MPI_Info_free).
pub(crate) fn take_info(h: Handle) -> Result<earlybird::Info> {
    on_infos(|infos, _| infos.take(INFOS.index(h)).ok_or_else(|| INFOS.gone(h)))
}

/// Keep a user operation; its handle.
pub(crate) fn add_op(op: earlybird::Op) -> Result<Handle> {
    keep(|st| &mut st.ops, &OPS, op)
}

/// The user operation `h` names, out of the table (MPI_Op_free).
pub(crate) fn take_op(h: Handle) -> Result<earlybird::Op> {
    release(|st| &mut st.ops, &OPS, h)
}

pub(crate) fn op_of(h: Handle) -> Result<earlybird::Op> {
    if h as u32 & 0xfc00_0000 == abi::OP_USER as u32 {
        if let Ok(op) = lookup(|st| &st.ops, &OPS, h) {
            return Ok(op);
        }
    }
    abi::op(h).ok_or_else(|| {
        Error::new(
            ErrorClass::Op,
            format!("operation handle {h:#x} is not a predefined operation"),
        )
    })
}

/// The datatype a handle names: a predefined one, or one this library made.
fn datatype(st: &Option<State>, dt: Handle) -> Result<Datatype> {
    if let Some(b) = abi::basic_type(dt) {
        return Ok(Datatype::basic(b));
    }
    st.as_ref()
        .and_then(|st| st.types.get(TYPES.index(dt)))
        .cloned()
        .ok_or_else(|| bad_type(dt))
}

/// [`datatype`] from the calling thread's state.
pub(crate) fn type_of(dt: Handle) -> Result<Datatype> {
    cell(|s| datatype(&s.borrow(), dt))
}

/// MPI_Type_set_name on datatype `dt`: a predefined one's name is kept by handle.
pub(crate) fn set_type_name(dt: Handle, name: &str) -> Result<()> {
    if abi::basic_type(dt).is_none() {
        return type_of(dt).map(|d| d.set_name(name));
    }
    with_state(|s| {
        let st = s
            .as_mut()
            .ok_or_else(|| not_initialized("MPI_Type_set_name"))?;
        st.type_names.insert(dt, name.to_string());
        Ok(())
    })
}

/// MPI_Type_get_name's answer for `dt`: the name the program gave it, else a predefined
/// handle's own name (one that shares its C type with another: `abi::alias_name`), else the
/// datatype's.
pub(crate) fn type_name(dt: Handle) -> Result<String> {
    let d = type_of(dt)?;
    let given = cell(|s| {
        s.borrow()
            .as_ref()
            .and_then(|st| st.type_names.get(&dt).cloned())
    });
    Ok(given
        .or_else(|| abi::alias_name(dt).map(str::to_string))
        .unwrap_or_else(|| d.name()))
}

/// Where `count` elements of `dt` at `buf` lie: the datatype, and the bytes they reach as a
/// run from `buf + start` of `len` bytes, with `origin` the index of `buf` in that run. At
/// MPI_BOTTOM (a null `buf`: absolute displacements) the datatype is moved so that its first
/// byte is displacement 0, and `buf + start` is that byte's address.
struct Span {
    dt: Datatype,
    count: usize,
    start: isize,
    len: usize,
    origin: usize,
}

fn span(count: impl Into<i64>, dt: Handle, bottom: bool) -> Result<Span> {
    let count: i64 = count.into();
    if count < 0 {
        return Err(Error::new(
            ErrorClass::Count,
            format!("count {count} is negative"),
        ));
    }
    // No elements of no type: MPICH takes MPI_DATATYPE_NULL with a count of 0 (its own tests
    // send such empty messages), and so does this library, as no bytes.
    let d = if count == 0 && dt == abi::DATATYPE_NULL {
        Datatype::of::<u8>()
    } else {
        type_of(dt)?
    };
    let n = count as usize;
    if n == 0 || d.size() == 0 {
        return Ok(Span {
            dt: d,
            count: n,
            start: 0,
            len: 0,
            origin: 0,
        });
    }
    let (tlb, text) = d.get_true_extent();
    // Where the elements reach, in address arithmetic that cannot overflow: a count no
    // memory holds is an error, not a wrapped span.
    let reach = || {
        let reps = isize::try_from(n - 1).ok()?.checked_mul(d.extent())?;
        let lo = tlb.checked_add(reps.min(0))?;
        let hi = tlb.checked_add(text)?.checked_add(reps.max(0))?;
        hi.checked_sub(lo.min(0))?;
        Some((lo, hi))
    };
    let (lo, hi) = reach().ok_or_else(|| {
        Error::new(
            ErrorClass::Count,
            format!(
                "{count} elements of {} bytes reach beyond the address space",
                d.extent()
            ),
        )
    })?;
    if bottom {
        // The `count` elements as one datatype whose first byte is at displacement 0.
        let moved = Datatype::hindexed(&[n], &[-lo], &d)?;
        moved.commit()?;
        return Ok(Span {
            dt: moved,
            count: 1,
            start: lo,
            len: (hi - lo) as usize,
            origin: 0,
        });
    }
    let (start, end) = (lo.min(0), hi.max(0));
    Ok(Span {
        dt: d,
        count: n,
        start,
        len: (end - start) as usize,
        origin: (-start) as usize,
    })
}

/// `count` elements of `dt` at `buf`, to read.
///
/// # Safety
/// `buf` points to `count` elements of `dt` (or is MPI_BOTTOM for absolute displacements)
/// that stay valid and unwritten for `'static` as far as the caller uses the view (the call,
/// or the nonblocking operation it starts).
pub(crate) unsafe fn buf_in(
    buf: *const c_void,
    count: impl Into<i64>,
    dt: Handle,
) -> Result<Typed<'static>> {
    let sp = span(count, dt, buf.is_null())?;
    let s: &'static [u8] = if sp.len == 0 {
        &[]
    } else {
        // SAFETY: the function's contract: the bytes the datatype reaches are readable, and
        // `span` computed where they start and end.
        unsafe { std::slice::from_raw_parts(buf.cast::<u8>().wrapping_offset(sp.start), sp.len) }
    };
    Typed::at(s, sp.origin, sp.count, &sp.dt)
}

/// `count` elements of `dt` at `buf`, to write.
///
/// # Safety
/// `buf` points to room for `count` elements of `dt` (or is MPI_BOTTOM), which nothing else
/// touches while the view is used (the call, or the nonblocking operation it starts).
pub(crate) unsafe fn buf_out(
    buf: *mut c_void,
    count: impl Into<i64>,
    dt: Handle,
) -> Result<TypedMut<'static>> {
    if buf as usize == abi::IN_PLACE {
        return Err(Error::new(
            ErrorClass::Buffer,
            "MPI_IN_PLACE where a buffer is needed",
        ));
    }
    let sp = span(count, dt, buf.is_null())?;
    let s: &'static mut [u8] = if sp.len == 0 {
        &mut []
    } else {
        // SAFETY: the function's contract: the bytes the datatype reaches are writable and
        // used by this view alone. (A receive buffer may not be initialised; the library
        // only writes it.)
        unsafe {
            std::slice::from_raw_parts_mut(buf.cast::<u8>().wrapping_offset(sp.start), sp.len)
        }
    };
    TypedMut::at(s, sp.origin, sp.count, &sp.dt)
}

/// Bytes before the memory MPI_Alloc_mem hands out: its layout's size, for MPI_Free_mem.
const MEM_HEAD: usize = 64;

/// MPI_Alloc_mem: `size` bytes aligned to 64 (a cache line; MPI asks for none).
pub(crate) fn alloc_mem(size: isize) -> Result<*mut c_void> {
    let size = usize::try_from(size)
        .map_err(|_| Error::new(ErrorClass::Arg, format!("MPI_Alloc_mem of {size} bytes")))?;
    let layout = std::alloc::Layout::from_size_align(size + MEM_HEAD, MEM_HEAD)
        .map_err(|_| Error::new(ErrorClass::NoMem, format!("MPI_Alloc_mem of {size} bytes")))?;
    // SAFETY: the layout has a non-zero size (MEM_HEAD at least).
    let p = unsafe { std::alloc::alloc(layout) };
    if p.is_null() {
        return Err(Error::new(
            ErrorClass::NoMem,
            format!("MPI_Alloc_mem of {size} bytes: out of memory"),
        ));
    }
    // SAFETY: `p` holds `size + MEM_HEAD` bytes aligned to 64: the head is ours, the rest the
    // caller's.
    unsafe {
        p.cast::<usize>().write(size);
        Ok(p.add(MEM_HEAD).cast())
    }
}

/// MPI_Free_mem.
///
/// # Safety
/// `base` is null or came from [`alloc_mem`] and was not freed.
pub(crate) unsafe fn free_mem(base: *mut c_void) -> Result<()> {
    if base.is_null() {
        return Ok(());
    }
    // SAFETY: the function's contract: `alloc_mem` put the size `MEM_HEAD` bytes before.
    unsafe {
        let p = base.cast::<u8>().sub(MEM_HEAD);
        let size = p.cast::<usize>().read();
        std::alloc::dealloc(
            p,
            std::alloc::Layout::from_size_align_unchecked(size + MEM_HEAD, MEM_HEAD),
        );
    }
    Ok(())
}

/// The group a handle names (MPI_GROUP_EMPTY included).
pub(crate) fn group_of(h: Handle) -> Result<earlybird::Group> {
    cell(|s| {
        let s = s.borrow();
        let st = s.as_ref().ok_or_else(|| not_initialized("a group call"))?;
        if h == abi::GROUP_EMPTY {
            let c = st
                .fallback()
                .ok_or_else(|| not_initialized("a group call"))?;
            return Ok(c.group().empty_like());
        }
        st.groups
            .get(GROUPS.index(h))
            .cloned()
            .ok_or_else(|| GROUPS.gone(h))
    })
}

/// Keep `g` in the table; its handle.
pub(crate) fn add_group(g: earlybird::Group) -> Result<Handle> {
    keep(|st| &mut st.groups, &GROUPS, g)
}

/// The group `h` names, out of the table (MPI_Group_free).
pub(crate) fn take_group(h: Handle) -> Result<earlybird::Group> {
    if h == abi::GROUP_EMPTY {
        return Err(Error::new(
            ErrorClass::Group,
            "MPI_GROUP_EMPTY cannot be freed",
        ));
    }
    release(|st| &mut st.groups, &GROUPS, h)
}

/// Keep `d` in the table; its handle.
pub(crate) fn add_type(d: Datatype) -> Result<Handle> {
    keep(|st| &mut st.types, &TYPES, d)
}

/// The datatype `h` names, out of the table (MPI_Type_free).
pub(crate) fn take_type(h: Handle) -> Result<Datatype> {
    if abi::basic_type(h).is_some() {
        return Err(Error::new(
            ErrorClass::Type,
            format!("datatype {h:#x} is predefined and cannot be freed"),
        ));
    }
    release(|st| &mut st.types, &TYPES, h).map_err(|_| bad_type(h))
}

/// The one-byte types [`by_elem`] takes as bytes (`u8`): MPI_BYTE, the char types,
/// MPI_PACKED, the 8-bit integers and MPI_C_BOOL.
pub(crate) fn taken_as_bytes(b: earlybird::BasicType) -> bool {
    use earlybird::BasicType as B;
    matches!(
        b,
        B::Byte
            | B::Char
            | B::SignedChar
            | B::UnsignedChar
            | B::Packed
            | B::Int8
            | B::Uint8
            | B::CBool
    )
}

/// Run `$fast` with `$T` the Rust element type of a common predefined datatype `$dt` (one of
/// the same signature: bytes for the one-byte types, whose messages are not type-checked),
/// for point-to-point calls that can then take a plain slice; nothing for other datatypes.
macro_rules! by_elem {
    ($dt:expr, $T:ident => $fast:block) => {{
        use earlybird::BasicType as B;
        match $crate::abi::basic_type($dt) {
            Some(b) if $crate::state::taken_as_bytes(b) => {
                type $T = u8;
                $fast
            }
            Some(B::Short | B::Int16) => {
                type $T = i16;
                $fast
            }
            Some(B::UnsignedShort | B::Uint16) => {
                type $T = u16;
                $fast
            }
            Some(B::Int | B::Int32) => {
                type $T = i32;
                $fast
            }
            Some(B::Unsigned | B::Uint32) => {
                type $T = u32;
                $fast
            }
            Some(B::Long | B::LongLong | B::Int64 | B::Aint | B::Offset | B::Count) => {
                type $T = i64;
                $fast
            }
            Some(B::UnsignedLong | B::UnsignedLongLong | B::Uint64) => {
                type $T = u64;
                $fast
            }
            Some(B::Float) => {
                type $T = f32;
                $fast
            }
            Some(B::Double) => {
                type $T = f64;
                $fast
            }
            _ => {}
        }
    }};
}
pub(crate) use by_elem;

/// `count` elements of `T` at `buf` as a slice to read; `None` when `buf` is not aligned for
/// `T` (the caller takes the typed-view road).
///
/// # Safety
/// As [`buf_in`], for `count` elements of `T`.
pub(crate) unsafe fn slice_in<T>(buf: *const c_void, count: c_int) -> Result<Option<&'static [T]>> {
    if count < 0 {
        return Err(Error::new(
            ErrorClass::Count,
            format!("count {count} is negative"),
        ));
    }
    if count == 0 {
        return Ok(Some(&[]));
    }
    if buf.is_null() {
        return Err(Error::new(
            ErrorClass::Buffer,
            format!("a null buffer for {count} elements"),
        ));
    }
    if !(buf as usize).is_multiple_of(std::mem::align_of::<T>()) {
        return Ok(None);
    }
    // SAFETY: the function's contract, and the alignment checked above.
    Ok(Some(unsafe {
        std::slice::from_raw_parts(buf.cast::<T>(), count as usize)
    }))
}

/// `count` elements of `T` at `buf` as a slice to write (see [`slice_in`]).
///
/// # Safety
/// As [`buf_out`], for `count` elements of `T`.
pub(crate) unsafe fn slice_out<T>(
    buf: *mut c_void,
    count: c_int,
) -> Result<Option<&'static mut [T]>> {
    if count < 0 {
        return Err(Error::new(
            ErrorClass::Count,
            format!("count {count} is negative"),
        ));
    }
    if count == 0 {
        return Ok(Some(&mut []));
    }
    if buf.is_null() {
        return Err(Error::new(
            ErrorClass::Buffer,
            format!("a null buffer for {count} elements"),
        ));
    }
    if !(buf as usize).is_multiple_of(std::mem::align_of::<T>()) {
        return Ok(None);
    }
    // SAFETY: the function's contract, and the alignment checked above. Every bit pattern
    // is a valid `T` here (integers and floats), and the library only writes the slice.
    Ok(Some(unsafe {
        std::slice::from_raw_parts_mut(buf.cast::<T>(), count as usize)
    }))
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
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Standard,
    Synchronous,
    Ready,
    Buffered,
    /// MPI_Send_init: a persistent standard send, started by MPI_Start.
    StandardInit,
    /// MPI_Ssend_init.
    SynchronousInit,
    /// MPI_Rsend_init.
    ReadyInit,
    /// MPI_Bsend_init.
    BufferedInit,
}

/// The send of `mode` on `c` in scope `s`: `c.isend(s, b, dest, tag)` and its kin.
macro_rules! send_in_mode {
    ($mode:expr, $c:expr, $s:expr, $b:expr, $dest:expr, $tag:expr) => {
        match $mode {
            Mode::Standard => $c.isend($s, $b, $dest, $tag),
            Mode::Synchronous => $c.issend($s, $b, $dest, $tag),
            Mode::Ready => $c.irsend($s, $b, $dest, $tag),
            Mode::Buffered => $c.ibsend($s, $b, $dest, $tag),
            Mode::StandardInit => $c.send_init($s, $b, $dest, $tag),
            Mode::SynchronousInit => $c.ssend_init($s, $b, $dest, $tag),
            Mode::ReadyInit => $c.rsend_init($s, $b, $dest, $tag),
            Mode::BufferedInit => $c.bsend_init($s, $b, $dest, $tag),
        }
    };
}

pub(crate) fn scope() -> Result<&'static earlybird::Scope<'static, 'static>> {
    cell(|s| {
        let s = s.borrow();
        s.as_ref()
            .map(|st| st.scope)
            .ok_or_else(|| not_initialized("a nonblocking call"))
    })
}

pub(crate) fn add_request(p: Pending) -> Handle {
    with_state(|s| {
        let st = s.as_mut().expect("a request made while MPI is initialized");
        let held = st.hold(p);
        REQUESTS.handle(st.reqs.insert(held))
    })
}

impl State {
    /// `p` in a box of the spare ones (a new one if none is left).
    fn hold(&mut self, p: Pending) -> Held {
        match self.spare.pop() {
            Some(mut b) => {
                *b = Some(p);
                Held(b)
            }
            None => Held(Box::new(Some(p))),
        }
    }
}

/// Whether a send on `c` that completed at its start may be kept as its status alone: not
/// under NO_SEND_CANCELS, whose broken promise a cancel of it must still report.
fn light_send(c: &Comm) -> bool {
    !c.assertions()
        .contains(earlybird::Assertions::NO_SEND_CANCELS)
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
    let dest = abi::rank_in(dest);
    make_request(comm, |c, s, slot| {
        by_elem!(dt, T => {
            // SAFETY: the function's contract.
            if let Some(b) = unsafe { slice_in::<T>(buf, count) }? {
                let light = light_send(c);
                if light && mode == Mode::Standard {
                    return Ok(match c.isend_begun(s, b, dest, tag)? {
                        Begun::Done(st) => Some(st),
                        Begun::Pending(r) => {
                            *slot = Some(pending(r, comm, Kept::Slice));
                            None
                        }
                    });
                }
                let mut r = send_in_mode!(mode, c, s, b, dest, tag)?;
                if light {
                    if let Some(st) = r.take_if_complete() {
                        return Ok(Some(st));
                    }
                }
                *slot = Some(pending(r, comm, Kept::Slice));
                return Ok(None);
            }
        });
        // SAFETY: the function's contract.
        let b = unsafe { buf_in(buf, count, dt) }?;
        let kept = Box::into_raw(Box::new(b));
        // SAFETY: `kept` is alive until `Pending::drop`, which drops the request first.
        let view: &'static Typed<'static> = unsafe { &*kept };
        match send_in_mode!(mode, c, s, view, dest, tag) {
            Ok(req) => {
                *slot = Some(pending(req, comm, Kept::Send(kept)));
                Ok(None)
            }
            Err(e) => {
                // SAFETY: no request holds it.
                drop(unsafe { Box::from_raw(kept) });
                Err(e)
            }
        }
    })
}

/// The message rate's and the latency's calls (MPI_Isend, MPI_Send, MPI_Recv) by the shortest
/// way: one visit to the state, no spare box unless the operation stays pending, no dispatch
/// on the element type. (MPI_Irecv the same way was slower, measured again after the ring's
/// prefetches: 8.5 against 8.9 M msg/s, its pending request moved once more.) They take
/// `count > 0` elements of a predefined one-byte datatype
/// ([`taken_as_bytes`]'s) at a buffer that is there; anything else (and a bad communicator,
/// which the general path reports) gives `None`, and the caller goes the general way. `Some`
/// holds what the general path would have returned.
pub(crate) mod quick {
    use super::*;

    /// The bytes of `count` elements of `dt` at `buf`, when the quick paths take them.
    #[inline(always)]
    fn byte_count(buf: *const c_void, count: c_int, dt: Handle) -> Option<usize> {
        use abi::c;
        let one_byte = matches!(
            dt,
            c::MPI_BYTE
                | c::MPI_CHAR
                | c::MPI_SIGNED_CHAR
                | c::MPI_UNSIGNED_CHAR
                | c::MPI_PACKED
                | c::MPI_INT8_T
                | c::MPI_UINT8_T
                | c::MPI_C_BOOL
        );
        (one_byte && count > 0 && !buf.is_null()).then_some(count as usize)
    }

    /// `f` on the communicator `comm` and the scope of nonblocking operations, with the state
    /// shared; `None` when there is no such communicator (or no state).
    #[inline(always)]
    fn on<R>(
        comm: Handle,
        f: impl FnOnce(&Comm, &'static earlybird::Scope<'static, 'static>) -> Option<R>,
    ) -> Option<R> {
        cell(|s| {
            let g = s.borrow();
            let scope = g.as_ref()?.scope;
            let c = comm_ref(&g, comm).ok()?;
            f(c, scope)
        })
    }

    /// A nonblocking send or receive `f` begins on `comm` (`None`: not by the quick path):
    /// its handle into `*req`, and the code to return. `f` gets a spare box, where its
    /// `*_begun_with` call keeps the request of an operation still in flight (see [`put`]);
    /// one done at its start keeps only its status, `kept` of the one `f` returns. All in
    /// one visit to the state, written out here so that the operation is moved as little as
    /// can be.
    ///
    /// What crosses a call here is no wider than a register (the code; the handle; an error
    /// set aside in `failed`): a value returned through memory is stored by the callee in
    /// narrower pieces than the caller copies it with, and such a load, which the store
    /// buffer cannot forward, waits for every earlier store to reach the cache, the
    /// message's own stores into the ring too. (Measured on the message rate: a fifth of the
    /// sender's time, wherever such a copy came first after the ring's stores.) The request
    /// is written into its box as it is made, not returned: a large enum copied from one
    /// temporary to the next stalled the same way (a third of MPI_Isend's samples). For the
    /// same reason the status of a send that completed at its start, the empty one, is
    /// written as constants, not copied from the callee's (`kept` ignores its argument).
    #[inline(always)]
    fn begin(
        comm: Handle,
        req: *mut Handle,
        f: impl FnOnce(
            &Comm,
            &'static earlybird::Scope<'static, 'static>,
            &mut Option<Pending>,
        ) -> Option<Result<Option<earlybird::Status>>>,
        kept: impl FnOnce(earlybird::Status) -> earlybird::Status,
    ) -> Option<c_int> {
        clear_user_handler_ran();
        let mut failed = None;
        let h = cell(|s| {
            // The box a pending request goes into, taken first, so that the request is
            // written into it as it is made, with no call between.
            let mut b = s
                .borrow_mut()
                .as_mut()?
                .spare
                .pop()
                .unwrap_or_else(|| Box::new(None));
            let begun = {
                let g = s.borrow();
                match (g.as_ref(), comm_ref(&g, comm)) {
                    (Some(st), Ok(c)) => f(c, st.scope, &mut b),
                    _ => None,
                }
            };
            let mut g = s.borrow_mut();
            let Some(st) = g.as_mut() else {
                failed = Some(not_initialized("a nonblocking call"));
                return Some(abi::REQUEST_NULL);
            };
            // Not by the quick path (a send under NO_SEND_CANCELS, a communicator to look
            // up the long way): the box goes back, not to the allocator.
            let Some(begun) = begun else {
                st.spare.push(b);
                return None;
            };
            Some(match begun {
                Ok(None) => REQUESTS.handle(st.reqs.insert(Held(b))),
                Ok(Some(status)) => {
                    st.spare.push(b);
                    DONE.handle(st.done.insert(kept(status)))
                }
                Err(e) => {
                    st.spare.push(b);
                    failed = Some(e);
                    abi::REQUEST_NULL
                }
            })
        })?;
        if let Some(e) = failed {
            return Some(ok_or_code(raise_once::<()>(comm, e)));
        }
        // SAFETY: a handle to write (the caller's contract), checked for null.
        unsafe { write(req, h) };
        Some(MPI_SUCCESS)
    }

    /// Keep request `r` of communicator `comm` in the spare box `b`, written in place.
    #[inline(always)]
    fn put(b: &mut Option<Pending>, r: Request<'static>, comm: Handle) {
        // SAFETY: `b` is a valid `Option<Pending>`, and a spare box holds nothing (every one
        // is emptied before it is kept), so nothing is left undropped; written rather than
        // assigned so that no drop of the old value comes between the request's making and
        // its store, which would hold it on the stack first.
        unsafe { std::ptr::write(b, Some(pending(r, comm, Kept::Slice))) };
    }

    /// MPI_Isend: the code to return, its request's handle into `*req`.
    ///
    /// # Safety
    /// As [`start_send`]; `req` is null or points to a handle to write.
    #[inline]
    pub(crate) unsafe fn isend(
        buf: *const c_void,
        count: c_int,
        dt: Handle,
        dest: c_int,
        tag: c_int,
        comm: Handle,
        req: *mut Handle,
    ) -> Option<c_int> {
        let n = byte_count(buf, count, dt)?;
        // SAFETY: the function's contract; `n > 0` bytes at a buffer that is there.
        let b = unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), n) };
        begin(
            comm,
            req,
            |c, s, into| {
                // Under NO_SEND_CANCELS a send keeps its request (see `light_send`).
                if !light_send(c) {
                    return None;
                }
                Some(c.isend_begun_with(s, b, abi::rank_in(dest), tag, |r| put(into, r, comm)))
            },
            |_| earlybird::Status::empty(),
        )
    }

    /// MPI_Irecv: the code to return, its request's handle into `*req`. A receive that
    /// matched a message already there keeps only its status, as [`start_recv`]'s.
    ///
    /// # Safety
    /// As [`start_recv`]; `req` is null or points to a handle to write.
    #[inline]
    pub(crate) unsafe fn irecv(
        buf: *mut c_void,
        count: c_int,
        dt: Handle,
        src: c_int,
        tag: c_int,
        comm: Handle,
        req: *mut Handle,
    ) -> Option<c_int> {
        let n = byte_count(buf, count, dt)?;
        // SAFETY: the function's contract; `n > 0` bytes at a buffer that is there, left
        // alone by the program until the request completes.
        let b = unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), n) };
        begin(
            comm,
            req,
            |c, s, into| {
                Some(c.irecv_begun_with(s, b, abi::rank_in(src), tag, |r| put(into, r, comm)))
            },
            |status| status,
        )
    }

    /// MPI_Send.
    ///
    /// # Safety
    /// `buf` holds `count` elements of `dt`.
    #[inline]
    pub(crate) unsafe fn send(
        buf: *const c_void,
        count: c_int,
        dt: Handle,
        dest: c_int,
        tag: c_int,
        comm: Handle,
    ) -> Option<Result<()>> {
        let n = byte_count(buf, count, dt)?;
        // SAFETY: the function's contract; `n > 0` bytes at a buffer that is there.
        let b = unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), n) };
        clear_user_handler_ran();
        let r = on(comm, |c, _| Some(c.send(b, abi::rank_in(dest), tag)))?;
        Some(r.or_else(|e| raise_once(comm, e)))
    }

    /// MPI_Recv: the status.
    ///
    /// # Safety
    /// `buf` has room for `count` elements of `dt`.
    #[inline]
    pub(crate) unsafe fn recv(
        buf: *mut c_void,
        count: c_int,
        dt: Handle,
        src: c_int,
        tag: c_int,
        comm: Handle,
    ) -> Option<Result<earlybird::Status>> {
        let n = byte_count(buf, count, dt)?;
        // SAFETY: the function's contract; `n > 0` bytes at a buffer that is there.
        let b = unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), n) };
        clear_user_handler_ran();
        let r = on(comm, |c, _| Some(c.recv(b, abi::rank_in(src), tag)))?;
        Some(r.or_else(|e| raise_once(comm, e)))
    }
}

/// A nonblocking call on communicator `comm`: `make` starts it on the communicator, in the
/// scope of every nonblocking operation, and its handle is returned. The state is reached
/// once for the whole call (these calls are the message rate); `make` runs with it borrowed,
/// so it must not call the program (a user error handler runs after it, on its error).
/// `make` either writes the request into the slot it is given, a box of the spare ones that
/// the table then keeps (no allocation per request), or, for a call that completed at its
/// start and may be kept as its status alone (it holds no view of ours, and nothing is left
/// to do at its completion), returns that status: the handle then names the status alone.
fn make_request(
    comm: Handle,
    make: impl FnOnce(
        &Comm,
        &'static earlybird::Scope<'static, 'static>,
        &mut Option<Pending>,
    ) -> Result<Option<earlybird::Status>>,
) -> Result<Handle> {
    clear_user_handler_ran();
    let r = cell(|s| {
        // The request is made straight into a spare box (it is too large to move for free).
        let mut b = s
            .borrow_mut()
            .as_mut()
            .and_then(|st| st.spare.pop())
            .unwrap_or_else(|| Box::new(None));
        let quick = {
            let g = s.borrow();
            let c = comm_ref(&g, comm)?;
            let scope = g
                .as_ref()
                .map(|st| st.scope)
                .expect("a communicator, so a state");
            make(c, scope, &mut b)
        };
        let mut g = s.borrow_mut();
        let st = g
            .as_mut()
            .ok_or_else(|| not_initialized("a nonblocking call"))?;
        match quick {
            Ok(None) => Ok(REQUESTS.handle(st.reqs.insert(Held(b)))),
            Ok(Some(status)) => {
                st.spare.push(b);
                Ok(DONE.handle(st.done.insert(status)))
            }
            Err(e) => {
                st.spare.push(b);
                Err(e)
            }
        }
    });
    r.or_else(|e| raise_once(comm, e))
}

/// A nonblocking call's result: its request kept and its handle into `*req`, or the error's
/// code.
///
/// # Safety
/// `req` is null or points to a request handle to write.
pub(crate) unsafe fn request_out(req: *mut Handle, r: Result<Pending>) -> c_int {
    // SAFETY: the function's contract; `write` checks for null.
    ok_or_code(r.map(|p| unsafe { write(req, add_request(p)) }))
}

/// A request to keep in the table (inline: an allocation per request would cost more than
/// moving it in and out).
pub(crate) fn pending(req: Request<'static>, comm: Handle, kept: Kept) -> Pending {
    Pending {
        req: Some(req),
        comm,
        kept,
        then: None,
        bind: None,
    }
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
    persistent: bool,
) -> Result<Handle> {
    let src = abi::rank_in(src);
    make_request(comm, |c, s, slot| {
        by_elem!(dt, T => {
            // SAFETY: the function's contract.
            if let Some(b) = unsafe { slice_out::<T>(buf, count) }? {
                if persistent {
                    *slot = Some(pending(c.recv_init(s, b, src, tag)?, comm, Kept::Slice));
                    return Ok(None);
                }
                return Ok(match c.irecv_begun(s, b, src, tag)? {
                    Begun::Done(st) => Some(st),
                    Begun::Pending(r) => {
                        *slot = Some(pending(r, comm, Kept::Slice));
                        None
                    }
                });
            }
        });
        // SAFETY: the function's contract.
        let b = unsafe { buf_out(buf, count, dt) }?;
        let kept = Box::into_raw(Box::new(b));
        // SAFETY: `kept` is alive until `Pending::drop`, which drops the request first, and
        // nothing else uses it meanwhile.
        let view: &'static mut TypedMut<'static> = unsafe { &mut *kept };
        let r = if persistent {
            c.recv_init(s, view, src, tag)
        } else {
            c.irecv(s, view, src, tag)
        };
        match r {
            Ok(req) => {
                *slot = Some(pending(req, comm, Kept::Recv(kept)));
                Ok(None)
            }
            Err(e) => {
                // SAFETY: no request holds it.
                drop(unsafe { Box::from_raw(kept) });
                Err(e)
            }
        }
    })
}

pub(crate) fn empty_status(s: *mut MpiStatus) {
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

pub(crate) fn take_request(h: Handle) -> Result<Held> {
    if is_done_handle(h) {
        return Err(not_persistent(h));
    }
    with_state(|s| {
        let st = s
            .as_mut()
            .ok_or_else(|| not_initialized("a request call"))?;
        st.reqs
            .check_out(REQUESTS.index(h))
            .ok_or_else(|| REQUESTS.gone(h))
    })
}

/// The error for a completed-at-start request given where a request of its own is needed
/// (a start, a bind, a bundle).
fn not_persistent(h: Handle) -> Error {
    Error::new(
        ErrorClass::Request,
        format!("request {h:#x} is a nonblocking send or receive that completed at its start: no persistent request"),
    )
}

pub(crate) fn put_back(h: Handle, p: Held) {
    with_state(|s| {
        if let Some(st) = s.as_mut() {
            st.reqs.put_back(REQUESTS.index(h), p);
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
    if is_done_handle(h) {
        return match done_status(h, true) {
            Ok(st) => {
                crate::status_out(status, &st);
                // SAFETY: the function's contract.
                unsafe { req.write(abi::REQUEST_NULL) };
                Ok(true)
            }
            Err(e) => Err(fail(abi::COMM_WORLD, "MPI_Wait", e)),
        };
    }
    let mut p = match take_request(h) {
        Ok(p) => p,
        Err(e) => return Err(fail(abi::COMM_WORLD, "MPI_Wait", e)),
    };
    clear_user_handler_ran();
    if let Some(r) = crate::channels::bind_step(&mut p, block) {
        // The completion of a bind (MPIX_Ibind_channel): the persistent request stays,
        // bound or not.
        let comm = p.comm;
        put_back(h, p);
        return match r {
            Ok(Some(st)) => {
                crate::status_out(status, &st);
                Ok(true)
            }
            Ok(None) => Ok(false),
            Err(e) => Err(request_error(comm, e)),
        };
    }
    let r = match p.req.as_mut() {
        Some(r) if block => r.wait().map(Some),
        Some(r) => r.test(),
        None => Ok(None),
    };
    match r {
        Ok(Some(st)) => {
            crate::status_out(status, &st);
            if let Some(f) = p.then.take() {
                f();
            }
            if p.req.as_ref().is_some_and(Request::is_persistent) {
                // Inactive now; the handle stays for the next MPI_Start.
                put_back(h, p);
            } else {
                retire(h, p);
                // SAFETY: the function's contract.
                unsafe { req.write(abi::REQUEST_NULL) };
            }
            Ok(true)
        }
        Ok(None) => {
            put_back(h, p);
            Ok(false)
        }
        Err(e) => {
            let comm = p.comm;
            retire(h, p);
            // SAFETY: the function's contract.
            unsafe { req.write(abi::REQUEST_NULL) };
            Err(request_error(comm, e))
        }
    }
}

/// The requests `hs` names, out of the table together, with their positions in `hs`
/// (MPI_REQUEST_NULL left out); none is taken when one of them names no request.
/// Completed-at-start requests are left where they are when `done_too` (the caller collects
/// them), an error otherwise.
pub(crate) fn take_requests(
    hs: &[Handle],
    what: &str,
    done_too: bool,
) -> Result<Vec<(usize, Held)>> {
    with_state(|s| {
        let st = s.as_mut().ok_or_else(|| not_initialized(what))?;
        // Room for them all at once (grown one by one, a window of 64 costs five copies).
        let mut taken = Vec::with_capacity(hs.len());
        for (i, &h) in hs.iter().enumerate() {
            if h == abi::REQUEST_NULL {
                continue;
            }
            let found = if is_done_handle(h) {
                if done_too && st.done.get(DONE.index(h)).is_some() {
                    continue;
                }
                Err(if done_too {
                    DONE.gone(h)
                } else {
                    not_persistent(h)
                })
            } else {
                st.reqs
                    .check_out(REQUESTS.index(h))
                    .ok_or_else(|| REQUESTS.gone(h))
            };
            match found {
                Ok(p) => taken.push((i, p)),
                Err(e) => {
                    for (j, p) in taken.drain(..) {
                        st.reqs.put_back(REQUESTS.index(hs[j]), p);
                    }
                    return Err(e);
                }
            }
        }
        Ok(taken)
    })
}

/// MPI_Waitall: the requests taken out of the table together and waited for in one pass of
/// the engine (as the Rust API's `wait_all`), then each finished as MPI_Wait finishes one.
/// When some failed, every status says its own error (MPI_SUCCESS for those that did not)
/// and the result is MPI_ERR_IN_STATUS.
///
/// # Safety
/// `reqs` holds `n` request handles; `statuses` is MPI_STATUSES_IGNORE or `n` statuses.
pub(crate) unsafe fn wait_all(n: c_int, reqs: *mut Handle, statuses: *mut MpiStatus) -> c_int {
    const WHAT: &str = "MPI_Waitall";
    if n <= 0 {
        return MPI_SUCCESS;
    }
    if reqs.is_null() {
        let e = Error::new(ErrorClass::Request, format!("a null array of {n} requests"));
        return fail(abi::COMM_WORLD, WHAT, e);
    }
    let n = n as usize;
    // SAFETY: the function's contract.
    let hs = unsafe { std::slice::from_raw_parts_mut(reqs, n) };
    let taken = take_requests(hs, WHAT, true);
    let mut taken = match taken {
        Ok(t) => t,
        Err(e) => return fail(abi::COMM_WORLD, WHAT, e),
    };
    for (i, &h) in hs.iter().enumerate() {
        if h == abi::REQUEST_NULL {
            empty_status(crate::pt2pt::nth_status(statuses, i));
        }
    }
    clear_user_handler_ran();
    // Binds in progress (MPIX_Ibind_channels) complete first, each wait progressing them all;
    // their requests stay, bound or not.
    // (Empty when there are none: the common case allocates nothing for them.)
    let mut binds: Vec<Option<Result<earlybird::Status>>> =
        if taken.iter().any(|(_, p)| p.bind.is_some()) {
            taken
                .iter_mut()
                .map(|(_, p)| {
                    crate::channels::bind_step(p, true)
                        .map(|r| r.map(|st| st.expect("a blocking bind step completes")))
                })
                .collect()
        } else {
            Vec::new()
        };
    let bind_failed = binds.iter().any(|b| matches!(b, Some(Err(_))));
    let mut out = Vec::new();
    let r = {
        let mut live: Vec<&mut Request<'static>> = Vec::with_capacity(taken.len());
        live.extend(
            taken
                .iter_mut()
                .enumerate()
                .filter(|(k, _)| binds.get(*k).is_none_or(Option::is_none))
                .filter_map(|(_, (_, p))| p.req.as_mut()),
        );
        out.resize(live.len(), earlybird::Status::empty());
        earlybird::wait_all_into(&mut live, &mut out)
    };
    let r = match r {
        Ok(()) if bind_failed => Err(Error::new(
            ErrorClass::InStatus,
            "a bind failed (its status says how)",
        )),
        r => r,
    };
    let in_status = match &r {
        Ok(()) => false,
        Err(e) if e.class() == ErrorClass::InStatus => true,
        Err(_) => {
            // The wait itself failed: nothing was completed.
            let comm = taken.first().map_or(abi::COMM_WORLD, |(_, p)| p.comm);
            for (i, p) in taken {
                put_back(hs[i], p);
            }
            return request_error(comm, r.expect_err("an error"));
        }
    };
    let mut statuses_of = out.iter();
    let mut comm = abi::COMM_WORLD;
    // Each request finished here, with the state not borrowed (a completion may call the
    // program): a nonblocking one dropped out of its box, a persistent one left in it.
    for (k, (i, held)) in taken.iter_mut().enumerate() {
        let s = crate::pt2pt::nth_status(statuses, *i);
        let p: &mut Pending = held;
        if let Some(b) = binds.get_mut(k).and_then(Option::take) {
            // A bind's request stays, bound or not.
            match b {
                Ok(st) => {
                    crate::status_out(s, &st);
                    status_error(s, MPI_SUCCESS);
                }
                Err(e) => {
                    empty_status(s);
                    status_error(s, e.code());
                    comm = p.comm;
                }
            }
            continue;
        }
        let keep = match p.req.as_ref() {
            Some(req) => {
                let st = statuses_of.next().copied().unwrap_or_default();
                crate::status_out(s, &st);
                // Every status of a multiple completion says how its request ended, as
                // MPICH's and Open MPI's do (MPI requires it with MPI_ERR_IN_STATUS only).
                status_error(s, st.error().code());
                if in_status && st.error() != ErrorClass::Success {
                    comm = p.comm;
                }
                req.is_persistent()
            }
            None => false,
        };
        if let Some(f) = p.then.take() {
            f();
        }
        if !keep {
            *held.0 = None;
        }
    }
    // Then their boxes in one visit to the state: back in the table (persistent requests,
    // binds), or kept for the next request and their handles nulled.
    with_state(|s| {
        if let Some(st) = s.as_mut() {
            // Those that completed at their start (checked present by `take_requests`).
            for (i, h) in hs.iter_mut().enumerate() {
                if is_done_handle(*h) {
                    if let Some(done) = st.done.take(DONE.index(*h)) {
                        let s = crate::pt2pt::nth_status(statuses, i);
                        crate::status_out(s, &done);
                        status_error(s, MPI_SUCCESS);
                        *h = abi::REQUEST_NULL;
                    }
                }
            }
            for (i, held) in taken {
                let at = REQUESTS.index(hs[i]);
                if held.0.is_some() {
                    st.reqs.put_back(at, held);
                } else {
                    st.reqs.free_slot(at);
                    st.spare.push(held.0);
                    hs[i] = abi::REQUEST_NULL;
                }
            }
        }
    });
    match r {
        Ok(()) => MPI_SUCCESS,
        Err(e) => request_error(comm, e),
    }
}

/// The code of an error a request's completion returned, after `comm`'s error handler (see
/// [`raise_once`]).
pub(crate) fn request_error(comm: Handle, e: Error) -> c_int {
    ok_or_code(raise_once::<()>(comm, e))
}

/// `e`, an error of a call into the Rust API, through `comm`'s error handler unless a user
/// handler of the program already saw it in that call (the caller cleared `USER_HANDLER_RAN`
/// before it).
fn raise_once<R>(comm: Handle, e: Error) -> Result<R> {
    if user_handler_ran() {
        Err(e)
    } else {
        with_comm(comm, |_| Err(e))
    }
}

/// Set a status's MPI_ERROR: every status a multiple completion fills (MPI requires it only
/// with MPI_ERR_IN_STATUS; MPICH and Open MPI always set it), never a single completion's.
pub(crate) fn status_error(s: *mut MpiStatus, code: c_int) {
    if s.is_null() || s as usize == abi::STATUS_IGNORE {
        return;
    }
    // SAFETY: a status to write (MPI's contract), checked for null and the ignore sentinel.
    unsafe { (&raw mut (*s).error).write(code) }
}

/// MPI_Start: start the persistent request `h`.
pub(crate) fn start(h: Handle) -> Result<()> {
    let mut p = take_request(h)?;
    let r = match p.req.as_mut() {
        Some(q) => q.start(),
        None => Err(Error::new(
            ErrorClass::Request,
            "a request without an operation",
        )),
    };
    put_back(h, p);
    r
}

thread_local! {
    /// Set when a user error handler of this library's making runs (see `with_comm`).
    static USER_HANDLER_RAN: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Set once the program made an error handler of its own (a C function): until then no call
/// needs [`USER_HANDLER_RAN`], and the calls that are the message rate leave it alone (a
/// thread-local costs a call into the dynamic loader in a shared library).
static USER_HANDLERS_MADE: AtomicBool = AtomicBool::new(false);

/// A user error handler of the program's, about to be made: from now on the calls track
/// whether it ran.
pub(crate) fn user_handler_made() {
    USER_HANDLERS_MADE.store(true, Ordering::Relaxed);
}

/// In a user error handler of the program's, about to call it: the call it runs in will not
/// run a handler again for the same error (see [`user_handler_ran`]).
pub(crate) fn note_user_handler_ran() {
    USER_HANDLER_RAN.with(|r| r.set(true));
}

/// Before a call into the Rust API whose error may go to a user handler there (and then to
/// [`request_error`] or the like): none ran yet.
#[inline]
pub(crate) fn clear_user_handler_ran() {
    if USER_HANDLERS_MADE.load(Ordering::Relaxed) {
        USER_HANDLER_RAN.with(|r| r.set(false));
    }
}

/// After such a call failed: whether a user handler of the program saw its error (and the
/// mark cleared for the next call). No handler of the program's was made (the flag is set
/// before any is), so none ran, when [`USER_HANDLERS_MADE`] is false.
fn user_handler_ran() -> bool {
    USER_HANDLERS_MADE.load(Ordering::Relaxed) && USER_HANDLER_RAN.with(|r| r.replace(false))
}

/// The handle of `c` for a callback: MPI_COMM_WORLD, MPI_COMM_SELF, or one of the table (a
/// communicator being freed stays there while its delete callbacks run).
pub(crate) fn handle_of_comm(c: &Comm) -> Handle {
    use earlybird::Comparison::Ident;
    cell(|s| {
        let s = s.borrow();
        let Some(st) = s.as_ref() else {
            return abi::COMM_NULL;
        };
        if let Some(u) = &st.uni {
            if c.compare(u.world()) == Ident {
                return abi::COMM_WORLD;
            }
            if c.compare(u.comm_self()) == Ident {
                return abi::COMM_SELF;
            }
        }
        if let Some((h, _)) = st
            .endpoints
            .iter()
            .find(|(_, e)| c.compare(e.comm()) == Ident)
        {
            return *h;
        }
        st.comms
            .position(|x| c.compare(x) == Ident)
            .map_or(abi::COMM_NULL, |i| COMMS.handle(i))
    })
}

/// MPI_Comm_free of `h`. Its delete callbacks run with it still in the table (MPI lets them
/// use it: a language binding looks it up), and it leaves the table once freed; it stays
/// when the free fails (a delete callback's error). `Err` holds the code to return.
pub(crate) fn free_comm(h: Handle) -> std::result::Result<(), c_int> {
    const WHAT: &str = "MPI_Comm_free";
    if crate::endpoints::is_endpoint_handle(h) {
        return crate::endpoints::free(h);
    }
    let c = match cell(|s| comm_ref(&s.borrow(), h).cloned()) {
        Ok(_) if h == abi::COMM_WORLD || h == abi::COMM_SELF => Err(Error::new(
            ErrorClass::Comm,
            "MPI_COMM_WORLD and MPI_COMM_SELF cannot be freed",
        )),
        r => r,
    }
    .map_err(|e| fail(abi::COMM_WORLD, WHAT, e))?;
    // The Rust API ran the communicator's error handler on its own error.
    c.free().map_err(|e| e.code())?;
    drop(take_comm(h));
    forget_attached(h);
    Ok(())
}

/// Keep an attribute key, made by `make` from its own handle; the handle.
pub(crate) fn add_keyval(make: impl FnOnce(c_int) -> earlybird::Keyval<usize>) -> Result<c_int> {
    cell(|s| {
        let mut s = s.borrow_mut();
        let st = s
            .as_mut()
            .ok_or_else(|| not_initialized("MPI_Comm_create_keyval"))?;
        let next = st.keyvals.next_index();
        let h = KEYVALS.handle(next);
        let i = st.keyvals.insert(make(h));
        debug_assert_eq!(i, next);
        Ok(h)
    })
}

/// The attribute key `h` names (a user one).
pub(crate) fn keyval_of(h: c_int) -> Result<earlybird::Keyval<usize>> {
    lookup(|st| &st.keyvals, &KEYVALS, h)
}

/// MPI_Comm_free_keyval: the attribute key `h` freed. Its entry stays, as a window or
/// datatype keyval's does (see `attribute_keys::free_keyval`): the attributes set with it are
/// read and deleted through it, and freeing it again does nothing.
pub(crate) fn free_keyval(h: c_int) -> Result<()> {
    let k = keyval_of(h)?;
    if k.is_freed() {
        return Ok(());
    }
    k.free()
}

/// The error handler a handle names: a predefined one, or one of the table.
pub(crate) fn errhandler_of(h: Handle) -> Result<earlybird::ErrHandler> {
    use earlybird::ErrHandler;
    match h {
        abi::ERRORS_ARE_FATAL => Ok(ErrHandler::Fatal),
        abi::ERRORS_RETURN => Ok(ErrHandler::Return),
        abi::ERRORS_ABORT => Ok(ErrHandler::Abort),
        h => lookup(|st| &st.errhandlers, &ERRHANDLERS, h),
    }
}

/// The handle of an error handler: a predefined one's, or its entry in the table
/// (MPI_ERRHANDLER_NULL for a handler this library did not make).
pub(crate) fn errhandler_handle(e: &earlybird::ErrHandler) -> Handle {
    use earlybird::ErrHandler;
    match e {
        ErrHandler::Fatal => abi::ERRORS_ARE_FATAL,
        ErrHandler::Return => abi::ERRORS_RETURN,
        ErrHandler::Abort => abi::ERRORS_ABORT,
        e => cell(|s| {
            let s = s.borrow();
            s.as_ref()
                .and_then(|st| st.errhandlers.position(|x| x == e))
                .map_or(abi::ERRHANDLER_NULL, |i| ERRHANDLERS.handle(i))
        }),
    }
}

/// Keep a user error handler; its handle.
pub(crate) fn add_errhandler(e: earlybird::ErrHandler) -> Result<Handle> {
    keep(|st| &mut st.errhandlers, &ERRHANDLERS, e)
}

/// The user error handler `h` names, out of the table (MPI_Errhandler_free).
pub(crate) fn take_errhandler(h: Handle) -> Result<earlybird::ErrHandler> {
    if win_errhandler_of(h).is_some() {
        // A window's handler: freed from its own table.
        release(|st| &mut st.win_errhandlers, &WIN_ERRHANDLERS, h)?;
        return Ok(earlybird::ErrHandler::Return);
    }
    if session_errhandler_of(h).is_some() {
        release(|st| &mut st.session_errhandlers, &SESSION_ERRHANDLERS, h)?;
        return Ok(earlybird::ErrHandler::Return);
    }
    if matches!(
        h,
        abi::ERRORS_ARE_FATAL | abi::ERRORS_RETURN | abi::ERRORS_ABORT
    ) {
        // Freeing a predefined handler does nothing (MPI 4.1 §9.3.4).
        return errhandler_of(h);
    }
    release(|st| &mut st.errhandlers, &ERRHANDLERS, h)
}

/// What the program attached (MPI_Buffer_attach, MPI_Comm_attach_buffer), to hand back at
/// detach: the address and the size it gave.
type Attached = (usize, i64);

/// MPI_Buffer_attach (`comm` `None`) or MPI_Comm_attach_buffer: the size is what the
/// library accounts buffered sends against (it keeps the copies in memory of its own);
/// MPI_BUFFER_AUTOMATIC (the null address) lets them take what they need.
pub(crate) fn buffer_attach(comm: Option<Handle>, buf: *mut c_void, size: i64) -> Result<()> {
    let what = if comm.is_some() {
        "MPI_Comm_attach_buffer"
    } else {
        "MPI_Buffer_attach"
    };
    let bytes = if buf.is_null() {
        earlybird::BUFFER_AUTOMATIC
    } else {
        usize::try_from(size)
            .map_err(|_| Error::new(ErrorClass::Arg, format!("{what}: a buffer of {size} bytes")))?
    };
    let kept = (buf as usize, if buf.is_null() { 0 } else { size });
    match comm {
        None => cell(|s| {
            let mut s = s.borrow_mut();
            let st = s.as_mut().ok_or_else(|| not_initialized(what))?;
            st.uni()?.buffer_attach(bytes)?;
            st.attached = Some(kept);
            Ok(())
        }),
        Some(h) => {
            with_comm(h, |c| c.buffer_attach(bytes))?;
            with_state(|s| {
                if let Some(st) = s.as_mut() {
                    st.comm_attached.retain(|(x, _)| *x != h);
                    st.comm_attached.push((h, kept));
                }
            });
            Ok(())
        }
    }
}

/// MPI_Buffer_detach / MPI_Comm_detach_buffer: waits for the buffered sends, then hands
/// back what was attached.
pub(crate) fn buffer_detach(comm: Option<Handle>) -> Result<Attached> {
    match comm {
        None => cell(|s| {
            let mut s = s.borrow_mut();
            let st = s
                .as_mut()
                .ok_or_else(|| not_initialized("MPI_Buffer_detach"))?;
            st.uni()?.buffer_detach()?;
            Ok(st.attached.take().unwrap_or((0, 0)))
        }),
        Some(h) => {
            with_comm(h, |c| c.buffer_detach())?;
            Ok(with_state(|s| {
                s.as_mut()
                    .and_then(|st| {
                        let i = st.comm_attached.iter().position(|(x, _)| *x == h)?;
                        Some(st.comm_attached.swap_remove(i).1)
                    })
                    .unwrap_or((0, 0))
            }))
        }
    }
}

/// A communicator handle is freed: forget what was attached to it (the library's buffer
/// went with the communicator).
pub(crate) fn forget_attached(h: Handle) {
    with_state(|s| {
        if let Some(st) = s.as_mut() {
            st.comm_attached.retain(|(x, _)| *x != h);
        }
    });
}

/// MPI_Buffer_flush / MPI_Comm_flush_buffer.
pub(crate) fn buffer_flush(comm: Option<Handle>) -> Result<()> {
    match comm {
        None => cell(|s| {
            let g = s.borrow();
            let st = g
                .as_ref()
                .ok_or_else(|| not_initialized("MPI_Buffer_flush"))?;
            st.uni()?.buffer_flush()
        }),
        Some(h) => with_comm(h, |c| c.buffer_flush()),
    }
}

/// MPI_Buffer_iflush / MPI_Comm_iflush_buffer: the request's handle.
pub(crate) fn buffer_iflush(comm: Option<Handle>) -> Result<Handle> {
    match comm {
        None => {
            let req = cell(|s| {
                let g = s.borrow();
                let st = g
                    .as_ref()
                    .ok_or_else(|| not_initialized("MPI_Buffer_iflush"))?;
                st.uni()?.ibuffer_flush(st.scope)
            })?;
            Ok(add_request(pending(req, abi::COMM_WORLD, Kept::Slice)))
        }
        Some(h) => make_request(h, |c, s, slot| {
            *slot = Some(pending(c.ibuffer_flush(s)?, h, Kept::Slice));
            Ok(None)
        }),
    }
}

/// MPI_Pack / MPI_Unpack's view of `count` elements of `dt` at `buf`: the datatype to pack
/// with, its count, and the run of bytes it reaches (address and length), which starts at
/// the datatype's first byte. A datatype reaching below `buf` (a negative displacement or
/// stride), or `buf` MPI_BOTTOM with absolute addresses, is moved so that its first byte is
/// displacement 0: the packed bytes are the same, in the same order.
pub(crate) fn pack_span(
    buf: *const c_void,
    count: i64,
    dt: Handle,
) -> Result<(Datatype, usize, *const u8, usize)> {
    let mut sp = span(count, dt, buf.is_null())?;
    if sp.origin != 0 {
        sp = span(count, dt, true)?;
    }
    let at = buf.cast::<u8>().wrapping_offset(sp.start);
    Ok((sp.dt, sp.count, at, sp.len))
}

/// MPI_Cancel: the request `h` is cancelled if it can be (its wait then says so).
pub(crate) fn cancel(h: Handle) -> Result<()> {
    if is_done_handle(h) {
        // Complete already: a cancel has no effect (its status says not cancelled).
        return done_status(h, false).map(drop);
    }
    let mut p = take_request(h)?;
    let bound = p.bind.is_some();
    let r = match p.req.as_mut() {
        _ if bound => Err(Error::new(
            ErrorClass::Request,
            "MPI_Cancel of a request whose bind is in progress (complete the bind with a wait or test)",
        )),
        Some(q) => q.cancel(),
        None => Ok(()),
    };
    put_back(h, p);
    r
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
    if is_done_handle(h) {
        return match done_status(h, true) {
            Ok(_) => {
                // SAFETY: the function's contract.
                unsafe { req.write(abi::REQUEST_NULL) };
                MPI_SUCCESS
            }
            Err(e) => fail(abi::COMM_WORLD, "MPI_Request_free", e),
        };
    }
    let mut p = match take_request(h) {
        Ok(p) => p,
        Err(e) => return fail(abi::COMM_WORLD, "MPI_Request_free", e),
    };
    let r = match p.req.take().map(earlybird::channel::Channel::try_from) {
        None => Ok(()),
        Some(Err(r)) => r.free(),
        Some(Ok(ch)) => {
            // The seed: freeing a channel this way is erroneous; it stays, to be unbound.
            p.req = Some(ch.into_request());
            let comm = p.comm;
            put_back(h, p);
            let e = Error::new(
                ErrorClass::Request,
                format!("request {h:#x} is a bound channel: MPIX_Unbind_channel frees it"),
            );
            return fail(comm, "MPI_Request_free", e);
        }
    };
    retire(h, p);
    // SAFETY: the function's contract.
    unsafe { req.write(abi::REQUEST_NULL) };
    ok_or_code(r)
}

/// Keep the message MPI_Mprobe or MPI_Improbe matched; its handle (MPI_MESSAGE_NO_PROC for
/// a probe of MPI_PROC_NULL, whose status says so).
pub(crate) fn add_message(m: earlybird::Message, st: &earlybird::Status) -> Result<Handle> {
    if st.source() == earlybird::PROC_NULL {
        return Ok(abi::c::MPI_MESSAGE_NO_PROC);
    }
    keep(|st| &mut st.messages, &MESSAGES, m)
}

/// The message `h` names, out of the table (MPI_Mrecv receives it once); `None` for
/// MPI_MESSAGE_NO_PROC.
pub(crate) fn take_message(h: Handle) -> Result<Option<earlybird::Message>> {
    match h {
        abi::c::MPI_MESSAGE_NO_PROC => Ok(None),
        abi::c::MPI_MESSAGE_NULL => Err(Error::new(
            ErrorClass::Request,
            "MPI_MESSAGE_NULL is no message to receive",
        )),
        h => release(|st| &mut st.messages, &MESSAGES, h).map(Some),
    }
}

/// Box the two views of an MPI_Isendrecv for as long as its request lives.
pub(crate) fn kept_pair(
    s: Typed<'static>,
    r: TypedMut<'static>,
) -> (
    Kept,
    &'static Typed<'static>,
    &'static mut TypedMut<'static>,
) {
    let (sp, rp) = (Box::into_raw(Box::new(s)), Box::into_raw(Box::new(r)));
    // SAFETY: both are alive until `Pending::drop` frees them, after the request that borrows
    // them; nothing else uses them meanwhile.
    let (sv, rv) = unsafe { (&*sp, &mut *rp) };
    (Kept::Both(sp, rp), sv, rv)
}

/// Box one send view for as long as its request lives.
pub(crate) fn kept_send(s: Typed<'static>) -> (Kept, &'static Typed<'static>) {
    let sp = Box::into_raw(Box::new(s));
    // SAFETY: as in `kept_pair`.
    (Kept::Send(sp), unsafe { &*sp })
}

/// Box the view of an MPI_Isendrecv_replace (or any one receive view).
pub(crate) fn kept_recv(r: TypedMut<'static>) -> (Kept, &'static mut TypedMut<'static>) {
    let rp = Box::into_raw(Box::new(r));
    // SAFETY: as in `kept_pair`.
    (Kept::Recv(rp), unsafe { &mut *rp })
}

/// MPI_Request_get_status: whether `h` has completed, with its status, leaving it to a later
/// wait or test.
pub(crate) fn request_status(h: Handle) -> Result<Option<earlybird::Status>> {
    if h == abi::REQUEST_NULL {
        return Ok(Some(earlybird::Status::empty()));
    }
    if is_done_handle(h) {
        return done_status(h, false).map(Some);
    }
    let mut p = take_request(h)?;
    let r = match crate::channels::bind_step(&mut p, false) {
        Some(r) => r,
        None => match p.req.as_mut() {
            Some(q) => q.get_status(),
            None => Ok(None),
        },
    };
    put_back(h, p);
    r
}

/// MPI_UNIVERSE_SIZE's value (the job's size: earlybird starts no processes later), kept where
/// the attribute's pointer can point.
pub(crate) fn world_size_value() -> &'static c_int {
    static SIZE: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);
    let n = cell(|s| {
        s.borrow()
            .as_ref()
            .and_then(|st| st.uni.as_ref())
            .map_or(0, |u| u.world().size())
    });
    SIZE.store(n, Ordering::Relaxed);
    // SAFETY: an AtomicI32 has the layout of an i32; the value is only written here, by the
    // MPI thread, before the pointer is handed out.
    unsafe { &*SIZE.as_ptr() }
}

/// MPI_LASTUSEDCODE's value (the largest error code or class added so far), as above.
pub(crate) fn last_used_code_value() -> &'static c_int {
    static LAST: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);
    LAST.store(earlybird::last_used_code(), Ordering::Relaxed);
    // SAFETY: as in `world_size_value`.
    unsafe { &*LAST.as_ptr() }
}

/// Whether the request `h` takes part in a wait or test over several requests: not
/// MPI_REQUEST_NULL, and not an inactive persistent request (MPI treats both alike there).
pub(crate) fn request_active(h: Handle) -> bool {
    if h == abi::REQUEST_NULL {
        return false;
    }
    if is_done_handle(h) {
        // Active until collected (a handle that names none is left to the completion).
        return true;
    }
    cell(|s| {
        s.borrow()
            .as_ref()
            .and_then(|st| st.reqs.get(REQUESTS.index(h)))
            // A handle that names no request is left to the completion, which reports it.
            .is_none_or(|p| p.bind.is_some() || p.req.as_ref().is_none_or(Request::is_active))
    })
}

// ---- endpoints (seed 003) ---------------------------------------------------------------

/// Whether this thread drives endpoints only (it did not call MPI_Init).
pub(crate) fn is_endpoint_thread() -> bool {
    with_state(|s| s.as_ref().is_some_and(|st| st.uni.is_none()))
}

/// Whether this thread's state is borrowed by a call in progress.
pub(crate) fn state_in_use() -> bool {
    endpoint_state(|s| s.try_borrow_mut().is_err())
}

/// `f` on the state that keeps the endpoints this thread takes: the process's for the
/// thread that called MPI_Init, this thread's own for the others (so that each drives its
/// endpoints with no other thread's calls in the way, at every thread level).
fn endpoint_state<R>(f: impl FnOnce(&RefCell<Option<State>>) -> R) -> R {
    if is_init_thread() {
        cell(f)
    } else {
        STATE.with(|t| f(&t.state))
    }
}

/// Keep `c`, attached by this thread, under `h` (a thread that did not call MPI_Init gets a
/// state of its own: its tables of handles).
pub(crate) fn add_endpoint(h: Handle, c: earlybird::EndpointComm) {
    endpoint_state(|s| {
        s.borrow_mut()
            .get_or_insert_with(|| State::new(None))
            .endpoints
            .push((h, c))
    })
}

/// The endpoint this thread drives under `h`, out of its state.
pub(crate) fn take_endpoint(h: Handle) -> Option<earlybird::EndpointComm> {
    with_state(|s| {
        let st = s.as_mut()?;
        let i = st.endpoints.iter().position(|(x, _)| *x == h)?;
        Some(st.endpoints.remove(i).1)
    })
}

/// Drop this thread's state once it drives nothing (an endpoint thread whose last endpoint
/// was freed).
pub(crate) fn forget_if_idle() {
    let idle = with_state(|s| {
        if s.as_ref()
            .is_some_and(|st| st.uni.is_none() && st.endpoints.is_empty())
        {
            s.take()
        } else {
            None
        }
    });
    drop(idle);
}
