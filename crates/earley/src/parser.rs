//! The Earley parser over lexemes: the grammar in its flat form ([`Cfg`]),
//! Earley items and sets, one byte of scanning ([`advance`]), and the
//! mask computation ([`fill_mask`]).
//!
//! Terminals are lexemes (byte DFAs, see [`crate::lexeme`]); an item sitting
//! before a lexeme carries that lexeme's DFA state, so a byte inside a
//! lexeme is one DFA step and the parser proper (prediction, completion)
//! runs only where a lexeme may end. Lexemes end non-deterministically:
//! when an item's DFA state is accepting, the set holds both the item (the
//! lexeme may go on) and its successor (it ended), so the language is
//! exactly the grammar's, with no greedy lexing.
//!
//! Sets are immutable and shared (`Arc`): an item's origin points at the
//! set its rule started in, so the chart is a graph of the sets still
//! referenced (a graph-structured stack). Forking a matcher copies one
//! pointer; sets no item refers to are freed. Empty rules are handled the
//! Aycock–Horspool way (predicting a nullable rule also moves past it), so
//! completion never looks into the set being built.
//!
//! A mask is a walk of the vocabulary's token trie with an Earley set (a
//! [`Level`]) per node on the way down. Where lexemes may end inside a
//! token, the walk goes on from the closure after them (a [`Chunk`]);
//! those exits are noted per node and walked in trie order, so each node
//! is walked once with every closure that reaches it, whatever the number
//! of ways its bytes split into lexemes ([`Walker::walk_exits`]). The
//! crate docs state what one step costs at most.

use hashbrown::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use tokensieve_automata::DEAD;
use tokensieve_core::StepError;
use tokensieve_core::TokenTrie;

use crate::lexeme::{
    BelowRoom, Lexeme, Runs, StateIndex, TokenSet, WHOLE_EXIT, exit_count_and_span, exits_of,
};

/// The multiply-rotate hash of rustc (FxHash): item keys are a few
/// integers, hashed on every step of a walk, where SipHash's resistance to
/// chosen inputs buys nothing and costs most of the time.
#[derive(Default, Clone, Copy)]
pub(crate) struct FxHasher(u64);

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    #[inline]
    fn write_u32(&mut self, n: u32) {
        self.write_u64(n as u64);
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

type FxBuild = BuildHasherDefault<FxHasher>;
type FxHashMap<K, V> = HashMap<K, V, FxBuild>;
type FxHashSet<K> = HashSet<K, FxBuild>;

/// [`Level::loops`] and [`Level::tried`].
type LoopBytes = ([u64; 2], [u64; 2]);

/// One symbol of the flat grammar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sym {
    /// A lexeme (index into [`Cfg::lexemes`]).
    Lex(u32),
    /// A rule reference.
    Rule(u32),
    /// The end of an alternative of this rule.
    End(u32),
}

/// The grammar as the parser walks it: every alternative of every rule laid
/// out in [`Cfg::syms`], each ended by [`Sym::End`]; a position in `syms`
/// is an LR(0) item (a dotted alternative).
#[derive(Debug)]
pub(crate) struct Cfg {
    pub syms: Vec<Sym>,
    /// Per rule, the positions where its alternatives start.
    pub alts: Vec<Vec<u32>>,
    pub nullable: Vec<bool>,
    pub lexemes: Vec<Arc<Lexeme>>,
    /// The position of the start rule's only alternative (`START ::= root`).
    pub start_pos: u32,
    /// The position of its end: a set holding it may end the output.
    pub accept_pos: u32,
    /// The bytes that may follow each lexeme position, made when a walk
    /// first asks ([`Cfg::follow`]).
    pub follow: FollowMemo,
    /// Per rule, what predicting it adds to a set, made when a closure
    /// first predicts it ([`Cfg::predictions`]).
    pub predictions: Box<[OnceLock<Predictions>]>,
}

impl Drop for Cfg {
    /// Frees the recipes of the lexemes made for this grammar (see
    /// [`Lexeme::release_recipe`]); a lexeme another grammar shares stays.
    fn drop(&mut self) {
        for lexeme in &self.lexemes {
            lexeme.release_recipe();
        }
    }
}

/// What predicting a rule adds to a set: the positions of the predictions
/// it leads to (its alternatives' starts, those of the rules they predict,
/// and the positions past empty rules and lexemes), in the order a closure
/// finds them, and the rules predicted on the way. All start in the set
/// itself, so they depend on the rule alone.
#[derive(Debug)]
pub(crate) struct Predictions {
    positions: Box<[u32]>,
    rules: Box<[u32]>,
}

/// What [`Cfg::follow`] has worked out: per rule the positions that refer
/// to it, and per position asked the bytes that may follow it.
#[derive(Debug, Default)]
pub(crate) struct FollowMemo {
    uses: OnceLock<Vec<Vec<u32>>>,
    bytes: Mutex<FxHashMap<u32, [u64; 4]>>,
    /// Per lexeme position and state of many exits, those that lead on
    /// ([`Walker::exits_leading`]).
    exits: Mutex<FxHashMap<(u32, u32), Arc<LeadingExits>>>,
    /// Lexeme walks below big subtrees, by lexeme position, state and
    /// node, with the heap bytes they hold ([`Walker::walk_lexemes_below`]).
    below: Mutex<(BelowWalks, usize)>,
}

/// A lexeme not made yet is made for [`Cfg::follow`] when it was charged
/// at most this many states at compile (about a quarter of its NFA's):
/// far below what `nfa_size_limit` refuses.
const FOLLOW_MAKES: usize = 4096;

/// Lexeme walks by lexeme position, state and trie node.
type BelowWalks = FxHashMap<(u32, u32, u32), Arc<BelowWalk>>;

/// One lexeme's walk below a trie node ([`Lexeme::walk_below`]): the runs
/// of tokens that stay in the lexeme, the exits that lead on (a subtree
/// at a time where every exit of it does, [`WHOLE_EXIT`]), and the work
/// the walk was charged. A walk whose runs hold at least
/// [`DENSE_RUN_TOKENS`] tokens keeps them as a mask row too, made when
/// the walk is read again.
#[derive(Debug)]
pub(crate) struct BelowWalk {
    runs: Vec<(u32, u32)>,
    exits: Vec<(u32, u32)>,
    work: usize,
    tokens: usize,
    row: OnceLock<Box<[u32]>>,
}

impl BelowWalk {
    /// Sets the walk's tokens in `row`: a kept row is or-ed in word by
    /// word, where the runs set a bit a token (a name's walk below a
    /// space keeps a thousand tokens or more, and the bits were 6% of C's
    /// mask instructions).
    fn set_tokens(&self, trie: &TokenTrie, row: &mut [u32]) {
        if self.tokens < DENSE_RUN_TOKENS {
            set_runs(trie, &self.runs, row);
            return;
        }
        let kept = self.row.get_or_init(|| {
            let mut kept = vec![0u32; row.len()];
            set_runs(trie, &self.runs, &mut kept);
            kept.into_boxed_slice()
        });
        // Rows of one vocabulary: one of another length is never narrowed.
        if kept.len() != row.len() {
            set_runs(trie, &self.runs, row);
            return;
        }
        for (w, k) in row.iter_mut().zip(kept.iter()) {
            *w |= k;
        }
    }
}

/// Sets in `row` the tokens of the trie's runs `runs`.
fn set_runs(trie: &TokenTrie, runs: &[(u32, u32)], row: &mut [u32]) {
    for &(a, b) in runs {
        for &t in &trie.tokens[a as usize..b as usize] {
            row[t as usize / 32] |= 1 << (t % 32);
        }
    }
}

/// A kept lexeme walk below a node whose runs hold at least this many
/// tokens sets them from a mask row of its own ([`BelowWalk::set_tokens`]).
/// Or-ing Llama 3's row of 4,008 words costs about what setting 400
/// tokens one by one does; on C's texts, walks of 1,024 tokens or more
/// set 57% of the tokens of kept walks.
const DENSE_RUN_TOKENS: usize = 1024;

/// A lexeme walk below a node with at least this many nodes in its
/// subtree is kept ([`FollowMemo::below`]): an identifier below a space
/// walks tens of thousands of nodes, and a C grammar starts one there
/// at nearly every mask.
const BELOW_MEMO_NODES: u32 = 256;

/// Heap bytes of the lexeme walks a grammar keeps; past them all are
/// dropped and the next walks kept afresh.
const BELOW_MEMO_BYTES: usize = 32 << 20;

/// The exits of a lexeme state at one position of the grammar that have
/// a child that may follow it (a subtree at a time where all of its do,
/// [`WHOLE_EXIT`]), and the trie nodes below those children (none listed
/// where those pass half the trie's nodes: see
/// [`Walker::exits_leading`]).
#[derive(Debug)]
pub(crate) struct LeadingExits {
    exits: Vec<(u32, u32)>,
    span: usize,
}

impl Cfg {
    /// What predicting rule `r` adds to a set ([`Predictions`]).
    fn predictions(&self, r: u32) -> &Predictions {
        self.predictions[r as usize].get_or_init(|| {
            let mut rules = Positions::new(self.alts.len());
            let mut seen = Positions::new(self.syms.len());
            rules.insert(r);
            let (mut positions, mut predicted) = (Vec::new(), vec![r]);
            for &alt in &self.alts[r as usize] {
                if seen.insert(alt) {
                    positions.push(alt);
                }
            }
            let mut k = 0;
            while k < positions.len() {
                let pos = positions[k];
                k += 1;
                let past = match self.syms[pos as usize] {
                    Sym::Lex(l) => self.lexemes[l as usize].accepts(self.initial(pos)),
                    Sym::Rule(r) => {
                        if rules.insert(r) {
                            predicted.push(r);
                            for &alt in &self.alts[r as usize] {
                                if seen.insert(alt) {
                                    positions.push(alt);
                                }
                            }
                        }
                        self.nullable[r as usize]
                    }
                    Sym::End(_) => false,
                };
                if past && seen.insert(pos + 1) {
                    positions.push(pos + 1);
                }
            }
            Predictions {
                positions: positions.into(),
                rules: predicted.into(),
            }
        })
    }

    /// The lexeme state an item at `pos` starts with.
    #[inline]
    fn initial(&self, pos: u32) -> u32 {
        match self.syms[pos as usize] {
            Sym::Lex(l) => self.lexemes[l as usize].start(),
            _ => 0,
        }
    }

    /// [`Cfg::advanced`] for an item of a chart set seen from a later set
    /// (`here`: the item's set).
    fn advanced_from(&self, item: &Item, here: &Origin) -> Item {
        Item {
            pos: item.pos + 1,
            lex: self.initial(item.pos + 1),
            origin: item.origin.rebased(here),
        }
    }

    fn advanced(&self, item: &Item) -> Item {
        Item {
            pos: item.pos + 1,
            lex: self.initial(item.pos + 1),
            origin: item.origin.clone(),
        }
    }

    /// The bytes that may come right after the symbol at `pos` in some
    /// sentence of the grammar (its FOLLOW set, in bytes): the first bytes
    /// of every lexeme that may start there, through empty lexemes and
    /// rules and through the ends of rules to every place that refers to
    /// them. A lexeme that ends at a trie node with no child among these
    /// bytes leads no token further, whatever the stack below it.
    ///
    /// Made the first time a position is asked, then kept: one search of
    /// the grammar, each rule expanded at most once each way, which makes
    /// the automata of the small lexemes that may follow (a big one not
    /// made yet counts as taking any byte, see [`FOLLOW_MAKES`]). Not
    /// charged to a step's budget: it is bounded by the grammar's size and
    /// made once per position.
    pub(crate) fn follow(&self, pos: u32) -> [u64; 4] {
        let known = self
            .follow
            .bytes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&pos)
            .copied();
        if let Some(f) = known {
            return f;
        }
        let uses = self.follow.uses.get_or_init(|| {
            let mut uses = vec![Vec::new(); self.alts.len()];
            for (q, s) in self.syms.iter().enumerate() {
                if let Sym::Rule(r) = s {
                    uses[*r as usize].push(q as u32);
                }
            }
            uses
        });
        let mut out = [0u64; 4];
        let mut first_done = vec![false; self.alts.len()];
        let mut follow_done = vec![false; self.alts.len()];
        // Positions to read from (rightwards), rules whose firsts to add.
        let mut positions = vec![pos + 1];
        let mut rules: Vec<u32> = Vec::new();
        loop {
            if let Some(r) = rules.pop() {
                for &a in &self.alts[r as usize] {
                    self.firsts_from(a, &mut out, &mut first_done, &mut rules);
                }
                continue;
            }
            let Some(q) = positions.pop() else {
                break;
            };
            if let Some(r) = self.firsts_from(q, &mut out, &mut first_done, &mut rules) {
                if !std::mem::replace(&mut follow_done[r as usize], true) {
                    positions.extend(uses[r as usize].iter().map(|&u| u + 1));
                }
            }
        }
        self.follow
            .bytes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(pos, out);
        out
    }

    /// Adds to `out` the first bytes of the lexemes at and after `q` up to
    /// the first that may not be empty, queueing the rules met (once each)
    /// in `rules`; the rule whose end it reached, if it did.
    fn firsts_from(
        &self,
        mut q: u32,
        out: &mut [u64; 4],
        first_done: &mut [bool],
        rules: &mut Vec<u32>,
    ) -> Option<u32> {
        loop {
            match self.syms[q as usize] {
                Sym::Lex(l) => {
                    let lexeme = &self.lexemes[l as usize];
                    // A lexeme no walk has entered yet is made here only if
                    // it is small: a big one's automaton might not fit its
                    // limit, and failing would stop a matcher that never
                    // reaches it. It counts as taking any byte.
                    if lexeme.made().is_some() || lexeme.compiled_states() <= FOLLOW_MAKES {
                        for (o, f) in out.iter_mut().zip(lexeme.first_bytes(lexeme.start())) {
                            *o |= f;
                        }
                    } else {
                        *out = [!0; 4];
                    }
                    if !lexeme.accepts(lexeme.start()) {
                        return None;
                    }
                }
                Sym::Rule(r) => {
                    if !std::mem::replace(&mut first_done[r as usize], true) {
                        rules.push(r);
                    }
                    if !self.nullable[r as usize] {
                        return None;
                    }
                }
                Sym::End(r) => return Some(r),
            }
            q += 1;
        }
    }

    /// Heap bytes of the lexeme indexes built so far and of the table.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.syms.len() * std::mem::size_of::<Sym>()
            + self.lexemes.iter().map(|l| l.memory_bytes()).sum::<usize>()
            + self.follow.memory_bytes()
    }
}

impl FollowMemo {
    /// Heap bytes of what it keeps: the rule index, the FOLLOW sets, the
    /// filtered exit lists and the kept lexeme walks.
    fn memory_bytes(&self) -> usize {
        let uses = self
            .uses
            .get()
            .map_or(0, |u| u.iter().map(|v| v.len() * 4 + 24).sum());
        let bytes = self.bytes.lock().unwrap_or_else(|e| e.into_inner()).len() * 40;
        let exits: usize = self
            .exits
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .map(|e| e.exits.len() * 8 + 48)
            .sum();
        let below = self.below.lock().unwrap_or_else(|e| e.into_inner()).1;
        uses + bytes + exits + below
    }
}

/// Where an item's rule started.
#[derive(Debug, Clone)]
pub(crate) enum Origin {
    /// In the set that holds the item.
    Here,
    /// In an earlier set of the chart.
    Set(Arc<ESet>),
    /// In level `k` of a mask walk (never stored in the chart).
    Local(u32),
}

impl Origin {
    /// What this origin means seen from a later set, when `Here` is `here`.
    #[inline]
    fn rebased(&self, here: &Origin) -> Origin {
        match self {
            Origin::Here => here.clone(),
            other => other.clone(),
        }
    }

    /// The walk level this origin is, if it is one.
    #[inline]
    fn level(&self) -> Option<u32> {
        match self {
            Origin::Local(k) => Some(*k),
            _ => None,
        }
    }

    #[inline]
    fn key(&self) -> usize {
        match self {
            Origin::Here => usize::MAX,
            Origin::Local(k) => *k as usize,
            Origin::Set(s) => Arc::as_ptr(s) as usize,
        }
    }
}

