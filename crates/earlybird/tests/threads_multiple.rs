//! MPI_THREAD_MULTIPLE through `Universe::share`: four threads share each rank and call on
//! its communicators at once (sends, receives with wildcards, probes, collectives on dup'ed
//! communicators), checked for exact delivery, as thread jobs and under ebrun.

mod common;
use earlybird::{ErrorClass, Op, Result, SharedComm, ThreadLevel, Universe, ANY_SOURCE, ANY_TAG};

const THREADS: i32 = 4;
const N: i32 = 200;
const M: i32 = 50;

/// What one thread received under wildcards: (source, tag, payload).
type Got = Vec<(i32, i32, [i32; 3])>;

fn one_thread(t: i32, w: &SharedComm, wild: &SharedComm, mine: &SharedComm) -> Result<Got> {
    let (n, me) = (w.size(), w.rank());
    let (right, left) = ((me + 1) % n, (me + n - 1) % n);
    // 1. Tag t from thread t: N messages to the right, N from the left, in order.
    for k in 0..N {
        w.send(&[me, t, k][..], right, t)?;
    }
    for k in 0..N {
        let mut b = [0i32; 3];
        let st = w.recv(&mut b[..], left, t)?;
        assert_eq!((st.source(), st.tag()), (left, t));
        assert_eq!(
            b,
            [left, t, k],
            "thread {t}: in order from the left rank's thread {t}"
        );
    }
    // 2. A probe for this thread's own tag, then the message it saw (on the world, where
    //    no receive takes any tag).
    w.send(&[me, t, -1][..], right, 500 + t)?;
    let st = w.probe(left, 500 + t)?;
    assert_eq!((st.source(), st.tag()), (left, 500 + t));
    let mut b = [0i32; 3];
    w.recv(&mut b[..], st.source(), st.tag())?;
    assert_eq!(b, [left, t, -1]);
    // 3. Wildcards: M messages each way, received under ANY_SOURCE / ANY_TAG by whichever
    //    thread gets them.
    for k in 0..M {
        wild.send(&[me, t, k][..], right, 100 + t)?;
    }
    let mut got = Got::new();
    for _ in 0..M {
        let mut b = [0i32; 3];
        let st = wild.recv(&mut b[..], ANY_SOURCE, ANY_TAG)?;
        got.push((st.source(), st.tag(), b));
    }
    // 4. Collectives on this thread's own duplicate, while the others run theirs.
    for round in 0..20 {
        let mut sum = [0i64];
        mine.allreduce(
            &[i64::from(me * THREADS + t + round)][..],
            &mut sum[..],
            &Op::SUM,
        )?;
        let want: i64 = (0..n).map(|r| i64::from(r * THREADS + t + round)).sum();
        assert_eq!(sum[0], want);
        let mut x = [0u32; 2];
        if me == 0 {
            x = [t as u32, round as u32];
        }
        mine.bcast(&mut x[..], 0)?;
        assert_eq!(x, [t as u32, round as u32]);
    }
    mine.barrier()?;
    Ok(got)
}

fn four_threads_share_a_rank(u: Universe) -> Result<()> {
    let sh = u.share()?;
    assert_eq!(sh.query_thread(), ThreadLevel::Multiple);
    assert!(sh.is_thread_main());
    let w = sh.world();
    let (n, me) = (w.size(), w.rank());
    let wild = w.dup()?;
    let dups: Vec<SharedComm> = (0..THREADS).map(|_| w.dup()).collect::<Result<_>>()?;
    let got: Vec<Got> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..THREADS)
            .map(|t| {
                let (w, wild, mine) = (w.clone(), wild.clone(), dups[t as usize].clone());
                s.spawn(move || one_thread(t, &w, &wild, &mine))
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().expect("thread"))
            .collect::<Result<Vec<_>>>()
    })?;
    // Exact delivery under wildcards: every (thread, k) of the left rank once, and each
    // receiving thread saw each sender thread's messages in the order they were sent.
    let left = (me + n - 1) % n;
    let mut seen = vec![vec![false; M as usize]; THREADS as usize];
    for g in &got {
        let mut last = vec![-1; THREADS as usize];
        for &(src, tag, b) in g {
            assert_eq!(src, left);
            let t = tag - 100;
            assert!((0..THREADS).contains(&t), "tag {tag}");
            assert_eq!(b[..2], [left, t]);
            let k = b[2];
            assert!(
                k > last[t as usize],
                "thread {t}'s {k} after {}",
                last[t as usize]
            );
            last[t as usize] = k;
            assert!(
                !std::mem::replace(&mut seen[t as usize][k as usize], true),
                "twice: {t} {k}"
            );
        }
    }
    assert!(seen.iter().flatten().all(|&x| x), "a message was lost");
    assert!(sh.world().iprobe(ANY_SOURCE, ANY_TAG)?.is_none());
    for d in dups {
        d.free()?;
    }
    wild.free()?;
    let e = sh.world().free().unwrap_err();
    assert_eq!(e.class(), ErrorClass::Comm);
    sh.finalize()
}

/// A universe in use is not shared: it comes back, usable.
fn share_refused_while_in_use(u: Universe) -> Result<()> {
    let d = u.world().dup()?;
    let back = match u.share() {
        Ok(_) => panic!("shared with a communicator handle alive"),
        Err(e) => {
            assert_eq!(e.error.class(), ErrorClass::Other, "{e}");
            assert!(e.to_string().contains("in use"), "{e}");
            e.universe
        }
    };
    d.barrier()?;
    d.free()?;
    back.finalize()
}

scenarios! {
    owned four_threads_share_a_rank [1, 2, 3];
    owned share_refused_while_in_use [2];
}

/// The README's example, as a user runs it, at 1 and 2 ranks.
#[test]
fn shared_rank_example() {
    for procs in [1, 2] {
        let out = common::run_example("shared_rank", procs, &[]);
        assert!(out.status.success(), "{}", out.dump());
        let want = format!("shared_rank: OK: {procs} ranks x 4 threads sharing each");
        assert!(out.stdout.contains(&want), "{}", out.dump());
    }
}

/// A thread of a shared rank waiting on a peer that failed gets MPIX_ERR_PROC_FAILED naming
/// it (released by that rank's abort, not by the job's timeout), as an unshared wait does.
#[test]
fn shared_wait_released_by_a_failed_peer() {
    let r = std::panic::catch_unwind(|| {
        earlybird::threads::Job::new(2)
            .timeout(std::time::Duration::from_secs(60))
            .run(|u| {
                if u.world().rank() == 1 {
                    panic!("deliberate failure in rank 1");
                }
                u.world().set_errhandler(earlybird::ErrHandler::Return);
                let sh = u.share().expect("share");
                let w = sh.world();
                let e = std::thread::scope(|s| {
                    s.spawn(|| {
                        let mut b = [0u8; 1];
                        w.recv(&mut b[..], 1, 0).expect_err("the peer died")
                    })
                    .join()
                    .expect("waiting thread")
                });
                assert_eq!(e.class(), ErrorClass::ProcFailed, "{e}");
                assert!(e.to_string().contains("aborted by rank 1"), "{e}");
                let e = w.probe(1, 0).expect_err("the peer died");
                assert_eq!(e.class(), ErrorClass::ProcFailed, "{e}");
                let _ = sh.finalize();
            })
    });
    let p = r.expect_err("the thread job must fail");
    let text = p
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default();
    assert_eq!(text, "rank 1: deliberate failure in rank 1");
}
