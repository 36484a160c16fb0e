//! Regexes with rule references, split only where the references are: a
//! [`PieceGrammar`] whose alternatives are sequences of whole regexes and
//! rule references.
//!
//! The input is one regex per rule in which the placeholder characters
//! [`crate::compose::placeholder`]`(i)` stand for references to rule `i` (the form of the
//! context-free JSON Schema lowering). [`crate::compose::from_regex`] and
//! [`crate::compose::link`] give the same language as a [`crate::Grammar`],
//! but take every alternation and repetition apart into helper rules, which
//! a backend then has to solve back into regexes. Here every sub-expression
//! without a placeholder stays one regex, as written, so a backend can make
//! it one lexeme at once: only the alternations and repetitions around
//! references become rules.
//!
//! Placeholders are read as [`crate::compose::splice`] reads them: a
//! placeholder character in a literal, or a class all of whose members are
//! placeholders, is a reference; a class that mixes them with other
//! characters is a plain class.

use std::sync::Arc;

use hashbrown::HashMap;
use regex_syntax::hir::{Class, Hir, HirKind, Repetition};
use tokensieve_core::GrammarError;

use crate::compose::PLACEHOLDER_BASE;
use tokensieve_automata::counted::LazyCounted;
use tokensieve_automata::dfa::DfaLimits;
use tokensieve_automata::json_keys::OtherKeys;

/// One element of an alternative.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// A regex (regex-syntax dialect) with no reference in it; it matches
    /// at least one string.
    Regex {
        regex: String,
        /// Whether it matches the empty string.
        nullable: bool,
        /// Its syntax tree (`regex` parses to the same language), for a
        /// backend that builds its automaton without parsing `regex`.
        tree: Arc<Hir>,
    },
    /// A reference to a rule (an index into [`PieceGrammar::rules`]).
    Rule(usize),
    /// The strings every one of these regexes (reference-free) matches:
    /// their intersection, which no regex can write, for a backend that
    /// builds it as one automaton (a JSON string under a pattern and a
    /// length). It may match nothing.
    Intersection {
        regexes: Vec<String>,
        /// Whether every regex matches the empty string.
        nullable: bool,
    },
    /// A long counted repetition and what follows it, `X{min,max}C`
    /// (`regex`, reference-free), as an automaton that counts the copies
    /// ([`LazyCounted`]), for a backend that takes it as one lexeme. Made
    /// instead of blocks where [`PieceLimits::counted`] asks for it and
    /// counting is exact.
    Counted {
        regex: String,
        /// Whether it matches the empty string.
        nullable: bool,
        automaton: Arc<LazyCounted>,
    },
    /// A reference-free regex kept as the text it was written in, not
    /// parsed by the split (a [`Verbatim`] rule's, in the place of each
    /// reference to it): for a backend that builds its automaton only if
    /// an output ever enters it, parsing then. It matches at least one
    /// string.
    Verbatim {
        regex: String,
        /// What its syntax tree would measure and whether it matches the
        /// empty string, as its writer knows them.
        verbatim: Verbatim,
    },
}

/// What the writer of a [`Piece::Verbatim`] regex knows of it without
/// parsing it: the figures a backend decides by before it builds the
/// automaton.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verbatim {
    /// About [`crate::regular::Measure`]'s weight of its syntax tree (no
    /// less).
    pub weight: u64,
    /// No less than the depth of its syntax tree.
    pub depth: u32,
    /// Whether it matches the empty string.
    pub nullable: bool,
    /// Where the regex is an object's other keys: the names they are
    /// built from, for a backend that builds the automaton from them
    /// ([`tokensieve_automata::lazy::Part::OtherKeys`]) and never parses the text.
    pub keys: Option<Arc<OtherKeys>>,
}

/// Rules of alternatives of pieces. Rule 0 is the root; rule `i + 1` is the
/// rule the placeholder `i` stands for; helper rules follow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PieceGrammar {
    pub rules: Vec<Vec<Vec<Piece>>>,
}

/// Heaviest plain alternative ([`weight`]) that [`split`] joins with the
/// other small plain alternatives of its alternation into one regex: a
/// JSON scalar weighs about 20.
const MERGED_ALTERNATIVE_WEIGHT: u64 = 64;

/// Limits of [`split`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PieceLimits {
    /// Deepest regex syntax tree. Default 512.
    pub max_nest: u32,
    /// Most copies a counted repetition around a reference may expand to.
    /// Default 10 000.
    pub max_repeat: u32,
    /// Most rules in all. Default 100 000.
    pub max_rules: usize,
    /// Size of a block of a long counted repetition, in [`weight`] (about
    /// the states of an automaton). With `Some(w)`, a counted repetition of
    /// a reference-free body whose copies weigh `2w` or more
    /// (`"(?:char){0,4096}"`, a `maxLength: 4096` string) is taken apart
    /// into blocks of as many copies as weigh about `w`, at least one
    /// (see `Splitter::blocks`), so that no one regex holds thousands of
    /// copies; what follows it in its sequence stays with its last block.
    /// Default `None`: every reference-free sub-expression stays whole.
    pub block_weight: Option<u64>,
    /// With [`PieceLimits::block_weight`]: a long repetition followed by
    /// plain text becomes one [`Piece::Counted`] (an automaton within
    /// these limits that counts its copies) instead of blocks, where
    /// counting is exact ([`LazyCounted::build`]). Default `None`.
    pub counted: Option<DfaLimits>,
}

impl Default for PieceLimits {
    fn default() -> Self {
        PieceLimits {
            max_nest: 512,
            max_repeat: 10_000,
            max_rules: 100_000,
            block_weight: None,
            counted: None,
        }
    }
}

/// Splits `root` and `rules` (rule `i` for placeholder `i`) into a
/// [`PieceGrammar`]. Errors: a regex that does not parse
/// ([`GrammarError::InvalidRegex`]), a placeholder beyond `rules`
/// ([`GrammarError::InvalidSpec`]), a limit of [`PieceLimits`]
/// ([`GrammarError::LimitExceeded`]).
pub fn split(
    root: &str,
    rules: &[String],
    limits: &PieceLimits,
) -> Result<PieceGrammar, GrammarError> {
    split_with(root, rules, &[], &[], limits)
}

/// [`split`], where the rules in `intersections` (rule index, regexes) are
/// each one [`Piece::Intersection`] of their regexes instead of their
/// text in `rules`, and the rules in `verbatim` (rule index, what their
/// writer knows of them) reference-free regexes kept as their text: each
/// reference to one is its [`Piece::Verbatim`], in place, not a
/// [`Piece::Rule`].
pub fn split_with(
    root: &str,
    rules: &[String],
    intersections: &[(usize, Vec<String>)],
    verbatim: &[(usize, Verbatim)],
    limits: &PieceLimits,
) -> Result<PieceGrammar, GrammarError> {
    let mut s = Splitter {
        rules: vec![Vec::new(); rules.len() + 1],
        count: rules.len(),
        verbatim: vec![None; rules.len() + 1],
        limits,
        marks: Vec::new(),
        counted: HashMap::new(),
    };
    // One memo for every text: a definition inlined in two rules is read once.
    let mut memo = tokensieve_automata::syntax::Memo::default();
    for (r, v) in verbatim {
        let r = *r;
        let Some(text) = rules.get(r) else {
            return Err(GrammarError::InvalidSpec(format!(
                "verbatim rule {r} of a regex grammar: there are {} rules",
                rules.len()
            )));
        };
        let piece = Piece::Verbatim {
            regex: text.clone(),
            verbatim: v.clone(),
        };
        s.rules[r + 1] = vec![vec![piece.clone()]];
        s.verbatim[r + 1] = Some(piece);
    }
    for (i, text) in std::iter::once(root)
        .chain(rules.iter().map(String::as_str))
        .enumerate()
    {
        if s.verbatim[i].is_some() {
            continue;
        }
        if i > 0
            && let Some((_, regexes)) = intersections.iter().find(|(r, _)| *r == i - 1)
        {
            let mut nullable = true;
            for regex in regexes {
                let hir = parse(regex, limits, i, &mut memo)?;
                if mentions_rule(&hir) {
                    return Err(GrammarError::InvalidSpec(format!(
                        "rule {i} of a regex grammar: an intersection of regexes with rule references"
                    )));
                }
                nullable &= hir.properties().minimum_len() == Some(0);
            }
            s.rules[i] = vec![vec![Piece::Intersection {
                regexes: regexes.clone(),
                nullable,
            }]];
            continue;
        }
        let hir = parse(text, limits, i, &mut memo)?;
        s.marks.clear();
        s.mark(&hir);
        let alternatives = match s.walk(hir, 0)? {
            Walked::Plain(hir) => vec![vec![plain(hir)?]],
            Walked::Pieces(pieces) => vec![pieces],
        };
        s.rules[i] = alternatives;
    }
    Ok(PieceGrammar { rules: s.rules })
}

