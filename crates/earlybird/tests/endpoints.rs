//! Endpoint communicators (seed 003), as thread jobs and under ebrun, with 1, 2 and 3
//! processes asking for 1 to 4 endpoints each (uneven counts and zero included). Each
//! endpoint is driven by its own thread (the first by the thread that made them) and runs
//! the same battery: ordering of ranks, the seed's queries, point-to-point to endpoints of
//! its own process and of others (wildcards, probe, cancel, persistent requests, a bound
//! channel), every collective at once on all endpoints, communicators made from the
//! endpoint communicator, and an RMA window over it.

mod common;
use earlybird::{
    bind_channel, scope, unbind_channel, Comm, Comparison, EndpointComm, ErrHandler, ErrorClass,
    Info, Keyval, Op, Result, SplitType, Universe, ANY_SOURCE, ANY_TAG, MODE_NOPRECEDE,
    MODE_NOSUCCEED,
};

/// What each parent rank asks for, by pattern.
fn counts(pattern: &str, n: i32) -> Vec<i32> {
    (0..n)
        .map(|r| match pattern {
            "one" => 1,
            // 17 each: from two processes, a job above 32 ranks (doorbells, rings backed on
            // first use).
            "many" => 17,
            "two" => 2,
            // 4, 1, 3: uneven, the largest first.
            "uneven" => [4, 1, 3][r as usize % 3],
            // The second parent rank takes no part.
            "some_zero" => {
                if r == 1 {
                    0
                } else {
                    2
                }
            }
            _ => unreachable!("pattern {pattern}"),
        })
        .collect()
}

/// Make this process's endpoints, drive the first from this thread and the others from
/// threads of their own, each running `each`; then `main` on this thread with its endpoint
/// (if any) and the parent. Every endpoint frees its handle.
fn with_endpoints(
    u: &Universe,
    pattern: &str,
    each: fn(&EndpointComm, &[i32], i32) -> Result<()>,
    main: impl FnOnce(Option<&EndpointComm>) -> Result<()>,
) -> Result<()> {
    let w = u.world();
    let all = counts(pattern, w.size());
    let eps = w.create_endpoints(all[w.rank() as usize], &Info::new())?;
    assert_eq!(eps.len(), all[w.rank() as usize] as usize);
    let parent_rank = w.rank();
    std::thread::scope(|s| -> Result<()> {
        let mut eps = eps.into_iter();
        let first = eps.next();
        let others: Vec<_> = eps
            .map(|ep| {
                let all = &all;
                s.spawn(move || -> Result<()> {
                    let c = ep.attach()?;
                    each(&c, all, parent_rank)?;
                    c.free()
                })
            })
            .collect();
        let mine = match first {
            Some(ep) => {
                let c = ep.attach()?;
                each(&c, &all, parent_rank)?;
                Some(c)
            }
            None => None,
        };
        main(mine.as_ref())?;
        if let Some(c) = mine {
            c.free()?;
        }
        for h in others {
            h.join().expect("endpoint thread")?;
        }
        Ok(())
    })
}

/// The battery every endpoint runs.
fn battery(c: &EndpointComm, all: &[i32], parent_rank: i32) -> Result<()> {
    let total: i32 = all.iter().sum();
    let (n, me) = (c.size(), c.rank());
    assert_eq!(n, total);
    // Ranks: by parent rank, then endpoint index.
    let offset: i32 = all[..parent_rank as usize].iter().sum();
    let (num, idx) = c.num_endpoints();
    assert_eq!(num, all[parent_rank as usize]);
    assert_eq!(
        me,
        offset + idx,
        "rank of endpoint {idx} of parent rank {parent_rank}"
    );
    let mut who = vec![0i32; 2 * n as usize];
    c.allgather(&[parent_rank, idx][..], &mut who[..])?;
    for r in 0..n as usize {
        let (p, i) = (who[2 * r], who[2 * r + 1]);
        let off: i32 = all[..p as usize].iter().sum();
        assert_eq!(
            off + i,
            r as i32,
            "rank {r} is endpoint {i} of parent rank {p}"
        );
    }
    point_to_point(c)?;
    collectives(c)?;
    derived(c, all, parent_rank)?;
    window(c)?;
    channel(c)
}

