//! Seed 002 in C (`mpi-ext.h`): init-time assertions, under the MPIX_ prefix. The semantics
//! are the Rust API's (`earlybird::init_with_assertions`, module doc of `earlybird::assertions`
//! for what each assertion allows and how a broken promise is reported); what the C forms add:
//!
//! - `MPIX_Init_thread_assertions` is the seed's `MPI_Init_thread_xxx`: `assertions` is a bit
//!   set of the `MPIX_*` constants (the seed's values for the five it names). A bit that is
//!   no assertion is MPI_ERR_ARG naming it, and MPI stays uninitialised. The names in
//!   `EARLYBIRD_ASSERTIONS` are added, as for `MPI_Init` and `MPI_Init_thread`.
//! - `MPIX_Query_assertions` writes the set in force since init (0 before it).
//! - The MPI 4 keys (`mpi_assert_no_any_source`, ...) need nothing new: `MPI_Comm_set_info`,
//!   `MPI_Comm_dup_with_info` and `MPI_Comm_split_type` take them.
//! - A broken promise is MPIX_ERR_ASSERTION through the error handler of the communicator
//!   (or, for a multiple wait, of the first request's).

use crate::abi;
use crate::state::{self, write};
use earlybird::{Assertions, ErrorClass};
use std::ffi::{c_char, c_int};

mpi! {
    fn MPIX_Init_thread_assertions / PMPIX_Init_thread_assertions(
        _argc: *mut c_int,
        _argv: *mut *mut *mut c_char,
        required: c_int,
        provided: *mut c_int,
        assertions: c_int,
    ) {
        let bits = assertions as u32;
        let Some(a) = Assertions::from_bits(bits) else {
            let unknown = bits & !Assertions::all().bits();
            eprintln!(
                "earlybird: MPIX_Init_thread_assertions: assertions {assertions:#x} hold bits {unknown:#x} that are no assertion"
            );
            return ErrorClass::Arg.code();
        };
        let r = state::init_with(abi::thread_level(required), a);
        if r == abi::MPI_SUCCESS {
            // SAFETY: `provided` is an int to write (MPI's contract), checked for null.
            unsafe { write(provided, abi::thread_level_code(state::thread_level())) };
        }
        r
    }

    fn MPIX_Query_assertions / PMPIX_Query_assertions(assertions: *mut c_int) {
        // SAFETY: an int to write, checked for null.
        unsafe { write(assertions, state::assertions().bits() as c_int) };
        abi::MPI_SUCCESS
    }
}
