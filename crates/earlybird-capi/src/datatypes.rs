//! Datatype calls beyond the first part's: the subarray, distributed-array and
//! hindexed-block constructors, the decoders (MPI_Type_get_envelope, MPI_Type_get_contents),
//! element counts, the `_x` queries, MPI_Type_match_size, and the external32 packing calls.

use crate::abi::{self, c, Handle, MpiStatus, MPI_SUCCESS};
use crate::f90_types;
use crate::state::{self, write};
use crate::widths::count as count_of;
use crate::{c_str, len, self_ok};
use earlybird::{Combiner, CombinerKind, Contents, Distribution, Error, ErrorClass, Order};
use std::ffi::{c_char, c_int, c_void};

pub(crate) fn order(o: c_int) -> earlybird::Result<Order> {
    match o {
        c::MPI_ORDER_C => Ok(Order::C),
        c::MPI_ORDER_FORTRAN => Ok(Order::Fortran),
        o => Err(Error::new(
            ErrorClass::Arg,
            format!("order {o} is neither MPI_ORDER_C nor MPI_ORDER_FORTRAN"),
        )),
    }
}

pub(crate) fn distribution(d: c_int, darg: c_int) -> earlybird::Result<Distribution> {
    let arg = if darg == c::MPI_DISTRIBUTE_DFLT_DARG {
        None
    } else {
        Some(len(darg)?)
    };
    match d {
        c::MPI_DISTRIBUTE_BLOCK => Ok(Distribution::Block(arg)),
        c::MPI_DISTRIBUTE_CYCLIC => Ok(Distribution::Cyclic(arg)),
        c::MPI_DISTRIBUTE_NONE => Ok(Distribution::Undistributed),
        d => Err(Error::new(
            ErrorClass::Arg,
            format!("distribution {d} is not one MPI defines"),
        )),
    }
}

fn combiner(k: CombinerKind) -> c_int {
    match k {
        CombinerKind::Named => c::MPI_COMBINER_NAMED,
        CombinerKind::Dup => c::MPI_COMBINER_DUP,
        CombinerKind::Contiguous => c::MPI_COMBINER_CONTIGUOUS,
        CombinerKind::Vector => c::MPI_COMBINER_VECTOR,
        CombinerKind::Hvector => c::MPI_COMBINER_HVECTOR,
        CombinerKind::Indexed => c::MPI_COMBINER_INDEXED,
        CombinerKind::Hindexed => c::MPI_COMBINER_HINDEXED,
        CombinerKind::IndexedBlock => c::MPI_COMBINER_INDEXED_BLOCK,
        CombinerKind::HindexedBlock => c::MPI_COMBINER_HINDEXED_BLOCK,
        CombinerKind::Struct => c::MPI_COMBINER_STRUCT,
        CombinerKind::Subarray => c::MPI_COMBINER_SUBARRAY,
        CombinerKind::Darray => c::MPI_COMBINER_DARRAY,
        CombinerKind::Resized => c::MPI_COMBINER_RESIZED,
    }
}

/// The integers of MPI_Type_get_contents in C's terms: the orders and distributions that
/// earlybird encodes in its own numbers get the ABI's constants.
fn c_integers(c: &Combiner, mut v: Vec<i64>) -> Vec<i64> {
    let order_of = |x: i64| {
        i64::from(if x == Contents::ORDER_FORTRAN {
            c::MPI_ORDER_FORTRAN
        } else {
            c::MPI_ORDER_C
        })
    };
    match c {
        Combiner::Subarray { .. } => {
            if let Some(last) = v.last_mut() {
                *last = order_of(*last);
            }
        }
        Combiner::Darray { .. } => {
            // size, rank, ndims, gsizes[ndims], distribs[ndims], dargs[ndims], psizes[ndims], order
            let nd = v.get(2).copied().unwrap_or(0) as usize;
            for x in v.iter_mut().skip(3 + nd).take(nd) {
                *x = i64::from(match *x {
                    Contents::DISTRIBUTE_BLOCK => c::MPI_DISTRIBUTE_BLOCK,
                    Contents::DISTRIBUTE_CYCLIC => c::MPI_DISTRIBUTE_CYCLIC,
                    _ => c::MPI_DISTRIBUTE_NONE,
                });
            }
            for x in v.iter_mut().skip(3 + 2 * nd).take(nd) {
                if *x == Contents::DFLT_DARG {
                    *x = i64::from(c::MPI_DISTRIBUTE_DFLT_DARG);
                }
            }
            if let Some(last) = v.last_mut() {
                *last = order_of(*last);
            }
        }
        _ => {}
    }
    v
}