impl PartialEq for Origin {
    fn eq(&self, other: &Origin) -> bool {
        match (self, other) {
            (Origin::Here, Origin::Here) => true,
            (Origin::Local(a), Origin::Local(b)) => a == b,
            (Origin::Set(a), Origin::Set(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

/// An Earley item: a dotted alternative, the DFA state of the lexeme after
/// the dot (0 when the dot is not before a lexeme), and its origin.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Item {
    pub pos: u32,
    pub lex: u32,
    pub origin: Origin,
}

impl Item {
    #[inline]
    fn key(&self) -> (u32, u32, usize) {
        (self.pos, self.lex, self.origin.key())
    }
}

/// An Earley set, closed under prediction and completion.
#[derive(Debug, Default)]
pub(crate) struct ESet {
    pub items: Vec<Item>,
    /// Its items by the rule they wait for, made at the first completion
    /// into the set when it is big ([`Waiting`]).
    waiting: Waiting,
}

impl ESet {
    fn new(items: Vec<Item>) -> ESet {
        ESet {
            items,
            waiting: Waiting::default(),
        }
    }
}

/// The items of a set (or a chunk of a walk level) whose dot is before a
/// rule, by rule: a completion advances those of its rule. Read item by
/// item a completion costs the whole set, and where every split of a run
/// of bytes into lexemes is a derivation (lexemes that may be empty, or
/// that may follow themselves), a level holds an item per split point and
/// each of them completes into sets as big: made once per set, the index
/// makes a completion cost its parents alone.
#[derive(Debug, Default)]
pub(crate) struct Waiting {
    /// `(rule, item)` for the items before a rule, sorted.
    index: OnceLock<Box<[(u32, u32)]>>,
    /// Completions read item by item so far: most sets take one or two,
    /// for which making the index costs more than it saves.
    reads: AtomicU32,
}

impl Waiting {
    /// Sets smaller than this are read item by item.
    const SMALL: usize = 32;
    /// Completions read item by item before the index is made.
    const READS: u32 = 4;

    /// Calls `f` with each item of `items` (the set this index is of)
    /// whose dot is before `rule`.
    #[inline]
    fn each<'a>(
        &'a self,
        cfg: &Cfg,
        items: &'a [Item],
        rule: u32,
        budget: &mut Budget,
        mut f: impl FnMut(&'a Item),
    ) -> Result<(), StepError> {
        let index = match self.index.get() {
            Some(index) => index,
            None if items.len() < Self::SMALL
                || self.reads.fetch_add(1, Ordering::Relaxed) < Self::READS =>
            {
                budget.spend(items.len())?;
                for parent in items {
                    if cfg.syms[parent.pos as usize] == Sym::Rule(rule) {
                        f(parent);
                    }
                }
                return Ok(());
            }
            None => {
                budget.spend(items.len())?;
                self.index.get_or_init(|| {
                    let mut index: Vec<(u32, u32)> = items
                        .iter()
                        .enumerate()
                        .filter_map(|(i, item)| match cfg.syms[item.pos as usize] {
                            Sym::Rule(r) => Some((r, i as u32)),
                            _ => None,
                        })
                        .collect();
                    index.sort_unstable();
                    index.into_boxed_slice()
                })
            }
        };
        let from = index.partition_point(|&(r, _)| r < rule);
        let parents = index[from..].iter().take_while(|&&(r, _)| r == rule);
        for &(_, i) in parents {
            budget.spend(1)?;
            f(&items[i as usize]);
        }
        Ok(())
    }
}

impl Drop for ESet {
    /// Sets point at older sets, so a deeply nested output is a long chain
    /// of them: dropping it recursively would overflow the stack. The sets
    /// this one holds the last reference to are unlinked in a loop instead.
    /// Only those are kept for the loop: most origins are shared with
    /// newer sets, and a list of every origin was an allocation at each
    /// dropped set (each byte of each token drops one).
    fn drop(&mut self) {
        let mut pending: Vec<ESet> = Vec::new();
        let take = |items: &mut Vec<Item>, pending: &mut Vec<ESet>| {
            for item in items.drain(..) {
                if let Origin::Set(s) = item.origin
                    && let Some(last) = Arc::into_inner(s)
                {
                    pending.push(last);
                }
            }
        };
        take(&mut self.items, &mut pending);
        while let Some(mut set) = pending.pop() {
            take(&mut set.items, &mut pending);
        }
    }
}

/// Work and size budget of one step (a byte run or a mask).
pub(crate) struct Budget {
    pub work: usize,
    pub max_work: usize,
    pub max_items: usize,
}

impl Budget {
    pub(crate) fn new(max_work: usize, max_items: usize) -> Budget {
        Budget {
            work: 0,
            max_work,
            max_items,
        }
    }

    #[inline]
    fn spend(&mut self, n: usize) -> Result<(), StepError> {
        self.work += n;
        if self.work > self.max_work {
            return Err(StepError::LimitExceeded {
                what: "the parser work of one step (item operations)".into(),
                limit: self.max_work,
                knob: "max_step_work".into(),
            });
        }
        Ok(())
    }
}

/// Adds items without duplicates. A prediction (an item `Here` at its
/// position's first lexeme state: three in four of a C grammar's closure
/// items) is told apart by a bit of its position; another item by a linear
/// check while the set is small, a hash set of the others' keys once it
/// grows.
struct SetBuilder<'a> {
    items: &'a mut Vec<Item>,
    seen: Option<FxHashSet<(u32, u32, usize)>>,
    predicted: Positions,
}

/// A set of grammar positions (or rules): in place for a grammar of up to
/// [`Positions::INLINE`] × 64 of them, on the heap past that.
enum Positions {
    Inline([u64; Positions::INLINE]),
    Heap(Vec<u64>),
}

impl Positions {
    const INLINE: usize = 16;

    fn new(positions: usize) -> Positions {
        let words = positions.div_ceil(64);
        if words <= Self::INLINE {
            Positions::Inline([0; Self::INLINE])
        } else {
            Positions::Heap(vec![0; words])
        }
    }

    /// Adds `pos`: whether it was not in the set.
    #[inline]
    fn insert(&mut self, pos: u32) -> bool {
        let words: &mut [u64] = match self {
            Positions::Inline(w) => w,
            Positions::Heap(w) => w,
        };
        let (w, bit) = (pos as usize / 64, 1u64 << (pos % 64));
        let new = words[w] & bit == 0;
        words[w] |= bit;
        new
    }
}

impl SetBuilder<'_> {
    const LINEAR: usize = 24;

    /// Whether `item` is a prediction: `Here`, at the first state of the
    /// lexeme at its position. Only one such item per position.
    #[inline]
    fn is_predicted(cfg: &Cfg, item: &Item) -> bool {
        matches!(item.origin, Origin::Here) && item.lex == cfg.initial(item.pos)
    }

    /// Whether no item of `kept` is `item`, noting it: a prediction in
    /// `predicted`, another item in `seen` (made once `kept` is past
    /// [`SetBuilder::LINEAR`], of the keys of the items not predictions).
    fn first_time(
        cfg: &Cfg,
        seen: &mut Option<FxHashSet<(u32, u32, usize)>>,
        predicted: &mut Positions,
        kept: &[Item],
        item: &Item,
    ) -> bool {
        if Self::is_predicted(cfg, item) {
            return predicted.insert(item.pos);
        }
        let key = item.key();
        match seen {
            Some(seen) => seen.insert(key),
            None => {
                // A prediction's key is no other item's. Most items differ
                // in position: compared first, before the origin's key.
                let (pos, lex, origin) = key;
                if kept
                    .iter()
                    .any(|x| x.pos == pos && x.lex == lex && x.origin.key() == origin)
                {
                    return false;
                }
                if kept.len() >= Self::LINEAR {
                    // Room for a set four times as big: grown from the
                    // kept items, the table was rehashed two or three
                    // times on a C statement's closure.
                    let mut keys =
                        FxHashSet::with_capacity_and_hasher(4 * kept.len(), Default::default());
                    keys.extend(
                        kept.iter()
                            .filter(|x| !Self::is_predicted(cfg, x))
                            .map(Item::key),
                    );
                    keys.insert(key);
                    *seen = Some(keys);
                }
                true
            }
        }
    }

    fn push(&mut self, cfg: &Cfg, item: Item, budget: &Budget) -> Result<(), StepError> {
        if !Self::first_time(cfg, &mut self.seen, &mut self.predicted, self.items, &item) {
            return Ok(());
        }
        if self.items.len() >= budget.max_items {
            return Err(too_many_items(budget));
        }
        self.items.push(item);
        Ok(())
    }
}

fn too_many_items(budget: &Budget) -> StepError {
    StepError::LimitExceeded {
        what: "the Earley items after one byte".into(),
        limit: budget.max_items,
        knob: "max_items".into(),
    }
}

/// Closes `items` (whose `Here` is the set they form) under prediction and
/// completion. `locals` are the levels of a mask walk that `Local` origins
/// point at.
pub(crate) fn close(
    cfg: &Cfg,
    items: &mut Vec<Item>,
    locals: &[Level],
    budget: &mut Budget,
    frontier: Option<&mut Frontier>,
) -> Result<(), StepError> {
    close_reading(cfg, items, locals, budget, frontier, None, true)
}

/// [`close`] without the predictions: of chart items (no `Here` origin)
/// it gives the items of their closure that are not predictions, in the
/// order [`close`] gives them. A prediction's origin is the set itself,
/// so nothing derived from one is anything else (a completion reads only
/// older sets; a nullable rule or lexeme skipped keeps the origin), and
/// the other items come from one another alone, each found by the same
/// item in the same order as in the whole closure. That is the set's
/// [`shape`], at a quarter of the items on a C grammar.
fn close_unpredicted(
    cfg: &Cfg,
    items: &mut Vec<Item>,
    budget: &mut Budget,
) -> Result<(), StepError> {
    close_reading(cfg, items, &[], budget, None, None, false)
}

/// [`close`], noting in `read` (when given) the levels of `locals` that
/// completions read.
fn close_reading(
    cfg: &Cfg,
    items: &mut Vec<Item>,
    locals: &[Level],
    budget: &mut Budget,
    mut frontier: Option<&mut Frontier>,
    mut read: Option<&mut Vec<u32>>,
    predict: bool,
) -> Result<(), StepError> {
    // Seeds may repeat (two lexeme states stepping to the same one): the
    // first of each is kept, in place (moving them to a fresh vector was
    // two allocations or more per byte of every token).
    let mut seen = None;
    let mut predicted = Positions::new(cfg.syms.len());
    let mut kept = 0;
    for k in 0..items.len() {
        let (before, rest) = items.split_at(k);
        if SetBuilder::first_time(cfg, &mut seen, &mut predicted, &before[..kept], &rest[0]) {
            // Every item between `kept` and `k` is a repeat, already read.
            items.swap(kept, k);
            kept += 1;
        }
    }
    items.truncate(kept);
    if kept > budget.max_items {
        return Err(too_many_items(budget));
    }
    let mut set = SetBuilder {
        items,
        seen,
        predicted,
    };
    let mut rules = Positions::new(cfg.alts.len());
    let mut advanced = Vec::new();
    // A closure predicts tens of positions (grown from empty, a C
    // grammar's closures reallocated three or four times each).
    let mut later = Vec::with_capacity(if predict { 32 } else { 0 });
    let mut k = 0;
    while k < set.items.len() {
        budget.spend(1)?;
        // Read in place (a clone of an item of a chart set is an atomic
        // count up and down): only a completion keeps its origin.
        let (pos, lex) = (set.items[k].pos, set.items[k].lex);
        k += 1;
        match cfg.syms[pos as usize] {
            Sym::Lex(l) => {
                if cfg.lexemes[l as usize].accepts(lex) {
                    let next = cfg.advanced(&set.items[k - 1]);
                    set.push(cfg, next, budget)?;
                }
            }
            Sym::Rule(r) => {
                // A rule predicted once has what it leads to in the set:
                // added after the other items, with nothing left to read
                // in them.
                if predict && rules.insert(r) {
                    let made = cfg.predictions(r);
                    for &r in &made.rules {
                        rules.insert(r);
                    }
                    for &pos in &made.positions {
                        if set.predicted.insert(pos) {
                            later.push(pos);
                        }
                    }
                }
                if cfg.nullable[r as usize] {
                    let next = cfg.advanced(&set.items[k - 1]);
                    set.push(cfg, next, budget)?;
                }
            }
            Sym::End(r) => {
                let origin = set.items[k - 1].origin.clone();
                // The parents, advanced (taken out of the loop: pushing
                // borrows the set being read from when it is a level's).
                let mut next = std::mem::take(&mut advanced);
                let mut add = |parent: &Item| {
                    next.push(Item {
                        pos: parent.pos + 1,
                        lex: cfg.initial(parent.pos + 1),
                        origin: parent.origin.rebased(&origin),
                    })
                };
                match &origin {
                    // Empty: the parents moved past it when they predicted it.
                    Origin::Here => {}
                    Origin::Set(s) => match frontier.as_deref_mut() {
                        // A summary may look into the current set only:
                        // completing into an older one is left for later.
                        Some(f) if !f.cur.is_some_and(|c| Arc::ptr_eq(s, c)) => {
                            f.reached.push((f.marker(s), r));
                        }
                        _ => s.waiting.each(cfg, &s.items, r, budget, &mut add)?,
                    },
                    Origin::Local(j) => {
                        if let Some(read) = read.as_deref_mut() {
                            read.push(*j);
                        }
                        let level = &locals[*j as usize];
                        // Scanned lexeme items, but at the base of a walk
                        // from a set's items, read whole as a small set.
                        budget.spend(level.own.len())?;
                        for parent in &level.own {
                            if cfg.syms[parent.pos as usize] == Sym::Rule(r) {
                                add(parent);
                            }
                        }
                        for c in &level.chunks {
                            c.waiting.each(cfg, &c.items, r, budget, &mut add)?;
                        }
                    }
                }
                for parent in next.drain(..) {
                    set.push(cfg, parent, budget)?;
                }
                advanced = next;
            }
        }
    }
    if set.items.len() + later.len() > budget.max_items {
        return Err(too_many_items(budget));
    }
    set.items.extend(later.into_iter().map(|pos| Item {
        pos,
        lex: cfg.initial(pos),
        origin: Origin::Here,
    }));
    Ok(())
}

/// `item` (before lexeme `l`) after `byte`, added to `out` if its lexeme
/// takes the byte, with `Here` rebased to `here`.
#[inline]
fn step_item(cfg: &Cfg, l: u32, item: &Item, here: &Origin, byte: u8, out: &mut Vec<Item>) {
    let next = cfg.lexemes[l as usize].dfa().next(item.lex, byte);
    if next != DEAD {
        out.push(Item {
            pos: item.pos,
            lex: next,
            origin: item.origin.rebased(here),
        });
    }
}

/// The seeds of the set after `byte`: every item of `from` whose lexeme
/// takes the byte, with `Here` (the set `from`) rebased to `here`.
#[inline]
pub(crate) fn scan(cfg: &Cfg, from: &[Item], here: &Origin, byte: u8, out: &mut Vec<Item>) {
    for item in from {
        if let Sym::Lex(l) = cfg.syms[item.pos as usize] {
            step_item(cfg, l, item, here, byte, out);
        }
    }
}

/// The set after `byte` from the chart set `from`, or `None` when the byte
/// is refused.
pub(crate) fn advance(
    cfg: &Cfg,
    from: &Arc<ESet>,
    byte: u8,
    budget: &mut Budget,
) -> Result<Option<Arc<ESet>>, StepError> {
    let mut items = Vec::with_capacity(from.items.len());
    scan(
        cfg,
        &from.items,
        &Origin::Set(from.clone()),
        byte,
        &mut items,
    );
    if items.is_empty() {
        return Ok(None);
    }
    close(cfg, &mut items, &[], budget, None)?;
    Ok(Some(Arc::new(ESet::new(items))))
}

/// The first set: the start rule predicted.
pub(crate) fn initial_set(cfg: &Cfg, budget: &mut Budget) -> Result<ESet, StepError> {
    let mut items = vec![Item {
        pos: cfg.start_pos,
        lex: cfg.initial(cfg.start_pos),
        origin: Origin::Here,
    }];
    close(cfg, &mut items, &[], budget, None)?;
    Ok(ESet::new(items))
}

/// May the output end in this set?
pub(crate) fn is_accepting(cfg: &Cfg, set: &ESet) -> bool {
    set.items.iter().any(|i| i.pos == cfg.accept_pos)
}

/// Is every lexeme of the set between two UTF-8 characters?
pub(crate) fn at_char_boundary(cfg: &Cfg, set: &ESet) -> bool {
    set.items.iter().all(|i| match cfg.syms[i.pos as usize] {
        Sym::Lex(l) => cfg.lexemes[l as usize].dfa().at_char_boundary(i.lex),
        _ => true,
    })
}

/// The only byte that can come next, if exactly one can.
pub(crate) fn forced_byte(cfg: &Cfg, set: &ESet) -> Option<u8> {
    let mut found: Option<u8> = None;
    for item in &set.items {
        if let Sym::Lex(l) = cfg.syms[item.pos as usize] {
            let dfa = cfg.lexemes[l as usize].dfa();
            if let Some(b) = dfa.forced_byte(item.lex) {
                match found {
                    Some(f) if f != b => return None,
                    _ => found = Some(b),
                }
                continue;
            }
            // Not forced within the lexeme: unless its only way on is to
            // end here (no live byte), more than one byte is possible.
            let mut live = (0..=255u8).filter(|&b| dfa.next(item.lex, b) != DEAD);
            if let Some(b) = live.next() {
                if live.next().is_some() {
                    return None;
                }
                match found {
                    Some(f) if f != b => return None,
                    _ => found = Some(b),
                }
            }
        }
    }
    found
}

/// While a [`Summary`] is computed: the set it may look into (`cur`, the
/// chart set the mask is for; none below the first level), the older sets
/// the items start in (markers, by first appearance), and the completions
/// into those that a closure met (`(marker, rule)`), which the summary
/// leaves pending.
pub(crate) struct Frontier<'a> {
    cur: Option<&'a Arc<ESet>>,
    markers: &'a [Arc<ESet>],
    reached: Vec<(u32, u32)>,
    /// In the summary of pending subtrees: per group whose origin set is
    /// also one of `markers`, that marker, the group's rule and the set
    /// after its completion. A completion reached again there is walked
    /// in the same walk ([`Walker::walk_groups`]).
    loops: Vec<(u32, u32, Arc<Chunk>)>,
}

impl Frontier<'_> {
    /// The set after completing `rule` in the set of `marker`, where that
    /// is a completion the summary being made walks itself.
    fn looped(&self, marker: u32, rule: u32) -> Option<&Arc<Chunk>> {
        self.loops
            .iter()
            .find(|&&(m, r, _)| (m, r) == (marker, rule))
            .map(|(_, _, chunk)| chunk)
    }

    fn marker(&self, set: &Arc<ESet>) -> u32 {
        self.markers
            .iter()
            .position(|m| Arc::ptr_eq(m, set))
            .expect("every older set an item of the current set starts in is a marker")
            as u32
    }
}

type ShapeKey = Box<[(u32, u32, u32)]>;

/// Completions into older sets, `(marker, rule)`, that closing a set left
/// pending.
type Reached = Vec<(u32, u32)>;

/// A trie node and its depth.
type TrieAt = (u32, u32);

/// A completion left pending while summarizing: `(marker, rule, node, depth)`.
type PendingAt = (u32, u32, u32, u32);

/// What a summary could not decide: below these trie nodes (`(node,
/// depth)`), tokens go on after rule `rule` completes into the set of
/// marker `marker`; only the real parents there can tell.
#[derive(Debug, Clone)]
pub(crate) struct Group {
    marker: u32,
    rule: u32,
    nodes: Arc<[(u32, u32)]>,
    /// A hash of `nodes`.
    nodes_hash: u64,
}

/// Positions `from..to` of the trie's token list (its preorder) whose
/// tokens a walk's row holds, as [`Walker::covered_in_order`] found them.
#[derive(Clone, Copy, Default)]
struct Held {
    from: usize,
    to: usize,
}

/// A set with more lexeme items than this is summarized by one walk from
/// the trie root with every item at once; one with fewer item by item (each
/// lexeme state's row, then its exits), unless their exits span half the
/// trie. Item by item reuses what each lexeme state's walk found (kept
/// with the lexeme, and taking a string body's subtrees whole), where the
/// root walk steps the parser at every node it reaches: at a key of an
/// object with a hundred optional members (a hundred key lexemes, one of
/// them any string), 8 ms at every key, as each key's set is a new shape.
const MANY_ITEMS: usize = 256;

/// Most lexeme items at a trie node whose subtree is walked lexeme by
/// lexeme ([`Walker::walk_lexemes_below`]) rather than by the parser. The
/// lexemes' walks cost a DFA step per item and live node, the parser's a
/// scan of every item at each node and a level made of them. The bound
/// keeps one node's walks few; 4 and 64 measured alike on 46 MaskBench
/// files, 64 2% fewer instructions on one with keys of many members.
const LEXEME_WALKS: usize = 64;

/// Whether byte `b` is in the 256-bit set `set`.
#[inline]
fn has_byte(set: &[u64; 4], b: u8) -> bool {
    set[b as usize >> 6] >> (b & 63) & 1 == 1
}

/// Whether a byte below trie node `node` may follow, in `follow` (a
/// symbol's [`Cfg::follow`]); where none may, neither may a child's of
/// any node of its subtree.
#[inline]
fn may_follow_below(trie: &TokenTrie, node: u32, follow: &[u64; 4]) -> bool {
    let below = &trie.below[node as usize];
    below.ascii[0] & follow[0] != 0
        || below.ascii[1] & follow[1] != 0
        || below.non_ascii && follow[2] | follow[3] != 0
}

/// Whether every byte below trie node `node` may follow (all ASCII, in
/// `follow`): then every node of its subtree with nodes below has a
/// child that may.
#[inline]
fn all_follow_below(trie: &TokenTrie, node: u32, follow: &[u64; 4]) -> bool {
    let below = &trie.below[node as usize];
    !below.non_ascii && below.ascii[0] & !follow[0] == 0 && below.ascii[1] & !follow[1] == 0
}

/// Whether a child of trie node `node` may follow, its byte in `follow`
/// (a symbol's [`Cfg::follow`]): where none may, a lexeme ending there
/// leads no token further.
fn leads_on(trie: &TokenTrie, node: u32, follow: &[u64; 4]) -> bool {
    trie.kids(node as usize)
        .0
        .iter()
        .any(|&b| has_byte(follow, b))
}

/// From this many completions pending, [`Walker::drop_covered`] finds
/// the dropped nodes through a bit per trie node rather than a binary
/// search each.
const DROP_BY_BITS: usize = 4096;

