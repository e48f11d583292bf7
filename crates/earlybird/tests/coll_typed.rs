//! Collectives on typed views (MPI's (address, count, datatype) buffers): a bcast of a matrix
//! column, a gather that sends 2 ints and receives one `contiguous(2, int)`, a scatter of
//! structs through a datatype that picks two of their fields, an allgather into the columns
//! of a matrix (a vector type resized to one element), alltoall and the v forms, and
//! reductions of columns (run on packed copies). Each against a sequential reference, with
//! every algorithm forced in turn where the algorithm matters, in the three forms, on intra-
//! and intercommunicators; and the checks (signatures, operations) as error classes.

mod common;

use common::{assert_err, check_eq, each_algorithm};
use earlybird::{
    BasicType, Coll, Datatype, Equivalence, ErrHandler, ErrorClass, Op, Result, Typed, TypedMut,
    Universe, ValueIndex, IN_PLACE, PROC_NULL, ROOT,
};

scenarios! {
    bcast_a_column [2, 3, 4, 8];
    gather_and_scatter_pairs [2, 3, 4, 8];
    scatter_struct_fields [2, 3, 4, 8];
    allgather_into_columns [2, 3, 4, 8];
    alltoall_transposes [2, 3, 4, 8];
    v_forms_count_in_the_datatype [2, 3, 4, 8];
    reductions_of_columns [2, 3, 4, 8];
    neighbors_into_columns [2, 3, 4, 8];
    pair_reductions_and_mixed_buffers [2, 3, 4, 8];
    intercommunicator [2, 3, 4, 8];
    misuse [2, 3];
    bytes_user_operations [1, 2, 3, 4, 8];
}

fn committed(t: Datatype) -> Result<Datatype> {
    t.commit()?;
    Ok(t)
}

/// One column of a `rows x cols` row-major matrix of `f64`.
fn column(rows: usize, cols: usize) -> Result<Datatype> {
    committed(Datatype::vector(
        rows,
        1,
        cols as isize,
        &Datatype::of::<f64>(),
    )?)
}

/// A column resized to one element, so that element `j` of the type is column `j`.
fn column_resized(rows: usize, cols: usize) -> Result<Datatype> {
    committed(Datatype::create_resized(&column(rows, cols)?, 0, 8)?)
}

fn val(rank: i32, i: usize) -> f64 {
    rank as f64 * 1_000_000.0 + i as f64 * 0.5
}

/// A bcast of column `k` of the root's matrix into every other rank's column `k`, or
/// (odd ranks) into a plain slice: the two sides have different datatypes with one
/// signature. Rows enough to cross the large-message algorithms (every one forced in turn).
fn bcast_a_column(u: &Universe) -> Result<()> {
    let w = u.world();
    for rows in [1usize, 7, 9_000, 300_000] {
        let cols = 3;
        let col = column(rows, cols)?;
        let k = 1;
        each_algorithm(w, Coll::Bcast, |c, alg| {
            let forms = if rows > 10_000 { 1 } else { 3 };
            for form in 0..forms {
                for root in 0..c.size() {
                    let me = c.rank();
                    let want: Vec<f64> = (0..rows).map(|i| val(root, i + form)).collect();
                    if me % 2 == 1 && me != root {
                        let mut got = vec![-1.0f64; rows];
                        run_forms!(form, c, bcast, ibcast, bcast_init(&mut got, root));
                        check_eq(
                            &format!("bcast {alg} rows {rows} into a slice"),
                            &got,
                            &want,
                        );
                        continue;
                    }
                    let mut m = vec![-1.0f64; rows * cols];
                    if me == root {
                        for (i, x) in want.iter().enumerate() {
                            m[i * cols + k] = *x;
                        }
                    }
                    run_forms!(
                        form,
                        c,
                        bcast,
                        ibcast,
                        bcast_init(TypedMut::at(&mut m, k, 1, &col)?, root)
                    );
                    for i in 0..rows {
                        for j in 0..cols {
                            let expect = if j == k { want[i] } else { -1.0 };
                            assert!(
                                m[i * cols + j] == expect,
                                "bcast {alg} rows {rows} root {root}: m[{i}][{j}] = {}, expected {expect}",
                                m[i * cols + j]
                            );
                        }
                    }
                }
            }
            Ok(())
        })?;
    }
    Ok(())
}

