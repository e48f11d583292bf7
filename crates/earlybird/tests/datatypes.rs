//! Derived datatypes (MPI 4.1 §5) against a reference: random nested layouts (vectors of
//! structs with gaps, negative strides, resized extents, indexed blocks, subarrays) are
//! interpreted by a naive type-map expander written from the standard's definitions, and
//! `Datatype::pack`, `unpack`, extents and element counts must agree with it. The same layouts
//! are sent and received across ranks at eager and rendezvous sizes, typed on both sides and
//! typed against plain bytes, as thread jobs and under ebrun.

mod common;

use common::Rng;
use earlybird::{
    Datatype, ErrHandler, ErrorClass, Order, Result, Typed, TypedMut, Universe, ANY_SOURCE,
};
use proptest::prelude::*;

// ---- a reference type-map expander --------------------------------------------------------

/// A datatype as a tree, built both ways: by the library's constructors and by the reference.
#[derive(Clone, Debug)]
enum Spec {
    /// A basic type of this many bytes (1, 2, 4 or 8).
    Basic(usize),
    Contiguous(usize, Box<Spec>),
    /// count, blocklength, stride in extents of the child.
    Vector(usize, usize, isize, Box<Spec>),
    /// count, blocklength, stride in bytes.
    Hvector(usize, usize, isize, Box<Spec>),
    /// (blocklength, displacement in extents) pairs.
    Indexed(Vec<(usize, isize)>, Box<Spec>),
    /// blocklength, byte displacements.
    HindexedBlock(usize, Vec<isize>, Box<Spec>),
    /// (blocklength, byte displacement, member).
    Struct(Vec<(usize, isize, Spec)>),
    /// lb, extent.
    Resized(isize, isize, Box<Spec>),
    /// sizes, subsizes, starts (C order).
    Subarray(Vec<usize>, Vec<usize>, Vec<usize>, Box<Spec>),
}

/// The reference: type map (byte offset, size) in order, and (lb, ub), which are explicit
/// (MPI's lb/ub markers: set by resized and subarray, carried by types built of them) or
/// natural.
#[derive(Clone, Debug)]
struct Map {
    entries: Vec<(isize, usize)>,
    lb: isize,
    ub: isize,
    align: usize,
    explicit: bool,
}

/// Bounds being accumulated: natural ones, and the markers' if any part has them.
#[derive(Default)]
struct Bounds {
    natural: Option<(isize, isize)>,
    markers: Option<(isize, isize)>,
}

impl Bounds {
    fn take(&mut self, lb: isize, ub: isize, explicit: bool) {
        let b = if explicit {
            &mut self.markers
        } else {
            &mut self.natural
        };
        *b = Some(match *b {
            None => (lb, ub),
            Some((l, u)) => (l.min(lb), u.max(ub)),
        });
    }
    /// MPI: the markers decide when there are any.
    fn result(&self) -> (isize, isize, bool) {
        match (self.markers, self.natural) {
            (Some((l, u)), _) => (l, u, true),
            (None, Some((l, u))) => (l, u, false),
            (None, None) => (0, 0, false),
        }
    }
}

impl Map {
    fn extent(&self) -> isize {
        self.ub - self.lb
    }
}

/// MPI's definition: `count` copies of `m` at `disp + j * extent(m)`, appended to `out`.
fn place(out: &mut Map, bounds: &mut Bounds, disp: isize, count: usize, m: &Map) {
    if count == 0 {
        return;
    }
    for j in 0..count as isize {
        let at = disp + j * m.extent();
        for &(o, s) in &m.entries {
            out.entries.push((at + o, s));
        }
        bounds.take(at + m.lb, at + m.ub, m.explicit);
    }
    out.align = out.align.max(m.align);
}