/// Rule `i`'s regex `text`, parsed (with what `memo` kept of the rules
/// parsed before).
fn parse<'a>(
    text: &'a str,
    limits: &PieceLimits,
    i: usize,
    memo: &mut tokensieve_automata::syntax::Memo<'a>,
) -> Result<Hir, GrammarError> {
    tokensieve_automata::syntax::parse_with(text, limits.max_nest, memo).map_err(|e| {
        GrammarError::InvalidRegex {
            location: tokensieve_core::Location::None,
            message: format!("rule {i} of a regex grammar: {e}"),
        }
    })
}

/// The question [`PieceGrammar::fit`] asks of a sub-expression (and its
/// depth): its text when it fits a backend's automaton, `None` when not.
pub type Fits<'a> = dyn FnMut(&Hir, usize) -> Result<Option<String>, GrammarError> + 'a;

impl PieceGrammar {
    /// A reference-free `regex` as pieces that each fit a backend's
    /// automaton limits, for a backend that cannot take it whole: `fits`
    /// gets a sub-expression and its depth (0 for `regex` itself) and
    /// answers with its text when it fits, `None` when it is too big. What
    /// does not fit is taken apart, with helper rules added to this
    /// grammar, and its parts asked in turn: a sequence in two halves
    /// (`ab` → `a`, `b`), an alternation as a rule of two halves, `x*` and
    /// `x+` as a left-recursive rule (`h ::= ε | h x`), `x{m,n}` as `x{m}`
    /// then `x{0,n-m}`, each cut again where still too big (`x{m}` in
    /// halves, `x{0,n}` as a rule `x{0,n/2-1} | x{n/2} x{0,n-n/2}`, one
    /// reading for each count), `x?` as a rule `ε | x`. The
    /// language is unchanged; every `Regex` piece returned, and in the
    /// helper rules, is one `fits` accepted. The regex is parsed once and
    /// taken apart as a syntax tree, so `fits` can skip printing parts it
    /// can tell are too big ([`weight`]). An error when a literal or a
    /// class does not fit.
    pub fn fit(&mut self, regex: &str, fits: &mut Fits<'_>) -> Result<Vec<Piece>, GrammarError> {
        let mut memo = tokensieve_automata::syntax::Memo::default();
        self.fit_tree(parse(regex, &PieceLimits::default(), 0, &mut memo)?, fits)
    }

    /// [`PieceGrammar::fit`] of a syntax tree (a [`Piece::Regex`]'s).
    pub fn fit_tree(&mut self, hir: Hir, fits: &mut Fits<'_>) -> Result<Vec<Piece>, GrammarError> {
        let mut out = Vec::new();
        self.fit_hir(hir, 0, fits, &mut out)?;
        Ok(out)
    }

    fn fit_hir(
        &mut self,
        hir: Hir,
        depth: usize,
        fits: &mut Fits<'_>,
        out: &mut Vec<Piece>,
    ) -> Result<(), GrammarError> {
        if let Some(regex) = fits(&hir, depth)? {
            out.push(Piece::Regex {
                nullable: hir.properties().minimum_len() == Some(0),
                regex,
                tree: Arc::new(hir),
            });
            return Ok(());
        }
        let too_big = |hir: &Hir| GrammarError::LimitExceeded {
            what: format!("a regex that cannot be taken apart ({hir})"),
            limit: 1,
            knob: "max_dfa_states".into(),
        };
        let depth = depth + 1;
        let counted = |sub: &Hir, min: u32, max: Option<u32>| {
            Hir::repetition(Repetition {
                min,
                max,
                greedy: true,
                sub: Box::new(sub.clone()),
            })
        };
        // Taken, not copied: each level's copy of its subtree was most of
        // the split's allocations.
        match hir.into_kind() {
            HirKind::Concat(mut parts) => {
                let right = parts.split_off(parts.len() / 2);
                self.fit_hir(Hir::concat(parts), depth, fits, out)?;
                self.fit_hir(Hir::concat(right), depth, fits, out)?;
            }
            HirKind::Alternation(alts) => {
                if alts.iter().all(|a| a.properties().minimum_len().is_none()) {
                    return Err(too_big(&Hir::alternation(alts)));
                }
                // A branch that matches nothing is no alternative.
                let mut alts: Vec<Hir> = alts
                    .into_iter()
                    .filter(|a| a.properties().minimum_len().is_some())
                    .collect();
                if alts.len() < 2 {
                    let one = alts.pop().expect("a branch that matches");
                    return self.fit_hir(one, depth, fits, out);
                }
                let right = alts.split_off(alts.len() / 2);
                let h = self.rules.len();
                self.rules.push(Vec::new());
                let mut first = Vec::new();
                self.fit_hir(Hir::alternation(alts), depth, fits, &mut first)?;
                let mut second = Vec::new();
                self.fit_hir(Hir::alternation(right), depth, fits, &mut second)?;
                self.rules[h] = vec![first, second];
                out.push(Piece::Rule(h));
            }
            HirKind::Capture(c) => self.fit_hir(*c.sub, depth, fits, out)?,
            HirKind::Repetition(r) => {
                if r.sub.properties().minimum_len().is_none() {
                    return Err(too_big(&Hir::repetition(r)));
                }
                let sub = *r.sub;
                match (r.min, r.max) {
                    (0 | 1, None) => {
                        let h = self.rules.len();
                        self.rules.push(Vec::new());
                        let mut x = Vec::new();
                        self.fit_hir(sub, depth, fits, &mut x)?;
                        let first = if r.min == 0 { Vec::new() } else { x.clone() };
                        let mut again = vec![Piece::Rule(h)];
                        again.extend(x);
                        self.rules[h] = vec![first, again];
                        out.push(Piece::Rule(h));
                    }
                    (min, None) => {
                        self.fit_hir(counted(&sub, min - 1, Some(min - 1)), depth, fits, out)?;
                        self.fit_hir(counted(&sub, 1, None), depth, fits, out)?;
                    }
                    (0, Some(0)) => {}
                    (0, Some(1)) => {
                        let h = self.rules.len();
                        self.rules.push(Vec::new());
                        let mut x = Vec::new();
                        self.fit_hir(sub, depth, fits, &mut x)?;
                        self.rules[h] = vec![Vec::new(), x];
                        out.push(Piece::Rule(h));
                    }
                    (1, Some(1)) => self.fit_hir(sub, depth, fits, out)?,
                    (0, Some(max)) => {
                        // Shorter than half, or half then up to the rest:
                        // one way to read each count (an ambiguous cut,
                        // `x{0,n/2} x{0,n/2}`, would make an Earley parser
                        // follow every split point).
                        let half = max / 2;
                        let h = self.rules.len();
                        self.rules.push(Vec::new());
                        let mut short = Vec::new();
                        if half > 1 {
                            let below = counted(&sub, 0, Some(half - 1));
                            self.fit_hir(below, depth, fits, &mut short)?;
                        }
                        let mut long = Vec::new();
                        self.fit_hir(counted(&sub, half, Some(half)), depth, fits, &mut long)?;
                        self.fit_hir(counted(&sub, 0, Some(max - half)), depth, fits, &mut long)?;
                        self.rules[h] = vec![short, long];
                        out.push(Piece::Rule(h));
                    }
                    (min, Some(max)) => {
                        // `x{m}` in two halves, or `x{m}` then `x{0,n-m}`.
                        let (lo, hi) = if min == max {
                            (min / 2, min - min / 2)
                        } else {
                            (min, max - min)
                        };
                        let second = if min == max { hi } else { 0 };
                        self.fit_hir(counted(&sub, lo, Some(lo)), depth, fits, out)?;
                        self.fit_hir(counted(&sub, second, Some(hi)), depth, fits, out)?;
                    }
                }
            }
            HirKind::Empty => return Err(too_big(&Hir::empty())),
            HirKind::Literal(l) => return Err(too_big(&Hir::literal(l.0))),
            HirKind::Class(c) => return Err(too_big(&Hir::class(c))),
            HirKind::Look(l) => return Err(too_big(&Hir::look(l))),
        }
        Ok(())
    }

