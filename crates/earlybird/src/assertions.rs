//! Assertions: promises a program makes that it does not rely on some of MPI's costlier
//! guarantees, so the library may take faster paths (seed 002, "init-time assertions"; MPI 4.1
//! §7.4.4 adopted four of them as communicator info keys).
//!
//! A program gives them at init ([`init_with_assertions`](crate::init_with_assertions), or the
//! environment variable `EARLYBIRD_ASSERTIONS` for a program that cannot be changed), where they
//! hold for every communicator, or per communicator through the MPI 4 info keys
//! (`mpi_assert_no_any_source`, `mpi_assert_no_any_tag`, `mpi_assert_exact_length`,
//! `mpi_assert_allow_overtaking`, `mpi_assert_strict_persistent_collective_ordering`, each
//! `"true"` to assert) on `Comm::set_info`, `dup_with_info`, `idup_with_info` and
//! `split_type` (`dup` keeps them; `split`, `create` and `create_group` take no info). A
//! communicator's assertions are the init-time ones plus its own keys: a key set to
//! `"false"` cannot take back a promise made at init. They hold on the communicator's
//! point-to-point traffic only, never on the library's own messages.
//!
//! As the seed says, giving no assertion is always valid and a library may ignore any of them:
//! a program that keeps its promises gets the same results with and without them. What
//! earlybird does with each, what it checks, and what it cannot check:
//!
//! | assertion | fast path | a broken promise |
//! |---|---|---|
//! | [`NO_SEND_CANCELS`](Assertions::NO_SEND_CANCELS) | none needed: an eager send completes at its start and carries no message id; a rendezvous send is named by the operation id its request-to-send carries anyway for the FIN | `cancel` of a send request: MPIX_ERR_ASSERTION |
//! | [`NO_ANY_SOURCE`](Assertions::NO_ANY_SOURCE) | matching by source: arriving messages and posted receives meet in per-(communicator, source) queues, so a message never scans receives for other sources. The receiver-initiated protocol the seed suggests is not built: on one host a large message already moves with one copy, and the handshake it would save is 0.3% of a 1 MiB transfer | a receive or probe from ANY_SOURCE: MPIX_ERR_ASSERTION |
//! | [`NO_ANY_TAG`](Assertions::NO_ANY_TAG) | matching by tag: per-(communicator, tag) queues (per (source, tag) with NO_ANY_SOURCE), so a deep queue of receives for other tags costs nothing. A lookup costs a few nanoseconds more than the general queue's front when queues are short | a receive or probe with ANY_TAG: MPIX_ERR_ASSERTION |
//! | [`NO_EAGER_THROTTLE`](Assertions::NO_EAGER_THROTTLE) | no flow control for messages of at most 4 KiB: they go eager whatever the receiver holds unexpected, instead of by rendezvous once 1 MiB (`EARLYBIRD_FLOW_LIMIT`) is outstanding. Larger ones past the limit still go by rendezvous, whose single copy beats eager's three from about 4 KiB on | not detectable: the receiver's memory grows with what it holds unexpected |
//! | [`EXACT_LENGTH`](Assertions::EXACT_LENGTH) | none: the length check is one compare that every receive makes anyway | a message shorter than its receive buffer: MPIX_ERR_ASSERTION in the receive's status (longer ones are MPI_ERR_TRUNCATE, as always) |
//! | [`NO_MIXED_REQUESTS`](Assertions::NO_MIXED_REQUESTS) | none: the wait family dispatches point-to-point requests without a virtual call whatever the array holds | a wait/test on an array mixing kinds of requests: MPIX_ERR_ASSERTION |
//! | [`NO_RMA`](Assertions::NO_RMA) | none: windows on one host are passive memory and cost progress nothing | creating a window: MPIX_ERR_ASSERTION |
//! | [`PERSISTENT_ONLY`](Assertions::PERSISTENT_ONLY) | not yet: binding a send_init/recv_init pair as a channel at first start (seed 000) is not built | a persistent send matched by a nonpersistent receive or the reverse: MPIX_ERR_ASSERTION in the receive's status |
//! | [`NO_REDUCE_CONSTRAINT`](Assertions::NO_REDUCE_CONSTRAINT) | allreduce of small vectors on a number of ranks that is not a power of two folds pairs first and runs recursive doubling (`log2 p + 2` rounds instead of reduce-then-bcast's `2 ceil(log2 n)`), outside the canonical association every other algorithm keeps. On 2 ranks (or any power of two) there is nothing to gain: every association is already the fastest one. The parallel shared-memory reduction is not built | not detectable (it is about results) |
//! | [`NO_DATATYPE_XLATE`](Assertions::NO_DATATYPE_XLATE) | none needed: a job runs on one host with one data representation, a datatype is kept as byte blocks merged at commit (a gap-free struct, or a vector of them, already moves as plain bytes), and the signature check is one 16-bit compare | nothing to detect: earlybird never translates data implicitly (`pack_external` is an explicit request) |
//! | [`NO_DYNAMIC_PROCESSES`](Assertions::NO_DYNAMIC_PROCESSES) | none needed: earlybird has no dynamic processes, so its matching and progress never plan for new connections | nothing to detect: the C ABI's spawn and connect calls return MPI_ERR_UNSUPPORTED_OPERATION either way |
//! | [`ALLOW_OVERTAKING`](Assertions::ALLOW_OVERTAKING) | none: messages between two endpoints share one ordered ring, so order costs nothing to keep | not detectable (the program cannot tell order from luck) |
//! | [`STRICT_PERSISTENT_COLLECTIVE_ORDERING`](Assertions::STRICT_PERSISTENT_COLLECTIVE_ORDERING) | none: each persistent collective gets its own matching space at init, so starts in any order cost the same | not detected, and harmless: starts in different orders still complete |
#![forbid(unsafe_code)]

