//! Signals: names for reports, delivery to ranks, and the events ebrun waits on.
//!
//! ebrun sleeps on one channel of [`Event`]s. A thread fed by signal-hook turns SIGCHLD (a
//! rank ended: reap at once), SIGINT, SIGTERM and SIGHUP (forward to the ranks and end the
//! job) into events, so a dead rank is noticed within microseconds without a busy poll.

use std::sync::mpsc::Sender;

/// What wakes the supervisor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Event {
    /// Some child changed state; reap.
    Child,
    /// ebrun was asked to stop with this signal.
    Stop(i32),
}

/// The signals ebrun catches and forwards.
pub(crate) const FORWARDED: [i32; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// Start the thread that turns signals into events, sent on `tx` as `wrap` makes them. Must
/// be called before any rank is spawned, so that no SIGCHLD can be missed.
pub(crate) fn watch<T: Send + 'static>(tx: Sender<T>, wrap: fn(Event) -> T) -> std::io::Result<()> {
    let mut wanted = vec![libc::SIGCHLD];
    wanted.extend(FORWARDED);
    let mut signals = signal_hook::iterator::Signals::new(&wanted)?;
    std::thread::Builder::new()
        .name("ebrun-signals".into())
        .spawn(move || {
            for sig in signals.forever() {
                let ev = if sig == libc::SIGCHLD {
                    Event::Child
                } else {
                    Event::Stop(sig)
                };
                if tx.send(wrap(ev)).is_err() {
                    break;
                }
            }
        })?;
    Ok(())
}

/// Send `sig` to a process we started and have not reaped yet (so the pid cannot have been
/// reused).
pub(crate) fn send(pid: u32, sig: i32) {
    earlybird::launch::signal(pid, sig);
}

/// "9 (SIGKILL)", or just the number for a signal without a name here (real-time ones).
pub(crate) fn describe(sig: i32) -> String {
    match name(sig) {
        Some(n) => format!("{sig} ({n})"),
        None => sig.to_string(),
    }
}

/// `SIGKILL` for 9, and so on.
pub(crate) fn name(sig: i32) -> Option<&'static str> {
    Some(match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGSTKFLT => "SIGSTKFLT",
        libc::SIGCHLD => "SIGCHLD",
        libc::SIGCONT => "SIGCONT",
        libc::SIGSTOP => "SIGSTOP",
        libc::SIGTSTP => "SIGTSTP",
        libc::SIGTTIN => "SIGTTIN",
        libc::SIGTTOU => "SIGTTOU",
        libc::SIGURG => "SIGURG",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        libc::SIGVTALRM => "SIGVTALRM",
        libc::SIGPROF => "SIGPROF",
        libc::SIGWINCH => "SIGWINCH",
        libc::SIGIO => "SIGIO",
        libc::SIGPWR => "SIGPWR",
        libc::SIGSYS => "SIGSYS",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn names() {
        assert_eq!(super::describe(9), "9 (SIGKILL)");
        assert_eq!(super::describe(15), "15 (SIGTERM)");
        assert_eq!(super::describe(11), "11 (SIGSEGV)");
        assert_eq!(super::describe(40), "40");
    }
}