    /// Which rules derive the empty string.
    pub fn nullable(&self) -> Vec<bool> {
        let mut nullable = vec![false; self.rules.len()];
        loop {
            let mut changed = false;
            for (i, alts) in self.rules.iter().enumerate() {
                if !nullable[i]
                    && alts.iter().any(|alt| {
                        alt.iter().all(|p| match p {
                            Piece::Regex { nullable, .. } => *nullable,
                            Piece::Intersection { nullable, .. } => *nullable,
                            Piece::Counted { nullable, .. } => *nullable,
                            Piece::Verbatim { verbatim, .. } => verbatim.nullable,
                            Piece::Rule(t) => nullable[*t],
                        })
                    })
                {
                    nullable[i] = true;
                    changed = true;
                }
            }
            if !changed {
                return nullable;
            }
        }
    }

    /// Which rules derive at least one finite string.
    pub fn productive(&self) -> Vec<bool> {
        let mut productive = vec![false; self.rules.len()];
        loop {
            let mut changed = false;
            for (i, alts) in self.rules.iter().enumerate() {
                if !productive[i]
                    && alts.iter().any(|alt| {
                        alt.iter().all(|p| match p {
                            // An empty intersection is the backend's
                            // error when it builds the automaton.
                            Piece::Regex { .. }
                            | Piece::Intersection { .. }
                            | Piece::Counted { .. }
                            | Piece::Verbatim { .. } => true,
                            Piece::Rule(t) => productive[*t],
                        })
                    })
                {
                    productive[i] = true;
                    changed = true;
                }
            }
            if !changed {
                return productive;
            }
        }
    }
}

enum Walked {
    /// No reference inside: the tree, given back for the caller to keep as
    /// part of a larger regex.
    Plain(Hir),
    Pieces(Vec<Piece>),
}

struct Splitter<'a> {
    rules: Vec<Vec<Vec<Piece>>>,
    /// How many placeholders stand for rules.
    count: usize,
    /// The piece of each verbatim rule (by rule index), which stands in
    /// the place of a reference to it.
    verbatim: Vec<Option<Piece>>,
    limits: &'a PieceLimits,
    /// What [`Splitter::walk`] asks of each node of the tree it walks, in
    /// pre-order (a node's children follow it, each after the subtree of
    /// the one before): read once per tree by [`Splitter::mark`], where
    /// asking it at each level the walk goes down read a subtree again
    /// for each level above it (5% of the compile of big schemas, 10% of
    /// a Kubernetes one's).
    marks: Vec<Mark>,
    /// The counting automata built so far ([`Splitter::counted`]), by the
    /// regex they count (`None`: counting it is not exact): the same
    /// `maxLength` string comes back in every object that has it (a
    /// Kubernetes schema builds `(?:char){0,255}"` twenty times), and a
    /// backend keeps one lexeme per regex.
    counted: HashMap<String, Option<Arc<LazyCounted>>>,
}

/// What [`Splitter::mark`] found of a node: the nodes of its subtree
/// (itself included), whether it holds a rule reference (as
/// [`mentions_rule`] reads them), and whether it holds a repetition long
/// enough for blocks ([`Splitter::blocks_of`]).
#[derive(Clone, Copy, Default)]
struct Mark {
    size: u32,
    mentions: bool,
    long: bool,
}

