//! The token index: for every DFA state, the grammar tokens whose bytes can be
//! walked from it without dying, as a mask row. Filling a mask is then a
//! table read.
//!
//! Built by walking the vocabulary's [`TokenTrie`] depth-first from each
//! state (shared prefixes are walked once; a dead byte skips its subtree).
//! Identical rows are stored once; rows with few allowed tokens are stored
//! as sorted token ids (sparse) rather than `vocab_size / 32` words.

mod region;

use rayon::prelude::*;
use region::{Frontier, Region, RegionFinder, RegionWalk, WalkCache};
use std::collections::HashMap;
use std::sync::Arc;
use tokensieve_automata::{ByteDfa, DEAD};
use tokensieve_core::TokenTrie;
use tokensieve_core::{CancelToken, GrammarError, Location};

/// A row is stored sparse when at most `words / SPARSE_DIVISOR` tokens are
/// allowed: then filling it (clear + set bits) costs about as much as copying
/// a dense row, and it takes at most 1/8 of the memory.
const SPARSE_DIVISOR: usize = 8;

/// Runs `(start, end)` of positions in `TokenTrie::tokens`.
type Runs = Box<[(u32, u32)]>;

/// Bound on the runs a walker's memo keeps (8 bytes each).
const MAX_MEMO_RUNS: usize = 4 << 20;

/// States walked per parallel batch (rows are deduplicated between batches,
/// which bounds the memory of undeduplicated rows in flight).
const PARALLEL_BATCH: usize = 256;

/// One mask row, without stop tokens (they depend only on acceptance).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Row {
    /// `words` words, XGrammar layout.
    Dense(Box<[u32]>),
    /// Allowed token ids, ascending.
    Sparse(Box<[u32]>),
}

impl Row {
    fn bytes(&self) -> usize {
        match self {
            Row::Dense(w) | Row::Sparse(w) => w.len() * 4,
        }
    }
}

/// Counters of an index build.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IndexStats {
    /// DFA states (the dead one included).
    pub states: usize,
    /// Distinct rows stored (the empty row included).
    pub unique_rows: usize,
    pub dense_rows: usize,
    pub sparse_rows: usize,
    /// Heap bytes of rows and the state -> row table.
    pub bytes: usize,
    /// Trie nodes visited, over all states.
    pub nodes_visited: u64,
    /// Walks of a loop shared by several states (see `index/region.rs`),
    /// those found in the walk cache instead, and the states whose rows came
    /// from either.
    pub region_walks: usize,
    pub region_cache_hits: usize,
    pub region_states: usize,
    /// States reachable from the start through whole tokens.
    pub token_reachable_states: usize,
    /// Of those, states that cannot end the output and that no token can
    /// continue (the vocabulary cannot spell what the regex needs next).
    /// Always 0 for vocabularies with a token for every byte.
    pub stuck_states: usize,
}

/// How an index is built.
#[derive(Debug, Clone)]
pub(crate) struct IndexOptions {
    /// Limit on the bytes of rows (`max_index_bytes`).
    pub max_bytes: usize,
    /// Walk states on rayon's pool.
    pub parallel: bool,
    /// Budget of the process-wide cache of region walks; 0 disables it.
    pub walk_cache_bytes: usize,
    /// Polled before every walk: a cancelled build stops with
    /// `GrammarError::Cancelled`.
    pub cancel: CancelToken,
    /// Trie nodes the build may visit (`max_compile_work`). A region walk
    /// found in the process-wide cache is charged as if walked, so the
    /// same regex passes or fails the budget whatever the cache holds.
    pub max_work: u64,
}

/// Adds `nodes` to the work `spent` by a build, failing past `max`.
fn charge(spent: &mut u64, nodes: u64, max: u64) -> Result<(), GrammarError> {
    *spent += nodes;
    if *spent > max {
        return Err(GrammarError::LimitExceeded {
            what: format!(
                "the token index's trie walks ({} nodes visited and counting)",
                *spent
            ),
            limit: usize::try_from(max).unwrap_or(usize::MAX),
            knob: "max_compile_work".into(),
        });
    }
    Ok(())
}

/// Per-state mask rows for one (regex, vocabulary).
#[derive(Debug)]
pub struct TokenIndex {
    rows: Vec<Row>,
    state_row: Vec<u32>,
    words: usize,
    stats: IndexStats,
}

/// What one state's walk produced.
struct Walked {
    row: Row,
    hash: u64,
    /// Distinct states whole tokens lead to.
    successors: Vec<u32>,
    visited: u64,
}

/// Scratch space for walks, reused across states.
struct Walker<'a> {
    trie: &'a TokenTrie,
    /// The DFA's transitions with premultiplied state ids:
    /// `trans[s * stride + class] = next * stride` (the dead state stays 0).
    trans: &'a [u32],
    classes: &'a [u8; 256],
    stride: u32,
    words: usize,
    /// Whether walks collect the states whole tokens lead to.
    successors: bool,
    stack: Vec<u32>,
    /// Per state, whether it is a wide loop (`region::is_wide`); empty when
    /// walks do not memoize.
    wide: &'a [bool],
    /// Subtrees below the root's children walked in a wide state: (child
    /// node, premultiplied state) -> the runs of `trie.tokens` positions
    /// allowed there. Walks from states that fall into the same wide loop
    /// after one byte (the prefixes of a trigger, of excluded keys) reuse
    /// them instead of walking the subtree again.
    memo: HashMap<(u32, u32), Runs>,
    memo_runs: usize,
    /// The row being walked, as `words` words, and how many bits are set
    /// (a token is added at most once per walk: each has one trie node).
    bits: Vec<u32>,
    count: usize,
    seen: Vec<u32>,
    epoch: u32,
}