/// Every rank sends 2 ints; the root receives one `contiguous(2, int)` per rank; and back:
/// the root scatters one pair per rank, each rank receives 2 ints. Every algorithm and root.
fn gather_and_scatter_pairs(u: &Universe) -> Result<()> {
    let w = u.world();
    let pair = committed(Datatype::contiguous(2, &Datatype::basic(BasicType::Int))?)?;
    let n = w.size() as usize;
    let mine = |r: i32, f: usize| [r * 10 + f as i32, -(r * 10) - 1];
    for coll in [Coll::Gather, Coll::Scatter] {
        each_algorithm(w, coll, |c, alg| {
            for form in 0..3 {
                for root in 0..c.size() {
                    let me = c.rank();
                    let all: Vec<i32> = (0..c.size()).flat_map(|r| mine(r, form)).collect();
                    if coll == Coll::Gather {
                        let send = mine(me, form);
                        let mut got = vec![0i32; 2 * n];
                        if me == root {
                            run_forms!(
                                form,
                                c,
                                gather,
                                igather,
                                gather_init(&send, TypedMut::new(&mut got, n, &pair)?, root)
                            );
                            check_eq(&format!("gather {alg} root {root}"), &got, &all);
                        } else {
                            run_forms!(
                                form,
                                c,
                                gather,
                                igather,
                                gather_init(&send, &mut [0i32; 0], root)
                            );
                        }
                    } else {
                        let mut got = [0i32; 2];
                        run_forms!(
                            form,
                            c,
                            scatter,
                            iscatter,
                            scatter_init(
                                Typed::new(&all, if me == root { n } else { 0 }, &pair)?,
                                &mut got,
                                root
                            )
                        );
                        check_eq(&format!("scatter {alg} root {root}"), &got, &mine(me, form));
                    }
                }
            }
            Ok(())
        })?;
    }
    Ok(())
}

#[derive(Clone, Copy, Debug, PartialEq, Equivalence)]
#[repr(C)]
struct Particle {
    x: f64,
    id: i32,
    tag: i32,
    mass: f64,
}

/// The root scatters an array of structs through a datatype of two of their fields (`x` and
/// `id`, resized to one struct; a struct without padding, as a typed view of a type with
/// padding may only use the type's own datatype); every rank receives them as `ValueIndex<f64>` (MPI's
/// DOUBLE_INT pairs, a type with padding).
fn scatter_struct_fields(u: &Universe) -> Result<()> {
    let w = u.world();
    let n = w.size() as usize;
    let per = 5;
    let two = Datatype::create_struct(
        &[1, 1],
        &[0, 8],
        &[Datatype::of::<f64>(), Datatype::of::<i32>()],
    )?;
    let fields = committed(Datatype::create_resized(
        &two,
        0,
        std::mem::size_of::<Particle>() as isize,
    )?)?;
    let ps: Vec<Particle> = (0..n * per)
        .map(|i| Particle {
            x: i as f64 * 1.5,
            tag: 7,
            id: i as i32 * 3,
            mass: -1.0,
        })
        .collect();
    each_algorithm(w, Coll::Scatter, |c, alg| {
        for form in 0..3 {
            for root in 0..c.size() {
                let me = c.rank() as usize;
                let mut got = vec![
                    ValueIndex {
                        value: -1.0,
                        index: -1
                    };
                    per
                ];
                let count = if me as i32 == root { n * per } else { 0 };
                run_forms!(
                    form,
                    c,
                    scatter,
                    iscatter,
                    scatter_init(Typed::new(&ps, count, &fields)?, &mut got, root)
                );
                let want: Vec<ValueIndex<f64>> = ps[me * per..][..per]
                    .iter()
                    .map(|p| ValueIndex {
                        value: p.x,
                        index: p.id,
                    })
                    .collect();
                check_eq(&format!("scatter of fields {alg} root {root}"), &got, &want);
                // And back: gather the pairs into the fields of a fresh array.
                let mut back = vec![
                    Particle {
                        x: 0.0,
                        tag: 0,
                        id: 0,
                        mass: 0.0
                    };
                    n * per
                ];
                if me as i32 == root {
                    c.gather(&got, TypedMut::new(&mut back, n * per, &fields)?, root)?;
                    for (b, p) in back.iter().zip(&ps) {
                        assert_eq!(
                            (b.x, b.id, b.tag, b.mass),
                            (p.x, p.id, 0, 0.0),
                            "gather of fields {alg}"
                        );
                    }
                } else {
                    c.gather(&got, &mut [0.0f64; 0], root)?;
                }
            }
        }
        Ok(())
    })
}

