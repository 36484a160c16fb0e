//! Walks shared between states with isomorphic neighbourhoods.
//!
//! A JSON schema's DFA holds many copies of the same loop: the body of every
//! free string, of every object key, of every string in an array. Each copy
//! allows nearly the whole vocabulary, so walking the trie from each costs a
//! full trie walk, and minimization cannot merge them because what follows
//! the closing quote differs. Their rows differ only in tokens that leave the
//! loop.
//!
//! The *region* of a state is the set of states on short cycles through it
//! (at most [`REGION_CYCLE`] transitions), numbered breadth-first in byte
//! order from the state, and its *form* lists every region state's
//! transition on every byte in that numbering (inside, dead, or leaving the
//! region). Two states with the same form have isomorphic regions, so one
//! walk of the region serves both: the tokens that never leave it are the
//! same, and the trie nodes where a token leaves it (the frontier) are the
//! same, with the same canonical state before the edge. Each state then walks
//! only the subtrees below its frontier, from where its own transitions lead.
//! The row is exactly the one a full walk gives, whatever the region is; the
//! region's shape only decides how much is shared.
//!
//! Forms are over bytes, not the DFA's byte classes, so a walk depends only
//! on the form and the vocabulary: [`WalkCache`] keeps walks across builds
//! (the JSON string body of one schema is that of the next).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use tokensieve_automata::{ByteDfa, DEAD};

/// A region holds the states on cycles through its entry of at most this
/// many transitions (a 4-byte UTF-8 character takes 4, a `\uXXXX` escape 6).
const REGION_CYCLE: u32 = 8;
/// Regions are cut to their first states in canonical order (the rest count
/// as outside), which bounds the size of a form.
const MAX_REGION: usize = 64;
/// Only states with at least this many live classes and a self-loop are
/// given a region: the loops whose walks are large. A cheap walk gains
/// nothing from sharing.
const MIN_LIVE_CLASSES: usize = 8;

/// Whether `state` is a wide loop: a self-loop and at least
/// [`MIN_LIVE_CLASSES`] live classes. Its trie walk is large, so it gets a
/// region, and walks that enter it memoize the subtrees they walk in it.
pub(super) fn is_wide(dfa: &ByteDfa, state: u32) -> bool {
    let row = dfa.row(state);
    state != DEAD
        && row.contains(&state)
        && row.iter().filter(|&&t| t != DEAD).count() >= MIN_LIVE_CLASSES
}

/// Form codes of transitions that do not stay in the region.
const CODE_DEAD: u32 = u32::MAX;
const CODE_EXIT: u32 = u32::MAX - 1;

/// The region of one state.
#[derive(Debug)]
pub(super) struct Region {
    /// Region states in canonical order; `actual[0]` is the entry.
    pub actual: Vec<u32>,
    /// Per canonical state, per byte: the canonical index of the target,
    /// [`CODE_DEAD`] or [`CODE_EXIT`].
    pub form: Arc<[u32]>,
}

/// One walk of a region, in canonical terms.
#[derive(Debug)]
pub(super) struct RegionWalk {
    /// Tokens whose bytes keep the entry inside the region (and alive), as
    /// a row of mask words, and how many.
    pub inside: Vec<u32>,
    pub inside_count: usize,
    /// Where tokens leave the region.
    pub frontier: Vec<Frontier>,
    pub visited: u64,
}

/// A trie node whose edge (its byte) leaves the region, taken from
/// canonical state `from`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Frontier {
    pub node: u32,
    pub from: u32,
}

impl RegionWalk {
    fn bytes(&self) -> usize {
        self.inside.len() * 4 + self.frontier.len() * std::mem::size_of::<Frontier>()
    }
}

/// Finds regions; holds the reverse edges and scratch marks.
pub(super) struct RegionFinder<'a> {
    dfa: &'a ByteDfa,
    pred_off: Vec<u32>,
    preds: Vec<u32>,
    /// Per state: epoch of the last forward visit, and its distance.
    fwd: Vec<(u32, u32)>,
    bwd: Vec<(u32, u32)>,
    /// Per state: epoch of its canonical numbering, and its index.
    canon: Vec<(u32, u32)>,
    epoch: u32,
    queue: Vec<u32>,
}

impl<'a> RegionFinder<'a> {
    pub fn new(dfa: &'a ByteDfa) -> Self {
        let (pred_off, preds) = super::live_preds(dfa);
        let n = dfa.num_states();
        RegionFinder {
            dfa,
            pred_off,
            preds,
            fwd: vec![(0, 0); n],
            bwd: vec![(0, 0); n],
            canon: vec![(0, 0); n],
            epoch: 0,
            queue: Vec::new(),
        }
    }

