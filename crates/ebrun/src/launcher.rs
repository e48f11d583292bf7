//! Start the ranks, watch them, end the job.
//!
//! The supervisor sleeps on a channel of [`Event`]s (SIGCHLD and the forwarded signals, see
//! [`signals`](crate::signals)), waking at least every [`POLL`] to look at the segment's
//! abort flag and the timeout. Only this thread reaps children, and it signals only
//! children it has not reaped, so a pid it signals can never belong to another process.

use crate::cli::{self, Options};
use crate::output::{Forwarders, Stream};
use crate::signals::{self, Event};
use earlybird::error::ErrorClass;
use earlybird::launch::LaunchedJob;
use earlybird::launch::{JobSegment, RankState};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// Longest sleep of the supervisor between looks at the abort flag and the clock.
pub(crate) const POLL: Duration = Duration::from_millis(50);
/// Between SIGTERM (or a forwarded signal) and SIGKILL when ending a job.
const TERM_GRACE: Duration = Duration::from_millis(300);
/// How long after SIGKILL ebrun waits to reap (a process in uninterruptible sleep).
const KILL_REAP_LIMIT: Duration = Duration::from_secs(5);
/// A rank that set the abort flag normally exits right after; how long ebrun waits for that
/// exit (to report the exit) before it ends the job itself.
pub(crate) const ABORT_GRACE: Duration = Duration::from_millis(200);
/// How long ebrun waits, once the ranks are gone, for their output pipes to drain.
pub(crate) const OUTPUT_DRAIN_LIMIT: Duration = Duration::from_secs(2);

/// Exit status on `--timeout` expiry (as timeout(1) uses).
pub(crate) const TIMEOUT_STATUS: i32 = 124;

pub(crate) struct Rank {
    pub rank: u32,
    pub pid: u32,
    pub child: Child,
    /// Set once reaped, with the rank's state in the segment at that moment (`NotStarted`
    /// where no segment is watched: a proxy's ranks, or ranks reaped while ending the job).
    pub exit: Option<(ExitStatus, RankState)>,
}

/// How a rank failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    Status(i32),
    Signal { sig: i32, core: bool },
    NoFinalize,
}

impl Failure {
    /// Whether this failure looks like a cause rather than a consequence of another rank's
    /// failure: a signal first, then a missing finalize, then a non-zero status (the usual
    /// reaction of a rank whose peer died).
    pub(crate) fn priority(self) -> u8 {
        match self {
            Failure::Signal { .. } => 0,
            Failure::NoFinalize => 1,
            Failure::Status(_) => 2,
        }
    }

    pub(crate) fn exit_code(self) -> i32 {
        match self {
            Failure::Status(c) => clamp_code(c),
            Failure::Signal { sig, .. } => 128 + sig,
            Failure::NoFinalize => 1,
        }
    }

    pub(crate) fn describe(self) -> String {
        match self {
            Failure::Status(c) => format!("exited with status {c}"),
            Failure::Signal { sig, core } => {
                format!(
                    "killed by signal {}{}",
                    signals::describe(sig),
                    if core { " (core dumped)" } else { "" }
                )
            }
            Failure::NoFinalize => "exited without finalizing".into(),
        }
    }
}

/// An exit status a shell sees the same way: 1..=255 (0 would read as success).
pub(crate) fn clamp_code(c: i32) -> i32 {
    match c & 0xff {
        0 => 1,
        c => c,
    }
}

/// The failure, if any, of a rank that exited with `st` while its slot said `state`.
/// A program that never initialised earlybird may exit 0 (e.g. `ebrun -n 4 hostname`).
pub(crate) fn classify(st: ExitStatus, state: RankState) -> Option<Failure> {
    if let Some(sig) = st.signal() {
        return Some(Failure::Signal {
            sig,
            core: st.core_dumped(),
        });
    }
    match st.code() {
        Some(0) if state == RankState::Running => Some(Failure::NoFinalize),
        Some(0) => None,
        Some(c) => Some(Failure::Status(c)),
        None => Some(Failure::Status(1)),
    }
}

/// Why the supervisor stopped watching.
enum Ending {
    AllDone,
    /// Rank `idx` failed as described.
    Failed {
        idx: usize,
        failure: Failure,
    },
    /// Rank `idx` set the abort flag with `code` and has not (yet) exited.
    Aborted {
        idx: usize,
        code: i32,
    },
    Timeout,
    /// ebrun received this signal.
    Stopped(i32),
}

