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
///
/// State 0 must be the dead state (a sink that cannot reach acceptance) and
/// every other state must be able to reach acceptance (the DFA is pruned), so
/// the dead state is alone in its class. The initial partition is then
/// `{dead}`, accepting, other live states, and only the last two start on
/// the work list (Hopcroft's "all blocks but one" rule): the dead block is
/// never a splitter, so transitions into (and out of) the dead state, most
/// of a JSON-schema DFA's table, are never looked at.
pub(crate) fn hopcroft(trans: &[u32], stride: usize, accepting: &[bool]) -> Vec<u32> {
    let n = accepting.len();
    if n == 0 {
        return Vec::new();
    }
    debug_assert!(!accepting[0], "state 0 must be the dead state");
    debug_assert!(
        trans[..stride].iter().all(|&t| t == 0),
        "state 0 must be a sink"
    );
    // Reverse live transitions, CSR by target: the `(class, source)` pairs
    // of the edges into t are inv[inv_off[t]..inv_off[t + 1]].
    let mut inv_off = vec![0u32; n + 1];
    for &t in &trans[stride..] {
        inv_off[t as usize + 1] += 1;
    }
    inv_off[1] = 0; // edges into the dead state are never needed
    for i in 0..n {
        inv_off[i + 1] += inv_off[i];
    }
    let mut fill = inv_off.clone();
    let mut inv: Vec<(u32, u32)> = vec![(0, 0); inv_off[n] as usize];
    for s in 1..n {
        for c in 0..stride {
            let t = trans[s * stride + c] as usize;
            if t != 0 {
                inv[fill[t] as usize] = (c as u32, s as u32);
                fill[t] += 1;
            }
        }
    }
    drop(fill);

    // Refinable partition: `elems` is a permutation of the states; block b
    // owns elems[first[b]..end[b]]. Block 0 is {dead}.
    let mut elems: Vec<u32> = Vec::with_capacity(n);
    elems.push(0);
    elems.extend((1..n as u32).filter(|&s| accepting[s as usize]));
    let n_acc = elems.len();
    elems.extend((1..n as u32).filter(|&s| !accepting[s as usize]));
    let mut first = Vec::new();
    let mut end = Vec::new();
    let mut block_of = vec![0u32; n];
    for (lo, hi) in [(0, 1), (1, n_acc), (n_acc, n)] {
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
    let mut work: Vec<u32> = (1..first.len() as u32).collect();
    let mut touched: Vec<u32> = Vec::new();
    // Sources of the splitter's incoming edges, bucketed by class.
    let mut by_class: Vec<Vec<u32>> = vec![Vec::new(); stride];
    let mut classes_hit: Vec<u32> = Vec::new();

    while let Some(a) = work.pop() {
        for &t in &elems[first[a as usize]..end[a as usize]] {
            let t = t as usize;
            for &(c, q) in &inv[inv_off[t] as usize..inv_off[t + 1] as usize] {
                let bucket = &mut by_class[c as usize];
                if bucket.is_empty() {
                    classes_hit.push(c);
                }
                bucket.push(q);
            }
        }
        for c in classes_hit.drain(..) {
            // Mark every state with a `c` transition into the splitter: move
            // it to the marked front of its block.
            let bucket = std::mem::take(&mut by_class[c as usize]);
            for &q in &bucket {
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
            let mut bucket = bucket;
            bucket.clear();
            by_class[c as usize] = bucket;
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
