//! From a [`Grammar`] (or a regex, a choice list, the builtin JSON grammar)
//! to the flat [`Cfg`] the parser walks.
//!
//! The regular parts of the grammar become lexemes: every rule whose
//! language is regular ([`Grammar::rule_regexes`]) and small enough for
//! [`EarleyConfig::max_lexeme_states`] (by its measure, or its DFA when
//! lexemes are built eagerly) is one lexeme, and runs of
//! consecutive regular symbols in an alternative (`"{" ws`, `string ws ":"
//! ws`) are merged into one. What is left are the rules that really
//! recurse; the parser only works at their boundaries.

use hashbrown::HashMap;
use std::sync::Arc;

use regex_syntax::hir::Hir;
use tokensieve_automata::LazyCounted;
use tokensieve_automata::LazyDfa;
use tokensieve_automata::STAND_IN_MARK;
use tokensieve_core::TokenTrie;
use tokensieve_core::{CancelToken, GrammarError};
use tokensieve_grammar::pieces::{
    Piece as PieceKind, PieceGrammar, Verbatim, regex_text, weight_at_most,
};
use tokensieve_grammar::regular::{
    Measure, RuleHirs, terminal_hir, terminal_measure, terminal_regex,
};
use tokensieve_grammar::{Grammar, RegularLimits, RuleId, Symbol};

use crate::config::EarleyConfig;
use crate::lexeme::{
    LexDfa, LexVocab, Lexeme, Making, ParsedTexts, Recipe, Skeletons, SourcePart, TreeSource,
    VocabSkeleton, counted_lexeme, intersection_lexeme, lazy_lexeme, lexeme, parts_dfa,
};
use crate::lift::lift_repetitions;
use crate::parser::{Cfg, Sym};

/// Regex [`weight`](tokensieve_grammar::pieces::weight) (about NFA
/// positions) a lexeme DFA state usually takes at most: a regex heavier
/// than this much a state of its limit is taken apart without trying it
/// whole (see [`Lowering::regex_or_parts`]).
const WEIGHT_A_STATE: usize = 4;

/// Builds the flat grammar; shared by every spec kind.
pub(crate) struct Lowering<'a> {
    config: &'a EarleyConfig,
    /// What this grammar's lexemes share (the trie, and the skeletons of
    /// their string-body walks).
    vocab: LexVocab,
    cancel: &'a CancelToken,
    syms: Vec<Sym>,
    alts: Vec<Vec<u32>>,
    nullable: Vec<bool>,
    lexemes: Vec<Arc<Lexeme>>,
    lexeme_ids: HashMap<String, u32>,
    lexeme_states: usize,
    /// Every lexeme this compile built or tried, by key and state limit:
    /// the rule test and the lexeme use one build even when lexemes are
    /// not shared across compiles.
    built: HashMap<(String, usize), Result<Arc<Lexeme>, GrammarError>>,
    /// Where each regex of a lazily lowered grammar comes from.
    sources: HashMap<String, Source>,
    /// The regex texts this grammar's deferred lexemes parse, shared.
    texts: Arc<ParsedTexts>,
}

/// What a regex piece of a grammar is: a terminal or a regular rule (its
/// syntax tree is built from that, and only when its lexeme is new).
#[derive(Clone)]
enum Source {
    Terminal(Symbol),
    Rule(RuleId),
}

/// Deepest syntax tree a lazily built lexeme may have (as regex-syntax's
/// nest limit for a parsed regex: NFA compilation recurses on it).
const MAX_TREE_DEPTH: u32 = 256;

/// A regex piece of a run, by what it is given as.
enum Part {
    Tree(Arc<Hir>),
    /// A [`PieceKind::Verbatim`]'s text (the run's regex), not parsed.
    Text(Verbatim),
}

impl Part {
    fn measure(&self) -> Measure {
        match self {
            Part::Tree(tree) => Measure::of(tree),
            Part::Text(v) => Measure {
                weight: v.weight,
                depth: v.depth,
            },
        }
    }
}

/// What a lazily built lexeme is made from, as the lowering has it.
enum Unmade {
    Tree(Arc<Hir>),
    /// Parts one after the other, some regex text not parsed yet (parsed
    /// when made).
    Parts {
        parts: Vec<SourcePart>,
        weight: u64,
        nullable: bool,
    },
}

