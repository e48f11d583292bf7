//! Error classes, error codes and the error type every fallible call returns.
//!
//! `ErrorClass` mirrors MPI's error classes with MPICH's numbering so the later C ABI maps it
//! one to one; classes a program (or an extension) adds at run time are
//! [`ErrorClass::User`]. An [`Error`] carries its class, its error code (the class number, or
//! a code made by [`add_error_code`]) and a message that names the bad value; a receive that
//! truncated also carries the filled [`Status`](crate::status::Status).
//!
//! # User error classes, codes and strings
//!
//! [`add_error_class`], [`add_error_code`] and [`add_error_string`] (and their `remove_*`
//! counterparts, MPI 4.1) keep a registry **per rank**: it belongs to the thread that runs
//! the rank, which is the process's main thread in a process job and the rank's own thread in
//! a thread job. Numbers are handed out from `ERR_LASTCODE + 1` upwards, classes and codes from
//! one sequence, and are never reused after a removal; so ranks that add classes and codes in
//! the same order get the same numbers (MPI only promises local values). These calls are local
//! and have no communicator, so they return their errors (`MPI_ERR_ARG`) without calling an
//! error handler, as group and info calls do.
//!
//! # Standard section(s)
//! MPI 4.1 §9.4 (error codes and classes), §9.5 (error classes, error codes and error
//! handlers added by the program), §9.3 (error handlers).
#![forbid(unsafe_code)]

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt;

/// MPI_ERR_LASTCODE: the last error code of a predefined class (MPICH's value). Classes and
/// codes added by the program are numbered above it.
pub const ERR_LASTCODE: i32 = 0x3fff_ffff;

/// MPI_MAX_ERROR_STRING (MPICH's value): an error string holds at most this many bytes,
/// counting the terminating NUL of the C binding, so [`add_error_string`] takes at most
/// `MAX_ERROR_STRING - 1` bytes.
pub const MAX_ERROR_STRING: usize = 512;