    /// The region of `state`, or `None` when it is not a wide loop (see
    /// [`MIN_LIVE_CLASSES`]).
    pub fn region(&mut self, state: u32) -> Option<Region> {
        if !is_wide(self.dfa, state) {
            return None;
        }
        self.epoch += 1;
        let epoch = self.epoch;
        // Distances from the entry, then to it, both bounded.
        self.bfs(state, true);
        self.bfs(state, false);
        let (fwd, bwd) = (&self.fwd, &self.bwd);
        let in_region = |q: u32| {
            let (f, b) = (fwd[q as usize], bwd[q as usize]);
            f.0 == epoch && b.0 == epoch && f.1 + b.1 <= REGION_CYCLE
        };
        let mut actual = vec![state];
        self.canon[state as usize] = (epoch, 0);
        let mut form = Vec::new();
        let mut i = 0;
        while i < actual.len() {
            for b in 0..=255u8 {
                let t = self.dfa.next(actual[i], b);
                let code = if t == DEAD {
                    CODE_DEAD
                } else if !in_region(t) {
                    CODE_EXIT
                } else if self.canon[t as usize].0 == epoch {
                    self.canon[t as usize].1
                } else if actual.len() < MAX_REGION {
                    self.canon[t as usize] = (epoch, actual.len() as u32);
                    actual.push(t);
                    actual.len() as u32 - 1
                } else {
                    CODE_EXIT
                };
                form.push(code);
            }
            i += 1;
        }
        Some(Region {
            actual,
            form: form.into(),
        })
    }

    /// Breadth-first distances (at most [`REGION_CYCLE`]) from `state`
    /// (`forward`) or to it, over live edges, marked with the current epoch.
    fn bfs(&mut self, state: u32, forward: bool) {
        let epoch = self.epoch;
        let marks = if forward {
            &mut self.fwd
        } else {
            &mut self.bwd
        };
        marks[state as usize] = (epoch, 0);
        self.queue.clear();
        self.queue.push(state);
        let mut head = 0;
        while head < self.queue.len() {
            let q = self.queue[head];
            head += 1;
            let d = marks[q as usize].1;
            if d == REGION_CYCLE {
                continue;
            }
            let next: &[u32] = if forward {
                self.dfa.row(q)
            } else {
                &self.preds
                    [self.pred_off[q as usize] as usize..self.pred_off[q as usize + 1] as usize]
            };
            for &t in next {
                if t != DEAD && marks[t as usize].0 != epoch {
                    marks[t as usize] = (epoch, d + 1);
                    self.queue.push(t);
                }
            }
        }
    }
}

/// Region walks kept across builds, keyed by vocabulary fingerprint and
/// form, oldest dropped first beyond a byte budget. Process-wide, like the
/// token trie.
pub(super) struct WalkCache {
    walks: HashMap<(u64, Arc<[u32]>), Arc<RegionWalk>>,
    order: VecDeque<(u64, Arc<[u32]>)>,
    bytes: usize,
}

static WALK_CACHE: Mutex<Option<WalkCache>> = Mutex::new(None);

impl WalkCache {
    /// Bytes an entry is charged: its walk and its key.
    fn charge(form: &[u32], walk: &RegionWalk) -> usize {
        walk.bytes() + form.len() * 4
    }

    /// The cached walk of `form` over the vocabulary `fingerprint`.
    pub fn get(fingerprint: u64, form: &Arc<[u32]>) -> Option<Arc<RegionWalk>> {
        let cache = WALK_CACHE.lock().unwrap_or_else(|e| e.into_inner());
        cache
            .as_ref()?
            .walks
            .get(&(fingerprint, form.clone()))
            .cloned()
    }

    /// Keeps `walk` under a budget of `max_bytes` for the whole cache (0:
    /// keep nothing).
    pub fn put(fingerprint: u64, form: Arc<[u32]>, walk: Arc<RegionWalk>, max_bytes: usize) {
        let charge = Self::charge(&form, &walk);
        if charge > max_bytes {
            return;
        }
        let mut guard = WALK_CACHE.lock().unwrap_or_else(|e| e.into_inner());
        let cache = guard.get_or_insert_with(|| WalkCache {
            walks: HashMap::new(),
            order: VecDeque::new(),
            bytes: 0,
        });
        let key = (fingerprint, form);
        if cache.walks.contains_key(&key) {
            return;
        }
        while cache.bytes + charge > max_bytes {
            let Some(old) = cache.order.pop_front() else {
                break;
            };
            if let Some(w) = cache.walks.remove(&old) {
                cache.bytes -= Self::charge(&old.1, &w);
            }
        }
        cache.bytes += charge;
        cache.order.push_back(key.clone());
        cache.walks.insert(key, walk);
    }
}