/// The DFA's transition table with premultiplied state ids (see
/// [`Walker::trans`]).
fn premultiplied(dfa: &ByteDfa) -> Vec<u32> {
    let stride = dfa.num_classes() as u32;
    (0..dfa.num_states() as u32)
        .flat_map(|s| dfa.row(s).iter().map(move |&t| t * stride))
        .collect()
}

impl<'a> Walker<'a> {
    fn new(
        dfa: &'a ByteDfa,
        trans: &'a [u32],
        trie: &'a TokenTrie,
        words: usize,
        successors: bool,
    ) -> Self {
        Walker {
            trie,
            trans,
            classes: dfa.classes(),
            stride: dfa.num_classes() as u32,
            words,
            successors,
            stack: vec![DEAD; trie.max_depth + 1],
            wide: &[],
            memo: HashMap::new(),
            memo_runs: 0,
            bits: vec![0; words],
            count: 0,
            seen: if successors {
                vec![0; dfa.num_states()]
            } else {
                Vec::new()
            },
            epoch: 0,
        }
    }

    /// Memoizes subtrees walked in the wide states of `wide` (one flag per
    /// state); only for walks that collect no successors.
    fn with_memo(mut self, wide: &'a [bool]) -> Self {
        debug_assert!(!self.successors);
        self.wide = wide;
        self
    }

    fn walk(&mut self, state: u32) -> Walked {
        self.epoch += 1;
        if !self.wide.is_empty() {
            let visited = self.walk_memo(state * self.stride);
            return self.finish(Vec::new(), visited);
        }
        let mut successors = Vec::new();
        let visited = self.walk_below(0, state * self.stride, Some(&mut successors), None);
        self.finish(successors, visited)
    }

    /// [`Self::walk`] from the premultiplied `state`, through the memo: the
    /// root's children one by one, each subtree in a wide state looked up or
    /// walked and remembered.
    fn walk_memo(&mut self, state: u32) -> u64 {
        let trie = self.trie;
        let mut visited = 0;
        let mut i = 1;
        while i < trie.nodes.len() {
            let node = trie.nodes[i];
            visited += 1;
            let s = self.trans[(state + self.classes[node.byte as usize] as u32) as usize];
            let next = node.next as usize;
            if s == DEAD {
                i = next;
                continue;
            }
            let (lo, hi) = (
                trie.token_start[i] as usize,
                trie.token_start[i + 1] as usize,
            );
            add_tokens(&mut self.bits, &trie.tokens[lo..hi]);
            self.count += hi - lo;
            if !self.wide[(s / self.stride) as usize] {
                visited += self.walk_below(i, s, None, None);
            } else if let Some(runs) = self.memo.get(&(i as u32, s)) {
                for &(lo, hi) in runs.iter() {
                    add_tokens(&mut self.bits, &trie.tokens[lo as usize..hi as usize]);
                    self.count += (hi - lo) as usize;
                }
            } else {
                let mut runs = Vec::new();
                visited += self.walk_below(i, s, None, Some(&mut runs));
                if self.memo_runs + runs.len() <= MAX_MEMO_RUNS {
                    self.memo_runs += runs.len();
                    self.memo.insert((i as u32, s), runs.into_boxed_slice());
                }
            }
            i = next;
        }
        visited
    }

    /// Walks the subtree below trie node `from` (the node itself excluded)
    /// from the premultiplied DFA state `state`, adding the tokens that
    /// survive to the row (and, when collecting, the states they reach to
    /// `successors`, and their positions in `trie.tokens`, as runs, to
    /// `runs`). Returns the nodes visited.
    fn walk_below(
        &mut self,
        from: usize,
        state: u32,
        mut successors: Option<&mut Vec<u32>>,
        mut runs: Option<&mut Vec<(u32, u32)>>,
    ) -> u64 {
        let nodes = &self.trie.nodes[..];
        let token_start = &self.trie.token_start[..];
        let tokens = &self.trie.tokens[..];
        let trans = self.trans;
        let classes = self.classes;
        let stride = self.stride;
        let stack = &mut self.stack[..];
        stack[nodes[from].depth as usize] = state;
        let mut visited = 0u64;
        let mut i = from + 1;
        let end = nodes[from].next as usize;
        while i < end {
            let node = nodes[i];
            visited += 1;
            let depth = node.depth as usize;
            let s = trans[(stack[depth - 1] + classes[node.byte as usize] as u32) as usize];
            if s == DEAD {
                i = node.next as usize;
                continue;
            }
            stack[depth] = s;
            let (lo, hi) = (token_start[i] as usize, token_start[i + 1] as usize);
            if lo != hi {
                add_tokens(&mut self.bits, &tokens[lo..hi]);
                self.count += hi - lo;
                if let Some(runs) = runs.as_deref_mut() {
                    match runs.last_mut() {
                        Some(last) if last.1 as usize == lo => last.1 = hi as u32,
                        _ => runs.push((lo as u32, hi as u32)),
                    }
                }
                if self.successors
                    && let Some(successors) = successors.as_deref_mut()
                {
                    let s = s / stride;
                    if self.seen[s as usize] != self.epoch {
                        self.seen[s as usize] = self.epoch;
                        successors.push(s);
                    }
                }
            }
            i += 1;
        }
        visited
    }