impl Splitter<'_> {
    /// Pushes the [`Mark`]s of `hir`'s subtree onto `self.marks`, in
    /// pre-order; `hir`'s own.
    fn mark(&mut self, hir: &Hir) -> Mark {
        let at = self.marks.len();
        self.marks.push(Mark::default());
        let (mentions, long) = match hir.kind() {
            HirKind::Empty | HirKind::Look(_) | HirKind::Literal(_) | HirKind::Class(_) => {
                (mentions_rule(hir), false)
            }
            HirKind::Capture(c) => {
                let sub = self.mark(&c.sub);
                (sub.mentions, sub.long)
            }
            HirKind::Repetition(r) => {
                let sub = self.mark(&r.sub);
                let long = sub.long || self.blocks_of(r, sub.mentions).is_some();
                (sub.mentions, long)
            }
            HirKind::Concat(subs) | HirKind::Alternation(subs) => {
                let (mut mentions, mut long) = (false, false);
                for sub in subs {
                    let m = self.mark(sub);
                    mentions |= m.mentions;
                    long |= m.long;
                }
                (mentions, long)
            }
        };
        let mark = Mark {
            size: (self.marks.len() - at) as u32,
            mentions,
            long,
        };
        self.marks[at] = mark;
        mark
    }

    /// The pre-order indices of the children of the node at `at` (`subs`
    /// of them).
    fn children(&self, at: usize, subs: usize) -> Vec<usize> {
        let mut next = at + 1;
        (0..subs)
            .map(|_| {
                let child = next;
                next += self.marks[child].size as usize;
                child
            })
            .collect()
    }

    /// The rule a placeholder character stands for, if it is one.
    fn target(&self, c: char) -> Result<Option<usize>, GrammarError> {
        let code = c as u32;
        if !(PLACEHOLDER_BASE..PLACEHOLDER_BASE + 0xFFFE).contains(&code) {
            return Ok(None);
        }
        let i = (code - PLACEHOLDER_BASE) as usize;
        if i >= self.count {
            return Err(GrammarError::InvalidSpec(format!(
                "placeholder U+{code:04X} stands for rule {i}, but there are {} rules",
                self.count
            )));
        }
        Ok(Some(i + 1))
    }

    /// What a reference to `rule` becomes: the rule, or a verbatim rule's
    /// regex in its place.
    fn reference(&self, rule: usize) -> Piece {
        match &self.verbatim[rule] {
            Some(piece) => piece.clone(),
            None => Piece::Rule(rule),
        }
    }

    fn helper(&mut self, alternatives: Vec<Vec<Piece>>) -> Result<usize, GrammarError> {
        if self.rules.len() >= self.limits.max_rules {
            return Err(GrammarError::LimitExceeded {
                what: "rules of a regex grammar".into(),
                limit: self.limits.max_rules,
                knob: "PieceLimits::max_rules".into(),
            });
        }
        self.rules.push(alternatives);
        Ok(self.rules.len() - 1)
    }

    /// The pieces of a sequence (the tree again when it is one plain
    /// regex). A long repetition in it ([`Splitter::long_repetition`]) is
    /// taken apart into blocks with the rest of the sequence as its
    /// continuation. The parts are moved, not copied, into the pieces.
    /// `at`: the pre-order index of each of `subs` ([`Splitter::marks`]).
    fn sequence(&mut self, mut subs: Vec<Hir>, mut at: Vec<usize>) -> Result<Walked, GrammarError> {
        let long = (subs.iter().zip(&at)).position(|(s, &i)| self.long_repetition(s, i).is_some());
        let tail = long.map(|k| (subs.split_off(k), at.split_off(k)));
        let mut pieces = Vec::new();
        let mut run: Vec<Hir> = Vec::new();
        for (sub, i) in subs.into_iter().zip(at) {
            match self.walk(sub, i)? {
                Walked::Plain(sub) => run.push(sub),
                Walked::Pieces(p) => {
                    if !run.is_empty() {
                        pieces.push(plain(Hir::concat(std::mem::take(&mut run)))?);
                    }
                    pieces.extend(p);
                }
            }
        }
        let Some((mut tail, mut tail_at)) = tail else {
            if pieces.is_empty() {
                return Ok(Walked::Plain(Hir::concat(run)));
            }
            if !run.is_empty() {
                pieces.push(plain(Hir::concat(run))?);
            }
            pieces.retain(|p| !matches!(p, Piece::Regex { regex, .. } if regex.is_empty()));
            return Ok(Walked::Pieces(pieces));
        };
        if !run.is_empty() {
            pieces.push(plain(Hir::concat(run))?);
        }
        let rest = tail.split_off(1);
        let rest_at = tail_at.split_off(1);
        let continuation = if rest.is_empty() {
            Vec::new()
        } else {
            match self.sequence(rest, rest_at)? {
                Walked::Pieces(p) => p,
                Walked::Plain(rest) => vec![plain(rest)?],
            }
        };
        let (rep, per_block) = self
            .long_repetition(&tail[0], tail_at[0])
            .expect("found long above");
        match self.counted(rep, continuation)? {
            Ok(counted) => pieces.extend(counted),
            Err(continuation) => pieces.extend(self.blocks(rep, per_block, continuation)?),
        }
        pieces.retain(|p| !matches!(p, Piece::Regex { regex, .. } if regex.is_empty()));
        Ok(Walked::Pieces(pieces))
    }

    /// `rep` then `continuation` as a [`Piece::Counted`] of `rep` and the
    /// continuation's first piece where that is plain text (a string's
    /// closing quote, and what follows it up to the next rule), then the
    /// rest of the continuation: where [`PieceLimits::counted`] asks for
    /// it, the repetition has an upper bound, and counting it is exact.
    /// Otherwise the continuation back, for blocks.
    fn counted(
        &mut self,
        rep: &Repetition,
        mut continuation: Vec<Piece>,
    ) -> Result<Result<Vec<Piece>, Vec<Piece>>, GrammarError> {
        let (Some(limits), Some(max)) = (&self.limits.counted, rep.max) else {
            return Ok(Err(continuation));
        };
        let (tail, rest) = match continuation.first() {
            Some(Piece::Regex { tree, .. }) => ((**tree).clone(), 1),
            _ => (Hir::empty(), 0),
        };
        let whole = Hir::concat(vec![Hir::repetition(rep.clone()), tail.clone()]);
        let regex = regex_text(&whole)?;
        let nullable = whole.properties().minimum_len() == Some(0);
        let built = match self.counted.get(&regex) {
            Some(built) => built.clone(),
            None => {
                let built =
                    LazyCounted::build(&rep.sub, rep.min, max, &tail, regex.clone(), limits)
                        .map(Arc::new);
                self.counted.insert(regex.clone(), built.clone());
                built
            }
        };
        let Some(automaton) = built else {
            return Ok(Err(continuation));
        };
        let mut pieces = vec![Piece::Counted {
            regex,
            nullable,
            automaton,
        }];
        pieces.extend(continuation.drain(rest..));
        Ok(Ok(pieces))
    }

    /// `hir` if it is a counted repetition (in captures or not) of a
    /// reference-free body, with the copies of a block, when its copies
    /// make at least two blocks of [`PieceLimits::block_weight`]. A body
    /// that holds a long repetition itself (an array of objects with long
    /// strings) is not one: it is walked as a body with rules, so that
    /// its own long repetition is taken apart.
    /// (`at`: `hir`'s pre-order index.)
    fn long_repetition<'h>(&self, hir: &'h Hir, at: usize) -> Option<(&'h Repetition, u32)> {
        // Each capture around the repetition is one node before it.
        let mut at = at;
        let mut hir = hir;
        while let HirKind::Capture(c) = hir.kind() {
            hir = &c.sub;
            at += 1;
        }
        let HirKind::Repetition(rep) = hir.kind() else {
            return None;
        };
        let sub = self.marks[at + 1];
        let per_block = self.blocks_of(rep, sub.mentions)?;
        (!sub.long).then_some((rep, per_block))
    }

    /// The copies of a block of `rep`, when its body is reference-free
    /// (`mentions`: whether it holds a reference) and its copies make at
    /// least two blocks.
    fn blocks_of(&self, rep: &Repetition, mentions: bool) -> Option<u32> {
        let block = self.limits.block_weight?;
        let copies = rep.max.unwrap_or(rep.min).max(rep.min);
        // Every block holds a copy: fewer than two copies (`*`, `+`, `?`)
        // never make two blocks, whatever the body weighs. Otherwise only
        // whether the body weighs more than `block` matters past `block`
        // (a block is then one copy): the weight is read no further.
        if copies < 2 || mentions {
            return None;
        }
        let per_block =
            (block / weight_at_most(&rep.sub, block).max(1)).clamp(1, u32::MAX as u64) as u32;
        (copies >= per_block.saturating_mul(2)).then_some(per_block)
    }

    /// `X{lo,hi}` (X reference-free, `b` copies a block), then
    /// `continuation`, in blocks `B = X{b}`: `lo / b` blocks, then the rest
    /// `X{lo',hi'}` (`lo' < b`): one regex if it is unbounded or under two
    /// blocks, else nested rules
    ///
    /// ```text
    /// C_0 ::= X{0,r} continuation                 (hi' = q b + r)
    /// C_j ::= X{0,b-1} continuation | B C_(j-1)   (0 < j < q)
    /// C_q ::= X{lo',b-1} continuation | B C_(q-1)
    /// ```
    ///
    /// so `C_j` is `X{0, j b + r}` (the two alternatives take fewer than `b`
    /// copies and at least `b`), `C_q` is `X{lo',hi'}`, and a parser nests
    /// one rule per block, not per copy. The continuation is written after
    /// each last block, so a backend can end the last block's lexeme with
    /// what follows (a string's closing quote) instead of after every copy.
    fn blocks(
        &mut self,
        rep: &Repetition,
        b: u32,
        continuation: Vec<Piece>,
    ) -> Result<Vec<Piece>, GrammarError> {
        let b = b.max(1);
        let copies = |min: u32, max: Option<u32>| {
            plain(Hir::repetition(Repetition {
                min,
                max,
                greedy: true,
                sub: rep.sub.clone(),
            }))
        };
        let full = rep.min / b;
        let lo = rep.min - full * b;
        let block = copies(b, Some(b))?;
        let mut pieces = vec![block.clone(); full as usize];
        let with_continuation = |first: Piece| {
            let mut alt = vec![first];
            alt.extend(continuation.iter().cloned());
            alt
        };
        let hi = match rep.max {
            Some(max) if max - full * b >= b.saturating_mul(2) => max - full * b,
            max => {
                // Unbounded, or few copies left: one regex.
                pieces.extend(with_continuation(copies(lo, max.map(|m| m - full * b))?));
                return Ok(pieces);
            }
        };
        let (q, r) = (hi / b, hi % b);
        let mut chain = self.helper(vec![with_continuation(copies(0, Some(r))?)])?;
        let tail = self.helper(vec![with_continuation(copies(0, Some(b - 1))?)])?;
        for _ in 1..q {
            chain = self.helper(vec![
                vec![Piece::Rule(tail)],
                vec![block.clone(), Piece::Rule(chain)],
            ])?;
        }
        let first_tail = if lo == 0 {
            tail
        } else {
            self.helper(vec![with_continuation(copies(lo, Some(b - 1))?)])?
        };
        let top = self.helper(vec![
            vec![Piece::Rule(first_tail)],
            vec![block, Piece::Rule(chain)],
        ])?;
        pieces.push(Piece::Rule(top));
        Ok(pieces)
    }

    /// `hir`'s pieces, or `hir` itself when it is plain. Takes the tree: a
    /// plain part is moved into its piece, not copied (only the parts of a
    /// tree that hold a reference are taken apart). `at`: `hir`'s
    /// pre-order index in [`Splitter::marks`].
    fn walk(&mut self, hir: Hir, at: usize) -> Result<Walked, GrammarError> {
        // Anything to take apart: a rule reference, or a repetition long
        // enough for blocks.
        let mark = self.marks[at];
        if !(mark.mentions || mark.long) {
            return Ok(Walked::Plain(hir));
        }
        match hir.kind() {
            HirKind::Empty | HirKind::Look(_) | HirKind::Class(Class::Bytes(_)) => {
                return Ok(Walked::Plain(hir));
            }
            HirKind::Literal(lit) => {
                let Ok(text) = std::str::from_utf8(&lit.0) else {
                    return Ok(Walked::Plain(hir));
                };
                let mut pieces = Vec::new();
                let mut run = String::new();
                let mut any = false;
                for c in text.chars() {
                    match self.target(c)? {
                        Some(rule) => {
                            any = true;
                            if !run.is_empty() {
                                pieces.push(literal(&std::mem::take(&mut run)));
                            }
                            pieces.push(self.reference(rule));
                        }
                        None => run.push(c),
                    }
                }
                if !any {
                    return Ok(Walked::Plain(hir));
                }
                if !run.is_empty() {
                    pieces.push(literal(&run));
                }
                return Ok(Walked::Pieces(pieces));
            }
            HirKind::Class(Class::Unicode(class)) => {
                let mut targets = Vec::new();
                for range in class.ranges() {
                    let (lo, hi) = (range.start() as u32, range.end() as u32);
                    // Bounded: the loop stops at the first non-placeholder.
                    for code in lo..=hi {
                        match char::from_u32(code).map(|c| self.target(c)).transpose()? {
                            Some(Some(rule)) => targets.push(rule),
                            _ => return Ok(Walked::Plain(hir)),
                        }
                    }
                }
                return Ok(if targets.len() == 1 {
                    Walked::Pieces(vec![self.reference(targets[0])])
                } else {
                    let alternatives = targets.into_iter().map(|t| vec![Piece::Rule(t)]).collect();
                    Walked::Pieces(vec![Piece::Rule(self.helper(alternatives)?)])
                });
            }
            HirKind::Repetition(_) => {
                if let Some((rep, per_block)) = self.long_repetition(&hir, at) {
                    return Ok(Walked::Pieces(self.blocks(rep, per_block, Vec::new())?));
                }
            }
            HirKind::Capture(_) | HirKind::Concat(_) | HirKind::Alternation(_) => {}
        }
        Ok(match hir.into_kind() {
            HirKind::Capture(capture) => self.walk(*capture.sub, at + 1)?,
            HirKind::Concat(subs) => {
                let children = self.children(at, subs.len());
                self.sequence(subs, children)?
            }
            HirKind::Alternation(subs) => {
                let children = self.children(at, subs.len());
                let walked = (subs.into_iter().zip(children))
                    .map(|(s, i)| self.walk(s, i))
                    .collect::<Result<Vec<_>, _>>()?;
                if walked.iter().all(|w| matches!(w, Walked::Plain(_))) {
                    let subs = walked.into_iter().map(|w| match w {
                        Walked::Plain(sub) => sub,
                        Walked::Pieces(_) => unreachable!("all plain"),
                    });
                    return Ok(Walked::Plain(Hir::alternation(subs.collect())));
                }
                // The small plain alternatives make one regex together (one
                // lexeme for `null|true|false|number|string` beside the
                // array and object of a JSON value), the others one
                // alternative each (a big branch stays a lexeme of its own,
                // shared where the same branch comes again).
                let mut alternatives = Vec::with_capacity(walked.len());
                let mut plains = Vec::new();
                for w in walked {
                    match w {
                        Walked::Plain(sub)
                            if weight_at_most(&sub, MERGED_ALTERNATIVE_WEIGHT)
                                <= MERGED_ALTERNATIVE_WEIGHT =>
                        {
                            plains.push(sub)
                        }
                        Walked::Plain(sub) => alternatives.push(vec![plain(sub)?]),
                        Walked::Pieces(p) => alternatives.push(p),
                    }
                }
                if !plains.is_empty() {
                    alternatives.insert(0, vec![plain(Hir::alternation(plains))?]);
                }
                Walked::Pieces(vec![Piece::Rule(self.helper(alternatives)?)])
            }
            HirKind::Repetition(rep) => {
                let Repetition {
                    min,
                    max,
                    greedy,
                    sub,
                } = rep;
                let body = match self.walk(*sub, at + 1)? {
                    Walked::Plain(sub) => {
                        return Ok(Walked::Plain(Hir::repetition(Repetition {
                            min,
                            max,
                            greedy,
                            sub: Box::new(sub),
                        })));
                    }
                    Walked::Pieces(p) if p.len() == 1 => p,
                    Walked::Pieces(p) => vec![Piece::Rule(self.helper(vec![p])?)],
                };
                let copies = max.unwrap_or(min).max(min);
                if copies > self.limits.max_repeat {
                    return Err(GrammarError::LimitExceeded {
                        what: format!("a repetition of {copies} around a rule reference"),
                        limit: self.limits.max_repeat as usize,
                        knob: "PieceLimits::max_repeat".into(),
                    });
                }
                let mut pieces = Vec::new();
                for _ in 0..min {
                    pieces.extend(body.iter().cloned());
                }
                match max {
                    None => {
                        // R ::= "" | R body
                        let r = self.helper(Vec::new())?;
                        let mut again = vec![Piece::Rule(r)];
                        again.extend(body.iter().cloned());
                        self.rules[r] = vec![Vec::new(), again];
                        pieces.push(Piece::Rule(r));
                    }
                    Some(max) if max > min => {
                        // O_1 ::= "" | body ; O_k ::= "" | body O_(k-1)
                        let mut inner: Option<usize> = None;
                        for _ in min..max {
                            let mut some = body.clone();
                            if let Some(o) = inner {
                                some.push(Piece::Rule(o));
                            }
                            inner = Some(self.helper(vec![Vec::new(), some])?);
                        }
                        pieces.push(Piece::Rule(inner.expect("max > min")));
                    }
                    Some(_) => {}
                }
                Walked::Pieces(pieces)
            }
            HirKind::Empty | HirKind::Literal(_) | HirKind::Class(_) | HirKind::Look(_) => {
                unreachable!("leaves are answered above")
            }
        })
    }
}

