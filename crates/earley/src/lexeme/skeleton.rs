//! The walk skeletons: what a walk from a loop state (a string body)
//! finds that depends on its text step alone ([`Skeleton`]), shared by the
//! lexemes of a grammar ([`Skeletons`]), and the walks through them.

use super::*;

/// What a walk of the trie from a loop state (a string body) finds that
/// depends on its text step alone: through the bytes the step takes, the
/// walk stays in the state, so the subtrees it takes whole and the nodes
/// where a byte leaves it are the same for every state with that step.
/// Lexemes of one grammar share it (a schema has a string body in many
/// lexemes: every string value, every key), and each walks only the
/// escapes with its own DFA.
#[derive(Debug, Default)]
pub(crate) struct Skeleton {
    /// Tokens kept whatever the state: subtrees taken whole, and the
    /// tokens of the nodes passed in the loop.
    pub(super) kept: Runs,
    /// Tokens that break UTF-8 partway through a character.
    pub(super) refused: Runs,
    /// Nodes reached in the loop whose byte the step does not take (a
    /// quote, a backslash, a control byte; a non-ASCII one when the step
    /// does not take every character), in preorder: the walk goes on below
    /// each with the state's own transition. And, in a skeleton with a
    /// budget, the nodes that would start a character past it.
    pub(super) escapes: Vec<u32>,
    /// Trie nodes below the escapes, summed: what scanning them all costs.
    pub(super) escape_nodes: usize,
    /// The characters on the path above each escape: a walk down a chain
    /// of states (a string of bounded length) goes on below the escape
    /// from the chain's state after that many characters.
    pub(super) escape_chars: Vec<u32>,
    /// The most characters above an escape.
    pub(super) deepest: u32,
    /// In a skeleton with a budget, the nodes that would start a character
    /// past it, by byte (not among the escapes): every one of them is
    /// `budget` characters down, so one byte's nodes all go where the
    /// chain's state after the budget sends that byte. A chain near its
    /// end (the last characters of a string of fixed length) has tens of
    /// thousands of them and takes few bytes there (the closing quote): a
    /// byte it refuses refuses its nodes' tokens at once.
    pub(super) frontier: Vec<Frontier>,
    /// The characters of the budget (see [`Skeleton::new`]).
    pub(super) budget: u32,
}

/// The nodes of a [`Skeleton`]'s frontier with one byte, and their tokens.
#[derive(Debug)]
pub(super) struct Frontier {
    pub(super) byte: u8,
    pub(super) nodes: Vec<u32>,
    pub(super) tokens: Runs,
    /// Trie nodes below `nodes`, summed: what scanning them costs.
    pub(super) nodes_below: usize,
}

/// The trie nodes below each of `nodes`, summed.
fn nodes_below(trie: &TokenTrie, nodes: &[u32]) -> usize {
    nodes
        .iter()
        .map(|&n| (trie.nodes[n as usize].next - n) as usize)
        .sum()
}

impl Skeleton {
    /// Heap bytes held.
    pub(super) fn bytes(&self) -> usize {
        (self.kept.runs.len() + self.refused.runs.len()) * 8
            + (self.escapes.len() + self.escape_chars.len()) * 4
            + self
                .frontier
                .iter()
                .map(|f| f.nodes.len() * 4 + f.tokens.runs.len() * 8)
                .sum::<usize>()
            + std::mem::size_of::<Skeleton>()
    }

    /// The walk in the loop of `step`. Through a multi-byte character the
    /// walk's state is the loop's own partway through it when the step
    /// takes the character's lead byte ([`TextStep::leads`]: every
    /// well-formed character from it returns to the loop): only the UTF-8
    /// decoder matters (a byte that breaks UTF-8 is refused, as our
    /// automata, made for UTF-8 text, refuse it). Otherwise a non-ASCII
    /// byte is an escape (a class that leaves out a few characters, as
    /// `\S` does, has escapes at their lead bytes only).
    ///
    /// The walk takes at most `budget` characters of the step (every token
    /// when it is the trie's depth): a node that would start one more is in
    /// the frontier, and a subtree is taken whole only if its deepest path stays
    /// within the budget. Such a skeleton serves every state from which
    /// the step repeats at least `budget` times ([`TextRuns::run`]): the
    /// states of a bounded string's count chain.
    pub(super) fn new(trie: &TokenTrie, step: &TextStep, budget: u32) -> Skeleton {
        let mut s = Skeleton {
            budget,
            ..Skeleton::default()
        };
        let mut frontier: Vec<Vec<u32>> = Vec::new();
        // The decoder at each depth of the current path; the loop itself
        // at a character boundary. And the characters completed there.
        let mut at = vec![Utf8At::Boundary; trie.max_depth + 1];
        let mut chars = vec![0u32; trie.max_depth + 1];
        let mut i = 1;
        while i < trie.nodes.len() {
            let n = trie.nodes[i];
            let next = n.next as usize;
            let leaf = next == i + 1;
            let parent = at[n.depth as usize - 1];
            let done = chars[n.depth as usize - 1];
            if parent == Utf8At::Boundary && done == budget {
                if frontier.is_empty() {
                    frontier.resize_with(256, Vec::new);
                }
                frontier[n.byte as usize].push(i as u32);
                i = next;
                continue;
            }
            let here = if parent == Utf8At::Boundary && n.byte < 0x80 {
                let takes = step.ascii[n.byte as usize / 64] >> (n.byte % 64) & 1 == 1;
                takes.then_some(Utf8At::Boundary)
            } else if parent == Utf8At::Boundary && !step.utf8 && !step.takes_lead(n.byte) {
                None
            } else if step.leads != 0 {
                match parent.step(n.byte) {
                    Some(here) => Some(here),
                    None => {
                        s.refused.push(trie.token_start[i], trie.token_start[next]);
                        i = next;
                        continue;
                    }
                }
            } else {
                None
            };
            match here {
                None => {
                    s.escape(i as u32, done, next - i);
                    i = next;
                }
                Some(Utf8At::Boundary)
                    if !leaf
                        && step.covers(&trie.below[i])
                        && done + 1 + u32::from(trie.below[i].height) <= budget =>
                {
                    s.kept.push(trie.token_start[i], trie.token_start[next]);
                    i = next;
                }
                Some(here) => {
                    s.kept.push(trie.token_start[i], trie.token_start[i + 1]);
                    at[n.depth as usize] = here;
                    chars[n.depth as usize] = done + u32::from(here == Utf8At::Boundary);
                    i += 1;
                }
            }
        }
        for (byte, nodes) in frontier.into_iter().enumerate() {
            if nodes.is_empty() {
                continue;
            }
            let mut tokens = Runs::default();
            for &n in &nodes {
                let next = trie.nodes[n as usize].next as usize;
                tokens.push(trie.token_start[n as usize], trie.token_start[next]);
            }
            s.frontier.push(Frontier {
                byte: byte as u8,
                nodes_below: nodes_below(trie, &nodes),
                nodes,
                tokens,
            });
        }
        if !s.frontier.is_empty() {
            s.deepest = budget;
        }
        s
    }

