//! A thin binding of the system's libfabric (`libfabric.so.1`, Debian's `libfabric1`),
//! loaded at run time only when a job spans hosts, so that earlybird neither links nor needs
//! it otherwise.
//!
//! One reliable-datagram endpoint (`FI_EP_RDM`) per rank, with untagged messages (frames)
//! and tagged ones (bulk data), one address vector and one completion queue. Only the calls
//! that needs are bound. Most of libfabric's API is `static inline` wrappers that call
//! through the operation tables each object carries, so the objects' leading fields and
//! those tables are declared here as the 1.x headers (`rdma/fabric.h`, `fi_domain.h`,
//! `fi_endpoint.h`, `fi_eq.h`, `fi_cm.h`, `fi_tagged.h`) lay them out; those layouts are part
//! of libfabric's ABI and have only grown at their ends.
//!
//! The provider is `tcp;ofi_rxm` unless `FI_PROVIDER` names another; it must keep messages
//! from one endpoint to another in order (`FI_ORDER_SAS`), which the layers above rely on.

use std::ffi::{c_char, c_int, c_void, CStr};

const FI_MSG: u64 = 1 << 1;
const FI_TAGGED: u64 = 1 << 3;
const FI_RECV: u64 = 1 << 10;
const FI_SEND: u64 = 1 << 11;
const FI_ORDER_SAS: u64 = 1 << 8;
const FI_CONTEXT: u64 = 1 << 59;
const FI_CONTEXT2: u64 = 1 << 52;
const FI_SOCKADDR_IN: u32 = 2;
const FI_EP_RDM: c_int = 3;
const FI_AV_TABLE: c_int = 2;
const FI_THREAD_DOMAIN: c_int = 3;
const FI_PROGRESS_MANUAL: c_int = 2;
const FI_CQ_FORMAT_TAGGED: c_int = 4;
const FI_WAIT_NONE: c_int = 0;
const FI_ENABLE: c_int = 6;
const FI_EAGAIN: isize = 11;
const FI_EAVAIL: isize = 259;
/// The API version asked for: 1.11, which Debian 11's libfabric already has.
const API_VERSION: u32 = (1 << 16) | 11;

/// Bytes of provider scratch space an operation's context must start with
/// (`struct fi_context2`, which `FI_CONTEXT2` mode asks for).
pub(crate) const CONTEXT_BYTES: usize = 64;

/// `fi_addr_t`: a peer's index in the address vector.
pub(crate) type Addr = u64;

#[repr(C)]
struct TxAttr {
    caps: u64,
    mode: u64,
    op_flags: u64,
    msg_order: u64,
    comp_order: u64,
    inject_size: usize,
    size: usize,
    iov_limit: usize,
    rma_iov_limit: usize,
    tclass: u32,
}

#[repr(C)]
struct RxAttr {
    caps: u64,
    mode: u64,
    op_flags: u64,
    msg_order: u64,
    comp_order: u64,
    total_buffered_recv: usize,
    size: usize,
    iov_limit: usize,
}

#[repr(C)]
struct EpAttr {
    kind: c_int,
    protocol: u32,
    protocol_version: u32,
    max_msg_size: usize,
    // The rest is not read or written.
}

#[repr(C)]
struct DomainAttr {
    domain: *mut c_void,
    name: *mut c_char,
    threading: c_int,
    control_progress: c_int,
    data_progress: c_int,
    resource_mgmt: c_int,
    av_type: c_int,
    mr_mode: c_int,
    // The rest is not read or written.
}

#[repr(C)]
struct FabricAttr {
    fabric: *mut c_void,
    name: *mut c_char,
    prov_name: *mut c_char,
    prov_version: u32,
    api_version: u32,
}

#[repr(C)]
struct Info {
    next: *mut Info,
    caps: u64,
    mode: u64,
    addr_format: u32,
    src_addrlen: usize,
    dest_addrlen: usize,
    src_addr: *mut c_void,
    dest_addr: *mut c_void,
    handle: *mut c_void,
    tx_attr: *mut TxAttr,
    rx_attr: *mut RxAttr,
    ep_attr: *mut EpAttr,
    domain_attr: *mut DomainAttr,
    fabric_attr: *mut FabricAttr,
    nic: *mut c_void,
}

