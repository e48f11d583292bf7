//! Error classes and the error type every fallible call returns.
//!
//! `ErrorClass` mirrors MPI's error classes with MPICH's numbering so the later C ABI maps it
//! one to one. An [`Error`] carries its class and a message that names the bad value; a
//! receive that truncated also carries the filled [`Status`](crate::Status).
//!
//! # Standard section(s)
//! MPI 4.1 §9.4 (error codes and classes), §9.3 (error handlers).
#![forbid(unsafe_code)]

use std::fmt;

/// MPI error classes (MPI 4.1 Table 9.2), numbered as MPICH numbers them.
#[non_exhaustive]
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    Success = 0,
    Buffer = 1,
    Count = 2,
    Type = 3,
    Tag = 4,
    Comm = 5,
    Rank = 6,
    Root = 7,
    Group = 8,
    Op = 9,
    Topology = 10,
    Dims = 11,
    Arg = 12,
    Unknown = 13,
    Truncate = 14,
    Other = 15,
    Intern = 16,
    InStatus = 17,
    Pending = 18,
    Request = 19,
    NoMem = 34,
    Info = 28,
    InfoKey = 29,
    InfoValue = 30,
    InfoNoKey = 31,
    Win = 45,
    Keyval = 48,
    RmaSync = 50,
    /// A rank of the job failed or the job was aborted (MPIX_ERR_PROC_FAILED in spirit).
    ProcFailed = 101,
}

impl ErrorClass {
    /// The MPI name of the class, as `MPI_ERR_RANK`.
    pub fn name(self) -> &'static str {
        match self {
            ErrorClass::Success => "MPI_SUCCESS",
            ErrorClass::Buffer => "MPI_ERR_BUFFER",
            ErrorClass::Count => "MPI_ERR_COUNT",
            ErrorClass::Type => "MPI_ERR_TYPE",
            ErrorClass::Tag => "MPI_ERR_TAG",
            ErrorClass::Comm => "MPI_ERR_COMM",
            ErrorClass::Rank => "MPI_ERR_RANK",
            ErrorClass::Root => "MPI_ERR_ROOT",
            ErrorClass::Group => "MPI_ERR_GROUP",
            ErrorClass::Op => "MPI_ERR_OP",
            ErrorClass::Topology => "MPI_ERR_TOPOLOGY",
            ErrorClass::Dims => "MPI_ERR_DIMS",
            ErrorClass::Arg => "MPI_ERR_ARG",
            ErrorClass::Unknown => "MPI_ERR_UNKNOWN",
            ErrorClass::Truncate => "MPI_ERR_TRUNCATE",
            ErrorClass::Other => "MPI_ERR_OTHER",
            ErrorClass::Intern => "MPI_ERR_INTERN",
            ErrorClass::InStatus => "MPI_ERR_IN_STATUS",
            ErrorClass::Pending => "MPI_ERR_PENDING",
            ErrorClass::Request => "MPI_ERR_REQUEST",
            ErrorClass::NoMem => "MPI_ERR_NO_MEM",
            ErrorClass::Info => "MPI_ERR_INFO",
            ErrorClass::InfoKey => "MPI_ERR_INFO_KEY",
            ErrorClass::InfoValue => "MPI_ERR_INFO_VALUE",
            ErrorClass::InfoNoKey => "MPI_ERR_INFO_NOKEY",
            ErrorClass::Win => "MPI_ERR_WIN",
            ErrorClass::Keyval => "MPI_ERR_KEYVAL",
            ErrorClass::RmaSync => "MPI_ERR_RMA_SYNC",
            ErrorClass::ProcFailed => "MPIX_ERR_PROC_FAILED",
        }
    }
}

impl fmt::Display for ErrorClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An MPI error: its class, a message naming the bad value, and for a truncated receive the
/// status that was filled in. One pointer wide, so results stay small on the fast path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error(Box<ErrorInner>);

#[derive(Clone, Debug, PartialEq, Eq)]
struct ErrorInner {
    class: ErrorClass,
    detail: String,
    status: Option<crate::Status>,
}

impl Error {
    #[cold]
    pub fn new(class: ErrorClass, detail: impl Into<String>) -> Error {
        Error(Box::new(ErrorInner {
            class,
            detail: detail.into(),
            status: None,
        }))
    }

    pub(crate) fn with_status(mut self, status: crate::Status) -> Error {
        self.0.status = Some(status);
        self
    }

    /// Rewrite the carried status, if any (rank translation).
    pub(crate) fn map_status(mut self, f: impl FnOnce(crate::Status) -> crate::Status) -> Error {
        self.0.status = self.0.status.map(f);
        self
    }

    /// The MPI error class.
    pub fn class(&self) -> ErrorClass {
        self.0.class
    }

    /// The message, which names the bad value.
    pub fn detail(&self) -> &str {
        &self.0.detail
    }

    /// For a receive that failed after matching (MPI_ERR_TRUNCATE), the status it filled.
    pub fn status(&self) -> Option<&crate::Status> {
        self.0.status.as_ref()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.0.class, self.0.detail)
    }
}

impl std::error::Error for Error {}

/// The result type of every fallible earlybird call.
pub type Result<T> = std::result::Result<T, Error>;
