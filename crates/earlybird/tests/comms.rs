//! Communicators (MPI 4.1 §7.4): dup, split, create, free, compare, names, and
//! point-to-point on the new communicators with their own ranks and contexts; as thread
//! jobs and under ebrun on 1, 2, 3, 4 and 8 ranks.

mod common;
use earlybird::{
    scope, wait_all, Comparison, ErrHandler, ErrorClass, Result, Universe, ANY_SOURCE, ANY_TAG,
    UNDEFINED,
};

/// MPI_COMM_SELF: rank 0 of 1 whatever the job's size; messages to itself on its own
/// context (a WORLD message with the same tag is not received on it); collectives over the
/// one rank; dup works; freeing it is MPI_ERR_COMM naming it.
fn comm_self(u: &Universe) -> Result<()> {
    let w = u.world();
    let c = u.comm_self();
    assert_eq!(
        (c.rank(), c.size(), c.name()),
        (0, 1, "MPI_COMM_SELF".to_string())
    );
    assert_eq!(c.group().translate_ranks(&[0], &w.group())?, vec![w.rank()]);
    // Same tag, different contexts: each receive gets its own communicator's message.
    w.send(&[1u32], w.rank(), 7)?; // eager: complete before its receive
    let mut mine = [0u32; 1];
    let mut theirs = [0u32; 1];
    scope(|s| -> Result<()> {
        let mut reqs = vec![
            c.irecv(s, &mut mine, ANY_SOURCE, ANY_TAG)?,
            w.irecv(s, &mut theirs, w.rank(), 7)?,
            c.isend(s, &[2u32], 0, 7)?,
        ];
        let sts = wait_all(&mut reqs)?;
        assert_eq!((sts[0].source(), sts[0].tag()), (0, 7));
        assert_eq!(sts[1].source(), w.rank());
        Ok(())
    })?;
    assert_eq!(
        (mine, theirs),
        ([2], [1]),
        "each context got its own message"
    );
    let mut x = [w.rank() as i64 + 5; 3];
    c.allreduce(earlybird::IN_PLACE, &mut x, &earlybird::Op::SUM)?;
    assert_eq!(x, [w.rank() as i64 + 5; 3]);
    c.bcast(&mut x, 0)?;
    c.barrier()?;
    let d = c.dup()?;
    assert_eq!((d.rank(), d.size()), (0, 1));
    d.barrier()?;
    d.free()?;
    c.set_errhandler(ErrHandler::Return);
    let e = c.clone().free().expect_err("MPI_COMM_SELF cannot be freed");
    assert_eq!(e.class(), ErrorClass::Comm);
    assert!(e.to_string().contains("MPI_COMM_SELF"), "{e}");
    c.set_errhandler(ErrHandler::Fatal);
    Ok(())
}

/// MPI_Finalize deletes MPI_COMM_SELF's attributes first, newest first (MPI 4.1 §11.2.4);
/// so does the finalize a dropped universe does.
fn comm_self_attributes_deleted_at_finalize(u: Universe) -> Result<()> {
    self_attributes_deleted(u, true)
}

/// As [`comm_self_attributes_deleted_at_finalize`], the universe dropped instead.
fn comm_self_attributes_deleted_at_drop(u: Universe) -> Result<()> {
    self_attributes_deleted(u, false)
}

fn self_attributes_deleted(u: Universe, explicit: bool) -> Result<()> {
    use earlybird::{comm_null_copy_fn, Keyval};
    use std::cell::RefCell;
    use std::rc::Rc;
    let log: Rc<RefCell<Vec<&str>>> = Rc::default();
    let keys: Vec<Keyval<&'static str>> = (0..3)
        .map(|_| {
            let l = log.clone();
            Keyval::new(comm_null_copy_fn, move |_c: &earlybird::Comm, v: &&str| {
                l.borrow_mut().push(*v);
                Ok(())
            })
        })
        .collect();
    for (k, v) in keys.iter().zip(["first", "second", "third"]) {
        u.comm_self().set_attr(k, v)?;
    }
    assert!(log.borrow().is_empty());
    if explicit {
        u.finalize()?;
    } else {
        drop(u);
    }
    assert_eq!(*log.borrow(), ["third", "second", "first"]);
    Ok(())
}

