//! A PMIx client through the system's `libpmix.so.2` (Debian's `libpmix2`), loaded at run
//! time only when a PMIx launcher started the process (Open MPI's `mpirun`, `srun
//! --mpi=pmix`), so that earlybird neither links nor needs it otherwise.
//!
//! Only the calls a rank needs to join a job are bound: init, get, put, commit, fence (with
//! data collection), abort and finalize. The structures are PMIx 4's (`pmix_common.h`):
//! `pmix_proc_t` is 256 bytes of namespace and a `u32` rank (260), `pmix_value_t` a `u16` type
//! and an 8-aligned 24-byte union (32), `pmix_info_t` a 512-byte key, `u32` flags and a value
//! at 520 (552), as `sizeof`/`offsetof` give them from Debian's header; the sizes are checked
//! at compile time below.

use std::ffi::{c_char, c_int, c_void, CStr, CString};

const PMIX_SUCCESS: c_int = 0;
const PMIX_BOOL: u16 = 1;
const PMIX_STRING: u16 = 3;
const PMIX_UINT16: u16 = 13;
const PMIX_UINT32: u16 = 14;
const PMIX_RANK_WILDCARD: u32 = 0xffff_fffe;
const PMIX_GLOBAL: u8 = 3;

#[repr(C)]
#[derive(Clone, Copy)]
struct Proc {
    nspace: [c_char; 256],
    rank: u32,
}

#[repr(C)]
struct Value {
    kind: u16,
    /// The union: a pointer, a number or a flag at its start.
    data: [u64; 3],
}

#[repr(C)]
struct InfoEntry {
    key: [c_char; 512],
    flags: u32,
    value: Value,
}

const _: () = assert!(std::mem::size_of::<Proc>() == 260);
const _: () = assert!(std::mem::size_of::<Value>() == 32);
const _: () = assert!(std::mem::size_of::<InfoEntry>() == 552);

type InitFn = unsafe extern "C" fn(*mut Proc, *mut InfoEntry, usize) -> c_int;
type FinalizeFn = unsafe extern "C" fn(*const InfoEntry, usize) -> c_int;
type GetFn = unsafe extern "C" fn(
    *const Proc,
    *const c_char,
    *const InfoEntry,
    usize,
    *mut *mut Value,
) -> c_int;
type PutFn = unsafe extern "C" fn(u8, *const c_char, *mut Value) -> c_int;
type CommitFn = unsafe extern "C" fn() -> c_int;
type FenceFn = unsafe extern "C" fn(*const Proc, usize, *const InfoEntry, usize) -> c_int;
type AbortFn = unsafe extern "C" fn(c_int, *const c_char, *mut Proc, usize) -> c_int;
type DestructFn = unsafe extern "C" fn(*mut Value);
type ErrorStringFn = unsafe extern "C" fn(c_int) -> *const c_char;

/// The library's entry points.
struct Calls {
    init: InitFn,
    finalize: FinalizeFn,
    get: GetFn,
    put: PutFn,
    commit: CommitFn,
    fence: FenceFn,
    abort: AbortFn,
    destruct: DestructFn,
    error_string: ErrorStringFn,
}

/// A value read from the server.
pub(crate) enum Got {
    U32(u32),
    Text(String),
}

/// An initialised PMIx client: this process is `rank` of the launcher's namespace.
pub(crate) struct Pmix {
    calls: Calls,
    me: Proc,
    pub rank: u32,
}

// SAFETY: the library's calls are thread-safe (PMIx serialises them on its progress thread);
// `Pmix` holds plain data and function pointers.
unsafe impl Send for Pmix {}

pub(super) fn last_dl_error() -> String {
    // SAFETY: dlerror returns null or a NUL-terminated string valid until the next dl call.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        "unknown error".into()
    } else {
        // SAFETY: non-null, NUL-terminated (above).
        unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
    }
}