/// Defines [`ErrorClass`] from one list: variant, MPICH number, MPI name, meaning.
macro_rules! error_classes {
    ($($(#[$m:meta])* $v:ident = $n:literal, $name:literal, $what:literal;)*) => {
        /// MPI error classes (MPI 4.1 Table 9.2), numbered as MPICH numbers them, plus the
        /// classes a program adds with [`add_error_class`] ([`ErrorClass::User`]).
        ///
        /// [`ErrorClass::code`] gives the number (`as i32` does not, because of `User`).
        #[non_exhaustive]
        #[repr(i32)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum ErrorClass {
            $($(#[$m])* $v = $n,)*
            /// A class added by the program ([`add_error_class`]), numbered above
            /// [`ERR_LASTCODE`].
            User(UserClass),
        }

        impl ErrorClass {
            /// The class number: MPICH's for a predefined class, above [`ERR_LASTCODE`] for
            /// one the program added.
            pub const fn code(self) -> i32 {
                match self {
                    $(ErrorClass::$v => $n,)*
                    ErrorClass::User(u) => u.0,
                }
            }

            /// The MPI name of the class, as `MPI_ERR_RANK` (`"user error class"` for a class
            /// the program added; its string is [`error_string`]).
            pub const fn name(self) -> &'static str {
                match self {
                    $(ErrorClass::$v => $name,)*
                    ErrorClass::User(_) => "user error class",
                }
            }

            /// What a predefined class means, in a few words (empty for an added class).
            const fn meaning(self) -> &'static str {
                match self {
                    $(ErrorClass::$v => $what,)*
                    ErrorClass::User(_) => "",
                }
            }
        }

        /// Every predefined class, in numbering order of the list.
        const PREDEFINED: &[ErrorClass] = &[$(ErrorClass::$v,)*];
    };
}

error_classes! {
    Success = 0, "MPI_SUCCESS", "no error";
    Buffer = 1, "MPI_ERR_BUFFER", "invalid buffer";
    Count = 2, "MPI_ERR_COUNT", "invalid count argument";
    Type = 3, "MPI_ERR_TYPE", "invalid datatype";
    Tag = 4, "MPI_ERR_TAG", "invalid tag";
    Comm = 5, "MPI_ERR_COMM", "invalid communicator";
    Rank = 6, "MPI_ERR_RANK", "invalid rank";
    Root = 7, "MPI_ERR_ROOT", "invalid root";
    Group = 8, "MPI_ERR_GROUP", "invalid group";
    Op = 9, "MPI_ERR_OP", "invalid reduction operation";
    Topology = 10, "MPI_ERR_TOPOLOGY", "invalid topology";
    Dims = 11, "MPI_ERR_DIMS", "invalid dimension argument";
    Arg = 12, "MPI_ERR_ARG", "invalid argument";
    Unknown = 13, "MPI_ERR_UNKNOWN", "unknown error";
    Truncate = 14, "MPI_ERR_TRUNCATE", "message truncated on receive";
    Other = 15, "MPI_ERR_OTHER", "other error (see the message)";
    Intern = 16, "MPI_ERR_INTERN", "internal error of the library";
    InStatus = 17, "MPI_ERR_IN_STATUS", "error code is in the status";
    Pending = 18, "MPI_ERR_PENDING", "request still pending";
    Request = 19, "MPI_ERR_REQUEST", "invalid request";
    Access = 20, "MPI_ERR_ACCESS", "permission denied";
    Amode = 21, "MPI_ERR_AMODE", "invalid file access mode";
    BadFile = 22, "MPI_ERR_BAD_FILE", "invalid file name";
    Conversion = 23, "MPI_ERR_CONVERSION", "data conversion failed";
    DupDatarep = 24, "MPI_ERR_DUP_DATAREP", "data representation already registered";
    FileExists = 25, "MPI_ERR_FILE_EXISTS", "file exists";
    FileInUse = 26, "MPI_ERR_FILE_IN_USE", "file in use";
    File = 27, "MPI_ERR_FILE", "invalid file handle";
    Info = 28, "MPI_ERR_INFO", "invalid info object";
    InfoKey = 29, "MPI_ERR_INFO_KEY", "invalid info key";
    InfoValue = 30, "MPI_ERR_INFO_VALUE", "invalid info value";
    InfoNoKey = 31, "MPI_ERR_INFO_NOKEY", "info key not defined";
    Io = 32, "MPI_ERR_IO", "input/output error";
    Name = 33, "MPI_ERR_NAME", "invalid service name";
    NoMem = 34, "MPI_ERR_NO_MEM", "out of memory";
    NotSame = 35, "MPI_ERR_NOT_SAME", "arguments differ between the processes of a collective call";
    NoSpace = 36, "MPI_ERR_NO_SPACE", "no space left";
    NoSuchFile = 37, "MPI_ERR_NO_SUCH_FILE", "no such file";
    Port = 38, "MPI_ERR_PORT", "invalid port name";
    Quota = 39, "MPI_ERR_QUOTA", "quota exceeded";
    ReadOnly = 40, "MPI_ERR_READ_ONLY", "read-only file or file system";
    Service = 41, "MPI_ERR_SERVICE", "invalid service";
    Spawn = 42, "MPI_ERR_SPAWN", "could not spawn processes";
    UnsupportedDatarep = 43, "MPI_ERR_UNSUPPORTED_DATAREP", "unsupported data representation";
    UnsupportedOperation = 44, "MPI_ERR_UNSUPPORTED_OPERATION", "unsupported operation";
    Win = 45, "MPI_ERR_WIN", "invalid window";
    Base = 46, "MPI_ERR_BASE", "invalid base address";
    Locktype = 47, "MPI_ERR_LOCKTYPE", "invalid lock type";
    Keyval = 48, "MPI_ERR_KEYVAL", "invalid attribute key";
    RmaConflict = 49, "MPI_ERR_RMA_CONFLICT", "conflicting accesses to a window";
    RmaSync = 50, "MPI_ERR_RMA_SYNC", "wrong synchronization of RMA calls";
    Size = 51, "MPI_ERR_SIZE", "invalid size";
    Disp = 52, "MPI_ERR_DISP", "invalid displacement";
    Assert = 53, "MPI_ERR_ASSERT", "invalid assertion";
    RmaRange = 55, "MPI_ERR_RMA_RANGE", "target memory outside the window";
    RmaAttach = 56, "MPI_ERR_RMA_ATTACH", "memory cannot be attached";
    RmaShared = 57, "MPI_ERR_RMA_SHARED", "memory cannot be shared";
    RmaFlavor = 58, "MPI_ERR_RMA_FLAVOR", "wrong window flavor";
    Session = 75, "MPI_ERR_SESSION", "invalid session";
    ProcAborted = 76, "MPI_ERR_PROC_ABORTED", "communication with an aborted process";
    ValueTooLarge = 77, "MPI_ERR_VALUE_TOO_LARGE", "value too large to store";
    /// New in MPI 4.1 (after Debian's MPICH 4.0.2; MPICH 4.1 numbers it 79).
    Errhandler = 79, "MPI_ERR_ERRHANDLER", "invalid error handler";
    /// A rank of the job failed or the job was aborted (MPIX_ERR_PROC_FAILED in spirit).
    ProcFailed = 101, "MPIX_ERR_PROC_FAILED", "a process of the job failed";
    /// A sync counter (seed 001) was driven below zero (MPI_ERR_WIN_COUNTER of the seed).
    WinCounter = 102, "MPIX_ERR_WIN_COUNTER", "sync counter driven below zero";
    /// Seed 004: the pmem root path does not exist or is not a directory.
    PmemRootPath = 103, "MPI_ERR_PMEM_ROOT_PATH", "Invalid root path";
    /// Seed 004: a persistent window's name is invalid or names no window.
    PmemName = 104, "MPI_ERR_PMEM_NAME", "Invalid persistent memory area name";
    /// Seed 004: no such checkpoint version, or it is damaged.
    PmemCkptVer = 105, "MPI_ERR_PMEM_CKPT_VER", "Invalid checkpoint version";
    /// Seed 004: an invalid pmem_mode.
    PmemMode = 106, "MPI_ERR_PMEM_MODE", "Invalid mode";
    /// Seed 004: an invalid windows list argument.
    PmemWindows = 107, "MPI_ERR_PMEM_WINDOWS", "Invalid windows argument";
    /// Seed 004: an invalid versions list argument.
    PmemVersions = 108, "MPI_ERR_PMEM_VERSIONS", "Invalid versions argument";
    /// Seed 004: another invalid argument of a pmem call.
    PmemArg = 109, "MPI_ERR_PMEM_ARG", "Invalid argument of some other kind";
    /// Seed 004: memory for a persistent window could not be had.
    PmemNoMem = 110, "MPI_ERR_PMEM_NO_MEM", "Unable to allocate memory";
    /// Seed 002: a program broke a promise it made with an assertion (at init, or with a
    /// communicator's `mpi_assert_*` info key).
    Assertion = 111, "MPIX_ERR_ASSERTION", "a call broke an assertion the program made";
    /// Seed 003: endpoints could not be created (MPI_ERR_ENDPOINTS of the seed).
    Endpoints = 112, "MPIX_ERR_ENDPOINTS", "endpoints could not be created";
}

/// The number of a class added with [`add_error_class`] (only the registry makes them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UserClass(i32);

impl ErrorClass {
    /// Every predefined class (MPI_SUCCESS included).
    pub fn predefined() -> impl Iterator<Item = ErrorClass> {
        PREDEFINED.iter().copied()
    }

    /// The predefined class numbered `code`, if any.
    fn predefined_by_code(code: i32) -> Option<ErrorClass> {
        PREDEFINED.iter().copied().find(|c| c.code() == code)
    }
}

impl fmt::Display for ErrorClass {
    /// The MPI name of a predefined class; for an added class its number and, if one was
    /// added, its string.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorClass::User(u) => {
                write!(f, "user error class {}", u.0)?;
                with_string(u.0, |s| write!(f, " ({s})"))
            }
            c => f.write_str(c.name()),
        }
    }
}

