//! The values of MPICH's ABI (MPICH 4.x `mpi.h`), as facts a binary compiled against it has
//! baked in: handle values of predefined objects, sentinels, special ranks, the status layout.
//! Only the values; the code that gives them meaning is the rest of this crate.

use earlybird::BasicType;

pub(crate) type Handle = i32;

pub(crate) const MPI_SUCCESS: i32 = 0;

pub(crate) const COMM_WORLD: Handle = 0x4400_0000;
pub(crate) const COMM_SELF: Handle = 0x4400_0001;
pub(crate) const COMM_NULL: Handle = 0x0400_0000;
/// Communicators this library makes: this kind bit pattern plus an index.
pub(crate) const COMM_USER: Handle = 0x8400_0000_u32 as i32;

pub(crate) const REQUEST_NULL: Handle = 0x2c00_0000;
/// Requests: this pattern plus an index.
pub(crate) const REQUEST_USER: Handle = 0xac00_0000_u32 as i32;

pub(crate) const DATATYPE_NULL: Handle = 0x0c00_0000;
/// Datatypes this library makes: this pattern plus an index (apart from MPICH's predefined
/// 0x4c... and 0x8c... values).
pub(crate) const TYPE_USER: Handle = 0xcc00_0000_u32 as i32;

pub(crate) const GROUP_NULL: Handle = 0x0800_0000;
pub(crate) const GROUP_EMPTY: Handle = 0x4800_0000;
/// Groups this library makes: this pattern plus an index.
pub(crate) const GROUP_USER: Handle = 0x8800_0000_u32 as i32;

pub(crate) const KEYVAL_INVALID: i32 = 0x2400_0000;
/// Attribute keys this library makes: this pattern plus an index.
pub(crate) const KEYVAL_USER: i32 = 0xa400_0000_u32 as i32;

pub(crate) const INFO_NULL: Handle = 0x1c00_0000;
pub(crate) const INFO_ENV: Handle = 0x5c00_0001;
/// Info objects this library makes: this pattern plus an index.
pub(crate) const INFO_USER: Handle = 0x9c00_0000_u32 as i32;
pub(crate) const MAX_OBJECT_NAME: usize = 128;

pub(crate) const ERRHANDLER_NULL: Handle = 0x1400_0000;
/// Error handlers this library makes: this pattern plus an index.
pub(crate) const ERRHANDLER_USER: Handle = 0x9400_0000_u32 as i32;

pub(crate) const ERRORS_ARE_FATAL: Handle = 0x5400_0000;
pub(crate) const ERRORS_RETURN: Handle = 0x5400_0001;
pub(crate) const ERRORS_ABORT: Handle = 0x5400_0003;

pub(crate) const ANY_SOURCE: i32 = -2;
pub(crate) const PROC_NULL: i32 = -1;
pub(crate) const ROOT: i32 = -3;
pub(crate) const UNDEFINED: i32 = -32766;

pub(crate) const THREAD_FUNNELED: i32 = 1;

/// Predefined attribute keys (MPICH's values) and the values this library gives them.
pub(crate) const TAG_UB: i32 = 0x6440_0001;
pub(crate) const HOST: i32 = 0x6440_0003;
pub(crate) const IO: i32 = 0x6440_0005;
pub(crate) const WTIME_IS_GLOBAL: i32 = 0x6440_0007;
pub(crate) static TAG_UB_VALUE: i32 = earlybird::TAG_UB;
pub(crate) static ZERO: i32 = 0;
pub(crate) static PROC_NULL_VALUE: i32 = PROC_NULL;

pub(crate) const MAX_PROCESSOR_NAME: usize = 128;
pub(crate) const MAX_ERROR_STRING: usize = 512;
pub(crate) const MAX_LIBRARY_VERSION_STRING: usize = 8192;

/// `MPI_STATUS_IGNORE` and `MPI_STATUSES_IGNORE`.
pub(crate) const STATUS_IGNORE: usize = 1;
/// `MPI_IN_PLACE`.
pub(crate) const IN_PLACE: usize = usize::MAX;

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

