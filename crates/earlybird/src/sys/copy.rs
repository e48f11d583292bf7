//! Copies of message bytes, shared by the ring (eager payloads) and the views of user buffers.
#![forbid(unsafe_code)]

/// Copy `src` into the front of `dst`, with the common small sizes as plain moves instead
/// of a call to `memcpy` (8 bytes is the typical small message).
#[inline(always)]
pub(crate) fn copy_small(dst: &mut [u8], src: &[u8]) {
    match src.len() {
        8 => dst[..8].copy_from_slice(&src[..8]),
        4 => dst[..4].copy_from_slice(&src[..4]),
        16 => dst[..16].copy_from_slice(&src[..16]),
        0 => {}
        n => dst[..n].copy_from_slice(src),
    }
}