    /// The walk from the entry of `region` that stops where a token leaves
    /// the region: the tokens that stay inside, and the frontier. Frontier
    /// entries are in canonical terms, so the walk serves every state whose
    /// region has the same form.
    fn walk_region(&mut self, region: &Region) -> RegionWalk {
        let nodes = &self.trie.nodes[..];
        let token_start = &self.trie.token_start[..];
        let tokens = &self.trie.tokens[..];
        let trans = self.trans;
        let classes = self.classes;
        let stride = self.stride;
        // Canonical index + 1 of each region state, 0 outside.
        let mut canon = vec![0u32; trans.len() / stride as usize];
        for (i, &q) in region.actual.iter().enumerate() {
            canon[q as usize] = i as u32 + 1;
        }
        let stack = &mut self.stack[..];
        stack[0] = region.actual[0] * stride;
        let mut inside = vec![0u32; self.words];
        let mut inside_count = 0;
        let mut frontier = Vec::new();
        let mut visited = 0u64;
        let mut i = 1;
        while i < nodes.len() {
            let node = nodes[i];
            visited += 1;
            let depth = node.depth as usize;
            let parent = stack[depth - 1];
            let class = classes[node.byte as usize];
            let s = trans[(parent + class as u32) as usize];
            if s == DEAD {
                i = node.next as usize;
                continue;
            }
            if canon[(s / stride) as usize] == 0 {
                frontier.push(Frontier {
                    node: i as u32,
                    from: canon[(parent / stride) as usize] - 1,
                });
                i = node.next as usize;
                continue;
            }
            stack[depth] = s;
            let (lo, hi) = (token_start[i] as usize, token_start[i + 1] as usize);
            add_tokens(&mut inside, &tokens[lo..hi]);
            inside_count += hi - lo;
            i += 1;
        }
        RegionWalk {
            inside,
            inside_count,
            frontier,
            visited,
        }
    }

    /// The row of `region`'s entry from the walk of a region of the same
    /// form: the tokens inside, plus each frontier node's tokens and subtree
    /// walked from where this region's transition leads.
    fn expand(&mut self, region: &Region, walk: &RegionWalk) -> Walked {
        self.bits.copy_from_slice(&walk.inside);
        self.count = walk.inside_count;
        let mut visited = 0;
        for f in &walk.frontier {
            let from = region.actual[f.from as usize] * self.stride;
            let class = self.classes[self.trie.nodes[f.node as usize].byte as usize];
            let s = self.trans[(from + class as u32) as usize];
            debug_assert!(
                s != DEAD,
                "a frontier transition is live in every region of its form"
            );
            let i = f.node as usize;
            let (lo, hi) = (
                self.trie.token_start[i] as usize,
                self.trie.token_start[i + 1] as usize,
            );
            add_tokens(&mut self.bits, &self.trie.tokens[lo..hi]);
            self.count += hi - lo;
            visited += self.walk_below(i, s, None, None);
        }
        self.finish(Vec::new(), visited)
    }

    /// The row walked into `bits`, which it leaves clear.
    fn finish(&mut self, successors: Vec<u32>, visited: u64) -> Walked {
        let row = if self.count * SPARSE_DIVISOR <= self.words {
            let mut ids = Vec::with_capacity(self.count);
            for (w, word) in self.bits.iter_mut().enumerate() {
                let mut x = std::mem::take(word);
                while x != 0 {
                    ids.push(w as u32 * 32 + x.trailing_zeros());
                    x &= x - 1;
                }
            }
            Row::Sparse(ids.into_boxed_slice())
        } else {
            let row = Row::Dense(self.bits.as_slice().into());
            self.bits.fill(0);
            row
        };
        self.count = 0;
        let hash = match &row {
            Row::Dense(w) => hash_words(w, 1),
            Row::Sparse(w) => hash_words(w, 2),
        };
        Walked {
            row,
            hash,
            successors,
            visited,
        }
    }
}

/// Sets the bits of `tokens` in the row `bits`.
#[inline]
fn add_tokens(bits: &mut [u32], tokens: &[u32]) {
    for &t in tokens {
        bits[t as usize / 32] |= 1 << (t % 32);
    }
}

/// Whether every byte the DFA can take anywhere is also a single-byte
/// grammar token. Then every byte string is a token sequence, so the states
/// whole tokens reach from the start are the states bytes reach (all of
/// them), and no live state is stuck: the build needs no successor sets.
fn bytes_are_tokens(dfa: &ByteDfa, trie: &TokenTrie) -> bool {
    let mut single = [false; 256];
    let nodes = &trie.nodes;
    let mut i = 1;
    while i < nodes.len() {
        if trie.token_start[i] != trie.token_start[i + 1] {
            single[nodes[i].byte as usize] = true;
        }
        i = nodes[i].next as usize;
    }
    let mut live_class = vec![false; dfa.num_classes()];
    for s in 1..dfa.num_states() as u32 {
        for (c, &t) in dfa.row(s).iter().enumerate() {
            live_class[c] |= t != DEAD;
        }
    }
    (0..=255u8).all(|b| single[b as usize] || !live_class[dfa.class_of(b)])
}