/// What a grammar symbol lowers to before runs are merged.
enum Piece {
    Regular(String),
    Rule(RuleId),
}

impl<'a> Lowering<'a> {
    pub(crate) fn new(
        config: &'a EarleyConfig,
        trie: &'a Arc<TokenTrie>,
        skeleton: &VocabSkeleton,
        words: usize,
        cancel: &'a CancelToken,
    ) -> Self {
        Lowering {
            config,
            vocab: LexVocab {
                trie: trie.clone(),
                words,
                skeletons: Arc::new(Skeletons::starting_with(skeleton, config.shared_lexemes)),
            },
            cancel,
            syms: Vec::new(),
            alts: Vec::new(),
            nullable: Vec::new(),
            lexemes: Vec::new(),
            lexeme_ids: HashMap::new(),
            lexeme_states: 0,
            built: HashMap::new(),
            sources: HashMap::new(),
            texts: Arc::default(),
        }
    }

    /// A grammar of one lexeme (a `regex` or `choice` constraint), with the
    /// whole-constraint DFA limit.
    pub(crate) fn regex(mut self, regex: &str) -> Result<Cfg, GrammarError> {
        let l = self.lexeme_id(regex, self.config.max_dfa_states)?;
        let nullable = self.lexemes[l as usize]
            .dfa()
            .is_accepting(self.lexemes[l as usize].start());
        Ok(self.finish(vec![Sym::Lex(l)], nullable))
    }

    /// A context-free grammar.
    pub(crate) fn grammar(mut self, g: &Grammar) -> Result<Cfg, GrammarError> {
        // Rules that go on alike fuse into lexemes whose states past their
        // first bytes read the same texts: they are found by those texts.
        // A JSON Schema's pieces are not (their repeats are found by the
        // walks of string bodies and whitespace, and keys for the rest
        // cost more than they found). The skeletons are the lowering's
        // own, which no lexeme holds yet.
        if let Some(skeletons) = Arc::get_mut(&mut self.vocab.skeletons) {
            skeletons.language_keys = true;
        }
        let regexes = g.rule_regexes(&RegularLimits {
            max_regex_len: self.config.max_lexeme_regex_len,
            ..RegularLimits::default()
        });
        let g_nullable = g.nullable();
        let mut lexifiable: HashMap<RuleId, bool> = HashMap::new();
        // Lazily built lexemes start from syntax trees made from the rules
        // themselves, not from parsing their (repetitive) regex text.
        let mut trees = RuleHirs::new(g, &regexes);
        let mut rule_ids: HashMap<RuleId, u32> = HashMap::new();
        let mut queue: Vec<RuleId> = Vec::new();

        let root = g.root();
        let root_syms = if self.is_lexeme(&regexes, &mut trees, &mut lexifiable, root)? {
            let regex = regexes[root.index()]
                .as_deref()
                .expect("lexifiable rules are regular");
            self.sources.insert(regex.to_string(), Source::Rule(root));
            let mut run = vec![regex.to_string()];
            self.flush(&mut run, &mut trees)?;
            vec![self.syms.pop().expect("a lexeme for the root")]
        } else {
            vec![Sym::Rule(self.rule_id(
                root,
                &mut rule_ids,
                &mut queue,
                &g_nullable,
            ))]
        };
        while let Some(rule) = queue.pop() {
            self.cancel.check()?;
            let id = rule_ids[&rule];
            let mut starts = Vec::new();
            for alt in &g.rule(rule).alternatives {
                let mut pieces = Vec::with_capacity(alt.len());
                for symbol in alt {
                    pieces.push(match symbol {
                        Symbol::NonTerminal(t) => {
                            if self.is_lexeme(&regexes, &mut trees, &mut lexifiable, *t)? {
                                let regex = regexes[t.index()].clone().expect("regular");
                                self.sources
                                    .entry(regex.clone())
                                    .or_insert(Source::Rule(*t));
                                Piece::Regular(regex)
                            } else {
                                Piece::Rule(*t)
                            }
                        }
                        terminal => {
                            let regex = terminal_regex(terminal).expect("a terminal");
                            self.sources
                                .entry(regex.clone())
                                .or_insert_with(|| Source::Terminal(terminal.clone()));
                            Piece::Regular(regex)
                        }
                    });
                }
                starts.push(self.syms.len() as u32);
                let mut run: Vec<String> = Vec::new();
                for piece in pieces {
                    match piece {
                        Piece::Regular(r) => run.push(r),
                        Piece::Rule(t) => {
                            self.flush(&mut run, &mut trees)?;
                            let sub = self.rule_id(t, &mut rule_ids, &mut queue, &g_nullable);
                            self.syms.push(Sym::Rule(sub));
                        }
                    }
                }
                self.flush(&mut run, &mut trees)?;
                self.syms.push(Sym::End(id));
            }
            self.alts[id as usize] = starts;
        }
        let root_nullable = g_nullable[root.index()];
        Ok(self.finish(root_syms, root_nullable))
    }

