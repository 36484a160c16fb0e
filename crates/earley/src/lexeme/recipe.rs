//! Recipes: what a lexeme's automaton is made from (a regex, syntax
//! trees, a counted repetition, an intersection), and the constructors
//! that make lexemes from them.

use super::*;

/// How a lexeme gets its automaton.
// Made once per lexeme and moved into it at once: boxing would only add
// an allocation.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Making {
    /// Made at compile.
    Now(LexDfa),
    /// A lazy DFA made from its syntax tree the first time a walk or a
    /// step enters the lexeme ([`Lexeme::dfa`]): a big schema has hundreds
    /// of lexemes, and an output enters a few of them.
    Later(Recipe),
}

/// What a deferred lazy DFA is made from.
pub(crate) struct Recipe {
    pub source: TreeSource,
    pub limits: DfaLimits,
    /// The tree's [`Measure`](tokensieve_grammar::regular::Measure)
    /// weight (about its NFA states).
    pub weight: u64,
    /// Whether the tree matches the empty text.
    pub nullable: bool,
}

/// Where a deferred lexeme's syntax tree comes from.
pub(crate) enum TreeSource {
    /// Built already.
    Tree(Arc<Hir>),
    /// Parts one after the other, some regex text not parsed yet (a
    /// [`tokensieve_grammar::pieces::Piece::Verbatim`]'s, alone or in a
    /// run of pieces joined with one): parsed when the lexeme is made,
    /// through `texts`, so a text two lexemes hold is parsed once; a
    /// regex that does not parse then makes a lexeme that fails.
    Parts(Vec<SourcePart>, Arc<ParsedTexts>),
}

/// A part of a [`TreeSource::Parts`].
#[derive(Clone)]
pub(crate) enum SourcePart {
    Tree(Arc<Hir>),
    Text(Arc<str>),
    /// An object's other keys, built from the names, never parsed.
    Keys(Arc<OtherKeys>),
}

impl Recipe {
    /// Where the parts are an object's other keys then syntax trees: the
    /// trees, printed (see [`Lexeme::after_keys`]). Only where no other
    /// part holds a quote (a colon and spaces after the keys, a comma and
    /// spaces before them): a loop that ends at a quote is then the keys'
    /// own, and past their quote only the trees after them are left (none
    /// before them reads a quote, so none of them is still going on).
    pub(super) fn after_keys(&self) -> Option<Arc<str>> {
        let TreeSource::Parts(parts, _) = &self.source else {
            return None;
        };
        let at = parts
            .iter()
            .position(|p| matches!(p, SourcePart::Keys(_)))?;
        let quoteless = |p: &SourcePart| matches!(p, SourcePart::Tree(t) if !holds_quote(t));
        if !parts[..at].iter().all(quoteless) {
            return None;
        }
        let mut text = String::new();
        for part in &parts[at + 1..] {
            match part {
                SourcePart::Tree(t) if !holds_quote(t) => text.push_str(&format!("(?:{t})")),
                _ => return None,
            }
        }
        Some(Arc::from(text))
    }
}

/// Whether some text of `hir` holds a quote.
pub(super) fn holds_quote(hir: &Hir) -> bool {
    use regex_syntax::hir::{Class, HirKind};
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => false,
        HirKind::Literal(l) => l.0.contains(&b'"'),
        HirKind::Class(Class::Unicode(c)) => c
            .ranges()
            .iter()
            .any(|r| r.start() <= '"' && '"' <= r.end()),
        HirKind::Class(Class::Bytes(c)) => c
            .ranges()
            .iter()
            .any(|r| r.start() <= b'"' && b'"' <= r.end()),
        HirKind::Repetition(r) => holds_quote(&r.sub),
        HirKind::Capture(c) => holds_quote(&c.sub),
        HirKind::Concat(subs) | HirKind::Alternation(subs) => subs.iter().any(holds_quote),
    }
}

impl SourcePart {
    /// The part of a verbatim piece's `regex`: the names it is built from
    /// where the writer gave them, else the text.
    pub(crate) fn of_text(regex: &str, verbatim: &Verbatim) -> SourcePart {
        match &verbatim.keys {
            Some(keys) => SourcePart::Keys(keys.clone()),
            None => SourcePart::Text(Arc::from(regex)),
        }
    }
}

