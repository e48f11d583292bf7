//! Taking datatypes apart (MPI_Type_get_envelope / MPI_Type_get_contents, MPI 4.1 §5.1.13)
//! and distributed arrays (MPI_Type_create_darray, §5.1.4). Datatypes are local objects:
//! plain tests, no job.

use earlybird::{
    BasicType, Combiner, CombinerKind, Contents, Datatype, Distribution, ErrorClass, Order, Result,
};

/// `count` elements of `t` packed from an array whose element k (an i64) is k: the indices
/// the type touches, in type-map order.
fn indices(t: &Datatype, count: usize, len: usize) -> Vec<i64> {
    t.commit().unwrap();
    let buf: Vec<i64> = (0..len as i64).collect();
    let mut out = vec![0u8; t.pack_size(count).unwrap()];
    let mut pos = 0;
    t.pack(&buf, count, &mut out, &mut pos).unwrap();
    out.chunks_exact(8)
        .map(|c| i64::from_ne_bytes(c.try_into().unwrap()))
        .collect()
}

/// Build the type again from its contents.
fn rebuild(c: &Combiner) -> Result<Datatype> {
    Ok(match c {
        Combiner::Named(b) => Datatype::basic(*b),
        Combiner::Dup(old) => old.dup()?,
        Combiner::Contiguous { count, old } => Datatype::contiguous(*count, old)?,
        Combiner::Vector {
            count,
            blocklength,
            stride,
            old,
        } => Datatype::vector(*count, *blocklength, *stride, old)?,
        Combiner::Hvector {
            count,
            blocklength,
            stride_bytes,
            old,
        } => Datatype::hvector(*count, *blocklength, *stride_bytes, old)?,
        Combiner::Indexed {
            blocklengths,
            displacements,
            old,
        } => Datatype::indexed(blocklengths, displacements, old)?,
        Combiner::Hindexed {
            blocklengths,
            displacements,
            old,
        } => Datatype::hindexed(blocklengths, displacements, old)?,
        Combiner::IndexedBlock {
            blocklength,
            displacements,
            old,
        } => Datatype::indexed_block(*blocklength, displacements, old)?,
        Combiner::HindexedBlock {
            blocklength,
            displacements,
            old,
        } => Datatype::hindexed_block(*blocklength, displacements, old)?,
        Combiner::Struct {
            blocklengths,
            displacements,
            types,
        } => Datatype::create_struct(blocklengths, displacements, types)?,
        Combiner::Subarray {
            sizes,
            subsizes,
            starts,
            order,
            old,
        } => Datatype::create_subarray(sizes, subsizes, starts, *order, old)?,
        Combiner::Darray {
            size,
            rank,
            gsizes,
            distribs,
            psizes,
            order,
            old,
        } => Datatype::create_darray(*size, *rank, gsizes, distribs, psizes, *order, old)?,
        Combiner::Resized { lb, extent, old } => Datatype::create_resized(old, *lb, *extent)?,
    })
}