fn reference(s: &Spec) -> Map {
    let mut out = Map {
        entries: vec![],
        lb: 0,
        ub: 0,
        align: 1,
        explicit: false,
    };
    let mut b = Bounds::default();
    let first = &mut b;
    match s {
        Spec::Basic(n) => {
            return Map {
                entries: vec![(0, *n)],
                lb: 0,
                ub: *n as isize,
                align: *n,
                explicit: false,
            }
        }
        Spec::Contiguous(c, t) => place(&mut out, first, 0, *c, &reference(t)),
        Spec::Vector(c, bl, st, t) => {
            let m = reference(t);
            for i in 0..*c as isize {
                place(&mut out, first, i * st * m.extent(), *bl, &m);
            }
        }
        Spec::Hvector(c, bl, st, t) => {
            let m = reference(t);
            for i in 0..*c as isize {
                place(&mut out, first, i * st, *bl, &m);
            }
        }
        Spec::Indexed(blocks, t) => {
            let m = reference(t);
            for &(bl, d) in blocks {
                place(&mut out, first, d * m.extent(), bl, &m);
            }
        }
        Spec::HindexedBlock(bl, ds, t) => {
            let m = reference(t);
            for &d in ds {
                place(&mut out, first, d, *bl, &m);
            }
        }
        Spec::Struct(fields) => {
            for (bl, d, t) in fields {
                place(&mut out, first, *d, *bl, &reference(t));
            }
            (out.lb, out.ub, out.explicit) = first.result();
            // The documented padding: extent rounded up to the largest member alignment,
            // unless markers decide.
            let a = out.align as isize;
            if !out.explicit && out.extent() > 0 {
                out.ub = out.lb + (out.extent() + a - 1) / a * a;
            }
            return out;
        }
        Spec::Resized(lb, ext, t) => {
            let m = reference(t);
            return Map {
                entries: m.entries,
                lb: *lb,
                ub: lb + ext,
                align: m.align,
                explicit: true,
            };
        }
        Spec::Subarray(sizes, subs, starts, t) => {
            let m = reference(t);
            // Every element of the block, C order, at its linear index.
            let nd = sizes.len();
            let mut idx = vec![0usize; nd];
            if subs.iter().all(|&s| s > 0) {
                'all: loop {
                    let mut lin = 0isize;
                    for d in 0..nd {
                        lin = lin * sizes[d] as isize + (starts[d] + idx[d]) as isize;
                    }
                    place(&mut out, first, lin * m.extent(), 1, &m);
                    let mut d = nd;
                    loop {
                        if d == 0 {
                            break 'all;
                        }
                        d -= 1;
                        idx[d] += 1;
                        if idx[d] < subs[d] {
                            break;
                        }
                        idx[d] = 0;
                    }
                }
            }
            let total: usize = sizes.iter().product();
            return Map {
                entries: out.entries,
                lb: 0,
                ub: total as isize * m.extent(),
                align: m.align,
                explicit: true,
            };
        }
    }
    (out.lb, out.ub, out.explicit) = first.result();
    out
}

fn build(s: &Spec) -> Result<Datatype> {
    Ok(match s {
        Spec::Basic(1) => Datatype::of::<u8>(),
        Spec::Basic(2) => Datatype::of::<i16>(),
        Spec::Basic(4) => Datatype::of::<i32>(),
        Spec::Basic(_) => Datatype::of::<f64>(),
        Spec::Contiguous(c, t) => Datatype::contiguous(*c, &build(t)?)?,
        Spec::Vector(c, bl, st, t) => Datatype::vector(*c, *bl, *st, &build(t)?)?,
        Spec::Hvector(c, bl, st, t) => Datatype::hvector(*c, *bl, *st, &build(t)?)?,
        Spec::Indexed(b, t) => {
            let (bl, d): (Vec<usize>, Vec<isize>) = b.iter().copied().unzip();
            Datatype::indexed(&bl, &d, &build(t)?)?
        }
        Spec::HindexedBlock(bl, ds, t) => Datatype::hindexed_block(*bl, ds, &build(t)?)?,
        Spec::Struct(f) => {
            let bl: Vec<usize> = f.iter().map(|x| x.0).collect();
            let d: Vec<isize> = f.iter().map(|x| x.1).collect();
            let t: Vec<Datatype> = f.iter().map(|x| build(&x.2)).collect::<Result<_>>()?;
            Datatype::create_struct(&bl, &d, &t)?
        }
        Spec::Resized(lb, ext, t) => Datatype::create_resized(&build(t)?, *lb, *ext)?,
        Spec::Subarray(sz, sub, st, t) => {
            Datatype::create_subarray(sz, sub, st, Order::C, &build(t)?)?
        }
    })
}