/// Rank `j` contributes a vector of `rows` values that lands in column `j` of every rank's
/// `rows x size` matrix (a column type resized to one element); in place too, where each
/// rank's own column is already in the matrix.
fn allgather_into_columns(u: &Universe) -> Result<()> {
    let w = u.world();
    let n = w.size() as usize;
    for rows in [1usize, 3, 300, 20_000] {
        let col = column_resized(rows, n)?;
        let want: Vec<f64> = (0..rows)
            .flat_map(|i| (0..n).map(move |j| val(j as i32, i)))
            .collect();
        each_algorithm(w, Coll::Allgather, |c, alg| {
            for form in 0..3 {
                let me = c.rank();
                let mine: Vec<f64> = (0..rows).map(|i| val(me, i)).collect();
                let mut m = vec![-1.0f64; rows * n];
                run_forms!(
                    form,
                    c,
                    allgather,
                    iallgather,
                    allgather_init(&mine, TypedMut::new(&mut m, n, &col)?)
                );
                check_eq(
                    &format!("allgather into columns {alg} rows {rows}"),
                    &m,
                    &want,
                );
                let mut m = vec![-1.0f64; rows * n];
                for (i, x) in mine.iter().enumerate() {
                    m[i * n + me as usize] = *x;
                }
                run_forms!(
                    form,
                    c,
                    allgather,
                    iallgather,
                    allgather_init(IN_PLACE, TypedMut::new(&mut m, n, &col)?)
                );
                check_eq(
                    &format!("in-place allgather into columns {alg} rows {rows}"),
                    &m,
                    &want,
                );
            }
            Ok(())
        })?;
    }
    Ok(())
}

/// Each rank holds `rows` rows of an `n x n` block matrix by rows; alltoall with a column
/// type on the receive side transposes: row block `j` of rank `i` lands in column `i` of
/// rank `j`'s matrix.
fn alltoall_transposes(u: &Universe) -> Result<()> {
    let w = u.world();
    let n = w.size() as usize;
    let b = 3; // rows per block
    let col = column_resized(b, n)?;
    each_algorithm(w, Coll::Alltoall, |c, alg| {
        for form in 0..3 {
            let me = c.rank();
            // Send block j: b values for rank j.
            let send: Vec<f64> = (0..n)
                .flat_map(|j| (0..b).map(move |i| val(me, j * 100 + i)))
                .collect();
            let mut m = vec![-1.0f64; b * n];
            run_forms!(
                form,
                c,
                alltoall,
                ialltoall,
                alltoall_init(&send, TypedMut::new(&mut m, n, &col)?)
            );
            let want: Vec<f64> = (0..b)
                .flat_map(|i| (0..n).map(move |src| val(src as i32, me as usize * 100 + i)))
                .collect();
            check_eq(&format!("alltoall transpose {alg}"), &m, &want);
        }
        Ok(())
    })
}