    /// The skeleton of `step` made from `wide`'s, of a step `wide_step`
    /// that takes every character `step` takes, with the same budget:
    /// what [`Skeleton::new`] makes, without a pass over the whole trie.
    /// The two walks part only at the character boundaries where the steps
    /// read a byte differently (`step` escapes a byte `wide_step` takes, or
    /// a lead byte it walks, or a byte that is no lead, which a step taking
    /// every character refuses). The topmost such nodes are found by a
    /// walk that enters only subtrees holding such a byte (the trie's
    /// [`Below`](tokensieve_core::trie::Below) sets); each becomes an
    /// escape, and what `wide` found below it is dropped. ECMAScript's `.`
    /// (a JSON body less the lead byte of U+2028 and U+2029) and a body
    /// less a few punctuation bytes are such steps: a skeleton of a small
    /// budget was 0.3-2.3 ms on Llama 3 made anew, a mask's worth.
    pub(super) fn narrowed(
        trie: &TokenTrie,
        wide: &Skeleton,
        wide_step: &TextStep,
        step: &TextStep,
    ) -> Skeleton {
        let budget = wide.budget;
        let dropped_ascii = [
            wide_step.ascii[0] & !step.ascii[0],
            wide_step.ascii[1] & !step.ascii[1],
        ];
        let dropped_leads = wide_step.leads & !step.leads;
        let no_lead_dropped = wide_step.utf8 && !step.utf8;
        let may_hold = |below: &tokensieve_core::trie::Below| {
            below.ascii[0] & dropped_ascii[0] != 0
                || below.ascii[1] & dropped_ascii[1] != 0
                || below.leads & dropped_leads != 0
                || (no_lead_dropped && below.non_ascii && !below.utf8)
        };
        // The topmost nodes where the walks part (node, end of its
        // subtree, characters above it), in preorder.
        let mut parted: Vec<(u32, u32, u32)> = Vec::new();
        let mut at = vec![Utf8At::Boundary; trie.max_depth + 1];
        let mut chars = vec![0u32; trie.max_depth + 1];
        let mut i = 1;
        while i < trie.nodes.len() {
            let n = trie.nodes[i];
            let next = n.next as usize;
            let parent = at[n.depth as usize - 1];
            let done = chars[n.depth as usize - 1];
            if parent == Utf8At::Boundary && done == budget {
                // In the frontier of both.
                i = next;
                continue;
            }
            let here = if parent == Utf8At::Boundary {
                let read = at_boundary(wide_step, n.byte);
                if read != at_boundary(step, n.byte) {
                    parted.push((i as u32, next as u32, done));
                    i = next;
                    continue;
                }
                read
            } else {
                BoundaryRead::Go(parent.step(n.byte))
            };
            match here {
                BoundaryRead::Go(Some(here)) if may_hold(&trie.below[i]) => {
                    at[n.depth as usize] = here;
                    chars[n.depth as usize] = done + u32::from(here == Utf8At::Boundary);
                    i += 1;
                }
                // An escape or a refusal of both, or nothing below that
                // the walks read apart.
                _ => i = next,
            }
        }
        let cut: Vec<(u32, u32)> = parted
            .iter()
            .map(|&(a, b, _)| (trie.token_start[a as usize], trie.token_start[b as usize]))
            .collect();
        let mut s = Skeleton {
            budget,
            kept: wide.kept.without(&cut),
            refused: wide.refused.without(&cut),
            ..Skeleton::default()
        };
        // The nodes of `wide`'s lists (in preorder) outside the parted
        // subtrees, with their positions: one pass beside the parted list.
        let outside = |nodes: &[u32]| -> Vec<usize> {
            let mut k = 0;
            (0..nodes.len())
                .filter(|&j| {
                    let n = nodes[j];
                    while k < parted.len() && parted[k].1 <= n {
                        k += 1;
                    }
                    k == parted.len() || n < parted[k].0
                })
                .collect()
        };
        let mut kept_escapes = outside(&wide.escapes).into_iter().peekable();
        let kept_escape = |s: &mut Skeleton, j: usize| {
            let e = wide.escapes[j];
            s.escape(
                e,
                wide.escape_chars[j],
                (trie.nodes[e as usize].next - e) as usize,
            );
        };
        for &(node, end, done) in &parted {
            while let Some(j) = kept_escapes.next_if(|&j| wide.escapes[j] < node) {
                kept_escape(&mut s, j);
            }
            s.escape(node, done, (end - node) as usize);
        }
        for j in kept_escapes {
            kept_escape(&mut s, j);
        }
        for f in &wide.frontier {
            let kept = outside(&f.nodes);
            if kept.is_empty() {
                continue;
            }
            let nodes: Vec<u32> = kept.iter().map(|&j| f.nodes[j]).collect();
            s.frontier.push(Frontier {
                byte: f.byte,
                nodes_below: nodes_below(trie, &nodes),
                nodes,
                tokens: f.tokens.without(&cut),
            });
        }
        if !s.frontier.is_empty() {
            s.deepest = budget;
        }
        s
    }

