//! The operations of windows (MPI 4.1 §12.3): put, get, the accumulates, and their
//! request-based forms. Each is done by the origin before its call returns (see `rma`).
#![forbid(unsafe_code)]

use super::acc::{self, Elem};
use super::sync::{self, Access};
use super::{err, Flavor, Win};
use crate::coll::op::Op;
use crate::datatype::buffer::{lend, lend_mut, Buffer, BufferMut};
use crate::datatype::reduce::Predefined;
use crate::datatype::{Datatype, Equivalence, Typed, TypedMut};
use crate::error::{ErrorClass, Result};
use crate::fabric::window::{read_chunks, write_chunks, Mem, Place, Word};
use crate::request::Request;
use crate::status::{Status, PROC_NULL};
use crate::sys::lend::{lending, Loan};
use crate::sys::plain::{as_bytes, as_bytes_mut, Plain};
use crate::sys::sig::Sig;
use std::io;
use std::sync::atomic::Ordering;

/// The target side of an operation given with a datatype: `count` elements of `dt` from the
/// target displacement (MPI's target_count, target_datatype). Without one, an operation
/// lands contiguously, as many bytes as the origin's data.
#[derive(Clone, Copy, Debug)]
pub struct At<'d> {
    count: usize,
    dt: &'d Datatype,
}

