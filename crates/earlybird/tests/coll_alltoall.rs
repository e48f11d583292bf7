//! Alltoall, alltoallv and alltoallw against sequential references: every algorithm forced in
//! turn, blocking, nonblocking and persistent, counts 0, 1, odd and large, IN_PLACE, padded
//! element types, vector and struct datatypes, and misuse.

mod common;

use common::{assert_err, check_eq, each_algorithm};
use earlybird::{
    scope, Coll, Comm, Datatype, Equivalence, ErrHandler, ErrorClass, Result, Universe, WSpec,
    IN_PLACE,
};

scenarios! {
    alltoall_matches_reference [1, 2, 3, 4, 8];
    alltoall_padded_elements [1, 2, 3];
    alltoallv_matches_reference [1, 2, 3, 4, 8];
    alltoallw_with_datatypes [1, 2, 3, 4, 8];
    persistent_alltoalls_restart [1, 2, 3, 4];
    bad_arguments_are_errors [1, 2, 3];
}

/// What rank `src` sends rank `dst` as element `i` (in round `round`).
fn value(src: i32, dst: i32, i: usize, round: usize) -> i64 {
    (src as i64 + 1) * 1_000_003 + (dst as i64 + 1) * 10_007 + i as i64 * 7 + round as i64
}

fn send_of(c: &Comm, count: usize, round: usize) -> Vec<i64> {
    (0..c.size())
        .flat_map(|j| (0..count).map(move |i| (j, i)))
        .map(|(j, i)| value(c.rank(), j, i, round))
        .collect()
}

fn want_of(c: &Comm, count: usize, round: usize) -> Vec<i64> {
    (0..c.size())
        .flat_map(|j| (0..count).map(move |i| (j, i)))
        .map(|(j, i)| value(j, c.rank(), i, round))
        .collect()
}

fn alltoall_matches_reference(u: &Universe) -> Result<()> {
    let w = u.world();
    each_algorithm(w, Coll::Alltoall, |c, name| {
        let n = c.size() as usize;
        for count in [0usize, 1, 7, 1000, 20_000] {
            let what = format!("alltoall {name} count {count}");
            let send = send_of(c, count, 0);
            let want = want_of(c, count, 0);
            let mut recv = vec![-1i64; n * count];
            c.alltoall(&send, &mut recv)?;
            check_eq(&what, &recv, &want);
            let mut inout = send.clone();
            c.alltoall(IN_PLACE, &mut inout)?;
            check_eq(&format!("in-place {what}"), &inout, &want);
            if count > 1000 {
                continue;
            }
            let mut r2 = vec![-1i64; n * count];
            let mut r3 = send.clone();
            scope(|s| -> Result<()> {
                let mut a = c.ialltoall(s, &send, &mut r2)?;
                let mut b = c.ialltoall(s, IN_PLACE, &mut r3)?;
                b.wait()?;
                a.wait()?;
                Ok(())
            })?;
            check_eq(&format!("i{what}"), &r2, &want);
            check_eq(&format!("in-place i{what}"), &r3, &want);
        }
        Ok(())
    })
}

#[derive(Clone, Copy, Debug, PartialEq, Equivalence)]
#[repr(C)]
struct Padded {
    a: u8,
    b: i64,
    c: u16,
}

fn padded(src: i32, dst: i32, i: usize) -> Padded {
    Padded {
        a: (src * 16 + dst) as u8,
        b: value(src, dst, i, 0),
        c: i as u16,
    }
}

/// A type with padding moves through its own datatype, whatever the algorithm.
fn alltoall_padded_elements(u: &Universe) -> Result<()> {
    let w = u.world();
    each_algorithm(w, Coll::Alltoall, |c, name| {
        let n = c.size();
        for count in [1usize, 5] {
            let send: Vec<Padded> = (0..n)
                .flat_map(|j| (0..count).map(move |i| padded(c.rank(), j, i)))
                .collect();
            let want: Vec<Padded> = (0..n)
                .flat_map(|j| (0..count).map(move |i| padded(j, c.rank(), i)))
                .collect();
            let mut recv = vec![padded(-1, -1, 0); n as usize * count];
            c.alltoall(&send, &mut recv)?;
            assert_eq!(recv, want, "{name} count {count}");
            let mut inout = send.clone();
            c.alltoall(IN_PLACE, &mut inout)?;
            assert_eq!(inout, want, "in place {name} count {count}");
        }
        Ok(())
    })
}