/// An error code made by [`add_error_code`]: its number and the class it belongs to. Build
/// errors of it with [`Error::with_code`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ErrorCode {
    code: i32,
    class: ErrorClass,
}

impl ErrorCode {
    /// The code's number (above [`ERR_LASTCODE`]).
    pub fn code(self) -> i32 {
        self.code
    }

    /// The class the code belongs to (what [`error_class`] says of it).
    pub fn class(self) -> ErrorClass {
        self.class
    }
}

/// An MPI error: its class, its error code, a message naming the bad value, and for a
/// truncated receive the status that was filled in. One pointer wide, so results stay small
/// on the fast path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error(Box<ErrorInner>);

#[derive(Clone, Debug, PartialEq, Eq)]
struct ErrorInner {
    class: ErrorClass,
    /// The error code: the class number, or a code added with [`add_error_code`].
    code: i32,
    detail: String,
    status: Option<crate::status::Status>,
}

impl Error {
    /// An error of `class` (its code is the class number).
    #[cold]
    pub fn new(class: ErrorClass, detail: impl Into<String>) -> Error {
        Error(Box::new(ErrorInner {
            class,
            code: class.code(),
            detail: detail.into(),
            status: None,
        }))
    }

    /// An error with a code made by [`add_error_code`]: [`code`](Self::code) is that code and
    /// [`class`](Self::class) its class, so that an error handler, [`error_class`] and
    /// [`error_string`] see both.
    #[cold]
    pub fn with_code(code: ErrorCode, detail: impl Into<String>) -> Error {
        Error(Box::new(ErrorInner {
            class: code.class,
            code: code.code,
            detail: detail.into(),
            status: None,
        }))
    }