/// Up to this many items, all of them narrow (none a string body's), are
/// walked lexeme by lexeme too. Below a comma or a newline after a value
/// of an object of a hundred optional members, every later member's key
/// is an item, each in its whitespace: a narrow walk each (the run of
/// whitespace taken without a state per byte), where the parser's walk
/// scanned a hundred items at each of the hundreds of whitespace nodes
/// (1.7-4 ms a mask in Github_ultra o39532).
const NARROW_WALKS: usize = MANY_ITEMS;

/// Children of a node past which [`Walker::walk_kids`] looks up the
/// children of the bytes its closures take, where those are at most one
/// in this many of them, rather than reading every child.
const FEW_KIDS: usize = 8;

/// A pending completion at a node whose subtree holds more tokens than
/// this is kept without asking whether the row holds them all
/// ([`Walker::drop_covered`]). Mask instructions (C, GBNF, SQL, cold,
/// Llama 3) with every node asked: 1,193, 628, 528 M; at 64: 1,188, 602,
/// 522 M; at 16: 1,209, 597, 526 M; none asked: 1,276, 614, 556 M.
const COVERED_TOKENS: usize = 64;

/// The set after completing a rule into a chart set `set`, kept by a
/// walker ([`Walker::completions`]).
struct Completed {
    /// Kept so that its address is not reused while the entry lives.
    set: Arc<ESet>,
    /// The items but the predictions: the set's shape.
    unpredicted: Arc<[Item]>,
    /// All the items, once a summary had to be made for them.
    closed: Option<Vec<Item>>,
}

/// Most closed completions a walker keeps ([`Walker::completed_unpredicted`]).
const COMPLETIONS: usize = 256;

/// Most child summaries one summary keeps (then they are recomputed).
const CHILDREN: usize = 256;

/// The mask of a set *shape*: its items with every older origin replaced
/// by a marker. What the shape decides is `allowed`; what depends on the
/// sets below it is in `groups`. Every set of the same shape (every value
/// of every object member, whatever the nesting) shares it.
#[derive(Debug)]
pub(crate) struct Summary {
    allowed: TokenSet,
    groups: Vec<Group>,
    /// The summaries of the pending subtrees, by the shape of the sets the
    /// pending completions give (all groups together).
    children: Mutex<FxHashMap<ShapeKey, Arc<Summary>>>,
}

impl Summary {
    /// Whether any summary is kept below this one.
    fn has_children(&self) -> bool {
        !self
            .children
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
    }

    /// The summary kept below this one for the sets of `key`.
    fn child(&self, key: &[(u32, u32, u32)]) -> Option<Arc<Summary>> {
        let children = self.children.lock().unwrap_or_else(|e| e.into_inner());
        children.get(key).cloned()
    }

    /// Whether a set of this shape has no pending subtree: its mask is
    /// [`Summary::write_into`].
    pub(crate) fn is_whole(&self) -> bool {
        self.groups.is_empty()
    }

    /// Makes `row` the tokens this summary allows by itself.
    pub(crate) fn write_into(&self, row: &mut [u32]) {
        self.allowed.write_into(row);
    }

    pub(crate) fn bytes(&self) -> usize {
        self.allowed.bytes()
            + self
                .groups
                .iter()
                .map(|g| g.nodes.len() * 8 + std::mem::size_of::<Group>())
                .sum::<usize>()
    }

    fn new(allowed: TokenSet, pending: Vec<(u32, u32, u32, u32)>) -> Summary {
        // Groups by marker and rule, each with its nodes in order, once.
        // The groups are a few and the walk notes each group's nodes
        // mostly in trie order: sorting the whole list (100,000 entries
        // below a run of names) cost more than grouping it.
        // By `(marker, rule)`, the nodes.
        let mut groups: Vec<((u32, u32), Vec<TrieAt>)> = Vec::new();
        for (marker, rule, node, depth) in pending {
            let at = match groups.last() {
                Some(g) if g.0 == (marker, rule) => groups.len() - 1,
                _ => match groups.iter().position(|g| g.0 == (marker, rule)) {
                    Some(at) => at,
                    None => {
                        groups.push(((marker, rule), Vec::new()));
                        groups.len() - 1
                    }
                },
            };
            groups[at].1.push((node, depth));
        }
        groups.sort_unstable_by_key(|g| g.0);
        let groups = groups
            .into_iter()
            .map(|((marker, rule), mut nodes)| {
                if !nodes.is_sorted() {
                    nodes.sort_unstable();
                }
                nodes.dedup();
                let mut h = FxHasher::default();
                for &(n, d) in &nodes {
                    h.write_u64((n as u64) << 32 | d as u64);
                }
                Group {
                    marker,
                    rule,
                    nodes: nodes.into(),
                    nodes_hash: h.finish(),
                }
            })
            .collect();
        Summary {
            allowed,
            groups,
            children: Mutex::new(FxHashMap::default()),
        }
    }
}

/// Summaries by shape, and walks of single groups, shared by every
/// matcher of a grammar; emptied when they hold more than `limit` bytes.
pub(crate) struct SummaryCache {
    kept: Mutex<Kept>,
    limit: usize,
}

#[derive(Default)]
struct Kept {
    summaries: FxHashMap<ShapeKey, Arc<Summary>>,
    /// By [`Partial::key`]: the walks of one group over different rows.
    partials: FxHashMap<u64, Vec<Arc<Partial>>>,
    bytes: usize,
}

impl Kept {
    /// Makes room for `size` more bytes under `limit`: whether they fit.
    fn room(&mut self, size: usize, limit: usize) -> bool {
        if self.bytes + size > limit {
            self.summaries.clear();
            self.partials.clear();
            self.bytes = 0;
        }
        let fits = size <= limit;
        if fits {
            self.bytes += size;
        }
        fits
    }
}

/// The walk below one group's nodes of the set its completion gives,
/// known by that set's shape (its older origins numbered in it), made over
/// the covered rows `base`. Kept apart from the groups it was pending
/// with: a group recurs under other stacks, where the whole mask's key
/// does not. It holds for any covered rows that hold `base`: a subtree it
/// left out was all in `base` or in what it found, and every token it
/// found is one the group allows.
#[derive(Debug)]
pub(crate) struct Partial {
    rule: u32,
    nodes: Arc<[(u32, u32)]>,
    shape: ShapeKey,
    /// The marker of the group's origin set among the shape's, if it is one.
    again: u32,
    base: Arc<[u32]>,
    allowed: TokenSet,
    /// Completions left pending, their markers the shape's.
    pending: Vec<PendingAt>,
}

impl Partial {
    fn key(group: &Group, shape: &[(u32, u32, u32)], again: u32) -> u64 {
        let mut h = FxHasher::default();
        h.write_u32(group.rule);
        h.write_u64(group.nodes_hash);
        h.write_u32(again);
        for &(pos, lex, origin) in shape {
            h.write_u64((pos as u64) << 32 | lex as u64);
            h.write_u32(origin);
        }
        h.finish()
    }

    /// Whether this is the walk of `group` after a set of `shape` and
    /// over rows that hold `base`.
    fn holds_for(
        &self,
        group: &Group,
        shape: &[(u32, u32, u32)],
        again: u32,
        rows: &[u32],
    ) -> bool {
        self.rule == group.rule
            && self.again == again
            && *self.shape == *shape
            && (Arc::ptr_eq(&self.nodes, &group.nodes) || *self.nodes == *group.nodes)
            && self.base.iter().zip(rows).all(|(b, r)| b & !r == 0)
    }
}

impl SummaryCache {
    pub(crate) fn new(limit: usize) -> Self {
        SummaryCache {
            kept: Mutex::new(Kept::default()),
            limit,
        }
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.kept.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn get(&self, key: &[(u32, u32, u32)]) -> Option<Arc<Summary>> {
        self.kept().summaries.get(key).cloned()
    }

    pub(crate) fn insert(&self, key: &[(u32, u32, u32)], summary: Summary) -> Arc<Summary> {
        let summary = Arc::new(summary);
        let size = summary.bytes() + key.len() * 12;
        let mut kept = self.kept();
        if kept.room(size, self.limit) {
            kept.summaries.insert(key.into(), summary.clone());
        }
        summary
    }

    /// The walk of `group` kept under `key` that holds for `rows`.
    fn partial(
        &self,
        key: u64,
        group: &Group,
        shape: &[(u32, u32, u32)],
        again: u32,
        rows: &[u32],
    ) -> Option<Arc<Partial>> {
        self.kept()
            .partials
            .get(&key)?
            .iter()
            .find(|p| p.holds_for(group, shape, again, rows))
            .cloned()
    }

    /// Keeps `partial` under `key`; `new_base` says whether its base row
    /// is not held by a walk kept before it.
    fn insert_partial(&self, key: u64, partial: Partial, new_base: bool) -> Arc<Partial> {
        let partial = Arc::new(partial);
        let size = partial.allowed.bytes()
            + partial.pending.len() * std::mem::size_of::<PendingAt>()
            + partial.shape.len() * 12
            + if new_base { partial.base.len() * 4 } else { 0 }
            + std::mem::size_of::<Partial>();
        let mut kept = self.kept();
        if kept.room(size, self.limit) {
            kept.partials.entry(key).or_default().push(partial.clone());
        }
        partial
    }

    pub(crate) fn bytes(&self) -> usize {
        self.kept().bytes
    }
}

/// The items of `set` waiting for `rule`, moved past it (not closed): what
/// completing the rule in `set` gives.
fn completed_in(
    cfg: &Cfg,
    set: &Arc<ESet>,
    rule: u32,
    budget: &mut Budget,
) -> Result<Vec<Item>, StepError> {
    budget.spend(set.items.len())?;
    let origin = Origin::Set(set.clone());
    Ok(set
        .items
        .iter()
        .filter(|parent| cfg.syms[parent.pos as usize] == Sym::Rule(rule))
        .map(|parent| Item {
            pos: parent.pos + 1,
            lex: cfg.initial(parent.pos + 1),
            origin: parent.origin.rebased(&origin),
        })
        .collect())
}

/// How many items of `set` are before a lexeme.
pub(crate) fn lexeme_items(cfg: &Cfg, set: &ESet) -> usize {
    set.items
        .iter()
        .filter(|i| matches!(cfg.syms[i.pos as usize], Sym::Lex(_)))
        .count()
}

/// A set's shape: `(pos, lexeme state, origin)` per item, the origin as
/// `u32::MAX` for the set itself (or a walk level) or a marker number; and
/// the markers.
/// A lexeme state is named by the state whose index serves it
/// ([`crate::lexeme::Lexeme::index_state`]): every mask walk from the two
/// finds the same tokens, so their sets share a summary.
pub(crate) fn shape(
    cfg: &Cfg,
    items: &[Item],
    key: &mut Vec<(u32, u32, u32)>,
    markers: &mut Vec<Arc<ESet>>,
) {
    key.clear();
    markers.clear();
    shape_append(cfg, items, key, markers);
}

/// [`shape`] added to a key, markers shared with what is there.
fn shape_append(
    cfg: &Cfg,
    items: &[Item],
    key: &mut Vec<(u32, u32, u32)>,
    markers: &mut Vec<Arc<ESet>>,
) {
    for item in items {
        // A prediction follows from the set's other items (every
        // alternative of every rule they predict, and those past an empty
        // rule): three in four of a C grammar's set items, left out.
        if SetBuilder::is_predicted(cfg, item) {
            continue;
        }
        let origin = match &item.origin {
            Origin::Set(s) => match markers.iter().position(|m| Arc::ptr_eq(m, s)) {
                Some(m) => m as u32,
                None => {
                    markers.push(s.clone());
                    markers.len() as u32 - 1
                }
            },
            _ => u32::MAX,
        };
        let lex = match cfg.syms[item.pos as usize] {
            Sym::Lex(l) => cfg.lexemes[l as usize].index_state(item.lex),
            _ => item.lex,
        };
        key.push((item.pos, lex, origin));
    }
}

/// The closure of one walk item whose lexeme may end: the set right after
/// it (position-independent: the same at every trie node where the lexeme
/// ends, for the same item position and origin), the bytes its items can
/// take, and (while summarizing) the completions it left pending.
#[derive(Debug)]
pub(crate) struct Chunk {
    /// The items, those before a lexeme first (the ones a byte scans).
    items: Vec<Item>,
    lexical: usize,
    /// The levels the items waiting for a rule start in, sorted.
    older: Box<[u32]>,
    /// The levels any item starts in, sorted ([`Walker::loop_key`]),
    /// once asked.
    locals: OnceLock<Box<[u32]>>,
    first: [u64; 4],
    /// The bytes each lexical item takes (as [`Lexeme::first_bytes`]): a
    /// byte is stepped only in the items that take it (after a name in a
    /// C grammar, a chunk holds about 25 lexeme items, the operators and
    /// the whitespace, and a byte is taken by one or two).
    takes: Box<[[u64; 4]]>,
    reached: Vec<(u32, u32)>,
    /// A hash of the keys of the items that are not complete (see
    /// [`Chunk::same_future`]), whatever their order.
    live: u64,
    waiting: Waiting,
    /// Whether no item starts in a level of the walk: what a level of
    /// such chunks memoizes holds whatever the levels above it.
    unrooted: bool,
}

impl Chunk {
    fn new(cfg: &Cfg, mut items: Vec<Item>, reached: Vec<(u32, u32)>) -> Chunk {
        let is_lexical = |i: &Item| matches!(cfg.syms[i.pos as usize], Sym::Lex(_));
        // Like seeds still list their items in the same order.
        if !items.is_sorted_by_key(|i| !is_lexical(i)) {
            // A stable partition (a stable sort by the flag was 4% of a C
            // grammar's mask instructions).
            // Sized at once (collected, it grew from empty: a third of the
            // reallocations of C's masks).
            let mut others = Vec::with_capacity(items.iter().filter(|i| !is_lexical(i)).count());
            others.extend(items.extract_if(.., |i| !is_lexical(i)));
            items.extend(others);
        }
        let lexical = items.partition_point(is_lexical);
        let mut older: Vec<u32> = items[lexical..]
            .iter()
            .filter_map(|i| match (cfg.syms[i.pos as usize], &i.origin) {
                (Sym::Rule(_), Origin::Local(x)) => Some(*x),
                _ => None,
            })
            .collect();
        older.sort_unstable();
        older.dedup();
        let live = items
            .iter()
            .filter(|i| !matches!(cfg.syms[i.pos as usize], Sym::End(_)))
            .map(|i| {
                let mut h = FxHasher::default();
                let (pos, lex, origin) = i.key();
                h.write_u32(pos);
                h.write_u32(lex);
                h.write_usize(origin);
                h.finish()
            })
            .fold(0u64, u64::wrapping_add);
        let unrooted = !items.iter().any(|i| matches!(i.origin, Origin::Local(_)));
        let takes: Box<[[u64; 4]]> = items[..lexical]
            .iter()
            .map(|i| match cfg.syms[i.pos as usize] {
                Sym::Lex(l) => *cfg.lexemes[l as usize].first_bytes(i.lex),
                _ => unreachable!("a lexical item"),
            })
            .collect();
        let mut first = [0u64; 4];
        for t in &takes {
            for (a, b) in first.iter_mut().zip(t) {
                *a |= b;
            }
        }
        Chunk {
            unrooted,
            first,
            takes,
            lexical,
            older: older.into_boxed_slice(),
            locals: OnceLock::new(),
            items,
            reached,
            live,
            waiting: Waiting::default(),
        }
    }

    /// The levels the items start in, sorted.
    fn locals(&self) -> &[u32] {
        self.locals.get_or_init(|| {
            let mut locals: Vec<u32> = self.items.iter().filter_map(|i| i.origin.level()).collect();
            locals.sort_unstable();
            locals.dedup();
            locals.into_boxed_slice()
        })
    }

    /// The items before a lexeme.
    #[inline]
    fn lexical(&self) -> &[Item] {
        &self.items[..self.lexical]
    }

    #[inline]
    fn takes(&self, byte: u8) -> bool {
        self.first[byte as usize >> 6] >> (byte & 63) & 1 == 1
    }

    /// [`scan`] of the lexical items, stepping only those that take `byte`.
    #[inline]
    fn scan(&self, cfg: &Cfg, here: &Origin, byte: u8, out: &mut Vec<Item>) {
        let (w, bit) = (byte as usize >> 6, 1u64 << (byte & 63));
        for (item, takes) in self.lexical().iter().zip(&self.takes) {
            if takes[w] & bit == 0 {
                continue;
            }
            let Sym::Lex(l) = cfg.syms[item.pos as usize] else {
                unreachable!("a lexical item");
            };
            step_item(cfg, l, item, here, byte, out);
        }
    }

    /// Whether the walk below a level goes on the same with `self` as
    /// with `other`: the same items that are not complete. A complete
    /// item's completion is in the chunk already, so only the others are
    /// ever read again (scanned, or found as the parents of a completion
    /// into this level). After a lexeme that may follow itself (`[a-z]+`
    /// repeated), the chunks of every split point are alike but for the
    /// complete items; one of them is enough.
    fn same_future(&self, cfg: &Cfg, other: &Chunk) -> bool {
        if std::ptr::eq(self, other) {
            return true;
        }
        if self.live != other.live {
            return false;
        }
        fn open_items<'c>(
            cfg: &'c Cfg,
            c: &'c Chunk,
        ) -> impl Iterator<Item = (u32, u32, usize)> + 'c {
            c.items
                .iter()
                .filter(|i| !matches!(cfg.syms[i.pos as usize], Sym::End(_)))
                .map(Item::key)
        }
        // Closures of like seeds list their items in the same order.
        if open_items(cfg, self).eq(open_items(cfg, other)) {
            return true;
        }
        let open = |c: &Chunk| -> Vec<(u32, u32, usize)> {
            let mut keys: Vec<_> = c
                .items
                .iter()
                .filter(|i| !matches!(cfg.syms[i.pos as usize], Sym::End(_)))
                .map(Item::key)
                .collect();
            keys.sort_unstable();
            keys.dedup();
            keys
        };
        open(self) == open(other)
    }
}

/// One level of a mask walk (one trie depth): the items scanned into it
/// (at level 0: the closed base set), the closures of those whose lexeme
/// may end here, and the memo of such closures for items whose origin is
/// this level.
#[derive(Default)]
pub(crate) struct Level {
    own: Vec<Item>,
    chunks: Vec<Arc<Chunk>>,
    memo: FxHashMap<u32, Arc<Chunk>>,
    /// Changes whenever the level is made anew: what a closure read from
    /// the level still holds while its stamp is the same.
    stamp: u64,
    /// The level's class ([`Walker::class_of`]) once asked, else
    /// [`Level::NO_CLASS`] (classes count from 1).
    class: u32,
    /// The ASCII bytes that make of this level, read from it, a level
    /// holding the very same items and chunks ([`Walker::try_loops`]): a
    /// subtree below it on those bytes alone is taken whole.
    loops: [u64; 2],
    /// The ASCII bytes tried for [`Level::loops`].
    tried: [u64; 2],
    /// Whether [`Walker::loop_memo`] was asked about this level, and the
    /// level's key there once made.
    looked: bool,
    loop_key: Option<Box<[u64]>>,
}

/// The bytes the lexeme items of `items` can take.
fn first_bytes_of(cfg: &Cfg, items: &[Item]) -> [u64; 4] {
    let mut first = [0u64; 4];
    for i in items {
        if let Sym::Lex(l) = cfg.syms[i.pos as usize] {
            let f = cfg.lexemes[l as usize].first_bytes(i.lex);
            for (a, b) in first.iter_mut().zip(f) {
                *a |= b;
            }
        }
    }
    first
}