/// A datatype's arguments as the decoders give them in C (MPI 4.1 §5.1.13).
pub(crate) struct Decoded {
    combiner: c_int,
    ints: Vec<i64>,
    /// The large-count decoders' `array_of_large_counts`.
    counts: Vec<i64>,
    addrs: Vec<isize>,
    types: Vec<earlybird::Datatype>,
}

/// Decode `dt` for `what`. With `large` (the `_c` decoders): when a value does not fit in an
/// int, the arguments that the type's large-count constructor takes as `MPI_Count` (counts,
/// block lengths, displacements, strides, sizes and starts) are given as large counts, in the
/// order of that constructor's arguments. earlybird does not record which constructor made a
/// type, so one whose values all fit is described as its int constructor would be (no large
/// counts). Without `large`, such a value is MPI_ERR_VALUE_TOO_LARGE (it is never wrapped).
pub(crate) fn decode(what: &str, dt: Handle, large: bool) -> earlybird::Result<Decoded> {
    if let Some((k, ints)) = f90_types::envelope(dt) {
        return Ok(Decoded {
            combiner: k,
            ints: ints.into_iter().map(i64::from).collect(),
            counts: Vec::new(),
            addrs: Vec::new(),
            types: Vec::new(),
        });
    }
    let d = state::type_of(dt)?;
    let kind = d.envelope().combiner;
    if kind == CombinerKind::Named {
        return Ok(Decoded {
            combiner: c::MPI_COMBINER_NAMED,
            ints: Vec::new(),
            counts: Vec::new(),
            addrs: Vec::new(),
            types: Vec::new(),
        });
    }
    let comb = d.contents()?;
    let parts = Contents::from(&comb);
    let ints = c_integers(&comb, parts.integers);
    let combiner = combiner(kind);
    if let Some(&v) = ints.iter().find(|&&v| c_int::try_from(v).is_err()) {
        if !large {
            return Err(Error::new(
                ErrorClass::ValueTooLarge,
                format!("{what}: the datatype's argument {v} does not fit in an int (the _c form of the call gives it)"),
            ));
        }
        let (ints, counts, addrs) = large_form(combiner, ints, parts.addresses);
        return Ok(Decoded {
            combiner,
            ints,
            counts,
            addrs,
            types: parts.datatypes,
        });
    }
    Ok(Decoded {
        combiner,
        ints,
        counts: Vec::new(),
        addrs: parts.addresses,
        types: parts.datatypes,
    })
}

/// The integers and addresses of a combiner as its large-count constructor takes them: the
/// ints that stay ints, the large counts, the addresses.
fn large_form(
    combiner: c_int,
    ints: Vec<i64>,
    addrs: Vec<isize>,
) -> (Vec<i64>, Vec<i64>, Vec<isize>) {
    let at = |i: usize| ints.get(i).map_or(0, |&n| n.max(0) as usize);
    match combiner {
        // ndims, sizes, subsizes, starts, order: the three arrays are MPI_Count.
        c::MPI_COMBINER_SUBARRAY => {
            let n = at(0);
            let counts = ints[1..(1 + 3 * n).min(ints.len())].to_vec();
            let kept = [ints[0], ints.last().copied().unwrap_or(0)].to_vec();
            (kept, counts, addrs)
        }
        // size, rank, ndims, gsizes, distribs, dargs, psizes, order: gsizes is MPI_Count.
        c::MPI_COMBINER_DARRAY => {
            let n = at(2);
            let g = (3 + n).min(ints.len());
            let counts = ints[3.min(g)..g].to_vec();
            let kept = ints[..3.min(g)].iter().chain(&ints[g..]).copied().collect();
            (kept, counts, addrs)
        }
        // Every other constructor's _c form takes all of them as MPI_Count, integers first.
        _ => (
            Vec::new(),
            ints.into_iter()
                .chain(addrs.into_iter().map(|a| a as i64))
                .collect(),
            Vec::new(),
        ),
    }
}

