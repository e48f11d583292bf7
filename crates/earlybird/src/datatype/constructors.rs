//! Derived datatype constructors (MPI 4.1 §5.1.2–§5.1.7): each one lays out copies of older
//! types and is flattened here, once, into blocks and a signature.
#![forbid(unsafe_code)]

use super::decode::Combiner;
use super::{BasicType, Datatype, Inner};
use crate::error::{Error, ErrorClass, Result};
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// Most blocks one element of a derived type may flatten to (16 bytes each).
const MAX_BLOCKS: usize = 1 << 24;

/// Storage order of a subarray's dimensions (MPI_ORDER_C / MPI_ORDER_FORTRAN).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// Row-major: the last dimension varies fastest.
    C,
    /// Column-major: the first dimension varies fastest.
    Fortran,
}

/// Block lengths of an indexed type: one per block, or one for all.
#[derive(Clone, Copy)]
enum Lengths<'a> {
    Each(&'a [usize]),
    All(usize),
}

/// Accumulates the type map of a derived type, part by part, in type-map order.
struct Builder {
    what: &'static str,
    blocks: Vec<(isize, usize)>,
    sig: Vec<(BasicType, usize)>,
    size: usize,
    /// Bounds of the parts whose bounds are natural (their data's).
    bounds: Option<(isize, isize)>,
    /// Bounds of the parts with explicit bounds (resized, subarray, or built of such): as
    /// MPI's lb/ub markers, they decide the result's bounds when there are any.
    ebounds: Option<(isize, isize)>,
    true_bounds: Option<(isize, isize)>,
    align: usize,
    sig_code: Option<super::Sig>,
    /// Whether MPIX_HANDLE_SYNC may be a part (only in the datatype of a Rust array).
    handles_ok: bool,
}

/// Widen `acc` to take in `(lo, hi)`.
fn widen(acc: &mut Option<(isize, isize)>, (lo, hi): (isize, isize)) {
    *acc = Some(match *acc {
        None => (lo, hi),
        Some((l, u)) => (l.min(lo), u.max(hi)),
    });
}

fn too_many(what: &str, count: usize, blocks: usize) -> Error {
    Error::new(
        ErrorClass::Arg,
        format!(
            "{what}: the type would flatten to more than {MAX_BLOCKS} blocks ({count} x {blocks})"
        ),
    )
}

/// Seed 001: MPIX_HANDLE_SYNC may not be used to build derived datatypes (MPI_ERR_TYPE).
fn refuse_handle_sync(what: &str, t: &Datatype) -> Result<()> {
    if t.has_handle_sync() {
        return Err(Error::new(
            ErrorClass::Type,
            format!("{what}: MPIX_HANDLE_SYNC cannot be part of a derived datatype"),
        ));
    }
    Ok(())
}

fn overflow(what: &str) -> Error {
    Error::new(
        ErrorClass::Arg,
        format!("{what}: displacements overflow the address space"),
    )
}

impl Builder {
    fn new(what: &'static str) -> Builder {
        Builder {
            what,
            blocks: Vec::new(),
            sig: Vec::new(),
            size: 0,
            bounds: None,
            ebounds: None,
            true_bounds: None,
            align: 1,
            sig_code: None,
            handles_ok: false,
        }
    }

