//! Windows on persistent memory (seed 004): windows made in files under a root path,
//! committed as versions by the persisting synchronisations, reloaded in checkpoint mode
//! (a given version, the newest, the newest every rank holds), the management calls, the
//! info keys, and the errors of names, root paths, modes, sizes and versions. Every
//! scenario runs as threads and as processes; every rank writes its own part and its
//! neighbour's (puts), so that commits carry peers' writes and the owner's.

mod common;

use earlybird::pmem;
use earlybird::{ErrHandler, ErrorClass, Info, Result, Universe, Win, WinErrHandler};
use std::path::PathBuf;

scenarios! {
    fence_persist_commits_and_checkpoint_mode_reloads [2, 3];
    keep_latest_only_and_overwrite_numbering [2];
    global_checkpoint_is_the_newest_every_rank_holds [2, 3];
    pscw_persist_commits_at_post_and_wait [2];
    info_keys_and_unchanged_commits [2];
    errors_name_the_bad_value [2];
    a_wrong_persisting_fence_fails_everywhere_and_hangs_nowhere [2, 3];
    a_failed_expand_destroys_no_checkpoint [2, 3];
}

/// A fresh root directory for the job (rank 0 names it, every rank uses it).
fn fresh_root(u: &Universe) -> Result<PathBuf> {
    let c = u.world();
    let mut name = [0u8; 96];
    if c.rank() == 0 {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let p = std::env::temp_dir().join(format!("eb-pmem-{}-{t}", std::process::id()));
        std::fs::create_dir_all(&p).unwrap();
        let s = p.to_str().unwrap().as_bytes();
        name[..s.len()].copy_from_slice(s);
    }
    c.bcast(&mut name[..], 0)?;
    let end = name.iter().position(|&b| b == 0).unwrap();
    let p = PathBuf::from(std::str::from_utf8(&name[..end]).unwrap());
    pmem::set_root_path(&p)?;
    Ok(p)
}

/// Rank 0 removes the root once every rank is done with it.
fn remove_root(u: &Universe, root: PathBuf) -> Result<()> {
    u.world().barrier()?;
    if u.world().rank() == 0 {
        std::fs::remove_dir_all(root).unwrap();
    }
    Ok(())
}

fn info(pairs: &[(&str, &str)]) -> Info {
    let mut i = Info::new();
    for (k, v) in pairs {
        i.set(k, v).unwrap();
    }
    i
}

const N: usize = 3000; // elements of u64 per rank: 24000 bytes, 6 blocks

/// Iteration `k`'s contents: element i of rank r's memory. The owner writes the even
/// elements, its left neighbour puts the odd ones.
fn value(k: u64, r: i32, i: usize) -> u64 {
    k * 1_000_000 + r as u64 * 10_000 + i as u64
}

/// One iteration: the owner's stores and the neighbour's puts, then a fence_persist.
fn iterate(u: &Universe, w: &Win, k: u64) -> Result<()> {
    let c = u.world();
    let (r, n) = (c.rank(), c.size());
    let right = (r + 1) % n;
    let local = w.local::<u64>()?;
    for i in (0..N).step_by(2) {
        local.set(i, value(k, r, i))?;
    }
    let odd: Vec<u64> = (1..N).step_by(2).map(|i| value(k, right, i)).collect();
    for (j, v) in odd.iter().enumerate() {
        w.put(&[*v][..], right, (2 * j + 1) as isize)?;
    }
    w.fence_persist(0)
}

fn check_iteration(u: &Universe, w: &Win, k: u64) {
    let r = u.world().rank();
    let got = w.local::<u64>().unwrap().to_vec().unwrap();
    for (i, v) in got.iter().enumerate() {
        assert_eq!(
            *v,
            value(k, r, i),
            "rank {r} element {i}: not iteration {k}"
        );
    }
}