impl Pmix {
    /// Load `libpmix.so.2` and initialise the client (`PMIx_Init`).
    pub(crate) fn init() -> Result<Pmix, String> {
        let name = c"libpmix.so.2";
        // SAFETY: dlopen takes a NUL-terminated name; the handle is kept for the process's
        // life (never closed: PMIx's threads run its code).
        let lib = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
        if lib.is_null() {
            return Err(format!(
                "cannot load libpmix.so.2 (Debian's libpmix2): {}",
                last_dl_error()
            ));
        }
        let sym = |n: &CStr| -> Result<*mut c_void, String> {
            // SAFETY: lib is a live handle; n is NUL-terminated.
            let p = unsafe { libc::dlsym(lib, n.as_ptr()) };
            if p.is_null() {
                Err(format!("libpmix.so.2 lacks {}", n.to_string_lossy()))
            } else {
                Ok(p)
            }
        };
        // SAFETY: for each transmute, the symbol is the PMIx 4 function of that name, whose C
        // signature the type alias spells out.
        let calls = unsafe {
            Calls {
                init: std::mem::transmute::<*mut c_void, InitFn>(sym(c"PMIx_Init")?),
                finalize: std::mem::transmute::<*mut c_void, FinalizeFn>(sym(c"PMIx_Finalize")?),
                get: std::mem::transmute::<*mut c_void, GetFn>(sym(c"PMIx_Get")?),
                put: std::mem::transmute::<*mut c_void, PutFn>(sym(c"PMIx_Put")?),
                commit: std::mem::transmute::<*mut c_void, CommitFn>(sym(c"PMIx_Commit")?),
                fence: std::mem::transmute::<*mut c_void, FenceFn>(sym(c"PMIx_Fence")?),
                abort: std::mem::transmute::<*mut c_void, AbortFn>(sym(c"PMIx_Abort")?),
                destruct: std::mem::transmute::<*mut c_void, DestructFn>(sym(
                    c"PMIx_Value_destruct",
                )?),
                error_string: std::mem::transmute::<*mut c_void, ErrorStringFn>(sym(
                    c"PMIx_Error_string",
                )?),
            }
        };
        let mut me = Proc {
            nspace: [0; 256],
            rank: 0,
        };
        // SAFETY: me is a valid out-structure; no info entries are passed.
        let rc = unsafe { (calls.init)(&mut me, std::ptr::null_mut(), 0) };
        let p = Pmix {
            calls,
            me,
            rank: me.rank,
        };
        p.check(rc, "PMIx_Init")?;
        Ok(p)
    }

    fn check(&self, rc: c_int, what: &str) -> Result<(), String> {
        if rc == PMIX_SUCCESS {
            return Ok(());
        }
        // SAFETY: PMIx_Error_string returns a static NUL-terminated string for any code.
        let s = unsafe { (self.calls.error_string)(rc) };
        let text = if s.is_null() {
            String::new()
        } else {
            // SAFETY: non-null, static, NUL-terminated.
            unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned()
        };
        Err(format!("{what} failed: {text} ({rc})"))
    }

    /// The value of `key` for process `rank` of this namespace (`None`: the job's, by the
    /// wildcard rank).
    pub(crate) fn get(&self, rank: Option<u32>, key: &str) -> Result<Got, String> {
        let mut p = self.me;
        p.rank = rank.unwrap_or(PMIX_RANK_WILDCARD);
        let k = CString::new(key).map_err(|_| format!("key {key:?} holds a NUL"))?;
        let mut v: *mut Value = std::ptr::null_mut();
        // SAFETY: p and k live across the call; v receives a value the library allocates.
        let rc = unsafe { (self.calls.get)(&p, k.as_ptr(), std::ptr::null(), 0, &mut v) };
        self.check(rc, &format!("PMIx_Get({key}, rank {})", p.rank))?;
        if v.is_null() {
            return Err(format!("PMIx_Get({key}) gave no value"));
        }
        // SAFETY: v points to the library's initialised pmix_value_t (success above).
        let val = unsafe { &*v };
        // The union's number sits at its start: its first bytes in memory order.
        let head = val.data[0].to_ne_bytes();
        let got = match val.kind {
            PMIX_UINT32 => Ok(Got::U32(u32::from_ne_bytes([
                head[0], head[1], head[2], head[3],
            ]))),
            PMIX_UINT16 => Ok(Got::U32(u16::from_ne_bytes([head[0], head[1]]) as u32)),
            PMIX_STRING => {
                let s = val.data[0] as *const c_char;
                if s.is_null() {
                    Ok(Got::Text(String::new()))
                } else {
                    // SAFETY: a PMIX_STRING value holds a NUL-terminated string.
                    Ok(Got::Text(
                        unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned(),
                    ))
                }
            }
            t => Err(format!("PMIx_Get({key}) gave a value of type {t}")),
        };
        // SAFETY: PMIX_VALUE_RELEASE: destruct the value's contents, then free the value
        // the library malloc'd.
        unsafe {
            (self.calls.destruct)(v);
            libc::free(v.cast());
        }
        got
    }

