//! Command line of `ebrun`, parsed by hand.
//!
//! Options come before PROGRAM; the first argument that is not an option (or whatever follows
//! `--`) is PROGRAM, and every argument after it goes to PROGRAM untouched, even ones that
//! look like ebrun's own flags (`ebrun -n 2 prog -n 5` runs `prog -n 5`). `-np N` is
//! accepted as mpiexec accepts it, which is why this is not clap: clap has no single-dash
//! long options.

use crate::hosts::{self, HostSpec};
use std::ffi::OsString;
use std::time::Duration;

/// The help text printed by `ebrun --help`.
pub(crate) const HELP: &str = "\
ebrun - start an earlybird MPI job of N ranks on this host or on several

USAGE:
    ebrun -n N [--timeout SECONDS] [--tag-output] PROGRAM [ARGS...]
    ebrun [-n N] --hosts H1[:SLOTS],H2,... [--launcher-exec CMD] [...] PROGRAM [ARGS...]

Starts N processes of PROGRAM, ranks 0 to N-1, that share one job segment in /dev/shm
(created and unlinked at once, so nothing of the job is ever left there), forwards their
output, and exits with the job's status. Everything after PROGRAM is passed to PROGRAM.

With --hosts, ebrun starts one proxy per host through ssh (`ssh HOST ebrun --proxy ...`,
with ebrun at the same path there, a path without spaces), which starts that host's ranks;
ebrun serves them PMI-1 over a TCP port. Ranks on one host share memory; ranks on
different hosts talk through libfabric (libfabric1 must be installed on every host). The
ranks get ebrun's environment over that of the proxy on their host (less the variables
that describe ebrun's host, and any launcher's own) and start in ebrun's directory.

OPTIONS:
    -n, -np, --np N        number of ranks (at least 1; required unless every --hosts
                           entry has :SLOTS)
    --timeout SECONDS      end the job after SECONDS (fractions allowed) and print, for
                           each rank, what it was blocked in (across hosts: the ranks
                           still running, and where); exit status 124
    --tag-output           prefix every line a rank writes with \"[rank] \"
    --hosts LIST           run across the hosts of LIST (names or IPv4 addresses, comma
                           separated): without SLOTS the ranks are spread in even blocks
                           (0..k on the first host, ...); with HOST:SLOTS each host takes
                           its slots in turn, round the list again if N is larger, and N
                           defaults to the sum of the slots
    --launcher-exec CMD    reach the hosts with `CMD HOST COMMAND...` instead of ssh (CMD
                           is one executable; a script can add options)
    -h, --help             print this help
    -V, --version          print the version
    --                     end of ebrun's options (for a PROGRAM that starts with '-')

FAILURES:
    When a rank exits non-zero, is killed by a signal, or exits without calling finalize,
    ebrun prints which rank failed and how, aborts the job (every rank's waits return an
    error), ends the other ranks within a second (SIGTERM, then SIGKILL) and exits with the
    failing rank's status (128+N for signal N, 1 for a missing finalize). SIGINT, SIGTERM
    and SIGHUP sent to ebrun are forwarded to the ranks and end the job the same way
    (status 128+N). If ebrun itself is killed, even by SIGKILL, the ranks are killed too.
    A program that never initialises earlybird (e.g. `ebrun -n 4 hostname`) may exit 0
    without finalizing.
    Across hosts, also: a host is lost when its proxy's connection ends or it is silent
    for 3 s (a host down, a link down); ebrun names the host and its ranks, ends the job
    on the others and exits 255 (also when a host cannot be reached). A proxy that stops
    hearing ebrun for 3 s ends its ranks. A timeout names the ranks still running.

ENVIRONMENT:
    EARLYBIRD_SHM_DIR      directory (a tmpfs) for the job segment; default /dev/shm
    MPIEXEC_TIMEOUT        SECONDS, as --timeout when that is not given (the variable
                           Hydra's mpiexec and MPICH's test runner use)
    Each rank gets EARLYBIRD_RANK, EARLYBIRD_SIZE, EARLYBIRD_SEGMENT_FD and
    EARLYBIRD_LAUNCHER_PID. Standard input goes to rank 0; the others read /dev/null.

EXIT STATUS:
    0 all ranks finalized and exited 0; 124 timeout; 126/127 PROGRAM could not be started;
    1 ebrun's own errors (bad arguments, no room for the job segment); otherwise the
    failing rank's status as above.
";

/// What the user asked for.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Options {
    pub nranks: u32,
    pub timeout: Option<Duration>,
    pub tag_output: bool,
    pub program: OsString,
    pub args: Vec<OsString>,
    /// `--hosts`: a job across these hosts.
    pub hosts: Option<Vec<HostSpec>>,
    pub launcher_exec: Option<OsString>,
}