fn alloc(u: &Universe, keys: &[(&str, &str)]) -> Result<Win> {
    let mut all = vec![("pmem_is_pmem", "true"), ("pmem_name", "grid")];
    all.extend_from_slice(keys);
    let w = u.world().win_allocate(8 * N, 8, &info(&all))?;
    w.set_errhandler(WinErrHandler::Return);
    Ok(w)
}

/// A window whose every version is kept, with iterations `0..k` committed as versions
/// `0..k`, then freed.
fn versions_made(u: &Universe, k: u64) -> Result<()> {
    let w = alloc(
        u,
        &[
            ("pmem_mode", "expand"),
            ("pmem_keep_all_checkpoints", "true"),
        ],
    )?;
    w.fence(0)?;
    for i in 0..k {
        iterate(u, &w, i)?;
    }
    w.free()
}

fn versions() -> Vec<u64> {
    let l = pmem::list().unwrap();
    let i = (0..l.len())
        .find(|&i| l.name(i).unwrap() == "grid")
        .unwrap();
    let v = l.versions(i).unwrap();
    (0..v.len()).map(|j| v.version(j).unwrap()).collect()
}

fn fence_persist_commits_and_checkpoint_mode_reloads(u: &Universe) -> Result<()> {
    let root = fresh_root(u)?;
    let w = alloc(
        u,
        &[
            ("pmem_mode", "expand"),
            ("pmem_keep_all_checkpoints", "true"),
        ],
    )?;
    w.fence(0)?;
    for k in 0..3 {
        iterate(u, &w, k)?;
        assert_eq!(w.pmem_version(), Some(k));
    }
    assert_eq!(versions(), vec![0, 1, 2]);
    let l = pmem::list()?;
    assert_eq!(l.size(0)?, 8 * N as u64);
    assert!(l.versions(0)?.timestamp(0)? > 1_600_000_000);
    w.free()?;
    // A restart at version 1: the memory is iteration 1's; new versions follow 1 and
    // replace 2 (keep-all, overwrite numbering).
    let w = alloc(
        u,
        &[
            ("pmem_mode", "checkpoint"),
            ("pmem_checkpoint_version", "1"),
            ("pmem_keep_all_checkpoints", "true"),
        ],
    )?;
    check_iteration(u, &w, 1);
    assert_eq!(w.info().get("pmem_checkpoint_version")?, Some("1"));
    w.fence(0)?;
    // Nothing changed, but version 1 is not the newest: this state is committed (as 2),
    // so that a restart without a version number finds it.
    w.fence_persist(0)?;
    assert_eq!(w.pmem_version(), Some(2));
    iterate(u, &w, 7)?;
    assert_eq!(w.pmem_version(), Some(3));
    w.free()?;
    // The newest is now iteration 7's version 3.
    let w = alloc(u, &[("pmem_mode", "checkpoint")])?;
    check_iteration(u, &w, 7);
    w.free()?;
    // Expand deletes every checkpoint and keeps the data file's bytes.
    let w = alloc(u, &[("pmem_mode", "expand")])?;
    check_iteration(u, &w, 7);
    assert_eq!(versions(), Vec::<u64>::new());
    w.free()?;
    remove_root(u, root)
}

fn keep_latest_only_and_overwrite_numbering(u: &Universe) -> Result<()> {
    let root = fresh_root(u)?;
    let w = alloc(u, &[("pmem_mode", "expand")])?;
    w.fence(0)?;
    for k in 0..4 {
        iterate(u, &w, k)?;
        // The latest, and until the next commit's sync carries its erasure, the one before
        // it (what a crash between the ranks' commits needs).
        let v = versions();
        assert_eq!(v.last(), Some(&k), "{v:?}");
        assert!(v.len() <= 2, "{v:?}");
    }
    w.free()?;
    let w = alloc(
        u,
        &[
            ("pmem_mode", "checkpoint"),
            ("pmem_append_checkpoints", "true"),
        ],
    )?;
    check_iteration(u, &w, 3);
    w.fence(0)?;
    iterate(u, &w, 9)?;
    assert_eq!(versions().last(), Some(&4));
    w.free()?;
    // delete_version and delete.
    for v in versions() {
        pmem::delete_version("grid", v)?;
    }
    assert_eq!(versions(), Vec::<u64>::new());
    let e = pmem::delete_version("grid", 4).unwrap_err();
    assert_eq!(e.class(), ErrorClass::PmemCkptVer, "{e}");
    u.world().barrier()?;
    pmem::delete("grid")?;
    assert_eq!(pmem::list()?.len(), 0);
    let e = pmem::delete("grid").unwrap_err();
    assert_eq!(e.class(), ErrorClass::PmemName, "{e}");
    remove_root(u, root)
}

