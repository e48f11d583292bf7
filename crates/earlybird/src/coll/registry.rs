//! The algorithm registry: every collective algorithm with what it requires, the default
//! choice by message size and rank count, and forcing one for tests and benchmarks.
//!
//! Forcing: the environment variable `EARLYBIRD_COLL_<COLLECTIVE>` (upper case, e.g.
//! `EARLYBIRD_COLL_ALLREDUCE=recursive_doubling`), read once per process, or the info hint
//! `earlybird_coll_<collective>` on a communicator (set_info, dup_with_info), which wins.
//! A forced algorithm whose restrictions a call does not meet (a power-of-two algorithm on
//! six ranks, say) is passed over for the default, so one setting can serve a whole test
//! suite; [`last_algorithm`] tells which one ran. An unknown name is an error
//! (MPI_ERR_ARG) at the first collective of that kind.
#![forbid(unsafe_code)]

use super::sched::Sink;
use super::{Args, Coll};
use crate::error::{Error, ErrorClass, Result};
use std::cell::Cell;
use std::sync::OnceLock;

/// One collective algorithm.
pub(crate) struct Algorithm {
    pub(crate) coll: Coll,
    /// Its name, as forcing spells it.
    pub(crate) name: &'static str,
    /// What it requires, in words (for [`algorithms`]).
    pub(crate) restrictions: &'static str,
    /// Whether it can run this call.
    pub(crate) fits: fn(&Args) -> bool,
    /// Emit the call's steps.
    pub(crate) run: fn(&Args, &mut dyn Sink),
}

/// Every algorithm, by collective; the first that fits is the fallback of last resort.
static ALGORITHMS: &[&Algorithm] = super::algo::ALL;

/// The intercommunicator algorithms, one per collective: not listed by [`algorithms`] and
/// not forced (there is no choice to make), named `inter_linear` by [`last_algorithm`].
static INTER: &[&Algorithm] = super::algo::INTER;

/// What [`algorithms`] reports of one algorithm.
#[derive(Clone, Debug)]
pub struct AlgorithmInfo {
    pub coll: Coll,
    pub name: &'static str,
    pub restrictions: &'static str,
}

/// Every collective algorithm earlybird has, with its restrictions.
pub fn algorithms() -> Vec<AlgorithmInfo> {
    ALGORITHMS
        .iter()
        .map(|a| AlgorithmInfo {
            coll: a.coll,
            name: a.name,
            restrictions: a.restrictions,
        })
        .collect()
}

thread_local! {
    static LAST: Cell<&'static str> = const { Cell::new("") };
}

/// The algorithm the calling thread's last collective call ran (recorded when the call is
/// made; for tests and benchmarks).
pub fn last_algorithm() -> &'static str {
    LAST.with(|l| l.get())
}

/// Record `name` as the algorithm the calling thread's collective ran.
pub(crate) fn note_last(name: &'static str) {
    LAST.with(|l| l.set(name));
}

fn find(coll: Coll, name: &str) -> Option<&'static Algorithm> {
    ALGORITHMS
        .iter()
        .copied()
        .find(|a| a.coll == coll && a.name == name)
}

/// Algorithms forced for one communicator, by collective.
#[derive(Debug, Default)]
pub(crate) struct Forced {
    by_coll: [Option<&'static str>; Coll::ALL.len()],
    /// An unknown name, reported at the first collective of its kind.
    bad: [Option<String>; Coll::ALL.len()],
}

impl std::fmt::Debug for Algorithm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.coll.name(), self.name)
    }
}

/// The environment's forcing, read once per process.
fn from_env() -> &'static [(Coll, String)] {
    static ENV: OnceLock<Vec<(Coll, String)>> = OnceLock::new();
    ENV.get_or_init(|| {
        Coll::ALL
            .iter()
            .filter_map(|&c| {
                let k = format!("EARLYBIRD_COLL_{}", c.name().to_uppercase());
                std::env::var(k).ok().map(|v| (c, v.trim().to_string()))
            })
            .collect()
    })
}

impl Forced {
    /// The forcing for a communicator with info hints `info`.
    pub(crate) fn new(info: &crate::info::Info) -> Forced {
        let mut f = Forced::default();
        let mut set = |c: Coll, name: &str| {
            let i = c.index();
            match find(c, name) {
                Some(a) => {
                    f.by_coll[i] = Some(a.name);
                    f.bad[i] = None;
                }
                None => f.bad[i] = Some(name.to_string()),
            }
        };
        for (c, name) in from_env() {
            set(*c, name);
        }
        for &c in Coll::ALL.iter() {
            if let Ok(Some(v)) = info.get(&format!("earlybird_coll_{}", c.name())) {
                set(c, v.trim());
            }
        }
        f
    }

    /// Whether a call of `coll` may run algorithm `name` by default: nothing else (and no
    /// unknown name) is forced for it.
    #[inline]
    pub(crate) fn allows(&self, coll: Coll, name: &str) -> bool {
        let i = coll.index();
        self.bad[i].is_none() && self.by_coll[i].is_none_or(|n| n == name)
    }
}

/// The algorithm for `args`: the forced one if it fits, else the default.
pub(crate) fn choose(args: &Args, forced: &Forced) -> Result<&'static Algorithm> {
    if args.remote.is_some() {
        let a = INTER
            .iter()
            .copied()
            .find(|a| a.coll == args.coll && (a.fits)(args))
            .ok_or_else(|| {
                Error::new(
                    ErrorClass::Intern,
                    format!("no {} algorithm for intercommunicators", args.coll.name()),
                )
            })?;
        note_last(a.name);
        return Ok(a);
    }
    let i = args.coll.index();
    if let Some(bad) = &forced.bad[i] {
        let known: Vec<&str> = ALGORITHMS
            .iter()
            .filter(|a| a.coll == args.coll)
            .map(|a| a.name)
            .collect();
        return Err(Error::new(
            ErrorClass::Arg,
            format!(
                "no {} algorithm is called {bad:?} (EARLYBIRD_COLL_{} or info earlybird_coll_{}); there are: {}",
                args.coll.name(),
                args.coll.name().to_uppercase(),
                args.coll.name(),
                known.join(", ")
            ),
        ));
    }
    let a = forced.by_coll[i]
        .and_then(|n| find(args.coll, n))
        .filter(|a| (a.fits)(args))
        .or_else(|| default_for(args))
        .ok_or_else(|| {
            Error::new(
                ErrorClass::Intern,
                format!("no {} algorithm fits this call", args.coll.name()),
            )
        })?;
    note_last(a.name);
    Ok(a)
}

/// Every algorithm that can run this call, in registry order.
pub(crate) fn fitting(args: &Args) -> Vec<&'static Algorithm> {
    ALGORITHMS
        .iter()
        .copied()
        .filter(|a| a.coll == args.coll && (a.fits)(args))
        .collect()
}

/// The default choice: the first algorithm named for the call's size class that fits, else
/// the first registered one that fits.
fn default_for(args: &Args) -> Option<&'static Algorithm> {
    let prefer: &[&str] = super::algo::preference(args);
    prefer
        .iter()
        .filter_map(|n| find(args.coll, n))
        .chain(ALGORITHMS.iter().copied().filter(|a| a.coll == args.coll))
        .find(|a| (a.fits)(args))
}
