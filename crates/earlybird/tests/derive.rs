//! `#[derive(Equivalence)]` (crate earlybird-derive): `#[repr(C)]` structs, with and without
//! padding, nested, and tuple structs, as struct datatypes; slices of them sent at eager and
//! rendezvous sizes, as thread jobs and under ebrun.

mod common;
use earlybird::{Datatype, Equivalence, Plain, Result, Universe, ANY_SOURCE};

/// 28 bytes of data, 4 bytes of tail padding.
#[derive(Clone, Copy, Debug, PartialEq, Equivalence)]
#[repr(C)]
struct Particle {
    pos: [f64; 3],
    id: i32,
}

/// No padding: sent as its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Equivalence)]
#[repr(C)]
struct Pair {
    a: u32,
    b: f32,
}

/// A derived struct inside another, with padding in the middle.
#[derive(Clone, Copy, Debug, PartialEq, Equivalence)]
#[repr(C)]
struct Cell {
    flag: u8,
    p: Particle,
    w: f64,
}

#[derive(Clone, Copy, Debug, PartialEq, Equivalence)]
#[repr(C)]
struct Xyz(f64, f64, f64);

fn particle(i: usize, rank: i32) -> Particle {
    Particle {
        pos: [i as f64, -(i as f64), rank as f64 + 0.5],
        id: (i as i32) * 10 + rank,
    }
}

#[test]
fn layouts_follow_the_rust_structs() {
    let p = Datatype::of::<Particle>();
    assert_eq!(
        (p.size(), p.get_extent(), p.name()),
        (28, (0, 32), "Particle".into())
    );
    const { assert!(!<Particle as Plain>::GAPLESS) };
    assert_eq!(
        <Particle as Equivalence>::SIG,
        earlybird::Sig::MIXED,
        "mixed double and int"
    );
    let q = Datatype::of::<Pair>();
    assert_eq!((q.size(), q.extent(), q.block_count()), (8, 8, 1));
    const { assert!(<Pair as Plain>::GAPLESS) };
    let c = Datatype::of::<Cell>();
    assert_eq!((c.size(), c.extent()), (1 + 28 + 8, 48));
    assert_eq!(c.get_true_extent(), (0, 48));
    assert_eq!(
        c.block_count(),
        3,
        "flag, then the particle, then w after its padding"
    );
    const { assert!(<Xyz as Plain>::GAPLESS) };
    assert_eq!(<Xyz as Equivalence>::SIG, <f64 as Equivalence>::SIG);
    // Pack skips the padding.
    let ps = [particle(1, 0), particle(2, 0)];
    let mut out = vec![0u8; 56];
    let mut pos = 0;
    p.pack(&ps, 2, &mut out, &mut pos).unwrap();
    assert_eq!(pos, 56);
    assert_eq!(&out[24..28], &10i32.to_ne_bytes());
    assert_eq!(&out[28..36], &2f64.to_ne_bytes());
}

/// Rank 0 sends slices of each struct (4 elements: eager; 2,000: rendezvous) to every other
/// rank, which checks every field.
fn structs_across_ranks(u: &Universe) -> Result<()> {
    let w = u.world();
    let me = w.rank();
    for n in [4usize, 2000] {
        let parts: Vec<Particle> = (0..n).map(|i| particle(i, 0)).collect();
        let cells: Vec<Cell> = (0..n)
            .map(|i| Cell {
                flag: i as u8,
                p: particle(i, 0),
                w: 1.0 / (i as f64 + 1.0),
            })
            .collect();
        let xyz: Vec<Xyz> = (0..n).map(|i| Xyz(i as f64, 2.0, 3.0)).collect();
        if me == 0 {
            for d in 1..w.size() {
                w.send(&parts, d, 1)?;
                w.send(&cells, d, 2)?;
                w.send(&xyz, d, 3)?;
            }
        } else {
            let mut got = vec![particle(0, 99); n];
            let st = w.recv(&mut got, 0, 1)?;
            assert_eq!(st.bytes(), 28 * n);
            assert_eq!(st.count::<Particle>(), Some(n));
            assert_eq!(st.elements::<Particle>(), Some(4 * n));
            assert!(got == parts, "{n} particles");
            let mut gc = vec![cells[0]; n];
            w.recv(&mut gc, ANY_SOURCE, 2)?;
            assert!(gc == cells, "{n} cells");
            let mut gx = vec![Xyz(0.0, 0.0, 0.0); n];
            w.recv(&mut gx, 0, 3)?;
            assert!(gx == xyz);
        }
    }
    Ok(())
}

scenarios! {
    structs_across_ranks [2, 3, 4];
}