fn global_checkpoint_is_the_newest_every_rank_holds(u: &Universe) -> Result<()> {
    let root = fresh_root(u)?;
    versions_made(u, 4)?;
    // Rank 0 loses version 3, the last rank version 2: the newest all hold is 1.
    let (r, n) = (u.world().rank(), u.world().size());
    if r == 0 {
        pmem::delete_version("grid", 3)?;
    }
    if r == n - 1 {
        pmem::delete_version("grid", 2)?;
    }
    u.world().barrier()?;
    let w = alloc(
        u,
        &[
            ("pmem_mode", "checkpoint"),
            ("pmem_global_checkpoint", "true"),
        ],
    )?;
    check_iteration(u, &w, 1);
    assert_eq!(w.pmem_version(), Some(1));
    w.free()?;
    // Without the key each rank takes its own newest.
    let w = alloc(u, &[("pmem_mode", "checkpoint")])?;
    let own = if r == 0 { 2 } else { 3 };
    let own = if r == n - 1 && n > 1 && r != 0 {
        3
    } else {
        own
    };
    assert_eq!(w.pmem_version(), Some(own));
    w.free()?;
    remove_root(u, root)
}

fn pscw_persist_commits_at_post_and_wait(u: &Universe) -> Result<()> {
    let root = fresh_root(u)?;
    let c = u.world();
    let r = c.rank();
    let w = alloc(
        u,
        &[
            ("pmem_mode", "expand"),
            ("pmem_keep_all_checkpoints", "true"),
        ],
    )?;
    let peer = c.group().incl(&[1 - r])?;
    // Rank 0 is the target: post_persist commits its (unwritten) memory as version 0;
    // rank 1 puts; wait_persist commits the puts as version 1.
    if r == 0 {
        let e = w.post_persist(&peer, 0)?;
        e.wait_persist()?;
        assert_eq!(w.pmem_version(), Some(1));
        assert_eq!(w.local::<u64>()?.get(5)?, 55);
        assert_eq!(versions(), vec![0, 1]);
    } else {
        let a = w.start(&peer, 0)?;
        w.put(&[55u64][..], 0, 5)?;
        a.complete()?;
    }
    c.barrier()?;
    w.free()?;
    remove_root(u, root)
}