    /// A grammar of regexes and rule references (the context-free JSON
    /// Schema lowering): each regex piece is a lexeme as it stands, runs of
    /// them merged; piece rule `i` is parser rule `i`. A piece too big for
    /// one lexeme under the whole-constraint limit,
    /// [`EarleyConfig::max_dfa_states`], is an error (the caller may try
    /// another form of the grammar), or with `split`, is taken apart
    /// ([`PieceGrammar::fit`]) only as far as needed: a big object's
    /// members become rules while each string or number in it stays one
    /// lexeme. With [`EarleyConfig::lazy_lexemes`] (the default) "too big"
    /// is read from a piece's syntax tree ([`Lowering::fits_lazily_in`])
    /// and no DFA is built here; without, from building its DFA.
    pub(crate) fn pieces(mut self, g: &PieceGrammar, split: bool) -> Result<Cfg, GrammarError> {
        // Rules from `helpers` on are helpers of pieces taken apart, added
        // to `extra` (where `g`'s own rules are left empty, not copied):
        // their pieces get the lexeme limit, as the parts of those pieces
        // do.
        let helpers = g.rules.len();
        let mut extra = PieceGrammar {
            rules: vec![Vec::new(); helpers],
        };
        let mut i = 0;
        while i < extra.rules.len() {
            let max = if i < helpers {
                self.config.max_dfa_states
            } else {
                self.config
                    .max_lexeme_states
                    .min(self.config.max_dfa_states)
            };
            self.cancel.check()?;
            if self.alts.len() < extra.rules.len() {
                self.alts.resize(extra.rules.len(), Vec::new());
            }
            // A helper is taken out while its pieces are lowered (more
            // helpers may be added meanwhile) and put back for `nullable`.
            let helper = (i >= helpers).then(|| std::mem::take(&mut extra.rules[i]));
            let alternatives = match &helper {
                Some(helper) => helper,
                None => &g.rules[i],
            };
            let mut starts = Vec::with_capacity(alternatives.len());
            for alt in alternatives {
                starts.push(self.syms.len() as u32);
                let mut run: Vec<(&str, Part)> = Vec::new();
                for piece in alt {
                    match piece {
                        PieceKind::Regex { regex, tree, .. } => {
                            run.push((regex, Part::Tree(tree.clone())));
                        }
                        PieceKind::Verbatim { regex, verbatim } => {
                            run.push((regex, Part::Text(verbatim.clone())));
                        }
                        PieceKind::Rule(t) => {
                            self.flush_pieces(&mut run, max, i < helpers, split, &mut extra)?;
                            self.syms.push(Sym::Rule(*t as u32));
                        }
                        PieceKind::Intersection { regexes, .. } => {
                            self.flush_pieces(&mut run, max, i < helpers, split, &mut extra)?;
                            let l = self.intersection_id(regexes, self.config.max_dfa_states)?;
                            self.syms.push(Sym::Lex(l));
                        }
                        PieceKind::Counted {
                            regex, automaton, ..
                        } => {
                            self.flush_pieces(&mut run, max, i < helpers, split, &mut extra)?;
                            let l = self.counted_id(regex, automaton)?;
                            self.syms.push(Sym::Lex(l));
                        }
                    }
                }
                self.flush_pieces(&mut run, max, i < helpers, split, &mut extra)?;
                self.syms.push(Sym::End(i as u32));
            }
            if self.alts.len() < extra.rules.len() {
                self.alts.resize(extra.rules.len(), Vec::new());
            }
            self.alts[i] = starts;
            if let Some(helper) = helper {
                extra.rules[i] = helper;
            }
            i += 1;
        }
        self.nullable = if extra.rules.len() == helpers {
            g.nullable()
        } else {
            extra.rules[..helpers].clone_from_slice(&g.rules);
            extra.nullable()
        };
        let root_nullable = self.nullable[0];
        Ok(self.finish(vec![Sym::Rule(0)], root_nullable))
    }

