//! Seed 004 in C (`mpi-ext.h`): windows on persistent memory, under the seed's own names
//! (`MPI_Win_pmem_*`, `MPI_ERR_PMEM_*`). The semantics are the Rust API's (module
//! `earlybird::pmem`, `Win::fence_persist` and the rest); what the C forms add:
//!
//! - Windows are made by `MPI_Win_allocate` (and create, create_dynamic) with the seed's
//!   info keys; the seed's `_pmem` forms of ordinary calls are macros for them.
//! - **Stores through the window's base pointer** are invisible to the library, so each
//!   persisting call in C first compares the checksum of every block of the calling rank's
//!   memory with the last version's (`Win::pmem_scan_raw_stores`): a commit still writes
//!   only the changed blocks, and an unchanged window commits nothing, at the cost of a
//!   read of the rank's memory per call.
//! - `MPI_Win_pmem_windows` and `MPI_Win_pmem_versions` are pointers to lists the library
//!   allocates; the free calls free them and set them to NULL. A null list is
//!   MPI_ERR_PMEM_WINDOWS / MPI_ERR_PMEM_VERSIONS; an index out of range MPI_ERR_PMEM_ARG.
//! - `MPI_Win_pmem_get_name` writes at most MPI_PMEM_MAX_NAME bytes with the NUL;
//!   `MPI_Win_pmem_get_size` an int (the seed's type: MPI_ERR_PMEM_ARG past INT_MAX).
//! - The management calls' errors go to MPI_COMM_WORLD's error handler.

use crate::abi::{self, Handle};
use crate::state::{self, ok_or_code, with_comm, with_win, write};
use earlybird::pmem::{self, Versions, Windows};
use earlybird::{Error, ErrorClass, Result};
use std::ffi::{c_char, c_int, c_long};

/// What `MPI_Win_pmem_windows` points to.
pub struct WindowsList(Windows);
/// What `MPI_Win_pmem_versions` points to.
pub struct VersionsList(Versions);

/// `r` through MPI_COMM_WORLD's error handler.
fn world<T>(r: Result<T>) -> Result<T> {
    with_comm(abi::COMM_WORLD, |_| r)
}

fn index(what: &str, n: c_int) -> Result<usize> {
    usize::try_from(n).map_err(|_| Error::new(ErrorClass::PmemArg, format!("{what}: index {n}")))
}

/// # Safety
/// `p` is null or points to a list made by `MPI_Win_pmem_list` and not freed.
unsafe fn windows<'a>(what: &str, p: *const WindowsList) -> Result<&'a Windows> {
    if p.is_null() {
        return Err(Error::new(
            ErrorClass::PmemWindows,
            format!("{what}: a null MPI_Win_pmem_windows"),
        ));
    }
    // SAFETY: the function's contract.
    Ok(unsafe { &(*p).0 })
}

/// # Safety
/// `p` is null or points to a list made by `MPI_Win_pmem_get_versions` and not freed.
unsafe fn versions<'a>(what: &str, p: *const VersionsList) -> Result<&'a Versions> {
    if p.is_null() {
        return Err(Error::new(
            ErrorClass::PmemVersions,
            format!("{what}: a null MPI_Win_pmem_versions"),
        ));
    }
    // SAFETY: the function's contract.
    Ok(unsafe { &(*p).0 })
}

fn out_null(what: &str) -> Error {
    Error::new(
        ErrorClass::Arg,
        format!("{what}: a null pointer to write the result to"),
    )
}