    pub(crate) fn with_status(mut self, status: crate::status::Status) -> Error {
        self.0.status = Some(status);
        self
    }

    /// Rewrite the carried status, if any (rank translation).
    pub(crate) fn map_status(
        mut self,
        f: impl FnOnce(crate::status::Status) -> crate::status::Status,
    ) -> Error {
        self.0.status = self.0.status.map(f);
        self
    }

    /// The MPI error class.
    pub fn class(&self) -> ErrorClass {
        self.0.class
    }

    /// The MPI error code: the class number, or the code the error was made with
    /// ([`Error::with_code`]).
    pub fn code(&self) -> i32 {
        self.0.code
    }

    /// The message, which names the bad value.
    pub fn detail(&self) -> &str {
        &self.0.detail
    }

    /// For a receive that failed after matching (MPI_ERR_TRUNCATE), the status it filled.
    pub fn status(&self) -> Option<&crate::status::Status> {
        self.0.status.as_ref()
    }
}

impl fmt::Display for Error {
    /// `CLASS: detail`, with `, code N (string)` after the class for an added error code.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0.class)?;
        if self.0.code != self.0.class.code() {
            write!(f, ", code {}", self.0.code)?;
            with_string(self.0.code, |s| write!(f, " ({s})"))?;
        }
        write!(f, ": {}", self.0.detail)
    }
}

impl std::error::Error for Error {}

/// The result type of every fallible earlybird call.
pub type Result<T> = std::result::Result<T, Error>;

// ---- classes, codes and strings added by the program (MPI 4.1 §9.5) ------------------------

/// The calling rank's added classes, codes and strings.
struct Registry {
    /// The last number handed out (ERR_LASTCODE before the first).
    last: i32,
    /// Added classes still registered, with how many added codes each has.
    classes: BTreeMap<i32, usize>,
    /// Added codes still registered, with their class.
    codes: BTreeMap<i32, ErrorClass>,
    /// Strings of added classes and codes.
    strings: BTreeMap<i32, String>,
}

thread_local! {
    static REGISTRY: RefCell<Registry> = const {
        RefCell::new(Registry {
            last: ERR_LASTCODE,
            classes: BTreeMap::new(),
            codes: BTreeMap::new(),
            strings: BTreeMap::new(),
        })
    };
}

fn registry<T>(f: impl FnOnce(&mut Registry) -> T) -> T {
    REGISTRY.with(|r| f(&mut r.borrow_mut()))
}

/// Run `f` on the string added for `code`, if there is one (for Display).
fn with_string(code: i32, f: impl FnOnce(&str) -> fmt::Result) -> fmt::Result {
    let s = REGISTRY.with(|r| r.borrow().strings.get(&code).cloned());
    match s {
        Some(s) if !s.is_empty() => f(&s),
        _ => Ok(()),
    }
}

fn arg_error(detail: String) -> Error {
    Error::new(ErrorClass::Arg, detail)
}

impl Registry {
    fn next_number(&mut self, what: &str) -> Result<i32> {
        let n = self.last.checked_add(1).ok_or_else(|| {
            arg_error(format!(
                "{what}: every error number above MPI_ERR_LASTCODE ({ERR_LASTCODE}) has been used"
            ))
        })?;
        self.last = n;
        Ok(n)
    }