impl Decoded {
    /// The envelope's four lengths: integers, addresses, large counts, datatypes.
    pub(crate) fn lengths(&self) -> [usize; 4] {
        [
            self.ints.len(),
            self.addrs.len(),
            self.counts.len(),
            self.types.len(),
        ]
    }

    pub(crate) fn combiner(&self) -> c_int {
        self.combiner
    }

    /// MPI_Type_get_contents(_c): the arrays out, `max` giving the room in each (integers,
    /// addresses, large counts, datatypes); a derived datatype among the arguments gets a new
    /// handle the program frees, a predefined one is its own handle.
    ///
    /// # Safety
    /// Each array has room for its `max` elements (the large counts' may be null when its
    /// room is 0).
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn write_out(
        &self,
        what: &str,
        dt: Handle,
        max: [i64; 4],
        ints: *mut c_int,
        addrs: *mut isize,
        counts: *mut i64,
        types: *mut Handle,
    ) -> earlybird::Result<()> {
        if self.combiner == c::MPI_COMBINER_NAMED {
            // As the Rust API says it: a named type has no contents.
            return state::type_of(dt)?.contents().map(drop);
        }
        let need = self.lengths();
        if need.iter().zip(max).any(|(&n, m)| n as i64 > m.max(0)) {
            return Err(Error::new(
                ErrorClass::Arg,
                format!(
                    "{what}: the type has {} integers, {} addresses, {} large counts and {} datatypes; room was given for {}, {}, {} and {}",
                    need[0], need[1], need[2], need[3], max[0], max[1], max[2], max[3]
                ),
            ));
        }
        for (i, &x) in self.ints.iter().enumerate() {
            // SAFETY: room for `max[0]` ints (the function's contract), no more written; each
            // fits (see `decode`).
            unsafe { write(ints.wrapping_add(i), x as c_int) };
        }
        for (i, &x) in self.addrs.iter().enumerate() {
            // SAFETY: room for `max[1]` addresses.
            unsafe { write(addrs.wrapping_add(i), x) };
        }
        for (i, &x) in self.counts.iter().enumerate() {
            // SAFETY: room for `max[2]` large counts.
            unsafe { write(counts.wrapping_add(i), x) };
        }
        for (i, t) in self.types.iter().enumerate() {
            let h = match t.combiner() {
                Combiner::Named(b) => abi::basic_handle(b).ok_or_else(|| state::bad_type(dt))?,
                _ => state::add_type(t.clone())?,
            };
            // SAFETY: room for `max[3]` handles.
            unsafe { write(types.wrapping_add(i), h) };
        }
        Ok(())
    }
}

/// A status's byte count.
///
/// # Safety
/// `status` points to an MPI_Status.
unsafe fn status_bytes(what: &str, status: *const MpiStatus) -> earlybird::Result<u64> {
    if status.is_null() || status as usize == abi::STATUS_IGNORE {
        return Err(Error::new(ErrorClass::Arg, format!("{what}: no status")));
    }
    // SAFETY: the function's contract, checked above.
    let s = unsafe { status.read() };
    Ok(s.bytes())
}

/// The elements of `dt` a status counts (MPI_UNDEFINED when not a whole number of them).
///
/// # Safety
/// As [`status_bytes`].
unsafe fn elements(what: &str, status: *const MpiStatus, dt: Handle) -> earlybird::Result<i64> {
    // SAFETY: the function's contract.
    let bytes = unsafe { status_bytes(what, status) }?;
    let d = state::type_of(dt)?;
    Ok(d.elements_in(bytes as usize)
        .map_or(i64::from(abi::UNDEFINED), |n| n as i64))
}

/// The whole elements of `dt` a status counts (MPI_UNDEFINED when not a whole number of
/// them; 0 for a datatype of size 0), as MPI_Get_count gives them.
///
/// # Safety
/// As [`status_bytes`].
pub(crate) unsafe fn whole_count(
    what: &str,
    status: *const MpiStatus,
    dt: Handle,
) -> earlybird::Result<i64> {
    // SAFETY: the function's contract.
    let bytes = unsafe { status_bytes(what, status) }?;
    let size = state::type_of(dt)?.size() as u64;
    Ok(match size {
        0 => 0,
        s if !bytes.is_multiple_of(s) => i64::from(abi::UNDEFINED),
        s => (bytes / s) as i64,
    })
}