/// A literal string as a regex piece.
fn literal(text: &str) -> Piece {
    Piece::Regex {
        regex: regex_syntax::escape(text),
        nullable: text.is_empty(),
        tree: Arc::new(Hir::literal(text.as_bytes())),
    }
}

/// About the states of an automaton for `hir`, the measure of
/// [`PieceLimits::block_weight`]: the bytes of its literals, one per class,
/// the copies of a counted repetition multiplied (an unbounded one counts
/// its least copies, at least one), saturating.
pub fn weight(hir: &Hir) -> u64 {
    weight_by(hir, &|_| 1)
}

/// [`weight`] with each class weighing what `class` says.
pub(crate) fn weight_by(hir: &Hir, class: &dyn Fn(&Class) -> u64) -> u64 {
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => 0,
        HirKind::Literal(lit) => lit.0.len() as u64,
        HirKind::Class(c) => class(c),
        HirKind::Capture(c) => weight_by(&c.sub, class),
        HirKind::Repetition(r) => {
            let copies = r.max.unwrap_or(r.min).max(r.min).max(1);
            weight_by(&r.sub, class).saturating_mul(copies as u64)
        }
        HirKind::Concat(subs) | HirKind::Alternation(subs) => subs
            .iter()
            .fold(0, |w, s| w.saturating_add(weight_by(s, class))),
    }
}

/// [`weight`] where it is at most `cap`, otherwise some number above
/// `cap`: reads no more of the tree than it takes to pass `cap` (a
/// repetition's body no further than `cap` over its copies).
pub fn weight_at_most(hir: &Hir, cap: u64) -> u64 {
    weight_by_at_most(hir, &|_| 1, cap)
}

/// [`weight_by`] where it is at most `cap`, otherwise some number above
/// `cap`, read as [`weight_at_most`] reads.
pub(crate) fn weight_by_at_most(hir: &Hir, class: &dyn Fn(&Class) -> u64, cap: u64) -> u64 {
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => 0,
        HirKind::Literal(lit) => lit.0.len() as u64,
        HirKind::Class(c) => class(c),
        HirKind::Capture(c) => weight_by_at_most(&c.sub, class, cap),
        HirKind::Repetition(r) => {
            let copies = r.max.unwrap_or(r.min).max(r.min).max(1) as u64;
            let body_cap = cap / copies;
            match weight_by_at_most(&r.sub, class, body_cap) {
                w if w > body_cap => cap.saturating_add(1),
                w => w * copies,
            }
        }
        HirKind::Concat(subs) | HirKind::Alternation(subs) => {
            let mut total = 0u64;
            for sub in subs {
                total = total.saturating_add(weight_by_at_most(sub, class, cap - total));
                if total > cap {
                    return cap.saturating_add(1);
                }
            }
            total
        }
    }
}

/// Whether `hir` holds a rule reference, read as [`Splitter::walk`] reads
/// them: a placeholder character in a literal, or a class of placeholders
/// only (a class that mixes them with other characters, like a JSON string
/// character, is plain).
fn mentions_rule(hir: &Hir) -> bool {
    let placeholders = PLACEHOLDER_BASE..PLACEHOLDER_BASE + 0xFFFE;
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) | HirKind::Class(Class::Bytes(_)) => false,
        // Plane 15 (the placeholders) is written with a lead byte 0xF3.
        HirKind::Literal(lit) => {
            lit.0.contains(&0xF3)
                && String::from_utf8_lossy(&lit.0)
                    .chars()
                    .any(|c| placeholders.contains(&(c as u32)))
        }
        HirKind::Class(Class::Unicode(class)) => {
            !class.ranges().is_empty()
                && class.ranges().iter().all(|r| {
                    placeholders.contains(&(r.start() as u32))
                        && placeholders.contains(&(r.end() as u32))
                })
        }
        HirKind::Capture(c) => mentions_rule(&c.sub),
        HirKind::Repetition(r) => mentions_rule(&r.sub),
        HirKind::Concat(subs) | HirKind::Alternation(subs) => subs.iter().any(mentions_rule),
    }
}