/// Blocks of states whose rows are certainly identical: states that no
/// string of at most `depth` bytes tells apart by whether it leads to the
/// dead state. A token of at most `depth` bytes is in the row of `p` exactly
/// when it does not lead `p` to the dead state, so with `depth` the longest
/// token, states of one block have one row. This catches what minimization
/// cannot merge: e.g. the counter states of `[^"]{0,1000}"` that are more
/// than `depth` bytes from their bound.
///
/// Moore refinement of {dead, live}, at most `depth` rounds; a round
/// recomputes only the states with a successor that moved in the previous
/// one. Returns the block of each state (block 0 = the dead state) and the
/// number of blocks.
fn row_blocks(dfa: &ByteDfa, depth: usize) -> (Vec<u32>, usize) {
    let n = dfa.num_states();
    let k = dfa.num_classes();
    let mut block = vec![1u32; n];
    block[DEAD as usize] = 0;
    if n <= 2 {
        return (block, n);
    }
    let (off, preds) = live_preds(dfa);
    // Refinable partition: block b owns elems[first[b]..end[b]].
    let mut elems: Vec<u32> = (0..n as u32).collect();
    let mut loc: Vec<usize> = (0..n).collect();
    let mut first = vec![0usize, 1];
    let mut end = vec![1usize, n];
    let mut marked = vec![0usize; 2];
    let mut dirty: Vec<u32> = (1..n as u32).collect();
    let mut is_dirty = vec![false; n];
    let mut touched: Vec<u32> = Vec::new();
    // Per touched block: its dirty members grouped by signature, the
    // staying group last, and the lengths of the moving groups.
    let mut plans: Vec<(u32, Vec<u32>, Vec<usize>)> = Vec::new();
    let mut sig: Vec<u32> = Vec::new();
    let mut stay: Vec<u32> = vec![0; k];
    let mut moved: Vec<u32> = Vec::new();
    for _round in 0..depth {
        if dirty.is_empty() {
            break;
        }
        // Move the dirty states to the front of their blocks.
        for &q in &dirty {
            let b = block[q as usize] as usize;
            let pos = loc[q as usize];
            let front = first[b] + marked[b];
            if marked[b] == 0 {
                touched.push(b as u32);
            }
            let other = elems[front];
            elems.swap(pos, front);
            loc[other as usize] = pos;
            loc[q as usize] = front;
            marked[b] += 1;
        }
        // Plan every split from the block ids of the previous round.
        for &b in &touched {
            let b = b as usize;
            let m = std::mem::take(&mut marked[b]);
            let members = &elems[first[b]..first[b] + m];
            sig.clear();
            for &q in members {
                sig.extend(dfa.row(q).iter().map(|&t| block[t as usize]));
            }
            let sig_of = |i: usize| &sig[i * k..(i + 1) * k];
            let mut order: Vec<usize> = (0..m).collect();
            order.sort_unstable_by(|&x, &y| sig_of(x).cmp(sig_of(y)));
            // Groups of equal signatures, as ranges of `order`.
            let mut groups: Vec<(usize, usize)> = Vec::new();
            let mut lo = 0;
            for i in 1..=m {
                if i == m || sig_of(order[i]) != sig_of(order[lo]) {
                    groups.push((lo, i));
                    lo = i;
                }
            }
            // The group that keeps the block: the one that agrees with the
            // members that are not dirty (their signature is unchanged), or
            // the largest when all are dirty.
            let staying = if m < end[b] - first[b] {
                let rest = elems[first[b] + m];
                for (c, &t) in dfa.row(rest).iter().enumerate() {
                    stay[c] = block[t as usize];
                }
                groups
                    .iter()
                    .position(|&(lo, _)| sig_of(order[lo]) == &stay[..])
            } else {
                (0..groups.len()).max_by_key(|&g| groups[g].1 - groups[g].0)
            };
            if groups.len() == 1 && staying == Some(0) {
                continue;
            }
            let mut arranged = Vec::with_capacity(m);
            let mut cuts = Vec::new();
            for (g, &(lo, hi)) in groups.iter().enumerate() {
                if Some(g) != staying {
                    arranged.extend(order[lo..hi].iter().map(|&i| members[i]));
                    cuts.push(hi - lo);
                }
            }
            if let Some(g) = staying {
                let (lo, hi) = groups[g];
                arranged.extend(order[lo..hi].iter().map(|&i| members[i]));
            }
            plans.push((b as u32, arranged, cuts));
        }
        touched.clear();
        // Apply the splits.
        moved.clear();
        for (b, arranged, cuts) in plans.drain(..) {
            let b = b as usize;
            let base = first[b];
            for (i, &q) in arranged.iter().enumerate() {
                elems[base + i] = q;
                loc[q as usize] = base + i;
            }
            let mut pos = base;
            for len in cuts {
                let nb = first.len() as u32;
                first.push(pos);
                end.push(pos + len);
                marked.push(0);
                for &q in &elems[pos..pos + len] {
                    block[q as usize] = nb;
                    moved.push(q);
                }
                pos += len;
            }
            first[b] = pos;
        }
        dirty.clear();
        for &q in &moved {
            for &p in &preds[off[q as usize] as usize..off[q as usize + 1] as usize] {
                if !is_dirty[p as usize] {
                    is_dirty[p as usize] = true;
                    dirty.push(p);
                }
            }
        }
        for &p in &dirty {
            is_dirty[p as usize] = false;
        }
    }
    (block, first.len())
}

/// How each representative state is walked.
enum Plan {
    /// A full walk of its own.
    Alone,
    /// The region walk `walk` of [`Plans::walks`], expanded.
    Shared { region: Region, walk: usize },
}

struct Plans {
    /// One per representative, in order.
    plans: Vec<Plan>,
    walks: Vec<Arc<RegionWalk>>,
    /// Of `walks`, those walked here (the rest came from the cache).
    walked: usize,
    nodes_visited: u64,
}