    /// `count` consecutive elements of `t` (each `t.extent()` after the previous) starting
    /// at byte displacement `disp`.
    fn add(&mut self, disp: isize, count: usize, t: &Datatype) -> Result<()> {
        if count == 0 {
            return Ok(());
        }
        let what = self.what;
        if !self.handles_ok {
            refuse_handle_sync(what, t)?;
        }
        let ext = t.extent();
        let last = isize::try_from(count - 1)
            .ok()
            .and_then(|c| c.checked_mul(ext))
            .ok_or_else(|| overflow(what))?;
        let span = |lo: isize, hi: isize| -> Result<(isize, isize)> {
            let a = disp
                .checked_add(last.min(0))
                .and_then(|x| x.checked_add(lo));
            let b = disp
                .checked_add(last.max(0))
                .and_then(|x| x.checked_add(hi));
            a.zip(b).ok_or_else(|| overflow(what))
        };
        let b = span(t.0.lb, t.0.ub)?;
        widen(
            if t.0.explicit {
                &mut self.ebounds
            } else {
                &mut self.bounds
            },
            b,
        );
        self.align = self.align.max(t.0.align);
        if t.0.size == 0 {
            return Ok(());
        }
        let tb = span(t.0.true_lb, t.0.true_ub)?;
        widen(&mut self.true_bounds, tb);
        self.size = count
            .checked_mul(t.0.size)
            .and_then(|n| n.checked_add(self.size))
            .ok_or_else(|| overflow(what))?;
        self.sig_code = Some(match self.sig_code {
            None => t.0.sig_code,
            Some(c) => c.join(t.0.sig_code),
        });
        if let ([(d, l)], [(b, k)]) = (&t.0.blocks[..], &t.0.sig[..]) {
            if *l as isize == ext {
                // Back-to-back copies of one run of one basic type: one block, one run,
                // whatever the count.
                self.push_block(disp + d, count * l);
                self.push_sig(*b, count * k);
                return Ok(());
            }
        }
        if self
            .blocks
            .len()
            .saturating_add(count.saturating_mul(t.0.blocks.len()))
            > MAX_BLOCKS
        {
            return Err(too_many(what, count, t.0.blocks.len()));
        }
        let mut base = disp;
        for _ in 0..count {
            for &(d, l) in t.0.blocks.iter() {
                self.push_block(base + d, l);
            }
            for &(b, k) in t.0.sig.iter() {
                self.push_sig(b, k);
            }
            // Past the last copy this may leave the address space; it is not used then.
            base = base.wrapping_add(ext);
        }
        Ok(())
    }

    #[inline]
    fn push_sig(&mut self, b: BasicType, k: usize) {
        match self.sig.last_mut() {
            Some((lb, lk)) if *lb == b => *lk += k,
            _ => self.sig.push((b, k)),
        }
    }

    #[inline]
    fn push_block(&mut self, at: isize, len: usize) {
        match self.blocks.last_mut() {
            Some((d, l)) if *d + *l as isize == at => *l += len,
            _ => self.blocks.push((at, len)),
        }
    }

    fn finish(self) -> Datatype {
        let explicit = self.ebounds.is_some();
        let (lb, ub) = self.ebounds.or(self.bounds).unwrap_or((0, 0));
        let (true_lb, true_ub) = self.true_bounds.unwrap_or((0, 0));
        Datatype(Rc::new(Inner {
            basic: None,
            blocks: Rc::from(self.blocks),
            sig: Rc::from(self.sig),
            size: self.size,
            lb,
            ub,
            true_lb,
            true_ub,
            align: self.align,
            explicit,
            sig_code: self.sig_code.unwrap_or(super::Sig::MIXED),
            committed: Cell::new(false),
            name: RefCell::new(String::new()),
            combiner: None,
        }))
    }
}

fn to_isize(what: &str, name: &str, v: usize) -> Result<isize> {
    isize::try_from(v)
        .map_err(|_| Error::new(ErrorClass::Arg, format!("{what}: {name} {v} is too large")))
}

/// `a * b` in bytes, or an overflow error.
fn mul(what: &str, a: isize, b: isize) -> Result<isize> {
    a.checked_mul(b).ok_or_else(|| overflow(what))
}

fn same_len(what: &str, a: (&str, usize), b: (&str, usize)) -> Result<()> {
    if a.1 == b.1 {
        Ok(())
    } else {
        Err(Error::new(
            ErrorClass::Arg,
            format!(
                "{what}: {} has {} entries but {} has {}",
                a.0, a.1, b.0, b.1
            ),
        ))
    }
}

impl Datatype {
    /// MPI_Type_contiguous: `count` copies of `old`, each one extent after the previous.
    pub fn contiguous(count: usize, old: &Datatype) -> Result<Datatype> {
        Self::contiguous_of(count, old, false)
    }

    /// The datatype of a Rust array `[T; N]`: as [`contiguous`](Self::contiguous), and an
    /// array of sync counters is allowed (it is how Rust holds several MPIX_HANDLE_SYNC).
    pub(crate) fn array(count: usize, old: &Datatype) -> Result<Datatype> {
        Self::contiguous_of(count, old, true)
    }

