//! The values of MPICH's ABI (MPICH 4.x `mpi.h`), as facts a binary compiled against it has
//! baked in: handle values of predefined objects, sentinels, special ranks, the status layout.
//! Only the values; the code that gives them meaning is the rest of this crate.

use earlybird::BasicType;

pub(crate) type Handle = i32;

/// Every constant of `api/mpi.api` that is an integer, a handle or an address, under its C
/// name (build.rs writes them).
#[allow(dead_code, clippy::unreadable_literal)]
pub(crate) mod c {
    include!(concat!(env!("OUT_DIR"), "/consts.rs"));
}

pub(crate) const MPI_SUCCESS: i32 = 0;

pub(crate) const COMM_WORLD: Handle = c::MPI_COMM_WORLD;
pub(crate) const COMM_SELF: Handle = c::MPI_COMM_SELF;
pub(crate) const COMM_NULL: Handle = c::MPI_COMM_NULL;
/// Communicators this library makes: this kind bit pattern plus an index.
pub(crate) const COMM_USER: Handle = 0x8400_0000_u32 as i32;

pub(crate) const WIN_NULL: Handle = c::MPI_WIN_NULL;
/// Windows: this pattern plus an index.
pub(crate) const WIN_USER: Handle = 0xa000_0000_u32 as i32;

pub(crate) const REQUEST_NULL: Handle = c::MPI_REQUEST_NULL;
/// Requests: this pattern plus an index.
pub(crate) const REQUEST_USER: Handle = 0xac00_0000_u32 as i32;
/// Requests that completed at their start (only their status is kept): this pattern plus an
/// index, `REQUEST_DONE_SPAN` of them apart from the others.
pub(crate) const REQUEST_DONE: Handle = 0xad00_0000_u32 as i32;
pub(crate) const REQUEST_DONE_SPAN: u32 = 0x0100_0000;

pub(crate) const DATATYPE_NULL: Handle = c::MPI_DATATYPE_NULL;
/// Datatypes this library makes: this pattern plus an index (apart from MPICH's predefined
/// 0x4c... and 0x8c... values).
pub(crate) const TYPE_USER: Handle = 0xcc00_0000_u32 as i32;

pub(crate) const GROUP_NULL: Handle = c::MPI_GROUP_NULL;
pub(crate) const GROUP_EMPTY: Handle = c::MPI_GROUP_EMPTY;
/// Groups this library makes: this pattern plus an index.
pub(crate) const GROUP_USER: Handle = 0x8800_0000_u32 as i32;

pub(crate) const KEYVAL_INVALID: i32 = c::MPI_KEYVAL_INVALID;
/// Attribute keys this library makes: this pattern plus an index.
pub(crate) const KEYVAL_USER: i32 = 0xa400_0000_u32 as i32;

pub(crate) const INFO_NULL: Handle = c::MPI_INFO_NULL;
pub(crate) const INFO_ENV: Handle = c::MPI_INFO_ENV;
/// Info objects this library makes: this pattern plus an index.
pub(crate) const INFO_USER: Handle = 0x9c00_0000_u32 as i32;
pub(crate) const MAX_OBJECT_NAME: usize = c::MPI_MAX_OBJECT_NAME as usize;

pub(crate) const SESSION_NULL: Handle = c::MPI_SESSION_NULL;
/// Sessions: this pattern plus an index.
pub(crate) const SESSION_USER: Handle = 0xb800_0000_u32 as i32;

pub(crate) const ERRHANDLER_NULL: Handle = c::MPI_ERRHANDLER_NULL;
/// Error handlers this library makes: this pattern plus an index.
pub(crate) const ERRHANDLER_USER: Handle = 0x9400_0000_u32 as i32;

pub(crate) const ERRORS_ARE_FATAL: Handle = c::MPI_ERRORS_ARE_FATAL;
pub(crate) const ERRORS_RETURN: Handle = c::MPI_ERRORS_RETURN;
pub(crate) const ERRORS_ABORT: Handle = c::MPI_ERRORS_ABORT;

pub(crate) const ANY_SOURCE: i32 = c::MPI_ANY_SOURCE;
pub(crate) const PROC_NULL: i32 = c::MPI_PROC_NULL;
pub(crate) const ROOT: i32 = c::MPI_ROOT;
pub(crate) const UNDEFINED: i32 = c::MPI_UNDEFINED;

