//! The signature code every message carries: the one basic type it is made of, so that a
//! receive can tell a message of doubles from one of ints. It is a wire concept (frames,
//! channel offers and lent buffers carry it), defined here so that every layer from the
//! fabric up can name it; `datatype` computes it from types.
#![forbid(unsafe_code)]

/// The signature of a message: the kind (signed, unsigned, floating point, complex, bool)
/// and size of the one basic type it is made of, or [`Sig::MIXED`] for a message of
/// several basic types, of raw bytes (`u8`, MPI_BYTE) or of packed data, which a receive
/// checks by length only.
///
/// # Standard section(s)
/// MPI 4.1 §3.3.1 (type matching rules).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct Sig(u16);

impl Sig {
    /// Mixed, bytes or packed: not checked beyond length.
    pub const MIXED: Sig = Sig(0);

    /// The signature of a basic type of `kind` (1 signed, 2 unsigned, 3 floating point,
    /// 4 complex, 5 bool) and `size` bytes.
    pub(crate) const fn basic(kind: u8, size: u8) -> Sig {
        Sig(((kind as u16) << 8) | size as u16)
    }

    /// The signature of a message made of two parts: equal signatures stay, else mixed.
    pub const fn join(self, other: Sig) -> Sig {
        if self.0 == other.0 {
            self
        } else {
            Sig::MIXED
        }
    }

    /// Whether the message is checked by length only.
    pub const fn is_mixed(self) -> bool {
        self.0 == 0
    }

    /// Bytes of one basic element (0 when mixed).
    pub const fn elem_bytes(self) -> usize {
        (self.0 & 0xff) as usize
    }

    /// The code as it travels in frames and offers.
    pub(crate) const fn to_wire(self) -> u16 {
        self.0
    }

    /// A code read from a frame or an offer.
    pub(crate) const fn from_wire(code: u16) -> Sig {
        Sig(code)
    }

    /// Why a message of `len` bytes of this signature may not be received into a buffer of
    /// signature `want`: different basic types, or a length that ends inside an element of
    /// the receive type. `None` when it may (or `want` is mixed).
    pub(crate) fn mismatch(self, want: Sig, len: usize) -> Option<String> {
        if want.is_mixed() {
            return None;
        }
        if !self.is_mixed() && self != want {
            return Some(format!(
                "sent as {self} but received as {want} (type signatures differ)"
            ));
        }
        let size = want.elem_bytes();
        (size > 0 && !len.is_multiple_of(size))
            .then(|| format!("{len} bytes are not a whole number of {want} ({size} bytes each)"))
    }
}

impl std::fmt::Display for Sig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.0 >> 8 {
            1 => "signed integer",
            2 => "unsigned integer",
            3 => "floating point",
            4 => "complex",
            5 => "bool",
            _ => return f.write_str("bytes"),
        };
        write!(f, "{}-byte {kind}", self.elem_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_and_mismatch() {
        let d = Sig::basic(3, 8);
        let i = Sig::basic(1, 4);
        assert_eq!(d.join(d), d);
        assert_eq!(d.join(i), Sig::MIXED);
        assert_eq!(d.mismatch(d, 16), None);
        assert!(d.mismatch(i, 16).unwrap().contains("8-byte floating point"));
        assert!(Sig::MIXED.mismatch(d, 12).unwrap().contains("12 bytes"));
        assert_eq!(i.mismatch(Sig::MIXED, 3), None);
        assert_eq!(Sig::from_wire(d.to_wire()), d);
        assert_eq!(Sig::MIXED.to_string(), "bytes");
    }
}