    pub(super) fn escape(&mut self, node: u32, chars: u32, below: usize) {
        self.escapes.push(node);
        self.escape_nodes += below;
        self.escape_chars.push(chars);
        self.deepest = self.deepest.max(chars);
    }
}

/// What a skeleton's walk does with a byte at a character boundary (see
/// [`Skeleton::new`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BoundaryRead {
    /// An escape: the walk goes on below with the state's own transition.
    Escape,
    /// The walk goes on in the loop, at this point of a character; `None`
    /// where the byte breaks UTF-8 (its tokens refused).
    Go(Option<Utf8At>),
}

/// How `step`'s skeleton reads `byte` at a character boundary, as
/// [`Skeleton::new`] does.
fn at_boundary(step: &TextStep, byte: u8) -> BoundaryRead {
    if byte < 0x80 {
        let takes = step.ascii[byte as usize / 64] >> (byte % 64) & 1 == 1;
        if takes {
            BoundaryRead::Go(Some(Utf8At::Boundary))
        } else {
            BoundaryRead::Escape
        }
    } else if !step.utf8 && !step.takes_lead(byte) || step.leads == 0 {
        BoundaryRead::Escape
    } else {
        BoundaryRead::Go(Utf8At::Boundary.step(byte))
    }
}

/// Skeletons by text step and budget ([`Skeleton::new`]).
#[derive(Debug, Default)]
pub(super) struct SkeletonTable(pub(super) Mutex<KeptSkeletons>);

/// The skeletons of a [`SkeletonTable`], and their heap bytes.
#[derive(Debug, Default)]
pub(super) struct KeptSkeletons {
    pub(super) list: Vec<(SkeletonKey, Arc<Skeleton>)>,
    bytes: usize,
}

/// Heap bytes of the skeletons a vocabulary keeps for steps other than a
/// JSON string body's, which grammars whose lexemes are shared ask first
/// (patterns' classes: hex digits, letters and digits, `\S`; the chains
/// of bounded strings). Past it a grammar makes its own. On all MaskBench
/// dev files (Llama 3) 498 skeletons were made, one per grammar and step,
/// of 140 steps and budgets, 0.37 ms each.
const SHARED_SKELETON_BYTES: usize = 32 << 20;

/// A skeleton's step and budget.
pub(super) type SkeletonKey = (StepKey, u32);

impl SkeletonTable {
    pub(super) fn get(&self, trie: &TokenTrie, step: &TextStep, budget: u32) -> Arc<Skeleton> {
        self.get_within(trie, step, budget, usize::MAX)
            .expect("a table without a limit keeps every skeleton")
    }

    /// The skeleton of `step` and `budget`, made now if the table holds
    /// fewer than `limit` bytes; `None` if it is not kept and the table is
    /// full.
    pub(super) fn get_within(
        &self,
        trie: &TokenTrie,
        step: &TextStep,
        budget: u32,
        limit: usize,
    ) -> Option<Arc<Skeleton>> {
        self.get_made_by(step, budget, limit, || Skeleton::new(trie, step, budget))
    }

    /// [`SkeletonTable::get_within`], a skeleton not kept yet made by
    /// `make`.
    pub(super) fn get_made_by(
        &self,
        step: &TextStep,
        budget: u32,
        limit: usize,
        make: impl FnOnce() -> Skeleton,
    ) -> Option<Arc<Skeleton>> {
        let key = ((step.ascii, step.leads), budget);
        let mut known = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, s)) = known.list.iter().find(|(k, _)| *k == key) {
            return Some(s.clone());
        }
        if known.bytes >= limit {
            return None;
        }
        let s = Arc::new(make());
        known.bytes += s.bytes();
        known.list.push((key, s.clone()));
        Some(s)
    }

    /// The skeleton of `step` and `budget` if it is made already.
    pub(super) fn made(&self, step: &TextStep, budget: u32) -> Option<Arc<Skeleton>> {
        let key = ((step.ascii, step.leads), budget);
        let known = self.0.lock().unwrap_or_else(|e| e.into_inner());
        known
            .list
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, s)| s.clone())
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).list.len()
    }
}

/// The skeletons of one grammar's lexemes (a grammar has one or two steps:
/// string bodies with and without escapes; a budget for each length of
/// bounded strings walked), those of a JSON string's body being the
/// vocabulary's.
#[derive(Debug, Default)]
pub(crate) struct Skeletons {
    pub(super) vocab: Option<VocabSkeleton>,
    /// Whether the vocabulary's table serves every step (where lexemes
    /// are shared), not only a JSON string body's.
    pub(super) shared: bool,
    pub(super) own: SkeletonTable,
    /// The walks of other keys' bodies past their quote
    /// ([`Lexeme::past_the_quote`] from a key's [`Body::Key`]), by what
    /// follows the keys in their lexeme ([`Lexeme::after_keys`]): every
    /// object of a grammar that allows other keys has a lexeme of its
    /// own for them, and the same colon and spaces after them.
    pub(super) past_keys: Mutex<HashMap<Arc<str>, Arc<StateIndex>>>,
    /// Walks kept by signature ([`KeptWalks`]): this grammar's own, or
    /// the vocabulary's where lexemes are shared.
    pub(super) kept_walks: Arc<KeptWalks>,
    /// Whether lexeme states are found by the texts they read
    /// ([`Lexeme::language_walk`]): for the rules of a context-free
    /// grammar, not for a JSON Schema's pieces.
    pub(crate) language_keys: bool,
}