/// A reference-free sub-expression as one regex piece.
fn plain(hir: Hir) -> Result<Piece, GrammarError> {
    match hir.properties().minimum_len() {
        None => Err(GrammarError::InvalidSpec(
            "a piece of a regex grammar matches nothing".into(),
        )),
        Some(min) => Ok(Piece::Regex {
            regex: regex_text(&hir)?,
            nullable: min == 0,
            tree: Arc::new(hir),
        }),
    }
}

/// `hir` as regex text that parses back to the same language (so one
/// text is one language: a key for the automata built from trees). An
/// error for an assertion other than the start, the end, a line's ends
/// and word boundaries.
pub fn regex_text(hir: &Hir) -> Result<String, GrammarError> {
    // Printed into one buffer kept by the thread, then copied out at its
    // size: a text grown from empty is reallocated (and copied) once per
    // doubling, and every plain piece of a split is printed.
    thread_local! {
        static SCRATCH: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
    }
    SCRATCH.with_borrow_mut(|scratch| {
        scratch.clear();
        let printed = print(hir, scratch).map(|()| scratch.as_str().to_owned());
        // A buffer of a rare huge text is not kept.
        if scratch.capacity() > SCRATCH_KEPT {
            *scratch = String::new();
        }
        printed
    })
}

/// Largest buffer [`regex_text`] keeps for the next text.
const SCRATCH_KEPT: usize = 1 << 20;

/// `hir` as regex text that parses back to the same language. Not
/// `Hir`'s `Display`: that writes `(?:x+)?` as `x+?`, a lazy `x+`.
/// Every repetition is written `{m,n}` on an atom or a group, every
/// alternation as a group.
fn print(hir: &Hir, out: &mut String) -> Result<(), GrammarError> {
    use regex_syntax::hir::Look;
    match hir.kind() {
        HirKind::Empty => out.push_str("(?:)"),
        HirKind::Literal(lit) => match std::str::from_utf8(&lit.0) {
            Ok(text) => regex_syntax::escape_into(text, out),
            Err(_) => {
                out.push_str("(?-u:");
                for &b in lit.0.iter() {
                    out.push_str("\\x");
                    push_hex(out, u32::from(b), 2);
                }
                out.push(')');
            }
        },
        HirKind::Class(Class::Unicode(class)) => {
            if class.ranges().is_empty() {
                out.push_str(r"[^\x{0}-\x{10FFFF}]");
            } else {
                out.push('[');
                for r in class.ranges() {
                    push_class_char(out, r.start());
                    if r.end() != r.start() {
                        out.push('-');
                        push_class_char(out, r.end());
                    }
                }
                out.push(']');
            }
        }
        HirKind::Class(Class::Bytes(class)) => {
            if class.ranges().is_empty() {
                out.push_str(r"[^\x{0}-\x{10FFFF}]");
            } else {
                out.push_str("(?-u:[");
                for r in class.ranges() {
                    out.push_str("\\x");
                    push_hex(out, u32::from(r.start()), 2);
                    out.push_str("-\\x");
                    push_hex(out, u32::from(r.end()), 2);
                }
                out.push_str("])");
            }
        }
        HirKind::Look(look) => out.push_str(match look {
            Look::Start => r"\A",
            Look::End => r"\z",
            Look::StartLF => "(?m:^)",
            Look::EndLF => "(?m:$)",
            Look::WordUnicode => r"\b",
            Look::WordUnicodeNegate => r"\B",
            other => {
                return Err(GrammarError::Unsupported {
                    location: tokensieve_core::Location::None,
                    what: format!("the assertion {other:?} in a regex grammar piece"),
                });
            }
        }),
        HirKind::Capture(capture) => print(&capture.sub, out)?,
        HirKind::Concat(subs) => {
            for sub in subs {
                print(sub, out)?;
            }
        }
        HirKind::Alternation(subs) => {
            out.push_str("(?:");
            for (i, sub) in subs.iter().enumerate() {
                if i > 0 {
                    out.push('|');
                }
                print(sub, out)?;
            }
            out.push(')');
        }
        HirKind::Repetition(rep) => {
            let atom = match rep.sub.kind() {
                HirKind::Class(_) => true,
                HirKind::Literal(lit) => {
                    std::str::from_utf8(&lit.0).is_ok_and(|t| t.chars().count() == 1)
                }
                _ => false,
            };
            if atom {
                print(&rep.sub, out)?;
            } else {
                out.push_str("(?:");
                print(&rep.sub, out)?;
                out.push(')');
            }
            out.push('{');
            push_decimal(out, rep.min);
            out.push(',');
            if let Some(max) = rep.max {
                push_decimal(out, max);
            }
            out.push('}');
        }
    }
    Ok(())
}

/// `c` as one character of a bracketed class: a letter, a digit or a
/// space as itself, other printable ASCII escaped (every such character
/// but `<` and `>` may be, and then none is an operator: `-`, `&&`, `~~`,
/// `[`), the rest as `\x{...}`. (All as `\x{...}` made a JSON string's
/// character class three times as long, and every plain piece is printed.)
fn push_class_char(out: &mut String, c: char) {
    match c {
        '0'..='9' | 'A'..='Z' | 'a'..='z' | ' ' | '<' | '>' => out.push(c),
        '!'..='~' => {
            out.push('\\');
            out.push(c);
        }
        _ => {
            out.push_str("\\x{");
            push_hex(out, c as u32, 1);
            out.push('}');
        }
    }
}

/// `v` in upper-case hexadecimal, at least `width` digits (as `{:0width$X}`
/// writes it, without the formatting machinery: printing is on every
/// compile's path).
fn push_hex(out: &mut String, v: u32, width: usize) {
    let digits = ((32 - v.leading_zeros() as usize).div_ceil(4)).max(width);
    for k in (0..digits).rev() {
        let d = (v >> (4 * k)) & 0xF;
        out.push(
            char::from_digit(d, 16)
                .expect("a hex digit")
                .to_ascii_uppercase(),
        );
    }
}

