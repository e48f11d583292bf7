//! MPI_Sendrecv and MPI_Sendrecv_replace (MPI 4.1 §3.10) and their nonblocking forms
//! (MPI_Isendrecv, MPI_Isendrecv_replace): ring shifts at every size, replace around the
//! whole ring, and non-periodic shifts whose ends talk to PROC_NULL.

mod common;
use common::*;
use earlybird::{
    scope, test_any, wait_all, Result, Status, Tested, Universe, ANY_SOURCE, ANY_TAG, PROC_NULL,
};

/// Ring shift with sendrecv at every size; the receive uses wildcards on odd sizes.
fn sendrecv_ring(u: &Universe) -> Result<()> {
    let w = u.world();
    let (right, left) = ring(w);
    let me = w.rank();
    for (k, len) in sizes(u).into_iter().enumerate() {
        let data = pattern((k as u64) << 10 | me as u64, len);
        let mut got = vec![0u8; len];
        let (src, tag) = if k % 2 == 1 {
            (ANY_SOURCE, ANY_TAG)
        } else {
            (left, k as i32)
        };
        let st = w.sendrecv(&data, right, k as i32, &mut got, src, tag)?;
        assert_eq!((st.source(), st.tag(), st.bytes()), (left, k as i32, len));
        check_eq(
            &format!("sendrecv {len} bytes"),
            &got,
            &pattern((k as u64) << 10 | left as u64, len),
        );
    }
    // Different send and receive types and lengths.
    let sent: Vec<u32> = (0..100).map(|i| i * 3 + me as u32).collect();
    let mut got = vec![0u8; 400];
    let st = w.sendrecv(&sent, right, 1, &mut got, left, 1)?;
    assert_eq!(st.count::<u32>(), Some(100));
    let want: Vec<u32> = (0..100).map(|i| i * 3 + left as u32).collect();
    let want: Vec<u8> = want.iter().flat_map(|x| x.to_ne_bytes()).collect();
    check_eq("sendrecv u32 as bytes", &got, &want);
    Ok(())
}

/// sendrecv_replace shifts a buffer one step right; after `size` shifts every rank holds its
/// own data again, and after each step it holds its k-th left neighbour's.
fn sendrecv_replace_ring(u: &Universe) -> Result<()> {
    let w = u.world();
    let (right, left) = ring(w);
    let (me, n) = (w.rank(), w.size());
    // Element counts: empty, one, just past the eager limit, 1 MiB.
    for len in [0usize, 1, u.eager_limit_bytes() / 8 + 1, 1 << 17] {
        let mut buf: Vec<u64> = (0..len).map(|i| (me as u64) << 32 | i as u64).collect();
        for step in 1..=n {
            let st = w.sendrecv_replace(&mut buf, right, step, left, step)?;
            assert_eq!((st.source(), st.tag()), (left, step));
            let from = (me - step).rem_euclid(n) as u64;
            let want: Vec<u64> = (0..len).map(|i| from << 32 | i as u64).collect();
            check_eq(&format!("replace step {step}, {len} u64s"), &buf, &want);
        }
    }
    Ok(())
}

/// A non-periodic shift: the last rank sends to PROC_NULL, the first receives from
/// PROC_NULL (status source PROC_NULL, tag ANY_TAG, count 0, buffer untouched).
fn sendrecv_proc_null_ends(u: &Universe) -> Result<()> {
    let w = u.world();
    let (me, n) = (w.rank(), w.size());
    let dest = if me + 1 < n { me + 1 } else { PROC_NULL };
    let src = if me > 0 { me - 1 } else { PROC_NULL };
    let data = [me as i64; 32];
    let mut got = [-7i64; 32];
    let st = w.sendrecv(&data, dest, 4, &mut got, src, 4)?;
    if me == 0 {
        assert_eq!((st.source(), st.tag(), st.bytes()), (PROC_NULL, ANY_TAG, 0));
        assert_eq!(got, [-7i64; 32]);
    } else {
        assert_eq!(
            (st.source(), st.tag(), st.count::<i64>()),
            (me - 1, 4, Some(32))
        );
        assert_eq!(got, [(me - 1) as i64; 32]);
    }
    let mut buf = [me as i64; 8];
    let st = w.sendrecv_replace(&mut buf, dest, 5, src, 5)?;
    if me == 0 {
        assert_eq!(st.source(), PROC_NULL);
        assert_eq!(buf, [0i64; 8]);
    } else {
        assert_eq!(buf, [(me - 1) as i64; 8]);
    }
    Ok(())
}