/// gatherv, scatterv, allgatherv and alltoallv count and displace in elements of each
/// buffer's datatype: here pairs of ints on one side, ints on the other.
fn v_forms_count_in_the_datatype(u: &Universe) -> Result<()> {
    let w = u.world();
    let n = w.size() as usize;
    let me = w.rank() as usize;
    let pair = committed(Datatype::contiguous(2, &Datatype::basic(BasicType::Int))?)?;
    // Rank r sends r + 1 pairs; they land with a gap of one pair between blocks.
    let pairs: Vec<usize> = (1..=n).collect();
    let displs: Vec<usize> = pairs
        .iter()
        .scan(0, |at, &p| {
            let d = *at;
            *at += p + 1;
            Some(d)
        })
        .collect();
    let total = displs[n - 1] + pairs[n - 1];
    let mine: Vec<i32> = (0..2 * pairs[me]).map(|i| (me * 100 + i) as i32).collect();
    let mut want = vec![-1i32; 2 * total];
    for r in 0..n {
        for i in 0..2 * pairs[r] {
            want[2 * displs[r] + i] = (r * 100 + i) as i32;
        }
    }
    for form in 0..3 {
        let mut got = vec![-1i32; 2 * total];
        run_forms!(
            form,
            w,
            allgatherv,
            iallgatherv,
            allgatherv_init(
                &mine,
                TypedMut::new(&mut got, total, &pair)?,
                &pairs,
                &displs
            )
        );
        check_eq("allgatherv of pairs", &got, &want);
        for root in 0..n as i32 {
            let mut got = vec![-1i32; 2 * total];
            if me as i32 == root {
                run_forms!(
                    form,
                    w,
                    gatherv,
                    igatherv,
                    gatherv_init(
                        &mine,
                        TypedMut::new(&mut got, total, &pair)?,
                        &pairs,
                        &displs,
                        root
                    )
                );
                check_eq("gatherv of pairs", &got, &want);
            } else {
                run_forms!(
                    form,
                    w,
                    gatherv,
                    igatherv,
                    gatherv_init(&mine, &mut [0i32; 0], &[], &[], root)
                );
            }
            let mut back = vec![0i32; 2 * pairs[me]];
            let count = if me as i32 == root { total } else { 0 };
            run_forms!(
                form,
                w,
                scatterv,
                iscatterv,
                scatterv_init(
                    Typed::new(&want, count, &pair)?,
                    &pairs,
                    &displs,
                    &mut back,
                    root
                )
            );
            check_eq("scatterv of pairs", &back, &mine);
        }
        // alltoallv: to rank j, j + 1 pairs from pair displacement j; received as ints.
        let sc: Vec<usize> = (0..n).map(|j| j + 1).collect();
        let sd: Vec<usize> = (0..n).map(|j| j * (n + 1)).collect();
        let send: Vec<i32> = (0..2 * n * (n + 1))
            .map(|i| (me * 10_000 + i) as i32)
            .collect();
        let rc: Vec<usize> = vec![2 * (me + 1); n];
        let rd: Vec<usize> = (0..n).map(|i| i * 2 * (me + 1)).collect();
        let mut got = vec![-1i32; 2 * n * (me + 1)];
        run_forms!(
            form,
            w,
            alltoallv,
            ialltoallv,
            alltoallv_init(
                Typed::new(&send, n * (n + 1), &pair)?,
                &sc,
                &sd,
                &mut got,
                &rc,
                &rd
            )
        );
        let want: Vec<i32> = (0..n)
            .flat_map(|src| {
                (0..2 * (me + 1)).map(move |k| (src * 10_000 + 2 * me * (n + 1) + k) as i32)
            })
            .collect();
        check_eq("alltoallv pairs to ints", &got, &want);
    }
    Ok(())
}

/// Reductions of matrix columns (vector types, run on packed copies): allreduce, reduce,
/// scan, exscan, reduce_scatter_block, against the same reductions of plain slices, with
/// every algorithm forced, in place too.
fn reductions_of_columns(u: &Universe) -> Result<()> {
    let w = u.world();
    let n = w.size() as usize;
    for rows in [1usize, 5, 40_000] {
        let cols = 2;
        let col = column(rows, cols)?;
        let me = w.rank();
        let mine: Vec<f64> = (0..rows)
            .map(|i| (me as f64 + 1.0) * (i % 97) as f64)
            .collect();
        let mut m = vec![7.0f64; rows * cols];
        for (i, x) in mine.iter().enumerate() {
            m[i * cols + 1] = *x;
        }
        let mut sum = vec![0.0f64; rows];
        w.allreduce(&mine, &mut sum, &Op::SUM)?;
        let check_col = |what: &str, m: &[f64], want: &[f64]| {
            for i in 0..rows {
                assert!(m[i * cols] == 7.0, "{what}: column 0 touched at row {i}");
                assert!(
                    m[i * cols + 1] == want[i],
                    "{what}: row {i} is {}, expected {}",
                    m[i * cols + 1],
                    want[i]
                );
            }
        };
        each_algorithm(w, Coll::Allreduce, |c, alg| {
            for form in 0..3 {
                let mut out = vec![7.0f64; rows * cols];
                run_forms!(
                    form,
                    c,
                    allreduce,
                    iallreduce,
                    allreduce_init(
                        Typed::at(&m, 1, 1, &col)?,
                        TypedMut::at(&mut out, 1, 1, &col)?,
                        &Op::SUM
                    )
                );
                check_col(&format!("allreduce of a column {alg}"), &out, &sum);
                let mut inout = m.clone();
                c.allreduce(IN_PLACE, TypedMut::at(&mut inout, 1, 1, &col)?, &Op::SUM)?;
                check_col(
                    &format!("in-place allreduce of a column {alg}"),
                    &inout,
                    &sum,
                );
            }
            Ok(())
        })?;
        each_algorithm(w, Coll::Reduce, |c, alg| {
            for root in 0..c.size() {
                let mut out = vec![7.0f64; rows * cols];
                if c.rank() == root {
                    c.reduce(
                        Typed::at(&m, 1, 1, &col)?,
                        TypedMut::at(&mut out, 1, 1, &col)?,
                        &Op::SUM,
                        root,
                    )?;
                    check_col(&format!("reduce of a column {alg} root {root}"), &out, &sum);
                } else {
                    c.reduce(Typed::at(&m, 1, 1, &col)?, &mut [0.0f64; 0], &Op::SUM, root)?;
                }
            }
            Ok(())
        })?;
        if rows < 10 {
            let mut scan = vec![0.0f64; rows];
            w.scan(&mine, &mut scan, &Op::MAX)?;
            let mut out = vec![7.0f64; rows * cols];
            w.scan(
                Typed::at(&m, 1, 1, &col)?,
                TypedMut::at(&mut out, 1, 1, &col)?,
                &Op::MAX,
            )?;
            check_col("scan of a column", &out, &scan);
            let mut ex = vec![0.0f64; rows];
            w.exscan(&mine, &mut ex, &Op::SUM)?;
            let mut out = vec![7.0f64; rows * cols];
            w.exscan(
                Typed::at(&m, 1, 1, &col)?,
                TypedMut::at(&mut out, 1, 1, &col)?,
                &Op::SUM,
            )?;
            if me > 0 {
                check_col("exscan of a column", &out, &ex);
            } else {
                assert!(
                    out.iter().all(|&x| x == 7.0),
                    "exscan on rank 0 touched its buffer"
                );
            }
        }
        // reduce_scatter_block: a column of rows * n values, each rank keeps rows of them.
        let big = column(rows * n, 1)?;
        let v: Vec<f64> = (0..rows * n)
            .map(|i| (me as f64 + 1.0) * i as f64)
            .collect();
        let mut want = vec![0.0f64; rows];
        w.reduce_scatter_block(&v, &mut want, &Op::SUM)?;
        each_algorithm(w, Coll::ReduceScatterBlock, |c, alg| {
            let mut got = vec![0.0f64; rows];
            c.reduce_scatter_block(Typed::new(&v, 1, &big)?, &mut got, &Op::SUM)?;
            check_eq(
                &format!("reduce_scatter_block of a column {alg}"),
                &got,
                &want,
            );
            Ok(())
        })?;
    }
    Ok(())
}