impl<'d> At<'d> {
    pub fn new(count: usize, dt: &'d Datatype) -> At<'d> {
        At { count, dt }
    }
}

fn io_err(what: &str, e: io::Error) -> crate::error::Error {
    err(ErrorClass::Other, format!("{what}: {e}"))
}

/// Seed 001: sync counters never travel by RMA (the target could not translate them).
#[inline]
fn no_handles(what: &str, sig: Sig) -> Result<()> {
    if sig == crate::datatype::BasicType::HandleSync.sig() {
        return Err(err(
            ErrorClass::Type,
            format!("{what} of MPIX_HANDLE_SYNC: sync counters travel by point-to-point or collectives, not RMA"),
        ));
    }
    Ok(())
}

impl Win {
    /// Run `f` on rank `t`'s memory with the place `n` message bytes at displacement `disp`
    /// (and through `at`) take in it, after checking the range (MPI_ERR_RMA_RANGE).
    fn with_target<R>(
        &self,
        what: &str,
        t: usize,
        disp: isize,
        at: Option<At<'_>>,
        n: usize,
        f: impl FnOnce(&Mem, Place<'_>) -> Result<R>,
    ) -> Result<R> {
        self.await_post(t)?;
        let part = &self.inner.parts[t];
        if self.inner.flavor != Flavor::Dynamic {
            let (mem, off) = self.static_target(what, t, disp)?;
            return Self::place(what, t, mem, off, at, n, f);
        }
        // Dynamic: find the attached region holding the address, under the attach table's
        // read lock (a detach waits for it).
        let seg = &self.inner.seg;
        let lock = seg.word(t, Word::AttachLock);
        self.wait_rma(t, || sync::try_read_lock(lock))?;
        let addr = disp as u64;
        let count = seg.word(t, Word::AttachCount).load(Ordering::Acquire) as usize;
        let entry = |i: usize| {
            let (a, l) = seg.attached(t, i);
            (a.load(Ordering::Relaxed), l.load(Ordering::Relaxed))
        };
        // The region holding the address, joined with the regions attached right after it:
        // an access may run across regions that are adjacent (all of it is attached).
        let region = (0..count)
            .map(entry)
            .find(|&(a, l)| addr >= a && addr < a + l)
            .map(|(a, mut l)| {
                while let Some((_, next)) = (0..count).map(entry).find(|&(b, _)| b == a + l) {
                    l += next;
                }
                (a, l as usize)
            });
        let r = match region {
            None => Err(err(
                ErrorClass::RmaRange,
                format!("{what}: address {addr:#x} is in no region rank {t} has attached"),
            )),
            Some((a, l)) => {
                let mem = if part.pid == crate::sys::process::pid() {
                    Mem::Local {
                        addr: a as usize,
                        len: l,
                    }
                } else {
                    Mem::Remote {
                        pid: part.pid,
                        addr: a,
                        len: l,
                    }
                };
                Self::place(what, t, &mem, (addr - a) as usize, at, n, f)
            }
        };
        sync::read_unlock(lock);
        r
    }

    /// `t`'s memory and the byte `disp` displacement units into it, in a window whose
    /// memory is fixed at creation (not dynamic).
    fn static_target(&self, what: &str, t: usize, disp: isize) -> Result<(&Mem, usize)> {
        let part = &self.inner.parts[t];
        let mem = part
            .mem
            .as_ref()
            .ok_or_else(|| err(ErrorClass::Intern, "window part without memory"))?;
        let off = disp
            .checked_mul(part.disp_unit as isize)
            .filter(|o| *o >= 0);
        let Some(off) = off else {
            return Err(err(
                ErrorClass::RmaRange,
                format!(
                    "{what}: displacement {disp} (unit {}) before rank {t}'s window memory",
                    part.disp_unit
                ),
            ));
        };
        Ok((mem, off as usize))
    }

    /// MPI_ERR_RMA_RANGE unless bytes `off..off + n` lie within `mem` (rank `t`'s).
    fn check_run(what: &str, t: usize, mem: &Mem, off: usize, n: usize) -> Result<()> {
        if off.checked_add(n).is_none_or(|e| e > mem.len()) {
            return Err(err(
                ErrorClass::RmaRange,
                format!(
                    "{what}: bytes {off}..{} of rank {t}'s window memory of {} bytes",
                    off.saturating_add(n),
                    mem.len()
                ),
            ));
        }
        Ok(())
    }

    fn place<R>(
        what: &str,
        t: usize,
        mem: &Mem,
        off: usize,
        at: Option<At<'_>>,
        n: usize,
        f: impl FnOnce(&Mem, Place<'_>) -> Result<R>,
    ) -> Result<R> {
        match at {
            None => {
                Self::check_run(what, t, mem, off, n)?;
                f(mem, Place::Run(off))
            }
            Some(At { count, dt }) => {
                dt.check_committed(what)?;
                let layout = dt.layout(count, off, mem.len()).map_err(|e| {
                    err(
                        ErrorClass::RmaRange,
                        format!("{what}: target of rank {t}: {e}"),
                    )
                })?;
                if layout.packed_len() != n {
                    return Err(err(
                        ErrorClass::Type,
                        format!("{what}: the origin has {n} bytes of data, the target datatype {} ({count} x {})", layout.packed_len(), dt.describe()),
                    ));
                }
                f(mem, Place::Laid(&layout))
            }
        }
    }

    /// The memory of `t` and the byte of `disp` in it, range-checked for `n` bytes, when
    /// an element of width `w` there is one hardware atomic for every rank: the fast road of
    /// the accumulates on one integer. `None` for any other road.
    #[inline]
    fn atomic_target(
        &self,
        what: &str,
        t: usize,
        disp: isize,
        n: usize,
        w: usize,
    ) -> Result<Option<(&Mem, usize)>> {
        if !self.inner.atomics || self.inner.flavor == Flavor::Dynamic {
            return Ok(None);
        }
        self.await_post(t)?;
        let (mem, off) = self.static_target(what, t, disp)?;
        Self::check_run(what, t, mem, off, n)?;
        Ok(mem.atomic(off, w).is_some().then_some((mem, off)))
    }

    /// Checks common to every operation: live window, rank, epoch. `None` for PROC_NULL
    /// (the operation does nothing).
    #[inline]
    fn target(&self, target: i32, what: Access) -> Result<Option<usize>> {
        self.check_live()?;
        if target == PROC_NULL {
            return Ok(None);
        }
        let t = self.check_rank(target)?;
        self.inner.epochs.borrow_mut().may_access(t, what)?;
        if what != Access::Get {
            self.inner.wrote.set(true);
        }
        Ok(Some(t))
    }

    fn put_loan(
        &self,
        what: &str,
        loan: &Loan,
        t: usize,
        disp: isize,
        at: Option<At<'_>>,
    ) -> Result<()> {
        self.put_from(what, Source::Loan(loan), t, disp, at)
    }

    /// A put of `src` to `t` at `disp` (through `at`): into the epoch's mail when it is a
    /// small put of a PSCW epoch, else a copy into the target's memory.
    fn put_from(
        &self,
        what: &str,
        src: Source<'_>,
        t: usize,
        disp: isize,
        at: Option<At<'_>>,
    ) -> Result<()> {
        let n = src.len();
        if at.is_none() && self.inner.flavor != Flavor::Dynamic && self.pscw_put(t) {
            let (mem, off) = self.static_target(what, t, disp)?;
            Self::check_run(what, t, mem, off, n)?;
            let staged = self.stage_put(t, off, n, |b| {
                src.chunks(Place::Run(0), &mut |c, at| {
                    b[at..at + c.len()].copy_from_slice(c);
                    Ok(())
                })
            })?;
            if staged {
                return Ok(());
            }
        }
        self.inner.stores.set(true);
        self.with_target(what, t, disp, at, n, |mem, place| {
            src.chunks(place, &mut |b, m| mem.write(m, b))
                .map_err(|e| io_err(what, e))
        })
    }

    fn get_loan(
        &self,
        what: &str,
        loan: &Loan,
        t: usize,
        disp: isize,
        at: Option<At<'_>>,
    ) -> Result<()> {
        let n = loan.packed_len();
        self.with_target(what, t, disp, at, n, |mem, place| {
            write_chunks(loan, place, n, &mut |b, m| mem.read(m, b)).map_err(|e| io_err(what, e))
        })
    }

    /// MPI_Put: copy `origin` into rank `target`'s memory at displacement `disp`, its bytes
    /// laid out contiguously there.
    #[inline]
    pub fn put<B: Buffer + ?Sized>(&self, origin: &B, target: i32, disp: isize) -> Result<()> {
        let r = self.put_inner(origin, target, disp, None);
        self.ret("win_put", r)
    }

    /// MPI_Put with a target datatype.
    pub fn put_to<B: Buffer + ?Sized>(
        &self,
        origin: &B,
        target: i32,
        disp: isize,
        at: At<'_>,
    ) -> Result<()> {
        let r = self.put_inner(origin, target, disp, Some(at));
        self.ret("win_put", r)
    }

    #[inline]
    pub(super) fn put_inner<B: Buffer + ?Sized>(
        &self,
        origin: &B,
        target: i32,
        disp: isize,
        at: Option<At<'_>>,
    ) -> Result<()> {
        let Some(t) = self.target(target, Access::Put)? else {
            return Ok(());
        };
        if at.is_none() {
            // A plain slice: its bytes, without a loan.
            let view = origin.view()?;
            no_handles("win_put", view.0.sig())?;
            let r = view
                .0
                .with_shared_bytes(|b| self.put_from("win_put", Source::Bytes(b), t, disp, None));
            if let Some(r) = r {
                return r;
            }
        }
        lending((), |l| {
            let loan = lend(origin, l)?;
            no_handles("win_put", loan.sig())?;
            self.put_loan("win_put", &loan, t, disp, at)
        })
    }

    /// MPI_Get: fill `result` from rank `target`'s memory at `disp`.
    #[inline]
    pub fn get<B: BufferMut + ?Sized>(
        &self,
        result: &mut B,
        target: i32,
        disp: isize,
    ) -> Result<()> {
        let r = self.get_inner(result, target, disp, None);
        self.ret("win_get", r)
    }

    /// MPI_Get with a target datatype.
    pub fn get_from<B: BufferMut + ?Sized>(
        &self,
        result: &mut B,
        target: i32,
        disp: isize,
        at: At<'_>,
    ) -> Result<()> {
        let r = self.get_inner(result, target, disp, Some(at));
        self.ret("win_get", r)
    }

    #[inline]
    pub(super) fn get_inner<B: BufferMut + ?Sized>(
        &self,
        result: &mut B,
        target: i32,
        disp: isize,
        at: Option<At<'_>>,
    ) -> Result<()> {
        let Some(t) = self.target(target, Access::Get)? else {
            return Ok(());
        };
        lending((), |l| {
            let loan = lend_mut(result, l)?;
            no_handles("win_get", loan.sig())?;
            self.get_loan("win_get", &loan, t, disp, at)
        })
    }

    fn acc_lock(&self, t: usize) -> impl FnMut(bool) -> io::Result<()> + '_ {
        move |take| {
            let w = self.inner.seg.word(t, Word::AccLock);
            if take {
                // What the lock guards is read and written with plain copies.
                self.inner.stores.set(true);
                self.wait_rma(t, || sync::try_write_lock(w))
                    .map_err(|e| io::Error::other(e.to_string()))
            } else {
                sync::write_unlock(w);
                Ok(())
            }
        }
    }

    /// Accumulate the data of `loan` (elements `e`) into `t`; the old target data into
    /// `old` (packed) when given.
    #[allow(clippy::too_many_arguments)]
    fn acc_loan(
        &self,
        what: &str,
        loan: &Loan,
        e: &Elem,
        op: Predefined,
        t: usize,
        disp: isize,
        at: Option<At<'_>>,
        mut old: Option<&mut [u8]>,
    ) -> Result<()> {
        let n = loan.packed_len();
        self.with_target(what, t, disp, at, n, |mem, place| {
            self.whole_operation(t, |atomics, lock| {
                let mut pos = 0;
                read_chunks(loan, place, n, &mut |b, m| {
                    let o = old.as_deref_mut().map(|o| &mut o[pos..pos + b.len()]);
                    pos += b.len();
                    acc::apply(mem, m, b.len(), b, o, e, op, atomics, lock)
                })
            })
            .map_err(|x| io_err(what, x))
        })
    }

    /// Run an accumulate's element walk `f` on target `t` as one operation. Without hardware
    /// atomics the target's accumulate lock is held across the whole walk (and `f`'s runs get
    /// a lock that does nothing), so that an accumulate of several elements is atomic as a
    /// whole against the others, as MPICH's are and as programs that read and replace a
    /// structure of bytes (a linked list's next pointer) need. With hardware atomics each
    /// element is one atomic and `f` gets the lock for the elements that are not.
    fn whole_operation(
        &self,
        t: usize,
        f: impl FnOnce(bool, &mut dyn FnMut(bool) -> io::Result<()>) -> io::Result<()>,
    ) -> io::Result<()> {
        let atomics = self.inner.atomics;
        let mut lock = self.acc_lock(t);
        if atomics {
            return f(true, &mut lock);
        }
        lock(true)?;
        let r = f(false, &mut |_| Ok(()));
        lock(false)?;
        r
    }

    /// MPI_Accumulate: `target[i] = origin[i] op target[i]` element-wise at rank `target`'s
    /// displacement `disp`, atomic per element against other accumulates. `op` is a
    /// predefined operation, [`Op::REPLACE`] or [`Op::NO_OP`].
    pub fn accumulate<T: Equivalence>(
        &self,
        origin: &[T],
        target: i32,
        disp: isize,
        op: &Op,
    ) -> Result<()> {
        let r = self.accumulate_inner(origin, target, disp, op);
        self.ret("win_accumulate", r)
    }

    /// [`accumulate`](Self::accumulate) without the error handler.
    pub(super) fn accumulate_inner<T: Equivalence>(
        &self,
        origin: &[T],
        target: i32,
        disp: isize,
        op: &Op,
    ) -> Result<()> {
        {
            const WHAT: &str = "win_accumulate";
            if let (Some(w), Some(Predefined::Sum)) = (int_width::<T>(), op.as_predefined()) {
                let Some(t) = self.target(target, Access::Acc)? else {
                    return Ok(());
                };
                if let Some((mem, off)) = self.atomic_target(WHAT, t, disp, w * origin.len(), w)? {
                    for (i, x) in origin.iter().enumerate() {
                        if let Some(a) = mem.atomic(off + i * w, w) {
                            a.fetch_add(int_bits(x));
                        }
                    }
                    return Ok(());
                }
            }
            let e = elem_of_type::<T>()?;
            let p = acc::check_op(op, &e)?;
            let Some(t) = self.target(target, Access::Acc)? else {
                return Ok(());
            };
            if let Some(o) = as_bytes(origin) {
                // Contiguous bytes already: no loan to walk.
                let n = o.len();
                let atomics = self.inner.atomics;
                let mut lock = self.acc_lock(t);
                return self.with_target(WHAT, t, disp, None, n, |mem, place| {
                    let Place::Run(m) = place else {
                        unreachable!("no target datatype")
                    };
                    acc::apply(mem, m, n, o, None, &e, p, atomics, &mut lock)
                        .map_err(|x| io_err(WHAT, x))
                });
            }
            lending((), |l| {
                let loan = lend(origin, l)?;
                self.acc_loan("win_accumulate", &loan, &e, p, t, disp, None, None)
            })
        }
    }

    /// MPI_Accumulate with datatypes at both ends (both made of one predefined type).
    pub fn accumulate_typed(
        &self,
        origin: Typed<'_>,
        target: i32,
        disp: isize,
        at: At<'_>,
        op: &Op,
    ) -> Result<()> {
        let r = (|| {
            let (view, dt, _) = origin.into_parts();
            let e = elem_of_datatypes(&dt, at.dt)?;
            let p = acc::check_op(op, &e)?;
            let Some(t) = self.target(target, Access::Acc)? else {
                return Ok(());
            };
            lending((), |l| {
                let loan = Loan::new(view, l);
                self.acc_loan("win_accumulate", &loan, &e, p, t, disp, Some(at), None)
            })
        })();
        self.ret("win_accumulate", r)
    }

    /// MPI_Get_accumulate: as [`accumulate`](Self::accumulate), with the target's data from
    /// before the operation into `result` (with [`Op::NO_OP`], `origin` may be empty and the
    /// call is an atomic get of `result.len()` elements).
    pub fn get_accumulate<T: Equivalence>(
        &self,
        origin: &[T],
        result: &mut [T],
        target: i32,
        disp: isize,
        op: &Op,
    ) -> Result<()> {
        let r = (|| {
            let e = elem_of_type::<T>()?;
            let p = acc::check_op(op, &e)?;
            let Some(t) = self.target(target, Access::Acc)? else {
                return Ok(());
            };
            if p != Predefined::NoOp && origin.len() != result.len() {
                return Err(err(
                    ErrorClass::Count,
                    format!(
                        "win_get_accumulate: origin of {} elements, result of {}",
                        origin.len(),
                        result.len()
                    ),
                ));
            }
            self.get_acc_common(
                t,
                disp,
                None,
                &e,
                p,
                |l| lend(origin, l),
                |l| lend_mut(result, l),
            )
        })();
        self.ret("win_get_accumulate", r)
    }

    /// MPI_Get_accumulate with datatypes at the three buffers.
    pub fn get_accumulate_typed(
        &self,
        origin: Typed<'_>,
        result: TypedMut<'_>,
        target: i32,
        disp: isize,
        at: At<'_>,
        op: &Op,
    ) -> Result<()> {
        let r = (|| {
            let (oview, odt, _) = origin.into_parts();
            let (rview, rdt, _) = result.into_parts();
            let e = elem_of_datatypes(&odt, at.dt)?;
            let e2 = elem_of_datatypes(&rdt, at.dt)?;
            if e.basic != e2.basic {
                return Err(err(ErrorClass::Type, "win_get_accumulate: the result and target datatypes are of different basic types"));
            }
            let p = acc::check_op(op, &e)?;
            let Some(t) = self.target(target, Access::Acc)? else {
                return Ok(());
            };
            let (mut ov, mut rv) = (Some(oview), Some(rview));
            self.get_acc_common(
                t,
                disp,
                Some(at),
                &e,
                p,
                |l| Ok(Loan::new(ov.take().expect("one origin"), l)),
                |l| Ok(Loan::new(rv.take().expect("one result"), l)),
            )
        })();
        self.ret("win_get_accumulate", r)
    }

    #[allow(clippy::too_many_arguments)]
    fn get_acc_common<'b>(
        &self,
        t: usize,
        disp: isize,
        at: Option<At<'_>>,
        e: &Elem,
        p: Predefined,
        origin: impl for<'l> FnOnce(&'l crate::sys::lend::Lending<'l, 'b, ()>) -> Result<Loan>,
        result: impl for<'l> FnOnce(&'l crate::sys::lend::Lending<'l, 'b, ()>) -> Result<Loan>,
    ) -> Result<()> {
        const WHAT: &str = "win_get_accumulate";
        lending((), |l| {
            let res = result(l)?;
            let n = res.packed_len();
            let mut old = vec![0u8; n];
            if p == Predefined::NoOp {
                // No origin data: walk the target with the result's shape.
                self.with_target(WHAT, t, disp, at, n, |mem, place| {
                    let zero = Loan::zeroed(n);
                    self.whole_operation(t, |atomics, lock| {
                        let mut pos = 0;
                        read_chunks(&zero, place, n, &mut |b, m| {
                            let o = &mut old[pos..pos + b.len()];
                            pos += b.len();
                            acc::apply(mem, m, b.len(), b, Some(o), e, p, atomics, lock)
                        })
                    })
                    .map_err(|x| io_err(WHAT, x))
                })?;
            } else {
                let org = origin(l)?;
                if org.packed_len() != n {
                    return Err(err(
                        ErrorClass::Type,
                        format!(
                            "{WHAT}: origin of {} bytes, result of {n}",
                            org.packed_len()
                        ),
                    ));
                }
                self.acc_loan(WHAT, &org, e, p, t, disp, at, Some(&mut old))?;
            }
            res.unpack_from(&old)
                .map_err(|x| err(ErrorClass::Buffer, format!("{WHAT}: result buffer: {x:?}")))
        })
    }

    /// MPI_Fetch_and_op: `*result` = the target element, which becomes `*origin op` it,
    /// atomically.
    #[inline]
    pub fn fetch_and_op<T: Equivalence>(
        &self,
        origin: &T,
        result: &mut T,
        target: i32,
        disp: isize,
        op: &Op,
    ) -> Result<()> {
        let r = (|| {
            const WHAT: &str = "win_fetch_and_op";
            let fast = match op.as_predefined() {
                Some(p @ (Predefined::Sum | Predefined::NoOp | Predefined::Replace)) => {
                    int_width::<T>().map(|w| (p, w))
                }
                _ => None,
            };
            if let Some((p, w)) = fast {
                let Some(t) = self.target(target, Access::Acc)? else {
                    return Ok(());
                };
                if let Some((mem, off)) = self.atomic_target(WHAT, t, disp, w, w)? {
                    if let Some(a) = mem.atomic(off, w) {
                        let old = match p {
                            Predefined::Sum => a.fetch_add(int_bits(origin)),
                            Predefined::Replace => a.swap(int_bits(origin)),
                            _ => a.load(),
                        };
                        if let Some(res) = as_bytes_mut(std::slice::from_mut(result)) {
                            res.copy_from_slice(&old.to_le_bytes()[..w]);
                        }
                        return Ok(());
                    }
                }
            }
            let e = elem_of_type::<T>()?;
            let p = acc::check_op(op, &e)?;
            let Some(t) = self.target(target, Access::Acc)? else {
                return Ok(());
            };
            let o = as_bytes(std::slice::from_ref(origin)).ok_or_else(|| padded::<T>())?;
            let res = as_bytes_mut(std::slice::from_mut(result)).ok_or_else(|| padded::<T>())?;
            let n = o.len();
            let atomics = self.inner.atomics;
            let mut lock = self.acc_lock(t);
            self.with_target("win_fetch_and_op", t, disp, None, n, |mem, place| {
                let Place::Run(m) = place else {
                    unreachable!("no target datatype")
                };
                acc::apply(mem, m, n, o, Some(res), &e, p, atomics, &mut lock)
                    .map_err(|x| io_err("win_fetch_and_op", x))
            })
        })();
        self.ret("win_fetch_and_op", r)
    }

    /// MPI_Compare_and_swap: `*result` = the target element; it becomes `*origin` if it was
    /// `*compare`. Integer types only (MPI_ERR_TYPE for floating point and pairs).
    pub fn compare_and_swap<T: Equivalence>(
        &self,
        origin: &T,
        compare: &T,
        result: &mut T,
        target: i32,
        disp: isize,
    ) -> Result<()> {
        let r = (|| {
            let e = elem_of_type::<T>()?;
            if !e.is_integer() {
                return Err(err(
                    ErrorClass::Type,
                    format!("win_compare_and_swap on {}: only integer types (and MPI_BYTE) compare and swap", e.basic.mpi_name()),
                ));
            }
            let Some(t) = self.target(target, Access::Acc)? else {
                return Ok(());
            };
            let o = as_bytes(std::slice::from_ref(origin)).ok_or_else(|| padded::<T>())?;
            let c = as_bytes(std::slice::from_ref(compare)).ok_or_else(|| padded::<T>())?;
            let res = as_bytes_mut(std::slice::from_mut(result)).ok_or_else(|| padded::<T>())?;
            let atomics = self.inner.atomics;
            let mut lock = self.acc_lock(t);
            self.with_target(
                "win_compare_and_swap",
                t,
                disp,
                None,
                o.len(),
                |mem, place| {
                    let Place::Run(m) = place else {
                        unreachable!("no target datatype")
                    };
                    acc::compare_swap(mem, m, o, c, res, atomics, &mut lock)
                        .map_err(|x| io_err("win_compare_and_swap", x))
                },
            )
        })();
        self.ret("win_compare_and_swap", r)
    }

    /// A request that is complete: what the request-based operations return, since every
    /// operation is done when its call returns. Public for bindings that do such an operation
    /// through another call (the C ABI's MPI_Rput with a target datatype is `put_to`).
    pub fn done_request<'s>(&self) -> Request<'s> {
        let c = &self.inner.comm;
        Request::nonblocking(
            &c.eng,
            c.origin(),
            Err(Ok(Status::empty())),
            crate::p2p::wait::Blocked::wait(),
        )
    }

    /// MPI_Rput: [`put`](Self::put), returning a request (complete: the data is at the
    /// target when the call returns).
    pub fn rput<B: Buffer + ?Sized>(
        &self,
        origin: &B,
        target: i32,
        disp: isize,
    ) -> Result<Request<'static>> {
        self.put(origin, target, disp)?;
        Ok(self.done_request())
    }

    /// MPI_Rget.
    pub fn rget<B: BufferMut + ?Sized>(
        &self,
        result: &mut B,
        target: i32,
        disp: isize,
    ) -> Result<Request<'static>> {
        self.get(result, target, disp)?;
        Ok(self.done_request())
    }

    /// MPI_Raccumulate.
    pub fn raccumulate<T: Equivalence>(
        &self,
        origin: &[T],
        target: i32,
        disp: isize,
        op: &Op,
    ) -> Result<Request<'static>> {
        self.accumulate(origin, target, disp, op)?;
        Ok(self.done_request())
    }

    /// MPI_Rget_accumulate.
    pub fn rget_accumulate<T: Equivalence>(
        &self,
        origin: &[T],
        result: &mut [T],
        target: i32,
        disp: isize,
        op: &Op,
    ) -> Result<Request<'static>> {
        self.get_accumulate(origin, result, target, disp, op)?;
        Ok(self.done_request())
    }
}