/// Rank `src`'s count for rank `dst` (0 for some pairs).
fn vcount(src: i32, dst: i32, scale: usize) -> usize {
    ((src as usize * 3 + dst as usize * 5) % 4) * scale
}

/// Blocks in reverse rank order with a gap of 2 after each (displacements, total length).
fn layout_of(counts: &[usize]) -> (Vec<usize>, usize) {
    let mut d = vec![0; counts.len()];
    let mut at = 0;
    for i in (0..counts.len()).rev() {
        d[i] = at;
        at += counts[i] + 2;
    }
    (d, at)
}

fn alltoallv_matches_reference(u: &Universe) -> Result<()> {
    let w = u.world();
    each_algorithm(w, Coll::Alltoallv, |c, name| {
        let (r, n) = (c.rank(), c.size());
        for scale in [0usize, 1, 3, 777] {
            let what = format!("alltoallv {name} scale {scale}");
            let sc: Vec<usize> = (0..n).map(|j| vcount(r, j, scale)).collect();
            let rc: Vec<usize> = (0..n).map(|i| vcount(i, r, scale)).collect();
            let (sd, slen) = layout_of(&sc);
            let (rd, rlen) = layout_of(&rc);
            let mut send = vec![-7i64; slen];
            for j in 0..n as usize {
                for i in 0..sc[j] {
                    send[sd[j] + i] = value(r, j as i32, i, 0);
                }
            }
            let mut want = vec![-1i64; rlen];
            for j in 0..n as usize {
                for i in 0..rc[j] {
                    want[rd[j] + i] = value(j as i32, r, i, 0);
                }
            }
            let mut recv = vec![-1i64; rlen];
            c.alltoallv(&send, &sc, &sd, &mut recv, &rc, &rd)?;
            check_eq(&what, &recv, &want);
            // In place: the outgoing blocks sit where the incoming ones go, at the receive
            // counts (so each pair's counts must agree both ways: symmetric counts).
            let sym: Vec<usize> = (0..n)
                .map(|j| vcount(r, j, scale) + vcount(j, r, scale))
                .collect();
            let (sdd, len) = layout_of(&sym);
            let mut inout = vec![-1i64; len];
            let mut want2 = vec![-1i64; len];
            for j in 0..n as usize {
                for i in 0..sym[j] {
                    inout[sdd[j] + i] = value(r, j as i32, i, 1);
                    want2[sdd[j] + i] = value(j as i32, r, i, 1);
                }
            }
            c.alltoallv(IN_PLACE, &[], &[], &mut inout, &sym, &sdd)?;
            check_eq(&format!("in-place {what}"), &inout, &want2);
            let mut recv2 = vec![-1i64; rlen];
            scope(|s| -> Result<()> {
                let mut q = c.ialltoallv(s, &send, &sc, &sd, &mut recv2, &rc, &rd)?;
                q.wait()?;
                Ok(())
            })?;
            check_eq(&format!("i{what}"), &recv2, &want);
        }
        Ok(())
    })
}