    fn contiguous_of(count: usize, old: &Datatype, handles_ok: bool) -> Result<Datatype> {
        let mut b = Builder::new("type_contiguous");
        b.handles_ok = handles_ok;
        b.add(0, count, old)?;
        Ok(b.finish().made_by(Combiner::Contiguous {
            count,
            old: old.clone(),
        }))
    }

    /// MPI_Type_vector: `count` blocks of `blocklength` elements of `old`, block starts
    /// `stride` elements apart (negative strides allowed).
    pub fn vector(
        count: usize,
        blocklength: usize,
        stride: isize,
        old: &Datatype,
    ) -> Result<Datatype> {
        Self::hvector_named(
            "type_vector",
            count,
            blocklength,
            mul("type_vector", stride, old.extent())?,
            old,
        )
        .map(|t| {
            t.made_by(Combiner::Vector {
                count,
                blocklength,
                stride,
                old: old.clone(),
            })
        })
    }

    /// MPI_Type_create_hvector: as [`vector`](Self::vector) with the stride in bytes.
    pub fn hvector(
        count: usize,
        blocklength: usize,
        stride_bytes: isize,
        old: &Datatype,
    ) -> Result<Datatype> {
        Self::hvector_named("type_create_hvector", count, blocklength, stride_bytes, old).map(|t| {
            t.made_by(Combiner::Hvector {
                count,
                blocklength,
                stride_bytes,
                old: old.clone(),
            })
        })
    }

    fn hvector_named(
        what: &'static str,
        count: usize,
        blocklength: usize,
        stride_bytes: isize,
        old: &Datatype,
    ) -> Result<Datatype> {
        let mut b = Builder::new(what);
        // Refuse a type that cannot merge into few blocks before building any of it.
        let merges = old.block_count() == 1
            && old.extent() == old.size() as isize
            && blocklength.checked_mul(old.size()).map(|n| n as isize) == Some(stride_bytes);
        if !merges && count.saturating_mul(old.block_count()) > MAX_BLOCKS {
            return Err(too_many(what, count, old.block_count()));
        }
        for i in 0..count {
            b.add(
                mul(what, to_isize(what, "count", i)?, stride_bytes)?,
                blocklength,
                old,
            )?;
        }
        Ok(b.finish())
    }

    /// MPI_Type_indexed: block `i` is `blocklengths[i]` elements of `old` at
    /// `displacements[i]` extents of `old`.
    pub fn indexed(
        blocklengths: &[usize],
        displacements: &[isize],
        old: &Datatype,
    ) -> Result<Datatype> {
        Self::blocks(
            "type_indexed",
            Lengths::Each(blocklengths),
            displacements,
            old.extent(),
            old,
        )
        .map(|t| {
            t.made_by(Combiner::Indexed {
                blocklengths: blocklengths.to_vec(),
                displacements: displacements.to_vec(),
                old: old.clone(),
            })
        })
    }

    /// MPI_Type_create_hindexed: as [`indexed`](Self::indexed) with byte displacements.
    pub fn hindexed(
        blocklengths: &[usize],
        displacements: &[isize],
        old: &Datatype,
    ) -> Result<Datatype> {
        Self::blocks(
            "type_create_hindexed",
            Lengths::Each(blocklengths),
            displacements,
            1,
            old,
        )
        .map(|t| {
            t.made_by(Combiner::Hindexed {
                blocklengths: blocklengths.to_vec(),
                displacements: displacements.to_vec(),
                old: old.clone(),
            })
        })
    }

    /// MPI_Type_create_indexed_block: blocks of one length at displacements in extents.
    pub fn indexed_block(
        blocklength: usize,
        displacements: &[isize],
        old: &Datatype,
    ) -> Result<Datatype> {
        let unit = old.extent();
        Self::blocks(
            "type_create_indexed_block",
            Lengths::All(blocklength),
            displacements,
            unit,
            old,
        )
        .map(|t| {
            t.made_by(Combiner::IndexedBlock {
                blocklength,
                displacements: displacements.to_vec(),
                old: old.clone(),
            })
        })
    }

    /// MPI_Type_create_hindexed_block: blocks of one length at byte displacements.
    pub fn hindexed_block(
        blocklength: usize,
        displacements: &[isize],
        old: &Datatype,
    ) -> Result<Datatype> {
        Self::blocks(
            "type_create_hindexed_block",
            Lengths::All(blocklength),
            displacements,
            1,
            old,
        )
        .map(|t| {
            t.made_by(Combiner::HindexedBlock {
                blocklength,
                displacements: displacements.to_vec(),
                old: old.clone(),
            })
        })
    }