mpi! {
    fn MPI_Win_pmem_set_root_path / PMPI_Win_pmem_set_root_path(path: *const c_char) {
        // SAFETY: a NUL-terminated path (the seed's contract).
        let p = unsafe { crate::c_str(path) }
            .map_err(|e| Error::new(ErrorClass::PmemRootPath, format!("MPI_Win_pmem_set_root_path: {}", e.detail())));
        ok_or_code(world(p.and_then(pmem::set_root_path)))
    }

    fn MPI_Win_fence_pmem_persist / PMPI_Win_fence_pmem_persist(a: c_int, win: Handle) {
        ok_or_code(with_win(win, "MPI_Win_fence_pmem_persist", |w| {
            w.win.pmem_scan_raw_stores()?;
            w.win.fence_persist(crate::windows::assert(a)?)
        }))
    }

    fn MPI_Win_post_pmem_persist / PMPI_Win_post_pmem_persist(group: Handle, a: c_int, win: Handle) {
        ok_or_code(with_win(win, "MPI_Win_post_pmem_persist", |w| {
            let g = state::group_of(group)?;
            w.win.pmem_scan_raw_stores()?;
            w.win
                .post_persist(&g, crate::windows::assert(a)?)
                .map(earlybird::ExposureEpoch::keep_open)
        }))
    }

    fn MPI_Win_wait_pmem_persist / PMPI_Win_wait_pmem_persist(win: Handle) {
        ok_or_code(with_win(win, "MPI_Win_wait_pmem_persist", |w| {
            w.win.pmem_scan_raw_stores()?;
            w.win.wait_persist()
        }))
    }

    fn MPI_Win_test_pmem_persist / PMPI_Win_test_pmem_persist(win: Handle, flag: *mut c_int) {
        let r = with_win(win, "MPI_Win_test_pmem_persist", |w| {
            w.win.pmem_scan_raw_stores()?;
            w.win.test_persist()
        });
        // SAFETY: an int to write, checked for null.
        ok_or_code(r.map(|done| unsafe { write(flag, c_int::from(done)) }))
    }

    fn MPI_Win_pmem_persist / PMPI_Win_pmem_persist(win: Handle) {
        ok_or_code(with_win(win, "MPI_Win_pmem_persist", |w| w.win.pmem_flush()))
    }

    fn MPI_Win_pmem_list / PMPI_Win_pmem_list(out: *mut *mut WindowsList) {
        const WHAT: &str = "MPI_Win_pmem_list";
        ok_or_code(world((|| {
            if out.is_null() {
                return Err(Error::new(ErrorClass::PmemWindows, format!("{WHAT}: a null MPI_Win_pmem_windows*")));
            }
            let l = pmem::list()?;
            // SAFETY: a pointer to write (the seed's contract), checked for null.
            unsafe { out.write(Box::into_raw(Box::new(WindowsList(l)))) };
            Ok(())
        })()))
    }

    fn MPI_Win_pmem_free_windows_list / PMPI_Win_pmem_free_windows_list(p: *mut *mut WindowsList) {
        const WHAT: &str = "MPI_Win_pmem_free_windows_list";
        ok_or_code(world((|| {
            // SAFETY: a pointer to a list handle (the seed's contract), checked for null.
            if p.is_null() || unsafe { p.read() }.is_null() {
                return Err(Error::new(ErrorClass::PmemWindows, format!("{WHAT}: a null MPI_Win_pmem_windows")));
            }
            // SAFETY: the handle was made by MPI_Win_pmem_list (Box::into_raw) and is freed
            // once: it is set to null here.
            unsafe {
                drop(Box::from_raw(p.read()));
                p.write(std::ptr::null_mut());
            }
            Ok(())
        })()))
    }

    fn MPI_Win_pmem_get_nwindows / PMPI_Win_pmem_get_nwindows(l: *const WindowsList, n: *mut c_int) {
        const WHAT: &str = "MPI_Win_pmem_get_nwindows";
        ok_or_code(world((|| {
            // SAFETY: a list of MPI_Win_pmem_list or null (the seed's contract).
            let w = unsafe { windows(WHAT, l) }?;
            if n.is_null() {
                return Err(out_null(WHAT));
            }
            // SAFETY: an int to write, checked for null.
            unsafe { n.write(w.len() as c_int) };
            Ok(())
        })()))
    }

    fn MPI_Win_pmem_get_name / PMPI_Win_pmem_get_name(l: *const WindowsList, i: c_int, name: *mut c_char) {
        const WHAT: &str = "MPI_Win_pmem_get_name";
        ok_or_code(world((|| {
            // SAFETY: as in MPI_Win_pmem_get_nwindows.
            let w = unsafe { windows(WHAT, l) }?;
            let s = w.name(index(WHAT, i)?)?;
            if name.is_null() {
                return Err(out_null(WHAT));
            }
            // SAFETY: room for MPI_PMEM_MAX_NAME chars (the seed's contract); names are at
            // most 255 bytes.
            unsafe { state::write_str(name, 256, s, std::ptr::null_mut()) };
            Ok(())
        })()))
    }

    fn MPI_Win_pmem_get_size / PMPI_Win_pmem_get_size(l: *const WindowsList, i: c_int, size: *mut c_int) {
        const WHAT: &str = "MPI_Win_pmem_get_size";
        ok_or_code(world((|| {
            // SAFETY: as in MPI_Win_pmem_get_nwindows.
            let w = unsafe { windows(WHAT, l) }?;
            let b = w.size(index(WHAT, i)?)?;
            let b = c_int::try_from(b).map_err(|_| {
                Error::new(ErrorClass::PmemArg, format!("{WHAT}: {b} bytes do not fit the seed's int"))
            })?;
            if size.is_null() {
                return Err(out_null(WHAT));
            }
            // SAFETY: an int to write, checked for null.
            unsafe { size.write(b) };
            Ok(())
        })()))
    }

    fn MPI_Win_pmem_get_versions / PMPI_Win_pmem_get_versions(l: *const WindowsList, i: c_int, out: *mut *mut VersionsList) {
        const WHAT: &str = "MPI_Win_pmem_get_versions";
        ok_or_code(world((|| {
            // SAFETY: as in MPI_Win_pmem_get_nwindows.
            let w = unsafe { windows(WHAT, l) }?;
            let v = w.versions(index(WHAT, i)?)?;
            if out.is_null() {
                return Err(Error::new(ErrorClass::PmemVersions, format!("{WHAT}: a null MPI_Win_pmem_versions*")));
            }
            // SAFETY: a pointer to write (the seed's contract), checked for null.
            unsafe { out.write(Box::into_raw(Box::new(VersionsList(v)))) };
            Ok(())
        })()))
    }

    fn MPI_Win_pmem_free_versions_list / PMPI_Win_pmem_free_versions_list(p: *mut *mut VersionsList) {
        const WHAT: &str = "MPI_Win_pmem_free_versions_list";
        ok_or_code(world((|| {
            // SAFETY: as in MPI_Win_pmem_free_windows_list.
            if p.is_null() || unsafe { p.read() }.is_null() {
                return Err(Error::new(ErrorClass::PmemVersions, format!("{WHAT}: a null MPI_Win_pmem_versions")));
            }
            // SAFETY: made by MPI_Win_pmem_get_versions, freed once (set to null here).
            unsafe {
                drop(Box::from_raw(p.read()));
                p.write(std::ptr::null_mut());
            }
            Ok(())
        })()))
    }

    fn MPI_Win_pmem_get_nversions / PMPI_Win_pmem_get_nversions(l: *const VersionsList, n: *mut c_int) {
        const WHAT: &str = "MPI_Win_pmem_get_nversions";
        ok_or_code(world((|| {
            // SAFETY: a list of MPI_Win_pmem_get_versions or null (the seed's contract).
            let v = unsafe { versions(WHAT, l) }?;
            if n.is_null() {
                return Err(out_null(WHAT));
            }
            // SAFETY: an int to write, checked for null.
            unsafe { n.write(v.len() as c_int) };
            Ok(())
        })()))
    }

    fn MPI_Win_pmem_get_version / PMPI_Win_pmem_get_version(l: *const VersionsList, i: c_int, out: *mut c_int) {
        const WHAT: &str = "MPI_Win_pmem_get_version";
        ok_or_code(world((|| {
            // SAFETY: as in MPI_Win_pmem_get_nversions.
            let v = unsafe { versions(WHAT, l) }?;
            let n = v.version(index(WHAT, i)?)?;
            if out.is_null() {
                return Err(out_null(WHAT));
            }
            // SAFETY: an int to write, checked for null.
            unsafe { out.write(n as c_int) };
            Ok(())
        })()))
    }

    fn MPI_Win_pmem_get_version_timestamp / PMPI_Win_pmem_get_version_timestamp(l: *const VersionsList, i: c_int, out: *mut c_long) {
        const WHAT: &str = "MPI_Win_pmem_get_version_timestamp";
        ok_or_code(world((|| {
            // SAFETY: as in MPI_Win_pmem_get_nversions.
            let v = unsafe { versions(WHAT, l) }?;
            let t = v.timestamp(index(WHAT, i)?)?;
            if out.is_null() {
                return Err(out_null(WHAT));
            }
            // SAFETY: a time_t (long) to write, checked for null.
            unsafe { out.write(t as c_long) };
            Ok(())
        })()))
    }

    fn MPI_Win_pmem_delete / PMPI_Win_pmem_delete(name: *const c_char) {
        // SAFETY: a NUL-terminated name (the seed's contract).
        let n = unsafe { crate::c_str(name) };
        ok_or_code(world(n.and_then(|n| pmem::delete(&n))))
    }

    fn MPI_Win_pmem_delete_version / PMPI_Win_pmem_delete_version(name: *const c_char, version: c_int) {
        // SAFETY: a NUL-terminated name (the seed's contract).
        let n = unsafe { crate::c_str(name) };
        ok_or_code(world(n.and_then(|n| {
            let v = u64::try_from(version).map_err(|_| {
                Error::new(ErrorClass::PmemCkptVer, format!("MPI_Win_pmem_delete_version: version {version}"))
            })?;
            pmem::delete_version(&n, v)
        })))
    }
}