/// MINLOC over DOUBLE_INT pairs seen through typed views (a type with padding: the
/// reduction's copies keep it), a broadcast of doubles received as bytes on some ranks with
/// every algorithm, and a reduce whose non-root receive buffer is an empty slice of another
/// type (it does not count there).
fn pair_reductions_and_mixed_buffers(u: &Universe) -> Result<()> {
    let w = u.world();
    let me = w.rank();
    let n = w.size();
    let di = Datatype::basic(BasicType::DoubleInt);
    for count in [1usize, 3, 4, 9] {
        let mine: Vec<ValueIndex<f64>> = (0..count)
            .map(|i| ValueIndex {
                value: ((me as usize * 7 + i * 3) % 5) as f64,
                index: me,
            })
            .collect();
        let mut want = vec![
            ValueIndex {
                value: 0.0,
                index: 0
            };
            count
        ];
        w.allreduce(&mine, &mut want, &Op::MINLOC)?;
        each_algorithm(w, Coll::Allreduce, |c, alg| {
            let mut got = vec![
                ValueIndex {
                    value: -1.0,
                    index: -1
                };
                count
            ];
            c.allreduce(
                Typed::new(&mine, count, &di)?,
                TypedMut::new(&mut got, count, &di)?,
                &Op::MINLOC,
            )?;
            check_eq(&format!("typed MINLOC {alg} count {count}"), &got, &want);
            Ok(())
        })?;
        // The root's receive buffer typed, the others' ignored and of another type.
        let mut got = vec![
            ValueIndex {
                value: -1.0,
                index: -1
            };
            count
        ];
        if me == 0 {
            w.reduce(&mine, TypedMut::new(&mut got, count, &di)?, &Op::MINLOC, 0)?;
            check_eq("typed MINLOC reduce", &got, &want);
        } else {
            w.reduce(&mine, &mut [0u8; 0], &Op::MINLOC, 0)?;
        }
    }
    // Doubles broadcast, received as bytes by odd ranks: every rank cuts the same pieces.
    let len = 9_001;
    let src: Vec<f64> = (0..len).map(|i| i as f64 * 0.25).collect();
    each_algorithm(w, Coll::Bcast, |c, alg| {
        for root in [0, n - 1] {
            if me % 2 == 1 && me != root {
                let mut bytes = vec![0u8; len * 8];
                c.bcast(&mut bytes, root)?;
                let back: Vec<f64> = bytes
                    .chunks(8)
                    .map(|b| f64::from_le_bytes(b.try_into().unwrap()))
                    .collect();
                check_eq(&format!("bcast {alg} of doubles as bytes"), &back, &src);
            } else {
                let mut v = if me == root {
                    src.clone()
                } else {
                    vec![0.0f64; len]
                };
                c.bcast(&mut v, root)?;
                check_eq(&format!("bcast {alg} of doubles"), &v, &src);
            }
        }
        Ok(())
    })
}