/// A dup has the same ranks but its own context: a message sent on WORLD is not received on
/// the dup even with the same source and tag.
fn dup_separates_contexts(u: &Universe) -> Result<()> {
    let w = u.world();
    let d = w.dup()?;
    assert_eq!((d.rank(), d.size()), (w.rank(), w.size()));
    assert_eq!(w.compare(&d), Comparison::Congruent);
    assert_eq!(d.compare(&d.clone()), Comparison::Ident);
    assert_eq!(
        (w.name(), d.name()),
        ("MPI_COMM_WORLD".to_string(), String::new())
    );
    d.set_name("dup of world")?;
    assert_eq!(d.clone().name(), "dup of world");
    let n = w.size();
    let (right, left) = ((w.rank() + 1) % n, (w.rank() + n - 1) % n);
    w.send(&[1u32], right, 5)?;
    d.send(&[2u32], right, 5)?;
    let (mut a, mut b) = ([0u32], [0u32]);
    d.recv(&mut b, left, 5)?;
    w.recv(&mut a, left, 5)?;
    assert_eq!((a, b), ([1], [2]));
    d.free()?;
    Ok(())
}

/// Split into evens and odds, ordered by descending rank: ranks, statuses (in the new
/// ranks, for blocking, nonblocking and probe paths) and a ring inside each half.
fn split_orders_and_translates(u: &Universe) -> Result<()> {
    let w = u.world();
    let me = w.rank();
    let half = w.split(me % 2, -me)?.expect("every rank has a color");
    let mine: Vec<i32> = (0..w.size()).filter(|r| r % 2 == me % 2).rev().collect();
    assert_eq!(half.size(), mine.len() as i32);
    assert_eq!(
        half.rank(),
        mine.iter().position(|&r| r == me).unwrap() as i32
    );
    assert_eq!(
        half.group().translate_ranks(&[half.rank()], &w.group())?,
        vec![me]
    );
    let (n, r) = (half.size(), half.rank());
    let (right, left) = ((r + 1) % n, (r + n - 1) % n);
    half.send(&[me], right, 1)?;
    let mut got = [0i32];
    let st = half.recv(&mut got, ANY_SOURCE, ANY_TAG)?;
    assert_eq!((st.source(), got[0]), (left, mine[left as usize]));
    half.send(&[me], right, 2)?;
    let st = half.probe(ANY_SOURCE, 2)?;
    assert_eq!(st.source(), left);
    let mut again = [0i32];
    scope(|s| -> Result<()> {
        let mut reqs = vec![half.irecv(s, &mut again, ANY_SOURCE, 2)?];
        let st = wait_all(&mut reqs)?;
        assert_eq!(st[0].source(), left);
        Ok(())
    })?;
    assert_eq!(
        w.compare(&half),
        if w.size() == 1 {
            Comparison::Congruent
        } else {
            Comparison::Unequal
        }
    );
    // Opting out.
    let none = w.split(if me == 0 { UNDEFINED } else { 1 }, 0)?;
    assert_eq!(none.is_none(), me == 0);
    if let Some(c) = none {
        assert_eq!((c.size(), c.rank()), (w.size() - 1, me - 1));
    }
    Ok(())
}

/// Create over the even ranks; odd ranks get None; a subcommunicator of a subcommunicator.
fn create_from_group(u: &Universe) -> Result<()> {
    let w = u.world();
    let me = w.rank();
    let evens = w.group().range_incl(&[(0, (w.size() - 1) / 2 * 2, 2)])?;
    let c = w.create(&evens)?;
    assert_eq!(c.is_some(), me % 2 == 0);
    if let Some(c) = c {
        assert_eq!((c.size(), c.rank()), (evens.size(), me / 2));
        let first = c.group().incl(&[0])?;
        let solo = c.create(&first)?;
        assert_eq!(
            solo.map(|s| (s.size(), s.rank())),
            (c.rank() == 0).then_some((1, 0))
        );
        let mut x = [me];
        c.sendrecv_replace(
            &mut x,
            (c.rank() + 1) % c.size(),
            3,
            (c.rank() + c.size() - 1) % c.size(),
            3,
        )?;
        let left = (c.rank() + c.size() - 1) % c.size();
        assert_eq!(x[0], 2 * left);
    }
    Ok(())
}