fn alltoallw_with_datatypes(u: &Universe) -> Result<()> {
    let w = u.world();
    let int = Datatype::of::<i32>();
    let three = Datatype::contiguous(3, &int)?;
    three.commit()?;
    // Three ints two apart; and ints at 0, 1 and 4 (a struct).
    let strided = Datatype::vector(3, 1, 2, &int)?;
    strided.commit()?;
    let st = Datatype::create_struct(&[2, 1], &[0, 16], &[int.clone(), int.clone()])?;
    st.commit()?;
    let v = |src: i32, dst: i32, q: usize| src * 1000 + dst * 10 + q as i32;
    each_algorithm(w, Coll::Alltoallw, |c, name| {
        let (r, n) = (c.rank(), c.size() as usize);
        // Send: three ints per peer, contiguous; by MPI_INT x 3 or one contiguous-of-3.
        let send: Vec<i32> = (0..n)
            .flat_map(|j| (0..3).map(move |q| v(r, j as i32, q)))
            .collect();
        let sspecs: Vec<WSpec> = (0..n)
            .map(|j| {
                if j % 2 == 0 {
                    (3, 12 * j, &int)
                } else {
                    (1, 12 * j, &three)
                }
            })
            .collect();
        // Receive: six slots per peer; the vector type fills 0, 2, 4, the struct 0, 1, 4.
        let rspecs: Vec<WSpec> = (0..n)
            .map(|i| {
                if i % 2 == 0 {
                    (1, 24 * i, &strided)
                } else {
                    (1, 24 * i, &st)
                }
            })
            .collect();
        let slots = |i: usize| {
            if i.is_multiple_of(2) {
                [0, 2, 4]
            } else {
                [0, 1, 4]
            }
        };
        let mut want = vec![-1i32; 6 * n];
        for i in 0..n {
            for (q, &k) in slots(i).iter().enumerate() {
                want[6 * i + k] = v(i as i32, r, q);
            }
        }
        let mut recv = vec![-1i32; 6 * n];
        c.alltoallw(&send, &sspecs, &mut recv, &rspecs)?;
        assert_eq!(recv, want, "alltoallw {name}");
        // In place, through the receive types.
        let mut inout = vec![-1i32; 6 * n];
        for i in 0..n {
            for (q, &k) in slots(i).iter().enumerate() {
                inout[6 * i + k] = v(r, i as i32, q);
            }
        }
        c.alltoallw(IN_PLACE, &[], &mut inout, &rspecs)?;
        assert_eq!(inout, want, "in-place alltoallw {name}");
        // Varying counts, some zero, large ones past the eager limit.
        for scale in [1usize, 5000] {
            let cnt = |a: usize, b: usize| ((a + 2 * b) % 3) * scale;
            let sc: Vec<usize> = (0..n).map(|j| cnt(r as usize, j)).collect();
            let rc: Vec<usize> = (0..n).map(|i| cnt(i, r as usize)).collect();
            let (sd, slen) = layout_of(&sc);
            let (rd, rlen) = layout_of(&rc);
            let mut send = vec![0i32; slen];
            for j in 0..n {
                for q in 0..sc[j] {
                    send[sd[j] + q] = v(r, j as i32, q);
                }
            }
            let ss: Vec<WSpec> = (0..n).map(|j| (sc[j], 4 * sd[j], &int)).collect();
            let rs: Vec<WSpec> = (0..n).map(|i| (rc[i], 4 * rd[i], &int)).collect();
            let mut want = vec![-1i32; rlen];
            for i in 0..n {
                for q in 0..rc[i] {
                    want[rd[i] + q] = v(i as i32, r, q);
                }
            }
            let mut recv = vec![-1i32; rlen];
            scope(|s| -> Result<()> {
                let mut q = c.ialltoallw(s, &send, &ss, &mut recv, &rs)?;
                q.wait()?;
                Ok(())
            })?;
            check_eq(&format!("ialltoallw {name} scale {scale}"), &recv, &want);
        }
        Ok(())
    })
}