    /// A number the server holds (see [`get`](Self::get)).
    pub(crate) fn get_u32(&self, rank: Option<u32>, key: &str) -> Result<u32, String> {
        match self.get(rank, key)? {
            Got::U32(n) => Ok(n),
            Got::Text(t) => Err(format!("PMIx_Get({key}) gave text {t:?}, not a number")),
        }
    }

    /// A string the server holds (see [`get`](Self::get)).
    pub(crate) fn get_text(&self, rank: Option<u32>, key: &str) -> Result<String, String> {
        match self.get(rank, key)? {
            Got::Text(t) => Ok(t),
            Got::U32(n) => Ok(n.to_string()),
        }
    }

    /// Publish `value` under `key` for every process (after [`commit`](Self::commit) and a
    /// [`fence`](Self::fence)).
    pub(crate) fn put(&self, key: &str, value: &str) -> Result<(), String> {
        let k = CString::new(key).map_err(|_| format!("key {key:?} holds a NUL"))?;
        let s = CString::new(value).map_err(|_| format!("value {value:?} holds a NUL"))?;
        let mut v = Value {
            kind: PMIX_STRING,
            data: [s.as_ptr() as u64, 0, 0],
        };
        // SAFETY: k, s and v live across the call; PMIx_Put copies the value.
        let rc = unsafe { (self.calls.put)(PMIX_GLOBAL, k.as_ptr(), &mut v) };
        self.check(rc, "PMIx_Put")?;
        // SAFETY: no arguments.
        let rc = unsafe { (self.calls.commit)() };
        self.check(rc, "PMIx_Commit")
    }

    /// Wait for every process of the namespace, exchanging what each has put.
    pub(crate) fn fence(&self) -> Result<(), String> {
        let mut info = InfoEntry {
            key: [0; 512],
            flags: 0,
            value: Value {
                kind: PMIX_BOOL,
                // `true` in the union's first byte.
                data: [u64::from_ne_bytes([1, 0, 0, 0, 0, 0, 0, 0]), 0, 0],
            },
        };
        for (d, s) in info.key.iter_mut().zip(c"pmix.collect".to_bytes()) {
            *d = *s as c_char;
        }
        // SAFETY: null procs with 0 means the whole namespace; info lives across the call.
        let rc = unsafe { (self.calls.fence)(std::ptr::null(), 0, &info, 1) };
        self.check(rc, "PMIx_Fence")
    }

    /// Ask the launcher to end the job with `status` (the launcher kills this process too).
    pub(crate) fn abort(&self, status: i32, why: &str) {
        let msg = CString::new(why.replace('\0', " ")).unwrap_or_default();
        // SAFETY: msg lives across the call; null procs with 0 means the whole namespace.
        unsafe { (self.calls.abort)(status, msg.as_ptr(), std::ptr::null_mut(), 0) };
    }

    /// Tell the launcher this process has finalized.
    pub(crate) fn finalize(&self) -> Result<(), String> {
        // SAFETY: no info entries.
        let rc = unsafe { (self.calls.finalize)(std::ptr::null(), 0) };
        self.check(rc, "PMIx_Finalize")
    }
}