/// isendrecv at every size: several shifts in flight at once, in both directions, completed
/// by wait_all, by test_any loops and one by one; the request's status is the receive's.
fn isendrecv_ring(u: &Universe) -> Result<()> {
    let w = u.world();
    let (right, left) = ring(w);
    let me = w.rank();
    for (k, len) in sizes(u).into_iter().enumerate() {
        let tag = k as i32;
        let to_right = pattern((k as u64) << 10 | me as u64, len);
        let to_left = pattern((k as u64) << 20 | me as u64, len);
        let (mut from_left, mut from_right) = (vec![0u8; len], vec![0u8; len]);
        scope(|s| -> Result<()> {
            let mut reqs = vec![
                w.isendrecv(s, &to_right, right, tag, &mut from_left, left, tag)?,
                w.isendrecv(
                    s,
                    &to_left,
                    left,
                    1000 + tag,
                    &mut from_right,
                    right,
                    1000 + tag,
                )?,
            ];
            let sts = match k % 3 {
                0 => wait_all(&mut reqs)?,
                1 => {
                    let mut sts = vec![Status::empty(); 2];
                    loop {
                        match test_any(&mut reqs)? {
                            Tested::Completed((i, st)) => sts[i] = st,
                            Tested::Pending => std::thread::yield_now(),
                            Tested::NoneActive => break,
                        }
                    }
                    sts
                }
                _ => {
                    let b = reqs[1].wait()?;
                    let a = reqs[0].wait()?;
                    vec![a, b]
                }
            };
            assert_eq!(
                (sts[0].source(), sts[0].tag(), sts[0].bytes()),
                (left, tag, len)
            );
            assert_eq!((sts[1].source(), sts[1].tag()), (right, 1000 + tag));
            assert!(reqs.iter().all(|r| r.is_null()), "both requests completed");
            Ok(())
        })?;
        check_eq(
            &format!("isendrecv from the left, {len} bytes"),
            &from_left,
            &pattern((k as u64) << 10 | left as u64, len),
        );
        check_eq(
            &format!("isendrecv from the right, {len} bytes"),
            &from_right,
            &pattern((k as u64) << 20 | right as u64, len),
        );
    }
    Ok(())
}

/// isendrecv_replace around the whole ring, as sendrecv_replace_ring, the request waited
/// after a test that may find it incomplete.
fn isendrecv_replace_ring(u: &Universe) -> Result<()> {
    let w = u.world();
    let (right, left) = ring(w);
    let (me, n) = (w.rank(), w.size());
    for len in [0usize, 1, u.eager_limit_bytes() / 8 + 1, 1 << 17] {
        let mut buf: Vec<u64> = (0..len).map(|i| (me as u64) << 32 | i as u64).collect();
        for step in 1..=n {
            let st = scope(|s| -> Result<Status> {
                let mut r = w.isendrecv_replace(s, &mut buf, right, step, left, step)?;
                match r.test()? {
                    Some(st) => Ok(st),
                    None => r.wait(),
                }
            })?;
            assert_eq!((st.source(), st.tag()), (left, step));
            let from = (me - step).rem_euclid(n) as u64;
            let want: Vec<u64> = (0..len).map(|i| from << 32 | i as u64).collect();
            check_eq(&format!("ireplace step {step}, {len} u64s"), &buf, &want);
        }
    }
    Ok(())
}

/// The nonblocking forms at the ends of a non-periodic shift (PROC_NULL halves complete at
/// once, the receive's status is PROC_NULL's).
fn isendrecv_proc_null_ends(u: &Universe) -> Result<()> {
    let w = u.world();
    let (me, n) = (w.rank(), w.size());
    let dest = if me + 1 < n { me + 1 } else { PROC_NULL };
    let src = if me > 0 { me - 1 } else { PROC_NULL };
    let data = [me as i64; 32];
    let mut got = [-7i64; 32];
    let st = scope(|s| w.isendrecv(s, &data, dest, 4, &mut got, src, 4)?.wait())?;
    if me == 0 {
        assert_eq!((st.source(), st.tag(), st.bytes()), (PROC_NULL, ANY_TAG, 0));
        assert_eq!(got, [-7i64; 32]);
    } else {
        assert_eq!(
            (st.source(), st.tag(), st.count::<i64>()),
            (me - 1, 4, Some(32))
        );
        assert_eq!(got, [(me - 1) as i64; 32]);
    }
    let mut buf = [me as i64; 8];
    let st = scope(|s| w.isendrecv_replace(s, &mut buf, dest, 5, src, 5)?.wait())?;
    if me == 0 {
        assert_eq!(st.source(), PROC_NULL);
        assert_eq!(buf, [0i64; 8]);
    } else {
        assert_eq!(buf, [(me - 1) as i64; 8]);
    }
    Ok(())
}

scenarios! {
    sendrecv_ring;
    sendrecv_replace_ring;
    sendrecv_proc_null_ends;
    isendrecv_ring [2, 3, 4, 8];
    isendrecv_replace_ring [2, 3, 4, 8];
    isendrecv_proc_null_ends [2, 3, 4, 8];
}