    /// [`Lowering::flush_limit`] for a piece grammar: a run of regexes
    /// joined into one lexeme when `join` and they fit, else each one
    /// alone, taken apart (adding helper rules to `g`) where too big and
    /// `split` says so.
    fn flush_pieces(
        &mut self,
        run: &mut Vec<(&str, Part)>,
        max: usize,
        join: bool,
        split: bool,
        g: &mut PieceGrammar,
    ) -> Result<(), GrammarError> {
        if self.config.lazy_lexemes {
            return self.flush_pieces_lazy(run, max, join, split, g);
        }
        let mut run: Vec<String> = run.drain(..).map(|(regex, _)| regex.to_owned()).collect();
        if !split {
            return self.flush_limit(&mut run, max);
        }
        // Not in helper rules: their regexes are the parts of one too big.
        if join && self.joined(&mut run, max)? {
            return Ok(());
        }
        for regex in run {
            self.regex_or_parts(&regex, max, g)?;
        }
        Ok(())
    }

    /// [`Lowering::flush_pieces`] with lazily built lexemes, decided by
    /// the pieces' measures ([`Lowering::fits_lazily_in`]) instead of by
    /// building their DFAs: the run joined into one lexeme when `join` and
    /// it is light enough, else one lexeme a piece; a piece too heavy is
    /// taken apart ([`PieceGrammar::fit_tree`]) with `split`, and is a
    /// [`GrammarError::LimitExceeded`] without.
    fn flush_pieces_lazy(
        &mut self,
        run: &mut Vec<(&str, Part)>,
        max: usize,
        join: bool,
        split: bool,
        g: &mut PieceGrammar,
    ) -> Result<(), GrammarError> {
        if run.is_empty() {
            return Ok(());
        }
        let measures: Vec<Measure> = run.iter().map(|(_, part)| part.measure()).collect();
        let joined = Measure::join(measures.clone());
        if join && run.len() > 1 && self.fits_lazily_in(joined, max) {
            let key = joined_key(run.iter().map(|(r, _)| *r));
            let id = self.lazy_id(&key, Some(joined.weight), || {
                // The parts as they are (no tree of the join copied from
                // them); texts parsed when made, each once for every
                // lexeme that holds it. Trees are checked now, as a
                // lexeme of one tree is.
                let mut nullable = true;
                for (_, part) in run.iter() {
                    nullable &= match part {
                        Part::Tree(tree) => {
                            LazyDfa::check_tree(tree)?;
                            LazyDfa::matches_empty(tree)
                        }
                        Part::Text(v) => v.nullable,
                    };
                }
                let parts = run
                    .iter()
                    .map(|(regex, part)| match part {
                        Part::Tree(tree) => SourcePart::Tree(tree.clone()),
                        Part::Text(v) => SourcePart::of_text(regex, v),
                    })
                    .collect();
                Ok(Unmade::Parts {
                    parts,
                    weight: joined.weight,
                    nullable,
                })
            })?;
            self.syms.push(Sym::Lex(id));
            run.clear();
            return Ok(());
        }
        for ((regex, part), m) in std::mem::take(run).into_iter().zip(measures) {
            if self.fits_lazily_in(m, max) {
                let id = self.lazy_id(regex, Some(m.weight), || {
                    Ok(match part {
                        Part::Tree(tree) => Unmade::Tree(tree),
                        Part::Text(v) => Unmade::Parts {
                            parts: vec![SourcePart::of_text(regex, &v)],
                            weight: v.weight,
                            nullable: v.nullable,
                        },
                    })
                })?;
                self.syms.push(Sym::Lex(id));
            } else if split {
                let tree = match part {
                    Part::Tree(tree) => tree,
                    // Keys left unwritten are written now.
                    Part::Text(Verbatim {
                        keys: Some(keys), ..
                    }) if regex.starts_with(STAND_IN_MARK) => Arc::new(tokensieve_automata::parse(
                        &tokensieve_json_schema::other_keys_regex(&keys),
                    )?),
                    Part::Text(_) => Arc::new(tokensieve_automata::parse(regex)?),
                };
                self.lazy_parts(&tree, max, g)?;
            } else {
                return Err(GrammarError::LimitExceeded {
                    what: format!(
                        "a regex piece of weight {} and depth {} for one lexeme",
                        m.weight, m.depth
                    ),
                    limit: max,
                    knob: "max_dfa_states".into(),
                });
            }
        }
        Ok(())
    }