/// Print `text` (whole lines) on stderr with a single write, so that it is not cut up by
/// the ranks' own writes to the same file (`eprintln!` writes each piece separately).
pub(crate) fn say(text: &str) {
    use std::io::Write;
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// Run a job; returns ebrun's exit status.
pub(crate) fn run(opts: &Options) -> i32 {
    let start = Instant::now();
    let job = match LaunchedJob::create(opts.nranks, None) {
        Ok(j) => j,
        Err(e) => {
            let hint = if e.class() == ErrorClass::NoMem {
                " (free space there, or set EARLYBIRD_SHM_DIR to a larger tmpfs)"
            } else {
                ""
            };
            say(&format!("ebrun: {}{hint}\n", e.detail()));
            return 1;
        }
    };
    let seg = job.segment.clone();

    // Signals first: a SIGCHLD must not be lost between spawn and watch.
    let (tx, rx) = mpsc::channel();
    if let Err(e) = signals::watch(tx, |e| e) {
        say(&format!("ebrun: cannot install signal handlers: {e}\n"));
        return 1;
    }

    let mut out = Forwarders::new();
    let mut ranks: Vec<Rank> = Vec::with_capacity(opts.nranks as usize);
    for r in 0..opts.nranks {
        // Spawned from the main thread: PR_SET_PDEATHSIG, which every rank requests at init,
        // fires when the *thread* that forked it ends, and this one lives until ebrun exits.
        match spawn_rank(
            r,
            &opts.program,
            &opts.args,
            (&[], job.rank_env(r)),
            r == 0,
            opts.tag_output.then_some(&mut out),
        ) {
            Ok(rank) => ranks.push(rank),
            Err((code, why)) => {
                say(&format!("ebrun: cannot start rank {r}: {why}\n"));
                seg.abort(-1, code);
                end_job(&mut ranks, &rx, libc::SIGTERM);
                out.finish(OUTPUT_DRAIN_LIMIT);
                return code;
            }
        }
    }

    let deadline = opts.timeout.map(|t| start + t);
    let ending = supervise(&mut ranks, &seg, &rx, deadline);

    let code = match ending {
        Ending::AllDone => 0,
        Ending::Failed { idx, failure } => {
            let code = failure.exit_code();
            seg.abort(ranks[idx].rank as i32, code);
            say(&format!(
                "ebrun: rank {} (pid {}) {}\n",
                ranks[idx].rank,
                ranks[idx].pid,
                failure.describe()
            ));
            end_job(&mut ranks, &rx, libc::SIGTERM);
            code
        }
        Ending::Aborted { idx, code } => {
            say(&format!(
                "ebrun: rank {} (pid {}) aborted the job with code {code}\n",
                ranks[idx].rank, ranks[idx].pid
            ));
            end_job(&mut ranks, &rx, libc::SIGTERM);
            clamp_code(code)
        }
        Ending::Timeout => {
            let t = opts.timeout.map(cli::seconds).unwrap_or_default();
            // Read every slot before the abort flag wakes the ranks out of their waits.
            let mut report = format!("ebrun: timeout after {t} s; ranks were:\n");
            for r in &ranks {
                let what = seg.describe(r.rank);
                match r.exit {
                    None => {
                        report.push_str(&format!("  rank {} (pid {}): {what}\n", r.rank, r.pid))
                    }
                    Some((st, _)) => report.push_str(&format!(
                        "  rank {} (pid {}): {} ({what})\n",
                        r.rank,
                        r.pid,
                        exit_text(st)
                    )),
                }
            }
            for line in seg.endpoint_reports() {
                report.push_str(&format!("  {line}\n"));
            }
            say(&report);
            seg.abort(-1, TIMEOUT_STATUS);
            end_job(&mut ranks, &rx, libc::SIGTERM);
            TIMEOUT_STATUS
        }
        Ending::Stopped(sig) => {
            say(&format!(
                "ebrun: received {}; forwarding it to the ranks and ending the job\n",
                signals::describe(sig)
            ));
            seg.abort(-1, 128 + sig);
            end_job(&mut ranks, &rx, sig);
            128 + sig
        }
    };
    out.finish(OUTPUT_DRAIN_LIMIT);
    drop(job);
    code
}

/// Start rank `r`: `program` with `args`, with the variables `env.0` names removed from
/// this process's environment and those of `env.1` added, reading stdin if `stdin` (else
/// /dev/null), its output through `tag` when given (else this process's own). The rank dies
/// with this thread (`PR_SET_PDEATHSIG`, set before its program runs). The error is the
/// exit status to report (127: not found, 126: not runnable) and why.
pub(crate) fn spawn_rank<K, V>(
    r: u32,
    program: &std::ffi::OsStr,
    args: &[std::ffi::OsString],
    env: (&[std::ffi::OsString], impl IntoIterator<Item = (K, V)>),
    stdin: bool,
    tag: Option<&mut Forwarders>,
) -> Result<Rank, (i32, String)>
where
    K: AsRef<std::ffi::OsStr>,
    V: AsRef<std::ffi::OsStr>,
{
    let mut cmd = Command::new(program);
    cmd.args(args);
    for k in env.0 {
        cmd.env_remove(k);
    }
    cmd.envs(env.1);
    earlybird::launch::die_with_spawner(&mut cmd);
    if !stdin {
        cmd.stdin(Stdio::null());
    }
    if tag.is_some() {
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    }
    match cmd.spawn() {
        Ok(mut child) => {
            if let Some(out) = tag {
                if let Some(p) = child.stdout.take() {
                    out.add(r, p, Stream::Stdout);
                }
                if let Some(p) = child.stderr.take() {
                    out.add(r, p, Stream::Stderr);
                }
            }
            Ok(Rank {
                rank: r,
                pid: child.id(),
                child,
                exit: None,
            })
        }
        Err(e) => {
            let code = if e.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            };
            Err((code, format!("{}: {e}", program.to_string_lossy())))
        }
    }
}