/// The outcome of parsing.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Command {
    Run(Options),
    /// `ebrun --proxy ADDR COOKIE HOST`, as ebrun starts it on each host.
    Proxy {
        addr: String,
        cookie: String,
        host: u32,
    },
    Help,
    Version,
}

/// Largest job ebrun will try to start (the segment grows with the square of N).
pub(crate) const MAX_RANKS: u32 = 4096;

/// Parse the arguments after the program name. `Err` carries a one-line message.
pub(crate) fn parse<I: IntoIterator<Item = OsString>>(args: I) -> Result<Command, String> {
    let mut it = args.into_iter().peekable();
    if it.peek().is_some_and(|a| a == "--proxy") {
        it.next();
        let mut word = || it.next().map(|a| a.to_string_lossy().into_owned());
        return match (word(), word(), word().and_then(|h| h.parse().ok())) {
            (Some(addr), Some(cookie), Some(host)) => Ok(Command::Proxy { addr, cookie, host }),
            _ => Err("--proxy ADDR COOKIE HOST is how ebrun starts itself on a host".into()),
        };
    }
    let mut nranks: Option<u32> = None;
    let mut host_list: Option<Vec<HostSpec>> = None;
    let mut launcher_exec: Option<OsString> = None;
    let mut timeout: Option<Duration> = None;
    let mut tag_output = false;
    let program = loop {
        let Some(arg) = it.next() else {
            return Err("no PROGRAM given (usage: ebrun -n N [--hosts LIST] [--timeout SECONDS] [--tag-output] PROGRAM [ARGS...])".into());
        };
        // A non-UTF-8 argument cannot be one of our options: it is PROGRAM.
        let Some(s) = arg.to_str() else { break arg };
        if !s.starts_with('-') || s == "-" {
            break arg;
        }
        if s == "--" {
            match it.next() {
                Some(p) => break p,
                None => return Err("no PROGRAM after '--'".into()),
            }
        }
        // Split `--opt=value` / `-n=value`; `-n4` is also accepted.
        let (name, inline) = match s.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (s, None),
        };
        let mut value = |what: &str| -> Result<String, String> {
            match inline.clone() {
                Some(v) => Ok(v),
                None => it
                    .next()
                    .map(|v| v.to_string_lossy().into_owned())
                    .ok_or_else(|| format!("{what} needs a value")),
            }
        };
        match name {
            "-h" | "--help" => return Ok(Command::Help),
            "-V" | "--version" => return Ok(Command::Version),
            "-n" | "-np" | "--np" => {
                let v = value(name)?;
                nranks = Some(parse_nranks(name, &v)?);
            }
            "--timeout" => {
                let v = value(name)?;
                timeout = Some(parse_timeout(&v)?);
            }
            "--hosts" => {
                let v = value(name)?;
                host_list = Some(hosts::parse(&v)?);
            }
            "--launcher-exec" => {
                launcher_exec = Some(value(name)?.into());
            }
            "--tag-output" => {
                if inline.is_some() {
                    return Err("--tag-output takes no value".into());
                }
                tag_output = true;
            }
            _ => {
                if let Some(digits) = name
                    .strip_prefix("-n")
                    .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
                {
                    nranks = Some(parse_nranks("-n", digits)?);
                } else {
                    return Err(format!(
                        "unknown option {s:?} (see ebrun --help; options go before PROGRAM)"
                    ));
                }
            }
        }
    };
    let nranks = nranks
        .or_else(|| host_list.as_deref().and_then(hosts::slot_total))
        .ok_or("the number of ranks is required: ebrun -n N PROGRAM [ARGS...]")?;
    if launcher_exec.is_some() && host_list.is_none() {
        return Err("--launcher-exec goes with --hosts".into());
    }
    if nranks > MAX_RANKS {
        return Err(format!(
            "the slots add up to {nranks} ranks; at most {MAX_RANKS}"
        ));
    }
    Ok(Command::Run(Options {
        nranks,
        timeout,
        tag_output,
        program,
        args: it.collect(),
        hosts: host_list,
        launcher_exec,
    }))
}

/// `MPIEXEC_TIMEOUT` as the timeout when the command line gave none.
pub(crate) fn timeout_from_env(opts: &mut Options) -> Result<(), String> {
    if opts.timeout.is_none() {
        if let Some(v) = std::env::var_os("MPIEXEC_TIMEOUT") {
            let v = v.to_string_lossy();
            opts.timeout = Some(parse_timeout(&v).map_err(|e| format!("MPIEXEC_TIMEOUT: {e}"))?);
        }
    }
    Ok(())
}

fn parse_nranks(opt: &str, v: &str) -> Result<u32, String> {
    match v.trim().parse::<u32>() {
        Ok(n) if (1..=MAX_RANKS).contains(&n) => Ok(n),
        _ => Err(format!(
            "{opt} wants a number of ranks from 1 to {MAX_RANKS}, not {v:?}"
        )),
    }
}