fn point_to_point(c: &Comm) -> Result<()> {
    let (n, me) = (c.size(), c.rank());
    let (right, left) = ((me + 1) % n, (me + n - 1) % n);
    // A ring, then every rank to rank 0 under wildcards.
    let mut got = [0i64; 3];
    c.sendrecv(&[me as i64, 1, 2][..], right, 7, &mut got[..], left, 7)?;
    assert_eq!(got, [left as i64, 1, 2]);
    if me == 0 {
        let mut seen = vec![false; n as usize];
        for _ in 1..n {
            let st = c.probe(ANY_SOURCE, ANY_TAG)?;
            assert_eq!(st.tag(), 100 + st.source());
            let mut b = [0i32];
            let st2 = c.recv(&mut b[..], ANY_SOURCE, st.tag())?;
            assert_eq!(b[0], st2.source());
            assert!(!std::mem::replace(&mut seen[b[0] as usize], true));
        }
    } else {
        c.send(&[me][..], 0, 100 + me)?;
    }
    c.barrier()?;
    // Many messages in order from each left neighbour (non-overtaking per pair).
    let mut rb = vec![0u32; 64];
    let sb: Vec<u32> = (0..64).collect();
    scope(|s| -> Result<()> {
        let mut reqs = Vec::new();
        for slot in rb.chunks_mut(1) {
            reqs.push(c.irecv(s, slot, left, 9)?);
        }
        for k in 0..64 {
            c.send(&sb[k..k + 1], right, 9)?;
        }
        for mut r in reqs {
            r.wait()?;
        }
        Ok(())
    })?;
    assert_eq!(rb, sb, "in order from the left neighbour");
    // A receive nobody matches cancels; persistent requests, started three times.
    let mut x = [0u8; 4];
    let mut pb = [0i32; 2];
    let data = [me, -me];
    scope(|s| -> Result<()> {
        let mut rr = c.irecv(s, &mut x[..], left, 999)?;
        rr.cancel()?;
        assert!(rr.wait()?.is_cancelled());
        let mut ps = c.send_init(s, &data[..], right, 11)?;
        let mut pr = c.recv_init(s, &mut pb[..], left, 11)?;
        for _ in 0..3 {
            pr.start()?;
            ps.start()?;
            ps.wait()?;
            pr.wait()?;
        }
        Ok(())
    })?;
    assert_eq!(pb, [left, -left]);
    Ok(())
}

fn collectives(c: &Comm) -> Result<()> {
    let (n, me) = (c.size(), c.rank());
    c.barrier()?;
    let mut sum = [0i64];
    c.allreduce(&[me as i64 + 1][..], &mut sum[..], &Op::SUM)?;
    assert_eq!(sum[0], (n as i64) * (n as i64 + 1) / 2);
    let mut b = [0u32; 5];
    if me == n - 1 {
        b = [1, 2, 3, 4, 5];
    }
    c.bcast(&mut b[..], n - 1)?;
    assert_eq!(b, [1, 2, 3, 4, 5]);
    let src: Vec<i32> = (0..n).map(|j| me * 1000 + j).collect();
    let mut dst = vec![0i32; n as usize];
    c.alltoall(&src[..], &mut dst[..])?;
    for (j, v) in dst.iter().enumerate() {
        assert_eq!(*v, j as i32 * 1000 + me);
    }
    // Nonblocking, then persistent.
    let mut m = [0i64];
    let mine = [me as i64];
    scope(|s| -> Result<()> {
        let mut r = c.iallreduce(s, &mine[..], &mut m[..], &Op::MAX)?;
        r.wait()?;
        Ok(())
    })?;
    assert_eq!(m[0], n as i64 - 1);
    Ok(())
}

fn derived(c: &Comm, all: &[i32], parent_rank: i32) -> Result<()> {
    let (n, me) = (c.size(), c.rank());
    let d = c.dup()?;
    assert_eq!(d.compare(c), Comparison::Congruent);
    let mut x = [0i32];
    d.allreduce(&[1][..], &mut x[..], &Op::SUM)?;
    assert_eq!(x[0], n);
    let half = c.split(me % 2, -me)?.expect("a color");
    assert_eq!(half.size(), (n + 1 - me % 2) / 2);
    let mut y = [0i32];
    half.allreduce(&[me][..], &mut y[..], &Op::MIN)?;
    assert_eq!(y[0], me % 2);
    let g = c.group().incl(&(0..n).rev().collect::<Vec<_>>())?;
    let rev = c.create(&g)?.expect("in the group");
    assert_eq!(rev.rank(), n - 1 - me);
    let mine = c
        .split_type(SplitType::Endpoints, 0, &Info::new())?
        .expect("a type");
    assert_eq!(mine.size(), all[parent_rank as usize]);
    assert_eq!(mine.num_endpoints(), c.num_endpoints());
    let mut ranks = vec![0i32; mine.size() as usize];
    mine.allgather(&[me][..], &mut ranks[..])?;
    let off: i32 = all[..parent_rank as usize].iter().sum();
    assert_eq!(ranks, (off..off + mine.size()).collect::<Vec<_>>());
    for x in [mine, rev, half, d] {
        x.free()?;
    }
    Ok(())
}

