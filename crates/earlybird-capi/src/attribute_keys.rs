//! Keyvals of the program's for the objects whose attributes this layer keeps itself
//! (datatypes and windows; communicators' are the Rust API's): the copy and delete functions,
//! the attributes set with them, and what MPI_Type_free_keyval and MPI_Win_free_keyval share.

use crate::abi::{self, Handle, MPI_SUCCESS};
use earlybird::{Error, ErrorClass};
use std::ffi::{c_int, c_void};

/// A keyval: the program's copy and delete functions (MPICH's ABI gives them one shape for
/// every object kind, the object's handle first) and extra state.
#[derive(Clone, Copy)]
pub(crate) struct AttrKeyval {
    pub(crate) copy: Option<crate::CopyFunction>,
    pub(crate) delete: Option<crate::DeleteFunction>,
    pub(crate) extra: usize,
    /// Freed by the program: no attribute is set with it any more (see `free_keyval`).
    pub(crate) freed: bool,
}

/// One attribute: keyval, value, and the keyval as it was when the attribute was set (a
/// freed keyval's attributes keep their functions).
pub(crate) type Attr = (c_int, usize, AttrKeyval);

impl AttrKeyval {
    /// The delete function on attribute `value` of object `obj`.
    pub(crate) fn delete(&self, obj: Handle, keyval: c_int, value: usize) -> earlybird::Result<()> {
        let Some(f) = self.delete else { return Ok(()) };
        // SAFETY: the program's delete function, called as MPI's C binding says.
        let rc = unsafe { f(obj, keyval, value as *mut c_void, self.extra as *mut c_void) };
        check(rc, "delete", keyval)
    }

    /// The copy function for a duplicate of `old`: the new value, or `None` (not copied).
    pub(crate) fn copy(
        &self,
        old: Handle,
        keyval: c_int,
        value: usize,
    ) -> earlybird::Result<Option<usize>> {
        let Some(f) = self.copy else { return Ok(None) };
        let (mut out, mut flag) = (0usize, 0 as c_int);
        // SAFETY: the program's copy function, called as MPI's C binding says.
        let rc = unsafe {
            f(
                old,
                keyval,
                self.extra as *mut c_void,
                value as *mut c_void,
                (&raw mut out).cast(),
                &mut flag,
            )
        };
        check(rc, "copy", keyval)?;
        Ok((flag != 0).then_some(out))
    }
}

fn check(rc: c_int, what: &str, keyval: c_int) -> earlybird::Result<()> {
    if rc == MPI_SUCCESS {
        Ok(())
    } else {
        Err(Error::new(
            ErrorClass::Other,
            format!("the {what} function of keyval {keyval:#x} returned {rc}"),
        ))
    }
}

/// Set `a` among `attrs`; the attribute it replaces (whose delete function the caller runs,
/// with the state free).
pub(crate) fn set(attrs: &mut Vec<Attr>, a: Attr) -> Option<Attr> {
    match attrs.iter_mut().find(|x| x.0 == a.0) {
        Some(x) => Some(std::mem::replace(x, a)),
        None => {
            attrs.push(a);
            None
        }
    }
}

/// MPI_Type_free_keyval and MPI_Win_free_keyval (`what`): the keyval marked freed in its
/// table (`free`), and MPI_KEYVAL_INVALID into `*keyval`.
///
/// A freed keyval keeps its entry (its handle is never given to another keyval), so that the
/// attributes set with it are still read and deleted through it, as MPI 4.1 §7.7.2 says the
/// program deletes them; freeing it again does nothing (as MPICH: a library's delete
/// function may free the keyval its program frees too).
pub(crate) fn free_keyval(
    what: &str,
    keyval: *mut c_int,
    free: fn(c_int) -> earlybird::Result<()>,
) -> c_int {
    if keyval.is_null() {
        let e = Error::new(ErrorClass::Arg, format!("{what}: a null keyval pointer"));
        return crate::self_ok(Err::<(), _>(e));
    }
    // SAFETY: a keyval to read and write (MPI's contract), not null.
    let r = free(unsafe { keyval.read() });
    if r.is_ok() {
        // SAFETY: as above.
        unsafe { keyval.write(abi::KEYVAL_INVALID) };
    }
    crate::self_ok(r)
}
