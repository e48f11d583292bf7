//! Which parts of one buffer overlap: the check that lets several operations use disjoint
//! parts of one exclusively borrowed buffer at once (a halo exchange sends boundary cells
//! while it receives into the halo around them). Pure; the lending code relies on it.
#![forbid(unsafe_code)]

use super::layout::Layout;

/// One part of a buffer lent by [`View::split`](super::lend::View::split): a run of bytes,
/// or a datatype's layout.
#[derive(Debug)]
pub(crate) enum Part {
    Run(std::ops::Range<usize>),
    Laid(Layout),
}

/// Two parts of a split buffer that share a byte while one of them is written: part `a`,
/// part `b` (`a` reaches the byte first in address order) and the lowest such byte of `b`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Overlap {
    pub a: usize,
    pub b: usize,
    pub byte: usize,
}

/// The first overlap among `pieces` (`(start, end, part)`, nonempty) between two different
/// parts at least one of which is written. One sweep in address order: each piece is checked
/// against the furthest-reaching earlier piece of another part (of any part if it is written,
/// of a written part if not).
pub(crate) fn first_overlap(
    pieces: &mut [(usize, usize, usize)],
    writes: &[bool],
) -> Option<Overlap> {
    pieces.sort_unstable();
    let (mut any, mut written) = (Reach::default(), Reach::default());
    for &(start, end, part) in pieces.iter() {
        let against = if writes[part] { &any } else { &written };
        if let Some(a) = against.past(start, part) {
            return Some(Overlap {
                a,
                b: part,
                byte: start,
            });
        }
        any.add(end, part);
        if writes[part] {
            written.add(end, part);
        }
    }
    None
}

/// The furthest end among pieces seen (`best`, with its part) and the furthest among those
/// of other parts than `best`'s (`second`): enough to find, for any part, the furthest end
/// among the other parts.
#[derive(Default)]
struct Reach {
    best: Option<(usize, usize)>,
    second: Option<(usize, usize)>,
}

impl Reach {
    fn add(&mut self, end: usize, part: usize) {
        match self.best {
            None => self.best = Some((end, part)),
            Some((be, bp)) if bp == part => self.best = Some((be.max(end), part)),
            Some((be, _)) if end > be => {
                self.second = self.best;
                self.best = Some((end, part));
            }
            Some(_) => {
                if self.second.is_none_or(|(se, _)| end > se) {
                    self.second = Some((end, part));
                }
            }
        }
    }

    /// A part other than `part` with a piece that ends after `start`.
    fn past(&self, start: usize, part: usize) -> Option<usize> {
        [self.best, self.second]
            .into_iter()
            .flatten()
            .find(|&(_, q)| q != part)
            .filter(|&(e, _)| e > start)
            .map(|(_, q)| q)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlap_needs_a_writer_and_two_parts() {
        let w = [true, false, false];
        // Reads may overlap reads; a part may overlap itself.
        assert_eq!(
            first_overlap(&mut [(0, 8, 1), (4, 12, 2), (2, 6, 0), (0, 2, 0)], &w),
            Some(Overlap {
                a: 0,
                b: 1,
                byte: 0
            })
        );
        assert_eq!(
            first_overlap(&mut [(0, 8, 1), (4, 12, 2), (12, 16, 0), (12, 14, 0)], &w),
            None
        );
        // A write reached by an earlier read that is not the furthest-reaching piece.
        assert_eq!(
            first_overlap(&mut [(0, 100, 1), (10, 30, 2), (50, 60, 0)], &w),
            Some(Overlap {
                a: 1,
                b: 0,
                byte: 50
            })
        );
        // A write inside an earlier read.
        assert_eq!(
            first_overlap(&mut [(0, 100, 1), (10, 30, 0), (20, 21, 1)], &w),
            Some(Overlap {
                a: 1,
                b: 0,
                byte: 10
            })
        );
        assert_eq!(
            first_overlap(&mut [(0, 8, 0), (8, 16, 1), (16, 24, 0)], &w),
            None
        );
    }
}