fn gen_spec(r: &mut Rng, depth: u32) -> Spec {
    let basic = |r: &mut Rng| Spec::Basic([1, 2, 4, 8][r.below(4) as usize]);
    if depth == 0 || r.below(4) == 0 {
        return basic(r);
    }
    let child = |r: &mut Rng| Box::new(gen_spec(r, depth - 1));
    match r.below(8) {
        0 => Spec::Contiguous(1 + r.below(3) as usize, child(r)),
        1 => {
            let bl = 1 + r.below(3) as usize;
            // Strides from -4 to 4 blocks: negative, overlapping-free or gapped.
            let mut st = r.signed(4);
            if st.unsigned_abs() < bl {
                st = if st < 0 {
                    -(bl as isize) - 1
                } else {
                    bl as isize + 1
                };
            }
            Spec::Vector(1 + r.below(4) as usize, bl, st, child(r))
        }
        2 => {
            let c = child(r);
            let ext = reference(&c).extent().max(1);
            let bl = 1 + r.below(2) as usize;
            let st =
                (bl as isize * ext + r.below(9) as isize) * if r.below(3) == 0 { -1 } else { 1 };
            Spec::Hvector(1 + r.below(3) as usize, bl, st, c)
        }
        3 => {
            let n = 1 + r.below(3) as usize;
            let blocks = (0..n)
                .map(|i| (r.below(3) as usize, 6 * i as isize - r.below(3) as isize))
                .collect();
            Spec::Indexed(blocks, child(r))
        }
        4 => {
            let c = child(r);
            let ext = reference(&c).extent().max(1);
            let ds = (0..1 + r.below(3))
                .map(|i| (i as isize) * 3 * ext - r.below(5) as isize)
                .collect();
            Spec::HindexedBlock(1 + r.below(2) as usize, ds, c)
        }
        5 => {
            // A struct with gaps between its members.
            let n = 1 + r.below(3) as usize;
            let mut at = 0isize;
            let mut f = vec![];
            for _ in 0..n {
                let t = gen_spec(r, depth - 1);
                let m = reference(&t);
                at += r.below(7) as isize;
                let bl = 1 + r.below(2) as usize;
                f.push((bl, at - m.lb, t));
                at += bl as isize * m.extent().max(0);
            }
            Spec::Struct(f)
        }
        6 => {
            let c = child(r);
            let m = reference(&c);
            // Grow, keep, or shift the extent; the lower bound may move either way.
            let lb = m.lb - r.below(5) as isize + 2;
            let ext = m.extent() + r.below(9) as isize;
            Spec::Resized(lb, ext.max(1), c)
        }
        _ => {
            let nd = 1 + r.below(2) as usize;
            let sizes: Vec<usize> = (0..nd).map(|_| 1 + r.below(4) as usize).collect();
            let subs: Vec<usize> = sizes
                .iter()
                .map(|&s| 1 + r.below(s as u64) as usize)
                .collect();
            let starts = sizes
                .iter()
                .zip(&subs)
                .map(|(&s, &b)| r.below((s - b + 1) as u64) as usize)
                .collect();
            Spec::Subarray(sizes, subs, starts, child(r))
        }
    }
}

/// A buffer that holds `count` elements of `m`: its length and the byte where displacement 0
/// falls.
fn frame_for(m: &Map, count: usize) -> (usize, usize) {
    let (mut lo, mut hi) = (0isize, 1isize);
    for k in 0..count as isize {
        for &(o, s) in &m.entries {
            let at = k * m.extent() + o;
            lo = lo.min(at);
            hi = hi.max(at + s as isize);
        }
    }
    let origin = (-lo) as usize + 3;
    (origin + hi as usize + 5, origin)
}

/// Reference pack of `count` elements of `m` from `buf` at `origin`.
fn ref_pack(m: &Map, count: usize, buf: &[u8], origin: usize) -> Vec<u8> {
    let mut out = vec![];
    for k in 0..count as isize {
        for &(o, s) in &m.entries {
            let at = (origin as isize + k * m.extent() + o) as usize;
            out.extend_from_slice(&buf[at..at + s]);
        }
    }
    out
}

/// Reference unpack: write `packed` (possibly a prefix) into `buf` following the type map.
fn ref_unpack(m: &Map, count: usize, packed: &[u8], buf: &mut [u8], origin: usize) {
    let mut p = 0;
    'all: for k in 0..count as isize {
        for &(o, s) in &m.entries {
            if p >= packed.len() {
                break 'all;
            }
            let at = (origin as isize + k * m.extent() + o) as usize;
            let n = s.min(packed.len() - p);
            buf[at..at + n].copy_from_slice(&packed[p..p + n]);
            p += n;
        }
    }
}