fn info_keys_and_unchanged_commits(u: &Universe) -> Result<()> {
    let root = fresh_root(u)?;
    let w = alloc(u, &[("pmem_mode", "expand")])?;
    let i = w.info();
    for (k, v) in [
        ("pmem_is_pmem", "true"),
        ("pmem_name", "grid"),
        ("pmem_mode", "expand"),
        ("pmem_dont_use_transactions", "false"),
        ("pmem_keep_all_checkpoints", "false"),
        ("pmem_volatile", "false"),
        ("pmem_allocate_in_ram", "false"),
    ] {
        assert_eq!(i.get(k)?, Some(v), "{k}");
    }
    // Only the two keys the seed names change; "yes" is not "true".
    w.set_info(&info(&[
        ("pmem_keep_all_checkpoints", "true"),
        ("pmem_name", "other"),
        ("pmem_volatile", "yes"),
    ]))?;
    let i = w.info();
    assert_eq!(i.get("pmem_keep_all_checkpoints")?, Some("true"));
    assert_eq!(i.get("pmem_name")?, Some("grid"));
    w.fence(0)?;
    iterate(u, &w, 0)?;
    // Nothing written: no new version.
    w.fence_persist(0)?;
    w.fence_persist(0)?;
    assert_eq!(versions(), vec![0]);
    // One rank writes: every rank commits version 1.
    if u.world().rank() == 0 {
        w.local::<u64>()?.set(0, 1)?;
    }
    w.fence_persist(0)?;
    assert_eq!(versions(), vec![0, 1]);
    // Only a put, to a rank that wrote nothing and may enter the fence before the put
    // lands: the origin's word makes every rank commit.
    if u.world().rank() == 1 {
        w.put(&[77u64][..], 0, 3)?;
    }
    w.fence_persist(0)?;
    assert_eq!(versions(), vec![0, 1, 2]);
    if u.world().rank() == 0 {
        assert_eq!(w.local::<u64>()?.get(3)?, 77);
    }
    w.free()?;
    // The put is in version 2.
    let w = alloc(u, &[("pmem_mode", "checkpoint")])?;
    assert_eq!(w.pmem_version(), Some(2));
    if u.world().rank() == 0 {
        assert_eq!(w.local::<u64>()?.get(3)?, 77);
    }
    w.free()?;
    // In RAM, without transactions: the data file is not the memory, and nothing commits.
    let w = u.world().win_allocate(
        64,
        8,
        &info(&[
            ("pmem_is_pmem", "true"),
            ("pmem_name", "ram"),
            ("pmem_mode", "expand"),
            ("pmem_allocate_in_ram", "true"),
            ("pmem_dont_use_transactions", "true"),
        ]),
    )?;
    w.fence(0)?;
    w.local::<u64>()?.set(0, 4)?;
    w.fence_persist(0)?;
    assert_eq!(w.pmem_version(), None);
    w.free()?;
    remove_root(u, root)
}

fn errors_name_the_bad_value(u: &Universe) -> Result<()> {
    let c = u.world();
    c.set_errhandler(ErrHandler::Return);
    let e = pmem::set_root_path("/no/such/dir/eb").unwrap_err();
    assert_eq!(e.class(), ErrorClass::PmemRootPath);
    assert!(e.to_string().contains("/no/such/dir/eb"), "{e}");
    let e = pmem::set_root_path("/etc/hostname").unwrap_err();
    assert_eq!(e.class(), ErrorClass::PmemRootPath);
    let e = pmem::set_root_path("a".repeat(300)).unwrap_err();
    assert_eq!(e.class(), ErrorClass::PmemRootPath);
    let root = fresh_root(u)?;
    let mk = |keys: &[(&str, &str)], bytes: usize| {
        let mut all = vec![("pmem_is_pmem", "true")];
        all.extend_from_slice(keys);
        c.win_allocate(bytes, 8, &info(&all))
    };
    for bad in ["../up", ".hidden", "a/b", ""] {
        let e = mk(&[("pmem_name", bad), ("pmem_mode", "expand")], 64).unwrap_err();
        assert_eq!(e.class(), ErrorClass::PmemName, "{bad:?}: {e}");
    }
    let e = mk(&[("pmem_mode", "expand")], 64).unwrap_err();
    assert_eq!(e.class(), ErrorClass::PmemName);
    let e = mk(&[("pmem_name", "g")], 64).unwrap_err();
    assert_eq!(e.class(), ErrorClass::PmemMode);
    let e = mk(&[("pmem_name", "g"), ("pmem_mode", "grow")], 64).unwrap_err();
    assert_eq!(e.class(), ErrorClass::PmemMode);
    assert!(e.to_string().contains("grow"), "{e}");
    let e = mk(&[("pmem_name", "g"), ("pmem_mode", "checkpoint")], 64).unwrap_err();
    assert_eq!(e.class(), ErrorClass::PmemName, "no such window: {e}");
    // A symbolic link out of the root is not a window.
    if c.rank() == 0 {
        std::os::unix::fs::symlink("/tmp", root.join("link")).unwrap();
    }
    c.barrier()?;
    let e = mk(&[("pmem_name", "link"), ("pmem_mode", "expand")], 64).unwrap_err();
    assert_eq!(e.class(), ErrorClass::PmemName, "{e}");
    // One good version, then: a wrong size, a version out of range, a window open twice.
    let w = mk(&[("pmem_name", "g"), ("pmem_mode", "expand")], 64)?;
    w.fence(0)?;
    w.fence_persist(0)?;
    let e = mk(&[("pmem_name", "g"), ("pmem_mode", "checkpoint")], 64).unwrap_err();
    assert_eq!(e.class(), ErrorClass::PmemName, "open twice: {e}");
    w.free()?;
    let e = mk(&[("pmem_name", "g"), ("pmem_mode", "checkpoint")], 128).unwrap_err();
    assert_eq!(e.class(), ErrorClass::Size, "{e}");
    for v in ["7", "-1", "x"] {
        let e = mk(
            &[
                ("pmem_name", "g"),
                ("pmem_mode", "checkpoint"),
                ("pmem_checkpoint_version", v),
            ],
            64,
        )
        .unwrap_err();
        assert_eq!(e.class(), ErrorClass::PmemCkptVer, "version {v}: {e}");
    }
    let l = pmem::list()?;
    assert_eq!(l.name(5).unwrap_err().class(), ErrorClass::PmemArg);
    assert_eq!(
        l.versions(0)?.version(3).unwrap_err().class(),
        ErrorClass::PmemArg
    );
    remove_root(u, root)
}