/// The level of an MPI_THREAD_* value (a value above MPI_THREAD_MULTIPLE asks for it, one
/// below SINGLE for SINGLE).
pub(crate) fn thread_level(v: i32) -> earlybird::ThreadLevel {
    use earlybird::ThreadLevel::*;
    match v {
        c::MPI_THREAD_FUNNELED => Funneled,
        c::MPI_THREAD_SERIALIZED => Serialized,
        v if v >= c::MPI_THREAD_MULTIPLE => Multiple,
        _ => Single,
    }
}

/// The MPI_THREAD_* value of a level.
pub(crate) fn thread_level_code(l: earlybird::ThreadLevel) -> i32 {
    use earlybird::ThreadLevel::*;
    match l {
        Single => c::MPI_THREAD_SINGLE,
        Funneled => c::MPI_THREAD_FUNNELED,
        Serialized => c::MPI_THREAD_SERIALIZED,
        Multiple => c::MPI_THREAD_MULTIPLE,
    }
}

/// Predefined attribute keys (MPICH's values) and the values this library gives them.
pub(crate) const TAG_UB: i32 = c::MPI_TAG_UB;
pub(crate) const HOST: i32 = c::MPI_HOST;
pub(crate) const IO: i32 = c::MPI_IO;
pub(crate) const WTIME_IS_GLOBAL: i32 = c::MPI_WTIME_IS_GLOBAL;
pub(crate) static TAG_UB_VALUE: i32 = earlybird::TAG_UB;
pub(crate) static ZERO: i32 = 0;
pub(crate) static PROC_NULL_VALUE: i32 = PROC_NULL;

pub(crate) const MAX_PROCESSOR_NAME: usize = c::MPI_MAX_PROCESSOR_NAME as usize;
pub(crate) const MAX_ERROR_STRING: usize = c::MPI_MAX_ERROR_STRING as usize;
pub(crate) const MAX_LIBRARY_VERSION_STRING: usize = c::MPI_MAX_LIBRARY_VERSION_STRING as usize;

/// `MPI_STATUS_IGNORE` and `MPI_STATUSES_IGNORE`.
pub(crate) const STATUS_IGNORE: usize = c::MPI_STATUS_IGNORE;
/// `MPI_IN_PLACE`.
pub(crate) const IN_PLACE: usize = c::MPI_IN_PLACE;

/// MPICH's `MPI_Status`: the byte count split in two ints (the top bit of the second, shifted,
/// is "cancelled"), then source, tag, error.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct MpiStatus {
    pub count_lo: i32,
    pub count_hi_and_cancelled: i32,
    pub source: i32,
    pub tag: i32,
    pub error: i32,
}

impl MpiStatus {
    /// The byte count: 63 bits, the low 32 in `count_lo` and the rest above the cancelled
    /// bit (read unsigned: the count's bit 62 is the int's sign).
    pub(crate) fn bytes(&self) -> u64 {
        (self.count_lo as u32 as u64) | (((self.count_hi_and_cancelled as u32) >> 1) as u64) << 32
    }
}