/// The most ASCII and lead bytes of a JSON body a step may leave out for
/// its skeletons to be narrowed from the body's ([`Skeleton::narrowed`]):
/// a step of a few classes (digits, letters) escapes at most root
/// children, a walk that costs little made anew, while narrowing reads
/// the body skeleton's runs and frontier whole.
const NARROWED_BYTES: u32 = 32;

/// A JSON string body's text step.
pub(super) fn json_string_body_step() -> TextStep {
    let (ascii, leads) = JSON_STRING_BODY;
    TextStep {
        ascii,
        utf8: true,
        leads,
        to: 0,
    }
}

/// A text step as far as a skeleton depends on it: its ASCII bytes and
/// the lead bytes of the characters it takes.
pub(super) type StepKey = ([u64; 2], u64);

impl Skeletons {
    /// A grammar's skeletons, asking the vocabulary's first. With
    /// `shared`, the walks kept by signature are the vocabulary's, for
    /// every grammar (as shared lexemes are); otherwise this grammar's
    /// own.
    pub(crate) fn starting_with(known: &VocabSkeleton, shared: bool) -> Skeletons {
        Skeletons {
            vocab: Some(known.clone()),
            shared,
            kept_walks: if shared {
                known.0.kept_walks.clone()
            } else {
                Arc::default()
            },
            ..Skeletons::default()
        }
    }

    /// The skeleton of `step` within `budget` characters (the trie's
    /// depth: no budget).
    pub(super) fn get(&self, trie: &TokenTrie, step: &TextStep, budget: u32) -> Arc<Skeleton> {
        if let Some(v) = &self.vocab
            && (step.ascii, step.leads) == JSON_STRING_BODY
        {
            return v.0.table.get(trie, step, budget);
        }
        // Asked before either table is held: the body's is the vocabulary's.
        let body = self.narrowing_base(trie, step, budget);
        let make = || match &body {
            Some(wide) => Skeleton::narrowed(trie, wide, &json_string_body_step(), step),
            None => Skeleton::new(trie, step, budget),
        };
        let own = |make| {
            self.own
                .get_made_by(step, budget, usize::MAX, make)
                .expect("a table without a limit keeps every skeleton")
        };
        match &self.vocab {
            Some(v) if self.shared => {
                v.0.table
                    .get_made_by(step, budget, SHARED_SKELETON_BYTES, make)
                    .unwrap_or_else(|| own(make))
            }
            _ => own(make),
        }
    }

    /// The vocabulary's JSON body skeleton of `budget`, if `step` takes
    /// no character the body does not and leaves out at most
    /// [`NARROWED_BYTES`] of its ASCII and lead bytes: its skeleton is
    /// then [`Skeleton::narrowed`] from the body's. Only for budgets from
    /// two characters to below the trie's depth, the skeletons that take
    /// few subtrees whole: narrowing visits the nodes above every byte
    /// the steps read apart, out of the trie's order (about 40 ns a node
    /// on Llama 3's), and a pass over the whole trie that takes most
    /// subtrees whole, or stops a character down, costs about as much.
    fn narrowing_base(
        &self,
        trie: &TokenTrie,
        step: &TextStep,
        budget: u32,
    ) -> Option<Arc<Skeleton>> {
        let v = self.vocab.as_ref()?;
        if budget < 2 || budget as usize >= trie.max_depth {
            return None;
        }
        let (ascii, leads) = JSON_STRING_BODY;
        let within = |a: u64, b: u64| a & !b == 0;
        let apart = (ascii[0] & !step.ascii[0]).count_ones()
            + (ascii[1] & !step.ascii[1]).count_ones()
            + (leads & !step.leads).count_ones();
        let narrower = within(step.ascii[0], ascii[0])
            && within(step.ascii[1], ascii[1])
            && within(step.leads, leads);
        (narrower && apart <= NARROWED_BYTES)
            .then(|| v.0.table.made(&json_string_body_step(), budget))
            .flatten()
    }

    /// The skeleton [`Skeletons::get`] would give for `step` and `budget`,
    /// if it is made already (a skeleton is a pass over the whole trie).
    pub(super) fn made(&self, step: &TextStep, budget: u32) -> Option<Arc<Skeleton>> {
        match &self.vocab {
            Some(v) if (step.ascii, step.leads) == JSON_STRING_BODY || self.shared => {
                v.0.table
                    .made(step, budget)
                    .or_else(|| self.own.made(step, budget))
            }
            _ => self.own.made(step, budget),
        }
    }
}

impl Lexeme {
    /// The [`Skeleton`] that serves `state`, and the loop it walks in, if
    /// `state` is a loop a walk can share: its text step leads back to it
    /// and covers every depth (a string body), so which subtrees it takes
    /// whole and where its bytes leave it depend on the step alone. Or if
    /// `state`'s text step leads into such a loop (a string body right
    /// after its opening quote, a state of its own in a DFA that is not
    /// minimized, whose first character may be narrower): below each
    /// first byte of that step the walk is the loop's.
    pub(super) fn loop_skeleton(&self, state: u32) -> Option<(Arc<Skeleton>, u32)> {
        let into = self.loop_into(state)?;
        let step = *self.runs.step(self.dfa(), into)?;
        let full = self.trie.max_depth as u32;
        Some((self.skeletons.get(&self.trie, &step, full), into))
    }

    /// The loop of [`Lexeme::loop_skeleton`], without its skeleton (a walk
    /// of the whole trie the first time a grammar asks for its step).
    pub(super) fn loop_into(&self, state: u32) -> Option<u32> {
        let dfa = self.dfa();
        let into = self.runs.step(dfa, state)?.to;
        let step = *self.runs.step(dfa, into)?;
        (step.to == into && self.runs.run(dfa, into) as usize >= self.trie.max_depth)
            .then_some(into)
    }

