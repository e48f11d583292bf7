//! `ebrun` — the launcher of earlybird jobs, on one host or across several.
//!
//! ```text
//! ebrun -n N [--timeout SECONDS] [--tag-output] PROGRAM [ARGS...]
//! ebrun [-n N] --hosts H1[:SLOTS],... [--launcher-exec CMD] [...] PROGRAM [ARGS...]
//! ```
//!
//! Across hosts ([`remote`], [`proxy`]), ebrun starts a proxy per host through ssh and
//! serves PMI-1 to the ranks ([`pmi_server`]); what follows is the one-host launcher.
//!
//! ebrun sits above every layer of the library and uses only two of them: **bootstrap**
//! ([`earlybird::bootstrap::LaunchedJob`] makes the job segment — created in `/dev/shm` or
//! `$EARLYBIRD_SHM_DIR`, unlinked at once, its space reserved with `fallocate` — and says
//! which variables each rank needs) and the segment's **rank slots** in
//! [`earlybird::fabric::shm::JobSegment`] (each rank's state, what it is blocked in, and the
//! job-wide abort flag). The segment *is* the key-value store of the job: ranks publish their
//! pid and state in it, and find each other's rings in it; ebrun passes the descriptor down by
//! inheritance, so no name of the job ever exists in the file system after the first instant.
//!
//! How a job ends (see [`launcher`]):
//!
//! * every rank finalizes and exits 0: status 0;
//! * a rank exits non-zero, is killed by a signal, or exits 0 without calling finalize: ebrun
//!   prints one line naming the rank, its pid and what happened, sets the abort flag (every
//!   rank's waits then return an error), sends SIGTERM to the others and SIGKILL 300 ms later,
//!   and exits with the rank's status (128+N for signal N, 1 for a missing finalize);
//! * `--timeout` expires: ebrun prints what each rank was blocked in, then ends the job the
//!   same way and exits 124;
//! * ebrun gets SIGINT, SIGTERM or SIGHUP: it forwards the signal to the ranks, ends the job
//!   and exits 128+N;
//! * ebrun is killed (SIGKILL included): the ranks die with it, because the library asks the
//!   kernel for `PR_SET_PDEATHSIG` at init (ebrun spawns every rank from its main thread,
//!   which lives until ebrun exits, as that request requires).
//!
//! Layers: ebrun is a binary on top of the library's public API; it has no `unsafe` code
//! (signals come through the `signal-hook` crate, `kill` through
//! [`earlybird::sys::process::signal`]).
#![forbid(unsafe_code)]

mod cli;
mod control;
mod hosts;
mod launcher;
mod output;
mod pmi_server;
mod proxy;
mod remote;
mod signals;

fn main() {
    let code = match cli::parse(std::env::args_os().skip(1)) {
        Ok(cli::Command::Help) => {
            print!("{}", cli::HELP);
            0
        }
        Ok(cli::Command::Version) => {
            println!("ebrun {}", env!("CARGO_PKG_VERSION"));
            0
        }
        Ok(cli::Command::Proxy { addr, cookie, host }) => proxy::run(&addr, &cookie, host),
        Ok(cli::Command::Run(mut opts)) => match cli::timeout_from_env(&mut opts) {
            Ok(()) => match opts.hosts.clone() {
                Some(hosts) => remote::run(&opts, &hosts),
                None => launcher::run(&opts),
            },
            Err(e) => {
                eprintln!("ebrun: {e}");
                1
            }
        },
        Err(msg) => {
            eprintln!("ebrun: {msg}");
            1
        }
    };
    // exit() runs no destructors: flush what `print!` may still hold.
    let _ = std::io::Write::flush(&mut std::io::stdout());
    std::process::exit(code);
}
