//! Walks shared by signature: where a walk's result depends only on what
//! a state does to a known set of trie paths (the text of tokens past a
//! string's closing quote), two states that read those paths alike walk
//! alike, whichever lexeme and grammar they are in. [`TextTrie`] merges
//! the paths, [`TextTrie::signature`] reads them from a state, and
//! [`KeptWalks`] keeps indexes by signature.

use super::*;

/// Trie paths merged by their bytes: the subtrees below some nodes of
/// the token trie, as one trie whose root stands for all of those
/// nodes. A few thousand nodes where the subtrees hold tens of
/// thousands (most tokens past a quote begin with the same `,`, `:`,
/// `}` or `)`).
#[derive(Debug)]
pub(super) struct TextTrie {
    /// The children of node `i` (node 0: the root) are
    /// `kid_bytes[kid_start[i]..kid_start[i + 1]]`, the same range of
    /// `kid_nodes`.
    kid_start: Vec<u32>,
    kid_bytes: Vec<u8>,
    kid_nodes: Vec<u32>,
}

impl TextTrie {
    /// The subtrees strictly below `nodes` (trie nodes at their depths),
    /// merged: the root is every one of `nodes`.
    pub(super) fn below(trie: &TokenTrie, nodes: &[(u32, u32)]) -> TextTrie {
        let mut kids: Vec<Vec<(u8, u32)>> = vec![Vec::new()];
        let mut find: HashMap<(u32, u8), u32> = HashMap::new();
        // The merged node at each depth of the current path.
        let mut at = vec![0u32; trie.max_depth + 1];
        for &(top, depth) in nodes {
            at[depth as usize] = 0;
            let (first, end) = (top as usize + 1, trie.nodes[top as usize].next as usize);
            for i in first..end {
                let n = trie.nodes[i];
                let parent = at[n.depth as usize - 1];
                let q = *find.entry((parent, n.byte)).or_insert_with(|| {
                    let q = kids.len() as u32;
                    kids.push(Vec::new());
                    kids[parent as usize].push((n.byte, q));
                    q
                });
                at[n.depth as usize] = q;
            }
        }
        let mut t = TextTrie {
            kid_start: vec![0],
            kid_bytes: Vec::new(),
            kid_nodes: Vec::new(),
        };
        for mut k in kids {
            k.sort_unstable();
            t.kid_bytes.extend(k.iter().map(|&(b, _)| b));
            t.kid_nodes.extend(k.iter().map(|&(_, q)| q));
            t.kid_start.push(t.kid_bytes.len() as u32);
        }
        t
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.kid_start.len() - 1
    }

    /// What `state` does to the merged paths, read from the root: whether
    /// it accepts, then each node it reads to a live state, in
    /// depth-first order, as the node's number times two, plus one where
    /// that state accepts. A walk that depends on these paths alone is
    /// the same from two states with the same signature. `None` past
    /// [`SIGNATURE_NODES`] live nodes: a state that reads most of the
    /// paths (a string's `.*`) is walked, where the walk takes whole
    /// subtrees that a signature would read node by node.
    pub(super) fn signature(&self, dfa: &LexDfa, state: u32) -> Option<Vec<u32>> {
        let mut signature = vec![u32::from(dfa.is_accepting(state))];
        let classes = dfa.classes();
        let mut stack = vec![(0u32, state)];
        while let Some((q, from)) = stack.pop() {
            let range =
                self.kid_start[q as usize] as usize..self.kid_start[q as usize + 1] as usize;
            let row = dfa.kept_row(from);
            let bytes = &self.kid_bytes[range.clone()];
            for (&b, &kid) in bytes.iter().zip(&self.kid_nodes[range]) {
                let next = match row {
                    Some(row) => row[classes[b as usize] as usize],
                    None => dfa.next(from, b),
                };
                if next == DEAD {
                    continue;
                }
                if signature.len() > SIGNATURE_NODES {
                    return None;
                }
                signature.push(kid << 1 | u32::from(dfa.is_accepting(next)));
                if self.kid_start[kid as usize] < self.kid_start[kid as usize + 1] {
                    stack.push((kid, next));
                }
            }
        }
        Some(signature)
    }
}

/// The most live nodes a signature reads ([`TextTrie::signature`]).
pub(super) const SIGNATURE_NODES: usize = 2048;

/// Which walk a signature was read for: the paths it was read on, and
/// what the walk adds to them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum WalkKey {
    /// Past the closing quote of a [`Body`] ([`Lexeme::past_the_quote`]).
    PastQuote(Body),
}

/// Indexes by walk and signature, up to [`KEPT_WALK_BYTES`] of them.
#[derive(Debug, Default)]
pub(super) struct KeptWalks(Mutex<KeptInner>);

#[derive(Debug, Default)]
struct KeptInner {
    by_signature: HashMap<WalkKey, HashMap<Box<[u32]>, Arc<StateIndex>>>,
    bytes: usize,
}

/// The most heap bytes [`KeptWalks`] holds (an index of a string body
/// holds its row, 16 KiB on Llama 3's vocabulary); past it, walks are
/// made and not kept.
pub(super) const KEPT_WALK_BYTES: usize = 32 << 20;

impl KeptWalks {
    pub(super) fn get(&self, key: WalkKey, signature: &[u32]) -> Option<Arc<StateIndex>> {
        let kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        kept.by_signature.get(&key)?.get(signature).cloned()
    }

    /// Keeps `made` for `key` and `signature` if there is room, and
    /// returns the index kept for them (the first made, where two threads
    /// made it at once).
    pub(super) fn keep(
        &self,
        key: WalkKey,
        signature: Vec<u32>,
        made: StateIndex,
    ) -> Arc<StateIndex> {
        let made = Arc::new(made);
        let bytes = made.inside.bytes() + made.exits.len() * 8 + signature.len() * 4;
        let mut kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if kept.bytes + bytes > KEPT_WALK_BYTES {
            return made;
        }
        let kept = &mut *kept;
        let walks = kept.by_signature.entry(key).or_default();
        match walks.entry(signature.into_boxed_slice()) {
            hashbrown::hash_map::Entry::Occupied(e) => e.get().clone(),
            hashbrown::hash_map::Entry::Vacant(e) => {
                kept.bytes += bytes;
                e.insert(made).clone()
            }
        }
    }
}