/// A rank calls fence_persist with a lock open: it fails (MPI_ERR_RMA_SYNC), the others
/// learn that the commit failed somewhere, nobody waits forever, and the next fence_persist
/// gives every rank the same version number again.
fn a_wrong_persisting_fence_fails_everywhere_and_hangs_nowhere(u: &Universe) -> Result<()> {
    let root = fresh_root(u)?;
    let r = u.world().rank();
    let w = alloc(u, &[("pmem_mode", "expand")])?;
    w.fence(0)?;
    w.local::<u64>()?.set(0, 1)?;
    {
        let lock = if r == 1 {
            Some(w.lock(earlybird::LockType::Shared, 0, 0)?)
        } else {
            None
        };
        let e = w.fence_persist(0).unwrap_err();
        let want = if r == 1 {
            ErrorClass::RmaSync
        } else {
            ErrorClass::Io
        };
        assert_eq!(e.class(), want, "rank {r}: {e}");
        if let Some(l) = lock {
            l.unlock()?;
        }
    }
    w.fence_persist(0)?;
    assert_eq!(w.pmem_version(), Some(0), "rank {r}");
    assert_eq!(versions().last(), Some(&0));
    w.free()?;
    remove_root(u, root)
}

/// Expand mode replaces a rank's checkpoints only once every rank has made the window: a
/// creation that fails on one rank leaves every rank's versions as they were.
fn a_failed_expand_destroys_no_checkpoint(u: &Universe) -> Result<()> {
    let root = fresh_root(u)?;
    let (r, n) = (u.world().rank(), u.world().size());
    u.world().set_errhandler(ErrHandler::Return);
    versions_made(u, 3)?;
    let mode = if r == n - 1 { "grow" } else { "expand" };
    let e = alloc(u, &[("pmem_mode", mode)]).unwrap_err();
    if r == n - 1 {
        assert_eq!(e.class(), ErrorClass::PmemMode, "{e}");
    }
    assert_eq!(versions(), vec![0, 1, 2], "rank {r}");
    let w = alloc(u, &[("pmem_mode", "checkpoint")])?;
    check_iteration(u, &w, 2);
    w.free()?;
    // And one that succeeds deletes them.
    let w = alloc(u, &[("pmem_mode", "expand")])?;
    assert_eq!(versions(), Vec::<u64>::new());
    w.free()?;
    assert!(!root
        .join("grid")
        .join(format!("rank{r}.store.new"))
        .exists());
    remove_root(u, root)
}
