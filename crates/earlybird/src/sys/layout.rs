//! Where the bytes of a non-contiguous buffer are: the flattened form of `count` elements of a
//! derived datatype placed in a buffer, in the datatype's type-map order.
//!
//! The datatype layer builds a [`Layout`]; the bytes are moved by [`Lent`](super::lend::Lent)
//! (packing into an eager slot, unpacking out of one, or building the segment lists of a
//! single-copy rendezvous read). A layout is checked against its buffer when it is made:
//! every piece lies inside `0..buf_len`, so the moves need no further checks.
#![forbid(unsafe_code)]

use std::rc::Rc;

/// One run of bytes, `[address, length]`: the form of a segment table, which a rendezvous
/// receiver reads out of the sender's memory as raw `u64` pairs.
pub(crate) type Segment = [u64; 2];

/// `count` elements, each a list of `(displacement, length)` blocks, element `k` starting at
/// byte `origin + k * extent` of the buffer.
#[derive(Debug)]
pub(crate) struct Layout {
    blocks: Rc<[(isize, usize)]>,
    extent: isize,
    elem_size: usize,
    origin: usize,
    /// One past the highest byte the layout touches (0 when it touches none).
    end: usize,
    /// Packed bytes of the elements skipped at the start (see [`Layout::bytes`]).
    skip: usize,
    /// Packed bytes the layout moves, from `skip` on.
    len: usize,
}

impl Layout {
    /// The layout of `count` elements whose blocks are `blocks` (type-map order, each of
    /// nonzero length; their lowest and highest bytes are `true_lb` and `true_ub`), starting
    /// at byte `origin` of a buffer of `buf_len` bytes. `Err` names the first byte outside it.
    pub(crate) fn new(
        blocks: Rc<[(isize, usize)]>,
        extent: isize,
        count: usize,
        origin: usize,
        true_lb: isize,
        true_ub: isize,
        buf_len: usize,
    ) -> Result<Layout, String> {
        let elem_size: usize = blocks.iter().map(|b| b.1).sum();
        if elem_size.checked_mul(count).is_none() {
            return Err(format!(
                "{count} elements of {elem_size} bytes overflow the address space"
            ));
        }
        let mut end = 0;
        if count > 0 && elem_size > 0 {
            // Bounds of the whole span in exact arithmetic.
            let last = (count as i128 - 1) * extent as i128;
            let lo = origin as i128 + last.min(0) + true_lb as i128;
            let hi = origin as i128 + last.max(0) + true_ub as i128;
            if lo < 0 {
                return Err(format!(
                    "the datatype reaches {} bytes before the start of the buffer",
                    -lo
                ));
            }
            if hi > buf_len as i128 {
                return Err(format!(
                    "the datatype reaches byte {hi} of a buffer of {buf_len} bytes"
                ));
            }
            end = hi as usize;
        }
        Ok(Layout {
            blocks,
            extent,
            elem_size,
            origin,
            end,
            skip: 0,
            len: elem_size * count,
        })
    }

    /// Packed bytes `first .. first + n` of this layout's message, as a layout of its own:
    /// the part of the data a collective moves as one block when it counts a typed buffer
    /// in bytes. Every byte it touches is one this layout touches. Panics if the range
    /// leaves the message (callers cut blocks from checked counts).
    pub(crate) fn bytes(&self, first: usize, n: usize) -> Layout {
        assert!(
            first.checked_add(n).is_some_and(|e| e <= self.len),
            "layout: bytes {first}+{n} of a message of {}",
            self.len
        );
        Layout {
            blocks: self.blocks.clone(),
            skip: self.skip + first,
            len: n,
            ..*self
        }
    }

    /// Bytes the layout moves (its packed size).
    #[inline]
    pub(crate) fn packed_len(&self) -> usize {
        self.len
    }

    /// One past the highest buffer byte the layout touches.
    pub(crate) fn end(&self) -> usize {
        self.end
    }