/// A count for an `int` out-parameter: MPI_UNDEFINED when it is beyond INT_MAX, as MPI 4.1
/// §5.1.8 says for the queries without `_c`.
pub(crate) fn int_or_undefined(n: i64) -> c_int {
    c_int::try_from(n).unwrap_or(abi::UNDEFINED)
}

mpi! {
    fn MPI_Type_create_f90_real / PMPI_Type_create_f90_real(p: c_int, r: c_int, new: *mut Handle) {
        // SAFETY: a handle to write, checked for null.
        self_ok(f90_types::real(p, r).map(|h| unsafe { write(new, h) }))
    }

    fn MPI_Type_create_f90_complex / PMPI_Type_create_f90_complex(p: c_int, r: c_int, new: *mut Handle) {
        // SAFETY: a handle to write, checked for null.
        self_ok(f90_types::complex(p, r).map(|h| unsafe { write(new, h) }))
    }

    fn MPI_Type_create_f90_integer / PMPI_Type_create_f90_integer(r: c_int, new: *mut Handle) {
        // SAFETY: a handle to write, checked for null.
        self_ok(f90_types::integer(r).map(|h| unsafe { write(new, h) }))
    }

    fn MPI_Type_get_envelope / PMPI_Type_get_envelope(dt: Handle, ni: *mut c_int, na: *mut c_int, nd: *mut c_int, comb: *mut c_int) {
        self_ok(decode("MPI_Type_get_envelope", dt, false).map(|d| {
            // SAFETY: ints to write, checked for null.
            unsafe {
                write(ni, d.ints.len() as c_int);
                write(na, d.addrs.len() as c_int);
                write(nd, d.types.len() as c_int);
                write(comb, d.combiner);
            }
        }))
    }

    fn MPI_Type_get_contents / PMPI_Type_get_contents(dt: Handle, maxi: c_int, maxa: c_int, maxd: c_int, ints: *mut c_int, addrs: *mut isize, types: *mut Handle) {
        // SAFETY: the caller's arrays, of the sizes it gives (MPI's contract).
        self_ok(decode("MPI_Type_get_contents", dt, false).and_then(|d| unsafe {
            d.write_out("MPI_Type_get_contents", dt, [maxi.into(), maxa.into(), 0, maxd.into()], ints, addrs, std::ptr::null_mut(), types)
        }))
    }

    fn MPI_Get_elements / PMPI_Get_elements(status: *const MpiStatus, dt: Handle, count: *mut c_int) {
        // SAFETY: a status to read (MPI's contract).
        let r = unsafe { elements("MPI_Get_elements", status, dt) };
        // SAFETY: an int to write, checked for null.
        self_ok(r.map(|n| unsafe { write(count, int_or_undefined(n)) }))
    }

    fn MPI_Get_elements_x / PMPI_Get_elements_x(status: *const MpiStatus, dt: Handle, count: *mut i64) {
        // SAFETY: a status to read (MPI's contract).
        let r = unsafe { elements("MPI_Get_elements_x", status, dt) };
        // SAFETY: an MPI_Count to write, checked for null.
        self_ok(r.map(|n| unsafe { write(count, n) }))
    }

    fn MPI_Type_size_x / PMPI_Type_size_x(dt: Handle, size: *mut i64) {
        // SAFETY: an MPI_Count to write, checked for null.
        self_ok(state::type_of(dt).map(|d| unsafe { write(size, d.size() as i64) }))
    }

    fn MPI_Type_get_extent_x / PMPI_Type_get_extent_x(dt: Handle, lb: *mut i64, extent: *mut i64) {
        self_ok(state::type_of(dt).map(|d| {
            let (l, e) = d.get_extent();
            // SAFETY: MPI_Counts to write, checked for null.
            unsafe {
                write(lb, l as i64);
                write(extent, e as i64);
            }
        }))
    }

    fn MPI_Type_get_true_extent_x / PMPI_Type_get_true_extent_x(dt: Handle, lb: *mut i64, extent: *mut i64) {
        self_ok(state::type_of(dt).map(|d| {
            let (l, e) = d.get_true_extent();
            // SAFETY: MPI_Counts to write, checked for null.
            unsafe {
                write(lb, l as i64);
                write(extent, e as i64);
            }
        }))
    }

    fn MPI_Get_count_c / PMPI_Get_count_c(status: *const MpiStatus, dt: Handle, count: *mut i64) {
        // SAFETY: a status to read (MPI's contract).
        let r = unsafe { whole_count("MPI_Get_count_c", status, dt) };
        // SAFETY: an MPI_Count to write, checked for null.
        self_ok(r.map(|n| unsafe { write(count, n) }))
    }

    fn MPI_Get_elements_c / PMPI_Get_elements_c(status: *const MpiStatus, dt: Handle, count: *mut i64) {
        // SAFETY: the same contract.
        unsafe { PMPI_Get_elements_x(status, dt, count) }
    }

    fn MPI_Type_size_c / PMPI_Type_size_c(dt: Handle, size: *mut i64) {
        // SAFETY: the same contract.
        unsafe { PMPI_Type_size_x(dt, size) }
    }

    fn MPI_Type_get_extent_c / PMPI_Type_get_extent_c(dt: Handle, lb: *mut i64, extent: *mut i64) {
        // SAFETY: the same contract.
        unsafe { PMPI_Type_get_extent_x(dt, lb, extent) }
    }

    fn MPI_Type_get_true_extent_c / PMPI_Type_get_true_extent_c(dt: Handle, lb: *mut i64, extent: *mut i64) {
        // SAFETY: the same contract.
        unsafe { PMPI_Type_get_true_extent_x(dt, lb, extent) }
    }

    fn MPI_Pack_size_c / PMPI_Pack_size_c(count: i64, dt: Handle, _comm: Handle, size: *mut i64) {
        let r = count_of(count).and_then(|n| state::type_of(dt)?.pack_size(n));
        // SAFETY: an MPI_Count to write, checked for null.
        self_ok(r.map(|n| unsafe { write(size, n as i64) }))
    }

    fn MPI_Type_match_size / PMPI_Type_match_size(class: c_int, size: c_int, dt: *mut Handle) {
        let h = match (class, size) {
            (c::MPI_TYPECLASS_REAL, 4) => Some(c::MPI_FLOAT),
            (c::MPI_TYPECLASS_REAL, 8) => Some(c::MPI_DOUBLE),
            (c::MPI_TYPECLASS_REAL, 16) => Some(c::MPI_LONG_DOUBLE),
            (c::MPI_TYPECLASS_INTEGER, 1) => Some(c::MPI_INT8_T),
            (c::MPI_TYPECLASS_INTEGER, 2) => Some(c::MPI_INT16_T),
            (c::MPI_TYPECLASS_INTEGER, 4) => Some(c::MPI_INT32_T),
            (c::MPI_TYPECLASS_INTEGER, 8) => Some(c::MPI_INT64_T),
            (c::MPI_TYPECLASS_COMPLEX, 8) => Some(c::MPI_C_FLOAT_COMPLEX),
            (c::MPI_TYPECLASS_COMPLEX, 16) => Some(c::MPI_C_DOUBLE_COMPLEX),
            _ => None,
        };
        match h {
            Some(h) => {
                // SAFETY: a handle to write, checked for null.
                unsafe { write(dt, h) };
                MPI_SUCCESS
            }
            None => self_ok(Err::<(), _>(Error::new(ErrorClass::Arg, format!("MPI_Type_match_size: no predefined type of class {class} has {size} bytes")))),
        }
    }

    fn MPI_Pack_external_size / PMPI_Pack_external_size(datarep: *const c_char, count: c_int, dt: Handle, size: *mut isize) {
        // SAFETY: a NUL-terminated string (MPI's contract).
        let r = unsafe { c_str(datarep) }.and_then(|rep| state::type_of(dt)?.pack_external_size(&rep, len(count)?));
        // SAFETY: an MPI_Aint to write, checked for null.
        self_ok(r.map(|n| unsafe { write(size, n as isize) }))
    }

    fn MPI_Pack_external / PMPI_Pack_external(datarep: *const c_char, inbuf: *const c_void, count: c_int, dt: Handle, outbuf: *mut c_void, outsize: isize, position: *mut isize) {
        self_ok((|| {
            // SAFETY: a NUL-terminated string.
            let rep = unsafe { c_str(datarep) }?;
            let (d, n, from, bytes) = state::pack_span(inbuf, count.into(), dt)?;
            // SAFETY: `inbuf` holds the elements, whose bytes `pack_span` located; `outbuf`
            // `outsize` bytes, `position` an MPI_Aint (MPI's contract).
            let (src, dst, mut at) = unsafe { (crate::bytes_at(from, bytes)?, crate::bytes_at_mut(outbuf.cast(), count_of(outsize)?)?, crate::read_position(position)?) };
            d.pack_external(&rep, src, n, dst, &mut at)?;
            // SAFETY: as above.
            unsafe { crate::write_position(position, at) }
        })())
    }

    fn MPI_Unpack_external / PMPI_Unpack_external(datarep: *const c_char, inbuf: *const c_void, insize: isize, position: *mut isize, outbuf: *mut c_void, count: c_int, dt: Handle) {
        self_ok((|| {
            // SAFETY: a NUL-terminated string.
            let rep = unsafe { c_str(datarep) }?;
            let (d, n, to, bytes) = state::pack_span(outbuf, count.into(), dt)?;
            // SAFETY: `inbuf` holds `insize` bytes, `outbuf` room for the elements, whose
            // bytes `pack_span` located, `position` an MPI_Aint (MPI's contract).
            let (src, dst, mut at) = unsafe { (crate::bytes_at(inbuf.cast(), count_of(insize)?)?, crate::bytes_at_mut(to.cast_mut(), bytes)?, crate::read_position(position)?) };
            d.unpack_external(&rep, src, &mut at, dst, n)?;
            // SAFETY: as above.
            unsafe { crate::write_position(position, at) }
        })())
    }
}