impl Level {
    /// Makes the level hold the chunks `group` (emptied) and no item of
    /// its own. Where it holds them already and they start in no level,
    /// what it memoized still holds: the exits of one lexeme share the
    /// closures after the lexemes that follow it (the same at every exit),
    /// as when each was walked from one base level.
    fn hold(&mut self, group: &mut Vec<Arc<Chunk>>, stamp: u64) {
        let same = self.own.is_empty()
            && self.chunks.len() == group.len()
            && self
                .chunks
                .iter()
                .zip(group.iter())
                .all(|(a, b)| Arc::ptr_eq(a, b) && a.unrooted);
        if same {
            group.clear();
            self.forget_loops();
            return;
        }
        self.reset(stamp);
        self.chunks.append(group);
    }

    const NO_CLASS: u32 = 0;

    fn forget_loops(&mut self) {
        self.loops = [0; 2];
        self.tried = [0; 2];
        self.looked = false;
        self.loop_key = None;
    }

    fn reset(&mut self, stamp: u64) {
        self.stamp = stamp;
        self.class = Self::NO_CLASS;
        self.forget_loops();
        self.own.clear();
        self.chunks.clear();
        // Clearing a map writes all its room, empty or not: a level is
        // reset at every trie node a walk reads.
        if !self.memo.is_empty() {
            self.memo.clear();
        }
    }
}

/// A chunk made for an item whose origin level held `chunks`: the chunk
/// of that item at any level that holds the same ones (see
/// [`Walker::alike_key`]). The chunks are kept, not their addresses, so
/// that an address is not reused by another chunk while the entry lives.
struct Alike {
    /// The level the chunk was made for, and whether some open item of it
    /// starts there (then it is the chunk at another level with that
    /// level's index in their place).
    at: u32,
    rooted: bool,
    chunks: Vec<Arc<Chunk>>,
    /// The other levels the closure read, with their stamps then.
    read: Vec<(u32, u64)>,
    chunk: Arc<Chunk>,
}

/// A hash of the chunks `chunks` (their addresses), whatever their order.
fn chunks_hash(chunks: &[Arc<Chunk>]) -> u64 {
    chunks
        .iter()
        .map(|c| {
            let mut h = FxHasher::default();
            h.write_usize(Arc::as_ptr(c) as usize);
            h.finish()
        })
        .fold(0u64, u64::wrapping_add)
}

/// Whether `a` and `b` hold the same chunks (by address), whatever their
/// order; a level's chunks are a few and distinct.
fn same_chunks(a: &[Arc<Chunk>], b: &[Arc<Chunk>]) -> bool {
    a.len() == b.len() && a.iter().all(|x| b.iter().any(|y| Arc::ptr_eq(x, y)))
}

/// Scratch of mask walks, kept by a matcher between masks.
#[derive(Default)]
pub(crate) struct Walker {
    levels: Vec<Level>,
    /// Chunks of items whose origin is a chart set, for one walk.
    set_memo: FxHashMap<(u32, usize), Arc<Chunk>>,
    /// Chunks of items whose origin is a level, by item position and what
    /// that level holds ([`Walker::alike_key`]), for one walk.
    alike: FxHashMap<(u32, u64), Vec<Alike>>,
    /// The last stamp given to a level ([`Level::stamp`]).
    stamps: u64,
    /// The classes of levels ([`Walker::class_of`]) by what waits in them,
    /// for one walk.
    classes: FxHashMap<Vec<(u32, u32, u64)>, u32>,
    /// The classes of levels of chunks alone, by the chunks' addresses
    /// and the classes of the older levels they point at; the chunks are
    /// kept so that their addresses are not reused meanwhile.
    classes_by_chunks: FxHashMap<Vec<u64>, u32>,
    class_chunks: Vec<Arc<Chunk>>,
    /// Whether subtrees may be walked by lexemes
    /// ([`crate::EarleyConfig::lexeme_walks`]).
    lexeme_walks: bool,
    /// Exits of a lexeme state past which only those that lead on are
    /// walked ([`crate::EarleyConfig::follow_exits`]).
    follow_exits: usize,
    /// Scratch for a list of exits: a summary's of a lexeme state that
    /// has few, a lexeme walk's as it wrote them.
    exits_room: Vec<(u32, u32)>,
    /// Nodes of a pending group from which it is walked and kept alone
    /// ([`crate::EarleyConfig::group_walks`]).
    group_walks: usize,
    /// Room of [`Walker::walk_nodes`]: the lexeme items that may end at
    /// a node, by position, lexeme state and closure.
    ended: Vec<(u32, u32, Arc<Chunk>)>,
    /// [`Cfg::follow`] of the positions asked so far (a walker serves one
    /// grammar), read without the grammar's lock.
    follows: FxHashMap<u32, [u64; 4]>,
    /// Room of [`Walker::summarize`]: per lexeme item, its exits that lead
    /// on ([`Walker::exits_leading`]).
    leading: Vec<Option<Arc<LeadingExits>>>,
    /// Room of [`sorted_levels`].
    level_bits: Vec<u64>,
    /// Room of [`Walker::merge_alike_origins`].
    places: Vec<(u32, u32)>,
    kept_keys: Vec<(u32, u32, u64)>,
    /// The levels a closure read, while one is made for [`Walker::alike`].
    read: Vec<u32>,
    /// Room for the closure of a chunk ([`Walker::chunk`]).
    closing: Vec<Item>,
    /// The sets after completing a rule into a chart set, their
    /// predictions left out, by the set's address and the rule
    /// ([`Walker::completed_unpredicted`]), each with the set; at most
    /// [`COMPLETIONS`], then cleared.
    completions: FxHashMap<(usize, u32), Completed>,
    /// The chunks of one walk by [`Chunk::live`]: a chunk that goes on as
    /// one made before ([`Chunk::same_future`]) is that one, so that the
    /// levels and exits holding it compare pointers.
    interned: FxHashMap<u64, Arc<Chunk>>,
    /// [`dedupe`]'s scratch, kept from one call to the next.
    seen: Seen,
    /// Room kept between walks (cleared), so that a walk of a few nodes
    /// allocates nothing: item lists of the node walks, and the runs and
    /// exits of the lexeme walks.
    spare: Vec<Vec<Item>>,
    kept: Runs,
    lexeme_exits: Vec<(u32, u32)>,
    below: BelowRoom,
    /// Trie nodes where a lexeme may end that the walk has not reached
    /// yet, with the closures after it (see [`Walker::walk_exits`]).
    exits: Exits,
    /// The exits of the base set of a walk, before they are walked
    /// ([`Walker::walk_noted`]).
    noted: Vec<(u32, u32, Arc<Chunk>)>,
    /// Lists of exits of lexeme walks, kept for the next ones.
    spare_noted: Vec<Vec<(u32, u32, Arc<Chunk>)>>,
    /// The chunks of one exit node, before they are its level's.
    group: Vec<Arc<Chunk>>,
    /// [`Level::loops`] and [`Level::tried`] of the levels of one walk by
    /// what decides them ([`Walker::loop_key`]): the levels a run of
    /// names makes after each of its first two letters are alike, and
    /// each tried the same bytes again.
    loop_memo: FxHashMap<Box<[u64]>, LoopBytes>,
    /// The tokens a summary being made need not find (empty, or the rows
    /// of the summaries it is a child of, which are always written with
    /// it): a subtree of those alone is not walked
    /// ([`Walker::covered_in_order`]).
    covered: Vec<u32>,
    /// A summary's row of tokens, all zeros between summaries (or empty):
    /// a fresh one was a 16 KB zeroed allocation per summary (Llama 3),
    /// most of whose sets end as a few ids.
    row: Vec<u32>,
}

/// The exits a walk has noted and not reached ([`Walker::walk_exits`]),
/// sorted by node, the last first. The walk reads the trie in order and
/// never passes a noted node without taking it (reached, or walked from
/// before the walk moves past its subtree), so the exits at the node the
/// walk is at are at the end, and a batch noted below a node is merged
/// with the exits noted in that node's subtree alone, the ones at the end.
/// A map by node, a queue and a list per node took 3% of the instructions
/// of cold masks on sixteen MaskBench files where those are slowest; most
/// nodes are noted once.
#[derive(Default)]
struct Exits {
    /// `(node, depth, closure)`, by node, the greatest first.
    stack: Vec<(u32, u32, Arc<Chunk>)>,
    /// Room for merging a batch.
    merged: Vec<(u32, u32, Arc<Chunk>)>,
}

impl Exits {
    /// Whether a node before `end` is noted.
    #[inline]
    fn any_before(&self, end: u32) -> bool {
        matches!(self.stack.last(), Some(&(node, _, _)) if node < end)
    }

    /// Notes the exits `list` (sorted by node; emptied), all before node
    /// `end` and past the walk: merged with those noted before `end` (the
    /// batch after them where nodes are equal).
    fn add(&mut self, list: &mut Vec<(u32, u32, Arc<Chunk>)>, end: u32) {
        debug_assert!(list.is_sorted_by_key(|&(node, _, _)| node));
        let cut = self.stack.partition_point(|&(node, _, _)| node >= end);
        if cut == self.stack.len() {
            self.stack.extend(list.drain(..).rev());
            return;
        }
        let merged = &mut self.merged;
        merged.clear();
        let mut older = self.stack.drain(cut..).rev().peekable();
        let mut newer = list.drain(..).peekable();
        loop {
            let take_older = match (older.peek(), newer.peek()) {
                (Some(o), Some(n)) => o.0 <= n.0,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => break,
            };
            let next = if take_older {
                older.next()
            } else {
                newer.next()
            };
            merged.extend(next);
        }
        drop(older);
        self.stack.extend(merged.drain(..).rev());
    }

    /// Forgets the exits noted before `end`: they lie in a subtree the
    /// walk takes whole or has taken.
    fn drop_before(&mut self, end: u32) {
        while self.any_before(end) {
            self.stack.pop();
        }
    }

    fn clear(&mut self) {
        self.stack.clear();
    }
}

/// The tokens of `items` as the sorted ids [`TokenSet::from_row`] would
/// keep, when every lexeme state among them holds a few ids and ends in no
/// token (keys, literals, the first characters of a value): their union
/// without a row of the whole vocabulary to clear, count and read back.
/// `None` once the ids, repeats counted, are as many as a row would hold
/// ([`TokenSet::dense_for`]): sorting them would cost more than the row
/// (the keys of an object of a hundred optional properties, each key's
/// state its own item, share most of their first tokens).
fn few_ids(cfg: &Cfg, items: &[Item], words: usize) -> Option<Vec<u32>> {
    let mut ids = Vec::new();
    for item in items {
        let Sym::Lex(l) = cfg.syms[item.pos as usize] else {
            continue;
        };
        match cfg.lexemes[l as usize].state(item.lex) {
            StateIndex {
                inside: TokenSet::Sparse(some),
                exits,
                ..
            } if exits.is_empty() => ids.extend_from_slice(some),
            _ => return None,
        }
        if TokenSet::dense_for(ids.len(), words) {
            return None;
        }
    }
    ids.sort_unstable();
    ids.dedup();
    (!TokenSet::dense_for(ids.len(), words)).then_some(ids)
}

/// Removes repeated items (the same item reached from two parents).
/// The level numbers `levels` (each below `n`, the walk's depth) sorted,
/// without repeats, through a bit per level in `bits` (left cleared): a
/// level's items and closures name a few levels hundreds of times, and
/// sorting them all was 6% of a GBNF mask's instructions.
fn sorted_levels(bits: &mut Vec<u64>, n: usize, levels: impl Iterator<Item = u32>) -> Vec<u32> {
    let words = n.div_ceil(64);
    if bits.len() < words {
        bits.resize(words, 0);
    }
    for x in levels {
        bits[x as usize / 64] |= 1 << (x % 64);
    }
    let mut sorted = Vec::new();
    for (w, word) in bits[..words].iter_mut().enumerate() {
        while *word != 0 {
            sorted.push(w as u32 * 64 + word.trailing_zeros());
            *word &= *word - 1;
        }
    }
    sorted
}

fn dedupe(items: &mut Vec<Item>, seen: &mut Seen) {
    if items.len() < 2 {
        return;
    }
    if items.len() <= 16 {
        let mut k = 0;
        while k < items.len() {
            if items[..k].iter().any(|x| x.key() == items[k].key()) {
                items.swap_remove(k);
            } else {
                k += 1;
            }
        }
    } else {
        seen.retain_first(items);
    }
}

/// [`dedupe`]'s scratch: the items kept so far, found by position, a list
/// per position (per [`Seen::BUCKETS`]th of the positions: the room stays
/// small whatever the grammar, a matcher having one). Items of one
/// position are few (they differ by lexeme state or origin), so a repeat
/// is found by comparing a handful of keys, where a hash set hashed every
/// item (a set of 334 items, the keys of an object of many optional
/// members, at every trie node a walk reads). A list grown long (a
/// position reached from many origins, in an ambiguous grammar) has the
/// rest of its walk's items hashed.
#[derive(Default)]
struct Seen {
    /// Per bucket of positions: the use it was last written in and the
    /// last item kept there.
    heads: Vec<(u32, u32)>,
    /// Per item kept: the item kept before it at its position.
    before: Vec<u32>,
    /// The current use (0: none yet).
    stamp: u32,
    /// The keys met, where a position's list grew long.
    hashed: FxHashSet<(u32, u32, usize)>,
}

impl Seen {
    const NONE: u32 = u32::MAX;
    /// The most items of one list compared with an item.
    const LONG: usize = 16;
    /// Lists, a position's being its number modulo this.
    const BUCKETS: usize = 1024;

    /// Keeps the first of each item in `items`, in order.
    fn retain_first(&mut self, items: &mut Vec<Item>) {
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            self.heads.iter_mut().for_each(|h| h.0 = 0);
            self.stamp = 1;
        }
        self.before.clear();
        let mut kept = 0;
        let mut k = 0;
        'items: while k < items.len() {
            let key = items[k].key();
            let pos = key.0 as usize % Self::BUCKETS;
            if self.heads.is_empty() {
                self.heads.resize(Self::BUCKETS, (0, 0));
            }
            let (stamp, last) = self.heads[pos];
            let head = if stamp == self.stamp {
                last
            } else {
                Self::NONE
            };
            let (mut at, mut compared) = (head, 0);
            while at != Self::NONE {
                if items[at as usize].key() == key {
                    k += 1;
                    continue 'items;
                }
                compared += 1;
                if compared == Self::LONG {
                    break 'items;
                }
                at = self.before[at as usize];
            }
            // Every item between `kept` and `k` is a repeat, already read.
            items.swap(kept, k);
            self.before.push(head);
            self.heads[pos] = (self.stamp, kept as u32);
            kept += 1;
            k += 1;
        }
        if k < items.len() {
            self.hashed.clear();
            self.hashed.extend(items[..kept].iter().map(Item::key));
            for j in k..items.len() {
                if self.hashed.insert(items[j].key()) {
                    items.swap(kept, j);
                    kept += 1;
                }
            }
        }
        items.truncate(kept);
    }
}

impl Walker {
    pub(crate) fn new(config: &crate::EarleyConfig) -> Walker {
        Walker {
            lexeme_walks: config.lexeme_walks,
            follow_exits: config.follow_exits,
            group_walks: config.group_walks,
            ..Walker::default()
        }
    }

    /// The walk of `item`'s lexeme below node `j` ([`Lexeme::walk_below`])
    /// into the rooms `kept` and `exits`, and the work it is charged: where
    /// it has more than `follow_exits` exits, only those that lead on are
    /// kept ([`leads_on`]); the tokens ending at an exit are in the
    /// runs. A subtree the walk wrote as one entry ([`WHOLE_EXIT`]) stays
    /// one where every exit of it leads on or all are kept.
    fn lexeme_walk(
        &mut self,
        cfg: &Cfg,
        trie: &TokenTrie,
        item: &Item,
        j: usize,
        (kept, exits): (&mut Runs, &mut Vec<(u32, u32)>),
    ) -> usize {
        let Sym::Lex(l) = cfg.syms[item.pos as usize] else {
            unreachable!("a scanned item is a lexeme's");
        };
        kept.clear();
        exits.clear();
        cfg.lexemes[l as usize].walk_below(
            j as u32,
            item.lex,
            trie.nodes[j].depth,
            (kept, exits),
            &mut self.below,
        );
        if exits.iter().all(|&(_, depth)| depth & WHOLE_EXIT == 0) {
            let work = kept.runs.len() + exits.len();
            if exits.len() > self.follow_exits {
                let follow = self.follow(cfg, item.pos);
                exits.retain(|&(e, _)| leads_on(trie, e, &follow));
            }
            return work;
        }
        // The walk wrote subtrees of exits as one entry each.
        let count: usize = exits.iter().map(|&e| exit_count_and_span(trie, e).0).sum();
        let mut written = std::mem::take(&mut self.exits_room);
        written.clear();
        std::mem::swap(&mut written, exits);
        if count > self.follow_exits {
            let follow = self.follow(cfg, item.pos);
            for &(node, depth) in &written {
                if !may_follow_below(trie, node, &follow) {
                    continue;
                }
                if depth & WHOLE_EXIT != 0 && all_follow_below(trie, node, &follow) {
                    // Names after names: every node with nodes below
                    // has a child that may follow.
                    exits.push((node, depth));
                } else {
                    let listed = exits_of(trie, (node, depth));
                    exits.extend(listed.filter(|&(e, _)| leads_on(trie, e, &follow)));
                }
            }
            debug_assert!(
                exits.iter().flat_map(|&e| exits_of(trie, e)).eq(written
                    .iter()
                    .flat_map(|&e| exits_of(trie, e))
                    .filter(|&(e, _)| leads_on(trie, e, &follow))),
                "the exits that lead on, a subtree passed over at a time"
            );
        } else {
            exits.extend_from_slice(&written);
        }
        self.exits_room = written;
        kept.runs.len() + count
    }

    /// [`Cfg::follow`] of `pos`, kept.
    fn follow(&mut self, cfg: &Cfg, pos: u32) -> [u64; 4] {
        *self.follows.entry(pos).or_insert_with(|| cfg.follow(pos))
    }

