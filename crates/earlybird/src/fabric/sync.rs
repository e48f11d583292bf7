//! The atomics and cells the rings use: std normally, loom's under `--cfg loom` so that the
//! same ring code runs under the model checker; and the prefetch hint of shared lines.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU64, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU64, Ordering};

#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;

/// `std::cell::UnsafeCell` with loom's `with`/`with_mut` interface.
#[cfg(not(loom))]
#[derive(Debug, Default)]
#[repr(transparent)]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    #[allow(dead_code)]
    pub(crate) fn new(v: T) -> Self {
        UnsafeCell(std::cell::UnsafeCell::new(v))
    }
    #[inline(always)]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }
    #[inline(always)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

/// Ask for the cache line of `p`, to write (`WRITE`) or to read: a hint that fetches the
/// line without waiting for it (x86-64's PREFETCHW / PREFETCHT0, AArch64's PRFM).
#[inline(always)]
pub(crate) fn prefetch<const WRITE: bool, T>(p: &T) {
    let p: *const T = p;
    #[cfg(all(target_arch = "x86_64", not(loom)))]
    // SAFETY: a prefetch only hints the cache: it never faults, reads or writes nothing the
    // program sees, and changes no flags (processors without PREFETCHW run it as a NOP).
    unsafe {
        if WRITE {
            std::arch::asm!("prefetchw [{0}]", in(reg) p, options(nostack, preserves_flags, readonly));
        } else {
            std::arch::asm!("prefetcht0 [{0}]", in(reg) p, options(nostack, preserves_flags, readonly));
        }
    }
    #[cfg(all(target_arch = "aarch64", not(loom)))]
    // SAFETY: as above: PRFM is a hint.
    unsafe {
        if WRITE {
            std::arch::asm!("prfm pstl1keep, [{0}]", in(reg) p, options(nostack, preserves_flags, readonly));
        } else {
            std::arch::asm!("prfm pldl1keep, [{0}]", in(reg) p, options(nostack, preserves_flags, readonly));
        }
    }
    #[cfg(any(loom, not(any(target_arch = "x86_64", target_arch = "aarch64"))))]
    let _ = p;
}