    /// The free zone a walk from `state` goes through before the skeleton
    /// of its loop is made, if the zone is wider than the loop's step and
    /// its skeleton is made already (a JSON string body's, the
    /// vocabulary's). A search in a string (an unanchored `pattern`:
    /// `push`, `^allow|deny$`) has loops whose steps leave out the
    /// pattern's first bytes, each a skeleton of its own: a pass over the
    /// whole trie (1-2 ms on Llama 3) for one walk, where the zone is every
    /// character of a string and its walk scans the body's escapes. A
    /// gathering that fails is not kept here (it would keep none for every
    /// state it met, the loop's among them): the walk goes on as it would
    /// have. Not tried in an intersection or a counted repetition: their
    /// loops are held counts, so a gathering meets a new state at every
    /// character, each a product's expansion, and fails at its limit (a
    /// word count under a length, `^(?:\S+\s+){0,29}\S+$` with
    /// `maxLength`: 3.7 ms for one mask, three quarters of it the trial).
    pub(super) fn zone_before_skeleton(&self, state: u32) -> Option<TextStep> {
        if self.holds_counts() {
            return None;
        }
        let into = self.loop_into(state)?;
        let step = *self.runs.step(self.dfa(), into)?;
        let full = self.trie.max_depth as u32;
        if self.skeletons.made(&step, full).is_some() {
            return None;
        }
        let zone = self.wider_zone(state, ZONE_STATES, false)?;
        ((zone.ascii, zone.leads) == JSON_STRING_BODY || self.skeletons.made(&zone, full).is_some())
            .then_some(zone)
    }

    /// The trie nodes a walk from `state` into the loop `into` scans from
    /// `state` itself ([`Lexeme::scan_escapes`]): below the root's
    /// children whose byte `state` takes elsewhere than into the loop. In
    /// a search (an unanchored URL pattern, after `https://`) every byte
    /// but the next of the match goes back to the search, so these are
    /// most of the trie (the space's subtree alone is a third of Llama
    /// 3's), though the loop's own escapes are few.
    pub(super) fn entry_nodes(&self, state: u32, into: u32) -> usize {
        if state == into {
            return 0;
        }
        let (trie, dfa) = (&*self.trie, self.dfa());
        let Some(step) = self.runs.step(dfa, state) else {
            return 0;
        };
        let (first, classes) = (dfa.row(state), dfa.classes());
        let (bytes, kids) = trie.kids(0);
        bytes
            .iter()
            .zip(kids)
            .filter(|&(&b, _)| !step.takes_first(b) && first[classes[b as usize] as usize] != DEAD)
            .map(|(_, &c)| (trie.nodes[c as usize].next - c) as usize)
            .sum()
    }

    /// Whether this lexeme's automaton holds counts in its states (an
    /// intersection, a counted repetition): a free zone's gathering would
    /// meet a new state at every character.
    pub(super) fn holds_counts(&self) -> bool {
        matches!(self.dfa(), LexDfa::Product(_) | LexDfa::Counted(_))
    }

    /// The rows of a chain's states from `state`, each its text step from
    /// the one before, `depth` steps down (`None` where the run is
    /// shorter).
    fn chain_rows(&self, state: u32, depth: u32) -> Option<Vec<&[u32]>> {
        let dfa = self.dfa();
        let mut rows: Vec<&[u32]> = Vec::with_capacity(depth as usize + 1);
        let mut at = state;
        rows.push(dfa.row(at));
        for _ in 0..depth {
            at = self.runs.step(dfa, at)?.to;
            rows.push(dfa.row(at));
        }
        Some(rows)
    }

    /// The free zone a chain's walk from `state` goes through instead of
    /// its skeleton, where the chain's scans would read at least a
    /// [`ZONE_SPAN_SHARE`] of the trie: the subtrees below the escapes and
    /// the frontier that the chain's states take on. A search in a string
    /// has such chains (`w3id.org` unanchored: after `w3id` the step is
    /// ECMAScript's `.` for one character, then `o`), whose every byte
    /// past the budget goes back to the search, so that the frontier is
    /// every node two characters down, scanned node by node from each
    /// partial match (3 ms for one mask on Llama 3); the zone is every
    /// character of the string, whose skeleton is the vocabulary's body's.
    /// Not for an intersection or a counted repetition, as
    /// [`Lexeme::zone_before_skeleton`].
    pub(super) fn chain_zone(&self, state: u32, skeleton: &Skeleton) -> Option<TextStep> {
        if self.holds_counts() {
            return None;
        }
        let (dfa, trie) = (self.dfa(), &*self.trie);
        let need = trie.nodes.len().div_ceil(ZONE_SPAN_SHARE);
        // Most chains (a bounded string's) could not read that much even
        // if every escape and frontier node were taken.
        let frontier: usize = skeleton.frontier.iter().map(|f| f.nodes_below).sum();
        if skeleton.escape_nodes + frontier < need {
            return None;
        }
        let classes = dfa.classes();
        let rows = self.chain_rows(state, skeleton.deepest)?;
        let takes = |row: &[u32], byte: u8| row[classes[byte as usize] as usize] != DEAD;
        let past = rows[skeleton.budget.min(skeleton.deepest) as usize];
        let mut read: usize = skeleton
            .frontier
            .iter()
            .filter(|f| takes(past, f.byte))
            .map(|f| f.nodes_below)
            .sum();
        for (&e, &chars) in skeleton.escapes.iter().zip(&skeleton.escape_chars) {
            if read >= need {
                break;
            }
            if takes(rows[chars as usize], trie.nodes[e as usize].byte) {
                read += (trie.nodes[e as usize].next - e) as usize;
            }
        }
        if read < need {
            return None;
        }
        let zone = self.wider_zone(state, ZONE_STATES, true)?;
        let full = trie.max_depth as u32;
        ((zone.ascii, zone.leads) == JSON_STRING_BODY || self.skeletons.made(&zone, full).is_some())
            .then_some(zone)
    }

