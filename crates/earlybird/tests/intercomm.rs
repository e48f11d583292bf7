//! Intercommunicators (intercomm_create, intercomm_merge, remote size and group,
//! point-to-point across them, dup/compare/free of them) and the remaining ways of making
//! communicators: dup_with_info, set_info/get_info, split_type, create_group and idup; as
//! thread jobs and under ebrun.

mod common;
use earlybird::{
    scope, start_all, test_any, wait_all, Comm, Comparison, ErrHandler, ErrorClass, Info, Op,
    PendingComm, Request, Result, Scope, SplitType, Universe, ANY_SOURCE, ANY_TAG, UNDEFINED,
};

/// Ring traffic on `c`: each rank sends its rank to the next, checks what the previous sent.
fn ring_check(c: &Comm, tag: i32) -> Result<()> {
    let (n, r) = (c.size(), c.rank());
    let mut got = [-1i32];
    let st = c.sendrecv(&[r], (r + 1) % n, tag, &mut got, (r + n - 1) % n, tag)?;
    assert_eq!((got[0], st.source()), ((r + n - 1) % n, (r + n - 1) % n));
    Ok(())
}

fn info(pairs: &[(&str, &str)]) -> Info {
    let mut i = Info::new();
    for (k, v) in pairs {
        i.set(k, v).unwrap();
    }
    i
}