/// Misuse: each an MPI error class with the value in the message.
fn misuse(u: &Universe) -> Result<()> {
    let w = u.world();
    w.set_errhandler(ErrHandler::Return);
    let e = w.clone().free().unwrap_err();
    assert!(
        e.class() == ErrorClass::Comm && e.detail().contains("MPI_COMM_WORLD"),
        "{e}"
    );
    let d = w.dup()?;
    let other = d.clone();
    d.free()?;
    let e = other.send(&[1u8], 0, 0).unwrap_err();
    assert!(
        e.class() == ErrorClass::Comm && e.detail().contains("comm_free"),
        "{e}"
    );
    let e = other.free().unwrap_err();
    assert_eq!(e.class(), ErrorClass::Comm);
    let e = w.split(-5, 0).unwrap_err();
    assert!(
        e.class() == ErrorClass::Arg && e.detail().contains("-5"),
        "{e}"
    );
    let e = w.set_name(&"x".repeat(200)).unwrap_err();
    assert_eq!(e.class(), ErrorClass::Arg);
    Ok(())
}

/// Context ids are recycled: 10,000 dup/free cycles (more than the 4,096 pairs an endpoint
/// has) run without running out.
fn dup_free_loop(u: &Universe) -> Result<()> {
    let w = u.world();
    let cycles = if w.size() > 4 { 2_000 } else { 10_000 };
    for i in 0..cycles {
        let d = w.dup()?;
        if i % 997 == 0 {
            // The recycled context still carries messages, to the right rank.
            let (right, left) = common::ring(&d);
            let mut x = [i * 100 + d.rank()];
            d.sendrecv_replace(&mut x, right, 0, left, 0)?;
            assert_eq!(x, [i * 100 + left], "cycle {i}: the left neighbour's value");
        }
        d.free()?;
    }
    Ok(())
}

/// Fault tolerance's agreement and shrink (no process fails in a running job): the AND of
/// every rank's flag, blocking and nonblocking; a nonblocking agreement posted before a
/// barrier on one rank and after it on the others completes (agreements keep their own
/// count); a shrink has every rank in the same order, on a context of its own.
fn fault_tolerant_agreement(u: &Universe) -> Result<()> {
    let w = u.world();
    let (me, n) = (w.rank(), w.size());
    for i in 0..5u32 {
        let mut flag = i;
        w.agree(&mut flag)?;
        assert_eq!(flag, i);
    }
    let mut flag = !(1u32 << me);
    w.agree(&mut flag)?;
    assert_eq!(
        flag,
        !((1u32 << n) - 1),
        "rank {me}: the AND of every rank's cleared bit"
    );
    for root in 0..n {
        let got = scope(|s| -> Result<Option<u32>> {
            w.barrier()?;
            if me == root {
                let (mut r, agreed) = w.iagree(s, 0b1011)?;
                if n > 1 {
                    assert!(r.test()?.is_none(), "complete before the others agreed");
                    assert_eq!(agreed.flag(), None);
                }
                w.barrier()?;
                r.wait()?;
                Ok(agreed.flag())
            } else {
                w.barrier()?;
                let (mut r, agreed) = w.iagree(s, 0b1101)?;
                r.wait()?;
                Ok(agreed.flag())
            }
        })?;
        let want = if n == 1 { 0b1011 } else { 0b1001 };
        assert_eq!(got, Some(want), "rank {me}, root {root}");
    }
    let sh = w.shrink()?;
    assert_eq!((sh.rank(), sh.size()), (me, n));
    assert_eq!(w.compare(&sh), Comparison::Congruent);
    let mut x = [me as u64 + 1];
    sh.allreduce(earlybird::IN_PLACE, &mut x, &earlybird::Op::SUM)?;
    assert_eq!(x[0], (n * (n + 1) / 2) as u64);
    sh.free()?;
    // On an intercommunicator: over both groups (the halves by rank parity).
    if n > 1 {
        let color = me % 2;
        let local = w.split(color, me)?.expect("color");
        let inter = local.intercomm_create(0, &w, 1 - color, 77)?;
        let mut flag = !(1u32 << me);
        inter.agree(&mut flag)?;
        assert_eq!(
            flag,
            !((1u32 << n) - 1),
            "rank {me}: the intercommunicator's agreement"
        );
        let sh = inter.shrink()?;
        assert_eq!(
            (sh.rank(), sh.size(), sh.remote_size()?),
            (inter.rank(), inter.size(), inter.remote_size()?)
        );
        sh.free()?;
        inter.free()?;
        local.free()?;
    }
    Ok(())
}