/// `struct fid`, the head of every object.
#[repr(C)]
struct Fid {
    fclass: usize,
    context: *mut c_void,
    ops: *const FidOps,
}

#[repr(C)]
struct FidOps {
    size: usize,
    close: unsafe extern "C" fn(*mut Fid) -> c_int,
    bind: unsafe extern "C" fn(*mut Fid, *mut Fid, u64) -> c_int,
    control: unsafe extern "C" fn(*mut Fid, c_int, *mut c_void) -> c_int,
}

#[repr(C)]
struct FidFabric {
    fid: Fid,
    ops: *const FabricOps,
}

#[repr(C)]
struct FabricOps {
    size: usize,
    domain:
        unsafe extern "C" fn(*mut FidFabric, *mut Info, *mut *mut FidDomain, *mut c_void) -> c_int,
}

#[repr(C)]
struct FidDomain {
    fid: Fid,
    ops: *const DomainOps,
}

#[repr(C)]
struct AvAttr {
    kind: c_int,
    rx_ctx_bits: c_int,
    count: usize,
    ep_per_node: usize,
    name: *const c_char,
    map_addr: *mut c_void,
    flags: u64,
}

#[repr(C)]
struct CqAttr {
    size: usize,
    flags: u64,
    format: c_int,
    wait_obj: c_int,
    signaling_vector: c_int,
    wait_cond: c_int,
    wait_set: *mut c_void,
}

#[repr(C)]
struct DomainOps {
    size: usize,
    av_open:
        unsafe extern "C" fn(*mut FidDomain, *mut AvAttr, *mut *mut FidAv, *mut c_void) -> c_int,
    cq_open:
        unsafe extern "C" fn(*mut FidDomain, *mut CqAttr, *mut *mut FidCq, *mut c_void) -> c_int,
    endpoint:
        unsafe extern "C" fn(*mut FidDomain, *mut Info, *mut *mut FidEp, *mut c_void) -> c_int,
}

#[repr(C)]
struct FidAv {
    fid: Fid,
    ops: *const AvOps,
}

#[repr(C)]
struct AvOps {
    size: usize,
    insert: unsafe extern "C" fn(
        *mut FidAv,
        *const c_void,
        usize,
        *mut Addr,
        u64,
        *mut c_void,
    ) -> c_int,
}

#[repr(C)]
struct FidCq {
    fid: Fid,
    ops: *const CqOps,
}

#[repr(C)]
struct CqOps {
    size: usize,
    read: unsafe extern "C" fn(*mut FidCq, *mut c_void, usize) -> isize,
    readfrom: usize,
    readerr: unsafe extern "C" fn(*mut FidCq, *mut CqErr, u64) -> isize,
    sread: usize,
    sreadfrom: usize,
    signal: usize,
    strerror:
        unsafe extern "C" fn(*mut FidCq, c_int, *const c_void, *mut c_char, usize) -> *const c_char,
}

/// `struct fi_cq_err_entry`.
#[repr(C)]
struct CqErr {
    op_context: *mut c_void,
    flags: u64,
    len: usize,
    buf: *mut c_void,
    data: u64,
    tag: u64,
    olen: usize,
    err: c_int,
    prov_errno: c_int,
    err_data: *mut c_void,
    err_data_size: usize,
}

#[repr(C)]
struct EpOps {
    size: usize,
    cancel: unsafe extern "C" fn(*mut Fid, *mut c_void) -> isize,
}

#[repr(C)]
struct FidEp {
    fid: Fid,
    ops: *const EpOps,
    cm: *const CmOps,
    msg: *const MsgOps,
    rma: *const c_void,
    tagged: *const TaggedOps,
}

#[repr(C)]
struct CmOps {
    size: usize,
    setname: usize,
    getname: unsafe extern "C" fn(*mut Fid, *mut c_void, *mut usize) -> c_int,
}

