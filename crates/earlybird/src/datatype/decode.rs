//! What a datatype was made of (MPI 4.1 §5.1.13, MPI_Type_get_envelope and
//! MPI_Type_get_contents): every derived type keeps the constructor call that made it, with
//! its arguments, so that a library given a datatype can take it apart.
//!
//! [`Datatype::envelope`] says which constructor (the combiner) and how many integers,
//! addresses and datatypes its arguments are, as MPI's table counts them;
//! [`Datatype::contents`] returns those arguments as a [`Combiner`], and
//! [`Contents::from`] flattens one into MPI's three arrays in MPI's order (for a C binding).
//! The datatypes inside are handles on the types the constructor was given (a predefined
//! type is itself).
#![forbid(unsafe_code)]

use super::constructors::Order;
use super::{BasicType, Datatype};
use crate::error::{Error, ErrorClass, Result};

/// How an array is distributed over one dimension of a process grid (MPI_Type_create_darray).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Distribution {
    /// Blocks of `darg` consecutive elements, one per process (MPI_DISTRIBUTE_BLOCK); `None`:
    /// the default block size, ceil(size / processes) (MPI_DISTRIBUTE_DFLT_DARG).
    Block(Option<usize>),
    /// Blocks of `darg` elements dealt round-robin (MPI_DISTRIBUTE_CYCLIC); `None`: 1.
    Cyclic(Option<usize>),
    /// Not distributed: the dimension's process count must be 1 (MPI_DISTRIBUTE_NONE).
    Undistributed,
}

/// The constructor call that made a datatype, with its arguments.
#[derive(Clone, Debug)]
pub enum Combiner {
    /// A predefined type (MPI_COMBINER_NAMED): it has no contents.
    Named(BasicType),
    Dup(Datatype),
    Contiguous {
        count: usize,
        old: Datatype,
    },
    Vector {
        count: usize,
        blocklength: usize,
        stride: isize,
        old: Datatype,
    },
    Hvector {
        count: usize,
        blocklength: usize,
        stride_bytes: isize,
        old: Datatype,
    },
    Indexed {
        blocklengths: Vec<usize>,
        displacements: Vec<isize>,
        old: Datatype,
    },
    Hindexed {
        blocklengths: Vec<usize>,
        displacements: Vec<isize>,
        old: Datatype,
    },
    IndexedBlock {
        blocklength: usize,
        displacements: Vec<isize>,
        old: Datatype,
    },
    HindexedBlock {
        blocklength: usize,
        displacements: Vec<isize>,
        old: Datatype,
    },
    Struct {
        blocklengths: Vec<usize>,
        displacements: Vec<isize>,
        types: Vec<Datatype>,
    },
    Subarray {
        sizes: Vec<usize>,
        subsizes: Vec<usize>,
        starts: Vec<usize>,
        order: Order,
        old: Datatype,
    },
    Darray {
        size: usize,
        rank: usize,
        gsizes: Vec<usize>,
        distribs: Vec<Distribution>,
        psizes: Vec<usize>,
        order: Order,
        old: Datatype,
    },
    Resized {
        lb: isize,
        extent: isize,
        old: Datatype,
    },
}

/// The kind of constructor (MPI_COMBINER_*), without its arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CombinerKind {
    Named,
    Dup,
    Contiguous,
    Vector,
    Hvector,
    Indexed,
    Hindexed,
    IndexedBlock,
    HindexedBlock,
    Struct,
    Subarray,
    Darray,
    Resized,
}

/// MPI_Type_get_envelope: the combiner and the lengths of the arrays
/// [`Datatype::contents`] fills (`integers`, `addresses`, `datatypes`; earlybird's counts fit
/// in integers, so it uses no large-count array).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Envelope {
    pub combiner: CombinerKind,
    pub integers: usize,
    pub addresses: usize,
    pub datatypes: usize,
}

/// MPI_Type_get_contents as MPI's three arrays, in the order MPI 4.1 §5.1.13 gives for each
/// combiner. Orders and distributions are encoded as in [`Contents::ORDER_C`] and its
/// neighbours.
#[derive(Clone, Debug)]
pub struct Contents {
    pub integers: Vec<i64>,
    pub addresses: Vec<isize>,
    pub datatypes: Vec<Datatype>,
}

impl Contents {
    /// The integer codes of orders and distributions in `integers` (a C binding maps them
    /// to its own constants).
    pub const ORDER_C: i64 = 0;
    pub const ORDER_FORTRAN: i64 = 1;
    pub const DISTRIBUTE_BLOCK: i64 = 0;
    pub const DISTRIBUTE_CYCLIC: i64 = 1;
    pub const DISTRIBUTE_NONE: i64 = 2;
    /// MPI_DISTRIBUTE_DFLT_DARG.
    pub const DFLT_DARG: i64 = -1;
}

fn ints(v: &[usize]) -> impl Iterator<Item = i64> + '_ {
    v.iter().map(|&x| x as i64)
}

fn order_code(o: Order) -> i64 {
    match o {
        Order::C => Contents::ORDER_C,
        Order::Fortran => Contents::ORDER_FORTRAN,
    }
}