fn window(c: &Comm) -> Result<()> {
    let (n, me) = (c.size(), c.rank());
    let right = (me + 1) % n;
    let left = (me + n - 1) % n;
    let win = c.win_allocate(16, 8, &Info::new())?;
    assert_eq!(win.has_sharing(), c.has_sharing());
    win.fence(MODE_NOPRECEDE)?;
    win.put(&[me as i64 * 3][..], right, 1)?;
    win.fence(0)?;
    let mut got = [0i64; 2];
    win.local::<i64>()?.read(0, &mut got)?;
    assert_eq!(got[1], left as i64 * 3);
    win.fence(MODE_NOSUCCEED)?;
    win.free()
}

/// A bound channel from each even rank to the next.
fn channel(c: &Comm) -> Result<()> {
    let (n, me) = (c.size(), c.rank());
    let peer = if me % 2 == 0 { me + 1 } else { me - 1 };
    if peer >= n {
        return Ok(());
    }
    let mut x = [0i64; 4];
    scope(|s| -> Result<()> {
        if me % 2 == 0 {
            let mut req = c.send_init(s, &mut x, peer, 21)?;
            let mut ch = bind_channel(&mut req, &Info::new())?;
            for k in 0..5 {
                ch.buffer_mut::<i64>()?.fill(k);
                // A channel is ready-mode: start after the receiver has started.
                c.recv(&mut [0u8][..], peer, 22)?;
                ch.start()?;
                ch.wait()?;
            }
            unbind_channel(&mut ch)
        } else {
            let mut req = c.recv_init(s, &mut x, peer, 21)?;
            let mut ch = bind_channel(&mut req, &Info::new())?;
            for k in 0..5 {
                ch.start()?;
                c.send(&[1u8][..], peer, 22)?;
                ch.wait()?;
                assert_eq!(ch.buffer_mut::<i64>()?, &[k; 4]);
            }
            unbind_channel(&mut ch)
        }
    })
}

/// The seed's group rules and comparisons, seen by the thread that holds both the parent
/// and its first endpoint.
fn parent_checks(w: &Comm, pattern: &str, mine: Option<&EndpointComm>) -> Result<()> {
    let all = counts(pattern, w.size());
    let Some(c) = mine else {
        assert_eq!(all[w.rank() as usize], 0);
        return Ok(());
    };
    let shared_process = all.iter().any(|&k| k > 1);
    let thread_job = w.has_sharing();
    let total: i32 = all.iter().sum();
    assert_eq!(c.has_sharing(), shared_process || (thread_job && total > 1));
    assert_eq!(c.group().has_sharing(), c.has_sharing());
    // Endpoint 0 of each process is its parent rank.
    let firsts: Vec<i32> = all
        .iter()
        .enumerate()
        .filter(|(_, &k)| k > 0)
        .map(|(p, _)| all[..p].iter().sum())
        .collect();
    let back = c.group().translate_ranks(&firsts, &w.group())?;
    let parents: Vec<i32> = (0..w.size()).filter(|&p| all[p as usize] > 0).collect();
    assert_eq!(back, parents);
    if all.iter().all(|&k| k == 1) {
        assert_eq!(w.compare(c), Comparison::Congruent);
        assert_eq!(c.group().compare(&w.group()), earlybird::Comparison::Ident);
        let ids: Vec<i32> = (0..w.size()).collect();
        assert_eq!(w.group().translate_ranks(&ids, &c.group())?, ids);
    } else {
        assert_eq!(w.compare(c), Comparison::Unequal);
    }
    // Set operations need groups of one job.
    let e = c.group().union(&w.group()).unwrap_err();
    assert_eq!(e.class(), ErrorClass::Group, "{e}");
    Ok(())
}

fn scenario(u: &Universe, pattern: &str) -> Result<()> {
    with_endpoints(u, pattern, battery, |mine| {
        parent_checks(u.world(), pattern, mine)
    })?;
    u.world().barrier()
}

fn one(u: &Universe) -> Result<()> {
    scenario(u, "one")
}
fn two(u: &Universe) -> Result<()> {
    scenario(u, "two")
}
fn uneven(u: &Universe) -> Result<()> {
    scenario(u, "uneven")
}
fn some_zero(u: &Universe) -> Result<()> {
    scenario(u, "some_zero")
}