#[repr(C)]
struct MsgOps {
    size: usize,
    recv: unsafe extern "C" fn(
        *mut FidEp,
        *mut c_void,
        usize,
        *mut c_void,
        Addr,
        *mut c_void,
    ) -> isize,
    recvv: usize,
    recvmsg: usize,
    send: unsafe extern "C" fn(
        *mut FidEp,
        *const c_void,
        usize,
        *mut c_void,
        Addr,
        *mut c_void,
    ) -> isize,
    sendv: usize,
    sendmsg: usize,
    inject: unsafe extern "C" fn(*mut FidEp, *const c_void, usize, Addr) -> isize,
}

type TRecvFn = unsafe extern "C" fn(
    *mut FidEp,
    *mut c_void,
    usize,
    *mut c_void,
    Addr,
    u64,
    u64,
    *mut c_void,
) -> isize;
type TSendFn = unsafe extern "C" fn(
    *mut FidEp,
    *const c_void,
    usize,
    *mut c_void,
    Addr,
    u64,
    *mut c_void,
) -> isize;

#[repr(C)]
struct TaggedOps {
    size: usize,
    recv: TRecvFn,
    recvv: usize,
    recvmsg: usize,
    send: TSendFn,
}

/// One completion (`struct fi_cq_tagged_entry`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct Completion {
    /// The context the operation was posted with.
    pub(crate) context: *mut c_void,
    flags: u64,
    /// Bytes received (receives).
    pub(crate) len: usize,
    buf: *mut c_void,
    data: u64,
    tag: u64,
}

impl Completion {
    pub(crate) const EMPTY: Completion = Completion {
        context: std::ptr::null_mut(),
        flags: 0,
        len: 0,
        buf: std::ptr::null_mut(),
        data: 0,
        tag: 0,
    };
}

type GetinfoFn = unsafe extern "C" fn(
    u32,
    *const c_char,
    *const c_char,
    u64,
    *const Info,
    *mut *mut Info,
) -> c_int;
type FreeinfoFn = unsafe extern "C" fn(*mut Info);
type DupinfoFn = unsafe extern "C" fn(*const Info) -> *mut Info;
type FabricFn = unsafe extern "C" fn(*mut FabricAttr, *mut *mut FidFabric, *mut c_void) -> c_int;
type StrerrorFn = unsafe extern "C" fn(c_int) -> *const c_char;

/// The library's exported entry points.
struct Calls {
    getinfo: GetinfoFn,
    freeinfo: FreeinfoFn,
    dupinfo: DupinfoFn,
    fabric: FabricFn,
    strerror: StrerrorFn,
}

static CALLS: std::sync::OnceLock<Result<Calls, String>> = std::sync::OnceLock::new();

fn calls() -> Result<&'static Calls, String> {
    CALLS.get_or_init(load).as_ref().map_err(Clone::clone)
}

fn load() -> Result<Calls, String> {
    // SAFETY: dlopen takes a NUL-terminated name; the handle is never closed (providers'
    // threads run its code for the process's life).
    let lib = unsafe { libc::dlopen(c"libfabric.so.1".as_ptr(), libc::RTLD_NOW) };
    if lib.is_null() {
        return Err(format!(
            "cannot load libfabric.so.1 (Debian's libfabric1): {}",
            super::pmix::last_dl_error()
        ));
    }
    let sym = |n: &CStr| -> Result<*mut c_void, String> {
        // SAFETY: lib is a live handle; n is NUL-terminated.
        let p = unsafe { libc::dlsym(lib, n.as_ptr()) };
        if p.is_null() {
            Err(format!("libfabric.so.1 lacks {}", n.to_string_lossy()))
        } else {
            Ok(p)
        }
    };
    // SAFETY: for each transmute, the symbol is the libfabric 1.x function of that name, whose
    // C signature the type alias spells out.
    unsafe {
        Ok(Calls {
            getinfo: std::mem::transmute::<*mut c_void, GetinfoFn>(sym(c"fi_getinfo")?),
            freeinfo: std::mem::transmute::<*mut c_void, FreeinfoFn>(sym(c"fi_freeinfo")?),
            dupinfo: std::mem::transmute::<*mut c_void, DupinfoFn>(sym(c"fi_dupinfo")?),
            fabric: std::mem::transmute::<*mut c_void, FabricFn>(sym(c"fi_fabric")?),
            strerror: std::mem::transmute::<*mut c_void, StrerrorFn>(sym(c"fi_strerror")?),
        })
    }
}