fn keys(i: &Info) -> Vec<(String, String)> {
    i.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// set_info adds hints, get_info returns them; dup inherits them, dup_with_info replaces
/// them; handles share them.
fn info_hints(u: &Universe) -> Result<()> {
    let w = u.world();
    let d = w.dup()?;
    assert_eq!(d.get_info()?.nkeys(), 0);
    d.set_info(&info(&[("mpi_assert_no_any_tag", "true"), ("a", "1")]))?;
    d.set_info(&info(&[("a", "2"), ("b", "3")]))?;
    let want = vec![
        ("mpi_assert_no_any_tag".to_string(), "true".to_string()),
        ("a".to_string(), "2".to_string()),
        ("b".to_string(), "3".to_string()),
    ];
    assert_eq!(keys(&d.clone().get_info()?), want);
    let dd = d.dup()?;
    assert_eq!(keys(&dd.get_info()?), want);
    let di = d.dup_with_info(&info(&[("mpi_assert_exact_length", "true")]))?;
    assert_eq!(
        keys(&di.get_info()?),
        vec![("mpi_assert_exact_length".to_string(), "true".to_string())]
    );
    // A later set_info does not reach communicators duplicated earlier.
    d.set_info(&info(&[("c", "4")]))?;
    assert_eq!(dd.get_info()?.nkeys(), 3);
    assert_eq!(di.compare(&d), Comparison::Congruent);
    ring_check(&di, 1)?;
    for c in [d, dd, di] {
        c.free()?;
    }
    Ok(())
}

/// split_type: every rank of a job is on this host, so Shared and the host-guided types
/// take every participant; HW_UNGUIDED finds no smaller level; UNDEFINED opts out.
fn split_type_by_host(u: &Universe) -> Result<()> {
    let w = u.world();
    let (me, n) = (w.rank(), w.size());
    let hints = info(&[("x", "y")]);
    let s = w
        .split_type(SplitType::Shared, -me, &hints)?
        .expect("shared");
    assert_eq!((s.size(), s.rank()), (n, n - 1 - me));
    assert_eq!(s.get_info()?.get("x")?, Some("y"));
    ring_check(&s, 2)?;
    for res in ["mpi_shared_memory", "host"] {
        let h = w
            .split_type(
                SplitType::HwGuided,
                me,
                &info(&[("mpi_hw_resource_type", res)]),
            )?
            .expect("guided");
        assert_eq!((h.size(), h.rank()), (n, me));
        assert_eq!(h.get_info()?.get("mpi_hw_resource_type")?, Some(res));
        assert_eq!(h.compare(w), Comparison::Congruent);
        h.free()?;
    }
    // A resource earlybird does not know, or none at all: MPI_COMM_NULL.
    let unknown = info(&[("mpi_hw_resource_type", "quantum_foam")]);
    assert!(w.split_type(SplitType::HwGuided, 0, &unknown)?.is_none());
    assert!(w
        .split_type(SplitType::HwGuided, 0, &Info::new())?
        .is_none());
    assert!(w
        .split_type(SplitType::HwUnguided, 0, &Info::new())?
        .is_none());
    // Rank 0 opts out.
    let t = if me == 0 {
        SplitType::Undefined
    } else {
        SplitType::Shared
    };
    let o = w.split_type(t, 0, &Info::new())?;
    assert_eq!(
        o.as_ref().map(|c| (c.size(), c.rank())),
        (me != 0).then_some((n - 1, me - 1))
    );
    if let Some(o) = o {
        ring_check(&o, 3)?;
    }
    assert_eq!(SplitType::from_raw(UNDEFINED)?, SplitType::Undefined);
    assert_eq!(
        SplitType::from_raw(SplitType::HwGuided.raw())?,
        SplitType::HwGuided
    );
    s.free()
}

/// create_group is called by the group's members only: the evens make theirs while the
/// odds make their own (same tag) and never call the evens'.
fn create_group_members_only(u: &Universe) -> Result<()> {
    let w = u.world();
    let me = w.rank();
    let wg = w.group();
    let mine: Vec<i32> = (0..w.size()).filter(|r| r % 2 == me % 2).collect();
    let g = wg.incl(&mine)?;
    let c = w.create_group(&g, 7)?.expect("member");
    assert_eq!((c.size(), c.rank()), (mine.len() as i32, me / 2));
    ring_check(&c, 4)?;
    // Reversed order, a subgroup of the new communicator, another tag.
    let rev: Vec<i32> = (0..c.size()).rev().collect();
    let r = c.create_group(&c.group().incl(&rev)?, 8)?.expect("member");
    assert_eq!(r.rank(), c.size() - 1 - c.rank());
    ring_check(&r, 5)?;
    // A process outside the group gets None at once, without talking to anyone.
    if w.size() > 1 {
        let other = wg.incl(&[(me + 1) % w.size()])?;
        assert!(w.create_group(&other, 9)?.is_none());
    }
    r.free()?;
    c.free()
}

/// An idup on every rank of `w`, rank 0's first: the others start theirs only after
/// `check` has seen rank 0's request and communicator, which are then surely pending (with
/// more than one rank).
fn idup_rank0_first<'s>(
    w: &Comm,
    s: &'s Scope<'s, '_>,
    tag: i32,
    check: impl FnOnce(&mut Request<'s>, &PendingComm),
) -> Result<(Request<'s>, PendingComm)> {
    let (me, n) = (w.rank(), w.size());
    if me != 0 {
        w.recv(&mut [0u8], 0, tag)?;
    }
    let (mut req, pending) = w.idup(s)?;
    if me == 0 && n > 1 {
        check(&mut req, &pending);
        for r in 1..n {
            w.send(&[1u8], r, tag)?;
        }
    }
    Ok((req, pending))
}

/// idup: the new communicator is unusable until the request completes, then usable; its
/// context is its own.
fn idup_then_use(u: &Universe) -> Result<()> {
    let w = u.world();
    w.set_errhandler(ErrHandler::Return);
    let (me, n) = (w.rank(), w.size());
    w.set_info(&info(&[("k", "v")]))?;
    scope(|s| -> Result<()> {
        let (mut req, pending) = idup_rank0_first(w, s, 77, |_, pending| {
            let e = pending.comm().unwrap_err();
            assert!(
                e.class() == ErrorClass::Comm && e.detail().contains("before"),
                "{e}"
            );
            assert!(!pending.is_ready());
        })?;
        req.wait()?;
        assert!(req.is_null());
        let d = pending.comm()?;
        assert!(pending.is_ready());
        assert_eq!(d.compare(w), Comparison::Congruent);
        assert_eq!(d.get_info()?.get("k")?, Some("v"));
        // Same tag on WORLD and on the new communicator: each receive gets its own.
        let (right, left) = ((me + 1) % n, (me + n - 1) % n);
        w.send(&[10 + me], right, 3)?;
        d.send(&[20 + me], right, 3)?;
        let (mut a, mut b) = ([0], [0]);
        d.recv(&mut b, left, 3)?;
        w.recv(&mut a, left, 3)?;
        assert_eq!((a[0], b[0]), (10 + left, 20 + left));
        d.free()
    })
}

/// Several idups pending at once, blocking dups and splits made meanwhile, and the requests
/// completed through test_any and wait_all mixed with point-to-point requests: every
/// communicator gets its own context.
fn idups_interleaved(u: &Universe) -> Result<()> {
    let w = u.world();
    let (me, n) = (w.rank(), w.size());
    let mut comms: Vec<Comm> = Vec::new();
    let mut got = [0i32];
    let mine = [me];
    scope(|s| -> Result<()> {
        let (r1, p1) = w.idup(s)?;
        let blocking = w.dup()?;
        let (r2, p2) = w.idup_with_info(s, &info(&[("second", "yes")]))?;
        let half = w.split(me % 2, me)?.expect("color");
        let (r3, p3) = half.idup(s)?;
        // A parent freed while its idup is pending (MPI allows it), and an idup whose
        // communicator nobody takes.
        let parent = w.dup()?;
        let (r4, p4) = parent.idup(s)?;
        parent.free()?;
        let (r5, p5) = w.idup(s)?;
        drop(p5);
        let mut reqs: Vec<Request> = vec![r1, r2, r3, r4, r5];
        reqs.push(w.irecv(s, &mut got, (me + n - 1) % n, 9)?);
        reqs.push(w.isend(s, &mine, (me + 1) % n, 9)?);
        // Drive one to completion with test_any, then the rest with wait_all.
        loop {
            if test_any(&mut reqs)?.is_completed() {
                break;
            }
        }
        wait_all(&mut reqs)?;
        let c2 = p2.comm()?;
        assert_eq!(c2.get_info()?.get("second")?, Some("yes"));
        comms.extend([
            p1.comm()?,
            blocking,
            c2,
            half.clone(),
            p3.comm()?,
            p4.comm()?,
            half,
        ]);
        Ok(())
    })?;
    comms.pop();
    assert_eq!(got[0], (me + n - 1) % n);
    // Same source, same tag on every communicator: each message stays in its own.
    let (right, left) = ((me + 1) % n, (me + n - 1) % n);
    for (i, c) in comms.iter().enumerate() {
        if c.size() == n {
            c.send(&[i as i32 * 100 + me], right, 0)?;
        }
    }
    for (i, c) in comms.iter().enumerate().rev() {
        if c.size() == n {
            let mut x = [0];
            c.recv(&mut x, left, 0)?;
            assert_eq!(x[0], i as i32 * 100 + left);
        } else {
            ring_check(c, 0)?;
        }
    }
    for c in comms {
        c.free()?;
    }
    Ok(())
}

/// Rank 1 holds 300 communicators of its own, so its lowest free context ids and rank 0's
/// do not meet in one window: the idup agreement takes a second round, and the result does
/// not clash with any communicator rank 1 holds.
fn idup_disjoint_windows(u: &Universe) -> Result<()> {
    let w = u.world();
    let me = w.rank();
    let selfg = w.group().incl(&[me])?;
    let held: Vec<Comm> = if me == 1 {
        (0..300)
            .map(|_| w.create_group(&selfg, 0).map(|c| c.expect("self")))
            .collect::<Result<_>>()?
    } else {
        Vec::new()
    };
    let d = scope(|s| -> Result<Comm> {
        let (mut r, p) = w.idup(s)?;
        r.wait()?;
        p.comm()
    })?;
    ring_check(&d, 6)?;
    // Traffic on the held communicators still matches only there.
    for (i, c) in held.iter().enumerate().step_by(37) {
        c.send(&[i as u32], 0, 1)?;
        let mut x = [0u32];
        c.recv(&mut x, 0, 1)?;
        assert_eq!(x[0], i as u32);
    }
    ring_check(&d, 7)?;
    for c in held {
        c.free()?;
    }
    d.free()
}

/// Two idups on two communicators, started in opposite orders on even and odd ranks (MPI
/// allows any order across communicators), then waited for together, three times over: each
/// endpoint gives its lowest pairs to a different agreement, and the later rounds must still
/// meet (MPICH's comm/idup_with_info; they ran out of context ids).
fn idups_in_opposite_orders(u: &Universe) -> Result<()> {
    let w = u.world();
    let (a, b) = (w.dup()?, w.dup()?);
    for _ in 0..3 {
        let made = scope(|s| -> Result<Vec<Comm>> {
            let (first, second) = if w.rank() % 2 == 0 {
                (&a, &b)
            } else {
                (&b, &a)
            };
            let (r1, p1) = first.idup(s)?;
            let (r2, p2) = second.idup(s)?;
            let mut reqs = vec![r1, r2];
            wait_all(&mut reqs)?;
            // In the order of their parents, the same on every rank.
            let (c1, c2) = (p1.comm()?, p2.comm()?);
            Ok(if w.rank() % 2 == 0 {
                vec![c1, c2]
            } else {
                vec![c2, c1]
            })
        })?;
        for (i, c) in made.iter().enumerate() {
            ring_check(c, 30 + i as i32)?;
        }
        for c in made {
            c.free()?;
        }
    }
    a.free()?;
    b.free()
}

/// The two halves of the job (by rank parity) joined by an intercommunicator, with world
/// leaders 0 and 1.
fn halves(w: &Comm) -> Result<(Comm, Comm)> {
    let color = w.rank() % 2;
    let local = w.split(color, w.rank())?.expect("color");
    let inter = local.intercomm_create(0, w, 1 - color, 99)?;
    Ok((local, inter))
}

/// intercomm_create over the halves: ranks and sizes, remote group, point-to-point in every
/// form (statuses report remote ranks), dup, idup, compare, names, merge and free.
fn intercomm_across(u: &Universe) -> Result<()> {
    let w = u.world();
    let (me, n) = (w.rank(), w.size());
    let (local, ic) = halves(w)?;
    let color = me % 2;
    let (lsize, rsize) = ((n + 1 - color) / 2, (n + color) / 2);
    assert!(ic.is_inter() && !local.is_inter());
    assert_eq!(
        (ic.rank(), ic.size(), ic.remote_size()?),
        (me / 2, lsize, rsize)
    );
    let remote_world: Vec<i32> = (0..n).filter(|r| r % 2 != color).collect();
    let all_remote: Vec<i32> = (0..rsize).collect();
    assert_eq!(
        ic.remote_group()?
            .translate_ranks(&all_remote, &w.group())?,
        remote_world
    );
    assert_eq!(ic.group().compare(&local.group()), Comparison::Ident);

    // Blocking: every local rank sends to every remote rank; receives by ANY_SOURCE.
    let r = ic.rank();
    for d in 0..rsize {
        ic.send(&[r * 1000 + d], d, 5)?;
    }
    let mut seen = vec![false; rsize as usize];
    for _ in 0..rsize {
        let mut x = [0i32];
        let st = ic.recv(&mut x, ANY_SOURCE, 5)?;
        assert_eq!(x[0], st.source() * 1000 + r);
        seen[st.source() as usize] = true;
    }
    assert!(seen.iter().all(|&b| b));

    // Each local rank r addresses remote rank r % rsize, so it hears from the remote ranks
    // q with q % lsize == r.
    let to = r % rsize;
    let from: Vec<i32> = (0..rsize).filter(|q| q % lsize == r).collect();
    let mut bufs = vec![[0i64; 4]; from.len()];
    let mine = [me as i64; 4];
    scope(|s| -> Result<()> {
        let mut reqs = Vec::new();
        for (b, &q) in bufs.iter_mut().zip(&from) {
            reqs.push(ic.irecv(s, b, q, 6)?);
        }
        reqs.push(ic.isend(s, &mine, to, 6)?);
        let st = wait_all(&mut reqs)?;
        for (i, &q) in from.iter().enumerate() {
            assert_eq!(st[i].source(), q);
        }
        Ok(())
    })?;
    for (b, &q) in bufs.iter().zip(&from) {
        assert_eq!(*b, [remote_world[q as usize] as i64; 4]);
    }
    let mut rbufs = vec![[0u32; 2]; from.len()];
    let mut sbuf = [0u32; 2];
    scope(|s| -> Result<()> {
        let mut reqs = Vec::new();
        for (b, &q) in rbufs.iter_mut().zip(&from) {
            reqs.push(ic.recv_init(s, b, q, 7)?);
        }
        reqs.push(ic.send_init(s, &mut sbuf, to, 7)?);
        for round in 0..2u32 {
            reqs.last_mut()
                .expect("send")
                .buffer_mut::<u32>()?
                .copy_from_slice(&[round, me as u32]);
            start_all(&mut reqs)?;
            let st = wait_all(&mut reqs)?;
            for (i, &q) in from.iter().enumerate() {
                assert_eq!(st[i].source(), q);
                let got = reqs[i].buffer_mut::<u32>()?;
                assert_eq!(got, &[round, remote_world[q as usize] as u32]);
            }
        }
        Ok(())
    })?;
    // Probes and matched receives.
    ic.send(&[me], to, 8)?;
    for k in 0..from.len() {
        let st = if k % 2 == 0 {
            ic.probe(ANY_SOURCE, 8)?
        } else {
            loop {
                if let Some(st) = ic.iprobe(ANY_SOURCE, ANY_TAG)? {
                    break st;
                }
            }
        };
        assert!(from.contains(&st.source()), "{st:?}");
        let (msg, st2) = ic.mprobe(st.source(), 8)?;
        assert_eq!(st2.source(), st.source());
        let mut x = [0];
        let st3 = msg.recv(&mut x)?;
        assert_eq!(
            (st3.source(), x[0]),
            (st.source(), remote_world[st.source() as usize])
        );
    }

    // dup and idup: intercommunicators of their own context.
    let icd = ic.dup()?;
    assert!(icd.is_inter());
    assert_eq!(
        (icd.rank(), icd.size(), icd.remote_size()?),
        (ic.rank(), lsize, rsize)
    );
    assert_eq!(icd.compare(&ic), Comparison::Congruent);
    assert_eq!(ic.compare(&ic.clone()), Comparison::Ident);
    assert_eq!(ic.compare(&local), Comparison::Unequal);
    assert_eq!(local.compare(&ic), Comparison::Unequal);
    icd.set_name("inter dup")?;
    assert_eq!(
        (icd.name(), ic.name()),
        ("inter dup".to_string(), String::new())
    );
    ic.send(&[1], to, 3)?;
    icd.send(&[2], to, 3)?;
    for &q in &from {
        let mut x = [0];
        icd.recv(&mut x, q, 3)?;
        assert_eq!(x[0], 2);
    }
    for &q in &from {
        let mut x = [0];
        ic.recv(&mut x, q, 3)?;
        assert_eq!(x[0], 1);
    }
    let ici = scope(|s| -> Result<Comm> {
        let (mut req, p) = ic.idup(s)?;
        req.wait()?;
        p.comm()
    })?;
    assert!(ici.is_inter());
    assert_eq!(ici.remote_size()?, rsize);
    ici.send(&[me], to, 0)?;
    for &q in &from {
        let mut x = [0];
        let st = ici.recv(&mut x, q, 0)?;
        assert_eq!((st.source(), x[0]), (q, remote_world[q as usize]));
    }

    // Merge: the low group first; equal values put the group of job rank 0 first.
    let evens_first = |c: &Comm| {
        assert_eq!(c.size(), n);
        assert_eq!(
            c.rank(),
            if color == 0 {
                me / 2
            } else {
                (n + 1) / 2 + me / 2
            }
        );
    };
    let m = ic.intercomm_merge(color == 1)?;
    assert!(!m.is_inter());
    evens_first(&m);
    ring_check(&m, 10)?;
    let m2 = icd.intercomm_merge(false)?;
    evens_first(&m2);
    assert_eq!(m2.compare(&m), Comparison::Congruent);
    let m3 = ici.intercomm_merge(color == 0)?;
    assert_eq!(m3.rank(), if color == 1 { me / 2 } else { n / 2 + me / 2 });
    assert_eq!(m3.compare(&m), Comparison::Similar);
    ring_check(&m3, 11)?;
    for c in [m, m2, m3, ici, icd, ic, local] {
        c.free()?;
    }
    Ok(())
}

/// Misuse, each with its error class and the value in the message.
fn misuse(u: &Universe) -> Result<()> {
    let w = u.world();
    w.set_errhandler(ErrHandler::Return);
    let (me, n) = (w.rank(), w.size());

    // Info on a freed communicator.
    let d = w.dup()?;
    let h = d.clone();
    d.free()?;
    assert_eq!(h.get_info().unwrap_err().class(), ErrorClass::Comm);
    assert_eq!(
        h.set_info(&Info::new()).unwrap_err().class(),
        ErrorClass::Comm
    );
    let e = scope(|s| h.idup(s).map(|_| ())).unwrap_err();
    assert_eq!(e.class(), ErrorClass::Comm);

    // split_type: a bad type number; different types on different ranks.
    let e = SplitType::from_raw(77).unwrap_err();
    assert!(
        e.class() == ErrorClass::Arg && e.detail().contains("77"),
        "{e}"
    );
    if n > 1 {
        let t = if me == 0 {
            SplitType::Shared
        } else {
            SplitType::HwUnguided
        };
        let e = w.split_type(t, 0, &Info::new()).unwrap_err();
        assert!(
            e.class() == ErrorClass::Arg && e.detail().contains("different"),
            "{e}"
        );
    }

    // create_group: a bad tag; a group with processes outside the communicator.
    let e = w.create_group(&w.group(), -5).unwrap_err();
    assert!(
        e.class() == ErrorClass::Tag && e.detail().contains("-5"),
        "{e}"
    );
    let selfc = w.split(me, 0)?.expect("self");
    if n > 1 {
        let e = selfc.create_group(&w.group(), 0).unwrap_err();
        assert!(
            e.class() == ErrorClass::Group && e.detail().contains("process"),
            "{e}"
        );
        let e = selfc.create(&w.group()).unwrap_err();
        assert_eq!(e.class(), ErrorClass::Group);
    }

    // idup: its request cannot be cancelled while pending (the other ranks start theirs
    // only once rank 0 has checked); a pending communicator used before completion is
    // exercised in idup_then_use.
    scope(|s| -> Result<()> {
        let (mut req, p) = idup_rank0_first(w, s, 78, |req, _| {
            let e = req.cancel().unwrap_err();
            assert!(
                e.class() == ErrorClass::Request && e.detail().contains("collective"),
                "{e}"
            );
        })?;
        req.wait()?;
        p.comm()?.free()
    })?;

    // Intercommunicator calls on an intracommunicator.
    let e = w.remote_size().unwrap_err();
    assert!(
        e.class() == ErrorClass::Comm && e.detail().contains("intracommunicator"),
        "{e}"
    );
    assert_eq!(w.remote_group().unwrap_err().class(), ErrorClass::Comm);
    assert_eq!(
        w.intercomm_merge(true).unwrap_err().class(),
        ErrorClass::Comm
    );

    // intercomm_create: bad local leader, bad tag (both local, on every rank).
    let e = w.intercomm_create(n, w, 0, 1).unwrap_err();
    assert!(
        e.class() == ErrorClass::Rank && e.detail().contains(&n.to_string()),
        "{e}"
    );
    let e = w.intercomm_create(0, w, 0, -3).unwrap_err();
    assert!(
        e.class() == ErrorClass::Tag && e.detail().contains("-3"),
        "{e}"
    );
    if n > 1 {
        let color = me % 2;
        let local = w.split(color, me)?.expect("color");
        // A remote leader out of range: found by each leader, reported to its group.
        let e = local.intercomm_create(0, w, n + 4, 5).unwrap_err();
        assert!(
            e.class() == ErrorClass::Rank && e.detail().contains(&(n + 4).to_string()),
            "{e}"
        );
        // A remote leader inside the local group.
        let e = local.intercomm_create(0, w, color, 5).unwrap_err();
        assert!(
            e.class() == ErrorClass::Rank && e.detail().contains("local group"),
            "{e}"
        );
        // The communicator still works afterwards.
        let ic = local.intercomm_create(0, w, 1 - color, 5)?;
        // Ranks of the remote group, not of the local one or the job.
        let e = ic.send(&[1u8], ic.remote_size()?, 0).unwrap_err();
        assert!(
            e.class() == ErrorClass::Rank && e.detail().contains("remote group"),
            "{e}"
        );
        let e = ic.recv(&mut [0u8], -7, 0).unwrap_err();
        assert_eq!(e.class(), ErrorClass::Rank);
        // A group with a process outside the local group.
        let e = ic.create(&ic.remote_group()?).unwrap_err();
        assert_eq!(e.class(), ErrorClass::Group, "{e}");
        // Calls earlybird makes on intracommunicators only (split_type on an
        // intercommunicator takes the shared and guided kinds, not the unguided one).
        assert_eq!(
            ic.split_type(SplitType::HwUnguided, 0, &Info::new())
                .unwrap_err()
                .class(),
            ErrorClass::Comm
        );
        assert_eq!(
            ic.intercomm_create(0, w, 0, 0).unwrap_err().class(),
            ErrorClass::Comm
        );
        assert_eq!(
            ic.cart_create(&[1], &[true], false).unwrap_err().class(),
            ErrorClass::Comm
        );
        // intercomm_merge with different values of high within a group (only when a group
        // has two processes).
        if n >= 4 {
            let e = ic.intercomm_merge(ic.rank() == 0).unwrap_err();
            assert!(
                e.class() == ErrorClass::Arg && e.detail().contains("high"),
                "{e}"
            );
        }
        ic.free()?;
        local.free()?;
    }
    selfc.free()
}

/// split and create on an intercommunicator: per color an intercommunicator between the two
/// halves' processes of that color, ordered by key; `None` for UNDEFINED and for a color the
/// other half lacks; create with subgroups given in reverse rank order.
fn split_and_create_across(u: &Universe) -> Result<()> {
    let w = u.world();
    let me = w.rank();
    let (local, ic) = halves(w)?;
    let r = ic.rank();
    // Colors by local rank: 0 and 1 alternate; the last rank of a half of 3 or more opts out.
    let color = if r == ic.size() - 1 && ic.size() >= 3 {
        UNDEFINED
    } else {
        r % 2
    };
    let key = -r;
    let sub = ic.split(color, key)?;
    // Which local ranks of a half of size `s` got color `c`, in the new order (by key, so
    // descending rank).
    let picked = |s: i32, c: i32| -> Vec<i32> {
        let mut v: Vec<i32> = (0..s)
            .filter(|&q| !(q == s - 1 && s >= 3) && q % 2 == c)
            .collect();
        v.reverse();
        v
    };
    let (lsize, rsize) = (ic.size(), ic.remote_size()?);
    match sub {
        None => assert!(
            color == UNDEFINED || picked(rsize, color).is_empty(),
            "rank {me}: no communicator for color {color}"
        ),
        Some(sc) => {
            let mine = picked(lsize, color);
            let theirs = picked(rsize, color);
            assert!(sc.is_inter());
            assert_eq!(sc.size() as usize, mine.len());
            assert_eq!(sc.remote_size()? as usize, theirs.len());
            assert_eq!(sc.rank(), mine.iter().position(|&q| q == r).unwrap() as i32);
            // Every process sends its world rank to remote rank 0 of its color; rank 0 of
            // each side checks it hears from the other side's members, in their order.
            sc.send(&[me], 0, 7)?;
            if sc.rank() == 0 {
                let remote_world: Vec<i32> = theirs.iter().map(|&q| 2 * q + (1 - me % 2)).collect();
                for (i, want) in remote_world.iter().enumerate() {
                    let mut x = [0i32];
                    sc.recv(&mut x, i as i32, 7)?;
                    assert_eq!(x[0], *want, "from remote rank {i}");
                }
            }
            sc.barrier()?;
            sc.free()?;
        }
    }
    // create: each half picks its even local ranks, listed in reverse.
    let evens: Vec<i32> = (0..lsize).filter(|q| q % 2 == 0).rev().collect();
    let g = ic.group().incl(&evens)?;
    let made = ic.create(&g)?;
    match made {
        None => assert!(
            r % 2 == 1,
            "rank {me}: even local rank {r} got no communicator"
        ),
        Some(cc) => {
            assert_eq!(
                cc.rank(),
                evens.iter().position(|&q| q == r).unwrap() as i32
            );
            assert_eq!(cc.remote_size()?, (rsize + 1) / 2);
            // An intercommunicator allreduce: the sum over the other half's members.
            let mut x = [0i32];
            cc.allreduce(&[me], &mut x, &Op::SUM)?;
            let want: i32 = (0..rsize)
                .filter(|q| q % 2 == 0)
                .map(|q| 2 * q + (1 - me % 2))
                .sum();
            assert_eq!(x[0], want);
            cc.free()?;
        }
    }
    ic.free()?;
    local.free()
}

/// split_type on an intercommunicator (MPI 4.1): every process shares this host, so
/// MPI_COMM_TYPE_SHARED gives the whole intercommunicator again, keys ordering each side;
/// MPI_UNDEFINED gives none; the unguided hardware split is refused.
fn split_type_across(u: &Universe) -> Result<()> {
    let w = u.world();
    let (local, ic) = halves(w)?;
    let r = ic.rank();
    let sc = ic
        .split_type(SplitType::Shared, -r, &Info::new())?
        .expect("every process shares the host");
    assert!(sc.is_inter());
    assert_eq!(
        (sc.size(), sc.remote_size()?),
        (ic.size(), ic.remote_size()?)
    );
    assert_eq!(sc.rank(), ic.size() - 1 - r, "ordered by key");
    sc.barrier()?;
    sc.free()?;
    assert!(ic
        .split_type(SplitType::Undefined, 0, &Info::new())?
        .is_none());
    ic.set_errhandler(ErrHandler::Return);
    let e = ic
        .split_type(SplitType::HwUnguided, 0, &Info::new())
        .map(|_| ())
        .unwrap_err();
    assert_eq!(e.class(), ErrorClass::Comm, "{e}");
    ic.free()?;
    local.free()
}

scenarios! {
    split_and_create_across [2, 3, 4, 8];
    split_type_across [2, 3, 4];
    info_hints [1, 2, 3, 4, 8];
    split_type_by_host [1, 2, 3, 4, 8];
    create_group_members_only [1, 2, 3, 4, 8];
    idup_then_use [1, 2, 3, 4, 8];
    idups_interleaved [1, 2, 3, 4, 8];
    idup_disjoint_windows [2, 3];
    idups_in_opposite_orders [2, 3, 4];
    intercomm_across [2, 3, 4, 8];
    misuse [1, 2, 3, 4];
}