    /// Blocks of `old` at `displacements` (in units of `unit` bytes).
    fn blocks(
        what: &'static str,
        lengths: Lengths,
        displacements: &[isize],
        unit: isize,
        old: &Datatype,
    ) -> Result<Datatype> {
        if let Lengths::Each(l) = lengths {
            same_len(
                what,
                ("blocklengths", l.len()),
                ("displacements", displacements.len()),
            )?;
        }
        let mut b = Builder::new(what);
        for (i, &d) in displacements.iter().enumerate() {
            let n = match lengths {
                Lengths::Each(l) => l[i],
                Lengths::All(n) => n,
            };
            b.add(mul(what, d, unit)?, n, old)?;
        }
        Ok(b.finish())
    }

    /// MPI_Type_create_struct: block `i` is `blocklengths[i]` elements of `types[i]` at byte
    /// displacement `displacements[i]`. The extent is rounded up to the largest alignment of
    /// the basic types inside, as a C compiler pads a struct, unless a member has explicit
    /// bounds (a resized type, or one built of such): then, as with MPI's lb/ub markers, the
    /// explicit bounds alone decide. Resize the result
    /// ([`create_resized`](Self::create_resized)) to set the extent exactly.
    pub fn create_struct(
        blocklengths: &[usize],
        displacements: &[isize],
        types: &[Datatype],
    ) -> Result<Datatype> {
        Self::struct_of(blocklengths, displacements, types, false)
    }

    /// The datatype `#[derive(Equivalence)]` makes for a `#[repr(C)]` struct: its fields'
    /// types at their offsets, resized to the struct's size. A Rust struct may hold sync
    /// counters (MPIX_HANDLE_SYNC), which a struct datatype made by the program may not.
    #[doc(hidden)]
    pub fn derived_struct(
        displacements: &[isize],
        types: &[Datatype],
        size: isize,
    ) -> Result<Datatype> {
        let s = Self::struct_of(&vec![1; types.len()], displacements, types, true)?;
        Ok(s.resized_to(0, size))
    }

    fn struct_of(
        blocklengths: &[usize],
        displacements: &[isize],
        types: &[Datatype],
        handles_ok: bool,
    ) -> Result<Datatype> {
        let what = "type_create_struct";
        same_len(
            what,
            ("blocklengths", blocklengths.len()),
            ("displacements", displacements.len()),
        )?;
        same_len(
            what,
            ("blocklengths", blocklengths.len()),
            ("types", types.len()),
        )?;
        let mut b = Builder::new(what);
        b.handles_ok = handles_ok;
        for ((&n, &d), t) in blocklengths.iter().zip(displacements).zip(types) {
            b.add(d, n, t)?;
        }
        // Padding as a C compiler adds it, unless a member has explicit bounds (MPI's
        // markers then decide alone).
        if let (Some((lb, ub)), None) = (b.bounds, b.ebounds) {
            let (a, ext) = (b.align as isize, ub - lb);
            if ext > 0 {
                b.bounds = Some((lb, lb + (ext + a - 1) / a * a));
            }
        }
        Ok(b.finish().made_by(Combiner::Struct {
            blocklengths: blocklengths.to_vec(),
            displacements: displacements.to_vec(),
            types: types.to_vec(),
        }))
    }

    /// MPI_Type_create_subarray: the `subsizes` block starting at `starts` of an array of
    /// `sizes` elements of `old`, stored in `order`. Its extent is the whole array's.
    pub fn create_subarray(
        sizes: &[usize],
        subsizes: &[usize],
        starts: &[usize],
        order: Order,
        old: &Datatype,
    ) -> Result<Datatype> {
        Self::subarray_map(sizes, subsizes, starts, order, old).map(|t| {
            t.made_by(Combiner::Subarray {
                sizes: sizes.to_vec(),
                subsizes: subsizes.to_vec(),
                starts: starts.to_vec(),
                order,
                old: old.clone(),
            })
        })
    }