/// On a periodic ring, neighbor_allgather and neighbor_alltoall into the two columns of a
/// `rows x 2` matrix: the vector from the rank at -1 lands in column 0, the one from +1 in
/// column 1.
fn neighbors_into_columns(u: &Universe) -> Result<()> {
    let w = u.world();
    let ring = w
        .cart_create(&[w.size()], &[true], false)?
        .expect("in the ring");
    let (me, n) = (ring.rank(), ring.size());
    let rows = 5;
    let col = column_resized(rows, 2)?;
    let (left, right) = ((me + n - 1) % n, (me + 1) % n);
    for form in 0..3 {
        let mine: Vec<f64> = (0..rows).map(|i| val(me, i)).collect();
        let mut m = vec![-1.0f64; rows * 2];
        run_forms!(
            form,
            ring,
            neighbor_allgather,
            ineighbor_allgather,
            neighbor_allgather_init(&mine, TypedMut::new(&mut m, 2, &col)?)
        );
        let want: Vec<f64> = (0..rows)
            .flat_map(|i| [val(left, i), val(right, i)])
            .collect();
        check_eq("neighbor_allgather into columns", &m, &want);
        // neighbor_alltoall: block 0 goes to -1, block 1 to +1; each block a column of the
        // sender's matrix.
        let out: Vec<f64> = (0..rows)
            .flat_map(|i| [val(me, 100 + i), val(me, 200 + i)])
            .collect();
        let mut got = vec![-1.0f64; rows * 2];
        run_forms!(
            form,
            ring,
            neighbor_alltoall,
            ineighbor_alltoall,
            neighbor_alltoall_init(Typed::new(&out, 2, &col)?, &mut got)
        );
        // From -1 comes what it sent towards +1 (its column 1), from +1 its column 0.
        let want: Vec<f64> = (0..rows)
            .map(|i| val(left, 200 + i))
            .chain((0..rows).map(|i| val(right, 100 + i)))
            .collect();
        check_eq("neighbor_alltoall of columns", &got, &want);
    }
    Ok(())
}

/// Typed views on an intercommunicator: a column broadcast from a root of group 0, and a
/// gather of int pairs into `contiguous(2, int)` at a root of group 1.
fn intercommunicator(u: &Universe) -> Result<()> {
    let w = u.world();
    if w.size() < 2 {
        return Ok(());
    }
    let g = w.rank() % 2;
    let local = w.split(g, w.rank())?.expect("color");
    let ic = local.intercomm_create(0, w, 1 - g, 77)?;
    let me = ic.rank();
    let remote = ic.remote_size()? as usize;
    let (rows, cols) = (6, 4);
    let col = column(rows, cols)?;
    let want: Vec<f64> = (0..rows).map(|i| val(0, i)).collect();
    let mut m = vec![-1.0f64; rows * cols];
    let root_arg = |rg: i32| match (g == rg, me == 0) {
        (true, true) => ROOT,
        (true, false) => PROC_NULL,
        (false, _) => 0,
    };
    if g == 0 && me == 0 {
        for i in 0..rows {
            m[i * cols + 2] = want[i];
        }
    }
    ic.bcast(TypedMut::at(&mut m, 2, 1, &col)?, root_arg(0))?;
    if g == 1 {
        let got: Vec<f64> = (0..rows).map(|i| m[i * cols + 2]).collect();
        check_eq("intercommunicator bcast of a column", &got, &want);
    }
    let pair = committed(Datatype::contiguous(2, &Datatype::basic(BasicType::Int))?)?;
    let mine = [me * 2, me * 2 + 1];
    let mut got = vec![-1i32; 2 * remote];
    match root_arg(1) {
        ROOT => {
            ic.gather(&[0i32; 0], TypedMut::new(&mut got, remote, &pair)?, ROOT)?;
            let want: Vec<i32> = (0..2 * remote as i32).collect();
            check_eq("intercommunicator gather of pairs", &got, &want);
        }
        r => ic.gather(&mine, &mut [0i32; 0], r)?,
    }
    Ok(())
}