/// "exited with status 0" / "killed by signal 9 (SIGKILL)".
pub(crate) fn exit_text(st: ExitStatus) -> String {
    match (st.code(), st.signal()) {
        (_, Some(sig)) => format!("killed by signal {}", signals::describe(sig)),
        (Some(c), None) => format!("exited with status {c}"),
        (None, None) => format!("ended ({st})"),
    }
}

/// Reap every rank that has ended; return the failures among them.
fn reap(ranks: &mut [Rank], seg: &JobSegment) -> Vec<(usize, Failure)> {
    let mut failures = Vec::new();
    for (i, r) in ranks.iter_mut().enumerate() {
        if r.exit.is_some() {
            continue;
        }
        if let Ok(Some(st)) = r.child.try_wait() {
            // The process is gone: its slot says how far it got.
            let state = seg.state(r.rank);
            r.exit = Some((st, state));
            if let Some(f) = classify(st, state) {
                failures.push((i, f));
            }
        }
    }
    failures
}

/// Watch the job until it ends one way or another.
///
/// A rank that set the abort flag (errors-are-fatal, an abort call) is the origin of the
/// failure even when a rank it woke up exits first: ebrun then waits up to [`ABORT_GRACE`]
/// for the origin's own exit, to report that.
fn supervise(
    ranks: &mut [Rank],
    seg: &JobSegment,
    rx: &Receiver<Event>,
    deadline: Option<Instant>,
) -> Ending {
    let mut failures: Vec<(usize, Failure)> = Vec::new();
    let mut abort_seen: Option<Instant> = None;
    loop {
        failures.extend(reap(ranks, seg));
        let now = Instant::now();
        let mut wait = POLL;
        let origin = seg.aborted().and_then(|(r0, code)| {
            ranks
                .iter()
                .position(|x| x.rank as i32 == r0)
                .map(|idx| (idx, code))
        });
        if let Some((idx, code)) = origin {
            if let Some((st, state)) = ranks[idx].exit {
                return match classify(st, state) {
                    Some(failure) => Ending::Failed { idx, failure },
                    None => Ending::Aborted { idx, code },
                };
            }
            let waited = now - *abort_seen.get_or_insert(now);
            if waited >= ABORT_GRACE {
                return Ending::Aborted { idx, code };
            }
            wait = wait.min(ABORT_GRACE - waited);
        } else if !failures.is_empty() {
            return blame(&failures);
        } else if ranks.iter().all(|r| r.exit.is_some()) {
            return Ending::AllDone;
        }
        if let Some(d) = deadline {
            if now >= d {
                return Ending::Timeout;
            }
            wait = wait.min(d - now);
        }
        match rx.recv_timeout(wait) {
            Ok(Event::Child) | Err(RecvTimeoutError::Timeout) => {}
            Ok(Event::Stop(sig)) => return Ending::Stopped(sig),
            Err(RecvTimeoutError::Disconnected) => {
                std::thread::sleep(wait.min(Duration::from_millis(5)))
            }
        }
    }
}

/// Pick the rank to blame among `failures` (seen in the same sweep, or before it): the
/// likeliest cause (see [`Failure::priority`]), lowest rank first.
fn blame(failures: &[(usize, Failure)]) -> Ending {
    let (idx, failure) = blame_first(failures);
    Ending::Failed { idx, failure }
}