    /// The [`Skeleton`] that serves `state` as the start of a chain: its
    /// text step repeats, each time to a state of its own (the count of a
    /// bounded string). The budget is the run below [`EXACT_BUDGETS`], the
    /// run rounded down to a power of two above it, or the trie's depth
    /// where the run covers every token: the skeletons of one step are
    /// then few, whatever the bounds (those of a JSON string's body are
    /// the vocabulary's, made once per process).
    pub(super) fn chain_skeleton(&self, state: u32) -> Option<Arc<Skeleton>> {
        let dfa = self.dfa();
        let step = *self.runs.step(dfa, state)?;
        let (run, full) = (self.runs.run(dfa, state), self.trie.max_depth as u32);
        Some(
            self.skeletons
                .get(&self.trie, &step, chain_budget(run, full)),
        )
    }

    /// The walk from `state` through a chain's skeleton: every token the
    /// skeleton keeps, and the subtree of each escape scanned as
    /// [`Lexeme::scan`] would, from the chain's state after the characters
    /// above it.
    pub(super) fn scan_chain(&self, state: u32, skeleton: &Skeleton, walk: &mut Walk) {
        let trie = &*self.trie;
        let dfa = self.dfa();
        // The chain's states, each the step of the one before: within the
        // run, as the skeleton's budget is.
        let rows = self
            .chain_rows(state, skeleton.deepest)
            .expect("a step within the run");
        let mut stack: Vec<&[u32]> = vec![&[]; trie.max_depth + 1];
        let mut kept = Runs::default();
        let mut refused = Runs::default();
        let classes = dfa.classes();
        // The scans below the closing quotes, made once for the chain's
        // states: where every quote leads to one state, all of them at
        // once, else each quote that leads there.
        let quote_class = classes[b'"' as usize] as usize;
        let quotes = rows
            .iter()
            .find(|row| row[quote_class] != DEAD)
            .and_then(|&row| self.quote_scans(state, skeleton, row, quote_class));
        let all_quotes = quotes.as_ref().is_some_and(|q| {
            q.chars
                .iter()
                .all(|&k| rows[k as usize][quote_class] == q.past)
        });
        for (i, (&e, &chars)) in skeleton
            .escapes
            .iter()
            .zip(&skeleton.escape_chars)
            .enumerate()
        {
            let (e, n) = (e as usize, trie.nodes[e as usize]);
            let row = rows[chars as usize];
            let end = n.next as usize;
            // Most escapes of a string body are bytes that no state of
            // it takes (a line feed after a word: 1,170 of a chain's
            // 1,430 on Llama 3): refused here, without a scan.
            let past = row[classes[n.byte as usize] as usize];
            if past == DEAD {
                refused.push(trie.token_start[e], trie.token_start[end]);
                continue;
            }
            if n.byte == b'"' {
                if all_quotes {
                    continue;
                }
                if let Some(q) = quotes.as_ref().filter(|q| q.past == past) {
                    q.replay(i, &mut kept, &mut refused, &mut walk.exits);
                    #[cfg(test)]
                    QUOTE_WALKS.with(|c| c.set([c.get()[0], c.get()[1] + 1]));
                    continue;
                }
            }
            stack[n.depth as usize - 1] = row;
            self.scan_nodes(e, end, &mut stack, &mut kept, &mut refused, &mut walk.exits);
        }
        let none = Runs::default();
        let (quote_kept, quote_refused) = match quotes.as_deref().filter(|_| all_quotes) {
            // Out of preorder among the other escapes' (runs are summed in
            // any order; exits out of order are sorted).
            Some(q) => {
                walk.exits.extend_from_slice(&q.exits);
                #[cfg(test)]
                QUOTE_WALKS.with(|c| c.set([c.get()[0] + 1, c.get()[1]]));
                (&q.kept, &q.refused)
            }
            None => (&none, &none),
        };
        // Past the budget: a byte the state there refuses refuses every
        // node of it; the others are scanned.
        let mut refused_bytes = vec![quote_refused];
        for f in &skeleton.frontier {
            // The state after the budget: a frontier is that far down.
            let row = rows[skeleton.budget as usize];
            if row[classes[f.byte as usize] as usize] == DEAD {
                refused_bytes.push(&f.tokens);
                continue;
            }
            for &e in &f.nodes {
                let e = e as usize;
                stack[trie.nodes[e].depth as usize - 1] = row;
                let end = trie.nodes[e].next as usize;
                self.scan_range(e, end, &mut stack, &mut kept, &mut refused, &mut walk.exits);
            }
        }
        refused_bytes.extend([&skeleton.refused, &refused]);
        walk.take_from_root(trie, &[&skeleton.kept, &kept, quote_kept], &refused_bytes);
    }