/// Every constructor: the envelope counts MPI's table gives, and a type rebuilt from the
/// contents touches the same elements with the same extent.
#[test]
fn envelope_and_contents_of_every_constructor() -> Result<()> {
    let i64t = Datatype::of::<i64>();
    let pair = Datatype::contiguous(2, &i64t)?;
    let cases: Vec<(Datatype, CombinerKind, (usize, usize, usize))> = vec![
        (i64t.dup()?, CombinerKind::Dup, (0, 0, 1)),
        (
            Datatype::contiguous(3, &i64t)?,
            CombinerKind::Contiguous,
            (1, 0, 1),
        ),
        (
            Datatype::vector(3, 2, -4, &i64t)?,
            CombinerKind::Vector,
            (3, 0, 1),
        ),
        (
            Datatype::hvector(2, 1, 40, &pair)?,
            CombinerKind::Hvector,
            (2, 1, 1),
        ),
        (
            Datatype::indexed(&[2, 1, 3], &[5, 0, 9], &i64t)?,
            CombinerKind::Indexed,
            (7, 0, 1),
        ),
        (
            Datatype::hindexed(&[1, 2], &[64, 8], &i64t)?,
            CombinerKind::Hindexed,
            (3, 2, 1),
        ),
        (
            Datatype::indexed_block(2, &[4, 0, 8], &i64t)?,
            CombinerKind::IndexedBlock,
            (5, 0, 1),
        ),
        (
            Datatype::hindexed_block(1, &[16, 0], &pair)?,
            CombinerKind::HindexedBlock,
            (2, 2, 1),
        ),
        (
            Datatype::create_struct(&[1, 2], &[0, 24], &[pair.clone(), i64t.clone()])?,
            CombinerKind::Struct,
            (3, 2, 2),
        ),
        (
            Datatype::create_subarray(&[4, 5], &[2, 3], &[1, 2], Order::Fortran, &i64t)?,
            CombinerKind::Subarray,
            (8, 0, 1),
        ),
        (
            Datatype::create_darray(
                6,
                4,
                &[5, 7],
                &[Distribution::Block(None), Distribution::Cyclic(Some(2))],
                &[2, 3],
                Order::C,
                &i64t,
            )?,
            CombinerKind::Darray,
            (12, 0, 1),
        ),
        (
            Datatype::create_resized(&pair, -8, 32)?,
            CombinerKind::Resized,
            (0, 2, 1),
        ),
    ];
    for (t, kind, (ni, na, nd)) in cases {
        let env = t.envelope();
        assert_eq!(env.combiner, kind);
        assert_eq!(
            (env.integers, env.addresses, env.datatypes),
            (ni, na, nd),
            "{kind:?}"
        );
        let c = t.contents()?;
        let arrays = Contents::from(&c);
        assert_eq!(
            (
                arrays.integers.len(),
                arrays.addresses.len(),
                arrays.datatypes.len()
            ),
            (ni, na, nd),
            "{kind:?}: the arrays have the envelope's lengths"
        );
        let again = rebuild(&c)?;
        assert_eq!(again.envelope().combiner, kind);
        assert_eq!(again.get_extent(), t.get_extent(), "{kind:?}: extent");
        assert_eq!(again.size(), t.size(), "{kind:?}: size");
        assert_eq!(
            again.get_true_extent(),
            t.get_true_extent(),
            "{kind:?}: true extent"
        );
        assert_eq!(
            again.block_count(),
            t.block_count(),
            "{kind:?}: same blocks"
        );
    }
    // MPI's order of the integer array, for two of them.
    let v = Datatype::vector(3, 2, -4, &i64t)?;
    assert_eq!(Contents::from(&v.contents()?).integers, [3, 2, -4]);
    let s = Datatype::create_subarray(&[4, 5], &[2, 3], &[1, 2], Order::Fortran, &i64t)?;
    assert_eq!(
        Contents::from(&s.contents()?).integers,
        [2, 4, 5, 2, 3, 1, 2, Contents::ORDER_FORTRAN]
    );
    // The datatypes inside are the constructor's arguments.
    match Datatype::contiguous(2, &pair)?.contents()? {
        Combiner::Contiguous { count: 2, old } => assert!(old == pair),
        c => panic!("contents of a contiguous type: {c:?}"),
    }
    Ok(())
}

/// A predefined type's combiner is NAMED, its envelope empty, and asking its contents is
/// MPI_ERR_ARG.
#[test]
fn predefined_types_have_no_contents() {
    let d = Datatype::of::<f64>();
    let env = d.envelope();
    assert_eq!(env.combiner, CombinerKind::Named);
    assert_eq!((env.integers, env.addresses, env.datatypes), (0, 0, 0));
    assert!(matches!(d.combiner(), Combiner::Named(BasicType::Double)));
    let e = d.contents().unwrap_err();
    assert_eq!(e.class(), ErrorClass::Arg);
    assert!(e.to_string().contains("MPI_DOUBLE"), "{e}");
}

/// The process (row-major grid coordinates) that owns index `i` of dimension `d`.
fn owner(i: usize, g: usize, p: usize, d: Distribution) -> usize {
    match d {
        Distribution::Undistributed => 0,
        Distribution::Block(b) => i / b.unwrap_or(g.div_ceil(p)),
        Distribution::Cyclic(c) => (i / c.unwrap_or(1)) % p,
    }
}

