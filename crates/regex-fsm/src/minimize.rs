//! Hopcroft's DFA minimization over a refinable partition: `O(k n log n)` for
//! `n` states and `k` byte classes.
//!
//! Our own rather than `regex-automata`'s `minimize(true)`: our table has
//! already folded `regex-automata`'s one-byte match delay into per-state
//! acceptance, so states that differ only in *when* a match is reported are
//! equivalent here and merge; they would not there.

/// Partitions the states of a complete DFA (`trans[s * stride + c]`) into
/// classes of equivalent states; returns the block of each state (blocks are
/// numbered `0..blocks`).
pub(crate) fn hopcroft(trans: &[u32], stride: usize, accepting: &[bool]) -> Vec<u32> {
    let n = accepting.len();
    if n == 0 {
        return Vec::new();
    }
    // Reverse transitions per class, CSR: sources of (c, t) are
    // inv_src[inv_off[c * n + t]..inv_off[c * n + t + 1]].
    let mut inv_off = vec![0u32; stride * n + 1];
    for s in 0..n {
        for c in 0..stride {
            let t = trans[s * stride + c] as usize;
            inv_off[c * n + t + 1] += 1;
        }
    }
    for i in 0..stride * n {
        inv_off[i + 1] += inv_off[i];
    }
    let mut fill = inv_off.clone();
    let mut inv_src = vec![0u32; stride * n];
    for s in 0..n {
        for c in 0..stride {
            let key = c * n + trans[s * stride + c] as usize;
            inv_src[fill[key] as usize] = s as u32;
            fill[key] += 1;
        }
    }
    drop(fill);

    // Refinable partition: `elems` is a permutation of the states; block b
    // owns elems[first[b]..end[b]].
    let mut elems: Vec<u32> = Vec::with_capacity(n);
    elems.extend((0..n as u32).filter(|&s| accepting[s as usize]));
    let n_acc = elems.len();
    elems.extend((0..n as u32).filter(|&s| !accepting[s as usize]));
    let mut first = Vec::new();
    let mut end = Vec::new();
    let mut block_of = vec![0u32; n];
    for (lo, hi) in [(0, n_acc), (n_acc, n)] {
        if lo < hi {
            let b = first.len() as u32;
            first.push(lo);
            end.push(hi);
            for &s in &elems[lo..hi] {
                block_of[s as usize] = b;
            }
        }
    }
    let mut loc = vec![0usize; n];
    for (i, &s) in elems.iter().enumerate() {
        loc[s as usize] = i;
    }
    let mut marked = vec![0usize; first.len()];
    let mut in_work = vec![true; first.len()];
    let mut work: Vec<u32> = (0..first.len() as u32).collect();
    let mut touched: Vec<u32> = Vec::new();
    let mut splitter: Vec<u32> = Vec::new();

    while let Some(a) = work.pop() {
        in_work[a as usize] = false;
        splitter.clear();
        splitter.extend_from_slice(&elems[first[a as usize]..end[a as usize]]);
        for c in 0..stride {
            // Mark every state with a `c` transition into the splitter: move
            // it to the marked front of its block.
            for &t in &splitter {
                let key = c * n + t as usize;
                for &q in &inv_src[inv_off[key] as usize..inv_off[key + 1] as usize] {
                    let b = block_of[q as usize] as usize;
                    let pos = loc[q as usize];
                    let front = first[b] + marked[b];
                    if pos < front {
                        continue; // already marked
                    }
                    if marked[b] == 0 {
                        touched.push(b as u32);
                    }
                    let other = elems[front];
                    elems.swap(pos, front);
                    loc[other as usize] = pos;
                    loc[q as usize] = front;
                    marked[b] += 1;
                }
            }
            for b in touched.drain(..) {
                let b = b as usize;
                let m = std::mem::take(&mut marked[b]);
                let size = end[b] - first[b];
                if m == size {
                    continue;
                }
                // Split: the smaller part becomes a new block and goes to the
                // work list (if `b` is already there, both parts are).
                let nb = first.len();
                let split = first[b] + m;
                if m <= size - m {
                    first.push(first[b]);
                    end.push(split);
                    first[b] = split;
                } else {
                    first.push(split);
                    end.push(end[b]);
                    end[b] = split;
                }
                marked.push(0);
                for &s in &elems[first[nb]..end[nb]] {
                    block_of[s as usize] = nb as u32;
                }
                in_work.push(true);
                work.push(nb as u32);
            }
        }
    }
    block_of
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_equivalent_tails() {
        // 0 dead; 1 -a-> 2, 1 -b-> 3; 2 and 3 both accept and loop to themselves.
        // Two classes (a, b).
        let trans = vec![
            0, 0, // 0
            2, 3, // 1
            2, 2, // 2
            3, 3, // 3
        ];
        let acc = [false, false, true, true];
        let blocks = hopcroft(&trans, 2, &acc);
        assert_eq!(blocks[2], blocks[3]);
        assert_ne!(blocks[0], blocks[1]);
        assert_ne!(blocks[1], blocks[2]);
    }

    #[test]
    fn keeps_distinguishable_chains() {
        // 1 -a-> 2 -a-> 3 (accepting) ; all else dead. 1, 2 are distinguishable.
        let trans = vec![0, 2, 3, 0];
        let acc = [false, false, false, true];
        let blocks = hopcroft(&trans, 1, &acc);
        let mut distinct = blocks.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), 4);
    }
}
