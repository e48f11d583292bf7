//! Attributes on datatypes (MPI 4.1 §7.7.4) in C: keyvals with the program's copy and delete
//! functions, kept by this layer beside the datatype handles (predefined datatypes take
//! attributes too). MPI_Type_dup copies them through the copy functions; MPI_Type_free,
//! MPI_Type_delete_attr and a replacing MPI_Type_set_attr run the delete functions. Every
//! callback runs with the state not borrowed, so it may call MPI.

use crate::abi::Handle;
use crate::attribute_keys::{self, AttrKeyval};
use crate::state::{self, write};
use earlybird::{Error, ErrorClass};
use std::ffi::{c_int, c_void};

/// MPI_Type_dup's part: `old`'s attributes onto `new` through their copy functions.
pub(crate) fn copy_all(old: Handle, new: Handle) -> earlybird::Result<()> {
    let mut copied = Vec::new();
    for (k, v, kv) in state::type_attrs(old) {
        if let Some(nv) = kv.copy(old, k, v)? {
            copied.push((k, nv, kv));
        }
    }
    for a in copied {
        state::set_type_attr(new, a);
    }
    Ok(())
}

/// MPI_Type_free's part: `dt`'s attributes deleted, last set first.
pub(crate) fn delete_all(dt: Handle) -> earlybird::Result<()> {
    let mut r = Ok(());
    for (k, v, kv) in state::take_type_attrs(dt).into_iter().rev() {
        r = r.and(kv.delete(dt, k, v));
    }
    r
}

mpi! {
    fn MPI_Type_create_keyval / PMPI_Type_create_keyval(copy: Option<crate::CopyFunction>, delete: Option<crate::DeleteFunction>, keyval: *mut c_int, extra: *mut c_void) {
        let r = state::add_type_keyval(AttrKeyval { copy, delete, extra: extra as usize, freed: false });
        // SAFETY: an int to write (MPI's contract), checked for null.
        crate::self_ok(r.map(|k| unsafe { write(keyval, k) }))
    }

    fn MPI_Type_free_keyval / PMPI_Type_free_keyval(keyval: *mut c_int) {
        attribute_keys::free_keyval("MPI_Type_free_keyval", keyval, state::free_type_keyval)
    }

    fn MPI_Type_set_attr / PMPI_Type_set_attr(dt: Handle, keyval: c_int, value: *mut c_void) {
        let r = state::type_of(dt).and_then(|_| state::type_keyval_of(keyval)).and_then(|kv| {
            match state::set_type_attr(dt, (keyval, value as usize, kv)) {
                // The replaced value's delete function.
                Some((k, v, kv)) => kv.delete(dt, k, v),
                None => Ok(()),
            }
        });
        crate::self_ok(r)
    }

    fn MPI_Type_get_attr / PMPI_Type_get_attr(dt: Handle, keyval: c_int, value: *mut c_void, flag: *mut c_int) {
        let r = state::type_of(dt).map(|_| {
            let v = state::type_attrs(dt).into_iter().find(|a| a.0 == keyval).map(|a| a.1);
            // SAFETY: a `void *` and an int to write (MPI's contract), checked for null.
            unsafe {
                if let Some(v) = v {
                    write(value.cast::<*mut c_void>(), v as *mut c_void);
                }
                write(flag, c_int::from(v.is_some()));
            }
        });
        crate::self_ok(r)
    }

    fn MPI_Type_delete_attr / PMPI_Type_delete_attr(dt: Handle, keyval: c_int) {
        let r = state::type_of(dt).and_then(|_| {
            let (k, v, kv) = state::remove_type_attr(dt, keyval).ok_or_else(|| {
                Error::new(ErrorClass::Keyval, format!("MPI_Type_delete_attr: datatype {dt:#x} has no attribute under keyval {keyval:#x}"))
            })?;
            kv.delete(dt, k, v)
        });
        crate::self_ok(r)
    }
}