use crate::error::{Error, ErrorClass, Result};
use crate::info::Info;

bitflags::bitflags! {
    /// A set of assertions (seed 002's `int assertions`, with its values for the five it
    /// names). See the [module documentation](self) for what each allows and how a broken
    /// promise is reported.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
    pub struct Assertions: u32 {
        /// The program never cancels a send (seed 002 item 1).
        const NO_SEND_CANCELS = 0x1;
        /// No receive or probe uses ANY_SOURCE (seed 002 item 5; `mpi_assert_no_any_source`).
        const NO_ANY_SOURCE = 0x2;
        /// Reductions need not combine in the same order every time (seed 002 item 3).
        const NO_REDUCE_CONSTRAINT = 0x4;
        /// Data never needs translating between representations (seed 002 item 2).
        const NO_DATATYPE_XLATE = 0x10;
        /// The program paces its eager sends itself (seed 002 item 7).
        const NO_EAGER_THROTTLE = 0x20;
        /// Persistent sends are matched only by persistent receives and the reverse (seed 002
        /// item 4).
        const PERSISTENT_ONLY = 0x40;
        /// No spawn, connect, accept or join (seed 002 item 6).
        const NO_DYNAMIC_PROCESSES = 0x80;
        /// A multiple wait or test never mixes kinds of requests (seed 002 item 8).
        const NO_MIXED_REQUESTS = 0x100;
        /// No one-sided communication (seed 002 item 10).
        const NO_RMA = 0x200;
        /// No receive or probe uses ANY_TAG (`mpi_assert_no_any_tag`).
        const NO_ANY_TAG = 0x400;
        /// Every message fills its receive buffer exactly (`mpi_assert_exact_length`).
        const EXACT_LENGTH = 0x800;
        /// Messages need not match in the order they were sent
        /// (`mpi_assert_allow_overtaking`).
        const ALLOW_OVERTAKING = 0x1000;
        /// Persistent collectives are started in the same order on every process
        /// (`mpi_assert_strict_persistent_collective_ordering`).
        const STRICT_PERSISTENT_COLLECTIVE_ORDERING = 0x2000;
    }
}

/// The communicator info keys that assert, and what each asserts.
pub const INFO_KEYS: [(&str, Assertions); 5] = [
    ("mpi_assert_no_any_tag", Assertions::NO_ANY_TAG),
    ("mpi_assert_no_any_source", Assertions::NO_ANY_SOURCE),
    ("mpi_assert_exact_length", Assertions::EXACT_LENGTH),
    ("mpi_assert_allow_overtaking", Assertions::ALLOW_OVERTAKING),
    (
        "mpi_assert_strict_persistent_collective_ordering",
        Assertions::STRICT_PERSISTENT_COLLECTIVE_ORDERING,
    ),
];

/// The environment variable that adds assertions to a program's init.
pub const ENV: &str = "EARLYBIRD_ASSERTIONS";

impl Assertions {
    /// The assertion named `name`: its constant's name, in any case, with or without an
    /// `MPI_` or `MPIX_` prefix (`NO_ANY_SOURCE`, `mpi_no_any_source`, ...). The seed's own
    /// spelling `NO_EAGER_THROTLE` is accepted too.
    pub fn named(name: &str) -> Option<Assertions> {
        let up = name.trim().to_ascii_uppercase();
        let bare = up
            .strip_prefix("MPIX_")
            .or_else(|| up.strip_prefix("MPI_"))
            .unwrap_or(&up);
        if bare == "NO_EAGER_THROTLE" {
            return Some(Assertions::NO_EAGER_THROTTLE);
        }
        Assertions::from_name(bare).filter(|a| !a.is_empty())
    }