fn error_text(c: &Calls, code: isize) -> String {
    // SAFETY: fi_strerror returns a static NUL-terminated string for any code.
    let s = unsafe { (c.strerror)(code.unsigned_abs() as c_int) };
    if s.is_null() {
        format!("error {code}")
    } else {
        // SAFETY: non-null, static, NUL-terminated.
        let t = unsafe { CStr::from_ptr(s) }.to_string_lossy();
        format!("{t} ({code})")
    }
}

/// The sizes `ofi_rxm` is told unless the user set them: buffers that hold a whole frame of
/// the layers above (64 KiB of payload and its headers), so that such a frame goes in one
/// message, not in segments or by rxm's own rendezvous (measured between two namespace
/// hosts: a 64 KiB ping-pong from 78 to 48 us, 16 KiB from 47 to 22 us).
const RXM_TUNING: [(&str, &str); 2] = [
    ("FI_OFI_RXM_BUFFER_SIZE", "73728"),
    ("FI_OFI_RXM_EAGER_LIMIT", "69632"),
];

/// Set [`RXM_TUNING`] where the environment does not say otherwise, before libfabric reads it
/// (its providers read their variables when first asked for, at the first `fi_getinfo`).
pub(crate) fn tune_rxm() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        for (k, v) in RXM_TUNING {
            if std::env::var_os(k).is_none() {
                // Called once, from init, before the launcher's library (PMIx, whose
                // progress thread reads the environment) or libfabric is loaded; MPI_Init
                // comes before the program starts threads of its own.
                std::env::set_var(k, v);
            }
        }
    });
}

/// What posting an operation gave.
#[derive(Debug)]
pub(crate) enum Posted {
    Yes,
    /// No room now (`-FI_EAGAIN`): reap completions and try again.
    Again,
    Failed(String),
}

/// An open endpoint with its fabric, domain, address vector and completion queue.
pub(crate) struct Endpoint {
    calls: &'static Calls,
    ep: *mut FidEp,
    av: *mut FidAv,
    cq: *mut FidCq,
    domain: *mut FidDomain,
    fabric: *mut FidFabric,
    info: *mut Info,
    name: Vec<u8>,
    /// The largest message `inject` takes.
    pub(crate) inject_size: usize,
    /// The provider, as libfabric names it.
    pub(crate) provider: String,
    /// The network the endpoint is on (its fabric's name).
    pub(crate) network: String,
}

// SAFETY: the endpoint's objects are used by one thread at a time (FI_THREAD_DOMAIN: the
// owner is `&mut`/`RefCell`-guarded), and may move between threads.
unsafe impl Send for Endpoint {}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("provider", &self.provider)
            .field("network", &self.network)
            .finish()
    }
}