/// The trees of the regex texts a grammar's deferred lexemes have parsed,
/// by text: an object's "any other key" (a verbatim rule, up to 100 KB of
/// text) stands in the run of its first member and in the run after a
/// comma, two lexemes of one text. A tree is kept while a lexeme not
/// made yet may ask for it (the grammar's life at most: the recipes hold
/// this table).
#[derive(Default)]
pub(crate) struct ParsedTexts(Mutex<HashMap<Arc<str>, Arc<Hir>>>);

impl ParsedTexts {
    /// The tree of `text`, parsed now if no lexeme has parsed it yet (not
    /// holding the table meanwhile: lexemes of other texts are made by
    /// other threads at once).
    pub(super) fn tree(&self, text: &Arc<str>) -> Result<Arc<Hir>, GrammarError> {
        if let Some(tree) = self.known().get(text) {
            return Ok(tree.clone());
        }
        let tree = Arc::new(tokensieve_automata::parse(text)?);
        Ok(self.known().entry(text.clone()).or_insert(tree).clone())
    }

    pub(super) fn known(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, Arc<Hir>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The lazy DFA of `parts` one after the other (their texts parsed through
/// `texts`).
pub(crate) fn parts_dfa(
    parts: &[SourcePart],
    texts: &ParsedTexts,
    limits: &DfaLimits,
) -> Result<LazyDfa, GrammarError> {
    let trees = parts
        .iter()
        .map(|part| match part {
            SourcePart::Tree(tree) => Ok(Some(tree.clone())),
            SourcePart::Text(text) => texts.tree(text).map(Some),
            SourcePart::Keys(_) => Ok(None),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let refs: Vec<Part<'_>> = parts
        .iter()
        .zip(&trees)
        .map(|(part, tree)| match (part, tree) {
            (SourcePart::Keys(keys), _) => Part::OtherKeys(keys),
            (_, tree) => Part::Tree(tree.as_deref().expect("a tree for every other part")),
        })
        .collect();
    LazyDfa::from_sources(&refs, limits)
}

/// The lexeme of `regex` with a lazily built DFA, made by `build` (from
/// its syntax tree, now or on first use) unless the process has it
/// already; shared like [`lexeme`].
pub(crate) fn lazy_lexeme(
    regex: &str,
    vocab: &LexVocab,
    limits: &DfaLimits,
    share: bool,
    build: impl FnOnce() -> Result<Making, GrammarError>,
) -> Result<Arc<Lexeme>, GrammarError> {
    // NUL never appears in a regex we build, so this key is no regex's.
    shared(|| format!("\0~{regex}"), vocab, limits, share, build)
}

/// The lexeme of a counted repetition (`key` names its regex), shared like
/// [`lexeme`]: the automaton the piece split made, unless the process has
/// this lexeme already.
pub(crate) fn counted_lexeme(
    key: &str,
    automaton: Arc<LazyCounted>,
    vocab: &LexVocab,
    limits: &DfaLimits,
    share: bool,
) -> Result<Arc<Lexeme>, GrammarError> {
    shared(
        || key.to_string(),
        vocab,
        limits,
        share,
        || Ok(Making::Now(LexDfa::Counted(automaton))),
    )
}

/// The lexeme of the texts every one of `regexes` matches (their
/// intersection, a product of lazy DFAs whose states are made as walks
/// reach them), shared like [`lexeme`].
pub(crate) fn intersection_lexeme(
    regexes: &[String],
    vocab: &LexVocab,
    limits: &DfaLimits,
    share: bool,
) -> Result<Arc<Lexeme>, GrammarError> {
    // NUL never appears in a regex we build, so this key is no regex's.
    let key = || format!("\0&{}", regexes.join("\0"));
    shared(key, vocab, limits, share, || {
        let patterns: Vec<&str> = regexes.iter().map(String::as_str).collect();
        LazyProduct::build(&patterns, limits).map(|d| Making::Now(LexDfa::Product(d)))
    })
}