fn persistent_alltoalls_restart(u: &Universe) -> Result<()> {
    let w = u.world();
    let (r, n) = (w.rank(), w.size());
    let count = 3;
    let mut send = send_of(w, count, 0);
    let mut recv = vec![0i64; n as usize * count];
    let sc: Vec<usize> = (0..n).map(|j| vcount(r, j, 2)).collect();
    let rc: Vec<usize> = (0..n).map(|i| vcount(i, r, 2)).collect();
    let (sd, slen) = layout_of(&sc);
    let (rd, rlen) = layout_of(&rc);
    let mut vsend = vec![0i64; slen];
    let mut vrecv = vec![-1i64; rlen];
    let mut inout = vec![0i64; n as usize * count];
    scope(|s| -> Result<()> {
        let mut a = w.alltoall_init(s, &mut send, &mut recv)?;
        let mut b = w.alltoallv_init(s, &mut vsend, &sc, &sd, &mut vrecv, &rc, &rd)?;
        let mut p = w.alltoall_init(s, IN_PLACE, &mut inout)?;
        for round in 0..100 {
            a.send_buffer_mut::<i64>()?
                .copy_from_slice(&send_of(w, count, round));
            let vs = b.send_buffer_mut::<i64>()?;
            for j in 0..n as usize {
                for i in 0..sc[j] {
                    vs[sd[j] + i] = value(r, j as i32, i, round);
                }
            }
            p.buffer_mut::<i64>()?
                .copy_from_slice(&send_of(w, count, round + 1));
            a.start()?;
            b.start()?;
            p.start()?;
            p.wait()?;
            b.wait()?;
            a.wait()?;
            check_eq(
                "alltoall_init",
                a.buffer_mut::<i64>()?,
                &want_of(w, count, round),
            );
            check_eq(
                "in-place alltoall_init",
                p.buffer_mut::<i64>()?,
                &want_of(w, count, round + 1),
            );
            let vr = b.buffer_mut::<i64>()?;
            for i in 0..n as usize {
                for k in 0..rc[i] {
                    assert_eq!(
                        vr[rd[i] + k],
                        value(i as i32, r, k, round),
                        "alltoallv_init"
                    );
                }
            }
        }
        Ok(())
    })
}

fn bad_arguments_are_errors(u: &Universe) -> Result<()> {
    let w: &Comm = u.world();
    w.set_errhandler(ErrHandler::Return);
    let n = w.size() as usize;
    let send = vec![0i32; 2 * n + 1];
    let mut recv = vec![0i32; 2 * n];
    if n > 1 {
        assert_err(
            w.alltoall(&send, &mut recv),
            ErrorClass::Count,
            &format!("{}", 2 * n + 1),
        );
    }
    assert_err(
        w.alltoall(&send[..2 * n], &mut recv[..n]),
        ErrorClass::Count,
        "receive buffer",
    );
    let c1 = vec![1usize; n];
    let d1: Vec<usize> = (0..n).collect();
    assert_err(
        w.alltoallv(&send, &c1[..n - 1], &d1, &mut recv, &c1, &d1),
        ErrorClass::Arg,
        &format!("{} entries", n - 1),
    );
    let mut bad = d1.clone();
    bad[n - 1] = 1000;
    assert_err(
        w.alltoallv(&send, &c1, &bad, &mut recv, &c1, &d1),
        ErrorClass::Count,
        "displacement 1000",
    );
    if n > 1 {
        let same = vec![0usize; n];
        assert_err(
            w.alltoallv(&send, &c1, &d1, &mut recv, &c1, &same),
            ErrorClass::Buffer,
            "overlap",
        );
    }
    let int = Datatype::of::<i32>();
    let loose = Datatype::vector(2, 1, 3, &int)?;
    let specs: Vec<WSpec> = (0..n).map(|i| (1, 4 * i, &int)).collect();
    let lspecs: Vec<WSpec> = (0..n).map(|_| (1, 0, &loose)).collect();
    assert_err(
        w.alltoallw(&send, &specs, &mut recv, &lspecs),
        ErrorClass::Type,
        "commit",
    );
    let far: Vec<WSpec> = (0..n).map(|i| (1, 4 * i + 4000, &int)).collect();
    assert_err(
        w.alltoallw(&send, &specs, &mut recv, &far),
        ErrorClass::Buffer,
        "receive block 0",
    );
    assert_err(
        w.alltoallw(&send, &specs[1..], &mut recv, &specs),
        ErrorClass::Arg,
        "send",
    );
    // Everyone still agrees on what comes next.
    let mut x: Vec<i32> = (0..n as i32).collect();
    w.alltoall(IN_PLACE, &mut x)?;
    assert_eq!(x, vec![w.rank(); n]);
    Ok(())
}