/// Plans the walks of `reps`. States whose region form occurs more than
/// once share one region walk; with a walk cache every region is walked
/// through it, so later builds find it.
fn share_regions(
    dfa: &ByteDfa,
    trans: &[u32],
    trie: &TokenTrie,
    words: usize,
    reps: &[u32],
    options: &IndexOptions,
    spent: &mut u64,
) -> Result<Plans, GrammarError> {
    let mut finder = RegionFinder::new(dfa);
    let regions: Vec<Option<Region>> = reps.iter().map(|&s| finder.region(s)).collect();
    // Distinct forms, numbered in first-seen order: (count, first rep).
    let mut forms: HashMap<&[u32], usize> = HashMap::new();
    let mut seen: Vec<(usize, usize)> = Vec::new();
    let form_of: Vec<Option<usize>> = regions
        .iter()
        .enumerate()
        .map(|(k, r)| {
            let r = r.as_ref()?;
            let id = *forms.entry(&r.form).or_insert_with(|| {
                seen.push((0, k));
                seen.len() - 1
            });
            seen[id].0 += 1;
            Some(id)
        })
        .collect();
    let caching = options.walk_cache_bytes > 0;
    // Forms worth a region walk, and where their walk will be.
    let mut walk_of = vec![None; seen.len()];
    let mut firsts = Vec::new();
    for (id, &(count, first)) in seen.iter().enumerate() {
        if caching || count > 1 {
            walk_of[id] = Some(firsts.len());
            firsts.push(first);
        }
    }
    let fingerprint = trie.fingerprint();
    let form = |k: usize| &regions[k].as_ref().expect("has a region").form;
    let mut walks: Vec<Option<Arc<RegionWalk>>> = firsts
        .iter()
        .map(|&k| {
            if caching {
                WalkCache::get(fingerprint, form(k))
            } else {
                None
            }
        })
        .collect();
    for walk in walks.iter().flatten() {
        charge(spent, walk.visited, options.max_work)?;
    }
    let missing: Vec<usize> = (0..walks.len()).filter(|&w| walks[w].is_none()).collect();
    let region_walk = |w: &mut Walker<'_>, &j: &usize| {
        Arc::new(w.walk_region(regions[firsts[j]].as_ref().expect("has a region")))
    };
    let mut walked: Vec<Arc<RegionWalk>> = Vec::with_capacity(missing.len());
    if options.parallel && missing.len() > 1 {
        for batch in missing.chunks(PARALLEL_BATCH) {
            options.cancel.check()?;
            let done: Vec<Arc<RegionWalk>> = batch
                .par_iter()
                .map_init(|| Walker::new(dfa, trans, trie, words, false), region_walk)
                .collect();
            for walk in done {
                charge(spent, walk.visited, options.max_work)?;
                walked.push(walk);
            }
        }
    } else {
        let mut walker = Walker::new(dfa, trans, trie, words, false);
        for j in &missing {
            options.cancel.check()?;
            let walk = region_walk(&mut walker, j);
            charge(spent, walk.visited, options.max_work)?;
            walked.push(walk);
        }
    }
    let nodes_visited = walked.iter().map(|w| w.visited).sum();
    for (&j, walk) in missing.iter().zip(walked) {
        if caching {
            let form = form(firsts[j]).clone();
            WalkCache::put(fingerprint, form, walk.clone(), options.walk_cache_bytes);
        }
        walks[j] = Some(walk);
    }
    let plans = regions
        .into_iter()
        .zip(form_of)
        .map(|(r, id)| match (r, id.and_then(|id| walk_of[id])) {
            (Some(region), Some(walk)) => Plan::Shared { region, walk },
            _ => Plan::Alone,
        })
        .collect();
    Ok(Plans {
        plans,
        walks: walks
            .into_iter()
            .map(|w| w.expect("walked or cached"))
            .collect(),
        walked: missing.len(),
        nodes_visited,
    })
}

/// Predecessors over live edges (from live states), in CSR form: the
/// predecessors of `t` are `preds[off[t]..off[t + 1]]`, one per edge.
fn live_preds(dfa: &ByteDfa) -> (Vec<u32>, Vec<u32>) {
    let n = dfa.num_states();
    let mut off = vec![0u32; n + 1];
    for s in 1..n as u32 {
        for &t in dfa.row(s) {
            if t != DEAD {
                off[t as usize + 1] += 1;
            }
        }
    }
    for i in 0..n {
        off[i + 1] += off[i];
    }
    let mut fill = off.clone();
    let mut preds = vec![0u32; off[n] as usize];
    for s in 1..n as u32 {
        for &t in dfa.row(s) {
            if t != DEAD {
                preds[fill[t as usize] as usize] = s;
                fill[t as usize] += 1;
            }
        }
    }
    (off, preds)
}