fn text(p: *const c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        // SAFETY: libfabric's names are NUL-terminated strings owned by the info list.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

impl Endpoint {
    /// Open an endpoint on the first network the provider offers that is not the loopback
    /// (the loopback when it is all there is).
    pub(crate) fn open() -> Result<Endpoint, String> {
        tune_rxm();
        let c = calls()?;
        // SAFETY: fi_dupinfo(NULL) allocates a zeroed fi_info with its attribute structures
        // (fi_allocinfo); we write fields of those structures, as fi_getinfo's hints.
        let hints = unsafe { (c.dupinfo)(std::ptr::null()) };
        if hints.is_null() {
            return Err("fi_allocinfo failed".into());
        }
        // SAFETY: hints and its attribute pointers are valid (allocated above); prov_name
        // must be malloc'ed, since fi_freeinfo frees it.
        unsafe {
            let h = &mut *hints;
            h.caps = FI_MSG | FI_TAGGED | FI_SEND | FI_RECV;
            h.mode = FI_CONTEXT | FI_CONTEXT2;
            h.addr_format = FI_SOCKADDR_IN;
            (*h.ep_attr).kind = FI_EP_RDM;
            (*h.domain_attr).threading = FI_THREAD_DOMAIN;
            // The rank polls its completion queue whenever it waits: no provider thread
            // needs to compete with the ranks for the cores.
            (*h.domain_attr).data_progress = FI_PROGRESS_MANUAL;
            (*h.domain_attr).control_progress = FI_PROGRESS_MANUAL;
            (*h.domain_attr).av_type = FI_AV_TABLE;
            (*h.tx_attr).msg_order = FI_ORDER_SAS;
            (*h.rx_attr).msg_order = FI_ORDER_SAS;
            if std::env::var_os("FI_PROVIDER").is_none() {
                (*h.fabric_attr).prov_name = libc::strdup(c"tcp;ofi_rxm".as_ptr());
            }
        }
        let mut list: *mut Info = std::ptr::null_mut();
        // SAFETY: hints is a valid fi_info; list receives a list the library allocates.
        let rc = unsafe {
            (c.getinfo)(
                API_VERSION,
                std::ptr::null(),
                std::ptr::null(),
                0,
                hints,
                &mut list,
            )
        };
        // SAFETY: hints came from fi_dupinfo and is not used again.
        unsafe { (c.freeinfo)(hints) };
        if rc != 0 || list.is_null() {
            return Err(format!(
                "no libfabric provider offers ordered reliable messages ({}): {}",
                std::env::var("FI_PROVIDER").unwrap_or_else(|_| "tcp;ofi_rxm".into()),
                error_text(c, rc as isize)
            ));
        }
        // Pick the first entry not on the loopback.
        let mut pick = list;
        let mut p = list;
        while !p.is_null() {
            // SAFETY: p is an entry of the list fi_getinfo returned.
            let fab = unsafe { text((*(*p).fabric_attr).name) };
            if !fab.starts_with("127.") && fab != "::1/128" {
                pick = p;
                break;
            }
            // SAFETY: as above.
            p = unsafe { (*p).next };
        }
        // SAFETY: pick is an entry of the list; duplicate it alone so the list can go.
        let info = unsafe { (c.dupinfo)(pick) };
        // SAFETY: list came from fi_getinfo and is not used again.
        unsafe { (c.freeinfo)(list) };
        if info.is_null() {
            return Err("fi_dupinfo failed".into());
        }
        let mut e = Endpoint {
            calls: c,
            ep: std::ptr::null_mut(),
            av: std::ptr::null_mut(),
            cq: std::ptr::null_mut(),
            domain: std::ptr::null_mut(),
            fabric: std::ptr::null_mut(),
            info,
            name: Vec::new(),
            inject_size: 0,
            provider: String::new(),
            network: String::new(),
        };
        e.build()?;
        Ok(e)
    }

    /// Open the objects of `self.info` in turn; what was opened is closed by `Drop`.
    fn build(&mut self) -> Result<(), String> {
        let c = self.calls;
        let check = |rc: c_int, what: &str| -> Result<(), String> {
            if rc == 0 {
                Ok(())
            } else {
                Err(format!("{what} failed: {}", error_text(c, rc as isize)))
            }
        };
        // SAFETY: info is the fi_info picked in `open`, valid until Drop frees it; every
        // object pointer below is the one the previous call returned (checked for success),
        // and each call goes through that object's own operation table, laid out as the
        // module doc says.
        unsafe {
            let info = &*self.info;
            self.provider = text((*info.fabric_attr).prov_name);
            self.network = text((*info.fabric_attr).name);
            self.inject_size = (*info.tx_attr).inject_size;
            check(
                (c.fabric)(info.fabric_attr, &mut self.fabric, std::ptr::null_mut()),
                "fi_fabric",
            )?;
            let f = self.fabric;
            check(
                ((*(*f).ops).domain)(f, self.info, &mut self.domain, std::ptr::null_mut()),
                "fi_domain",
            )?;
            let d = self.domain;
            let mut cq_attr = CqAttr {
                size: 0,
                flags: 0,
                format: FI_CQ_FORMAT_TAGGED,
                wait_obj: FI_WAIT_NONE,
                signaling_vector: 0,
                wait_cond: 0,
                wait_set: std::ptr::null_mut(),
            };
            check(
                ((*(*d).ops).cq_open)(d, &mut cq_attr, &mut self.cq, std::ptr::null_mut()),
                "fi_cq_open",
            )?;
            let mut av_attr = AvAttr {
                kind: FI_AV_TABLE,
                rx_ctx_bits: 0,
                count: 0,
                ep_per_node: 0,
                name: std::ptr::null(),
                map_addr: std::ptr::null_mut(),
                flags: 0,
            };
            check(
                ((*(*d).ops).av_open)(d, &mut av_attr, &mut self.av, std::ptr::null_mut()),
                "fi_av_open",
            )?;
            check(
                ((*(*d).ops).endpoint)(d, self.info, &mut self.ep, std::ptr::null_mut()),
                "fi_endpoint",
            )?;
            let ep = self.ep;
            let bind = (*(*ep).fid.ops).bind;
            check(
                bind(&mut (*ep).fid, &mut (*self.cq).fid, FI_SEND | FI_RECV),
                "fi_ep_bind(cq)",
            )?;
            check(
                bind(&mut (*ep).fid, &mut (*self.av).fid, 0),
                "fi_ep_bind(av)",
            )?;
            check(
                ((*(*ep).fid.ops).control)(&mut (*ep).fid, FI_ENABLE, std::ptr::null_mut()),
                "fi_enable",
            )?;
            let mut name = vec![0u8; 256];
            let mut len = name.len();
            check(
                ((*(*ep).cm).getname)(&mut (*ep).fid, name.as_mut_ptr().cast(), &mut len),
                "fi_getname",
            )?;
            name.truncate(len);
            self.name = name;
        }
        Ok(())
    }

    /// This endpoint's address, for peers to [`insert`](Self::insert).
    pub(crate) fn name(&self) -> &[u8] {
        &self.name
    }

    /// Make a peer's address (its [`name`](Self::name)) reachable; its index.
    pub(crate) fn insert(&mut self, name: &[u8]) -> Result<Addr, String> {
        if name.len() != self.name.len() {
            return Err(format!(
                "a peer's address has {} bytes, this provider's have {}",
                name.len(),
                self.name.len()
            ));
        }
        let mut a: Addr = 0;
        // SAFETY: av is open; name holds one address of the provider's format (length
        // checked above); a receives its index.
        let n = unsafe {
            ((*(*self.av).ops).insert)(
                self.av,
                name.as_ptr().cast(),
                1,
                &mut a,
                0,
                std::ptr::null_mut(),
            )
        };
        if n != 1 {
            return Err(format!(
                "fi_av_insert failed: {}",
                error_text(self.calls, n as isize)
            ));
        }
        Ok(a)
    }

    fn posted(&self, rc: isize, what: &str) -> Posted {
        match rc {
            0 => Posted::Yes,
            r if r == -FI_EAGAIN => Posted::Again,
            r => Posted::Failed(format!("{what} failed: {}", error_text(self.calls, r))),
        }
    }

    /// Send `msg` (at most [`inject_size`](Self::inject_size) bytes) to `dest`; the bytes are
    /// copied before this returns and no completion follows.
    pub(crate) fn inject(&self, msg: &[u8], dest: Addr) -> Posted {
        // SAFETY: ep is open; msg is readable for its length during the call, which copies it.
        let rc =
            unsafe { ((*(*self.ep).msg).inject)(self.ep, msg.as_ptr().cast(), msg.len(), dest) };
        self.posted(rc, "fi_inject")
    }

    /// Post a send of `len` bytes at `buf` to `dest`, untagged (`tag: None`) or tagged.
    ///
    /// # Safety
    /// `buf..buf+len` stays readable and unchanged, and `context` (which starts with
    /// [`CONTEXT_BYTES`] bytes the provider may use) stays valid and unmoved, until the
    /// completion naming `context` is read.
    pub(crate) unsafe fn send(
        &self,
        buf: *const u8,
        len: usize,
        dest: Addr,
        tag: Option<u64>,
        context: *mut c_void,
    ) -> Posted {
        let desc = std::ptr::null_mut();
        // SAFETY: ep is open; the caller keeps buf and context as the contract says.
        let rc = unsafe {
            match tag {
                None => ((*(*self.ep).msg).send)(self.ep, buf.cast(), len, desc, dest, context),
                Some(t) => {
                    ((*(*self.ep).tagged).send)(self.ep, buf.cast(), len, desc, dest, t, context)
                }
            }
        };
        self.posted(rc, "fi_send")
    }

    /// Post a receive of at most `len` bytes into `buf`: any untagged message (`tag: None`),
    /// or the tagged one with `tag` from `src`.
    ///
    /// # Safety
    /// `buf..buf+len` stays writable and otherwise unused, and `context` as for
    /// [`send`](Self::send), until the completion naming `context` is read.
    pub(crate) unsafe fn recv(
        &self,
        buf: *mut u8,
        len: usize,
        src: Addr,
        tag: Option<u64>,
        context: *mut c_void,
    ) -> Posted {
        let desc = std::ptr::null_mut();
        // SAFETY: ep is open; the caller keeps buf and context as the contract says.
        let rc = unsafe {
            match tag {
                None => ((*(*self.ep).msg).recv)(self.ep, buf.cast(), len, desc, u64::MAX, context),
                Some(t) => {
                    ((*(*self.ep).tagged).recv)(self.ep, buf.cast(), len, desc, src, t, 0, context)
                }
            }
        };
        self.posted(rc, "fi_recv")
    }

    /// Ask the provider to cancel the receive posted with `context`. Its completion still
    /// comes (an error entry when it was cancelled): until it is read, the receive's buffer
    /// and context stay the provider's.
    pub(crate) fn cancel(&self, context: *mut c_void) {
        // SAFETY: ep is open; cancelling takes only the context as a key and touches no
        // memory of ours.
        unsafe { ((*(*self.ep).ops).cancel)(&mut (*self.ep).fid, context) };
    }

    /// Completions into `out`: how many; `Err` with the failed operation's context and the
    /// provider's words when one failed.
    pub(crate) fn poll(&self, out: &mut [Completion]) -> Result<usize, (*mut c_void, String)> {
        // SAFETY: cq is open and of FI_CQ_FORMAT_TAGGED, whose entries `Completion` lays out;
        // out has room for out.len() of them.
        let n = unsafe { ((*(*self.cq).ops).read)(self.cq, out.as_mut_ptr().cast(), out.len()) };
        if n >= 0 {
            return Ok(n as usize);
        }
        if n == -FI_EAGAIN {
            return Ok(0);
        }
        if n != -FI_EAVAIL {
            return Err((std::ptr::null_mut(), error_text(self.calls, n)));
        }
        // SAFETY: CqErr is zeroable plain data; cq is open.
        let mut e: CqErr = unsafe { std::mem::zeroed() };
        // SAFETY: as above; e receives the error entry.
        let r = unsafe { ((*(*self.cq).ops).readerr)(self.cq, &mut e, 0) };
        if r < 0 {
            return Err((std::ptr::null_mut(), error_text(self.calls, r)));
        }
        let mut buf = [0 as c_char; 256];
        // SAFETY: cq is open; the entry's error data is valid until the next read; buf has
        // room for its length.
        let prov = unsafe {
            ((*(*self.cq).ops).strerror)(
                self.cq,
                e.prov_errno,
                e.err_data,
                buf.as_mut_ptr(),
                buf.len(),
            )
        };
        Err((
            e.op_context,
            format!(
                "{} ({})",
                error_text(self.calls, e.err as isize),
                text(prov)
            ),
        ))
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        let close = |f: *mut Fid| {
            if !f.is_null() {
                // SAFETY: f is an object this endpoint opened and has not closed.
                unsafe { ((*(*f).ops).close)(f) };
            }
        };
        // SAFETY (casts): each object begins with its `struct fid`.
        close(self.ep.cast());
        close(self.av.cast());
        close(self.cq.cast());
        close(self.domain.cast());
        close(self.fabric.cast());
        // SAFETY: info came from fi_dupinfo and is freed once.
        unsafe { (self.calls.freeinfo)(self.info) };
    }
}
