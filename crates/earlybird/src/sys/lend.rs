//! Raw views of user buffers lent to operations in progress.
//!
//! A [`Lent`] is the address and length of a user buffer that a nonblocking or persistent
//! operation will read or write later, from the progress engine. **Crate invariant:** a
//! `Lent` is made only by the request layer, from a buffer that it keeps alive and unaliased
//! (borrowed for the request's lifetime inside a [`scope`](crate::scope), or owned by the
//! request) until the operation has completed or been cancelled. Every `unsafe` block below
//! leans on that invariant.

use std::io;

/// Address and length of a buffer lent to an operation.
#[derive(Clone, Copy, Debug)]
pub struct Lent {
    ptr: *mut u8,
    len: usize,
}

impl Lent {
    /// An empty buffer (zero-length messages, PROC_NULL).
    pub const EMPTY: Lent = Lent {
        ptr: std::ptr::NonNull::<u8>::dangling().as_ptr(),
        len: 0,
    };

    /// Lend a buffer that the operation will only read.
    pub(crate) fn of(buf: &[u8]) -> Lent {
        Lent {
            ptr: buf.as_ptr() as *mut u8,
            len: buf.len(),
        }
    }

    /// Lend a buffer that the operation will write.
    pub(crate) fn of_mut(buf: &mut [u8]) -> Lent {
        Lent {
            ptr: buf.as_mut_ptr(),
            len: buf.len(),
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The address, as a peer's rendezvous read needs it.
    pub fn addr(&self) -> u64 {
        self.ptr as u64
    }

    /// The lent bytes, for the duration of a closure. The operation must be a reader.
    pub(crate) fn with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        if self.len == 0 {
            return f(&[]);
        }
        // SAFETY: by the crate invariant the buffer is alive for the operation; the slice
        // does not escape the closure, and nobody writes a buffer lent for reading.
        f(unsafe { std::slice::from_raw_parts(self.ptr, self.len) })
    }

    /// The lent bytes, writable, for the duration of a closure.
    pub(crate) fn with_bytes_mut<R>(&self, f: impl FnOnce(&mut [u8]) -> R) -> R {
        if self.len == 0 {
            return f(&mut []);
        }
        // SAFETY: by the crate invariant the buffer is alive and lent for writing to this
        // operation alone; the slice does not escape the closure.
        f(unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) })
    }

    /// The lent bytes for as long as `holder` is borrowed mutably. The request layer calls
    /// this only on an inactive persistent request that lent the buffer mutably (`holder` is
    /// that request): no operation touches the bytes meanwhile, and the request's exclusive
    /// borrow of the user's buffer keeps anyone else away.
    pub(crate) fn bytes_mut_while<'h, H: ?Sized>(&self, holder: &'h mut H) -> &'h mut [u8] {
        let _ = holder;
        if self.len == 0 {
            return &mut [];
        }
        // SAFETY: (1) the buffer outlives the holder (crate invariant: it is borrowed for the
        // request's scope); (2) the slice's lifetime is that of `&mut holder`, during which
        // the holder cannot start an operation on the buffer; (3) it was lent mutably, so no
        // other reference to it exists.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }

    /// Fill the first `len` bytes from a sender's buffer: `memcpy` when the sender is a
    /// thread of this process, `process_vm_readv` when it is another process.
    pub(crate) fn pull(
        &self,
        same_process: bool,
        pid: u32,
        addr: u64,
        len: usize,
    ) -> io::Result<()> {
        assert!(len <= self.len, "rendezvous pull out of range");
        if len == 0 {
            return Ok(());
        }
        if same_process {
            // SAFETY: (1) `addr` is the address of the sender's lent buffer, which the sender
            // keeps alive and unmodified until our FIN reaches it (rendezvous protocol, and the
            // crate invariant on its side); (2) it is at least `len` bytes (the RTS says so);
            // (3) our own buffer is a different, exclusively lent allocation.
            unsafe { std::ptr::copy_nonoverlapping(addr as *const u8, self.ptr, len) };
            Ok(())
        } else {
            self.with_bytes_mut(|dst| crate::sys::cma::read_remote(pid, addr, &mut dst[..len]))
        }
    }
}

/// A receive buffer that many pending receives may share, as OSU-style benchmarks post a
/// whole window of receives into one buffer. Only the receiving endpoint's thread writes it
/// (the progress engine copies into it; a rendezvous pull is issued by the receiver too), so
/// the writes are sequential; the type is not `Sync`, and its bytes can be read only through
/// `&mut self`, that is, once no request borrows it any more. Its contents are those of
/// whichever receive wrote last.
pub struct ScratchBuffer {
    bytes: Box<[std::cell::UnsafeCell<u8>]>,
}

impl std::fmt::Debug for ScratchBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScratchBuffer")
            .field("len", &self.len())
            .finish()
    }
}

impl ScratchBuffer {
    /// A zeroed buffer of `len` bytes.
    pub fn new(len: usize) -> ScratchBuffer {
        ScratchBuffer {
            bytes: (0..len).map(|_| std::cell::UnsafeCell::new(0u8)).collect(),
        }
    }

    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The bytes, once nothing borrows the buffer.
    pub fn get_mut(&mut self) -> &mut [u8] {
        let cells: &mut [std::cell::UnsafeCell<u8>] = &mut self.bytes;
        // SAFETY: UnsafeCell<u8> has the layout of u8 (repr(transparent)), and `&mut self`
        // proves that no request (each holds `&self`) can write the bytes meanwhile.
        unsafe { &mut *(cells as *mut [std::cell::UnsafeCell<u8>] as *mut [u8]) }
    }

    /// Lend the bytes for writing to one more receive.
    pub(crate) fn lend(&self) -> Lent {
        // A pointer to UnsafeCell contents may be written through from a shared reference;
        // the writes happen only on the receiving thread (see the type's doc).
        Lent {
            ptr: std::cell::UnsafeCell::raw_get(self.bytes.as_ptr()),
            len: self.bytes.len(),
        }
    }
}