/// For several grids: every rank's darray touches exactly the elements it owns, in storage
/// order, and the ranks together touch every element once; the extent is the whole array.
#[test]
fn darray_partitions_the_global_array() -> Result<()> {
    use Distribution::*;
    let cases: Vec<(Vec<usize>, Vec<Distribution>, Vec<usize>)> = vec![
        (vec![10], vec![Block(None)], vec![3]),
        (vec![10], vec![Cyclic(Some(3))], vec![3]),
        (vec![5, 7], vec![Block(None), Cyclic(Some(2))], vec![2, 3]),
        (vec![6, 4], vec![Cyclic(None), Block(Some(3))], vec![2, 2]),
        (
            vec![4, 3, 5],
            vec![Block(None), Undistributed, Cyclic(Some(2))],
            vec![2, 1, 2],
        ),
        (vec![3, 3], vec![Block(Some(3)), Block(None)], vec![2, 2]),
    ];
    let i64t = Datatype::of::<i64>();
    for (gsizes, distribs, psizes) in cases {
        let size: usize = psizes.iter().product();
        let total: usize = gsizes.iter().product();
        for order in [Order::C, Order::Fortran] {
            let mut seen = vec![0u32; total];
            for rank in 0..size {
                let t =
                    Datatype::create_darray(size, rank, &gsizes, &distribs, &psizes, order, &i64t)?;
                assert_eq!(t.get_extent(), (0, 8 * total as isize));
                let got = indices(&t, 1, total);
                assert!(
                    got.windows(2).all(|w| w[0] < w[1]),
                    "{gsizes:?} {distribs:?} {psizes:?} {order:?} rank {rank}: storage order"
                );
                for &k in &got {
                    seen[k as usize] += 1;
                    // The index tuple of storage position k.
                    let nd = gsizes.len();
                    let mut idx = vec![0; nd];
                    let mut r = k as usize;
                    let dims: Vec<usize> = match order {
                        Order::C => (0..nd).rev().collect(),
                        Order::Fortran => (0..nd).collect(),
                    };
                    for &d in &dims {
                        idx[d] = r % gsizes[d];
                        r /= gsizes[d];
                    }
                    let mut who = 0;
                    for d in 0..nd {
                        who = who * psizes[d] + owner(idx[d], gsizes[d], psizes[d], distribs[d]);
                    }
                    assert_eq!(who, rank, "{gsizes:?} {distribs:?}: element {idx:?}");
                }
            }
            assert!(
                seen.iter().all(|&n| n == 1),
                "{gsizes:?} {distribs:?} {order:?}: a partition"
            );
        }
    }
    Ok(())
}

/// Impossible grids and distributions are errors naming the problem.
#[test]
fn darray_misuse() {
    use Distribution::*;
    let t = Datatype::of::<i32>();
    let e = Datatype::create_darray(4, 0, &[8], &[Block(None)], &[3], Order::C, &t).unwrap_err();
    assert_eq!(e.class(), ErrorClass::Arg, "{e}");
    let e = Datatype::create_darray(2, 2, &[8], &[Block(None)], &[2], Order::C, &t).unwrap_err();
    assert_eq!(e.class(), ErrorClass::Rank, "{e}");
    let e = Datatype::create_darray(2, 0, &[8], &[Block(Some(3))], &[2], Order::C, &t).unwrap_err();
    assert_eq!(e.class(), ErrorClass::Arg, "{e}");
    assert!(e.to_string().contains("cover"), "{e}");
    let e = Datatype::create_darray(2, 0, &[8], &[Undistributed], &[2], Order::C, &t).unwrap_err();
    assert_eq!(e.class(), ErrorClass::Arg, "{e}");
    // Huge block sizes and grids do not wrap: one run for rank 0, nothing for rank 1, and a
    // grid whose product overflows is an error.
    let big = Some(1usize << 62);
    for (rank, want) in [(0, 8), (1, 0)] {
        let d = Datatype::create_darray(2, rank, &[8], &[Cyclic(big)], &[2], Order::C, &t).unwrap();
        assert_eq!(d.size(), want * 4, "cyclic with a huge block, rank {rank}");
        let d = Datatype::create_darray(2, rank, &[8], &[Block(big)], &[2], Order::C, &t).unwrap();
        assert_eq!(d.size(), want * 4, "block with a huge block, rank {rank}");
    }
    let e = Datatype::create_darray(
        4,
        0,
        &[8, 8],
        &[Block(None), Block(None)],
        &[1 << 40, 1 << 40],
        Order::C,
        &t,
    )
    .unwrap_err();
    assert_eq!(e.class(), ErrorClass::Arg, "{e}");
}