    /// The exits of `state` (lexeme state `lex` of the lexeme at `pos`)
    /// that lead on ([`leads_on`]), where it has more than
    /// `follow_exits`; made once per grammar.
    fn exits_leading(
        &mut self,
        cfg: &Cfg,
        trie: &TokenTrie,
        (pos, lex): (u32, u32),
        state: &StateIndex,
    ) -> Option<Arc<LeadingExits>> {
        if state.exits.len() <= self.follow_exits {
            return None;
        }
        let known = cfg
            .follow
            .exits
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(pos, lex))
            .cloned();
        if known.is_some() {
            return known;
        }
        let follow = self.follow(cfg, pos);
        // What walking them costs at most: the subtrees of the children
        // whose bytes may follow (an exit's other children are not
        // entered, and below a name most are letters). Past half the
        // trie, [`Walker::summarize`] walks from the root wherever the
        // state is an item, and the list is never read: it is not made.
        let half = trie.num_nodes() / 2;
        let mut span = 0;
        let mut exits: Vec<(u32, u32)> = Vec::new();
        for &entry in state.exits.entries() {
            let (node, depth) = entry;
            // Most exits of a name have only letters below them: no byte
            // below the node may follow, so no child's may, nor any of a
            // subtree listed whole.
            if !may_follow_below(trie, node, &follow) {
                continue;
            }
            if depth & WHOLE_EXIT != 0 && all_follow_below(trie, node, &follow) {
                // Names after names: every inner node of the subtree leads
                // on into all its children (the trie's sums; read node by
                // node, 38,000 exits of a name took 0.7 ms).
                let (count, inner) = exit_count_and_span(trie, entry);
                span += inner - count;
                exits.push(entry);
            } else {
                for (e, d) in exits_of(trie, entry) {
                    if !may_follow_below(trie, e, &follow) {
                        continue;
                    }
                    let (bytes, kids) = trie.kids(e as usize);
                    let end = trie.nodes[e as usize].next;
                    let mut leads = false;
                    for (i, &b) in bytes.iter().enumerate() {
                        if has_byte(&follow, b) {
                            leads = true;
                            span += (kids.get(i + 1).copied().unwrap_or(end) - kids[i]) as usize;
                        }
                    }
                    if leads {
                        exits.push((e, d));
                    }
                }
            }
            if span > half {
                exits = Vec::new();
                break;
            }
        }
        debug_assert!(
            span > half
                || exits.iter().flat_map(|&e| exits_of(trie, e)).eq(state
                    .exits
                    .iter(trie)
                    .filter(|&(n, _)| leads_on(trie, n, &follow))),
            "the exits that lead on, a subtree passed over at a time"
        );
        let leading = Arc::new(LeadingExits { exits, span });
        cfg.follow
            .exits
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert((pos, lex), leading.clone());
        Some(leading)
    }

    /// Level 0 of the next walk, cleared.
    /// A row of `words` zeros for a summary's tokens: the kept one.
    fn zeroed_row(&mut self, words: usize) -> Vec<u32> {
        let row = std::mem::take(&mut self.row);
        if row.len() == words {
            row
        } else {
            vec![0u32; words]
        }
    }

    /// The set of a summary's row, the row kept for the next summary when
    /// the set does not take it ([`TokenSet::from_scratch`]).
    fn row_set(&mut self, mut row: Vec<u32>) -> TokenSet {
        let set = TokenSet::from_scratch(&mut row);
        if !row.is_empty() {
            self.row = row;
        }
        set
    }

    fn base(&mut self) -> &mut Vec<Item> {
        self.start();
        if self.levels.is_empty() {
            self.levels.push(Level::default());
        }
        let stamp = self.stamp();
        let level = &mut self.levels[0];
        level.reset(stamp);
        &mut level.own
    }

    /// A stamp no level has had.
    fn stamp(&mut self) -> u64 {
        self.stamps += 1;
        self.stamps
    }

    /// Forgets what the last walk left (a walk that ended in an error
    /// leaves exits not walked).
    fn start(&mut self) {
        if !self.set_memo.is_empty() {
            self.set_memo.clear();
        }
        if !self.loop_memo.is_empty() {
            self.loop_memo.clear();
        }
        if !self.interned.is_empty() {
            self.interned.clear();
        }
        if !self.alike.is_empty() {
            self.alike.clear();
        }
        if !self.classes.is_empty() {
            self.classes.clear();
            self.classes_by_chunks.clear();
            self.class_chunks.clear();
        }
        self.exits.clear();
        self.noted.clear();
    }

    /// The closure of the items right after a lexeme of the base set (its
    /// `Here` being the level where it is placed).
    fn base_chunk(
        cfg: &Cfg,
        mut items: Vec<Item>,
        budget: &mut Budget,
        frontier: Option<&mut Frontier>,
    ) -> Result<Arc<Chunk>, StepError> {
        close(cfg, &mut items, &[], budget, frontier)?;
        Ok(Arc::new(Chunk::new(cfg, items, Vec::new())))
    }

    /// The chunk made before that goes on as `chunk` does and left the
    /// same completions pending, else `chunk`.
    fn intern(&mut self, cfg: &Cfg, chunk: Chunk) -> Arc<Chunk> {
        match self.interned.entry(chunk.live) {
            hashbrown::hash_map::Entry::Occupied(known) => {
                let known = known.get();
                if known.reached == chunk.reached && known.same_future(cfg, &chunk) {
                    return known.clone();
                }
                // Another chunk of the same hash: kept apart (rare).
                Arc::new(chunk)
            }
            hashbrown::hash_map::Entry::Vacant(slot) => slot.insert(Arc::new(chunk)).clone(),
        }
    }

    /// Moves the closures noted at `node` (if any) into `chunks`, those
    /// of the level the walk makes for that node.
    fn take_exits(exits: &mut Exits, cfg: &Cfg, node: u32, chunks: &mut Vec<Arc<Chunk>>) {
        while let Some((at, _, _)) = exits.stack.last() {
            if *at != node {
                debug_assert!(*at > node, "a noted node the walk passed");
                return;
            }
            let (_, _, chunk) = exits.stack.pop().expect("just read");
            if !chunks.iter().any(|c| c.same_future(cfg, &chunk)) {
                chunks.push(chunk);
            }
        }
    }

    /// Walks below the exits of a walk's base set (`self.noted`), then
    /// below those noted meanwhile.
    fn walk_noted(
        &mut self,
        cfg: &Cfg,
        trie: &TokenTrie,
        row: &mut [u32],
        budget: &mut Budget,
        mut summarizing: Option<(&mut Frontier, &mut Vec<PendingAt>)>,
    ) -> Result<(), StepError> {
        let mut noted = std::mem::take(&mut self.noted);
        let reborrowed = summarizing.as_mut().map(|(f, p)| (&mut **f, &mut **p));
        self.walk_list(cfg, trie, &mut noted, u32::MAX, row, budget, reborrowed)?;
        self.noted = noted;
        self.walk_exits(cfg, trie, u32::MAX, row, budget, summarizing)
    }

    /// Walks below the exits `list` (emptied), which lie before node `end`
    /// with nothing noted there yet: in trie order, one walk a node with
    /// every closure listed there. Where none lies below another (a
    /// string's ends, a key's), each is walked as it comes; else all are
    /// noted for [`Walker::walk_exits`], so that a node reached from an
    /// exit above it is walked once.
    #[allow(clippy::too_many_arguments)]
    fn walk_list(
        &mut self,
        cfg: &Cfg,
        trie: &TokenTrie,
        list: &mut Vec<(u32, u32, Arc<Chunk>)>,
        end: u32,
        row: &mut [u32],
        budget: &mut Budget,
        mut summarizing: Option<(&mut Frontier, &mut Vec<PendingAt>)>,
    ) -> Result<(), StepError> {
        list.sort_unstable_by_key(|&(node, _, _)| node);
        let nested = list
            .windows(2)
            .any(|w| w[1].0 != w[0].0 && w[1].0 < trie.nodes[w[0].0 as usize].next);
        if nested || self.exits.any_before(end) {
            self.exits.add(list, end);
            return Ok(());
        }
        // The closures are moved out, not shared and dropped.
        let mut listed = list.drain(..).peekable();
        while let Some((node, depth, chunk)) = listed.next() {
            budget.spend(1)?;
            let k = depth as usize;
            if self.levels.len() <= k {
                self.levels.resize_with(k + 1, Level::default);
            }
            let mut group = std::mem::take(&mut self.group);
            group.push(chunk);
            while let Some((_, _, chunk)) = listed.next_if(|&(at, _, _)| at == node) {
                if !group.iter().any(|c| c.same_future(cfg, &chunk)) {
                    group.push(chunk);
                }
            }
            let stamp = self.stamp();
            let level = &mut self.levels[k];
            level.hold(&mut group, stamp);
            self.group = group;
            let mut bytes = [0u64; 4];
            for c in &level.chunks {
                for (w, f) in bytes.iter_mut().zip(&c.first) {
                    *w |= f;
                }
            }
            let reborrowed = summarizing.as_mut().map(|(f, p)| (&mut **f, &mut **p));
            self.walk_kids(cfg, trie, node, &bytes, row, budget, reborrowed)?;
        }
        Ok(())
    }

    /// Walks below every noted exit before node `end` (in trie order),
    /// each with all the closures noted there; more may be noted and
    /// walked meanwhile, below them. The walk reads the trie in order,
    /// and whenever it passes over a subtree (no item takes its byte) it
    /// walks the exits noted in it first, so the noted nodes are never
    /// behind it: an exit before `end` lies below the node whose lexeme
    /// walks noted it, and the levels above that node are still that
    /// node's ancestors'.
    ///
    /// Where the lexemes of a grammar can follow each other with nothing
    /// between (`[a-z]+` repeated, or after a lexeme that may be empty), a
    /// token's bytes split into lexemes in exponentially many ways; walked
    /// exit by exit, every split was a walk of its own. Noted and merged
    /// by node, each node is walked once with the union of its items, as
    /// an Earley set holds every derivation of its prefix once.
    fn walk_exits(
        &mut self,
        cfg: &Cfg,
        trie: &TokenTrie,
        end: u32,
        row: &mut [u32],
        budget: &mut Budget,
        mut summarizing: Option<(&mut Frontier, &mut Vec<PendingAt>)>,
    ) -> Result<(), StepError> {
        while let Some(&(node, depth, _)) = self.exits.stack.last() {
            if node >= end {
                break;
            }
            budget.spend(1)?;
            let k = depth as usize;
            if self.levels.len() <= k {
                self.levels.resize_with(k + 1, Level::default);
            }
            let stamp = self.stamp();
            let level = &mut self.levels[k];
            level.reset(stamp);
            Self::take_exits(&mut self.exits, cfg, node, &mut level.chunks);
            let mut bytes = [0u64; 4];
            for c in &level.chunks {
                for (w, f) in bytes.iter_mut().zip(&c.first) {
                    *w |= f;
                }
            }
            let reborrowed = summarizing.as_mut().map(|(f, p)| (&mut **f, &mut **p));
            self.walk_kids(cfg, trie, node, &bytes, row, budget, reborrowed)?;
        }
        Ok(())
    }

    /// The mask of `cur` by walking every exit subtree through the real
    /// chart, with nothing cached: the fallback when summaries cost more
    /// than they save (highly ambiguous grammars, where one set holds many
    /// pending completions).
    pub(crate) fn fill_direct(
        &mut self,
        cfg: &Cfg,
        trie: &TokenTrie,
        cur: &Arc<ESet>,
        row: &mut [u32],
        budget: &mut Budget,
    ) -> Result<(), StepError> {
        row.fill(0);
        self.start();
        let here = Origin::Set(cur.clone());
        for item in &cur.items {
            let Sym::Lex(l) = cfg.syms[item.pos as usize] else {
                continue;
            };
            let state = cfg.lexemes[l as usize].state(item.lex);
            state.inside.or_into(row);
            if state.exits.is_empty() {
                continue;
            }
            let after = vec![cfg.advanced_from(item, &here)];
            let chunk = Self::base_chunk(cfg, after, budget, None)?;
            for (node, depth) in state.exits.iter(trie) {
                self.noted.push((node, depth, chunk.clone()));
            }
        }
        self.walk_noted(cfg, trie, row, budget, None)
    }

    /// The summary of `cur` (whose older origins are `markers`, as
    /// [`shape`] found them): the tokens that stay inside a lexeme of an
    /// item, and those that leave one and are decided by `cur` alone.
    pub(crate) fn summarize(
        &mut self,
        cfg: &Cfg,
        trie: &TokenTrie,
        cur: &Arc<ESet>,
        markers: &[Arc<ESet>],
        words: usize,
        budget: &mut Budget,
    ) -> Result<Summary, StepError> {
        let mut pending = Vec::new();
        let mut frontier = Frontier {
            cur: Some(cur),
            markers,
            reached: Vec::new(),
            loops: Vec::new(),
        };
        let here = Origin::Set(cur.clone());
        // Per item, the tokens inside its lexeme are a precomputed row and
        // only the exit subtrees are walked; but with hundreds of items
        // ([`MANY_ITEMS`]), or items whose lexemes end almost anywhere
        // (identifiers, free text: exits over half the trie), that walks
        // the same parts of the trie again and again. Then one walk from
        // the root with every item at once costs less.
        let lexeme_items = cur
            .items
            .iter()
            .filter(|i| matches!(cfg.syms[i.pos as usize], Sym::Lex(_)))
            .count();
        let mut span = 0;
        // Per item, the exits that lead on where it has many.
        let mut leading = std::mem::take(&mut self.leading);
        leading.clear();
        if lexeme_items <= MANY_ITEMS {
            for item in &cur.items {
                if let Sym::Lex(l) = cfg.syms[item.pos as usize] {
                    let lexeme = &cfg.lexemes[l as usize];
                    if !lexeme.is_built(item.lex) {
                        // A first trie walk for this lexeme state: bounded
                        // by the trie, counted as one unit per 64 tokens.
                        budget.spend(trie.num_tokens() / 64)?;
                    }
                    let state = lexeme.state(item.lex);
                    let exits = self.exits_leading(cfg, trie, (item.pos, item.lex), state);
                    span += exits.as_ref().map_or(state.exit_span, |e| e.span);
                    leading.push(exits);
                }
            }
        }
        if lexeme_items > MANY_ITEMS || span > trie.num_nodes() / 2 {
            self.leading = leading;
            let mut allowed = self.zeroed_row(words);
            self.base().extend(cur.items.iter().cloned());
            let first = first_bytes_of(cfg, &cur.items);
            self.walk_kids(
                cfg,
                trie,
                0,
                &first,
                &mut allowed,
                budget,
                Some((&mut frontier, &mut pending)),
            )?;
            return Ok(self.summary_of(trie, allowed, pending));
        }
        if let Some(ids) = few_ids(cfg, &cur.items, words) {
            self.leading = leading;
            return Ok(Summary::new(TokenSet::Sparse(ids), pending));
        }
        let mut allowed = self.zeroed_row(words);
        self.start();
        let lexeme_items = cur
            .items
            .iter()
            .filter(|i| matches!(cfg.syms[i.pos as usize], Sym::Lex(_)));
        for (item, leads) in lexeme_items.zip(&leading) {
            let Sym::Lex(l) = cfg.syms[item.pos as usize] else {
                unreachable!("filtered above");
            };
            let state = cfg.lexemes[l as usize].state(item.lex);
            state.inside.or_into(&mut allowed);
            // Up to `follow_exits` exits are read as they are.
            let mut few = std::mem::take(&mut self.exits_room);
            few.clear();
            if leads.is_none() {
                few.extend_from_slice(state.exits.entries());
            }
            let exits = leads.as_ref().map_or(&few, |e| &e.exits);
            if exits.is_empty() {
                self.exits_room = few;
                continue;
            }
            // The lexeme ends inside the token: the set right after it is
            // the same for every exit (only origins matter, not offsets).
            let after = vec![cfg.advanced_from(item, &here)];
            let chunk = Self::base_chunk(cfg, after, budget, Some(&mut frontier))?;
            let at_exit = std::mem::take(&mut frontier.reached);
            // The row does not change in this loop; the exits are in trie
            // order.
            let mut held = Held::default();
            for &entry in exits {
                if entry.1 & WHOLE_EXIT != 0
                    && self.covered_in_order(trie, entry.0 as usize, &allowed, &mut held)
                {
                    continue;
                }
                for (node, depth) in exits_of(trie, entry) {
                    if self.covered_in_order(trie, node as usize, &allowed, &mut held) {
                        continue;
                    }
                    for &(marker, rule) in &at_exit {
                        pending.push((marker, rule, node, depth));
                    }
                    self.noted.push((node, depth, chunk.clone()));
                }
            }
            self.exits_room = few;
        }
        leading.clear();
        self.leading = leading;
        self.walk_noted(
            cfg,
            trie,
            &mut allowed,
            budget,
            Some((&mut frontier, &mut pending)),
        )?;
        Ok(self.summary_of(trie, allowed, pending))
    }

    /// The summary of the tokens `row` holds and the completions left
    /// `pending`, less those below a subtree the row and the covered rows
    /// hold.
    fn summary_of(
        &mut self,
        trie: &TokenTrie,
        row: Vec<u32>,
        mut pending: Vec<PendingAt>,
    ) -> Summary {
        self.drop_covered(trie, &mut pending, &row);
        Summary::new(self.row_set(row), pending)
    }

    /// Drops the completions into older sets noted at nodes whose subtree
    /// `row` holds whole: the walks after them could only find its tokens
    /// again.
    ///
    /// Each node is asked once, in trie order ([`Walker::covered_in_order`]),
    /// and only where its subtree holds at most [`COVERED_TOKENS`] tokens
    /// (a lone pending completion too, so a summary's reads are bounded):
    /// below a run of names the completions are pending at every node of
    /// the letters, and reading the thousands of tokens below a first
    /// letter at every summary (12% of the GBNF grammar's mask
    /// instructions) cost more than the walks it saved.
    fn drop_covered(&self, trie: &TokenTrie, pending: &mut Vec<PendingAt>, row: &[u32]) {
        if pending.is_empty() {
            return;
        }
        let mut nodes: Vec<u32> = pending.iter().map(|&(_, _, node, _)| node).collect();
        // In runs of trie order, one per walk that noted them: a merge of
        // runs, where a quicksort read 100 instructions a node.
        nodes.sort();
        nodes.dedup();
        let mut held = Held::default();
        nodes.retain(|&node| {
            trie.subtree_tokens(node as usize).len() <= COVERED_TOKENS
                && self.covered_in_order(trie, node as usize, row, &mut held)
        });
        if nodes.is_empty() {
            return;
        }
        if pending.len() < DROP_BY_BITS {
            pending.retain(|&(_, _, node, _)| nodes.binary_search(&node).is_err());
            return;
        }
        // Thousands pending below a run of names: a bit per trie node,
        // where each binary search read a dozen of thousands of nodes.
        let mut bits = vec![0u64; trie.num_nodes().div_ceil(64)];
        for &n in &nodes {
            bits[n as usize / 64] |= 1 << (n % 64);
        }
        pending.retain(|&(_, _, n, _)| bits[n as usize / 64] >> (n % 64) & 1 == 0);
    }

    /// The walk of the pending subtrees of `groups`: per trie node, the
    /// sets after the completions pending there (`after[g]` for group `g`)
    /// in one set, then its subtree. `markers` are the older origins of
    /// those sets. Gives the tokens found and the completions left pending
    /// (none below a subtree the tokens found and the covered rows hold).
    #[allow(clippy::too_many_arguments)]
    fn walk_groups(
        &mut self,
        cfg: &Cfg,
        trie: &TokenTrie,
        (groups, origins): (&[Group], &[Arc<ESet>]),
        (after, reached): (&[Vec<Item>], &[Reached]),
        markers: &[Arc<ESet>],
        words: usize,
        budget: &mut Budget,
    ) -> Result<(Vec<u32>, Vec<PendingAt>), StepError> {
        let mut at: Vec<(u32, u32, usize)> = groups
            .iter()
            .enumerate()
            .flat_map(|(g, group)| group.nodes.iter().map(move |&(n, d)| (n, d, g)))
            .collect();
        // One group (most often) is in order already.
        if !at.is_sorted() {
            at.sort_unstable();
        }
        let mut found = self.zeroed_row(words);
        let mut pending = Vec::new();
        // A group whose origin set is also an origin of the sets after it
        // (a left-recursive rule, `T ::= x | T y`, completed inside a
        // token: `y` ends and `T` completes in the same set again, at
        // every letter of a run of names) is walked on here wherever its
        // completion is reached again, not level after level.
        let loops = groups
            .iter()
            .zip(origins)
            .zip(after)
            .enumerate()
            .filter(|(_, (_, after))| !after.is_empty())
            .filter_map(|(g, ((group, origin), after))| {
                let m = markers.iter().position(|m| Arc::ptr_eq(m, origin))?;
                let left = reached.get(g).cloned().unwrap_or_default();
                let chunk = Arc::new(Chunk::new(cfg, after.clone(), left));
                Some((m as u32, group.rule, chunk))
            })
            .collect();
        let mut frontier = Frontier {
            cur: None,
            markers,
            reached: Vec::new(),
            loops,
        };
        self.start();
        // The groups of the last node, whose union is `union`: the next
        // node of the same groups shares it (most nodes are of one group,
        // and its set may hold hundreds of items).
        let (mut groups_at, mut last) = (Vec::new(), Vec::new());
        let mut union: Option<Arc<Chunk>> = None;
        let mut i = 0;
        while i < at.len() {
            let (node, depth, _) = at[i];
            groups_at.clear();
            while i < at.len() && at[i].0 == node {
                groups_at.push(at[i].2);
                i += 1;
            }
            // (`last` is empty before the first node; a node has a group.)
            if last != groups_at {
                let mut items = Vec::new();
                for &g in &groups_at {
                    items.extend(after[g].iter().cloned());
                }
                // Each part is closed, and so is their union: closing it
                // again would only find the completions already made.
                dedupe(&mut items, &mut self.seen);
                union = (!items.is_empty()).then(|| Arc::new(Chunk::new(cfg, items, Vec::new())));
                std::mem::swap(&mut last, &mut groups_at);
            }
            if let Some(chunk) = &union {
                self.noted.push((node, depth, chunk.clone()));
            }
        }
        self.walk_noted(
            cfg,
            trie,
            &mut found,
            budget,
            Some((&mut frontier, &mut pending)),
        )?;
        self.drop_covered(trie, &mut pending, &found);
        Ok((found, pending))
    }

    /// The summary of `cur` (whose older origins are `markers`) made of
    /// the summaries of its lexeme items, each kept apart in `cache`: an
    /// item's own walk (its lexeme, and through the parser what follows
    /// it, completions into the set it starts in left pending) does not
    /// depend on the rest of the set, and most sets met for the first
    /// time hold items met before in other sets (the start of a
    /// statement under another stack). The completions into `cur` itself
    /// are walked here, through the summaries of the sets they give, kept
    /// in the item's summary by their shapes; those into older sets stay
    /// pending in the summary made.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn summarize_by_items(
        &mut self,
        cfg: &Cfg,
        trie: &TokenTrie,
        cur: &Arc<ESet>,
        markers: &[Arc<ESet>],
        words: usize,
        cache: &SummaryCache,
        budget: &mut Budget,
    ) -> Result<Summary, StepError> {
        let mut row = vec![0u32; words];
        let mut pending: Vec<PendingAt> = Vec::new();
        let placeholder = Arc::new(ESet::default());
        for item in &cur.items {
            let Sym::Lex(l) = cfg.syms[item.pos as usize] else {
                continue;
            };
            let key = [(
                item.pos,
                cfg.lexemes[l as usize].index_state(item.lex),
                u32::MAX - 2,
            )];
            let own = match cache.get(&key) {
                Some(own) => own,
                None => {
                    let alone = Arc::new(ESet::new(vec![Item {
                        pos: item.pos,
                        lex: item.lex,
                        origin: Origin::Set(placeholder.clone()),
                    }]));
                    let made = self.summarize(
                        cfg,
                        trie,
                        &alone,
                        std::slice::from_ref(&placeholder),
                        words,
                        budget,
                    )?;
                    cache.insert(&key, made)
                }
            };
            own.allowed.or_into(&mut row);
            let origin = match &item.origin {
                Origin::Set(s) => s.clone(),
                _ => cur.clone(),
            };
            self.resolve_into(
                cfg,
                trie,
                (&own, origin),
                (cur, markers),
                &mut row,
                &mut pending,
                budget,
            )?;
        }
        Ok(self.summary_of(trie, row, pending))
    }

    /// The completions an item's summary `own` leaves pending into its
    /// origin set `origin`: those into `cur` walked now, level by level
    /// (each level kept in the summary before it, by the shapes of the sets
    /// the completions give), their tokens added to `row`; those into the
    /// older sets `markers` added to `pending`.
    #[allow(clippy::too_many_arguments)]
    fn resolve_into(
        &mut self,
        cfg: &Cfg,
        trie: &TokenTrie,
        (own, origin): (&Arc<Summary>, Arc<ESet>),
        (cur, markers): (&Arc<ESet>, &[Arc<ESet>]),
        row: &mut [u32],
        pending: &mut Vec<PendingAt>,
        budget: &mut Budget,
    ) -> Result<(), StepError> {
        let mut summary = own.clone();
        let mut at: Vec<Arc<ESet>> = vec![origin];
        // The rows of the chain so far: a level need not find them again.
        let mut chain: Vec<u32> = Vec::new();
        loop {
            let mut into_cur = Vec::new();
            for (g, group) in summary.groups.iter().enumerate() {
                let set = &at[group.marker as usize];
                if Arc::ptr_eq(set, cur) {
                    into_cur.push(g);
                    continue;
                }
                let m = markers
                    .iter()
                    .position(|m| Arc::ptr_eq(m, set))
                    .expect("a set an item of the current set starts in is a marker")
                    as u32;
                for &(node, depth) in group.nodes.iter() {
                    pending.push((m, group.rule, node, depth));
                }
            }
            if into_cur.is_empty() {
                return Ok(());
            }
            let groups: Vec<Group> = into_cur
                .iter()
                .map(|&g| summary.groups[g].clone())
                .collect();
            let mut after = Vec::with_capacity(groups.len());
            // Completions into older sets while closing are left pending
            // at every node of the group: the sets after them stay within
            // `cur` and its markers.
            let mut frontier = Frontier {
                cur: Some(cur),
                markers,
                reached: Vec::new(),
                loops: Vec::new(),
            };
            let mut left: Vec<Vec<(Arc<ESet>, u32)>> = Vec::with_capacity(groups.len());
            for group in &groups {
                let mut set = completed_in(cfg, cur, group.rule, budget)?;
                let mut sets = Vec::new();
                if !set.is_empty() {
                    close(cfg, &mut set, &[], budget, Some(&mut frontier))?;
                    for (marker, rule) in frontier.reached.drain(..) {
                        for &(node, depth) in group.nodes.iter() {
                            pending.push((marker, rule, node, depth));
                        }
                        sets.push((markers[marker as usize].clone(), rule));
                    }
                }
                after.push(set);
                left.push(sets);
            }
            let mut key = Vec::new();
            let mut next: Vec<Arc<ESet>> = Vec::new();
            for (g, set) in after.iter().enumerate() {
                shape_append(cfg, set, &mut key, &mut next);
                key.push((u32::MAX, u32::MAX, g as u32));
            }
            // Where the walk meets a completion into `cur` again, what
            // closing the sets after it left pending is noted again: by
            // marker of `next` (a set it does not hold is added to it).
            let mut reached = Vec::with_capacity(groups.len());
            for (g, sets) in left.iter().enumerate() {
                let mut here_left = Vec::with_capacity(sets.len());
                for (set, rule) in sets {
                    let m = match next.iter().position(|m| Arc::ptr_eq(m, set)) {
                        Some(m) => m,
                        None => {
                            next.push(set.clone());
                            next.len() - 1
                        }
                    };
                    key.push((u32::MAX - 4, m as u32, *rule));
                    here_left.push((m as u32, *rule));
                }
                key.push((u32::MAX - 5, g as u32, 0));
                reached.push(here_left);
            }
            let mut origins = Vec::with_capacity(groups.len());
            for (g, &was) in into_cur.iter().enumerate() {
                let again = next.iter().position(|m| Arc::ptr_eq(m, cur));
                key.push((u32::MAX - 1, again.map_or(u32::MAX, |m| m as u32), g as u32));
                // Which of the summary's groups these are.
                key.push((u32::MAX - 3, was as u32, g as u32));
                origins.push(cur.clone());
            }
            if chain.is_empty() {
                chain = vec![0; row.len()];
                summary.allowed.or_into(&mut chain);
            }
            let child = self.child(
                cfg,
                trie,
                None,
                (&summary, &chain),
                &key,
                (&groups, &origins),
                (&after, &reached),
                &next,
                budget,
            )?;
            child.allowed.or_into(row);
            child.allowed.or_into(&mut chain);
            summary = child;
            at = next;
        }
    }

    /// The items of `set` waiting for `rule`, moved past it and closed
    /// but for their predictions ([`close_unpredicted`]): the shape of the
    /// set after completing `rule` into `set`, which finds its summary.
    /// Kept by set and rule ([`Walker::completions`]): every statement of
    /// a C block completes into the block's set, mask after mask. The
    /// whole closure (a statement's start, every keyword and expression
    /// predicted: four times the items) is made only where the summary is
    /// not known ([`Walker::completed_closed`]); made at every mask, it was half
    /// the instructions of a C text's masks once their summaries were
    /// known.
    fn completed_unpredicted(
        &mut self,
        cfg: &Cfg,
        set: &Arc<ESet>,
        rule: u32,
        budget: &mut Budget,
    ) -> Result<Arc<[Item]>, StepError> {
        let key = (Arc::as_ptr(set) as usize, rule);
        if let Some(known) = self.completions.get(&key) {
            return Ok(known.unpredicted.clone());
        }
        let mut items = completed_in(cfg, set, rule, budget)?;
        if !items.is_empty() {
            close_unpredicted(cfg, &mut items, budget)?;
        }
        let unpredicted: Arc<[Item]> = items.into();
        if self.completions.len() >= COMPLETIONS {
            self.completions.clear();
        }
        let completed = Completed {
            set: set.clone(),
            unpredicted: unpredicted.clone(),
            closed: None,
        };
        self.completions.insert(key, completed);
        Ok(unpredicted)
    }

    /// The whole set after completing `rule` into `set` (see
    /// [`Walker::completed_unpredicted`]), kept with its shape.
    fn completed_closed(
        &mut self,
        cfg: &Cfg,
        set: &Arc<ESet>,
        rule: u32,
        budget: &mut Budget,
    ) -> Result<Vec<Item>, StepError> {
        let key = (Arc::as_ptr(set) as usize, rule);
        if let Some(closed) = self.completions.get(&key).and_then(|c| c.closed.as_ref()) {
            return Ok(closed.clone());
        }
        let mut items = completed_in(cfg, set, rule, budget)?;
        if !items.is_empty() {
            close(cfg, &mut items, &[], budget, None)?;
        }
        match self.completions.get_mut(&key) {
            Some(known) => known.closed = Some(items.clone()),
            None => {
                // The shape is the closure's items but its predictions, in
                // their order ([`close_unpredicted`]).
                let unpredicted = items
                    .iter()
                    .filter(|&i| !SetBuilder::is_predicted(cfg, i))
                    .cloned()
                    .collect();
                if self.completions.len() >= COMPLETIONS {
                    self.completions.clear();
                }
                let completed = Completed {
                    set: set.clone(),
                    unpredicted,
                    closed: Some(items.clone()),
                };
                self.completions.insert(key, completed);
            }
        }
        Ok(items)
    }

    /// Forgets what the walker keeps of chart sets the matcher dropped
    /// (rolled back or reset past them): the rooms of the last walk, whose
    /// items name the sets they start in, and the closed completions into
    /// sets nothing else holds ([`Walker::completions`]), which would keep
    /// them alive until the next clearing. A completion's items name older
    /// sets, so entries go until none is held by the others alone. One
    /// whose items name its own set (items that started there) can stay
    /// until that clearing: telling it apart means reading every item.
    pub(crate) fn forget_dropped(&mut self) {
        self.start();
        let stamp = self.stamp();
        for level in &mut self.levels {
            if !level.own.is_empty() || !level.chunks.is_empty() || !level.memo.is_empty() {
                level.reset(stamp);
            }
        }
        self.group.clear();
        for noted in &mut self.spare_noted {
            noted.clear();
        }
        loop {
            let before = self.completions.len();
            self.completions
                .retain(|_, c| Arc::strong_count(&c.set) > 1);
            if self.completions.len() == before {
                break;
            }
        }
    }

    /// The chart sets [`Walker::completions`] keeps (for tests).
    #[cfg(test)]
    pub(crate) fn completion_sets(&self) -> impl Iterator<Item = &Arc<ESet>> {
        self.completions.values().map(|c| &c.set)
    }

    /// The mask of a set from its shape's summary: the allowed tokens, then
    /// the pending subtrees through the summary of the sets the pending
    /// completions give (computed once per shape of those, then kept), level
    /// by level: each level's nodes are deeper than the last one's.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn finish_mask(
        &mut self,
        cfg: &Cfg,
        trie: &TokenTrie,
        cache: &SummaryCache,
        summary: &Arc<Summary>,
        markers: &[Arc<ESet>],
        row: &mut [u32],
        budget: &mut Budget,
    ) -> Result<(), StepError> {
        summary.allowed.write_into(row);
        let mut summary = summary.clone();
        let mut markers = markers.to_vec();
        let mut key = Vec::new();
        let mut next_markers = Vec::new();
        let mut origins = Vec::new();
        let mut first = true;
        loop {
            if !std::mem::take(&mut first) {
                summary.allowed.or_into(row);
            }
            if summary.groups.is_empty() {
                return Ok(());
            }
            // A summary with no child yet (made in this mask, mostly) has
            // none for these sets either: they are closed whole at once.
            // Otherwise their shapes alone find the child, if it is kept.
            let whole = !summary.has_children();
            let (mut shapes, mut after) = (Vec::new(), Vec::new());
            for group in &summary.groups {
                let (set, rule) = (&markers[group.marker as usize], group.rule);
                if whole {
                    after.push(self.completed_closed(cfg, set, rule, budget)?);
                } else {
                    shapes.push(self.completed_unpredicted(cfg, set, rule, budget)?);
                }
            }
            key.clear();
            next_markers.clear();
            for g in 0..summary.groups.len() {
                let set = if whole { &after[g][..] } else { &shapes[g][..] };
                shape_append(cfg, set, &mut key, &mut next_markers);
                key.push((u32::MAX, u32::MAX, g as u32));
            }
            // Which group's origin set is also an origin of the sets after
            // them: the summary walks those completions itself.
            origins.clear();
            for (g, group) in summary.groups.iter().enumerate() {
                let origin = markers[group.marker as usize].clone();
                let again = next_markers.iter().position(|m| Arc::ptr_eq(m, &origin));
                key.push((u32::MAX - 1, again.map_or(u32::MAX, |m| m as u32), g as u32));
                origins.push(origin);
            }
            let known = if whole { None } else { summary.child(&key) };
            let child = match known {
                Some(child) => child,
                None => {
                    if !whole {
                        for group in &summary.groups {
                            let (set, rule) = (&markers[group.marker as usize], group.rule);
                            after.push(self.completed_closed(cfg, set, rule, budget)?);
                        }
                        debug_assert!(
                            (0..after.len()).all(|g| {
                                let (mut all, mut unpredicted) = (Vec::new(), Vec::new());
                                shape_append(cfg, &after[g], &mut all, &mut Vec::new());
                                shape_append(cfg, &shapes[g], &mut unpredicted, &mut Vec::new());
                                all == unpredicted
                            }),
                            "a closure without its predictions has the whole closure's shape"
                        );
                    }
                    self.child(
                        cfg,
                        trie,
                        Some(cache),
                        (&summary, row),
                        &key,
                        (&summary.groups, &origins),
                        (&after, &[]),
                        &next_markers,
                        budget,
                    )?
                }
            };
            summary = child;
            std::mem::swap(&mut markers, &mut next_markers);
        }
    }

    /// [`Walker::walk_groups`] over the covered rows for completions
    /// into older sets (none reached inside a token), its groups of at
    /// least `group_walks` nodes walked one by one, each kept in `cache`
    /// and taken from there wherever it holds ([`Partial`]).
    #[allow(clippy::too_many_arguments)]
    fn walk_by_groups(
        &mut self,
        cfg: &Cfg,
        trie: &TokenTrie,
        cache: &SummaryCache,
        (groups, origins): (&[Group], &[Arc<ESet>]),
        after: &[Vec<Item>],
        markers: &[Arc<ESet>],
        words: usize,
        budget: &mut Budget,
    ) -> Result<Summary, StepError> {
        let (large, small): (Vec<usize>, Vec<usize>) = (0..groups.len())
            .filter(|&g| !after[g].is_empty())
            .partition(|&g| groups[g].nodes.len() >= self.group_walks);
        if large.is_empty() {
            let walk = (after, &[][..]);
            let (found, pending) =
                self.walk_groups(cfg, trie, (groups, origins), walk, markers, words, budget)?;
            return Ok(Summary::new(self.row_set(found), pending));
        }
        let (mut found, mut pending) = if small.is_empty() {
            (self.zeroed_row(words), Vec::new())
        } else {
            let groups: Vec<Group> = small.iter().map(|&g| groups[g].clone()).collect();
            let origins: Vec<Arc<ESet>> = small.iter().map(|&g| origins[g].clone()).collect();
            let after: Vec<Vec<Item>> = small.iter().map(|&g| after[g].clone()).collect();
            self.walk_groups(
                cfg,
                trie,
                (&groups, &origins),
                (&after, &[]),
                markers,
                words,
                budget,
            )?
        };
        // The covered rows, shared by the walks kept now.
        let mut base: Option<Arc<[u32]>> = None;
        let (mut shape, mut local) = (Vec::new(), Vec::new());
        for g in large {
            let group = &groups[g];
            shape.clear();
            local.clear();
            shape_append(cfg, &after[g], &mut shape, &mut local);
            let again = local
                .iter()
                .position(|m| Arc::ptr_eq(m, &origins[g]))
                .map_or(u32::MAX, |m| m as u32);
            let key = Partial::key(group, &shape, again);
            let partial = match cache.partial(key, group, &shape, again, &self.covered) {
                Some(known) => known,
                None => {
                    let (row, left) = self.walk_groups(
                        cfg,
                        trie,
                        (
                            std::slice::from_ref(group),
                            std::slice::from_ref(&origins[g]),
                        ),
                        (std::slice::from_ref(&after[g]), &[]),
                        &local,
                        words,
                        budget,
                    )?;
                    let new_base = base.is_none();
                    let base = base.get_or_insert_with(|| self.covered.as_slice().into());
                    let partial = Partial {
                        rule: group.rule,
                        nodes: group.nodes.clone(),
                        shape: shape.as_slice().into(),
                        again,
                        base: base.clone(),
                        allowed: self.row_set(row),
                        pending: left,
                    };
                    cache.insert_partial(key, partial, new_base)
                }
            };
            partial.allowed.or_into(&mut found);
            for &(m, rule, node, depth) in &partial.pending {
                let set = &local[m as usize];
                let m = markers
                    .iter()
                    .position(|x| Arc::ptr_eq(x, set))
                    .expect("an origin of a set after a group is a marker of them all");
                pending.push((m as u32, rule, node, depth));
            }
        }
        Ok(self.summary_of(trie, found, pending))
    }

    /// The child of `parent` under `key`: kept in its children, else the
    /// summary of the walks below its groups `groups` (made by
    /// [`Walker::walk_groups`], or with `cache` by
    /// [`Walker::walk_by_groups`]) passing over the tokens of `rows`, the
    /// rows of the chain down to `parent`. A child is kept in its parent's
    /// children alone, so it is always written after those rows.
    #[allow(clippy::too_many_arguments)]
    fn child(
        &mut self,
        cfg: &Cfg,
        trie: &TokenTrie,
        cache: Option<&SummaryCache>,
        (parent, rows): (&Summary, &[u32]),
        key: &[(u32, u32, u32)],
        (groups, origins): (&[Group], &[Arc<ESet>]),
        (after, reached): (&[Vec<Item>], &[Reached]),
        markers: &[Arc<ESet>],
        budget: &mut Budget,
    ) -> Result<Arc<Summary>, StepError> {
        if let Some(child) = parent.child(key) {
            return Ok(child);
        }
        self.covered.clear();
        self.covered.extend_from_slice(rows);
        let made = match cache {
            Some(cache) => self.walk_by_groups(
                cfg,
                trie,
                cache,
                (groups, origins),
                after,
                markers,
                rows.len(),
                budget,
            ),
            None => self
                .walk_groups(
                    cfg,
                    trie,
                    (groups, origins),
                    (after, reached),
                    markers,
                    rows.len(),
                    budget,
                )
                .map(|(found, pending)| Summary::new(self.row_set(found), pending)),
        };
        self.covered.clear();
        let child = Arc::new(made?);
        let mut children = parent.children.lock().unwrap_or_else(|e| e.into_inner());
        if children.len() >= CHILDREN {
            children.clear();
        }
        children.insert(key.into(), child.clone());
        Ok(child)
    }

    /// The chunk of walk item `item` (in level `d`, its lexeme may end):
    /// from the memo of its origin's level (or of the walk, for a chart
    /// origin), else closed now.
    fn chunk(
        &mut self,
        cfg: &Cfg,
        item: &Item,
        d: usize,
        budget: &mut Budget,
        frontier: Option<&mut Frontier>,
    ) -> Result<Arc<Chunk>, StepError> {
        let known = match &item.origin {
            Origin::Local(k) => self.levels[*k as usize].memo.get(&item.pos),
            Origin::Set(s) => self.set_memo.get(&(item.pos, Arc::as_ptr(s) as usize)),
            Origin::Here => None,
        };
        if let Some(c) = known {
            return Ok(c.clone());
        }
        let alike_key = match item.origin {
            Origin::Local(k) => self.alike_key(cfg, k as usize, item.pos),
            _ => None,
        };
        if let Some(key) = alike_key {
            let level = &self.levels[key.1 as usize];
            let levels = &self.levels;
            let found = self.alike.get(&(key.0, key.2)).and_then(|known| {
                known.iter().find(|a| {
                    same_chunks(&a.chunks, &level.chunks)
                        && a.read
                            .iter()
                            .all(|&(j, stamp)| levels[j as usize].stamp == stamp)
                })
            });
            let found = found.map(|a| {
                if !a.rooted || a.at == key.1 {
                    return Ok(a.chunk.clone());
                }
                // Made for another level: its items that start there
                // start here.
                let (from, to) = (Origin::Local(a.at), Origin::Local(key.1));
                let items = a
                    .chunk
                    .items
                    .iter()
                    .map(|i| Item {
                        origin: if i.origin == from {
                            to.clone()
                        } else {
                            i.origin.clone()
                        },
                        ..i.clone()
                    })
                    .collect::<Vec<Item>>();
                Err((items, a.chunk.reached.clone()))
            });
            let found = found.map(|made| match made {
                Ok(chunk) => chunk,
                Err((items, reached)) => self.intern(cfg, Chunk::new(cfg, items, reached)),
            });
            if let Some(chunk) = found {
                self.levels[key.1 as usize]
                    .memo
                    .insert(item.pos, chunk.clone());
                return Ok(chunk);
            }
        }
        // Closed in a vector kept from chunk to chunk (grown from one item,
        // a closure of 27 items on average was four reallocations), then
        // moved into one of its size.
        let mut closing = std::mem::take(&mut self.closing);
        closing.clear();
        closing.push(cfg.advanced(item));
        let reached_before = frontier.as_ref().map_or(0, |f| f.reached.len());
        let mut frontier = frontier;
        let mut read = std::mem::take(&mut self.read);
        read.clear();
        close_reading(
            cfg,
            &mut closing,
            &self.levels[..d],
            budget,
            frontier.as_deref_mut(),
            alike_key.is_some().then_some(&mut read),
            true,
        )?;
        let mut items = Vec::with_capacity(closing.len());
        items.append(&mut closing);
        self.closing = closing;
        let reached = match frontier {
            Some(f) => f.reached.drain(reached_before..).collect(),
            None => Vec::new(),
        };
        let chunk = self.intern(cfg, Chunk::new(cfg, items, reached));
        if let Some((pos, k, hash)) = alike_key {
            let at_level = Origin::Local(k);
            let rooted_here = chunk
                .items
                .iter()
                .any(|i| i.origin == at_level && !matches!(cfg.syms[i.pos as usize], Sym::End(_)));
            read.sort_unstable();
            read.dedup();
            let levels = &self.levels;
            let read = read
                .iter()
                .filter(|&&j| j != k)
                .map(|&j| (j, levels[j as usize].stamp))
                .collect();
            let chunks = levels[k as usize].chunks.clone();
            self.alike.entry((pos, hash)).or_default().push(Alike {
                at: k,
                rooted: rooted_here,
                chunks,
                read,
                chunk: chunk.clone(),
            });
        }
        self.read = read;
        match &item.origin {
            Origin::Local(k) => {
                self.levels[*k as usize]
                    .memo
                    .insert(item.pos, chunk.clone());
            }
            Origin::Set(s) => {
                self.set_memo
                    .insert((item.pos, Arc::as_ptr(s) as usize), chunk.clone());
            }
            Origin::Here => {}
        }
        Ok(chunk)
    }

    /// The class of level `k`: levels of one class hold the same items
    /// waiting for a rule, their origins the same (a level's own origin,
    /// `Here` in its chunks, counting as the same in both, and older
    /// levels compared by class). Completing a rule into either level
    /// gives the same items, but for origins of the same class, so items
    /// alike but for origins of one class go on alike (they are bisimilar):
    /// one of them is enough. The splits of a run of names into names
    /// (`name ws name` with `ws` empty) start items at every byte, each in
    /// a level of the same class.
    fn class_of(&mut self, cfg: &Cfg, k: usize) -> u32 {
        let known = self.levels[k].class;
        if known != Level::NO_CLASS {
            return known;
        }
        let level = &self.levels[k];
        let own_waits = level
            .own
            .iter()
            .any(|i| matches!(cfg.syms[i.pos as usize], Sym::Rule(_)));
        // The older levels first (a level's items start in older ones).
        let own_older = level
            .own
            .iter()
            .filter(|_| own_waits)
            .filter_map(|i| i.origin.level());
        let mut older = sorted_levels(
            &mut self.level_bits,
            self.levels.len(),
            level
                .chunks
                .iter()
                .flat_map(|c| c.older.iter().copied())
                .chain(own_older),
        );
        older.retain(|&x| x as usize != k);
        let older_classes: Vec<u32> = older
            .iter()
            .map(|&x| self.class_of(cfg, x as usize))
            .collect();
        // Mostly a level holds chunks met before, at other levels.
        let by_chunks = (!own_waits).then(|| {
            let level = &self.levels[k];
            let mut key = Vec::with_capacity(level.chunks.len() + older_classes.len());
            key.extend(level.chunks.iter().map(|c| Arc::as_ptr(c) as u64));
            key.sort_unstable();
            key.extend(older_classes.iter().map(|&c| c as u64));
            key
        });
        if let Some(class) = by_chunks
            .as_ref()
            .and_then(|key| self.classes_by_chunks.get(key))
        {
            let class = *class;
            self.levels[k].class = class;
            return class;
        }
        let levels = &self.levels;
        let level = &levels[k];
        let mut key: Vec<(u32, u32, u64)> = level
            .own
            .iter()
            .chain(
                level
                    .chunks
                    .iter()
                    .flat_map(|c| c.items[c.lexical..].iter()),
            )
            .filter(|i| matches!(cfg.syms[i.pos as usize], Sym::Rule(_)))
            .map(|i| {
                let origin = match &i.origin {
                    Origin::Here => u64::MAX,
                    Origin::Local(x) if *x as usize == k => u64::MAX,
                    Origin::Local(x) => u64::MAX - 1 - levels[*x as usize].class as u64,
                    Origin::Set(s) => Arc::as_ptr(s) as u64,
                };
                (i.pos, i.lex, origin)
            })
            .collect();
        key.sort_unstable();
        key.dedup();
        let next = self.classes.len() as u32 + 1;
        let class = *self.classes.entry(key).or_insert(next);
        if let Some(key) = by_chunks {
            self.class_chunks
                .extend(self.levels[k].chunks.iter().cloned());
            self.classes_by_chunks.insert(key, class);
        }
        self.levels[k].class = class;
        class
    }

    /// Removes from `items` (scanned into a level, their lexeme items
    /// repeated with other origins) those alike but for an origin of the
    /// same class as a kept one's ([`Walker::class_of`]).
    fn merge_alike_origins(&mut self, cfg: &Cfg, items: &mut Vec<Item>) {
        let repeated = if items.len() <= 8 {
            let place = |i: &Item| (i.pos, i.lex);
            (1..items.len()).any(|k| items[..k].iter().any(|i| place(i) == place(&items[k])))
        } else {
            let mut places = std::mem::take(&mut self.places);
            places.clear();
            places.extend(items.iter().map(|i| (i.pos, i.lex)));
            places.sort_unstable();
            let repeated = places.windows(2).any(|w| w[0] == w[1]);
            self.places = places;
            repeated
        };
        if !repeated {
            return;
        }
        let mut kept = std::mem::take(&mut self.kept_keys);
        kept.clear();
        let mut k = 0;
        while k < items.len() {
            let origin = match &items[k].origin {
                Origin::Local(x) => u64::MAX - 1 - self.class_of(cfg, *x as usize) as u64,
                other => other.key() as u64,
            };
            let key = (items[k].pos, items[k].lex, origin);
            if kept.contains(&key) {
                items.swap_remove(k);
            } else {
                kept.push(key);
                k += 1;
            }
        }
        self.kept_keys = kept;
    }

    /// The key of [`Walker::alike`] for an item at `pos` whose origin is
    /// level `k`: `(pos, k, hash of the level's chunks)`, or `None` where
    /// the level's own items may be parents (the base of a walk).
    ///
    /// The chunk after such an item is its closure, whose completions into
    /// level `k` read only the items of the level's chunks that wait for a
    /// rule (a level's own items are scanned ones, before a lexeme). Two
    /// levels holding the same chunks give the same closure, but for the
    /// items whose origin is the level itself (the chunks' `Here`, rebased):
    /// a chunk holding none that is open is shared by every such level
    /// (complete items are never read again). Where a lexeme may follow
    /// itself or end empty (`[a-z]+ ([ ]* [a-z]+)*`), every byte of a word
    /// is a split point and a level of its own, all holding the same
    /// chunks: closed once, not once per byte of every token.
    fn alike_key(&self, cfg: &Cfg, k: usize, pos: u32) -> Option<(u32, u32, u64)> {
        let level = &self.levels[k];
        if level.chunks.is_empty()
            || level
                .own
                .iter()
                .any(|i| matches!(cfg.syms[i.pos as usize], Sym::Rule(_)))
        {
            return None;
        }
        Some((pos, k as u32, chunks_hash(&level.chunks)))
    }

    /// Walks the trie nodes `first..end` (a run of whole subtrees) from
    /// the levels above them, marking the tokens at every node whose set
    /// is not empty. With a frontier (while summarizing), completions into
    /// older sets are left pending at the node where they happen.
    ///
    /// A level holds the items scanned into it; where their lexemes may
    /// end, the closure (a [`Chunk`]) is shared, not copied, and a child's
    /// byte is scanned against a chunk only if some item of it takes the
    /// byte: after an identifier, the letters that continue it never touch
    /// the parser. Below a node whose level holds a few lexeme items (inside
    /// a string, a number, a key), the lexemes walk the subtree (see
    /// [`Walker::walk_lexemes_below`]).
    #[allow(clippy::too_many_arguments)]
    fn walk_nodes(
        &mut self,
        cfg: &Cfg,
        trie: &TokenTrie,
        (first, end): (usize, usize),
        row: &mut [u32],
        budget: &mut Budget,
        mut summarizing: Option<(&mut Frontier, &mut Vec<PendingAt>)>,
    ) -> Result<(), StepError> {
        let mut j = first;
        let mut scanned = self.spare.pop().unwrap_or_default();
        // The nodes are asked about in trie order, and the row only grows.
        let mut held = Held::default();
        while j < end {
            let n = trie.nodes[j];
            let d = n.depth as usize;
            if self.levels.len() <= d {
                self.levels.resize_with(d + 1, Level::default);
            }
            budget.spend(1)?;
            if self.covered_in_order(trie, j, row, &mut held) {
                self.exits.drop_before(n.next);
                j = n.next as usize;
                continue;
            }
            if self.levels[d - 1].loops != [0; 2] {
                let reborrowed = summarizing.as_mut().map(|(f, p)| (&mut **f, &mut **p));
                if self.try_loops(cfg, trie, j, &mut scanned, budget, reborrowed)? {
                    for &t in trie.subtree_tokens(j) {
                        row[t as usize / 32] |= 1 << (t % 32);
                    }
                    self.exits.drop_before(n.next);
                    j = n.next as usize;
                    continue;
                }
            }
            let reborrowed = summarizing.as_mut().map(|(f, p)| (&mut **f, &mut **p));
            if !self.make_level(cfg, (j, d, n.byte), &mut scanned, budget, reborrowed)? {
                if self.exits.any_before(n.next) {
                    let reborrowed = summarizing.as_mut().map(|(f, p)| (&mut **f, &mut **p));
                    self.walk_exits(cfg, trie, n.next, row, budget, reborrowed)?;
                }
                j = n.next as usize;
                continue;
            }
            // A level made again from its parent: the parent loops on the
            // byte ([`Level::loops`]).
            let again = d >= 2 && n.byte < 128 && self.same_levels(d - 1, d);
            if again {
                // A level that loops: what a level alike found is taken.
                // Asked only of such levels holding several items (the
                // splits of a run of names): a key costs about what a few
                // tries do, and a C grammar's levels of one identifier
                // paid more for keys than they saved.
                if !self.levels[d - 1].looked && self.levels[d - 1].own.len() > 1 {
                    self.recall_loops(cfg, d - 1);
                }
                let parent = &mut self.levels[d - 1];
                parent.loops[n.byte as usize >> 6] |= 1 << (n.byte & 63);
                parent.tried[n.byte as usize >> 6] |= 1 << (n.byte & 63);
            }
            if self.exits.any_before(j as u32 + 1) {
                Self::take_exits(&mut self.exits, cfg, j as u32, &mut self.levels[d].chunks);
            }
            if again && self.same_levels(d - 1, d) {
                let (loops, tried) = (self.levels[d - 1].loops, self.levels[d - 1].tried);
                (self.levels[d].loops, self.levels[d].tried) = (loops, tried);
            }
            for &t in &trie.tokens[trie.token_start[j] as usize..trie.token_start[j + 1] as usize] {
                row[t as usize / 32] |= 1 << (t % 32);
            }
            if n.next as usize > j + 1 && self.walks_lexemes(cfg, d) {
                let reborrowed = summarizing.as_mut().map(|(f, p)| (&mut **f, &mut **p));
                self.walk_lexemes_below(cfg, trie, j, row, budget, reborrowed)?;
                j = n.next as usize;
                continue;
            }
            j += 1;
        }
        scanned.clear();
        self.spare.push(scanned);
        Ok(())
    }

    /// Makes level `d` from level `d - 1` and the byte of trie node `j`:
    /// false where no item takes the byte (the level is then not made).
    /// `scanned` is room, left holding what it will.
    fn make_level(
        &mut self,
        cfg: &Cfg,
        (j, d, byte): (usize, usize, u8),
        scanned: &mut Vec<Item>,
        budget: &mut Budget,
        mut summarizing: Option<(&mut Frontier, &mut Vec<PendingAt>)>,
    ) -> Result<bool, StepError> {
        scanned.clear();
        {
            let from = &self.levels[d - 1];
            let here = Origin::Local(d as u32 - 1);
            scan(cfg, &from.own, &here, byte, scanned);
            for c in &from.chunks {
                if c.takes(byte) {
                    c.scan(cfg, &here, byte, scanned);
                }
            }
        }
        if scanned.is_empty() {
            return Ok(false);
        }
        dedupe(scanned, &mut self.seen);
        if scanned.len() > 1 {
            self.merge_alike_origins(cfg, scanned);
        }
        if scanned.len() > budget.max_items {
            return Err(StepError::LimitExceeded {
                what: "the Earley items after one byte".into(),
                limit: budget.max_items,
                knob: "max_items".into(),
            });
        }
        budget.spend(scanned.len())?;
        let stamp = self.stamp();
        self.levels[d].reset(stamp);
        // The lexeme items that may end here, each with its closure:
        // two with the same position, lexeme state and closure go on
        // alike (the splits of a word into words), and one is kept.
        let mut ended = std::mem::take(&mut self.ended);
        ended.clear();
        let mut k = 0;
        while k < scanned.len() {
            let item = &scanned[k];
            let Sym::Lex(l) = cfg.syms[item.pos as usize] else {
                k += 1;
                continue;
            };
            if !cfg.lexemes[l as usize].accepts(item.lex) {
                k += 1;
                continue;
            }
            let chunk = match &mut summarizing {
                Some((frontier, _)) => self.chunk(cfg, item, d, budget, Some(frontier))?,
                None => self.chunk(cfg, item, d, budget, None)?,
            };
            if scanned.len() > 1 {
                let alike = |(pos, lex, c): &(u32, u32, Arc<Chunk>)| {
                    (*pos, *lex) == (item.pos, item.lex) && Arc::ptr_eq(c, &chunk)
                };
                if ended.iter().any(alike) {
                    scanned.swap_remove(k);
                    continue;
                }
                ended.push((item.pos, item.lex, chunk.clone()));
            }
            k += 1;
            if let Some((frontier, pending)) = &mut summarizing {
                for &(marker, rule) in &chunk.reached {
                    match frontier.looped(marker, rule) {
                        Some(after) => {
                            // What closing the set after it left pending.
                            for &(m, r) in &after.reached {
                                pending.push((m, r, j as u32, d as u32));
                            }
                            let level = &mut self.levels[d];
                            if !level.chunks.iter().any(|c| c.same_future(cfg, after)) {
                                level.chunks.push(after.clone());
                            }
                        }
                        None => pending.push((marker, rule, j as u32, d as u32)),
                    }
                }
            }
            let level = &mut self.levels[d];
            if !level.chunks.iter().any(|c| c.same_future(cfg, &chunk)) {
                level.chunks.push(chunk);
            }
        }
        ended.clear();
        self.ended = ended;
        std::mem::swap(&mut self.levels[d].own, scanned);
        Ok(true)
    }

    /// Whether every token of node `j`'s subtree is in `row` or in
    /// [`Walker::covered`] already. Walked, the subtree could give only
    /// those tokens again, and completions into older sets at its nodes
    /// that lead only below them: it is passed over, with what was noted
    /// in it. Most nodes fail at their first token, not yet found.
    ///
    /// Nodes are asked about in trie order while `row` only grows: what
    /// was found held is not read again. A run of exits at nearly every
    /// node of a region of names asked each node's subtree afresh, most
    /// of it found already (on the grammar of GBNF, 12 million calls, a
    /// quarter of its masks' instructions).
    #[inline(always)]
    fn covered_in_order(&self, trie: &TokenTrie, j: usize, row: &[u32], held: &mut Held) -> bool {
        let (from, to) = (
            trie.token_start[j] as usize,
            trie.token_start[trie.nodes[j].next as usize] as usize,
        );
        if from < held.from || from > held.to {
            *held = Held { from, to: from };
        }
        let base = &self.covered;
        while held.to < to {
            let t = trie.tokens[held.to] as usize;
            let word = row[t / 32] | base.get(t / 32).copied().unwrap_or(0);
            if word >> (t % 32) & 1 == 0 {
                return false;
            }
            held.to += 1;
        }
        true
    }

    /// Whether node `j`'s subtree is taken whole: the parent's level loops
    /// ([`Level::loops`]) on the node's byte and on every byte below it,
    /// so every node of the subtree holds that level again and its every
    /// token is allowed. The bytes not tried yet are tried first, each by
    /// making level `d` from the parent with it and comparing (a subtree
    /// with a byte that does not loop is walked).
    ///
    /// A level is made from the one above it, the byte, and the older
    /// levels its items start in alone; a level alike at another depth
    /// starts its new items in itself, alike too. So a byte that gives a
    /// level again gives it again from the copy, at any depth below.
    /// Completions into older sets noted while trying are dropped: below a
    /// node taken whole, the walks after them could only take tokens of
    /// its subtree again.
    fn try_loops(
        &mut self,
        cfg: &Cfg,
        trie: &TokenTrie,
        j: usize,
        scanned: &mut Vec<Item>,
        budget: &mut Budget,
        mut summarizing: Option<(&mut Frontier, &mut Vec<PendingAt>)>,
    ) -> Result<bool, StepError> {
        let n = trie.nodes[j];
        let d = n.depth as usize;
        let below = &trie.below[j];
        if n.byte >= 128 || below.non_ascii {
            return Ok(false);
        }
        let mut wanted = below.ascii;
        wanted[n.byte as usize >> 6] |= 1 << (n.byte & 63);
        let parent = &self.levels[d - 1];
        let untried = [wanted[0] & !parent.tried[0], wanted[1] & !parent.tried[1]];
        // Given up at the first byte that does not loop: the subtree is
        // walked anyway.
        if (0..2).any(|w| wanted[w] & parent.tried[w] & !parent.loops[w] != 0) {
            return Ok(false);
        }
        for (w, &word) in untried.iter().enumerate() {
            let mut bits = word;
            while bits != 0 {
                let b = (w * 64) as u8 + bits.trailing_zeros() as u8;
                bits &= bits - 1;
                let pending_before = summarizing.as_ref().map_or(0, |(_, p)| p.len());
                let reborrowed = summarizing.as_mut().map(|(f, p)| (&mut **f, &mut **p));
                let loops = self.make_level(cfg, (j, d, b), scanned, budget, reborrowed)?
                    && self.same_levels(d - 1, d);
                if let Some((_, pending)) = &mut summarizing {
                    pending.truncate(pending_before);
                }
                let parent = &mut self.levels[d - 1];
                parent.tried[w] |= 1 << (b & 63);
                if !loops {
                    self.remember_loops(d - 1);
                    return Ok(false);
                }
                parent.loops[w] |= 1 << (b & 63);
            }
        }
        if untried != [0; 2] {
            self.remember_loops(d - 1);
        }
        Ok(true)
    }

    /// What decides [`Level::loops`] of level `k`: its depth, its items
    /// and chunks as they are, and the class ([`Walker::class_of`]) of
    /// each level their items start in. Making a level from it reads
    /// those levels only through what waits in them, so two levels of
    /// one key make from each byte levels alike, each the same as its
    /// parent or neither.
    fn loop_key(&mut self, cfg: &Cfg, k: usize) -> Box<[u64]> {
        let level = &self.levels[k];
        let own = level.own.iter().filter_map(|i| i.origin.level());
        let origins = sorted_levels(
            &mut self.level_bits,
            self.levels.len(),
            own.chain(level.chunks.iter().flat_map(|c| c.locals().iter().copied())),
        );
        // Sized at once: grown push by push, keys were 3% of a GBNF
        // mask's instructions, most of it reallocations.
        let len = 3 + 2 * level.own.len() + level.chunks.len() + origins.len();
        let mut key: Vec<u64> = Vec::with_capacity(len);
        key.push(k as u64);
        for i in &level.own {
            key.push(u64::from(i.pos) << 32 | u64::from(i.lex));
            key.push(match &i.origin {
                Origin::Here => u64::MAX,
                Origin::Set(s) => Arc::as_ptr(s) as u64,
                Origin::Local(x) => u64::MAX - 1 - u64::from(*x),
            });
        }
        key.push(u64::MAX);
        key.extend(level.chunks.iter().map(|c| Arc::as_ptr(c) as u64));
        key.push(u64::MAX);
        for x in origins {
            let class = self.class_of(cfg, x as usize);
            key.push(u64::from(x) << 32 | u64::from(class));
        }
        debug_assert_eq!(key.len(), len);
        key.into_boxed_slice()
    }

    /// Sets [`Level::loops`] of level `k` from a level alike met before in
    /// this walk, if one was. Out of line: asked of few levels, and
    /// inlined into [`Walker::walk_nodes`] it cost C's masks 0.1%.
    #[inline(never)]
    fn recall_loops(&mut self, cfg: &Cfg, k: usize) {
        let key = self.loop_key(cfg, k);
        let level = &mut self.levels[k];
        level.looked = true;
        if let Some(&(loops, tried)) = self.loop_memo.get(&key) {
            (level.loops, level.tried) = (loops, tried);
        }
        level.loop_key = Some(key);
    }

    /// Keeps what was found of [`Level::loops`] of level `k` for the
    /// levels alike, where its key was made.
    fn remember_loops(&mut self, k: usize) {
        let level = &self.levels[k];
        if let Some(key) = &level.loop_key {
            self.loop_memo
                .insert(key.clone(), (level.loops, level.tried));
        }
    }

    /// Whether levels `a` and `b` hold the same items and the same chunks.
    fn same_levels(&self, a: usize, b: usize) -> bool {
        let (a, b) = (&self.levels[a], &self.levels[b]);
        a.own == b.own
            && a.chunks.len() == b.chunks.len()
            && a.chunks
                .iter()
                .zip(&b.chunks)
                .all(|(x, y)| Arc::ptr_eq(x, y))
    }

    /// Whether the subtree below a node at level `d` is walked lexeme by
    /// lexeme ([`LEXEME_WALKS`], [`NARROW_WALKS`]).
    ///
    /// Not where a lexeme of the level may start again right after it
    /// (`[a-z]+` repeated with an empty lexeme between): every byte below
    /// is then a split point, each lexeme walk would meet the walks of the
    /// splits after it, and none of them would see the others. Walked by
    /// the parser, the splits meet in one level, where those with the
    /// same future are one item ([`Walker::walk_nodes`]).
    fn walks_lexemes(&self, cfg: &Cfg, d: usize) -> bool {
        let level = &self.levels[d];
        let own = &level.own;
        let few = own.len() <= LEXEME_WALKS
            || own.len() <= NARROW_WALKS
                && own.iter().all(|i| match cfg.syms[i.pos as usize] {
                    Sym::Lex(l) => !cfg.lexemes[l as usize].is_wide(i.lex),
                    _ => true,
                });
        if !self.lexeme_walks || !few {
            return false;
        }
        let again = |j: &Item| own.iter().any(|i| i.pos == j.pos);
        !level.chunks.iter().any(|c| c.lexical().iter().any(again))
    }

    /// [`Walker::walk_nodes`] below `node`, whose level's items (its own
    /// and its chunks') take the bytes `first`: only the children of those
    /// bytes are read. Below the exits of a run of whitespace (a lexeme
    /// that may end after any space of it) most children are letters,
    /// which nothing after the lexeme takes.
    #[allow(clippy::too_many_arguments)]
    fn walk_kids(
        &mut self,
        cfg: &Cfg,
        trie: &TokenTrie,
        node: u32,
        first: &[u64; 4],
        row: &mut [u32],
        budget: &mut Budget,
        mut summarizing: Option<(&mut Frontier, &mut Vec<PendingAt>)>,
    ) -> Result<(), StepError> {
        let (bytes, kids) = trie.kids(node as usize);
        // The subtrees of a node's children lie one after the other: a
        // child's ends where the next one's starts (the last one's where
        // the node's does), read here without a node of the trie.
        let last_end = trie.nodes[node as usize].next;
        // A node of many children (the root, a quote, a space) whose
        // closures take a few bytes: the children of those bytes are
        // looked up, not every child read; the exits noted in the subtrees
        // between them are walked before the next one.
        if bytes.len() > FEW_KIDS {
            let count: u32 = first.iter().map(|w| w.count_ones()).sum();
            if count as usize * FEW_KIDS <= bytes.len() {
                for (w, &word) in first.iter().enumerate() {
                    let mut bits = word;
                    while bits != 0 {
                        let b = (w * 64) as u8 + bits.trailing_zeros() as u8;
                        bits &= bits - 1;
                        let Ok(i) = bytes.binary_search(&b) else {
                            continue;
                        };
                        let (kid, end) = (kids[i], kids.get(i + 1).copied().unwrap_or(last_end));
                        if self.exits.any_before(kid) {
                            let reborrowed =
                                summarizing.as_mut().map(|(f, p)| (&mut **f, &mut **p));
                            self.walk_exits(cfg, trie, kid, row, budget, reborrowed)?;
                        }
                        let reborrowed = summarizing.as_mut().map(|(f, p)| (&mut **f, &mut **p));
                        let nodes = (kid as usize, end as usize);
                        self.walk_nodes(cfg, trie, nodes, row, budget, reborrowed)?;
                    }
                }
                if self.exits.any_before(last_end) {
                    self.walk_exits(cfg, trie, last_end, row, budget, summarizing)?;
                }
                return Ok(());
            }
        }
        // Children taken one after another are walked as one run of
        // subtrees (after a name, every letter and digit).
        let mut run: Option<u32> = None;
        for (i, (&b, &kid)) in bytes.iter().zip(kids).enumerate() {
            let end = kids.get(i + 1).copied().unwrap_or(last_end);
            if has_byte(first, b) {
                debug_assert_eq!(end, trie.nodes[kid as usize].next);
                run.get_or_insert(kid);
                continue;
            }
            if let Some(start) = run.take() {
                let reborrowed = summarizing.as_mut().map(|(f, p)| (&mut **f, &mut **p));
                let nodes = (start as usize, kid as usize);
                self.walk_nodes(cfg, trie, nodes, row, budget, reborrowed)?;
            }
            if self.exits.any_before(end) {
                let reborrowed = summarizing.as_mut().map(|(f, p)| (&mut **f, &mut **p));
                self.walk_exits(cfg, trie, end, row, budget, reborrowed)?;
            }
        }
        if let Some(start) = run {
            let nodes = (start as usize, last_end as usize);
            self.walk_nodes(cfg, trie, nodes, row, budget, summarizing)?;
        }
        Ok(())
    }

    /// The subtree of node `j`, whose level holds a few lexeme items: the
    /// tokens that stay in a lexeme from that lexeme's own walk
    /// ([`Lexeme::walk_below`]: a DFA step per node, whole subtrees taken
    /// by the text step, no parser), and the parser's walk only past the
    /// nodes where one may end: below `j` from the level's chunks, below
    /// each exit from the chunks of the items that may end there.
    ///
    /// An item's lexeme walk reads no level (a completion advances the
    /// parents in its origin's level, and an item's origin is above `j`
    /// or below its own exit), and the closure after a lexeme depends on
    /// the item's position and origin alone, so the levels between `j`
    /// and an exit are not read. The exits of all the items, and of those
    /// of the walks above that fall below `j`, are walked node by node in
    /// trie order ([`Walker::walk_exits`]): a node where several lexemes
    /// may end (the splits of one token into lexemes) is walked once.
    fn walk_lexemes_below(
        &mut self,
        cfg: &Cfg,
        trie: &TokenTrie,
        j: usize,
        row: &mut [u32],
        budget: &mut Budget,
        mut summarizing: Option<(&mut Frontier, &mut Vec<PendingAt>)>,
    ) -> Result<(), StepError> {
        let n = trie.nodes[j];
        let d = n.depth as usize;
        let mut items = std::mem::take(&mut self.levels[d].own);
        self.levels[d].forget_loops();
        // Its items are taken out meanwhile: nothing is looked up for it.
        self.levels[d].looked = true;
        let mut noted = self.spare_noted.pop().unwrap_or_default();
        // Taken (a walk below an exit takes its own) and put back.
        let mut kept = std::mem::take(&mut self.kept);
        let mut exits = std::mem::take(&mut self.lexeme_exits);
        let big = n.next - j as u32 >= BELOW_MEMO_NODES;
        for item in &items {
            let key = (item.pos, item.lex, j as u32);
            let known = big
                .then(|| {
                    let memo = cfg.follow.below.lock().unwrap_or_else(|e| e.into_inner());
                    memo.0.get(&key).cloned()
                })
                .flatten();
            // A walk made now is in the rooms; a big one is also kept.
            let mut work = 0;
            let walk = match known {
                Some(walk) => Some(walk),
                None => {
                    work = self.lexeme_walk(cfg, trie, item, j, (&mut kept, &mut exits));
                    if big {
                        let tokens = kept.runs.iter().map(|&(a, b)| (b - a) as usize).sum();
                        let walk = Arc::new(BelowWalk {
                            runs: kept.runs.clone(),
                            exits: exits.clone(),
                            work,
                            tokens,
                            row: OnceLock::new(),
                        });
                        // A row it may make counted from the start.
                        let row_bytes = if tokens >= DENSE_RUN_TOKENS {
                            row.len() * 4
                        } else {
                            0
                        };
                        let bytes = (walk.runs.len() + walk.exits.len()) * 8 + 64 + row_bytes;
                        let mut memo = cfg.follow.below.lock().unwrap_or_else(|e| e.into_inner());
                        if memo.1 + bytes > BELOW_MEMO_BYTES {
                            memo.0.clear();
                            memo.1 = 0;
                        }
                        memo.1 += bytes;
                        memo.0.insert(key, walk);
                    }
                    None
                }
            };
            if let Some(w) = &walk {
                work = w.work;
            }
            budget.spend(work)?;
            let item_exits = match &walk {
                Some(w) => {
                    w.set_tokens(trie, row);
                    &w.exits
                }
                None => {
                    set_runs(trie, &kept.runs, row);
                    &exits
                }
            };
            // The row does not change in this loop, and the exits are in
            // trie order. Below a subtree of exits the row holds whole (a
            // name's letters, whose tokens the runs just set), none is
            // read.
            let mut held = Held::default();
            for &entry in item_exits {
                if entry.1 & WHOLE_EXIT != 0
                    && self.covered_in_order(trie, entry.0 as usize, row, &mut held)
                {
                    continue;
                }
                for (e, depth) in exits_of(trie, entry) {
                    if self.covered_in_order(trie, e as usize, row, &mut held) {
                        continue;
                    }
                    let k = depth as usize;
                    if self.levels.len() <= k {
                        self.levels.resize_with(k + 1, Level::default);
                    }
                    let chunk = match &mut summarizing {
                        Some((frontier, pending)) => {
                            let chunk = self.chunk(cfg, item, k, budget, Some(frontier))?;
                            for &(marker, rule) in &chunk.reached {
                                match frontier.looped(marker, rule) {
                                    Some(after) => {
                                        for &(m, r) in &after.reached {
                                            pending.push((m, r, e, depth));
                                        }
                                        noted.push((e, depth, after.clone()))
                                    }
                                    None => pending.push((marker, rule, e, depth)),
                                }
                            }
                            chunk
                        }
                        None => self.chunk(cfg, item, k, budget, None)?,
                    };
                    noted.push((e, depth, chunk));
                }
            }
        }
        self.kept = kept;
        self.lexeme_exits = exits;
        let mut first = [0u64; 4];
        for c in &self.levels[d].chunks {
            for (w, f) in first.iter_mut().zip(&c.first) {
                *w |= f;
            }
        }
        // Whether the walk from the level's chunks may reach an exit: it
        // enters the children of `j` whose bytes they take.
        let (bytes, kids) = trie.kids(j);
        let reached = |e: u32| {
            let kid = kids.partition_point(|&k| k <= e) - 1;
            let b = bytes[kid];
            has_byte(&first, b)
        };
        if noted.iter().any(|&(e, _, _)| reached(e)) {
            // Noted, each is walked once, from both.
            noted.sort_unstable_by_key(|&(node, _, _)| node);
            self.exits.add(&mut noted, n.next);
        }
        if first != [0; 4] {
            let reborrowed = summarizing.as_mut().map(|(f, p)| (&mut **f, &mut **p));
            self.walk_kids(cfg, trie, j as u32, &first, row, budget, reborrowed)?;
        }
        let reborrowed = summarizing.as_mut().map(|(f, p)| (&mut **f, &mut **p));
        self.walk_list(cfg, trie, &mut noted, n.next, row, budget, reborrowed)?;
        self.spare_noted.push(noted);
        if self.exits.any_before(n.next) {
            self.walk_exits(cfg, trie, n.next, row, budget, summarizing)?;
        }
        // The level's room, for the next node at this depth.
        items.clear();
        self.levels[d].own = items;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(pos: u32, lex: u32, origin: u32) -> Item {
        let origin = if origin == u32::MAX {
            Origin::Here
        } else {
            Origin::Local(origin)
        };
        Item { pos, lex, origin }
    }

    /// The first of each item, in order: what `Vec::retain` with a hash set
    /// of the keys met keeps.
    fn first_of_each(items: &[Item]) -> Vec<(u32, u32, usize)> {
        let mut met = std::collections::HashSet::new();
        items
            .iter()
            .map(Item::key)
            .filter(|&k| met.insert(k))
            .collect()
    }

    #[test]
    fn a_walker_forgets_the_completions_into_sets_only_it_holds() {
        let config = crate::EarleyConfig::default();
        let mut walker = Walker::new(&config);
        let (kept, dropped) = (
            Arc::new(ESet::new(vec![item(1, 0, u32::MAX)])),
            Arc::new(ESet::new(vec![item(2, 0, u32::MAX)])),
        );
        for (set, rule) in [(&kept, 0), (&kept, 1), (&dropped, 0)] {
            let key = (Arc::as_ptr(set) as usize, rule);
            let completed = Completed {
                set: set.clone(),
                unpredicted: vec![item(3, 0, 0)].into(),
                closed: Some(vec![item(3, 0, 0)]),
            };
            walker.completions.insert(key, completed);
        }
        let gone = Arc::downgrade(&dropped);
        drop(dropped);
        assert!(gone.upgrade().is_some(), "the walker holds the set");
        walker.forget_dropped();
        assert!(
            gone.upgrade().is_none(),
            "a set only the walker held is freed"
        );
        assert_eq!(walker.completions.len(), 2);
        assert!(
            walker
                .completions
                .values()
                .all(|c| Arc::ptr_eq(&c.set, &kept))
        );
    }

    #[test]
    fn dedupe_keeps_the_first_of_each_item_in_order() {
        let mut seen = Seen::default();
        // Many items share a position (differing by lexeme state or
        // origin), some repeat near and far apart; a later walk with other
        // items must not find an earlier walk's.
        let walks: [Vec<Item>; 4] = [
            (0..120)
                .map(|k| item(k % 7, k % 3, if k % 5 == 0 { u32::MAX } else { k % 4 }))
                .collect(),
            (0..40)
                .map(|k| item(k % 7, 9, k % 2))
                .chain((0..40).map(|k| item(k % 7, 9, k % 2)))
                .collect(),
            (0..30)
                .map(|k| item(1000 + k, 0, 0))
                .chain([item(1000, 0, 0), item(3, 3, 3)])
                .collect(),
            // One position reached from many origins: past `Seen::LONG`
            // of them the rest of the walk is hashed.
            (0..40)
                .map(|k| item(5, 0, k))
                .chain((0..80).map(|k| item(5, 0, 79 - k)))
                .chain((0..10).map(|k| item(6, 0, k)))
                .collect(),
        ];
        for walk in walks {
            let want = first_of_each(&walk);
            let mut items = walk.clone();
            dedupe(&mut items, &mut seen);
            let got: Vec<_> = items.iter().map(Item::key).collect();
            assert_eq!(got, want);
        }
    }
}