    /// The assertions of a comma-separated list of names (the form of `EARLYBIRD_ASSERTIONS`);
    /// empty items are skipped. MPI_ERR_ARG naming the first unknown name.
    pub fn parse_list(list: &str) -> Result<Assertions> {
        let mut a = Assertions::empty();
        for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            match Assertions::named(item) {
                Some(x) => a |= x,
                None => {
                    let known: Vec<&str> = Assertions::all().iter_names().map(|(n, _)| n).collect();
                    return Err(Error::new(
                        ErrorClass::Arg,
                        format!("unknown assertion {item:?} (known: {})", known.join(", ")),
                    ));
                }
            }
        }
        Ok(a)
    }

    /// The assertions of `EARLYBIRD_ASSERTIONS` (none when it is unset).
    pub fn from_env() -> Result<Assertions> {
        match std::env::var(ENV) {
            Ok(v) => Assertions::parse_list(&v)
                .map_err(|e| Error::new(e.class(), format!("{ENV}: {}", e.detail()))),
            Err(_) => Ok(Assertions::empty()),
        }
    }

    /// The assertions an info object's keys make: each of [`INFO_KEYS`] whose value is
    /// `true` (any other value asserts nothing, as MPI ignores values it does not know).
    pub fn from_info(info: &Info) -> Assertions {
        INFO_KEYS
            .iter()
            .filter(|(k, _)| matches!(info.get(k), Ok(Some(v)) if v.trim().eq_ignore_ascii_case("true")))
            .fold(Assertions::empty(), |a, (_, x)| a | *x)
    }

    /// The names of the assertions in the set, comma-separated (the form
    /// `EARLYBIRD_ASSERTIONS` takes).
    pub fn names(self) -> String {
        self.iter_names()
            .map(|(n, _)| n)
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// The error of a broken promise: MPIX_ERR_ASSERTION naming the call and the assertion.
#[cold]
pub(crate) fn broken(call: &str, a: Assertions, what: &str) -> Error {
    Error::new(
        ErrorClass::Assertion,
        format!("{call}: {what}, but {} was asserted", a.names()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_in_any_spelling() {
        for (n, a) in Assertions::all().iter_names() {
            assert_eq!(Assertions::named(n), Some(a));
            assert_eq!(
                Assertions::named(&format!("mpi_{}", n.to_lowercase())),
                Some(a)
            );
            assert_eq!(Assertions::named(&format!("MPIX_{n}")), Some(a));
        }
        assert_eq!(
            Assertions::named("MPI_NO_EAGER_THROTLE"),
            Some(Assertions::NO_EAGER_THROTTLE)
        );
        assert_eq!(Assertions::named("NO_SUCH"), None);
        let a = Assertions::NO_ANY_SOURCE | Assertions::EXACT_LENGTH;
        assert_eq!(Assertions::parse_list(&a.names()).unwrap(), a);
    }

    #[test]
    fn seed_values_are_kept() {
        assert_eq!(Assertions::NO_SEND_CANCELS.bits(), 0x1);
        assert_eq!(Assertions::NO_ANY_SOURCE.bits(), 0x2);
        assert_eq!(Assertions::NO_REDUCE_CONSTRAINT.bits(), 0x4);
        assert_eq!(Assertions::NO_DATATYPE_XLATE.bits(), 0x10);
        assert_eq!(Assertions::NO_EAGER_THROTTLE.bits(), 0x20);
    }

    #[test]
    fn a_list_with_an_unknown_name_is_an_error_naming_it() {
        let e = Assertions::parse_list("no_any_source, no_any_sauce").unwrap_err();
        assert_eq!(e.class(), ErrorClass::Arg);
        assert!(e.to_string().contains("no_any_sauce"), "{e}");
        assert_eq!(Assertions::parse_list(" , ").unwrap(), Assertions::empty());
    }

    #[test]
    fn info_keys_assert_only_when_true() {
        let mut i = Info::new();
        i.set("mpi_assert_no_any_tag", "true").unwrap();
        i.set("mpi_assert_no_any_source", "false").unwrap();
        i.set("mpi_assert_exact_length", "yes").unwrap();
        i.set("mpi_assert_allow_overtaking", " TRUE ").unwrap();
        assert_eq!(
            Assertions::from_info(&i),
            Assertions::NO_ANY_TAG | Assertions::ALLOW_OVERTAKING
        );
    }
}