/// The predefined datatype a handle names, if any.
pub(crate) fn basic_type(h: Handle) -> Option<BasicType> {
    use BasicType::*;
    Some(match h as u32 {
        0x4c00_0101 => Char,
        0x4c00_0118 => SignedChar,
        0x4c00_0102 => UnsignedChar,
        0x4c00_010d => Byte,
        0x4c00_040e => Wchar,
        0x4c00_0203 => Short,
        0x4c00_0204 => UnsignedShort,
        0x4c00_0405 => Int,
        0x4c00_0406 => Unsigned,
        0x4c00_0807 => Long,
        0x4c00_0808 => UnsignedLong,
        0x4c00_040a => Float,
        0x4c00_080b => Double,
        0x4c00_100c => LongDouble,
        0x4c00_0809 => LongLong,
        0x4c00_0819 => UnsignedLongLong,
        0x4c00_010f => Packed,
        0x8c00_0000 => FloatInt,
        0x8c00_0001 => DoubleInt,
        0x8c00_0002 => LongInt,
        0x8c00_0003 => ShortInt,
        0x4c00_0816 => TwoInt,
        0x4c00_0137 => Int8,
        0x4c00_0238 => Int16,
        0x4c00_0439 => Int32,
        0x4c00_083a => Int64,
        0x4c00_013b => Uint8,
        0x4c00_023c => Uint16,
        0x4c00_043d => Uint32,
        0x4c00_083e => Uint64,
        0x4c00_013f => CBool,
        0x4c00_0840 => CFloatComplex,
        0x4c00_1041 => CDoubleComplex,
        0x4c00_0843 => Aint,
        0x4c00_0844 => Offset,
        0x4c00_0845 => Count,
        _ => return None,
    })
}

/// The predefined operation a handle names (MPI_MAX = 0x58000001 ... MPI_NO_OP = 0x5800000e).
pub(crate) fn op(h: Handle) -> Option<earlybird::Op> {
    use earlybird::Op;
    Some(match h as u32 {
        0x5800_0001 => Op::MAX,
        0x5800_0002 => Op::MIN,
        0x5800_0003 => Op::SUM,
        0x5800_0004 => Op::PROD,
        0x5800_0005 => Op::LAND,
        0x5800_0006 => Op::BAND,
        0x5800_0007 => Op::LOR,
        0x5800_0008 => Op::BOR,
        0x5800_0009 => Op::LXOR,
        0x5800_000a => Op::BXOR,
        0x5800_000b => Op::MINLOC,
        0x5800_000c => Op::MAXLOC,
        0x5800_000d => Op::REPLACE,
        0x5800_000e => Op::NO_OP,
        _ => return None,
    })
}

/// The handle of a predefined datatype (the inverse of [`basic_type`]).
pub(crate) fn basic_handle(b: BasicType) -> Option<Handle> {
    const ALL: [u32; 36] = [
        0x4c00_0101,
        0x4c00_0118,
        0x4c00_0102,
        0x4c00_010d,
        0x4c00_040e,
        0x4c00_0203,
        0x4c00_0204,
        0x4c00_0405,
        0x4c00_0406,
        0x4c00_0807,
        0x4c00_0808,
        0x4c00_040a,
        0x4c00_080b,
        0x4c00_100c,
        0x4c00_0809,
        0x4c00_0819,
        0x4c00_010f,
        0x8c00_0000,
        0x8c00_0001,
        0x8c00_0002,
        0x8c00_0003,
        0x4c00_0816,
        0x4c00_0137,
        0x4c00_0238,
        0x4c00_0439,
        0x4c00_083a,
        0x4c00_013b,
        0x4c00_023c,
        0x4c00_043d,
        0x4c00_083e,
        0x4c00_013f,
        0x4c00_0840,
        0x4c00_1041,
        0x4c00_0843,
        0x4c00_0844,
        0x4c00_0845,
    ];
    ALL.iter()
        .map(|&h| h as Handle)
        .find(|&h| basic_type(h) == Some(b))
}

/// Operations this library makes: this pattern plus an index.
pub(crate) const OP_USER: Handle = 0x9800_0000_u32 as i32;
pub(crate) const OP_NULL: Handle = 0x1800_0000;

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