    fn class_of(&self, code: i32) -> Option<ErrorClass> {
        if code <= ERR_LASTCODE {
            return ErrorClass::predefined_by_code(code);
        }
        if self.classes.contains_key(&code) {
            return Some(ErrorClass::User(UserClass(code)));
        }
        self.codes.get(&code).copied()
    }
}

/// MPI_Add_error_class: a new error class of this rank, numbered above [`ERR_LASTCODE`].
/// Its string is empty until [`add_error_string`] sets one.
pub fn add_error_class() -> Result<ErrorClass> {
    registry(|r| {
        let n = r.next_number("add_error_class")?;
        r.classes.insert(n, 0);
        Ok(ErrorClass::User(UserClass(n)))
    })
}

/// MPI_Add_error_code: a new error code of `class` (a predefined class other than
/// MPI_SUCCESS, or one added with [`add_error_class`] and not removed). `MPI_ERR_ARG`
/// otherwise.
pub fn add_error_code(class: ErrorClass) -> Result<ErrorCode> {
    registry(|r| {
        match class {
            ErrorClass::Success => {
                return Err(arg_error(
                    "add_error_code: MPI_SUCCESS cannot have error codes".into(),
                ))
            }
            ErrorClass::User(u) if !r.classes.contains_key(&u.0) => {
                return Err(arg_error(format!(
                    "add_error_code: error class {} was not added by add_error_class, or was removed",
                    u.0
                )))
            }
            _ => {}
        }
        let n = r.next_number("add_error_code")?;
        if let ErrorClass::User(u) = class {
            *r.classes.get_mut(&u.0).expect("checked above") += 1;
        }
        r.codes.insert(n, class);
        Ok(ErrorCode { code: n, class })
    })
}

/// MPI_Add_error_string: set (or replace) the string of an added class or code. A number
/// not above [`ERR_LASTCODE`] (the predefined strings cannot change), one not added (or
/// removed), or a string of [`MAX_ERROR_STRING`] bytes or more is `MPI_ERR_ARG`.
pub fn add_error_string(code: i32, string: &str) -> Result<()> {
    if string.len() >= MAX_ERROR_STRING {
        return Err(arg_error(format!(
            "add_error_string: string of {} bytes for error code {code} is longer than MPI_MAX_ERROR_STRING - 1 ({})",
            string.len(),
            MAX_ERROR_STRING - 1
        )));
    }
    registry(|r| {
        added(r, code, "add_error_string")?;
        r.strings.insert(code, string.to_string());
        Ok(())
    })
}

/// `code` must be an added class or code still registered.
fn added(r: &Registry, code: i32, what: &str) -> Result<()> {
    if code <= ERR_LASTCODE {
        return Err(arg_error(format!(
            "{what}: error code {code} is predefined (not above MPI_ERR_LASTCODE, {ERR_LASTCODE})"
        )));
    }
    if !r.classes.contains_key(&code) && !r.codes.contains_key(&code) {
        return Err(arg_error(format!(
            "{what}: error code {code} was not added by add_error_class or add_error_code, or was removed"
        )));
    }
    Ok(())
}

/// MPI_Remove_error_class (MPI 4.1): remove a class added with [`add_error_class`]. Its
/// codes and its string must have been removed first (MPI 4.1 §9.5; `MPI_ERR_ARG`
/// otherwise). A predefined class, or one not added, is `MPI_ERR_ARG`.
pub fn remove_error_class(class: ErrorClass) -> Result<()> {
    let ErrorClass::User(u) = class else {
        return Err(arg_error(format!(
            "remove_error_class: {} is a predefined error class",
            class.name()
        )));
    };
    registry(|r| {
        match r.classes.get(&u.0) {
        None => Err(arg_error(format!(
            "remove_error_class: error class {} was not added by add_error_class, or was removed",
            u.0
        ))),
        Some(&n) if n > 0 => Err(arg_error(format!(
            "remove_error_class: error class {} still has {n} error code(s); remove them first",
            u.0
        ))),
        Some(_) if r.strings.contains_key(&u.0) => Err(arg_error(format!(
            "remove_error_class: error class {} still has its string; remove it first (remove_error_string)",
            u.0
        ))),
        Some(_) => {
            r.classes.remove(&u.0);
            Ok(())
        }
    }
    })
}