    fn subarray_map(
        sizes: &[usize],
        subsizes: &[usize],
        starts: &[usize],
        order: Order,
        old: &Datatype,
    ) -> Result<Datatype> {
        let what = "type_create_subarray";
        same_len(what, ("sizes", sizes.len()), ("subsizes", subsizes.len()))?;
        same_len(what, ("sizes", sizes.len()), ("starts", starts.len()))?;
        if sizes.is_empty() {
            return Err(Error::new(
                ErrorClass::Arg,
                format!("{what}: no dimensions"),
            ));
        }
        for (i, ((&n, &s), &st)) in sizes.iter().zip(subsizes).zip(starts).enumerate() {
            if n == 0 || s > n || st > n - s {
                return Err(Error::new(
                    ErrorClass::Arg,
                    format!("{what}: dimension {i}: size {n}, subsize {s}, start {st} (need size >= 1 and start + subsize <= size)"),
                ));
            }
        }
        // Work in C order: the last dimension is the fastest.
        let (mut sz, mut sub, mut st) = (sizes.to_vec(), subsizes.to_vec(), starts.to_vec());
        if order == Order::Fortran {
            sz.reverse();
            sub.reverse();
            st.reverse();
        }
        let nd = sz.len();
        let ext = old.extent();
        // Element strides of each dimension.
        let mut stride = vec![1isize; nd];
        for i in (0..nd - 1).rev() {
            stride[i] = mul(what, stride[i + 1], to_isize(what, "size", sz[i + 1])?)?;
        }
        let total = mul(what, stride[0], to_isize(what, "size", sz[0])?)?;
        let mut b = Builder::new(what);
        if sub.iter().all(|&s| s > 0) {
            // Each innermost row of the block is `sub[nd-1]` consecutive elements.
            let mut idx = vec![0usize; nd - 1];
            loop {
                let mut off = st[nd - 1] as isize;
                for d in 0..nd - 1 {
                    off += (st[d] + idx[d]) as isize * stride[d];
                }
                b.add(mul(what, off, ext)?, sub[nd - 1], old)?;
                // Next row, odometer style.
                let mut d = nd - 1;
                loop {
                    if d == 0 {
                        return b.finish_subarray(mul(what, total, ext)?);
                    }
                    d -= 1;
                    idx[d] += 1;
                    if idx[d] < sub[d] {
                        break;
                    }
                    idx[d] = 0;
                }
            }
        }
        b.finish_subarray(mul(what, total, ext)?)
    }

    /// MPI_Type_create_resized: `old` with lower bound `lb` and extent `extent` (the stride of
    /// consecutive elements); the data stays where it is.
    pub fn create_resized(old: &Datatype, lb: isize, extent: isize) -> Result<Datatype> {
        refuse_handle_sync("type_create_resized", old)?;
        lb.checked_add(extent)
            .ok_or_else(|| overflow("type_create_resized"))?;
        Ok(old.resized_to(lb, extent))
    }

    /// `self` with lower bound `lb` and extent `extent` (checked not to overflow).
    fn resized_to(&self, lb: isize, extent: isize) -> Datatype {
        self.copy_with(lb, lb + extent, false, true)
            .made_by(Combiner::Resized {
                lb,
                extent,
                old: self.clone(),
            })
    }

    /// MPI_Type_dup: a new handle with the same type map, committed if `self` is.
    pub fn dup(&self) -> Result<Datatype> {
        refuse_handle_sync("type_dup", self)?;
        Ok(self
            .copy_with(self.0.lb, self.0.ub, self.is_committed(), self.0.explicit)
            .made_by(Combiner::Dup(self.clone())))
    }

    fn copy_with(&self, lb: isize, ub: isize, committed: bool, explicit: bool) -> Datatype {
        let o = &self.0;
        Datatype(Rc::new(Inner {
            basic: None,
            blocks: o.blocks.clone(),
            sig: o.sig.clone(),
            size: o.size,
            lb,
            ub,
            true_lb: o.true_lb,
            true_ub: o.true_ub,
            align: o.align,
            explicit,
            sig_code: o.sig_code,
            committed: Cell::new(committed),
            name: RefCell::new(String::new()),
            combiner: None,
        }))
    }
}

impl Builder {
    /// A subarray's type: lower bound 0 and the whole array's extent.
    fn finish_subarray(self, extent: isize) -> Result<Datatype> {
        let t = self.finish();
        Ok(t.copy_with(0, extent, false, true))
    }
}