fn padded<T>() -> crate::error::Error {
    err(
        ErrorClass::Type,
        format!(
            "{} has padding: atomics take types without",
            std::any::type_name::<T>()
        ),
    )
}

/// The origin data of a put: a loan of any buffer, or the bytes of a plain slice.
#[derive(Clone, Copy)]
enum Source<'a> {
    Loan(&'a Loan),
    Bytes(&'a [u8]),
}

impl Source<'_> {
    fn len(&self) -> usize {
        match self {
            Source::Loan(l) => l.packed_len(),
            Source::Bytes(b) => b.len(),
        }
    }

    /// [`read_chunks`] of all the data into `place`.
    fn chunks(
        &self,
        place: Place<'_>,
        f: &mut dyn FnMut(&[u8], usize) -> io::Result<()>,
    ) -> io::Result<()> {
        match (self, place) {
            (Source::Loan(l), place) => read_chunks(l, place, l.packed_len(), f),
            (Source::Bytes(b), Place::Run(m)) => f(b, m),
            (Source::Bytes(b), place) => read_chunks(&Loan::copied(b), place, b.len(), f),
        }
    }
}

/// The width of `T` when it is itself a 4- or 8-byte integer (its datatype one basic
/// integer element of its whole size): the accumulates that go straight to one atomic.
#[inline(always)]
fn int_width<T: Equivalence>() -> Option<usize> {
    let w = std::mem::size_of::<T>();
    let int = T::SIG == Sig::basic(1, w as u8) || T::SIG == Sig::basic(2, w as u8);
    (T::GAPLESS && int && (w == 4 || w == 8)).then_some(w)
}

