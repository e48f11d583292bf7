//! Groups (MPI 4.1 §7.3) and info objects (§10) seen from every rank of a job, as thread
//! jobs and under ebrun: each rank builds groups from WORLD's and checks its own rank in
//! them, translations, set algebra and comparisons; info objects round-trip keys.

mod common;
use earlybird::{Comparison, ErrorClass, Info, Result, Universe, PROC_NULL, UNDEFINED};

fn groups_from_world(u: &Universe) -> Result<()> {
    let w = u.world();
    let (me, n) = (w.rank(), w.size());
    let world = w.group();
    assert_eq!((world.size(), world.rank()), (n, Some(me)));

    // Reversed order: my rank is mirrored, and translating back gives the identity.
    let rev: Vec<i32> = (0..n).rev().collect();
    let g = world.incl(&rev)?;
    assert_eq!(g.rank(), Some(n - 1 - me));
    let all: Vec<i32> = (0..n).collect();
    assert_eq!(g.translate_ranks(&all, &world)?, rev);
    assert_eq!(
        g.compare(&world),
        if n == 1 {
            Comparison::Ident
        } else {
            Comparison::Similar
        }
    );
    assert_eq!(world.compare(&w.group()), Comparison::Ident);

    // Evens and odds by ranges; I am in exactly one of them.
    let evens = world.range_incl(&[(0, (n - 1) / 2 * 2, 2)])?;
    let odds = world.range_excl(&[(0, (n - 1) / 2 * 2, 2)])?;
    assert_eq!(evens.size() + odds.size(), n);
    assert_eq!(evens.rank().is_some(), me % 2 == 0);
    assert_eq!(odds.rank(), if me % 2 == 1 { Some(me / 2) } else { None });
    assert_eq!(evens.intersection(&odds)?.size(), 0);
    let u2 = evens.union(&odds)?;
    assert_eq!(
        u2.compare(&world),
        if n <= 2 {
            Comparison::Ident
        } else {
            Comparison::Similar
        }
    );
    assert_eq!(world.difference(&evens)?.compare(&odds), Comparison::Ident);
    assert_eq!(
        evens.translate_ranks(&[0, PROC_NULL], &odds)?,
        vec![UNDEFINED, PROC_NULL]
    );

    // Without me.
    let others = world.excl(&[me])?;
    assert_eq!((others.size(), others.rank()), (n - 1, None));

    // Misuse: a rank outside the group, named in the message.
    let e = world.incl(&[n]).unwrap_err();
    assert!(
        e.class() == ErrorClass::Rank && e.detail().contains(&format!("rank {n}")),
        "{e}"
    );
    Ok(())
}

fn info_objects(u: &Universe) -> Result<()> {
    let me = u.world().rank();
    let mut info = Info::new();
    info.set("rank", &me.to_string())?;
    info.set("address_base_increment", "8192")?;
    assert_eq!(info.get("rank")?, Some(me.to_string().as_str()));
    assert_eq!(
        (info.nkeys(), info.nthkey(1)?),
        (2, "address_base_increment")
    );
    let copy = info.dup();
    info.delete("rank")?;
    assert_eq!((info.nkeys(), copy.nkeys()), (1, 2));
    assert_eq!(
        info.delete("rank").unwrap_err().class(),
        ErrorClass::InfoNoKey
    );
    Ok(())
}

scenarios! {
    groups_from_world [1, 2, 3, 4, 8];
    info_objects [1, 2];
}
