//! Seed 000's pipeline example (`examples/channel_pipeline.rs`) and the channel's bind and
//! unbind around it.

mod common;

use earlybird::{bind_slack_channel, scope, unbind_channel, Info, Result, Universe};

scenarios! {
    unbind_right_after_bind [2, 3];
}

/// A channel unbound at once, before any start, 200 times: the receive end must keep the
/// channel's memory reachable until the send end has mapped it, or the sender's bind fails
/// (MPI_ERR_OTHER, "cannot map the channel's memory") when the receiver's unbind wins the
/// race. Ranks 2 and up stay idle.
fn unbind_right_after_bind(u: &Universe) -> Result<()> {
    let w = u.world();
    let rank = w.rank();
    if rank > 1 {
        return Ok(());
    }
    let mut x = [0u64; 4];
    for i in 0..200 {
        scope(|s| -> Result<()> {
            let mut req = if rank == 0 {
                w.ssend_init(s, &mut x, 1, 4)?
            } else {
                w.recv_init(s, &mut x, 0, 4)?
            };
            let mut ch = bind_slack_channel(&mut req, 2, 2, &Info::new())?;
            assert_eq!(ch.channel_status()?.source(), 1 - rank, "bind {i}");
            unbind_channel(&mut ch)?;
            assert!(ch.is_null());
            Ok(())
        })?;
    }
    Ok(())
}