/// The predefined datatype a handle names, if any.
pub(crate) fn basic_type(h: Handle) -> Option<BasicType> {
    use BasicType::*;
    Some(match h {
        c::MPI_CHAR => Char,
        c::MPI_SIGNED_CHAR => SignedChar,
        c::MPI_UNSIGNED_CHAR => UnsignedChar,
        c::MPI_BYTE => Byte,
        c::MPI_WCHAR => Wchar,
        c::MPI_SHORT => Short,
        c::MPI_UNSIGNED_SHORT => UnsignedShort,
        c::MPI_INT => Int,
        c::MPI_UNSIGNED => Unsigned,
        c::MPI_LONG => Long,
        c::MPI_UNSIGNED_LONG => UnsignedLong,
        c::MPI_FLOAT => Float,
        c::MPI_DOUBLE => Double,
        c::MPI_LONG_DOUBLE => LongDouble,
        c::MPI_LONG_LONG_INT => LongLong,
        c::MPI_UNSIGNED_LONG_LONG => UnsignedLongLong,
        c::MPI_PACKED => Packed,
        c::MPI_FLOAT_INT => FloatInt,
        c::MPI_DOUBLE_INT => DoubleInt,
        c::MPI_LONG_INT => LongInt,
        c::MPI_SHORT_INT => ShortInt,
        c::MPI_2INT => TwoInt,
        c::MPI_INT8_T => Int8,
        c::MPI_INT16_T => Int16,
        c::MPI_INT32_T => Int32,
        c::MPI_INT64_T => Int64,
        c::MPI_UINT8_T => Uint8,
        c::MPI_UINT16_T => Uint16,
        c::MPI_UINT32_T => Uint32,
        c::MPI_UINT64_T => Uint64,
        c::MPI_C_BOOL => CBool,
        c::MPI_C_FLOAT_COMPLEX => CFloatComplex,
        c::MPI_C_DOUBLE_COMPLEX => CDoubleComplex,
        c::MPI_C_LONG_DOUBLE_COMPLEX => CLongDoubleComplex,
        c::MPI_LONG_DOUBLE_INT => LongDoubleInt,
        c::MPI_AINT => Aint,
        c::MPI_OFFSET => Offset,
        c::MPI_COUNT => Count,
        c::MPIX_HANDLE_SYNC => HandleSync,
        // Fortran's and C++'s predefined types, as the C type that holds each (a C program
        // passes them for data it shares with Fortran or C++; see `alias_name`).
        c::MPI_INTEGER | c::MPI_LOGICAL | c::MPI_INTEGER4 => Int,
        c::MPI_REAL | c::MPI_REAL4 => Float,
        c::MPI_DOUBLE_PRECISION | c::MPI_REAL8 => Double,
        c::MPI_CHARACTER => Char,
        c::MPI_COMPLEX | c::MPI_COMPLEX8 | c::MPI_CXX_FLOAT_COMPLEX => CFloatComplex,
        c::MPI_DOUBLE_COMPLEX | c::MPI_COMPLEX16 | c::MPI_CXX_DOUBLE_COMPLEX => CDoubleComplex,
        c::MPI_CXX_LONG_DOUBLE_COMPLEX => CLongDoubleComplex,
        c::MPI_CXX_BOOL => CBool,
        c::MPI_2INTEGER => TwoInt,
        c::MPI_INTEGER1 => Int8,
        c::MPI_INTEGER2 => Int16,
        c::MPI_INTEGER8 => Int64,
        _ => return None,
    })
}

/// The name of a predefined datatype whose handle is not its C type's own (`basic_type`
/// maps it to that type): Fortran's and C++'s; and MPI_C_FLOAT_COMPLEX and MPI_LONG_LONG,
/// which MPICH names by their synonyms MPI_C_COMPLEX and MPI_LONG_LONG_INT. A datatype made
/// from one of them (a vector of MPI_INTEGER) is described by decoders with the C type's
/// handle.
pub(crate) fn alias_name(h: Handle) -> Option<&'static str> {
    Some(match h {
        c::MPI_INTEGER => "MPI_INTEGER",
        c::MPI_LOGICAL => "MPI_LOGICAL",
        c::MPI_INTEGER4 => "MPI_INTEGER4",
        c::MPI_REAL => "MPI_REAL",
        c::MPI_REAL4 => "MPI_REAL4",
        c::MPI_DOUBLE_PRECISION => "MPI_DOUBLE_PRECISION",
        c::MPI_REAL8 => "MPI_REAL8",
        c::MPI_CHARACTER => "MPI_CHARACTER",
        c::MPI_COMPLEX => "MPI_COMPLEX",
        c::MPI_COMPLEX8 => "MPI_COMPLEX8",
        c::MPI_CXX_FLOAT_COMPLEX => "MPI_CXX_FLOAT_COMPLEX",
        c::MPI_DOUBLE_COMPLEX => "MPI_DOUBLE_COMPLEX",
        c::MPI_COMPLEX16 => "MPI_COMPLEX16",
        c::MPI_CXX_DOUBLE_COMPLEX => "MPI_CXX_DOUBLE_COMPLEX",
        c::MPI_CXX_LONG_DOUBLE_COMPLEX => "MPI_CXX_LONG_DOUBLE_COMPLEX",
        c::MPI_CXX_BOOL => "MPI_CXX_BOOL",
        c::MPI_2INTEGER => "MPI_2INTEGER",
        c::MPI_INTEGER1 => "MPI_INTEGER1",
        c::MPI_INTEGER2 => "MPI_INTEGER2",
        c::MPI_INTEGER8 => "MPI_INTEGER8",
        c::MPI_C_FLOAT_COMPLEX => "MPI_C_COMPLEX",
        c::MPI_LONG_LONG_INT => "MPI_LONG_LONG_INT",
        _ => return None,
    })
}