mpi! {
    fn MPI_Type_get_value_index / PMPI_Type_get_value_index(value: Handle, index: Handle, pair: *mut Handle) {
        // MPI 4.1: the predefined pair type of MINLOC and MAXLOC for these two types, or
        // MPI_DATATYPE_NULL when MPI predefines none; both must be datatypes.
        if let Err(e) = state::type_of(value).and_then(|_| state::type_of(index)) {
            return self_ok(Err::<(), _>(Error::new(e.class(), format!("MPI_Type_get_value_index: {e}"))));
        }
        let h = match (value, index) {
            (c::MPI_FLOAT, c::MPI_INT) => c::MPI_FLOAT_INT,
            (c::MPI_DOUBLE, c::MPI_INT) => c::MPI_DOUBLE_INT,
            (c::MPI_LONG, c::MPI_INT) => c::MPI_LONG_INT,
            (c::MPI_INT, c::MPI_INT) => c::MPI_2INT,
            (c::MPI_SHORT, c::MPI_INT) => c::MPI_SHORT_INT,
            (c::MPI_LONG_DOUBLE, c::MPI_INT) => c::MPI_LONG_DOUBLE_INT,
            _ => abi::DATATYPE_NULL,
        };
        // SAFETY: a handle to write, checked for null.
        unsafe { write(pair, h) };
        MPI_SUCCESS
    }

    fn MPI_Status_c2f / PMPI_Status_c2f(cs: *const MpiStatus, fs: *mut c_int) {
        if cs.is_null() || cs as usize == abi::STATUS_IGNORE || fs.is_null() {
            return self_ok(Err::<(), _>(Error::new(ErrorClass::Arg, "MPI_Status_c2f: a null status")));
        }
        // SAFETY: an MPI_Status to read and MPI_F_STATUS_SIZE (5) Fortran integers to write,
        // in the same order (MPICH's Fortran status is its C status, field by field).
        unsafe {
            let s = cs.read();
            for (i, v) in [s.count_lo, s.count_hi_and_cancelled, s.source, s.tag, s.error].into_iter().enumerate() {
                fs.add(i).write(v);
            }
        }
        MPI_SUCCESS
    }

    fn MPI_Status_f2c / PMPI_Status_f2c(fs: *const c_int, cs: *mut MpiStatus) {
        if cs.is_null() || cs as usize == abi::STATUS_IGNORE || fs.is_null() {
            return self_ok(Err::<(), _>(Error::new(ErrorClass::Arg, "MPI_Status_f2c: a null status")));
        }
        // SAFETY: as for MPI_Status_c2f, the other way.
        unsafe {
            cs.write(MpiStatus {
                count_lo: fs.read(),
                count_hi_and_cancelled: fs.add(1).read(),
                source: fs.add(2).read(),
                tag: fs.add(3).read(),
                error: fs.add(4).read(),
            });
        }
        MPI_SUCCESS
    }
}