fn misuse(u: &Universe) -> Result<()> {
    let w = u.world();
    w.set_errhandler(ErrHandler::Return);
    let ints = committed(Datatype::contiguous(2, &Datatype::basic(BasicType::Int))?)?;
    let v = [1i32, 2];
    // Receiving ints as doubles: the signatures differ, whatever the layouts.
    let mut d = [0.0f64; 1];
    assert_err(
        w.allgather(Typed::new(&v, 1, &ints)?, &mut d[..0]),
        ErrorClass::Type,
        "type signatures differ",
    );
    // A predefined operation on a datatype of two predefined types.
    let mixed = committed(Datatype::create_struct(
        &[1, 1],
        &[0, 8],
        &[Datatype::of::<f64>(), Datatype::of::<i32>()],
    )?)?;
    let bytes = [0u8; 16];
    let mut out = [0u8; 16];
    assert_err(
        w.allreduce(
            Typed::new(&bytes, 1, &mixed)?,
            TypedMut::new(&mut out, 1, &mixed)?,
            &Op::SUM,
        ),
        ErrorClass::Op,
        "one predefined type",
    );
    // A user operation made for another type.
    let on_i64 = Op::user(true, |a: &[i64], b: &mut [i64]| {
        for (x, y) in a.iter().zip(b) {
            *y += x;
        }
    });
    let col = column(2, 2)?;
    let m = [1.0f64; 4];
    let mut o = [0.0f64; 4];
    assert_err(
        w.allreduce(
            Typed::new(&m, 1, &col)?,
            TypedMut::new(&mut o, 1, &col)?,
            &on_i64,
        ),
        ErrorClass::Op,
        "user op",
    );
    // Raw bytes on one side, doubles on the other (the bytes pass the signature check):
    // one reduction takes one datatype.
    let raw = [[0u8; 8]];
    let mut d1 = [0.0f64];
    assert_err(
        w.allreduce(&raw, &mut d1, &Op::SUM),
        ErrorClass::Type,
        "one datatype",
    );
    // Elements of no bytes reduce (to nothing) on every rank, the root's receive buffer of
    // the same type, the others' of another: no division by a zero element size.
    let empty_elems = [[0.0f64; 0]; 3];
    let mut d0: [f64; 0] = [];
    if w.rank() == 0 {
        w.reduce(&empty_elems, &mut [[0.0f64; 0]; 3], &Op::SUM, 0)?;
    } else {
        w.reduce(&empty_elems, &mut d0, &Op::SUM, 0)?;
    }
    // The alltoallw forms take slices: their datatypes are in the specs.
    let n = w.size() as usize;
    let specs: Vec<(usize, usize, &Datatype)> = (0..n).map(|_| (0, 0, &ints)).collect();
    assert_err(
        w.alltoallw(Typed::new(&v, 1, &ints)?, &specs, &mut [0i32; 2], &specs),
        ErrorClass::Buffer,
        "slices",
    );
    // A gather whose send data is not a whole number of the root's receive elements fails
    // at the root instead of cutting elements.
    let three = committed(Datatype::contiguous(3, &Datatype::basic(BasicType::Int))?)?;
    let mut got = vec![0i32; 3 * n];
    if w.rank() == 0 {
        assert_err(
            w.gather(&v, TypedMut::new(&mut got, n, &three)?, 0),
            ErrorClass::Type,
            "not a whole number",
        );
    } else if let Err(e) = w.gather(&v, &mut [0i32; 0], 0) {
        // Off the root the gather may end before the root's notice arrives.
        assert_eq!(e.class(), ErrorClass::Type, "{e}");
    }
    Ok(())
}