/// A fast non-cryptographic hash (FxHash-style) of a row.
fn hash_words(words: &[u32], seed: u64) -> u64 {
    let mut h = seed;
    for pair in words.chunks(2) {
        let v = pair[0] as u64 | (pair.get(1).copied().unwrap_or(0) as u64) << 32;
        h = (h.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    h
}

/// Deduplicating row store.
struct RowStore {
    rows: Vec<Row>,
    by_hash: HashMap<u64, Vec<u32>>,
    bytes: usize,
    max_bytes: usize,
}

impl RowStore {
    fn insert(&mut self, row: Row, hash: u64) -> Result<u32, GrammarError> {
        let candidates = self.by_hash.entry(hash).or_default();
        if let Some(&id) = candidates.iter().find(|&&id| self.rows[id as usize] == row) {
            return Ok(id);
        }
        self.bytes += row.bytes();
        if self.bytes > self.max_bytes {
            return Err(GrammarError::LimitExceeded {
                what: format!("the token index ({} bytes and counting)", self.bytes),
                limit: self.max_bytes,
                knob: "max_index_bytes".into(),
            });
        }
        let id = self.rows.len() as u32;
        candidates.push(id);
        self.rows.push(row);
        Ok(id)
    }
}

impl TokenIndex {
    /// Builds the index of `dfa` over `trie`, with rows of `words` words.
    pub(crate) fn build(
        dfa: &ByteDfa,
        trie: &TokenTrie,
        words: usize,
        options: &IndexOptions,
    ) -> Result<TokenIndex, GrammarError> {
        Self::build_with(dfa, trie, words, options, true)
    }

    /// [`build`](Self::build); `share_rows: false` walks every state (the
    /// reference the shared walks are tested against).
    fn build_with(
        dfa: &ByteDfa,
        trie: &TokenTrie,
        words: usize,
        options: &IndexOptions,
        share_rows: bool,
    ) -> Result<TokenIndex, GrammarError> {
        options.cancel.check()?;
        let n = dfa.num_states();
        let mut store = RowStore {
            rows: vec![Row::Sparse(Box::new([]))],
            by_hash: HashMap::new(),
            bytes: n * 4,
            max_bytes: options.max_bytes,
        };
        let empty_hash = hash_words(&[], 2);
        store.by_hash.insert(empty_hash, vec![0]);
        let mut state_row = vec![0u32; n];
        let mut visited = 0u64;
        // Work charged to `max_compile_work`: `visited`, plus the cached
        // region walks at their original cost.
        let mut spent = 0u64;
        let (mut region_walks, mut region_cache_hits, mut region_states) = (0, 0, 0);
        let trans = premultiplied(dfa);
        let (token_reachable_states, stuck_states) = if share_rows && bytes_are_tokens(dfa, trie) {
            // Every live state is token-reachable and none is stuck, so
            // only rows are needed, one walk per block of states that
            // certainly share their row.
            let (block, blocks) = row_blocks(dfa, trie.max_depth);
            let mut reps: Vec<u32> = vec![DEAD; blocks];
            for s in (1..n as u32).rev() {
                reps[block[s as usize] as usize] = s;
            }
            let reps: Vec<u32> = reps.into_iter().filter(|&s| s != DEAD).collect();
            let plans = share_regions(dfa, &trans, trie, words, &reps, options, &mut spent)?;
            let wide: Vec<bool> = (0..n as u32).map(|s| region::is_wide(dfa, s)).collect();
            let mut block_row = vec![0u32; blocks];
            let mut record = |s: u32, w: Walked, store: &mut RowStore| {
                options.cancel.check()?;
                charge(&mut spent, w.visited, options.max_work)?;
                block_row[block[s as usize] as usize] = store.insert(w.row, w.hash)?;
                visited += w.visited;
                Ok::<(), GrammarError>(())
            };
            let walk = |w: &mut Walker<'_>, (s, plan): (u32, &Plan)| match plan {
                Plan::Alone => w.walk(s),
                Plan::Shared { region, walk } => w.expand(region, &plans.walks[*walk]),
            };
            let jobs: Vec<(u32, &Plan)> = reps.iter().copied().zip(&plans.plans).collect();
            if options.parallel && reps.len() > 1 {
                for batch in jobs.chunks(PARALLEL_BATCH) {
                    let walked: Vec<Walked> = batch
                        .par_iter()
                        .map_init(
                            || Walker::new(dfa, &trans, trie, words, false).with_memo(&wide),
                            |w, &job| walk(w, job),
                        )
                        .collect();
                    for (&(s, _), w) in batch.iter().zip(walked) {
                        record(s, w, &mut store)?;
                    }
                }
            } else {
                let mut walker = Walker::new(dfa, &trans, trie, words, false).with_memo(&wide);
                for &job in &jobs {
                    let w = walk(&mut walker, job);
                    record(job.0, w, &mut store)?;
                }
            }
            visited += plans.nodes_visited;
            region_walks = plans.walked;
            region_cache_hits = plans.walks.len() - plans.walked;
            region_states = plans
                .plans
                .iter()
                .filter(|p| matches!(p, Plan::Shared { .. }))
                .count();
            for s in 1..n {
                state_row[s] = block_row[block[s] as usize];
            }
            (n - 1, 0)
        } else {
            Self::walk_every_state(
                dfa,
                &trans,
                trie,
                words,
                options,
                &mut store,
                &mut state_row,
                &mut visited,
                &mut spent,
            )?
        };
        let (dense_rows, sparse_rows) = store.rows.iter().fold((0, 0), |(d, s), r| match r {
            Row::Dense(_) => (d + 1, s),
            Row::Sparse(_) => (d, s + 1),
        });
        let stats = IndexStats {
            states: n,
            unique_rows: store.rows.len(),
            dense_rows,
            sparse_rows,
            bytes: store.bytes,
            nodes_visited: visited,
            region_walks,
            region_cache_hits,
            region_states,
            token_reachable_states,
            stuck_states,
        };
        Ok(TokenIndex {
            rows: store.rows,
            state_row,
            words,
            stats,
        })
    }

    /// One walk per state, collecting the states whole tokens lead to:
    /// needed when some byte the DFA takes is no single-byte token, to find
    /// the states tokens reach and those no token continues. Returns the
    /// number of each.
    #[allow(clippy::too_many_arguments)]
    fn walk_every_state(
        dfa: &ByteDfa,
        trans: &[u32],
        trie: &TokenTrie,
        words: usize,
        options: &IndexOptions,
        store: &mut RowStore,
        state_row: &mut [u32],
        visited: &mut u64,
        spent: &mut u64,
    ) -> Result<(usize, usize), GrammarError> {
        let n = dfa.num_states();
        let parallel = options.parallel;
        let mut successors: Vec<Vec<u32>> = vec![Vec::new(); n];
        let mut record = |s: u32, w: Walked, store: &mut RowStore| -> Result<(), GrammarError> {
            options.cancel.check()?;
            charge(spent, w.visited, options.max_work)?;
            state_row[s as usize] = store.insert(w.row, w.hash)?;
            successors[s as usize] = w.successors;
            *visited += w.visited;
            Ok(())
        };
        if parallel && n > 2 {
            let states: Vec<u32> = (1..n as u32).collect();
            for batch in states.chunks(PARALLEL_BATCH) {
                let walked: Vec<Walked> = batch
                    .par_iter()
                    .map_init(
                        || Walker::new(dfa, trans, trie, words, true),
                        |w, &s| w.walk(s),
                    )
                    .collect();
                for (&s, w) in batch.iter().zip(walked) {
                    record(s, w, store)?;
                }
            }
        } else {
            let mut walker = Walker::new(dfa, trans, trie, words, true);
            for s in 1..n as u32 {
                let w = walker.walk(s);
                record(s, w, store)?;
            }
        }

        // Which states can whole tokens reach, and can any of them not go on?
        let mut reachable = vec![false; n];
        reachable[dfa.start() as usize] = true;
        let mut queue = vec![dfa.start()];
        let mut any_accepting = false;
        let mut stuck = Vec::new();
        while let Some(s) = queue.pop() {
            let accepting = dfa.is_accepting(s);
            any_accepting |= accepting;
            if !accepting && state_row[s as usize] == 0 {
                stuck.push(s);
            }
            for &t in &successors[s as usize] {
                if !reachable[t as usize] {
                    reachable[t as usize] = true;
                    queue.push(t);
                }
            }
        }
        let start_stuck = stuck.contains(&dfa.start());
        if start_stuck || !any_accepting {
            let at = if start_stuck {
                dfa.start()
            } else {
                stuck.first().copied().unwrap_or(dfa.start())
            };
            return Err(GrammarError::Vocabulary {
                location: Location::None,
                message: format!(
                    "no sequence of tokens of this vocabulary can complete the output: {} no token \
                     continues it, while the regex expects one of the bytes {}",
                    if start_stuck {
                        "at the start".to_string()
                    } else {
                        format!("in DFA state {at}")
                    },
                    show_bytes(&dfa.live_bytes(at))
                ),
            });
        }
        Ok((reachable.iter().filter(|r| **r).count(), stuck.len()))
    }

    /// Writes the row of `state` (no stop tokens) into `out`, overwriting
    /// every word. A row shorter or longer than the vocabulary's is filled
    /// as far as both go and the rest cleared.
    #[inline]
    pub fn fill(&self, state: u32, out: &mut [u32]) {
        match &self.rows[self.state_row[state as usize] as usize] {
            Row::Dense(words) => {
                let n = out.len().min(words.len());
                out[..n].copy_from_slice(&words[..n]);
                out[n..].fill(0);
            }
            Row::Sparse(ids) => {
                out.fill(0);
                for &id in ids.iter() {
                    if let Some(w) = out.get_mut(id as usize / 32) {
                        *w |= 1 << (id % 32);
                    }
                }
            }
        }
    }

    /// Is `token` in the row of `state`?
    pub fn allows(&self, state: u32, token: u32) -> bool {
        match &self.rows[self.state_row[state as usize] as usize] {
            Row::Dense(words) => words
                .get(token as usize / 32)
                .is_some_and(|w| w >> (token % 32) & 1 == 1),
            Row::Sparse(ids) => ids.binary_search(&token).is_ok(),
        }
    }

    /// Words per row.
    pub fn words(&self) -> usize {
        self.words
    }

    pub fn stats(&self) -> &IndexStats {
        &self.stats
    }
}

fn show_bytes(bytes: &[u8]) -> String {
    let shown: Vec<String> = bytes
        .iter()
        .take(16)
        .map(|&b| {
            if b.is_ascii_graphic() || b == b' ' {
                format!("'{}'", b as char)
            } else {
                format!("0x{b:02X}")
            }
        })
        .collect();
    let more = if bytes.len() > 16 {
        format!(" and {} more", bytes.len() - 16)
    } else {
        String::new()
    };
    format!("[{}{more}]", shown.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokensieve_automata::DfaLimits;
    use tokensieve_core::Vocabulary;
    use tokensieve_core::vocab::fixtures;

    fn dfa(pattern: &str) -> ByteDfa {
        ByteDfa::build(
            pattern,
            &DfaLimits {
                nfa_size_limit: 10 << 20,
                dfa_size_limit: 32 << 20,
                determinize_size_limit: 32 << 20,
                max_dfa_states: 50_000,
                minimize: true,
            },
        )
        .unwrap()
    }

    const PATTERNS: &[&str] = &[
        r#"\{"name":"[^"\\]{0,40}","age":-?(0|[1-9][0-9]{0,5})\}"#,
        r#""([^"\\\x00-\x1F]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4}){2,300}""#,
        r"[a-z]{3,70}( [a-z]{0,9}){0,4}",
        r"(ab|abc|abcd){1,12}x?",
        r"[ \t\n]{0,20}(true|false|null|[0-9]{1,30})[ \t\n]{0,20}",
        r"é{2,40}|ü+",
        r"(?s).{0,150}",
    ];

    /// Free text in which the trigger `<f=` opens a tag: the trigger's
    /// prefixes fall back into the free-text loop after one byte, so their
    /// walks reuse the loop's subtrees (the walk memo).
    fn tagged() -> String {
        let tag = tokensieve_grammar::Tag {
            trigger: 0,
            regex: "<f=[0-9]{1,3}>".into(),
        };
        tokensieve_grammar::regular::tagged_text(
            &["<f="],
            &[tag],
            &tokensieve_grammar::RegularLimits::default(),
        )
        .unwrap()
    }

    /// Several copies of the JSON string body with different exits: states
    /// that share a region walk.
    fn string_loops() -> String {
        let body = r#"([^"\\\x00-\x1F]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"#;
        format!(r#"\{{"a":"{body}","b":"{body}","c":\["{body}"(,"{body}")*\],"d":"{body}"(1|2)\}}"#)
    }

    /// Every state's row, and the reachability counters, of the shared
    /// build are those of one walk per state.
    /// Returns the number of states whose rows came from shared region walks.
    fn check_shared_rows(vocab: &Vocabulary, patterns: &[&str]) -> usize {
        let trie = TokenTrie::new(vocab);
        let words = vocab.mask_words();
        let mut region_states = 0;
        for &p in patterns {
            let dfa = dfa(p);
            let every = TokenIndex::build_with(&dfa, &trie, words, &options(0), false);
            let shared = TokenIndex::build_with(&dfa, &trie, words, &options(0), true);
            // Through the walk cache: a first build, and one that finds
            // every region walk there.
            let cached = TokenIndex::build_with(&dfa, &trie, words, &options(64 << 20), true);
            let again = TokenIndex::build_with(&dfa, &trie, words, &options(64 << 20), true);
            let (every, shared) = match (every, shared) {
                (Ok(e), Ok(s)) => (e, s),
                (Err(e), Err(s)) => {
                    assert_eq!(e.to_string(), s.to_string(), "{p}");
                    continue;
                }
                (e, s) => panic!("{p}: {e:?} vs {s:?}"),
            };
            let (cached, again) = (cached.unwrap(), again.unwrap());
            let (c, g) = (cached.stats(), again.stats());
            assert_eq!(g.region_walks, 0, "{p}: the second build walked a region");
            assert_eq!(
                g.region_cache_hits,
                c.region_walks + c.region_cache_hits,
                "{p}"
            );
            let (mut a, mut b) = (vec![0u32; words], vec![0u32; words]);
            for s in 0..dfa.num_states() as u32 {
                every.fill(s, &mut a);
                for index in [&shared, &cached, &again] {
                    index.fill(s, &mut b);
                    assert!(a == b, "{p}: row of state {s} differs");
                }
                // Small vocabularies: against the definition, token by token.
                if vocab.vocab_size() <= 4096 && s != DEAD {
                    for (id, bytes) in vocab.grammar_tokens() {
                        let expected = dfa.walk(s, bytes).is_ok_and(|t| t != DEAD);
                        assert_eq!(
                            a[id as usize / 32] >> (id % 32) & 1 == 1,
                            expected,
                            "{p}: state {s}, token {id} {bytes:?}"
                        );
                    }
                }
            }
            let (e, s) = (every.stats(), shared.stats());
            assert_eq!(e.unique_rows, s.unique_rows, "{p}");
            assert_eq!(e.bytes, s.bytes, "{p}");
            assert_eq!(e.stuck_states, s.stuck_states, "{p}");
            assert_eq!(e.token_reachable_states, s.token_reachable_states, "{p}");
            assert!(s.nodes_visited <= e.nodes_visited, "{p}");
            region_states += s.region_states.min(c.region_states);
        }
        region_states
    }

    fn options(walk_cache_bytes: usize) -> IndexOptions {
        IndexOptions {
            max_work: u64::MAX,
            max_bytes: usize::MAX,
            parallel: false,
            walk_cache_bytes,
            cancel: CancelToken::new(),
        }
    }

    #[test]
    fn shared_rows_match_per_state_walks() {
        // json_tiny lacks single-byte tokens: the per-state path.
        let (loops, tagged) = (string_loops(), tagged());
        let patterns: Vec<&str> = PATTERNS
            .iter()
            .copied()
            .chain([loops.as_str(), tagged.as_str()])
            .collect();
        check_shared_rows(&fixtures::json_tiny(), &patterns);
        // Every byte a token, plus longer ones: the shared path, with
        // tokens longer than some counters' bounds.
        let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        for t in [
            "ab",
            "abc",
            "abcd",
            "abcdabcd",
            "aaaa",
            "aaaaaaaaaaaa",
            "  ",
            "    ",
            "\t\n",
            "12",
            "1234567890",
            "true",
            "false",
            "null",
            "\"na",
            "\":",
            "é",
            "éé",
            "ü",
            "\\u00",
            "xyz xyz",
            " the",
            "0123456789012345678901234567890123456789",
        ] {
            tokens.push(t.as_bytes().to_vec());
        }
        let v = Vocabulary::from_byte_tokens(tokens);
        assert!(
            check_shared_rows(&v, &patterns) > 0,
            "no state shared a region walk"
        );
    }

    #[test]
    fn shared_rows_match_per_state_walks_on_llama3() {
        let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/data/tokenizers/llama3/tokenizer.json");
        if !path.is_file() {
            tokensieve_core::skip!("{} not found", path.display());
            return;
        }
        let vocab = tokensieve_core::hf::HfTokenizer::from_file(&path)
            .unwrap()
            .into_vocabulary();
        let loops = string_loops();
        let patterns: Vec<&str> = PATTERNS.iter().copied().chain([loops.as_str()]).collect();
        assert!(
            check_shared_rows(&vocab, &patterns) > 0,
            "no state shared a region walk"
        );
        // Real MaskBench regexes, when the data is there.
        let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/data/maskbench-dev");
        let mut regexes = Vec::new();
        for name in [
            "Github_easy---o9883.json",
            "Github_medium---o82676.json",
            "Github_medium---o67465.json",
            "BFCL_sql_92.json",
            "Kubernetes---kb_1085_Normalized.json",
        ] {
            let Ok(file) = tokensieve_core::maskbench::MaskBenchFile::load(&dir.join(name)) else {
                continue;
            };
            let options = tokensieve_core::SpecOptions::default();
            if let Ok(r) =
                tokensieve_json_schema::schema_to_regex(&file.schema.to_string(), &options, 20)
            {
                regexes.push(r);
            }
        }
        let regexes: Vec<&str> = regexes.iter().map(String::as_str).collect();
        check_shared_rows(&vocab, &regexes);
    }
}