/// The failure to blame among `failures`, keyed by rank (or by index in rank order).
pub(crate) fn blame_first<K: Copy + Ord>(failures: &[(K, Failure)]) -> (K, Failure) {
    *failures
        .iter()
        .min_by_key(|(k, f)| (f.priority(), *k))
        .expect("blame needs at least one failure")
}

/// [`end_ranks`] for ebrun's own ranks, whose signals come as [`Event`]s.
fn end_job(ranks: &mut [Rank], rx: &Receiver<Event>, first: i32) {
    end_ranks(ranks, rx, |e| matches!(e, Event::Stop(_)), first)
}

/// End every rank still running: `first` (SIGTERM, or the signal ebrun was sent), SIGKILL
/// after [`TERM_GRACE`] (at once if an event on `rx` that `is_stop` picks says to stop
/// again), then reap them all.
pub(crate) fn end_ranks<T>(
    ranks: &mut [Rank],
    rx: &Receiver<T>,
    is_stop: impl Fn(&T) -> bool,
    first: i32,
) {
    let running = |ranks: &mut [Rank]| {
        for r in ranks.iter_mut().filter(|r| r.exit.is_none()) {
            if let Ok(Some(st)) = r.child.try_wait() {
                r.exit = Some((st, RankState::NotStarted));
            }
        }
        ranks.iter().filter(|r| r.exit.is_none()).count()
    };
    if running(ranks) == 0 {
        return;
    }
    for r in ranks.iter().filter(|r| r.exit.is_none()) {
        signals::send(r.pid, first);
    }
    let kill_at = Instant::now() + TERM_GRACE;
    let mut killed = false;
    let mut give_up = kill_at + KILL_REAP_LIMIT;
    while running(ranks) > 0 {
        let now = Instant::now();
        if !killed && now >= kill_at {
            for r in ranks.iter().filter(|r| r.exit.is_none()) {
                signals::send(r.pid, libc::SIGKILL);
            }
            killed = true;
            give_up = now + KILL_REAP_LIMIT;
        }
        if now >= give_up {
            for r in ranks.iter().filter(|r| r.exit.is_none()) {
                say(&format!(
                    "ebrun: rank {} (pid {}) does not die even with SIGKILL; leaving it\n",
                    r.rank, r.pid
                ));
            }
            return;
        }
        let until = if killed { give_up } else { kill_at };
        let wait = (until - now).min(Duration::from_millis(10));
        match rx.recv_timeout(wait) {
            Ok(ev) if !killed && is_stop(&ev) => {
                // Told again: no more grace.
                for r in ranks.iter().filter(|r| r.exit.is_none()) {
                    signals::send(r.pid, libc::SIGKILL);
                }
                killed = true;
                give_up = Instant::now() + KILL_REAP_LIMIT;
            }
            Ok(_) | Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => std::thread::sleep(wait),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(raw: i32) -> ExitStatus {
        ExitStatus::from_raw(raw)
    }

    #[test]
    fn classify_exits() {
        // Wait statuses: exit code c is c << 8; signal s is s.
        assert_eq!(classify(status(0), RankState::Finalized), None);
        assert_eq!(classify(status(0), RankState::NotStarted), None);
        assert_eq!(
            classify(status(0), RankState::Running),
            Some(Failure::NoFinalize)
        );
        assert_eq!(
            classify(status(3 << 8), RankState::Finalized),
            Some(Failure::Status(3))
        );
        assert_eq!(
            classify(status(9), RankState::Running),
            Some(Failure::Signal {
                sig: 9,
                core: false
            })
        );
        assert_eq!(
            classify(status(11 | 0x80), RankState::Running),
            Some(Failure::Signal {
                sig: 11,
                core: true
            })
        );
    }

    #[test]
    fn failure_codes_and_text() {
        assert_eq!(Failure::Status(3).exit_code(), 3);
        assert_eq!(Failure::Status(256).exit_code(), 1);
        assert_eq!(
            Failure::Signal {
                sig: 9,
                core: false
            }
            .exit_code(),
            137
        );
        assert_eq!(Failure::NoFinalize.exit_code(), 1);
        assert_eq!(
            Failure::Signal {
                sig: 9,
                core: false
            }
            .describe(),
            "killed by signal 9 (SIGKILL)"
        );
        assert_eq!(Failure::Status(3).describe(), "exited with status 3");
        assert_eq!(Failure::NoFinalize.describe(), "exited without finalizing");
    }
}