/// User operations on bytes (what a C `MPI_User_function` needs): a non-commutative 2x2
/// matrix product over a contiguous datatype of 4 doubles keeps rank order in reduce and
/// allreduce; a sum on plain `i32` slices sees `count` elements of a 4-byte datatype; a
/// datatype with holes is MPI_ERR_OP.
fn bytes_user_operations(u: &Universe) -> Result<()> {
    let w = u.world();
    let (r, n) = (w.rank(), w.size());
    let matmul = Op::user_bytes(
        false,
        |a: &[u8], b: &mut [u8], count: usize, dt: &Datatype| {
            assert_eq!(dt.size(), 32, "the operation is given its datatype");
            let f =
                |s: &[u8], i: usize| f64::from_le_bytes(s[8 * i..8 * i + 8].try_into().unwrap());
            for k in 0..count {
                let (x, y) = (&a[32 * k..32 * k + 32], &b[32 * k..32 * k + 32]);
                let p = [
                    f(x, 0) * f(y, 0) + f(x, 1) * f(y, 2),
                    f(x, 0) * f(y, 1) + f(x, 1) * f(y, 3),
                    f(x, 2) * f(y, 0) + f(x, 3) * f(y, 2),
                    f(x, 2) * f(y, 1) + f(x, 3) * f(y, 3),
                ];
                for (i, v) in p.iter().enumerate() {
                    b[32 * k + 8 * i..32 * k + 8 * i + 8].copy_from_slice(&v.to_le_bytes());
                }
            }
        },
    );
    assert!(!matmul.is_commutative());
    let mat = committed(Datatype::contiguous(4, &Datatype::of::<f64>())?)?;
    // Rank 0's matrix swaps the rows; every other rank's is [[1, r], [0, 1]].
    let m: [f64; 4] = if r == 0 {
        [0.0, 1.0, 1.0, 0.0]
    } else {
        [1.0, r as f64, 0.0, 1.0]
    };
    let s = (n * (n - 1) / 2) as f64;
    let want = if n == 1 {
        [0.0, 1.0, 1.0, 0.0]
    } else {
        [0.0, 1.0, 1.0, s]
    };
    let mut p = [0.0f64; 4];
    w.allreduce(
        Typed::new(&m, 1, &mat)?,
        TypedMut::new(&mut p, 1, &mat)?,
        &matmul,
    )?;
    check_eq("allreduce of the ordered product", &p, &want);
    let mut q = [0.0f64; 4];
    w.reduce(
        Typed::new(&m, 1, &mat)?,
        TypedMut::new(&mut q, 1, &mat)?,
        &matmul,
        n - 1,
    )?;
    if r == n - 1 {
        check_eq("reduce of the ordered product", &q, &want);
    }
    let sum = Op::user_bytes(
        true,
        |a: &[u8], b: &mut [u8], count: usize, dt: &Datatype| {
            assert_eq!((dt.size(), a.len()), (4, 4 * count), "i32 elements");
            for i in 0..count {
                let x = i32::from_le_bytes(a[4 * i..4 * i + 4].try_into().unwrap());
                let y = i32::from_le_bytes(b[4 * i..4 * i + 4].try_into().unwrap());
                b[4 * i..4 * i + 4].copy_from_slice(&(x + y).to_le_bytes());
            }
        },
    );
    let mut t = [0i32; 3];
    w.allreduce(&[r, 1, 2 * r][..], &mut t[..], &sum)?;
    check_eq("sum on i32 slices", &t, &[n * (n - 1) / 2, n, n * (n - 1)]);
    // Holes: the function gets the elements as the datatype lays them out (an i32, then a
    // 4-byte hole), and only the data comes back.
    let holed = Datatype::create_resized(&Datatype::basic(BasicType::Int), 0, 8)?;
    holed.commit()?;
    let spaced_sum = Op::user_bytes(
        true,
        |a: &[u8], b: &mut [u8], count: usize, dt: &Datatype| {
            assert_eq!(
                (dt.extent(), a.len()),
                (8, 8 * count - 4),
                "laid out with holes"
            );
            for i in 0..count {
                let at = 8 * i;
                let x = i32::from_le_bytes(a[at..at + 4].try_into().unwrap());
                let y = i32::from_le_bytes(b[at..at + 4].try_into().unwrap());
                b[at..at + 4].copy_from_slice(&(x + y).to_le_bytes());
            }
        },
    );
    let mine = [r, -7, 2 * r, -7, 3 * r];
    let mut got = [-1i32; 5];
    w.allreduce(
        Typed::new(&mine, 3, &holed)?,
        TypedMut::new(&mut got, 3, &holed)?,
        &spaced_sum,
    )?;
    let s = n * (n - 1) / 2;
    check_eq("user op over holes", &got, &[s, -1, 2 * s, -1, 3 * s]);
    // A datatype whose data starts before displacement 0: refused on every rank alike.
    w.set_errhandler(ErrHandler::Return);
    let before = Datatype::create_resized(&holed, -8, 8)?;
    before.commit()?;
    let data = [1i32; 4];
    let mut out = [0i32; 4];
    assert_err(
        w.allreduce(
            Typed::new(&data[2..], 1, &before)?,
            TypedMut::new(&mut out[2..], 1, &before)?,
            &spaced_sum,
        ),
        ErrorClass::Op,
        "displacement 0",
    );
    w.set_errhandler(ErrHandler::Fatal);
    Ok(())
}