/// `x`'s bytes as the value an [`Atomic`](crate::fabric::window::Atomic) of its width takes.
#[inline(always)]
fn int_bits<T: Plain>(x: &T) -> u64 {
    let mut v = [0u8; 8];
    if let Some(b) = as_bytes(std::slice::from_ref(x)) {
        v[..b.len()].copy_from_slice(b);
    }
    u64::from_le_bytes(v)
}

/// The accumulate element of slices of `T`, worked out once per type and thread (making
/// `T`'s datatype allocates, which the accumulate path must not).
fn elem_of_type<T: Equivalence>() -> Result<Elem> {
    use std::any::TypeId;
    use std::cell::RefCell;
    thread_local! {
        static KNOWN: RefCell<Vec<(TypeId, Elem)>> = const { RefCell::new(Vec::new()) };
    }
    let id = TypeId::of::<T>();
    if let Some(e) = KNOWN.with(|k| k.borrow().iter().find(|(t, _)| *t == id).map(|x| x.1)) {
        return Ok(e);
    }
    let e = elem_of_type_slow::<T>()?;
    KNOWN.with(|k| k.borrow_mut().push((id, e)));
    Ok(e)
}

fn elem_of_type_slow<T: Equivalence>() -> Result<Elem> {
    match T::datatype().reduction_basic() {
        Some(b) => Elem::of(b),
        None => Err(err(
            ErrorClass::Type,
            format!(
                "accumulate on {}: it is not made of one predefined type",
                std::any::type_name::<T>()
            ),
        )),
    }
}

/// The accumulate element of an origin and a target datatype, which must be made of the
/// same predefined type (MPI_ERR_TYPE otherwise).
fn elem_of_datatypes(origin: &Datatype, target: &Datatype) -> Result<Elem> {
    match (origin.reduction_basic(), target.reduction_basic()) {
        (Some(a), Some(b)) if a == b => Elem::of(a),
        _ => Err(err(
            ErrorClass::Type,
            format!(
                "accumulate from {} to {}: both must be made of the same one predefined type",
                origin.describe(),
                target.describe()
            ),
        )),
    }
}