    /// The scans below every closing quote of `skeleton` (a chain's,
    /// from `state`) from the state `row` leads a quote to: made once per
    /// skeleton and state past the quote, and read by every chain state
    /// whose quote leads there. Past a string's closing quote a string of
    /// bounded length is in one state whatever its count (the quote ended
    /// it), so a chain's states all scan the same subtrees below their
    /// quotes (184 of them, 1,832 nodes, on Llama 3), each from the same
    /// state: [`Lexeme::scan_range`] below a node reads only the state its
    /// byte leads to. `None` past [`QUOTE_SCANS`] kept for this lexeme.
    pub(super) fn quote_scans(
        &self,
        state: u32,
        skeleton: &Skeleton,
        row: &[u32],
        quote_class: usize,
    ) -> Option<Arc<QuoteScans>> {
        let past = row[quote_class];
        let step = self.runs.step(self.dfa(), state)?;
        let key = (step.ascii, step.leads, skeleton.budget, past);
        let mut known = self.quote_scans.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(q) = known.get(&key) {
            return Some(q.clone());
        }
        if known.len() >= QUOTE_SCANS {
            return None;
        }
        let trie = &*self.trie;
        let mut stack: Vec<&[u32]> = vec![&[]; trie.max_depth + 1];
        let mut q = QuoteScans {
            past,
            ..QuoteScans::default()
        };
        let (mut kept, mut refused) = (Runs::default(), Runs::default());
        for (i, &e) in skeleton.escapes.iter().enumerate() {
            let (e, n) = (e as usize, trie.nodes[e as usize]);
            if n.byte != b'"' {
                continue;
            }
            let ends = (kept.runs.len(), refused.runs.len(), q.exits.len());
            stack[n.depth as usize - 1] = row;
            let end = n.next as usize;
            // Each escape's runs apart: a run is not joined to the last
            // escape's, so that replaying one alone pushes what its scan
            // pushed.
            let (mut k, mut r) = (Runs::default(), Runs::default());
            self.scan_range(e, end, &mut stack, &mut k, &mut r, &mut q.exits);
            kept.runs.extend_from_slice(&k.runs);
            refused.runs.extend_from_slice(&r.runs);
            q.at.push((i as u32, [ends.0, ends.1, ends.2].map(|x| x as u32)));
            q.chars.push(skeleton.escape_chars[i]);
        }
        let ends = [kept.runs.len(), refused.runs.len(), q.exits.len()].map(|x| x as u32);
        q.at.push((u32::MAX, ends));
        kept.count = kept.runs.iter().map(|&(a, b)| (b - a) as usize).sum();
        refused.count = refused.runs.iter().map(|&(a, b)| (b - a) as usize).sum();
        (q.kept, q.refused) = (kept, refused);
        q.chars.sort_unstable();
        q.chars.dedup();
        let q = Arc::new(q);
        known.insert(key, q.clone());
        Some(q)
    }

    /// The walk from `state` through the skeleton of its free zone `zone`
    /// ([`Lexeme::free_zone`]): every token the skeleton keeps (its bytes
    /// all the zone's: the walk stays in the zone's states), and the
    /// subtree of each escape scanned from the state the walk is in at its
    /// parent, read down the escape's path (escapes come in preorder: each
    /// path goes on from the last one's).
    pub(super) fn scan_zone(&self, state: u32, zone: &TextStep, walk: &mut Walk) {
        #[cfg(test)]
        ZONE_WALKS.with(|c| c.set(c.get() + 1));
        let trie = &*self.trie;
        let dfa = self.dfa();
        let classes = dfa.classes();
        let skeleton = self.skeletons.get(trie, zone, trie.max_depth as u32);
        let mut stack: Vec<&[u32]> = vec![&[]; trie.max_depth + 1];
        // The nodes down to the last escape's parent: each with the end of
        // its subtree and the state after its byte.
        let mut path = vec![(0u32, trie.nodes.len() as u32, state)];
        let (mut kept, mut refused) = (Runs::default(), Runs::default());
        for &e in &skeleton.escapes {
            while path.last().is_some_and(|&(_, end, _)| end <= e) {
                path.pop();
            }
            while let Some(&(node, _, at)) = path.last() {
                let (_, kids) = trie.kids(node as usize);
                let child = kids[kids.partition_point(|&k| k <= e) - 1];
                if child == e {
                    break;
                }
                let n = trie.nodes[child as usize];
                let next = dfa.row(at)[classes[n.byte as usize] as usize];
                debug_assert!(next != DEAD, "a zone's byte kills no state of it");
                path.push((child, n.next, next));
            }
            let at = path.last().expect("the root stays on the path").2;
            let n = trie.nodes[e as usize];
            stack[n.depth as usize - 1] = dfa.row(at);
            let end = n.next as usize;
            self.scan_range(
                e as usize,
                end,
                &mut stack,
                &mut kept,
                &mut refused,
                &mut walk.exits,
            );
        }
        walk.take_from_root(
            trie,
            &[&skeleton.kept, &kept],
            &[&skeleton.refused, &refused],
        );
    }