/// The predefined operation a handle names (MPI_MAX = 0x58000001 ... MPI_NO_OP = 0x5800000e).
pub(crate) fn op(h: Handle) -> Option<earlybird::Op> {
    use earlybird::Op;
    Some(match h {
        c::MPI_MAX => Op::MAX,
        c::MPI_MIN => Op::MIN,
        c::MPI_SUM => Op::SUM,
        c::MPI_PROD => Op::PROD,
        c::MPI_LAND => Op::LAND,
        c::MPI_BAND => Op::BAND,
        c::MPI_LOR => Op::LOR,
        c::MPI_BOR => Op::BOR,
        c::MPI_LXOR => Op::LXOR,
        c::MPI_BXOR => Op::BXOR,
        c::MPI_MINLOC => Op::MINLOC,
        c::MPI_MAXLOC => Op::MAXLOC,
        c::MPI_REPLACE => Op::REPLACE,
        c::MPI_NO_OP => Op::NO_OP,
        _ => return None,
    })
}

/// The handle of a predefined datatype (the inverse of [`basic_type`]).
pub(crate) fn basic_handle(b: BasicType) -> Option<Handle> {
    const ALL: [Handle; 39] = [
        c::MPI_CHAR,
        c::MPI_SIGNED_CHAR,
        c::MPI_UNSIGNED_CHAR,
        c::MPI_BYTE,
        c::MPI_WCHAR,
        c::MPI_SHORT,
        c::MPI_UNSIGNED_SHORT,
        c::MPI_INT,
        c::MPI_UNSIGNED,
        c::MPI_LONG,
        c::MPI_UNSIGNED_LONG,
        c::MPI_FLOAT,
        c::MPI_DOUBLE,
        c::MPI_LONG_DOUBLE,
        c::MPI_LONG_LONG_INT,
        c::MPI_UNSIGNED_LONG_LONG,
        c::MPI_PACKED,
        c::MPI_FLOAT_INT,
        c::MPI_DOUBLE_INT,
        c::MPI_LONG_INT,
        c::MPI_SHORT_INT,
        c::MPI_2INT,
        c::MPI_INT8_T,
        c::MPI_INT16_T,
        c::MPI_INT32_T,
        c::MPI_INT64_T,
        c::MPI_UINT8_T,
        c::MPI_UINT16_T,
        c::MPI_UINT32_T,
        c::MPI_UINT64_T,
        c::MPI_C_BOOL,
        c::MPI_C_FLOAT_COMPLEX,
        c::MPI_C_DOUBLE_COMPLEX,
        c::MPI_C_LONG_DOUBLE_COMPLEX,
        c::MPI_LONG_DOUBLE_INT,
        c::MPI_AINT,
        c::MPI_OFFSET,
        c::MPI_COUNT,
        c::MPIX_HANDLE_SYNC,
    ];
    ALL.iter().copied().find(|&h| basic_type(h) == Some(b))
}

/// Messages MPI_Mprobe matched: this pattern plus an index.
pub(crate) const MESSAGE_USER: Handle = 0xec00_0000_u32 as i32;

/// Operations this library makes: this pattern plus an index.
pub(crate) const OP_USER: Handle = 0x9800_0000_u32 as i32;
pub(crate) const OP_NULL: Handle = c::MPI_OP_NULL;

/// A rank argument (source or destination) in earlybird's numbering.
pub(crate) fn rank_in(r: i32) -> i32 {
    match r {
        ANY_SOURCE => earlybird::ANY_SOURCE,
        PROC_NULL => earlybird::PROC_NULL,
        ROOT => earlybird::ROOT,
        r => r,
    }
}

/// A rank earlybird reports (a status's source) in the ABI's numbering.
pub(crate) fn rank_out(r: i32) -> i32 {
    if r == earlybird::PROC_NULL {
        PROC_NULL
    } else if r == earlybird::ANY_SOURCE {
        ANY_SOURCE
    } else {
        r
    }
}