impl From<&Combiner> for Contents {
    fn from(c: &Combiner) -> Contents {
        let (mut i, mut a, mut d) = (Vec::new(), Vec::new(), Vec::new());
        match c {
            Combiner::Named(_) => {}
            Combiner::Dup(old) => d.push(old.clone()),
            Combiner::Contiguous { count, old } => {
                i.push(*count as i64);
                d.push(old.clone());
            }
            Combiner::Vector {
                count,
                blocklength,
                stride,
                old,
            } => {
                i.extend([*count as i64, *blocklength as i64, *stride as i64]);
                d.push(old.clone());
            }
            Combiner::Hvector {
                count,
                blocklength,
                stride_bytes,
                old,
            } => {
                i.extend([*count as i64, *blocklength as i64]);
                a.push(*stride_bytes);
                d.push(old.clone());
            }
            Combiner::Indexed {
                blocklengths,
                displacements,
                old,
            } => {
                i.push(blocklengths.len() as i64);
                i.extend(ints(blocklengths));
                i.extend(displacements.iter().map(|&x| x as i64));
                d.push(old.clone());
            }
            Combiner::Hindexed {
                blocklengths,
                displacements,
                old,
            } => {
                i.push(blocklengths.len() as i64);
                i.extend(ints(blocklengths));
                a.extend(displacements);
                d.push(old.clone());
            }
            Combiner::IndexedBlock {
                blocklength,
                displacements,
                old,
            } => {
                i.extend([displacements.len() as i64, *blocklength as i64]);
                i.extend(displacements.iter().map(|&x| x as i64));
                d.push(old.clone());
            }
            Combiner::HindexedBlock {
                blocklength,
                displacements,
                old,
            } => {
                i.extend([displacements.len() as i64, *blocklength as i64]);
                a.extend(displacements);
                d.push(old.clone());
            }
            Combiner::Struct {
                blocklengths,
                displacements,
                types,
            } => {
                i.push(blocklengths.len() as i64);
                i.extend(ints(blocklengths));
                a.extend(displacements);
                d.extend(types.iter().cloned());
            }
            Combiner::Subarray {
                sizes,
                subsizes,
                starts,
                order,
                old,
            } => {
                i.push(sizes.len() as i64);
                i.extend(ints(sizes));
                i.extend(ints(subsizes));
                i.extend(ints(starts));
                i.push(order_code(*order));
                d.push(old.clone());
            }
            Combiner::Darray {
                size,
                rank,
                gsizes,
                distribs,
                psizes,
                order,
                old,
            } => {
                i.extend([*size as i64, *rank as i64, gsizes.len() as i64]);
                i.extend(ints(gsizes));
                i.extend(distribs.iter().map(|d| match d {
                    Distribution::Block(_) => Contents::DISTRIBUTE_BLOCK,
                    Distribution::Cyclic(_) => Contents::DISTRIBUTE_CYCLIC,
                    Distribution::Undistributed => Contents::DISTRIBUTE_NONE,
                }));
                i.extend(distribs.iter().map(|d| match d {
                    Distribution::Block(Some(n)) | Distribution::Cyclic(Some(n)) => *n as i64,
                    _ => Contents::DFLT_DARG,
                }));
                i.extend(ints(psizes));
                i.push(order_code(*order));
                d.push(old.clone());
            }
            Combiner::Resized { lb, extent, old } => {
                a.extend([*lb, *extent]);
                d.push(old.clone());
            }
        }
        Contents {
            integers: i,
            addresses: a,
            datatypes: d,
        }
    }
}

impl Combiner {
    /// The kind of constructor.
    pub fn kind(&self) -> CombinerKind {
        match self {
            Combiner::Named(_) => CombinerKind::Named,
            Combiner::Dup(_) => CombinerKind::Dup,
            Combiner::Contiguous { .. } => CombinerKind::Contiguous,
            Combiner::Vector { .. } => CombinerKind::Vector,
            Combiner::Hvector { .. } => CombinerKind::Hvector,
            Combiner::Indexed { .. } => CombinerKind::Indexed,
            Combiner::Hindexed { .. } => CombinerKind::Hindexed,
            Combiner::IndexedBlock { .. } => CombinerKind::IndexedBlock,
            Combiner::HindexedBlock { .. } => CombinerKind::HindexedBlock,
            Combiner::Struct { .. } => CombinerKind::Struct,
            Combiner::Subarray { .. } => CombinerKind::Subarray,
            Combiner::Darray { .. } => CombinerKind::Darray,
            Combiner::Resized { .. } => CombinerKind::Resized,
        }
    }
}

impl Datatype {
    /// The constructor call that made this type (a predefined type: [`Combiner::Named`]).
    pub fn combiner(&self) -> Combiner {
        match (self.0.basic, &self.0.combiner) {
            (Some(b), _) => Combiner::Named(b),
            (None, Some(c)) => (**c).clone(),
            (None, None) => unreachable!("every derived type records its constructor"),
        }
    }

    /// MPI_Type_get_envelope.
    pub fn envelope(&self) -> Envelope {
        let c = self.combiner();
        let n = Contents::from(&c);
        Envelope {
            combiner: c.kind(),
            integers: n.integers.len(),
            addresses: n.addresses.len(),
            datatypes: n.datatypes.len(),
        }
    }

    /// MPI_Type_get_contents: the constructor's arguments. MPI_ERR_ARG for a predefined type,
    /// which has none.
    pub fn contents(&self) -> Result<Combiner> {
        match self.combiner() {
            Combiner::Named(b) => Err(Error::new(
                ErrorClass::Arg,
                format!(
                    "type_get_contents of {}, a predefined type (its combiner is MPI_COMBINER_NAMED)",
                    b.mpi_name()
                ),
            )),
            c => Ok(c),
        }
    }

    /// Record the constructor that made this new type.
    pub(super) fn made_by(mut self, c: Combiner) -> Datatype {
        std::rc::Rc::get_mut(&mut self.0)
            .expect("a type just built has one handle")
            .combiner = Some(std::rc::Rc::new(c));
        self
    }
}