/// MPI_Remove_error_code (MPI 4.1): remove a code added with [`add_error_code`]. Its string
/// must have been removed first; a predefined code, or one not added, is `MPI_ERR_ARG`.
pub fn remove_error_code(code: i32) -> Result<()> {
    registry(|r| {
        let Some(&class) = r.codes.get(&code) else {
            return Err(arg_error(format!(
                "remove_error_code: {code} is not an error code added by add_error_code (or was removed)"
            )));
        };
        if r.strings.contains_key(&code) {
            return Err(arg_error(format!(
                "remove_error_code: error code {code} still has a string; remove it first with remove_error_string"
            )));
        }
        r.codes.remove(&code);
        if let ErrorClass::User(u) = class {
            if let Some(n) = r.classes.get_mut(&u.0) {
                *n -= 1;
            }
        }
        Ok(())
    })
}

/// MPI_Remove_error_string (MPI 4.1): remove the string of an added class or code. One that
/// has no string added, or a predefined one, is `MPI_ERR_ARG`.
pub fn remove_error_string(code: i32) -> Result<()> {
    registry(|r| {
        added(r, code, "remove_error_string")?;
        if r.strings.remove(&code).is_none() {
            return Err(arg_error(format!(
                "remove_error_string: error code {code} has no string"
            )));
        }
        Ok(())
    })
}

/// MPI_Error_class: the class of an error code (a predefined class is its own code). A
/// number that is neither predefined nor added on this rank is `MPI_ERR_ARG`.
pub fn error_class(code: i32) -> Result<ErrorClass> {
    registry(|r| r.class_of(code)).ok_or_else(|| {
        arg_error(format!(
            "error_class: {code} is not an error code or class (predefined or added on this rank)"
        ))
    })
}

/// MPI_Error_string: for a predefined class, its name and meaning (`"MPI_ERR_RANK: invalid
/// rank"`); for an added class or code, the string added for it, or the empty string. A
/// number that is neither is `MPI_ERR_ARG`.
pub fn error_string(code: i32) -> Result<String> {
    registry(|r| {
        if code <= ERR_LASTCODE {
            return r
                .class_of(code)
                .map(|c| format!("{}: {}", c.name(), c.meaning()));
        }
        r.class_of(code)
            .map(|_| r.strings.get(&code).cloned().unwrap_or_default())
    })
    .ok_or_else(|| {
        arg_error(format!(
            "error_string: {code} is not an error code or class (predefined or added on this rank)"
        ))
    })
}

/// The value of MPI_LASTUSEDCODE: the highest class or code added on this rank so far
/// ([`ERR_LASTCODE`] before any).
pub fn last_used_code() -> i32 {
    registry(|r| r.last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn predefined_numbers_are_mpich_and_unique() {
        assert_eq!(ErrorClass::Rank.code(), 6);
        assert_eq!(ErrorClass::NoMem.code(), 34);
        assert_eq!(ErrorClass::RmaSync.code(), 50);
        let mut seen = std::collections::HashSet::new();
        for c in ErrorClass::predefined() {
            assert!(seen.insert(c.code()), "{c} numbered twice");
            assert!(c.code() <= ERR_LASTCODE);
            assert_eq!(error_class(c.code()), Ok(c));
            assert!(error_string(c.code()).unwrap().starts_with(c.name()));
        }
    }

    #[test]
    fn added_classes_and_codes_round_trip() {
        let c = add_error_class().unwrap();
        let k = add_error_code(c).unwrap();
        assert!(c.code() > ERR_LASTCODE && k.code() > c.code());
        assert_eq!(last_used_code(), k.code());
        assert_eq!(error_class(k.code()), Ok(c));
        assert_eq!(error_string(k.code()).unwrap(), "");
        add_error_string(k.code(), "disk on fire").unwrap();
        let e = Error::with_code(k, "sector 7");
        assert_eq!((e.class(), e.code()), (c, k.code()));
        assert!(e.to_string().contains("disk on fire"), "{e}");
        assert_eq!(remove_error_class(c).unwrap_err().class(), ErrorClass::Arg);
        assert_eq!(
            remove_error_code(k.code()).unwrap_err().class(),
            ErrorClass::Arg
        );
        remove_error_string(k.code()).unwrap();
        remove_error_code(k.code()).unwrap();
        remove_error_class(c).unwrap();
        assert!(error_class(k.code()).is_err() && error_class(c.code()).is_err());
    }
}