    /// A piece too heavy for one lazily built lexeme, taken apart only as
    /// far as needed ([`PieceGrammar::fit_tree`]): its parts get the lexeme
    /// limit, as in [`Lowering::regex_or_parts`].
    fn lazy_parts(
        &mut self,
        tree: &Hir,
        max: usize,
        g: &mut PieceGrammar,
    ) -> Result<(), GrammarError> {
        let part_max = self.config.max_lexeme_states.min(max);
        let pieces = g.fit_tree(tree.clone(), &mut |hir, depth| {
            let max = if depth == 0 { max } else { part_max };
            // Parts too heavy are measured only as far as it takes to tell.
            let fits = Measure::within(hir, self.lazy_weight_bound(max) as u64)
                .is_some_and(|m| self.fits_lazily_in(m, max));
            if !fits {
                return Ok(None);
            }
            regex_text(hir).map(Some)
        })?;
        self.push_parts(pieces)
    }

    /// The parts of a regex taken apart, as symbols: a lexeme for each
    /// regex part (made lazily from its tree, unless fitting built it
    /// already), a rule reference for each helper rule.
    fn push_parts(&mut self, pieces: Vec<PieceKind>) -> Result<(), GrammarError> {
        for piece in pieces {
            match piece {
                PieceKind::Regex { regex, tree, .. } => {
                    let id = self.lazy_id(&regex, None, || Ok(Unmade::Tree(tree)))?;
                    self.syms.push(Sym::Lex(id));
                }
                PieceKind::Rule(t) => self.syms.push(Sym::Rule(t as u32)),
                PieceKind::Intersection { .. }
                | PieceKind::Counted { .. }
                | PieceKind::Verbatim { .. } => {
                    unreachable!("a regex is taken apart into regexes and rules")
                }
            }
        }
        Ok(())
    }

    /// `regex` as one lexeme of at most `max` states, or taken apart where
    /// it is too big ([`PieceGrammar::fit`]); its parts get the lexeme
    /// limit, [`EarleyConfig::max_lexeme_states`], as a grammar's regular
    /// rules do (many small lexemes build faster than a few big ones).
    fn regex_or_parts(
        &mut self,
        regex: &str,
        max: usize,
        g: &mut PieceGrammar,
    ) -> Result<(), GrammarError> {
        let part_max = self.config.max_lexeme_states.min(max);
        let pieces = g.fit(regex, &mut |hir, depth| {
            let max = if depth == 0 { max } else { part_max };
            // A regex much bigger than `max` states is not tried: its
            // failure would cost a determinization up to the limit (and
            // printing a long text).
            let cap = (max * WEIGHT_A_STATE) as u64;
            if weight_at_most(hir, cap) > cap {
                return Ok(None);
            }
            let text = regex_text(hir)?;
            if text.len() > self.config.max_lexeme_regex_len {
                return Ok(None);
            }
            match self.lexeme_id(&text, max) {
                Ok(_) => Ok(Some(text)),
                Err(GrammarError::LimitExceeded { .. }) => Ok(None),
                Err(other) => Err(other),
            }
        })?;
        self.push_parts(pieces)
    }

    /// Whether rule `t` becomes one lexeme: regular, and its DFA small.
    fn is_lexeme(
        &mut self,
        regexes: &[Option<String>],
        trees: &mut RuleHirs<'_>,
        memo: &mut HashMap<RuleId, bool>,
        t: RuleId,
    ) -> Result<bool, GrammarError> {
        if let Some(&known) = memo.get(&t) {
            return Ok(known);
        }
        let ok = match &regexes[t.index()] {
            None => false,
            Some(_) if self.config.lazy_lexemes => {
                self.cancel.check()?;
                trees.measure(t).is_some_and(|m| self.fits_lazily(m))
            }
            Some(regex) => {
                self.cancel.check()?;
                match self.build(regex, None, self.config.max_lexeme_states) {
                    Ok(_) => true,
                    // The regex is ours, not the user's: one that is too big
                    // (or nests too deep for the regex parser) only means
                    // the rule stays a grammar rule.
                    Err(GrammarError::Cancelled) => return Err(GrammarError::Cancelled),
                    Err(_) => false,
                }
            }
        };
        memo.insert(t, ok);
        Ok(ok)
    }

