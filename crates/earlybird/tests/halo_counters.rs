//! The seed 001 halo example (`examples/halo_counters.rs`): its variants A (barrier), B
//! (messages) and C (counters both ways) on a periodic 2-D grid, each checked bit for bit
//! against the same relaxation by `sendrecv`, as thread and process jobs of 1 to 8 ranks
//! (neighbours that coincide, or are the rank itself, included); and the built example under
//! `ebrun -n 4`.

mod common;

#[path = "../examples/halo_counters.rs"]
#[allow(dead_code)]
mod halo_counters;

use earlybird::{Result, Universe};

scenarios! {
    three_variants_match_sendrecv [1, 2, 3, 4, 8];
}

fn three_variants_match_sendrecv(u: &Universe) -> Result<()> {
    let o = halo_counters::run(u.world(), 8, 20)?;
    let size = u.world().size();
    assert_eq!(o.dims[0] * o.dims[1], size, "{o:?}");
    assert_eq!(o.mismatches, [0; 3], "{}", o.line());
    assert!(
        o.changed > (size as usize) * 8 * 8 / 2,
        "the field barely changed: {o:?}"
    );
    assert!(o.line().starts_with("halo_counters: OK: "), "{}", o.line());
    Ok(())
}

/// The example as a user runs it: 4 processes, 2 x 2 blocks of 24 x 24, 40 steps.
#[test]
fn example_under_ebrun_4() {
    let out = common::run_example("halo_counters", 4, &["24", "40"]);
    assert!(out.status.success(), "{}", out.dump());
    let want = "halo_counters: OK: 24x24 blocks on 4 ranks (2x2), 40 steps";
    assert!(out.stdout.contains(want), "{}", out.dump());
}

/// A bad argument is a usage error (exit status 2), not a hang.
#[test]
fn example_rejects_bad_arguments() {
    let out = common::run_example("halo_counters", 2, &["0"]);
    assert_eq!(out.status.code(), Some(2), "{}", out.dump());
    assert!(
        out.stderr.contains("usage: halo_counters"),
        "{}",
        out.dump()
    );
}