fn fill(seed: u64, n: usize) -> Vec<u8> {
    let mut r = Rng(seed | 1);
    (0..n).map(|_| r.next() as u8).collect()
}

/// Check one layout in process: extents, sizes, pack and unpack against the reference.
fn check_local(spec: &Spec, count: usize) {
    let m = reference(spec);
    let t = build(spec).unwrap_or_else(|e| panic!("build {spec:?}: {e}"));
    t.commit().unwrap();
    let size: usize = m.entries.iter().map(|e| e.1).sum();
    assert_eq!(t.size(), size, "size of {spec:?}");
    assert_eq!(t.get_extent(), (m.lb, m.extent()), "extent of {spec:?}");
    if size > 0 {
        let tlb = m.entries.iter().map(|e| e.0).min().unwrap();
        let tub = m.entries.iter().map(|e| e.0 + e.1 as isize).max().unwrap();
        assert_eq!(
            t.get_true_extent(),
            (tlb, tub - tlb),
            "true extent of {spec:?}"
        );
    }
    let (len, origin) = frame_for(&m, count);
    let src = fill(len as u64, len);
    let want = ref_pack(&m, count, &src, origin);
    let mut packed = vec![0u8; want.len()];
    let mut pos = 0;
    let view = Typed::at(&src, origin, count, &t).unwrap();
    assert_eq!(view.packed_len(), want.len());
    let sub = &src[..];
    // Datatype::pack takes the buffer at displacement 0, so pack from the origin onward
    // only when no displacement is negative; otherwise go through a view.
    if m.entries.iter().all(|e| e.0 >= 0) && (count <= 1 || m.extent() >= 0) {
        t.pack(&sub[origin..], count, &mut packed, &mut pos)
            .unwrap();
        assert_eq!(pos, want.len());
        assert_eq!(packed, want, "pack of {count} x {spec:?}");
        let mut back = vec![0u8; len - origin];
        let mut expect = vec![0u8; len - origin];
        ref_unpack(&m, count, &want, &mut expect, 0);
        let mut q = 0;
        t.unpack(&want, &mut q, &mut back, count).unwrap();
        assert_eq!(back, expect, "unpack of {count} x {spec:?}");
    }
    // Elements of a prefix.
    let basics: usize = m.entries.len();
    if size > 0 {
        assert_eq!(t.elements_in(size * count), Some(basics * count));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn random_layouts_pack_like_the_reference(seed in 1u64.., count in 0usize..4) {
        let mut r = Rng(seed);
        let spec = gen_spec(&mut r, 3);
        check_local(&spec, count);
    }
}

// ---- across ranks ----------------------------------------------------------------------------

/// How many layouts each rank pair sends.
const LAYOUTS: u64 = 40;

/// Rank 0 sends each random layout to every other rank at a small count (eager) and at a
/// count whose packed size passes the eager limit (rendezvous); the receiver gets it once
/// through the same datatype and once as plain bytes, and checks both against the reference.
fn layouts_across_ranks(u: &Universe) -> Result<()> {
    let w = u.world();
    let me = w.rank();
    let eager_limit = 16 * 1024;
    for seed in 1..=LAYOUTS {
        let mut r = Rng(seed * 7919);
        let spec = gen_spec(&mut r, 3);
        let m = reference(&spec);
        let t = build(&spec)?;
        t.commit()?;
        let size = t.size().max(1);
        for count in [1, eager_limit / size + 2] {
            let (len, origin) = frame_for(&m, count);
            if len > 64 << 20 {
                continue;
            }
            let tag = (seed * 2) as i32 + (count > 1) as i32;
            if me == 0 {
                let src = fill(seed + count as u64, len);
                for dest in 1..w.size() {
                    w.send(&Typed::at(&src, origin, count, &t)?, dest, tag)?;
                    w.send(&Typed::at(&src, origin, count, &t)?, dest, tag)?;
                }
            } else {
                let src = fill(seed + count as u64, len);
                let packed = ref_pack(&m, count, &src, origin);
                // Typed to typed.
                let mut got = vec![0u8; len];
                let st = w.recv(&mut TypedMut::at(&mut got, origin, count, &t)?, 0, tag)?;
                assert_eq!(st.bytes(), packed.len());
                // MPI: a zero-size datatype counts zero elements.
                let n = if t.size() == 0 { 0 } else { count };
                assert_eq!(st.count_of(&t), Some(n));
                let mut want = vec![0u8; len];
                ref_unpack(&m, count, &packed, &mut want, origin);
                assert!(
                    got == want,
                    "layout {seed} x {count}: typed receive differs ({spec:?})"
                );
                // Typed to bytes.
                let mut raw = vec![0u8; packed.len()];
                w.recv(&mut raw, ANY_SOURCE, tag)?;
                assert!(
                    raw == packed,
                    "layout {seed} x {count}: byte receive differs ({spec:?})"
                );
            }
        }
    }
    Ok(())
}

/// A vector of doubles (a halo column) received into a larger count: a partial receive
/// reports whole elements and basic elements; a smaller count is MPI_ERR_TRUNCATE; a
/// different basic type is MPI_ERR_TYPE; an uncommitted type is MPI_ERR_TYPE; a view
/// reaching past its slice is MPI_ERR_BUFFER.
fn partial_and_mismatched_receives(u: &Universe) -> Result<()> {
    let w = u.world();
    w.set_errhandler(ErrHandler::Return);
    if w.size() < 2 || w.rank() > 1 {
        return Ok(());
    }
    let col = Datatype::vector(4, 1, 3, &Datatype::of::<f64>())?;
    let grid: Vec<f64> = (0..12).map(|i| i as f64).collect();
    let unc = Datatype::contiguous(2, &Datatype::of::<f64>())?;
    assert_eq!(
        Typed::new(&grid, 1, &col).err().map(|e| e.class()),
        Some(ErrorClass::Type),
        "uncommitted"
    );
    col.commit()?;
    let e = Typed::new(&grid[..9], 1, &col).expect_err("past the slice");
    assert_eq!(e.class(), ErrorClass::Buffer);
    assert!(
        e.to_string().contains("byte 80 of a buffer of 72 bytes"),
        "{e}"
    );
    let pair = Datatype::contiguous(3, &Datatype::of::<f64>())?;
    pair.commit()?;
    if w.rank() == 0 {
        // 4 doubles, then 4 doubles, then 4 doubles, then 2 floats.
        for _ in 0..3 {
            w.send(&Typed::new(&grid, 1, &col)?, 1, 1)?;
        }
        w.send(&[1.0f32, 2.0], 1, 2)?;
        assert_eq!(unc.size(), 16);
    } else {
        let mut into = vec![0f64; 12];
        let st = w.recv(&mut TypedMut::new(&mut into, 2, &pair)?, 0, 1)?;
        assert_eq!((st.count_of(&pair), st.elements_of(&pair)), (None, Some(4)));
        assert_eq!(&into[..5], &[0.0, 3.0, 6.0, 9.0, 0.0]);
        let mut small = vec![0f64; 3];
        let e = w.recv(&mut small, 0, 1).unwrap_err();
        assert_eq!(e.class(), ErrorClass::Truncate);
        let mut ints = vec![0i64; 4];
        let e = w.recv(&mut ints, 0, 1).unwrap_err();
        assert_eq!(e.class(), ErrorClass::Type);
        assert!(
            e.to_string()
                .contains("8-byte floating point but received as 8-byte signed integer"),
            "{e}"
        );
        let mut d = vec![0f64; 1];
        let e = w.recv(&mut d, 0, 2).unwrap_err();
        assert_eq!(e.class(), ErrorClass::Type);
    }
    Ok(())
}

/// Predefined types cannot be freed; a view of a padded-free slice works for every basic
/// type; pack_size agrees with pack.
fn predefined_and_pack_size(u: &Universe) -> Result<()> {
    let w = u.world();
    w.set_errhandler(ErrHandler::Return);
    let d = Datatype::of::<f64>();
    assert_eq!(d.clone().free().unwrap_err().class(), ErrorClass::Type);
    let v = Datatype::vector(3, 2, -4, &d)?;
    v.commit()?;
    assert_eq!(v.pack_size(w.size() as usize)?, 48 * w.size() as usize);
    let dup = v.dup()?;
    assert!(dup.is_committed());
    assert_eq!(dup.get_extent(), v.get_extent());
    dup.free()?;
    v.free()?;
    Ok(())
}

scenarios! {
    layouts_across_ranks [2, 3, 4];
    partial_and_mismatched_receives [1, 2, 3];
    predefined_and_pack_size [1, 2, 4, 8];
}
