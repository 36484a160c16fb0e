//! [`Grow`]: slots indexed by `u32` that are filled once each, by any
//! thread, in a table that grows as higher indexes are asked for. The
//! states of a lazily built automaton and what is learnt about each are
//! kept in them: a reader never takes a lock, and a slot's address never
//! moves once made.

use std::sync::OnceLock;

/// Slots in the first segment; segment `k` holds `FIRST << k`.
const FIRST: usize = 8;
/// Segments: enough for every `u32` index.
const SEGMENTS: usize = 30;

/// Append-only slots, each set at most once.
pub struct Grow<T> {
    segments: [OnceLock<Box<[OnceLock<T>]>>; SEGMENTS],
}

impl<T> Default for Grow<T> {
    fn default() -> Self {
        Grow {
            segments: std::array::from_fn(|_| OnceLock::new()),
        }
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for Grow<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grow")
            .field("set", &self.iter().count())
            .finish()
    }
}

/// The segment of index `i` and its place in it.
#[inline(always)]
fn place(i: u32) -> (usize, usize) {
    let j = i as usize / FIRST + 1;
    let k = (usize::BITS - 1 - j.leading_zeros()) as usize;
    (k, i as usize - FIRST * ((1 << k) - 1))
}

impl<T> Grow<T> {
    /// The slot of index `i` (its segment made now if it is the first
    /// asked for).
    #[inline]
    pub fn slot(&self, i: u32) -> &OnceLock<T> {
        let (k, at) = place(i);
        let segment = self.segments[k].get_or_init(|| {
            (0..FIRST << k)
                .map(|_| OnceLock::new())
                .collect::<Vec<_>>()
                .into_boxed_slice()
        });
        &segment[at]
    }

    /// The value at `i`, if it is set.
    #[inline]
    pub fn get(&self, i: u32) -> Option<&T> {
        let (k, at) = place(i);
        self.segments[k].get()?[at].get()
    }

    /// The value at `i`, made by `make` if it is not set yet.
    #[inline]
    pub fn get_or_init(&self, i: u32, make: impl FnOnce() -> T) -> &T {
        self.slot(i).get_or_init(make)
    }

    /// The values set so far, by index.
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.segments
            .iter()
            .filter_map(OnceLock::get)
            .flat_map(|s| s.iter().filter_map(OnceLock::get))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_keep_their_values_across_segments() {
        let g: Grow<u32> = Grow::default();
        let picks = [0u32, 1, 63, 64, 65, 191, 192, 1000, 100_000, 4_000_000];
        for &i in &picks {
            assert_eq!(g.get(i), None);
            assert_eq!(*g.get_or_init(i, || i * 3), i * 3);
        }
        for &i in &picks {
            assert_eq!(g.get(i), Some(&(i * 3)));
            assert_eq!(*g.get_or_init(i, || 7), i * 3, "set once");
        }
        assert_eq!(g.get(2), None);
        assert_eq!(g.iter().count(), picks.len());
        // Places are distinct and in range at the segment edges.
        let mut seen = std::collections::HashSet::new();
        for i in (0..20_000u32).chain([u32::MAX - 1, u32::MAX]) {
            let (k, at) = place(i);
            assert!(k < SEGMENTS && at < FIRST << k, "{i}");
            assert!(seen.insert((k, at)), "{i}");
        }
    }
}
