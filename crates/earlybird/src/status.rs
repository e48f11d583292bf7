//! The status of a completed operation (MPI_Status), and the rank and tag values it can
//! hold besides real ones: a base type, beside [`error`](crate::error), which carries a
//! status in the errors of receives.
#![forbid(unsafe_code)]
use crate::error::ErrorClass;

/// Wildcard source of a receive or probe (MPI_ANY_SOURCE).
pub const ANY_SOURCE: i32 = -1;
/// Wildcard tag of a receive or probe (MPI_ANY_TAG).
pub const ANY_TAG: i32 = -1;
/// The null process: sends to it and receives from it complete at once (MPI_PROC_NULL).
pub const PROC_NULL: i32 = -2;
/// The root argument of the root itself in a rooted collective on an intercommunicator
/// (MPI_ROOT); the other members of its group pass [`PROC_NULL`], the remote group the
/// root's rank.
pub const ROOT: i32 = -3;

/// What a completed receive (or probe) reports: MPI_Status.
///
/// # Standard section(s)
/// MPI 4.1 §3.2.5 (return status), §3.8 (cancel: `is_cancelled`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Status {
    pub(crate) source: i32,
    pub(crate) tag: i32,
    pub(crate) bytes: usize,
    pub(crate) cancelled: bool,
    pub(crate) error: ErrorClass,
}

impl Default for Status {
    fn default() -> Self {
        Status::empty()
    }
}

impl Status {
    /// The empty status (source ANY_SOURCE, tag ANY_TAG, count 0), as MPI defines it for
    /// null and inactive requests.
    pub const fn empty() -> Status {
        Status {
            source: ANY_SOURCE,
            tag: ANY_TAG,
            bytes: 0,
            cancelled: false,
            error: ErrorClass::Success,
        }
    }

    pub(crate) const fn proc_null() -> Status {
        Status {
            source: PROC_NULL,
            tag: ANY_TAG,
            bytes: 0,
            cancelled: false,
            error: ErrorClass::Success,
        }
    }

    /// Rank of the sender in the communicator (MPI_SOURCE).
    pub fn source(&self) -> i32 {
        self.source
    }

    /// Tag of the message (MPI_TAG).
    pub fn tag(&self) -> i32 {
        self.tag
    }

    /// Bytes received.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Whether the operation was cancelled (MPI_Test_cancelled).
    pub fn is_cancelled(&self) -> bool {
        self.cancelled
    }

    /// The error class of this operation (MPI_ERROR), `Success` when it succeeded.
    pub fn error(&self) -> ErrorClass {
        self.error
    }

    /// Set the source (MPI_SOURCE), for a generalized request's query function.
    pub fn set_source(&mut self, source: i32) {
        self.source = source;
    }

    /// Set the tag (MPI_TAG), for a generalized request's query function.
    pub fn set_tag(&mut self, tag: i32) {
        self.tag = tag;
    }

    /// MPI_Status_set_elements: say that `count` elements of `T` were transferred.
    pub fn set_elements<T>(&mut self, count: usize) {
        self.bytes = count * std::mem::size_of::<T>();
    }

    /// MPI_Status_set_cancelled: say whether the operation was cancelled.
    pub fn set_cancelled(&mut self, cancelled: bool) {
        self.cancelled = cancelled;
    }
}
