//! Memory a window may expose to its peers (MPI_Win_create, MPI_Win_attach): an owner that
//! names a byte range and keeps it valid for as long as the owner lives.

use crate::sys::plain::Plain;

/// Memory a window exposes: the bytes `address()..address() + bytes()`, which peers of the
/// window read and write (directly, or with `process_vm_readv`/`writev` from another process)
/// until the window is freed or the region detached, when the owner is dropped.
///
/// # Safety
/// Implementing it promises that the range is memory of this process, valid for reads and
/// writes of any bytes, and not used through Rust references while the window holds the
/// owner; the range does not change while the owner lives.
pub unsafe trait ExposedMemory: 'static {
    /// The first byte's address.
    fn address(&self) -> u64;
    /// How many bytes.
    fn bytes(&self) -> usize;
}

// SAFETY: a Vec's buffer is the Vec's own memory; any bytes written into a plain type's
// elements leave valid values (`Plain`), the window holds the Vec (so no reference into it
// exists outside the window's own accesses), and a Vec that is not touched does not move its
// buffer.
unsafe impl<T: Plain> ExposedMemory for Vec<T> {
    fn address(&self) -> u64 {
        self.as_ptr() as u64
    }

    fn bytes(&self) -> usize {
        std::mem::size_of_val(&self[..])
    }
}