/// `v` in decimal.
fn push_decimal(out: &mut String, v: u32) {
    let mut buf = [0u8; 10];
    let mut at = buf.len();
    let mut v = v;
    loop {
        at -= 1;
        buf[at] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.push_str(std::str::from_utf8(&buf[at..]).expect("ASCII digits"));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compose::{self, placeholder};
    use crate::gbnf::GbnfLimits;
    use crate::testing::{mutate, random_sentence};
    use regex_automata::meta::Regex;
    use tokensieve_core::testing::SplitMix64;

    fn p(i: usize) -> char {
        placeholder(i).unwrap()
    }

    #[test]
    fn capped_weight_is_the_weight_up_to_the_cap() {
        let regexes = [
            "",
            "abc",
            "[a-z]",
            "(?:ab|cde)f",
            "\"(?:[^\"\\\\]|\\\\.){0,64}\"",
            "(?:x(?:yz){3,5}){2}",
            "a*b+c?",
            "(?:(?:[0-9]{4}-){10}|abc){0,7}",
            "(?:é[α-ω]{2,3}|[😀-😂]x)+\\p{L}{0,9}",
        ];
        for regex in regexes {
            let hir = regex_syntax::parse(regex).unwrap();
            let full = weight(&hir);
            for cap in 0..full + 3 {
                let capped = weight_at_most(&hir, cap);
                if full <= cap {
                    assert_eq!(capped, full, "{regex} at cap {cap}");
                } else {
                    assert!(capped > cap, "{regex} at cap {cap}: {capped} of {full}");
                }
            }
            // The measure a lexeme is chosen by, with classes weighed by
            // their UTF-8 states: the same, or `None`, at every cap.
            let measure = crate::regular::Measure::of(&hir);
            for cap in 0..measure.weight + 3 {
                match crate::regular::Measure::within(&hir, cap) {
                    Some(m) => assert_eq!(m, measure, "{regex} at cap {cap}"),
                    None => assert!(measure.weight > cap, "{regex} at cap {cap}"),
                }
            }
        }
    }

    /// Whether `text` is in the language of the piece grammar, by a plain
    /// backtracking search (tests only: small inputs).
    fn accepts(g: &PieceGrammar, text: &[u8]) -> bool {
        struct Search<'a> {
            g: &'a PieceGrammar,
            text: &'a [u8],
            compiled: std::collections::HashMap<String, Regex>,
        }
        impl Search<'_> {
            fn ends(&mut self, rule: usize, at: usize, depth: usize) -> Vec<usize> {
                let mut out = Vec::new();
                if depth > 60 {
                    return out;
                }
                for alt in &self.g.rules[rule] {
                    let mut positions = vec![at];
                    for piece in alt {
                        let mut next = Vec::new();
                        for &pos in &positions {
                            match piece {
                                Piece::Regex { regex, .. } | Piece::Verbatim { regex, .. } => {
                                    let re =
                                        self.compiled.entry(regex.clone()).or_insert_with(|| {
                                            Regex::new(&format!("^(?:{regex})$")).unwrap()
                                        });
                                    let text = self.text;
                                    next.extend(
                                        (pos..=text.len())
                                            .filter(|&end| re.is_match(&text[pos..end])),
                                    );
                                }
                                Piece::Rule(t) => next.extend(self.ends(*t, pos, depth + 1)),
                                Piece::Counted { regex, .. } => {
                                    let re = Regex::new(&format!("^(?:{regex})$")).unwrap();
                                    let text = self.text;
                                    next.extend(
                                        (pos..=text.len())
                                            .filter(|&end| re.is_match(&text[pos..end])),
                                    );
                                }
                                Piece::Intersection { regexes, .. } => {
                                    let res: Vec<Regex> = regexes
                                        .iter()
                                        .map(|r| Regex::new(&format!("^(?:{r})$")).unwrap())
                                        .collect();
                                    let text = self.text;
                                    next.extend((pos..=text.len()).filter(|&end| {
                                        res.iter().all(|re| re.is_match(&text[pos..end]))
                                    }));
                                }
                            }
                        }
                        next.sort_unstable();
                        next.dedup();
                        positions = next;
                    }
                    out.extend(positions);
                }
                out.sort_unstable();
                out.dedup();
                out
            }
        }
        let mut search = Search {
            g,
            text,
            compiled: Default::default(),
        };
        search.ends(0, 0, 0).contains(&text.len())
    }

    /// The hand-written number printing writes what `format!` writes.
    #[test]
    fn numbers_print_as_format_prints_them() {
        for v in [
            0u32,
            1,
            9,
            10,
            0x1F,
            0xFF,
            0x100,
            0xD7FF,
            0x10FFFF,
            65_535,
            u32::MAX,
        ] {
            let (mut hex, mut wide, mut dec) = (String::new(), String::new(), String::new());
            push_hex(&mut hex, v, 1);
            push_hex(&mut wide, v, 2);
            push_decimal(&mut dec, v);
            assert_eq!(hex, format!("{v:X}"));
            assert_eq!(wide, format!("{v:02X}"));
            assert_eq!(dec, v.to_string());
        }
    }

    #[test]
    fn plain_regexes_stay_whole_and_references_split() {
        let g = split("a(?:b|c)*d", &[], &PieceLimits::default()).unwrap();
        assert_eq!(g.rules.len(), 1);
        assert_eq!(g.rules[0].len(), 1);
        assert!(matches!(&g.rules[0][0][..], [Piece::Regex { .. }]));

        let list = format!(r"\[(?:{0}(?:,{0})*)?\]", p(0));
        let g = split(&list, &["x".into()], &PieceLimits::default()).unwrap();
        for (text, ok) in [
            ("[]", true),
            ("[x]", true),
            ("[x,x,x]", true),
            ("[x,]", false),
            ("[", false),
        ] {
            assert_eq!(accepts(&g, text.as_bytes()), ok, "{text}");
        }
        assert!(g.productive().iter().all(|&p| p));
        assert!(!g.nullable()[0]);
    }

    /// The plain alternatives beside a reference make one regex (one
    /// lexeme for a JSON value's scalars), the reference one alternative.
    #[test]
    fn plain_alternatives_make_one_piece() {
        let value = format!("null|true|{}|-?[0-9]+", p(0));
        let g = split(&value, &["x".into()], &PieceLimits::default()).unwrap();
        let [Piece::Rule(helper)] = g.rules[0][0][..] else {
            panic!(
                "an alternation with a reference is a helper rule: {:?}",
                g.rules[0]
            );
        };
        let alternatives = &g.rules[helper];
        assert_eq!(alternatives.len(), 2, "{alternatives:?}");
        assert!(matches!(&alternatives[0][..], [Piece::Regex { .. }]));
        assert_eq!(alternatives[1], vec![Piece::Rule(1)]);
        for (text, ok) in [
            ("null", true),
            ("true", true),
            ("x", true),
            ("-12", true),
            ("nul", false),
            ("xx", false),
        ] {
            assert_eq!(accepts(&g, text.as_bytes()), ok, "{text}");
        }
    }

    #[test]
    fn printed_pieces_keep_their_language() {
        // `(?:x+)?` is what Hir's Display writes as a lazy `x+?`.
        for (regex, yes, no) in [
            ("a:(?:[b-d]+)?:e", &["a::e", "a:bcd:e"][..], &["a:e"][..]),
            (
                r"(?:x|yz){2,3}\.|\d?",
                &["xyz.", "xxx.", "", "7"],
                &["x.", "xxxx."],
            ),
            ("é+(?:ab)*", &["é", "ééabab"], &["ab", "éa"]),
        ] {
            let g = split(regex, &[], &PieceLimits::default()).unwrap();
            let Piece::Regex { regex: printed, .. } = &g.rules[0][0][0] else {
                panic!("one regex piece");
            };
            let re = Regex::new(&format!("^(?:{printed})$")).unwrap();
            for t in yes {
                assert!(re.is_match(t), "{printed} should match {t}");
            }
            for t in no {
                assert!(!re.is_match(t), "{printed} should not match {t}");
            }
        }
    }

    #[test]
    fn classes_print_back_to_themselves() {
        use regex_syntax::hir::{ClassUnicode, ClassUnicodeRange};
        let parse = |text: &str| {
            regex_syntax::ParserBuilder::new()
                .utf8(true)
                .build()
                .parse(text)
                .unwrap_or_else(|e| panic!("{text}: {e}"))
        };
        let mut classes: Vec<Vec<(char, char)>> = Vec::new();
        // Every ASCII character alone, as a range's either end, and beside
        // the characters that make class operators (`&&`, `--`, `~~`) or
        // open a nested class.
        for c in (0u8..0x80).map(char::from) {
            classes.push(vec![(c, c)]);
            classes.push(vec![(c, '~')]);
            classes.push(vec![('\0', c)]);
            for op in ['&', '-', '~', '[', ']', '^', '\\'] {
                if c != op {
                    classes.push(vec![(c, c), (op, op)]);
                    classes.push(vec![(op, op), (c, c)]);
                }
            }
        }
        classes.push(vec![(' ', '!'), ('#', '['), (']', '\u{10FFFF}')]);
        classes.push(vec![('\t', '\n'), ('\r', '\r'), (' ', ' ')]);
        classes.push(vec![('é', 'é'), ('\u{F0000}', '\u{F0010}')]);
        for ranges in classes {
            let class =
                ClassUnicode::new(ranges.iter().map(|&(a, b)| ClassUnicodeRange::new(a, b)));
            let hir = Hir::class(Class::Unicode(class));
            let text = regex_text(&hir).unwrap();
            assert_eq!(parse(&text), hir, "{ranges:?} printed as {text}");
            // Inside a sequence and repeated, as pieces print them.
            let seq = Hir::concat(vec![Hir::literal("a-".as_bytes()), hir.clone()]);
            let text = regex_text(&seq).unwrap();
            assert_eq!(parse(&text), seq, "{ranges:?} printed as {text}");
        }
    }

    #[test]
    fn errors_name_what() {
        let e = split(
            &format!("a{}", p(3)),
            &["x".into()],
            &PieceLimits::default(),
        )
        .unwrap_err();
        assert!(matches!(e, GrammarError::InvalidSpec(_)), "{e}");
        assert!(split("(", &[], &PieceLimits::default()).is_err());
        let e = split(
            &format!("{}{{20000}}", p(0)),
            &["x".into()],
            &PieceLimits::default(),
        )
        .unwrap_err();
        assert!(matches!(e, GrammarError::LimitExceeded { .. }), "{e}");
        // Endless recursion is not productive.
        let g = split(
            &p(0).to_string(),
            &[format!("a{}", p(0))],
            &PieceLimits::default(),
        )
        .unwrap();
        assert!(!g.productive()[0]);
    }

    /// Long repetitions in blocks: every count in and around the bounds,
    /// with fixed blocks (`min` of a block or more), a remainder, no upper
    /// bound, a body of two lengths, captures, a continuation with a
    /// reference, and a repetition with no sequence around it.
    #[test]
    fn long_repetitions_in_blocks_keep_their_counts() {
        let limits = PieceLimits {
            // Three copies of `a|bc` (weight 3) a block.
            block_weight: Some(9),
            ..PieceLimits::default()
        };
        for (min, max) in [
            (0, Some(6)),
            (0, Some(7)),
            (0, Some(11)),
            (1, Some(9)),
            (2, Some(14)),
            (4, Some(10)),
            (7, Some(16)),
            (6, None),
            (7, None),
            (4, Some(6)),
        ] {
            let bound = max.map_or(String::new(), |m| m.to_string());
            let root = format!(r#"<"((?:a|bc){{{min},{bound}}})"{}>"#, p(0));
            let g = split(&root, &["r".into()], &limits).unwrap();
            assert!(g.productive().iter().all(|&p| p));
            let plain = split(&root, &["r".into()], &PieceLimits::default()).unwrap();
            if max.is_some_and(|m| m >= 6) || min >= 6 {
                assert_ne!(g, plain, "{root}: not split");
            }
            for n in 0..max.unwrap_or(min + 4) + 3 {
                let body: String = ["a", "bc"].iter().cycle().take(n).copied().collect();
                let ok = n >= min && max.is_none_or(|m| n <= m);
                let text = format!(r#"<"{body}"r>"#);
                assert_eq!(accepts(&g, text.as_bytes()), ok, "{root} on {text}");
                assert_eq!(accepts(&plain, text.as_bytes()), ok, "{root} on {text}");
                assert!(!accepts(&g, format!(r#"<"{body}r>"#).as_bytes()));
            }
        }
        // Alone, inside an alternation (no continuation), and with a class
        // that holds the placeholders among other characters (plain).
        for root in ["a{2,30}", "x(?:a{2,30}|b)y", "x[^y]{2,30}y"] {
            let g = split(root, &[], &limits).unwrap();
            let plain = split(root, &[], &PieceLimits::default()).unwrap();
            assert!(g.rules.len() > plain.rules.len(), "{root}: not split");
            let re = Regex::new(&format!("^(?:{root})$")).unwrap();
            for n in 0..34 {
                let a = "a".repeat(n);
                for text in [a.clone(), format!("x{a}y"), "xby".to_string()] {
                    assert_eq!(
                        accepts(&g, text.as_bytes()),
                        re.is_match(&text),
                        "{root} on {text}"
                    );
                }
            }
        }
        // Repetitions around references keep their own rules.
        let around = format!("(?:{}){{0,9}}", p(0));
        let g = split(&around, &["r".into()], &limits).unwrap();
        assert_eq!(
            g,
            split(&around, &["r".into()], &PieceLimits::default()).unwrap()
        );
    }

    /// Limits of a split that counts long repetitions (blocks of weight 9).
    fn counting_limits() -> PieceLimits {
        PieceLimits {
            block_weight: Some(9),
            counted: Some(DfaLimits {
                nfa_size_limit: 1 << 20,
                dfa_size_limit: 1 << 20,
                determinize_size_limit: 1 << 20,
                max_dfa_states: 1000,
                minimize: false,
            }),
            ..PieceLimits::default()
        }
    }

    /// Long repetitions counted: one counted piece with its closing quote
    /// where the body can be counted, blocks where it cannot (a copy that
    /// may go on where another ends) or has no upper bound; every count in
    /// and around the bounds keeps its answer.
    #[test]
    fn long_repetitions_counted_keep_their_counts() {
        let limits = counting_limits();
        let counted = |g: &PieceGrammar| {
            g.rules
                .iter()
                .flatten()
                .flatten()
                .filter(|p| matches!(p, Piece::Counted { .. }))
                .count()
        };
        for (body, min, max, pieces) in [
            ("a|bc", 0, Some(6), 1),
            ("a|bc", 2, Some(14), 1),
            ("a|bc", 7, Some(16), 1),
            ("a|bc", 7, None, 0),
            ("a|ab", 1, Some(9), 0),
        ] {
            let bound = max.map_or(String::new(), |m| m.to_string());
            let root = format!(r#"<"((?:{body}){{{min},{bound}}})"{}>"#, p(0));
            let g = split(&root, &["r".into()], &limits).unwrap();
            assert_eq!(counted(&g), pieces, "{root}: {g:?}");
            let copy: Vec<&str> = body.split('|').collect();
            for n in 0..max.unwrap_or(min + 4) + 3 {
                let text: String = copy.iter().cycle().take(n).copied().collect();
                let ok = n >= min && max.is_none_or(|m| n <= m);
                let text = format!(r#"<"{text}"r>"#);
                assert_eq!(accepts(&g, text.as_bytes()), ok, "{root} on {text}");
            }
        }
    }

    /// A counted repetition that comes again (the same `maxLength` string
    /// in many objects) is built once: its pieces share one automaton,
    /// and a repetition of another count gets its own.
    #[test]
    fn the_same_counted_repetition_is_built_once() {
        let limits = counting_limits();
        let string = |max: u32| format!(r#""(?:a|bc){{0,{max}}}""#);
        let root = format!("<{}{}{}{}>", string(6), p(0), string(8), p(0));
        let rules = vec![string(6)];
        let g = split(&root, &rules, &limits).unwrap();
        let counted: Vec<(&String, &Arc<LazyCounted>)> = (g.rules.iter().flatten().flatten())
            .filter_map(|p| match p {
                Piece::Counted {
                    regex, automaton, ..
                } => Some((regex, automaton)),
                _ => None,
            })
            .collect();
        assert_eq!(counted.len(), 3, "{g:?}");
        let accepts = |a: &LazyCounted, text: &str| {
            let end = text.bytes().fold(a.start(), |q, b| a.next(q, b));
            a.is_accepting(end)
        };
        let mut six = Vec::new();
        for (regex, automaton) in &counted {
            let max = if regex.contains("{0,6}") { 6 } else { 8 };
            if max == 6 {
                six.push(*automaton);
            }
            // Each piece's automaton counts its own regex's copies.
            for n in 0..=10 {
                let text = format!("{}\"", "a".repeat(n));
                assert_eq!(accepts(automaton, &text), n <= max, "{regex} on {text}");
            }
        }
        assert_eq!(six.len(), 2, "{g:?}");
        assert!(Arc::ptr_eq(six[0], six[1]), "built twice");
    }

    /// The same language as from_regex + link, on random sentences of that
    /// grammar and near misses.
    #[test]
    fn the_same_language_as_the_linked_grammar() {
        let root = format!(r"\{{(?:k{0}(?:,k{0}){{0,3}})?\}}|{1}+|n", p(0), p(1));
        let rules = vec![
            format!(r"\[(?:{0}(?:,{0})*)?\]|[0-9]{{1,2}}|{1}", p(0), p(1)),
            format!("t|f|<{}>", p(0)),
        ];
        let g = split(&root, &rules, &PieceLimits::default()).unwrap();
        let limits = GbnfLimits::default();
        let linked = {
            let r = compose::from_regex(&root, &limits).unwrap();
            let pieces: Vec<_> = rules
                .iter()
                .map(|t| compose::from_regex(t, &limits).unwrap())
                .collect();
            let named: Vec<(char, &crate::Grammar)> =
                pieces.iter().enumerate().map(|(i, g)| (p(i), g)).collect();
            compose::link(&r, &named, &limits).unwrap()
        };
        let mut r = SplitMix64(5);
        let mut positive = 0;
        for i in 0..300 {
            let sentence = random_sentence(&linked, &mut r, 12);
            let text = if i % 2 == 0 {
                sentence
            } else {
                mutate(&sentence, b"{}[],k0123456789tfn<>", &mut r)
            };
            if text.len() > 24 {
                continue;
            }
            let expected = linked.accepts(&text);
            positive += usize::from(expected);
            assert_eq!(
                accepts(&g, &text),
                expected,
                "{}",
                String::from_utf8_lossy(&text)
            );
        }
        assert!(positive > 50);
    }
}