    /// Call `f(buffer_offset, packed_offset, len)` for each piece of the first `n` packed
    /// bytes, in order. Every piece lies within the buffer the layout was checked against.
    #[inline]
    pub(crate) fn pieces(&self, n: usize, mut f: impl FnMut(usize, usize, usize)) {
        let n = n.min(self.len);
        if n == 0 {
            return;
        }
        // The element holding the first byte, and how far into it that byte is.
        let (first, mut within) = (self.skip / self.elem_size, self.skip % self.elem_size);
        let mut p = 0;
        let mut base =
            (self.origin as isize).wrapping_add((first as isize).wrapping_mul(self.extent));
        while p < n {
            for &(d, l) in self.blocks.iter() {
                if p >= n {
                    return;
                }
                if within >= l {
                    within -= l;
                    continue;
                }
                let take = (l - within).min(n - p);
                f((base + d) as usize + within, p, take);
                p += take;
                within = 0;
            }
            // Past the last element this may leave the address space; it is not used then.
            base = base.wrapping_add(self.extent);
        }
    }

    /// The first `n` packed bytes as `(address, length)` segments of the buffer at `base`,
    /// adjacent pieces merged.
    pub(crate) fn segments(&self, base: u64, n: usize) -> Vec<Segment> {
        let mut v: Vec<Segment> = Vec::new();
        self.pieces(n, |b, _, l| {
            let a = base + b as u64;
            match v.last_mut() {
                Some([la, ll]) if *la + *ll == a => *ll += l as u64,
                _ => v.push([a, l as u64]),
            }
        });
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_walk_type_map_order_with_negative_extent() {
        // Two elements of blocks [(8,4),(0,2)], extent -16, origin 32: element 0 at 32,
        // element 1 at 16.
        let l = Layout::new(Rc::from(vec![(8, 4), (0, 2)]), -16, 2, 32, 0, 12, 64).unwrap();
        let mut seen = vec![];
        l.pieces(usize::MAX, |b, p, n| seen.push((b, p, n)));
        assert_eq!(seen, vec![(40, 0, 4), (32, 4, 2), (24, 6, 4), (16, 10, 2)]);
        let mut part = vec![];
        l.pieces(7, |b, p, n| part.push((b, p, n)));
        assert_eq!(part, vec![(40, 0, 4), (32, 4, 2), (24, 6, 1)]);
        assert_eq!(
            l.segments(1000, 12),
            vec![[1040, 4], [1032, 2], [1024, 4], [1016, 2]]
        );
    }

    #[test]
    fn a_byte_range_of_a_layout_is_those_bytes_of_its_pieces() {
        // Elements of blocks [(8,4),(0,2)] (6 bytes), extent -16, origin 32.
        let l = Layout::new(Rc::from(vec![(8, 4), (0, 2)]), -16, 2, 32, 0, 12, 64).unwrap();
        let mut seen = vec![];
        // Packed bytes 3..9: the last byte of block (40,4), block (32,2), then 3 bytes of
        // element 1's first block.
        let part = l.bytes(3, 6);
        assert_eq!(part.packed_len(), 6);
        part.pieces(usize::MAX, |b, p, n| seen.push((b, p, n)));
        assert_eq!(seen, vec![(43, 0, 1), (32, 1, 2), (24, 3, 3)]);
        // A range starting exactly at an element boundary, cut short by `n`.
        let mut seen = vec![];
        l.bytes(6, 6).pieces(5, |b, p, n| seen.push((b, p, n)));
        assert_eq!(seen, vec![(24, 0, 4), (16, 4, 1)]);
        let mut none = vec![];
        l.bytes(12, 0)
            .pieces(usize::MAX, |b, p, n| none.push((b, p, n)));
        assert!(none.is_empty());
    }

    #[test]
    fn out_of_buffer_is_refused() {
        let b: Rc<[(isize, usize)]> = Rc::from(vec![(0, 8)]);
        assert!(Layout::new(b.clone(), 8, 4, 0, 0, 8, 32).is_ok());
        assert!(Layout::new(b.clone(), 8, 5, 0, 0, 8, 32).is_err());
        assert!(Layout::new(b.clone(), -8, 2, 0, 0, 8, 32).is_err());
        assert!(Layout::new(b, -8, 2, 8, 0, 8, 32).is_ok());
    }

    #[test]
    fn adjacent_pieces_merge_into_one_segment() {
        let l = Layout::new(Rc::from(vec![(0, 8)]), 8, 4, 0, 0, 8, 32).unwrap();
        assert_eq!(l.segments(0, 32), vec![[0, 32]]);
    }
}