/// Two endpoints driven by one thread: ALIASED to each other, freed together.
fn aliased(u: &Universe) -> Result<()> {
    let w = u.world();
    let eps = w.create_endpoints(2, &Info::new())?;
    let mut it = eps.into_iter();
    let a = it.next().unwrap().attach()?;
    let b = it.next().unwrap().attach()?;
    assert_eq!(a.compare(&b), Comparison::Aliased);
    assert_eq!(a.compare(&a), Comparison::Ident);
    assert_eq!((a.num_endpoints(), b.num_endpoints()), ((2, 0), (2, 1)));
    assert_eq!(b.rank(), a.rank() + 1);
    // A message between them, by nonblocking calls (one thread drives both).
    let mut x = [0u16; 2];
    let payload = [4u16, 5];
    scope(|s| -> Result<()> {
        let mut r = b.irecv(s, &mut x[..], a.rank(), 3)?;
        let mut sreq = a.isend(s, &payload[..], b.rank(), 3)?;
        loop {
            let done_r = r.test()?.is_some();
            let done_s = sreq.test()?.is_some();
            if done_r && done_s {
                break;
            }
            a.progress();
            b.progress();
        }
        Ok(())
    })?;
    assert_eq!(x, [4, 5]);
    EndpointComm::free_all(vec![a, b])?;
    w.barrier()
}

/// Bad input: a negative count (MPI_ERR_ARG on that process, MPIX_ERR_ENDPOINTS on the
/// others naming it), too many endpoints, an intercommunicator; the parent stays usable.
fn bad_input(u: &Universe) -> Result<()> {
    let w = u.world();
    w.set_errhandler(ErrHandler::Return);
    let (n, me) = (w.size(), w.rank());
    let e = w
        .create_endpoints(if me == n - 1 { -2 } else { 1 }, &Info::new())
        .unwrap_err();
    if me == n - 1 {
        assert_eq!(e.class(), ErrorClass::Arg, "{e}");
        assert!(e.to_string().contains("-2"), "{e}");
    } else {
        assert_eq!(e.class(), ErrorClass::Endpoints, "{e}");
        assert!(e.to_string().contains(&format!("rank {}", n - 1)), "{e}");
    }
    let e = w
        .create_endpoints(earlybird::MAX_ENDPOINTS as i32 + 1, &Info::new())
        .unwrap_err();
    assert_eq!(e.class(), ErrorClass::Endpoints, "{e}");
    assert!(e.to_string().contains("at most"), "{e}");
    if n >= 2 {
        let half = w.split(me % 2, me)?.unwrap();
        let inter = half.intercomm_create(0, w, 1 - me % 2, 5)?;
        inter.set_errhandler(ErrHandler::Return);
        let e = inter.create_endpoints(1, &Info::new()).unwrap_err();
        assert_eq!(e.class(), ErrorClass::Comm, "{e}");
        inter.free()?;
        half.free()?;
    }
    // Zero everywhere: no endpoints, no error.
    assert!(w.create_endpoints(0, &Info::new())?.is_empty());
    // An endpoint communicator's handle is freed through its endpoint.
    let eps = w.create_endpoints(1, &Info::new())?;
    let c = eps.into_iter().next().unwrap().attach()?;
    c.set_errhandler(ErrHandler::Return);
    let e = c.comm().clone().free().unwrap_err();
    assert!(
        e.class() == ErrorClass::Comm && e.to_string().contains("EndpointComm::free"),
        "{e}"
    );
    c.free()?;
    w.barrier()
}

/// Attribute callbacks run once per endpoint when each frees its handle.
fn attributes_once_per_rank(u: &Universe) -> Result<()> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let deleted = Arc::new(AtomicUsize::new(0));
    let w = u.world();
    let eps = w.create_endpoints(2, &Info::new())?;
    std::thread::scope(|s| -> Result<()> {
        let hs: Vec<_> = eps
            .into_iter()
            .map(|ep| {
                let deleted = deleted.clone();
                s.spawn(move || -> Result<()> {
                    let c = ep.attach()?;
                    let key: Keyval<u32> =
                        Keyval::new(earlybird::comm_null_copy_fn, move |_c: &Comm, _v: &u32| {
                            deleted.fetch_add(1, Ordering::SeqCst);
                            Ok(())
                        });
                    c.set_attr(&key, c.rank() as u32)?;
                    c.free()
                })
            })
            .collect();
        for h in hs {
            h.join().expect("endpoint thread")?;
        }
        Ok(())
    })?;
    // This process's two endpoints each ran the callback once.
    assert_eq!(deleted.load(Ordering::SeqCst), 2);
    w.barrier()
}