    fn rule_id(
        &mut self,
        rule: RuleId,
        ids: &mut HashMap<RuleId, u32>,
        queue: &mut Vec<RuleId>,
        g_nullable: &[bool],
    ) -> u32 {
        *ids.entry(rule).or_insert_with(|| {
            queue.push(rule);
            self.alts.push(Vec::new());
            self.nullable.push(g_nullable[rule.index()]);
            self.alts.len() as u32 - 1
        })
    }

    /// Emits a run of regular pieces as one lexeme, or one lexeme per piece
    /// when together they exceed the lexeme limits.
    fn flush(
        &mut self,
        run: &mut Vec<String>,
        trees: &mut RuleHirs<'_>,
    ) -> Result<(), GrammarError> {
        if self.config.lazy_lexemes {
            return self.flush_lazy(run, trees);
        }
        self.flush_limit(run, self.config.max_lexeme_states)
    }

    /// [`Lowering::flush`] with lazily built lexemes: the run joined into
    /// one when it is light enough ([`Lowering::fits_lazily`]), else one
    /// lexeme per piece. A syntax tree is built only for a lexeme that is
    /// new to the process.
    fn flush_lazy(
        &mut self,
        run: &mut Vec<String>,
        trees: &mut RuleHirs<'_>,
    ) -> Result<(), GrammarError> {
        let sources: Vec<Source> = run.iter().map(|r| self.sources[r].clone()).collect();
        if run.len() > 1 {
            let key = joined_key(run.iter().map(String::as_str));
            let measures: Option<Vec<Measure>> =
                sources.iter().map(|s| measure(s, trees)).collect();
            let joined = measures.map(Measure::join);
            if let Some(m) = joined.filter(|&m| self.fits_lazily(m)) {
                let id = self.lazy_id(&key, Some(m.weight), || {
                    let parts = sources
                        .iter()
                        .map(|s| tree(s, trees))
                        .collect::<Result<Vec<Hir>, GrammarError>>()?;
                    Ok(Unmade::Tree(Arc::new(Hir::concat(parts))))
                })?;
                self.syms.push(Sym::Lex(id));
                run.clear();
                return Ok(());
            }
        }
        for (r, source) in std::mem::take(run).into_iter().zip(sources) {
            // Known already: `is_lexeme` measured each rule (kept).
            let weight = measure(&source, trees).map(|m| m.weight);
            let id = self.lazy_id(&r, weight, || {
                tree(&source, trees).map(|t| Unmade::Tree(Arc::new(t)))
            })?;
            self.syms.push(Sym::Lex(id));
        }
        Ok(())
    }

    /// Whether a grammar's tree is light enough for one lazily built
    /// lexeme: [`Lowering::fits_lazily_in`] `max_lexeme_states`.
    fn fits_lazily(&self, m: Measure) -> bool {
        self.fits_lazily_in(m, self.config.max_lexeme_states)
    }

    /// Whether a tree is light enough for one lazily built lexeme where an
    /// eager one would get `max` states: about [`WEIGHT_A_STATE`] × `max`
    /// NFA states at most, and no more than `max_dfa_states` (the lazy
    /// DFA's own limit: a counted repetition has about as many DFA states
    /// as NFA states), no deeper than [`MAX_TREE_DEPTH`].
    fn fits_lazily_in(&self, m: Measure, max: usize) -> bool {
        m.weight <= self.lazy_weight_bound(max) as u64 && m.depth <= MAX_TREE_DEPTH
    }

    /// The heaviest tree [`Lowering::fits_lazily_in`] lets into a lexeme
    /// of at most `max` states.
    fn lazy_weight_bound(&self, max: usize) -> usize {
        max.saturating_mul(WEIGHT_A_STATE)
            .min(self.config.max_dfa_states)
    }