fn parse_timeout(v: &str) -> Result<Duration, String> {
    match v.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 && s < 1e9 => Ok(Duration::from_secs_f64(s)),
        _ => Err(format!(
            "--timeout wants a positive number of seconds, not {v:?}"
        )),
    }
}

/// A timeout as the user would write it: `2`, `0.5`.
pub(crate) fn seconds(d: Duration) -> String {
    format!("{}", d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<Command, String> {
        parse(args.iter().map(OsString::from))
    }

    fn run(args: &[&str]) -> Options {
        match p(args) {
            Ok(Command::Run(o)) => o,
            other => panic!("{args:?} parsed as {other:?}"),
        }
    }

    #[test]
    fn np_and_n_forms() {
        for args in [
            &["-n", "4", "prog"][..],
            &["-np", "4", "prog"],
            &["--np", "4", "prog"],
            &["-n=4", "prog"],
            &["-np=4", "prog"],
            &["-n4", "prog"],
        ] {
            let o = run(args);
            assert_eq!(o.nranks, 4, "{args:?}");
            assert_eq!(o.program, "prog");
            assert!(o.args.is_empty());
        }
    }

    #[test]
    fn everything_after_program_is_the_programs() {
        let o = run(&[
            "--tag-output",
            "-np",
            "2",
            "--timeout",
            "1.5",
            "prog",
            "-n",
            "5",
            "--timeout",
            "x",
            "--",
            "--help",
        ]);
        assert_eq!(o.nranks, 2);
        assert!(o.tag_output);
        assert_eq!(o.timeout, Some(Duration::from_millis(1500)));
        assert_eq!(o.program, "prog");
        assert_eq!(
            o.args,
            ["-n", "5", "--timeout", "x", "--", "--help"].map(OsString::from)
        );
    }

    #[test]
    fn double_dash_ends_options() {
        let o = run(&["-n", "1", "--", "-weird", "a"]);
        assert_eq!(o.program, "-weird");
        assert_eq!(o.args, [OsString::from("a")]);
    }

    #[test]
    fn errors_name_the_bad_value() {
        assert!(p(&["prog"])
            .unwrap_err()
            .contains("number of ranks is required"));
        assert!(p(&["-n", "0", "prog"]).unwrap_err().contains("\"0\""));
        assert!(p(&["-n", "x", "prog"]).unwrap_err().contains("\"x\""));
        assert!(p(&["-n", "2"]).unwrap_err().contains("no PROGRAM"));
        assert!(p(&["-n"]).unwrap_err().contains("needs a value"));
        assert!(p(&["-n", "2", "--timeout", "-1", "prog"])
            .unwrap_err()
            .contains("\"-1\""));
        assert!(p(&["-n", "2", "--timeout", "soon", "prog"])
            .unwrap_err()
            .contains("\"soon\""));
        assert!(p(&["--bogus", "prog"]).unwrap_err().contains("--bogus"));
    }

    #[test]
    fn hosts_and_the_proxy() {
        let o = run(&["--hosts", "a:2,b:3", "--launcher-exec", "./x.sh", "prog"]);
        assert_eq!(o.nranks, 5);
        assert_eq!(o.hosts.as_ref().map(Vec::len), Some(2));
        assert_eq!(o.launcher_exec, Some("./x.sh".into()));
        let o = run(&["-n", "3", "--hosts=a,b", "prog"]);
        assert_eq!(o.nranks, 3);
        assert!(p(&["--hosts", "a,b", "prog"])
            .unwrap_err()
            .contains("number of ranks"));
        assert!(p(&["--hosts", "a:0", "prog"])
            .unwrap_err()
            .contains("\"0\""));
        assert!(p(&["-n", "2", "--launcher-exec", "x", "prog"])
            .unwrap_err()
            .contains("--hosts"));
        assert_eq!(
            p(&["--proxy", "1.2.3.4:5", "c0ffee", "2"]),
            Ok(Command::Proxy {
                addr: "1.2.3.4:5".into(),
                cookie: "c0ffee".into(),
                host: 2
            })
        );
        assert!(p(&["--proxy", "x"]).is_err());
    }

    #[test]
    fn help_and_version() {
        assert_eq!(p(&["--help"]), Ok(Command::Help));
        assert_eq!(p(&["-n", "2", "-h"]), Ok(Command::Help));
        assert_eq!(p(&["-V"]), Ok(Command::Version));
        // --help after PROGRAM is the program's.
        assert!(matches!(
            p(&["-n", "2", "prog", "--help"]),
            Ok(Command::Run(_))
        ));
    }

    #[test]
    fn seconds_prints_like_the_user_wrote() {
        assert_eq!(seconds(Duration::from_secs(2)), "2");
        assert_eq!(seconds(Duration::from_millis(500)), "0.5");
    }
}
