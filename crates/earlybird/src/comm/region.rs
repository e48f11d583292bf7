//! Shared memory for every process of a communicator: what a window's segment and an
//! endpoint communicator's job are made from.
#![forbid(unsafe_code)]

use super::agree::{self, coll_tag};
use super::Comm;
use crate::error::{Error, ErrorClass, Result};
use crate::fabric::{RegionKey, Transport};
use crate::sys::segment::Segment;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU32, Ordering};

/// Regions this process has created, for their serials.
static MADE: AtomicU32 = AtomicU32::new(0);

/// A region of shared memory every process of a communicator maps (see
/// [`Comm::shared_region`]).
pub(crate) struct Region<T> {
    /// What `prepare` made of the mapping.
    pub(crate) mapped: T,
    /// A number no other region of the job has: rank 0's pid and how many regions its
    /// process made before.
    pub(crate) serial: u64,
    /// On rank 0, the region's descriptor: peers can map it only while it is open.
    pub(crate) fd: Option<OwnedFd>,
}

impl Comm {
    /// `bytes` of zero-filled shared memory for every process of this (intra)communicator,
    /// the first `reserved` of them backed at once (see [`Transport::create_region`]):
    /// rank 0 creates the region and makes `T` of it with `prepare` (told that it created
    /// it, so it may write a header) before it sends the key; every other process maps it
    /// and makes its `T`; and no process goes on (nor does rank 0 close the descriptor)
    /// before every process has. Collective. A failure anywhere is an error of class `class`
    /// on every process, naming `what` and the rank that failed.
    pub(crate) fn shared_region<T>(
        &self,
        bytes: usize,
        reserved: usize,
        what: &str,
        class: ErrorClass,
        prepare: impl FnOnce(Segment, bool) -> std::result::Result<T, String>,
    ) -> Result<Region<T>> {
        let ctx = self.ctx.internal().raw();
        let (parts, me) = self.parts();
        // Every process sees a member on another host when there is one: all fail alike,
        // without a word exchanged.
        let far = parts
            .iter()
            .position(|&p| !self.eng.borrow().fabric.shares_memory_with(p));
        if let Some(r) = far {
            return Err(Error::new(
                ErrorClass::UnsupportedOperation,
                format!(
                    "{what} needs memory that all its processes share, and rank {r} of the \
                     communicator is on another host than rank {me} (earlybird shares memory \
                     between the ranks of one host only)"
                ),
            ));
        }
        let mut key = vec![0u8; 25];
        let mut prepare = Some(prepare);
        let mut made = None;
        let mut fd = None;
        let mut failure = None;
        if me == 0 {
            match self.eng.borrow_mut().fabric.create_region(bytes, reserved) {
                Ok((seg, k, f)) => {
                    let mut v = Vec::with_capacity(16);
                    k.encode(&mut v);
                    key[0] = 1;
                    key[1..17].copy_from_slice(&v);
                    let n = MADE.fetch_add(1, Ordering::Relaxed);
                    let serial = (u64::from(crate::sys::process::pid()) << 32) | u64::from(n);
                    key[17..].copy_from_slice(&serial.to_le_bytes());
                    let first = prepare.take().expect("once");
                    match first(seg, true) {
                        Ok(t) => {
                            fd = Some(f);
                            made = Some(t);
                        }
                        Err(e) => {
                            key[0] = 0;
                            failure = Some(e);
                        }
                    }
                }
                Err(e) => failure = Some(format!("cannot create {what} ({bytes} bytes): {e}")),
            }
        }
        let keys = agree::exchange_aside(
            &self.eng,
            ctx,
            coll_tag(self.next_seq(), 0),
            &parts,
            me,
            key,
        )?;
        let key = &keys[0];
        let mapped = if key[0] == 0 {
            failure
                .get_or_insert_with(|| format!("rank 0 could not create {what} ({bytes} bytes)"));
            None
        } else if made.is_some() {
            made
        } else {
            let seg = match RegionKey::decode(&key[1..17]) {
                Some((k, _)) => self
                    .eng
                    .borrow_mut()
                    .fabric
                    .map_region(&k)
                    .map_err(|e| format!("cannot map {what}: {e}")),
                None => Err(format!("a malformed key of {what}")),
            };
            match seg.and_then(|s| prepare.take().expect("once")(s, false)) {
                Ok(t) => Some(t),
                Err(e) => {
                    failure = Some(e);
                    None
                }
            }
        };
        let serial = u64::from_le_bytes(key[17..25].try_into().expect("8 bytes"));
        // Every process learns whether every process mapped it.
        let ok = vec![u8::from(failure.is_none())];
        let oks =
            agree::exchange_aside(&self.eng, ctx, coll_tag(self.next_seq(), 0), &parts, me, ok)?;
        if let Some(f) = failure {
            return Err(Error::new(class, f));
        }
        if let Some(r) = oks.iter().position(|o| o[0] == 0) {
            return Err(Error::new(class, format!("rank {r} could not map {what}")));
        }
        Ok(Region {
            mapped: mapped.expect("mapped"),
            serial,
            fd,
        })
    }
}