    /// The lazily built lexeme of the regex `key`, its tree made by `tree`
    /// if neither this compile nor the process has the lexeme yet (or the
    /// texts left unparsed, [`Unmade::Parts`]); its NFA made now, or
    /// with [`EarleyConfig::defer_lexemes`] when a walk first enters it.
    /// `weight` is the tree's measured weight where the caller has it.
    fn lazy_id(
        &mut self,
        key: &str,
        weight: Option<u64>,
        tree: impl FnOnce() -> Result<Unmade, GrammarError>,
    ) -> Result<u32, GrammarError> {
        if let Some(&id) = self.lexeme_ids.get(key) {
            return Ok(id);
        }
        self.cancel.check()?;
        let limits = self.config.lazy_limits();
        let defer = self.config.defer_lexemes;
        let l = lazy_lexeme(
            key,
            &self.vocab,
            &limits,
            self.config.shared_lexemes,
            || {
                let tree = match tree()? {
                    Unmade::Tree(tree) => tree,
                    Unmade::Parts {
                        parts,
                        weight,
                        nullable,
                    } => {
                        if !defer {
                            return parts_dfa(&parts, &self.texts, &limits)
                                .map(|d| Making::Now(LexDfa::Lazy(d)));
                        }
                        return Ok(Making::Later(Recipe {
                            source: TreeSource::Parts(parts, self.texts.clone()),
                            limits,
                            weight,
                            nullable,
                        }));
                    }
                };
                if !defer {
                    return LazyDfa::from_hir(&tree, &limits).map(|d| Making::Now(LexDfa::Lazy(d)));
                }
                LazyDfa::check_tree(&tree)?;
                let weight = weight.unwrap_or_else(|| Measure::of(&tree).weight);
                let nullable = LazyDfa::matches_empty(&tree);
                Ok(Making::Later(Recipe {
                    source: TreeSource::Tree(tree),
                    limits,
                    weight,
                    nullable,
                }))
            },
        )?;
        self.add_lexeme(key.to_string(), l)
    }

    /// [`Lowering::flush`] with `max` DFA states a lexeme.
    fn flush_limit(&mut self, run: &mut Vec<String>, max: usize) -> Result<(), GrammarError> {
        if run.is_empty() {
            return Ok(());
        }
        if self.joined(run, max)? {
            return Ok(());
        }
        for r in run.drain(..) {
            let l = self.lexeme_id(&r, max)?;
            self.syms.push(Sym::Lex(l));
        }
        Ok(())
    }

    /// A run of two or more regexes as one lexeme, when together they fit
    /// (then the run is emptied and `true`); too big or too deep as one
    /// regex, `false`, and the run is left to go piece by piece.
    fn joined(&mut self, run: &mut Vec<String>, max: usize) -> Result<bool, GrammarError> {
        if run.len() < 2 {
            return Ok(false);
        }
        let joined: String = run.iter().map(|r| format!("(?:{r})")).collect();
        if joined.len() > self.config.max_lexeme_regex_len {
            return Ok(false);
        }
        match self.lexeme_id(&joined, max) {
            Ok(l) => {
                self.syms.push(Sym::Lex(l));
                run.clear();
                Ok(true)
            }
            Err(GrammarError::Cancelled) => Err(GrammarError::Cancelled),
            Err(_) => Ok(false),
        }
    }

    fn lexeme_id(&mut self, regex: &str, max_states: usize) -> Result<u32, GrammarError> {
        if let Some(&id) = self.lexeme_ids.get(regex) {
            return Ok(id);
        }
        self.cancel.check()?;
        let l = self.build(regex, None, max_states)?;
        self.add_lexeme(regex.to_string(), l)
    }

    /// The lexeme of `key` (a regex, or the key of `intersection`'s
    /// regexes), built once per compile.
    fn build(
        &mut self,
        key: &str,
        intersection: Option<&[String]>,
        max_states: usize,
    ) -> Result<Arc<Lexeme>, GrammarError> {
        let slot = (key.to_string(), max_states);
        if let Some(known) = self.built.get(&slot) {
            return known.clone();
        }
        let limits = self.config.dfa_limits(max_states);
        let share = self.config.shared_lexemes;
        let l = match intersection {
            None => lexeme(key, &self.vocab, &limits, share),
            // Built lazily: the limits of a lazy lexeme.
            Some(regexes) => {
                intersection_lexeme(regexes, &self.vocab, &self.config.lazy_limits(), share)
            }
        };
        self.built.insert(slot, l.clone());
        l
    }

    /// The lexeme of the texts all of `regexes` match.
    fn intersection_id(
        &mut self,
        regexes: &[String],
        max_states: usize,
    ) -> Result<u32, GrammarError> {
        // NUL is in no regex we build: no regex's key.
        let key = format!("\0&{}", regexes.join("\0"));
        if let Some(&id) = self.lexeme_ids.get(&key) {
            return Ok(id);
        }
        self.cancel.check()?;
        let l = self.build(&key, Some(regexes), max_states)?;
        self.add_lexeme(key, l)
    }