/// A collective that one endpoint never joins (it waits in a receive instead): each
/// process drives one endpoint from its main thread. Run under `ebrun --timeout` by
/// `missing_endpoint_named_by_ebrun`.
fn hang_endpoint(u: &Universe) -> Result<()> {
    let w = u.world();
    let c = w
        .create_endpoints(1, &Info::new())?
        .pop()
        .unwrap()
        .attach()?;
    if c.rank() == 1 {
        let mut b = [0u8];
        c.recv(&mut b[..], ANY_SOURCE, 4242)?;
    } else {
        c.barrier()?;
    }
    unreachable!("the job should have timed out");
}

/// ebrun's timeout report names what every endpoint was doing.
#[test]
fn missing_endpoint_named_by_ebrun() {
    let out = common::ebrun_scenario_within("hang_endpoint", 2, &[], 3);
    assert_eq!(out.status.code(), Some(124), "{}", out.dump());
    for want in [
        "endpoint rank 0 of 2",
        "in the process of rank 0): was blocked in",
        "endpoint rank 1 of 2",
        "in the process of rank 1): was blocked in recv from rank ANY_SOURCE (tag 4242",
    ] {
        assert!(
            out.stderr.contains(want),
            "missing {want:?}: {}",
            out.dump()
        );
    }
}

/// The same in a thread job: an observer reads the report while the endpoints wait, then
/// aborts the job, and both waits end with MPIX_ERR_PROC_FAILED (no hang).
#[test]
fn missing_endpoint_reported_in_thread_job() {
    use std::time::{Duration, Instant};
    earlybird::threads::Job::new(1)
        .timeout(Duration::from_secs(60))
        .run(|u| {
            let w = u.world();
            let job = u.job_segment();
            let eps = w.create_endpoints(2, &Info::new()).unwrap();
            std::thread::scope(|s| {
                let hs: Vec<_> = eps
                    .into_iter()
                    .map(|ep| {
                        s.spawn(move || -> ErrorClass {
                            let c = ep.attach().unwrap();
                            c.set_errhandler(ErrHandler::Return);
                            let r = if c.rank() == 1 {
                                let mut b = [0u8];
                                c.recv(&mut b[..], ANY_SOURCE, 4242).map(drop)
                            } else {
                                c.barrier()
                            };
                            r.unwrap_err().class()
                        })
                    })
                    .collect();
                let t0 = Instant::now();
                let report = loop {
                    let r = job.endpoint_reports().join("\n");
                    if r.contains("endpoint rank 1 of 2")
                        && r.contains("tag 4242")
                        && r.contains("endpoint rank 0 of 2 (an endpoint communicator made by pid")
                        && r.matches("was blocked in").count() == 2
                    {
                        break r;
                    }
                    assert!(t0.elapsed() < Duration::from_secs(30), "no report: {r}");
                    std::thread::sleep(Duration::from_millis(5));
                };
                assert!(
                    report.contains("recv from rank ANY_SOURCE (tag 4242"),
                    "{report}"
                );
                job.abort(-1, -1);
                for h in hs {
                    assert_eq!(h.join().unwrap(), ErrorClass::ProcFailed);
                }
            });
        })
        .unwrap();
}

scenarios! {
    child_only hang_endpoint;
    one [1, 2, 3];
    two [1, 2, 3];
    uneven [1, 2, 3];
    some_zero [2, 3];
    aliased [1, 2];
    bad_input [1, 2];
    attributes_once_per_rank [1, 2];
    many [2];
}

/// 17 endpoints per process: the endpoint job of two processes has 34 ranks, so it has
/// doorbells and its segment backs the rings its ranks use; point-to-point and every
/// collective run on it.
fn many(u: &Universe) -> Result<()> {
    with_endpoints(
        u,
        "many",
        |c, _, _| {
            point_to_point(c)?;
            collectives(c)
        },
        |_| Ok(()),
    )
}

/// The seed's hybrid example as a user runs it: 2 processes x 2 endpoints, 1 x 4, 3 x 1.
#[test]
fn hybrid_example() {
    for (procs, threads) in [(2, "2"), (1, "4"), (3, "1")] {
        let out = common::run_example("hybrid_endpoints", procs, &[threads]);
        assert!(out.status.success(), "{}", out.dump());
        let n: u32 = threads.parse().unwrap();
        let want = format!(
            "hybrid_endpoints: OK: {procs} processes x {threads} endpoints = {} ranks, sum of k^2 below 1000000 = 333332833333500000",
            procs * n
        );
        assert!(out.stdout.contains(&want), "{}", out.dump());
    }
}