/// A pause that lets nothing go (a layer's lock would be let go here).
fn no_lock() -> Result<()> {
    std::thread::yield_now();
    Ok(())
}

/// Constructors run aside (`waits_aside`, as the C ABI runs them under MPI_THREAD_MULTIPLE)
/// offer windows of the pairs they reserve. Rank 0 first takes 300 pairs that no other rank
/// holds (dups of MPI_COMM_SELF), so its lowest window misses the others' in every first
/// round: dup, split, create, create_group, a Cartesian grid, an intercommunicator create
/// and its merge then agree in later rounds, each on a pair that carries its own messages.
fn agreements_aside_whose_windows_miss(u: &Universe) -> Result<()> {
    let w = u.world();
    let (me, n) = (w.rank(), w.size());
    let held = if me == 0 {
        (0..300)
            .map(|_| u.comm_self().dup())
            .collect::<Result<Vec<_>>>()?
    } else {
        Vec::new()
    };
    let made = earlybird::waits_aside(no_lock, || -> Result<Vec<earlybird::Comm>> {
        let low = me < n / 2;
        let local = w.split(i32::from(low), me)?.expect("a color");
        let remote_leader = if low { n / 2 } else { 0 };
        let inter = local.intercomm_create(0, w, remote_leader, 9)?;
        let merged = inter.intercomm_merge(!low)?;
        assert_eq!(merged.size(), n);
        Ok(vec![
            w.dup()?,
            w.split(0, -me)?.expect("a color"),
            w.create(&w.group())?.expect("a member"),
            w.create_group(&w.group(), 5)?.expect("a member"),
            w.cart_create(&[n], &[true], false)?.expect("in the grid"),
            local,
            merged,
            inter,
        ])
    })?;
    // Every new communicator carries its own messages: a ring of values that differ by
    // communicator, all posted before any completes.
    let k = made.len() - 1;
    let mut got = vec![[0i32; 1]; k];
    let sent: Vec<[i32; 1]> = (0..k).map(|i| [i as i32 * 1000 + made[i].rank()]).collect();
    scope(|s| -> Result<()> {
        let mut reqs = Vec::new();
        for (c, g) in made.iter().zip(got.iter_mut()) {
            reqs.push(c.irecv(s, g, ANY_SOURCE, 3)?);
        }
        for (c, x) in made.iter().zip(&sent) {
            reqs.push(c.isend(s, x, common::ring(c).0, 3)?);
        }
        wait_all(&mut reqs)?;
        Ok(())
    })?;
    for (i, (c, g)) in made.iter().zip(&got).enumerate() {
        let left = common::ring(c).1;
        assert_eq!(g[0], i as i32 * 1000 + left, "communicator {i}");
    }
    for c in made.into_iter().chain(held) {
        c.free()?;
    }
    Ok(())
}

scenarios! {
    comm_self [1, 2, 3, 4, 8];
    agreements_aside_whose_windows_miss [2, 3, 4];
    fault_tolerant_agreement [1, 2, 3, 4];
    owned comm_self_attributes_deleted_at_finalize [1, 2, 3];
    owned comm_self_attributes_deleted_at_drop [1, 2, 3];
    dup_separates_contexts [1, 2, 3, 4, 8];
    split_orders_and_translates [1, 2, 3, 4, 8];
    create_from_group [1, 2, 3, 4, 8];
    misuse [1, 2];
    dup_free_loop [1, 2, 4, 8];
}