    /// The lexeme of a counted repetition (its automaton made by the
    /// piece split).
    fn counted_id(
        &mut self,
        regex: &str,
        automaton: &Arc<LazyCounted>,
    ) -> Result<u32, GrammarError> {
        // NUL is in no regex we build: no regex's key.
        let key = format!("\0#{regex}");
        if let Some(&id) = self.lexeme_ids.get(&key) {
            return Ok(id);
        }
        self.cancel.check()?;
        let l = counted_lexeme(
            &key,
            automaton.clone(),
            &self.vocab,
            &self.config.lazy_limits(),
            self.config.shared_lexemes,
        )?;
        self.add_lexeme(key, l)
    }

    fn add_lexeme(&mut self, key: String, l: Arc<Lexeme>) -> Result<u32, GrammarError> {
        self.lexeme_states += l.compiled_states();
        if self.lexeme_states > self.config.max_total_lexeme_states {
            return Err(GrammarError::LimitExceeded {
                what: format!(
                    "the DFA states of this grammar's lexemes ({} so far)",
                    self.lexeme_states
                ),
                limit: self.config.max_total_lexeme_states,
                knob: "max_total_lexeme_states".into(),
            });
        }
        let id = self.lexemes.len() as u32;
        self.lexemes.push(l);
        self.lexeme_ids.insert(key, id);
        Ok(id)
    }

    /// Adds `START ::= root_syms` and returns the flat grammar.
    fn finish(mut self, root_syms: Vec<Sym>, root_nullable: bool) -> Cfg {
        let lexemes = &self.lexemes;
        lift_repetitions(&mut self.syms, &mut self.alts, &mut self.nullable, |l| {
            let lexeme = &lexemes[l as usize];
            lexeme.accepts(lexeme.start())
        });
        let start = self.alts.len() as u32;
        let start_pos = self.syms.len() as u32;
        self.syms.extend(root_syms);
        let accept_pos = self.syms.len() as u32;
        self.syms.push(Sym::End(start));
        self.alts.push(vec![start_pos]);
        self.nullable.push(root_nullable);
        let rules = self.alts.len();
        Cfg {
            syms: self.syms,
            alts: self.alts,
            nullable: self.nullable,
            lexemes: self.lexemes,
            start_pos,
            accept_pos,
            follow: Default::default(),
            predictions: (0..rules).map(|_| std::sync::OnceLock::new()).collect(),
        }
    }
}

/// The measure of a piece's tree (`None`: a rule that does not parse).
fn measure(source: &Source, trees: &mut RuleHirs<'_>) -> Option<Measure> {
    match source {
        Source::Terminal(symbol) => terminal_measure(symbol),
        Source::Rule(t) => trees.measure(*t),
    }
}

/// A piece's syntax tree.
fn tree(source: &Source, trees: &mut RuleHirs<'_>) -> Result<Hir, GrammarError> {
    match source {
        Source::Terminal(symbol) => Ok(terminal_hir(symbol).expect("a terminal")),
        Source::Rule(t) => trees.rule(*t).expect("a regular rule"),
    }
}

/// The builtin JSON grammar (ECMA-404) whose root is an object, with
/// whitespace between tokens as `ws` says (`""` for none).
pub(crate) fn json_object_gbnf(ws: &str, item_sep: &str, key_sep: &str) -> String {
    format!(
        r#"root   ::= object
value  ::= object | array | string | number | "true" | "false" | "null"
object ::= "{{" ws ( member ( {item_sep} ws member )* )? "}}"
member ::= string ws {key_sep} ws value ws
array  ::= "[" ws ( element ( {item_sep} ws element )* )? "]"
element ::= value ws
string ::= "\"" ( [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{{4}} ) )* "\""
number ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
ws     ::= {ws}
"#
    )
}

/// The key of a lexeme of `regexes` one after the other: each in a group.
fn joined_key<'r>(regexes: impl Iterator<Item = &'r str> + Clone) -> String {
    let mut key = String::with_capacity(regexes.clone().map(|r| r.len() + 4).sum());
    for r in regexes {
        key.push_str("(?:");
        key.push_str(r);
        key.push(')');
    }
    key
}