    /// The walk from `state` through the skeleton of the loop `into`:
    /// every token the skeleton keeps, and the subtree of each escape
    /// scanned as [`Lexeme::scan`] would. From a state that is not the loop
    /// itself, the root's children whose byte `state`'s step takes (into the
    /// loop) are the skeleton's, and the others are scanned from `state`.
    pub(super) fn scan_escapes(&self, state: u32, into: u32, skeleton: &Skeleton, walk: &mut Walk) {
        let trie = &*self.trie;
        let dfa = self.dfa();
        let mut stack: Vec<&[u32]> = vec![&[]; trie.max_depth + 1];
        let (first, row) = (dfa.row(state), dfa.row(into));
        // Below the root's children, the escapes are the loop walk's.
        let looped = self.loop_walk(into, skeleton);
        let mut kept = Runs::default();
        let mut refused = Runs::default();
        if state == into {
            let roots: Vec<u32> = skeleton
                .escapes
                .iter()
                .copied()
                .filter(|&e| trie.nodes[e as usize].depth == 1)
                .collect();
            self.scan_escape_nodes(
                &roots,
                (first, row),
                &mut stack,
                &mut kept,
                &mut refused,
                walk,
            );
            for &(a, b) in &looped.kept.runs {
                kept.push(a, b);
            }
            for &(a, b) in &looped.refused.runs {
                refused.push(a, b);
            }
            walk.exits.extend_from_slice(&looped.exits);
            walk.take_from_root(
                trie,
                &[&skeleton.kept, &kept],
                &[&skeleton.refused, &refused],
            );
            return;
        }
        let step = *self.runs.step(dfa, state).expect("a step into the loop");
        let (bytes, kids) = trie.kids(0);
        for (&b, &c) in bytes.iter().zip(kids) {
            let (c, end) = (c as usize, trie.nodes[c as usize].next as usize);
            if !step.takes_first(b) {
                stack[0] = first;
                self.scan_range(c, end, &mut stack, &mut kept, &mut refused, &mut walk.exits);
                continue;
            }
            let tokens = (trie.token_start[c], trie.token_start[end]);
            skeleton.kept.clip_into(tokens, &mut kept);
            skeleton.refused.clip_into(tokens, &mut refused);
            // The child itself may be an escape of the loop (a byte that
            // leads into it from `state` but not from the loop); those
            // below it are the loop walk's.
            if skeleton.escapes.binary_search(&(c as u32)).is_ok() {
                self.scan_escape_nodes(
                    &[c as u32],
                    (first, row),
                    &mut stack,
                    &mut kept,
                    &mut refused,
                    walk,
                );
            }
            looped.kept.clip_into(tokens, &mut kept);
            looped.refused.clip_into(tokens, &mut refused);
            let from = looped.exits.partition_point(|&(e, _)| (e as usize) < c);
            let to = looped.exits.partition_point(|&(e, _)| (e as usize) < end);
            walk.exits.extend_from_slice(&looped.exits[from..to]);
        }
        walk.take_from_root(trie, &[&kept], &[&refused]);
    }

    /// The [`LoopWalk`] of the loop state `into` through `skeleton`, made
    /// on first use.
    pub(super) fn loop_walk(&self, into: u32, skeleton: &Skeleton) -> Arc<LoopWalk> {
        if let Some(known) = self
            .loops
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&into)
        {
            return known.clone();
        }
        let trie = &*self.trie;
        let row = self.dfa().row(into);
        let deep: Vec<u32> = skeleton
            .escapes
            .iter()
            .copied()
            .filter(|&e| trie.nodes[e as usize].depth > 1)
            .collect();
        let mut stack: Vec<&[u32]> = vec![&[]; trie.max_depth + 1];
        let mut kept = Runs::default();
        let mut refused = Runs::default();
        let mut walk = Walk::new(self.words);
        self.scan_escape_nodes(
            &deep,
            (row, row),
            &mut stack,
            &mut kept,
            &mut refused,
            &mut walk,
        );
        let made = Arc::new(LoopWalk {
            kept,
            refused,
            exits: walk.exits,
        });
        self.loops
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(into)
            .or_insert(made)
            .clone()
    }

    /// [`Lexeme::scan_range`] below each escape node of `nodes`, its parent
    /// in the state of `rows.0` at the root's children, of `rows.1` below.
    pub(super) fn scan_escape_nodes<'s>(
        &'s self,
        nodes: &[u32],
        rows: (&'s [u32], &'s [u32]),
        stack: &mut [&'s [u32]],
        kept: &mut Runs,
        refused: &mut Runs,
        walk: &mut Walk,
    ) {
        let trie = &*self.trie;
        for &e in nodes {
            let e = e as usize;
            let depth = trie.nodes[e].depth as usize;
            stack[depth - 1] = if depth == 1 { rows.0 } else { rows.1 };
            let end = trie.nodes[e].next as usize;
            self.scan_range(e, end, stack, kept, refused, &mut walk.exits);
        }
    }
}

/// The key of a lexeme's [`QuoteScans`]: the skeleton's text step (its
/// ASCII bytes and lead bytes) and budget, and the state past the quote.
pub(super) type QuoteKey = ([u64; 2], u64, u32, u32);

#[cfg(test)]
thread_local! {
    /// Chain walks that took every quote's scan at once, and quotes whose
    /// scan was taken alone (see [`Lexeme::scan_chain`]).
    pub(super) static QUOTE_WALKS: std::cell::Cell<[usize; 2]> = const { std::cell::Cell::new([0; 2]) };
    /// Walks through a free zone ([`Lexeme::scan_zone`]).
    pub(super) static ZONE_WALKS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// [`QuoteScans`] a lexeme keeps: a string has one state past its quote,
/// and its chains one skeleton per budget (19 on Llama 3).
const QUOTE_SCANS: usize = 64;

/// What [`Lexeme::scan_range`] finds below each closing quote of a
/// chain's skeleton, from the state `past` the quote: for each such
/// escape (by its place among the skeleton's escapes), where its kept
/// and refused runs and its exits start in the lists.
#[derive(Debug, Default)]
pub(crate) struct QuoteScans {
    past: u32,
    /// The characters above the quotes, each once.
    chars: Vec<u32>,
    at: Vec<(u32, [u32; 3])>,
    kept: Runs,
    refused: Runs,
    exits: Vec<(u32, u32)>,
}

impl QuoteScans {
    /// Pushes what the scan below the skeleton's escape `escape` (a
    /// closing quote) found, as the scan itself would.
    fn replay(
        &self,
        escape: usize,
        kept: &mut Runs,
        refused: &mut Runs,
        exits: &mut Vec<(u32, u32)>,
    ) {
        let k = self.at.partition_point(|&(i, _)| (i as usize) < escape);
        debug_assert_eq!(self.at[k].0 as usize, escape);
        let ([k0, r0, x0], [k1, r1, x1]) = (self.at[k].1, self.at[k + 1].1);
        for &(a, b) in &self.kept.runs[k0 as usize..k1 as usize] {
            kept.push(a, b);
        }
        for &(a, b) in &self.refused.runs[r0 as usize..r1 as usize] {
            refused.push(a, b);
        }
        exits.extend_from_slice(&self.exits[x0 as usize..x1 as usize]);
    }
}
