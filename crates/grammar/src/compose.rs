//! Grammars built from pieces: a regex as a [`Grammar`] ([`from_regex`]),
//! grammars spliced into a skeleton in place of placeholder characters
//! ([`splice`]), and the two together for structural tags whose contents
//! are context-free ([`tagged_grammar`]).
//!
//! The structural-tag pipeline: [`tagged_text`] writes the regex of free
//! text with tagged regions, given each tag as a regex; here each tag's
//! regex is `escape(begin) (P) escape(end)` with a private-use placeholder
//! character `P` ([`placeholder`]`(i)`, `U+F0000 + i`) standing for the
//! content. [`from_regex`] turns that regex into a skeleton grammar, and
//! [`splice`] replaces each placeholder by a reference to the root of the
//! tag's content grammar, which may be context-free. `tagged_text` treats a
//! tag's regex as an opaque block that free text resumes after, so
//! substituting a language for the placeholder gives exactly free text with
//! tags whose contents are sentences of their grammars.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use regex_syntax::ast::{self, AssertionKind, Ast, RepetitionKind, RepetitionRange};
use regex_syntax::hir::{self, Class, Hir, HirKind, Look};
use tokensieve_core::{GrammarError, Location};

use crate::gbnf::GbnfLimits;
use crate::grammar::{CharClass, Grammar, Rule, RuleId, RuleOrigin, Symbol};
use crate::regular::{RegularLimits, Tag, escape, tagged_text};

/// The grammar of a regex (regex-syntax dialect, Unicode on): the strings
/// the regex matches *as a whole*, as if anchored at both ends.
///
/// The result has one user rule, `root` (rule 0), and helper rules
/// `root_N` for alternations and repetitions, shaped like the GBNF front
/// end's: `x*` is `R ::= "" | R x`, `x+` is `R ::= x | R x`, `x{m,n}` is `m`
/// copies of `x` then a chain of `n - m` nested optionals, and a
/// multi-symbol `x` first becomes one helper rule. Captures are plain
/// groups; greediness is irrelevant to a language.
///
/// Errors, with the byte offset into `pattern` where there is one:
/// * syntax errors are [`GrammarError::InvalidRegex`]; so is a byte class
///   or escape that can match invalid UTF-8 (`(?-u:\xFF)`);
/// * look-around and back-references are [`GrammarError::Unsupported`];
/// * anchors: `^`, `\A` (and `$`, `\z`) are redundant, and accepted, where
///   nothing but the empty string can precede (follow) them in any match,
///   e.g. `^a|^b$`; anywhere else (`a^b`, `(?:^a)*`) and word boundaries
///   (`\b`, `\B`, `\<`…) are [`GrammarError::Unsupported`];
/// * a regex that matches no string (`[a&&b]`) is
///   [`GrammarError::InvalidSpec`], since a grammar must derive something;
/// * nesting deeper than [`GbnfLimits::max_nesting_depth`], a count above
///   [`GbnfLimits::max_repetition`], or a grammar larger than
///   [`GbnfLimits::max_grammar_size`] is [`GrammarError::LimitExceeded`].
///
/// Parsing, checking and translation walk the regex with heap stacks, never
/// recursion, so no pattern can overflow the call stack.
pub fn from_regex(pattern: &str, limits: &GbnfLimits) -> Result<Grammar, GrammarError> {
    let ast = ast::parse::ParserBuilder::new()
        .nest_limit(u32::try_from(limits.max_nesting_depth).unwrap_or(u32::MAX))
        .build()
        .parse(pattern)
        .map_err(|e| ast_error(pattern, &e, limits))?;
    ast::visit(
        &ast,
        AnchorCheck {
            limits,
            stack: Vec::new(),
        },
    )?;
    // The same translation as `regex_syntax::ParserBuilder` (Unicode on,
    // UTF-8 only), done in two steps to keep the AST and its offsets.
    let hir = hir::translate::TranslatorBuilder::new()
        .utf8(true)
        .build()
        .translate(pattern, &ast)
        .map_err(|e| GrammarError::InvalidRegex {
            location: Location::Offset(e.span().start.offset),
            message: e.kind().to_string(),
        })?;
    let mut builder = Builder {
        rules: vec![Rule {
            name: "root".into(),
            alternatives: Vec::new(),
            origin: RuleOrigin::Defined { line: 1, column: 1 },
        }],
        limits,
        size: 0,
        pieces: Vec::new(),
    };
    let Some(root) = hir::visit(&hir, &mut builder)? else {
        return Err(GrammarError::InvalidSpec(
            "the regex matches no string at all".into(),
        ));
    };
    builder.rules[0].alternatives = vec![root];
    let names = HashMap::from([("root".to_owned(), RuleId(0))]);
    finish(builder.rules, RuleId(0), names, limits)
}

/// The first private-use placeholder, `U+F0000` (plane 15).
pub const PLACEHOLDER_BASE: u32 = 0xF_0000;

/// Placeholder number `i`: `U+F0000 + i`, for `i` up to `0xFFFD` (the
/// private-use characters of plane 15); `None` past that.
pub fn placeholder(i: usize) -> Option<char> {
    (i <= 0xFFFD).then(|| char::from_u32(PLACEHOLDER_BASE + i as u32).expect("plane 15"))
}

/// `skeleton` with grammars spliced in place of placeholder characters.
///
/// `pieces` pairs each placeholder character (distinct, else
/// [`GrammarError::InvalidSpec`]) with the grammar that replaces it. In the
/// skeleton's rules, and only there (pieces are copied as they are):
///
/// * every occurrence of a placeholder character inside a
///   [`Symbol::Literal`], wherever it is in the literal, becomes a
///   [`Symbol::NonTerminal`] to that piece's root, the literal split
///   around it (`"<f\u{F0000}>"` becomes `"<f" piece ">"`);
/// * a [`Symbol::Class`] whose members are *all* placeholder characters
///   becomes a reference to the piece's root (one member) or to a new helper
///   rule with one alternative per member's piece;
/// * every other symbol is kept, including a class that mixes placeholder
///   and other characters (`[^<]` in free text): there the placeholder is
///   an ordinary character.
///
/// The skeleton's rules keep their ids and names and its root stays the
/// root; each piece's rules are appended once (re-indexed), however many
/// times its placeholder occurs, even never, with names prefixed
/// `splice<i>.` (`i` its position in `pieces`; a further `-<k>` if that
/// would clash), so every rule name stays unique. The result is checked like
/// a parsed grammar: size within [`GbnfLimits::max_grammar_size`], every
/// rule able to finish.
pub fn splice(
    skeleton: &Grammar,
    pieces: &[(char, &Grammar)],
    limits: &GbnfLimits,
) -> Result<Grammar, GrammarError> {
    splice_where(skeleton, pieces, false, limits)
}

/// [`splice`], with placeholders replaced in the pieces' rules too, so that
/// pieces may refer to one another and to themselves: a recursive grammar
/// written as regexes, one per rule, with placeholder characters for rule
/// references (the context-free JSON Schema lowering's result).
pub fn link(
    root: &Grammar,
    pieces: &[(char, &Grammar)],
    limits: &GbnfLimits,
) -> Result<Grammar, GrammarError> {
    splice_where(root, pieces, true, limits)
}

fn splice_where(
    skeleton: &Grammar,
    pieces: &[(char, &Grammar)],
    everywhere: bool,
    limits: &GbnfLimits,
) -> Result<Grammar, GrammarError> {
    let mut target: HashMap<char, RuleId> = HashMap::new();
    let mut offset = skeleton.rules.len();
    for (i, &(c, piece)) in pieces.iter().enumerate() {
        let root = RuleId((offset + piece.root.index()) as u32);
        if target.insert(c, root).is_some() {
            return Err(GrammarError::InvalidSpec(format!(
                "placeholder {:?} (U+{:04X}) is given twice (again as piece {i})",
                c, c as u32
            )));
        }
        offset += piece.rules.len();
    }
    let mut rules: Vec<Rule> = skeleton.rules.clone();
    let mut taken: HashSet<String> = skeleton.rules.iter().map(|r| r.name.clone()).collect();
    let mut names = skeleton.names.clone();
    for (i, &(_, piece)) in pieces.iter().enumerate() {
        let base = rules.len();
        let prefix = (0..)
            .map(|k| {
                if k == 0 {
                    format!("splice{i}.")
                } else {
                    format!("splice{i}-{k}.")
                }
            })
            .find(|p| {
                piece
                    .rules
                    .iter()
                    .all(|r| !taken.contains(&format!("{p}{}", r.name)))
            })
            .expect("some prefix is free");
        let shift = |id: RuleId| RuleId((base + id.index()) as u32);
        for rule in &piece.rules {
            let name = format!("{prefix}{}", rule.name);
            taken.insert(name.clone());
            rules.push(Rule {
                name,
                alternatives: rule
                    .alternatives
                    .iter()
                    .map(|alt| {
                        alt.iter()
                            .map(|s| match s {
                                Symbol::NonTerminal(t) => Symbol::NonTerminal(shift(*t)),
                                other => other.clone(),
                            })
                            .collect()
                    })
                    .collect(),
                origin: match rule.origin {
                    RuleOrigin::Helper { parent } => RuleOrigin::Helper {
                        parent: shift(parent),
                    },
                    defined => defined,
                },
            });
        }
        for (name, &id) in &piece.names {
            names.insert(format!("{prefix}{name}"), shift(id));
        }
    }
    let total = rules.len();
    let end = if everywhere {
        total
    } else {
        skeleton.rules.len()
    };
    let mut class_helpers: HashMap<CharClass, RuleId> = HashMap::new();
    let mut extra: Vec<Rule> = Vec::new();
    for rule in rules.iter_mut().take(end) {
        let mut alternatives = Vec::with_capacity(rule.alternatives.len());
        for alt in &rule.alternatives {
            let mut out = Vec::with_capacity(alt.len());
            for symbol in alt {
                match symbol {
                    Symbol::Literal(bytes) => split_literal(bytes, &target, &mut out),
                    Symbol::Class(class) => match class_targets(class, &target) {
                        None => out.push(symbol.clone()),
                        Some(roots) if roots.len() == 1 => {
                            out.push(Symbol::NonTerminal(roots[0]));
                        }
                        Some(roots) => {
                            let id = *class_helpers.entry(class.clone()).or_insert_with(|| {
                                let id = RuleId((total + extra.len()) as u32);
                                let parent = user_rule(&names, skeleton.root, rule);
                                let name = (extra.len() + 1..)
                                    .map(|k| format!("{}_splice{k}", rule.name))
                                    .find(|n| !taken.contains(n))
                                    .expect("some name is free");
                                taken.insert(name.clone());
                                extra.push(Rule {
                                    name,
                                    alternatives: roots
                                        .iter()
                                        .map(|&r| vec![Symbol::NonTerminal(r)])
                                        .collect(),
                                    origin: RuleOrigin::Helper { parent },
                                });
                                id
                            });
                            out.push(Symbol::NonTerminal(id));
                        }
                    },
                    Symbol::NonTerminal(_) => out.push(symbol.clone()),
                }
            }
            alternatives.push(out);
        }
        rule.alternatives = alternatives;
    }
    rules.extend(extra);
    finish(rules, skeleton.root, names, limits)
}

/// A tag whose content is a grammar: the text `begin`, then a sentence of
/// `content`, then the text `end`. `begin` must start with the text of
/// trigger number `trigger`.
#[derive(Debug, Clone, Copy)]
pub struct GrammarTag<'a> {
    pub trigger: usize,
    pub begin: &'a str,
    pub content: &'a Grammar,
    pub end: &'a str,
}

/// Free text with tagged regions whose contents are context-free: the
/// language of [`tagged_text`] (see there for how triggers open tags) with
/// each tag's content a sentence of its grammar. Built as the module docs
/// say: tag `i`'s regex is `escape(begin) (P) escape(end)` with `P` the
/// character [`placeholder`]`(i)` (the capture group keeps regex-syntax
/// from merging placeholders of neighbouring tags into one class), then
/// [`from_regex`] of [`tagged_text`]'s regex, then [`splice`] of each
/// content grammar for its placeholder.
///
/// A `begin` that does not start with its trigger, a trigger index out of
/// range, or a trigger, `begin` or `end` containing one of the placeholder
/// characters used is [`GrammarError::InvalidSpec`]; so are the trigger
/// errors of [`tagged_text`].
pub fn tagged_grammar(
    triggers: &[&str],
    tags: &[GrammarTag<'_>],
    limits: &GbnfLimits,
    regular: &RegularLimits,
) -> Result<Grammar, GrammarError> {
    let Some(last) = tags.len().checked_sub(1) else {
        let regex = tagged_text(triggers, &[], regular)?;
        return from_regex(&regex, limits);
    };
    let Some(last) = placeholder(last) else {
        return Err(GrammarError::InvalidSpec(format!(
            "{} tags: at most {} placeholders exist",
            tags.len(),
            0xFFFE
        )));
    };
    let is_placeholder = |c: char| (PLACEHOLDER_BASE..=last as u32).contains(&(c as u32));
    for t in triggers {
        if t.chars().any(is_placeholder) {
            return Err(GrammarError::InvalidSpec(format!(
                "trigger {t:?} contains a private-use placeholder character"
            )));
        }
    }
    let mut regex_tags = Vec::with_capacity(tags.len());
    for (i, tag) in tags.iter().enumerate() {
        let Some(trigger) = triggers.get(tag.trigger) else {
            return Err(GrammarError::InvalidSpec(format!(
                "tag {i} refers to trigger {} of {}",
                tag.trigger,
                triggers.len()
            )));
        };
        if !tag.begin.starts_with(trigger) {
            return Err(GrammarError::InvalidSpec(format!(
                "tag {i} begins with {:?}, not with its trigger {trigger:?}",
                tag.begin
            )));
        }
        if tag.begin.chars().chain(tag.end.chars()).any(is_placeholder) {
            return Err(GrammarError::InvalidSpec(format!(
                "tag {i}: its begin or end contains a private-use placeholder character"
            )));
        }
        let p = placeholder(i).expect("checked above");
        regex_tags.push(Tag {
            trigger: tag.trigger,
            regex: format!("{}({p}){}", escape(tag.begin), escape(tag.end)),
        });
    }
    let regex = tagged_text(triggers, &regex_tags, regular)?;
    let skeleton = from_regex(&regex, limits)?;
    let pieces: Vec<(char, &Grammar)> = tags
        .iter()
        .enumerate()
        .map(|(i, tag)| (placeholder(i).expect("checked above"), tag.content))
        .collect();
    splice(&skeleton, &pieces, limits)
}

/// Checks what every grammar must satisfy and builds it.
fn finish(
    rules: Vec<Rule>,
    root: RuleId,
    names: HashMap<String, RuleId>,
    limits: &GbnfLimits,
) -> Result<Grammar, GrammarError> {
    if root.index() >= rules.len() {
        return Err(GrammarError::InvalidGrammar {
            location: Location::None,
            message: format!("the root rule {root} does not exist"),
        });
    }
    let grammar = Grammar { rules, root, names };
    let size = grammar.size();
    if size > limits.max_grammar_size {
        return Err(GrammarError::LimitExceeded {
            what: format!("the composed grammar's size ({size})"),
            limit: limits.max_grammar_size,
            knob: "GbnfLimits::max_grammar_size".into(),
        });
    }
    let productive = grammar.rules_where(|_| true);
    if let Some(i) = productive.iter().position(|&p| !p) {
        let rule = &grammar.rules[i];
        return Err(GrammarError::InvalidGrammar {
            location: match rule.origin {
                RuleOrigin::Defined { line, column } => Location::LineColumn { line, column },
                RuleOrigin::Helper { .. } => Location::None,
            },
            message: format!(
                "rule `{}` can never produce a finite string",
                grammar.rules[i].name
            ),
        });
    }
    Ok(grammar)
}

/// The user rule a skeleton rule belongs to (itself, or a helper's parent).
fn user_rule(names: &HashMap<String, RuleId>, root: RuleId, rule: &Rule) -> RuleId {
    match rule.origin {
        RuleOrigin::Helper { parent } => parent,
        RuleOrigin::Defined { .. } => names.get(&rule.name).copied().unwrap_or(root),
    }
}

/// Appends `bytes` to `out` with each placeholder character replaced by a
/// reference to its piece's root.
fn split_literal(bytes: &Arc<[u8]>, target: &HashMap<char, RuleId>, out: &mut Vec<Symbol>) {
    let text = std::str::from_utf8(bytes).expect("literals are valid UTF-8");
    if !text.chars().any(|c| target.contains_key(&c)) {
        out.push(Symbol::Literal(bytes.clone()));
        return;
    }
    let mut run = String::new();
    for c in text.chars() {
        match target.get(&c) {
            Some(&root) => {
                if !run.is_empty() {
                    out.push(Symbol::Literal(
                        std::mem::take(&mut run).into_bytes().into(),
                    ));
                }
                out.push(Symbol::NonTerminal(root));
            }
            None => run.push(c),
        }
    }
    if !run.is_empty() {
        out.push(Symbol::Literal(run.into_bytes().into()));
    }
}

/// The piece roots of a class whose members are all placeholders, in
/// member order; `None` when some member is not a placeholder.
fn class_targets(class: &CharClass, target: &HashMap<char, RuleId>) -> Option<Vec<RuleId>> {
    let mut roots = Vec::new();
    for &(lo, hi) in class.ranges() {
        for c in lo..=hi {
            // Bounded: the loop stops at the first non-placeholder.
            roots.push(*target.get(&c)?);
        }
    }
    Some(roots)
}

/// A `regex-syntax` AST error as ours, naming the construct and offset.
fn ast_error(pattern: &str, e: &ast::Error, limits: &GbnfLimits) -> GrammarError {
    use ast::ErrorKind;
    let span = e.span();
    let offset = span.start.offset;
    let shown = pattern.get(offset..span.end.offset).unwrap_or("");
    let rest = pattern.get(offset..).unwrap_or("");
    match e.kind() {
        ErrorKind::UnsupportedLookAround => {
            let what = [
                ("(?<=", "look-behind `(?<=…)`"),
                ("(?<!", "negative look-behind `(?<!…)`"),
                ("(?=", "look-ahead `(?=…)`"),
                ("(?!", "negative look-ahead `(?!…)`"),
            ]
            .iter()
            .find(|(p, _)| rest.starts_with(p))
            .map_or("look-around", |&(_, w)| w);
            GrammarError::Unsupported {
                location: Location::Offset(offset),
                what: what.into(),
            }
        }
        ErrorKind::UnsupportedBackreference => GrammarError::Unsupported {
            location: Location::Offset(offset),
            what: format!("back-reference `{shown}`"),
        },
        ErrorKind::NestLimitExceeded(_) => GrammarError::LimitExceeded {
            what: format!("regex nesting at offset {offset}"),
            limit: limits.max_nesting_depth,
            knob: "GbnfLimits::max_nesting_depth".into(),
        },
        kind => GrammarError::InvalidRegex {
            location: Location::Offset(offset),
            message: kind.to_string(),
        },
    }
}

/// What the anchor check knows of a node of the AST.
#[derive(Clone, Copy)]
struct Anchors {
    /// The node can match only the empty string (or nothing).
    only_empty: bool,
    /// Offset of the first `^`/`\A` at the node's front (nothing but the
    /// empty string before it inside the node).
    front: Option<usize>,
    /// Offset of the first `$`/`\z` at the node's back.
    back: Option<usize>,
}

/// Post-order walk of the AST: anchors only where they are redundant, word
/// boundaries never, repetition counts within the limit.
struct AnchorCheck<'a> {
    limits: &'a GbnfLimits,
    stack: Vec<Anchors>,
}

fn misplaced(offset: usize, anchor: &str, place: &str) -> GrammarError {
    GrammarError::Unsupported {
        location: Location::Offset(offset),
        what: format!(
            "the anchor `{anchor}` away from the {place} of the regex (it is redundant at the \
             {place}, where the whole output is matched anyway)"
        ),
    }
}

impl AnchorCheck<'_> {
    fn pop(&mut self, n: usize) -> Vec<Anchors> {
        self.stack.split_off(self.stack.len() - n)
    }

    fn count(&self, n: u32, offset: usize) -> Result<(), GrammarError> {
        if n > self.limits.max_repetition {
            return Err(GrammarError::LimitExceeded {
                what: format!("repetition count {n} at offset {offset}"),
                limit: self.limits.max_repetition as usize,
                knob: "GbnfLimits::max_repetition".into(),
            });
        }
        Ok(())
    }
}

impl ast::Visitor for AnchorCheck<'_> {
    type Output = ();
    type Err = GrammarError;

    fn finish(self) -> Result<(), GrammarError> {
        Ok(())
    }

    fn visit_post(&mut self, ast: &Ast) -> Result<(), GrammarError> {
        let leaf = |only_empty| Anchors {
            only_empty,
            front: None,
            back: None,
        };
        let info = match ast {
            Ast::Empty(_) | Ast::Flags(_) => leaf(true),
            Ast::Literal(_)
            | Ast::Dot(_)
            | Ast::ClassUnicode(_)
            | Ast::ClassPerl(_)
            | Ast::ClassBracketed(_) => leaf(false),
            Ast::Assertion(a) => {
                let offset = a.span.start.offset;
                match a.kind {
                    AssertionKind::StartLine | AssertionKind::StartText => Anchors {
                        front: Some(offset),
                        ..leaf(true)
                    },
                    AssertionKind::EndLine | AssertionKind::EndText => Anchors {
                        back: Some(offset),
                        ..leaf(true)
                    },
                    _ => {
                        return Err(GrammarError::Unsupported {
                            location: Location::Offset(offset),
                            what: format!(
                                "the word-boundary assertion `{}`",
                                word_boundary(&a.kind)
                            ),
                        });
                    }
                }
            }
            Ast::Repetition(rep) => {
                let sub = self.pop(1)[0];
                let offset = rep.op.span.start.offset;
                let max = match &rep.op.kind {
                    RepetitionKind::ZeroOrOne => Some(1),
                    RepetitionKind::ZeroOrMore | RepetitionKind::OneOrMore => None,
                    RepetitionKind::Range(RepetitionRange::Exactly(n)) => {
                        self.count(*n, offset)?;
                        Some(*n)
                    }
                    RepetitionKind::Range(RepetitionRange::AtLeast(n)) => {
                        self.count(*n, offset)?;
                        None
                    }
                    RepetitionKind::Range(RepetitionRange::Bounded(m, n)) => {
                        self.count(*m, offset)?;
                        self.count(*n, offset)?;
                        Some(*n)
                    }
                };
                if max == Some(0) {
                    // `x{0}` is the empty string, anchors and all.
                    leaf(true)
                } else {
                    if !sub.only_empty && max != Some(1) {
                        // A second round starts (ends) after a first one.
                        if let Some(o) = sub.front {
                            return Err(misplaced(o, "^", "start"));
                        }
                        if let Some(o) = sub.back {
                            return Err(misplaced(o, "$", "end"));
                        }
                    }
                    sub
                }
            }
            Ast::Group(_) => return Ok(()),
            Ast::Alternation(alt) => {
                let subs = self.pop(alt.asts.len());
                Anchors {
                    only_empty: subs.iter().all(|s| s.only_empty),
                    front: subs.iter().filter_map(|s| s.front).min(),
                    back: subs.iter().filter_map(|s| s.back).min(),
                }
            }
            Ast::Concat(concat) => {
                let subs = self.pop(concat.asts.len());
                for (i, s) in subs.iter().enumerate() {
                    if let Some(o) = s.front
                        && !subs[..i].iter().all(|p| p.only_empty)
                    {
                        return Err(misplaced(o, "^", "start"));
                    }
                    if let Some(o) = s.back
                        && !subs[i + 1..].iter().all(|p| p.only_empty)
                    {
                        return Err(misplaced(o, "$", "end"));
                    }
                }
                Anchors {
                    only_empty: subs.iter().all(|s| s.only_empty),
                    front: subs.iter().filter_map(|s| s.front).min(),
                    back: subs.iter().filter_map(|s| s.back).min(),
                }
            }
        };
        self.stack.push(info);
        Ok(())
    }
}

fn word_boundary(kind: &AssertionKind) -> String {
    match kind {
        AssertionKind::WordBoundary => "\\b",
        AssertionKind::NotWordBoundary => "\\B",
        AssertionKind::WordBoundaryStart => "\\b{start}",
        AssertionKind::WordBoundaryEnd => "\\b{end}",
        AssertionKind::WordBoundaryStartAngle => "\\<",
        AssertionKind::WordBoundaryEndAngle => "\\>",
        AssertionKind::WordBoundaryStartHalf => "\\b{start-half}",
        AssertionKind::WordBoundaryEndHalf => "\\b{end-half}",
        _ => "assertion",
    }
    .into()
}

/// A translated sub-expression: a sequence of symbols, or `None` when it
/// matches no string at all.
type Piece = Option<Vec<Symbol>>;

/// Post-order walk of the HIR building rules; each node leaves its
/// [`Piece`] on the stack.
struct Builder<'a> {
    rules: Vec<Rule>,
    limits: &'a GbnfLimits,
    /// Running estimate of the grammar size (at least the final size).
    size: usize,
    pieces: Vec<Piece>,
}

impl Builder<'_> {
    fn grow(&mut self, by: usize) -> Result<(), GrammarError> {
        self.size = self.size.saturating_add(by);
        if self.size > self.limits.max_grammar_size {
            return Err(GrammarError::LimitExceeded {
                what: "the grammar of the regex".into(),
                limit: self.limits.max_grammar_size,
                knob: "GbnfLimits::max_grammar_size".into(),
            });
        }
        Ok(())
    }

    fn helper(&mut self, alternatives: Vec<Vec<Symbol>>) -> Result<RuleId, GrammarError> {
        self.grow(alternatives.len())?;
        let id = RuleId(self.rules.len() as u32);
        self.rules.push(Rule {
            name: format!("root_{}", self.rules.len()),
            alternatives,
            origin: RuleOrigin::Helper { parent: RuleId(0) },
        });
        Ok(id)
    }

    fn pop(&mut self, n: usize) -> Vec<Piece> {
        self.pieces.split_off(self.pieces.len() - n)
    }

    /// `sub{min,max}` (`max` `None`: unbounded), like the GBNF front end.
    fn repeat(&mut self, sub: Piece, min: u32, max: Option<u32>) -> Result<Piece, GrammarError> {
        let Some(mut seq) = sub else {
            return Ok((min == 0).then(Vec::new));
        };
        if seq.is_empty() || max == Some(0) {
            return Ok(Some(Vec::new()));
        }
        let x = if seq.len() == 1 {
            seq.pop().expect("one symbol")
        } else {
            Symbol::NonTerminal(self.helper(vec![seq])?)
        };
        let (m, n) = (min as usize, max.map(|n| n as usize));
        self.grow(match n {
            None => m + 5,
            Some(n) => m + 3 * (n - m) + 2,
        })?;
        let copies = |x: &Symbol| vec![x.clone(); m];
        let symbol = match n {
            Some(1) if m == 1 => x,
            None if m <= 1 => {
                let r = RuleId(self.rules.len() as u32);
                let base = if m == 0 { vec![] } else { vec![x.clone()] };
                self.helper(vec![base, vec![Symbol::NonTerminal(r), x]])?;
                Symbol::NonTerminal(r)
            }
            None => {
                let r = RuleId(self.rules.len() as u32);
                self.helper(vec![vec![], vec![Symbol::NonTerminal(r), x.clone()]])?;
                let mut seq = copies(&x);
                seq.push(Symbol::NonTerminal(r));
                Symbol::NonTerminal(self.helper(vec![seq])?)
            }
            Some(n) if n == m => Symbol::NonTerminal(self.helper(vec![copies(&x)])?),
            Some(n) => {
                // O_1 ::= "" | x ; O_k ::= "" | x O_(k-1)
                let mut optional = self.helper(vec![vec![], vec![x.clone()]])?;
                for _ in 1..n - m {
                    optional =
                        self.helper(vec![vec![], vec![x.clone(), Symbol::NonTerminal(optional)]])?;
                }
                if m == 0 {
                    Symbol::NonTerminal(optional)
                } else {
                    let mut seq = copies(&x);
                    seq.push(Symbol::NonTerminal(optional));
                    Symbol::NonTerminal(self.helper(vec![seq])?)
                }
            }
        };
        Ok(Some(vec![symbol]))
    }
}

impl hir::Visitor for &mut Builder<'_> {
    type Output = Piece;
    type Err = GrammarError;

    fn finish(self) -> Result<Piece, GrammarError> {
        Ok(self.pieces.pop().expect("the whole regex"))
    }

    fn visit_post(&mut self, hir: &Hir) -> Result<(), GrammarError> {
        let piece = match hir.kind() {
            HirKind::Empty => Some(Vec::new()),
            HirKind::Literal(hir::Literal(bytes)) => {
                self.grow(1)?;
                if std::str::from_utf8(bytes).is_err() {
                    return Err(GrammarError::Unsupported {
                        location: Location::None,
                        what: "a literal that is not valid UTF-8".into(),
                    });
                }
                Some(vec![Symbol::Literal(bytes.to_vec().into())])
            }
            HirKind::Class(Class::Unicode(class)) => {
                self.grow(1)?;
                CharClass::new(class.iter().map(|r| (r.start(), r.end())), false)
                    .map(|c| vec![Symbol::Class(c)])
            }
            HirKind::Class(Class::Bytes(class)) => {
                self.grow(1)?;
                if class.ranges().iter().any(|r| r.end() > 0x7F) {
                    return Err(GrammarError::Unsupported {
                        location: Location::None,
                        what: "a byte class beyond ASCII".into(),
                    });
                }
                CharClass::new(
                    class
                        .iter()
                        .map(|r| (char::from(r.start()), char::from(r.end()))),
                    false,
                )
                .map(|c| vec![Symbol::Class(c)])
            }
            HirKind::Look(
                Look::Start
                | Look::End
                | Look::StartLF
                | Look::EndLF
                | Look::StartCRLF
                | Look::EndCRLF,
            ) => {
                // The anchor check let these through only where they are
                // redundant.
                Some(Vec::new())
            }
            HirKind::Look(look) => {
                return Err(GrammarError::Unsupported {
                    location: Location::None,
                    what: format!("the assertion {look:?}"),
                });
            }
            HirKind::Repetition(rep) => {
                let sub = self.pop(1).pop().expect("one piece");
                self.repeat(sub, rep.min, rep.max)?
            }
            HirKind::Capture(_) => return Ok(()),
            HirKind::Concat(subs) => {
                let parts = self.pop(subs.len());
                let mut seq = Vec::new();
                let mut none = false;
                for part in parts {
                    match part {
                        Some(p) => seq.extend(p),
                        None => none = true,
                    }
                }
                (!none).then(|| merge_literals(seq))
            }
            HirKind::Alternation(subs) => {
                let mut alternatives: Vec<Vec<Symbol>> =
                    self.pop(subs.len()).into_iter().flatten().collect();
                match alternatives.len() {
                    0 => None,
                    1 => alternatives.pop(),
                    _ => Some(vec![Symbol::NonTerminal(self.helper(alternatives)?)]),
                }
            }
        };
        self.pieces.push(piece);
        Ok(())
    }
}

/// Joins runs of adjacent literals into one.
fn merge_literals(items: Vec<Symbol>) -> Vec<Symbol> {
    let mut out: Vec<Symbol> = Vec::with_capacity(items.len());
    let mut run: Vec<u8> = Vec::new();
    for item in items {
        match item {
            Symbol::Literal(bytes) => run.extend_from_slice(&bytes),
            other => {
                if !run.is_empty() {
                    out.push(Symbol::Literal(std::mem::take(&mut run).into()));
                }
                out.push(other);
            }
        }
    }
    if !run.is_empty() {
        out.push(Symbol::Literal(run.into()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{mutate, random_sentence};
    use regex_automata::meta::Regex;
    use tokensieve_core::testing::SplitMix64;

    fn regex(pattern: &str) -> Grammar {
        from_regex(pattern, &GbnfLimits::default()).unwrap_or_else(|e| panic!("{pattern:?}: {e}"))
    }

    fn gbnf(text: &str) -> Grammar {
        Grammar::from_gbnf(text, "root").unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    fn p(i: usize) -> char {
        placeholder(i).unwrap()
    }

    /// Pieces of random test strings: ASCII, two- to four-byte characters,
    /// a newline and a lone UTF-8 lead byte.
    const PIECES: [&[u8]; 15] = [
        b"a",
        b"b",
        b"c",
        b"x",
        b"y",
        b"1",
        b"A",
        b"-",
        b"\n",
        "é".as_bytes(),
        "α".as_bytes(),
        "😀".as_bytes(),
        "\u{F0000}".as_bytes(),
        b"ab",
        b"\xC3",
    ];

    fn random_bytes(r: &mut SplitMix64, max_pieces: usize) -> Vec<u8> {
        let mut s = Vec::new();
        for _ in 0..r.below(max_pieces + 1) {
            s.extend_from_slice(PIECES[r.below(PIECES.len())]);
        }
        s
    }

    const PATTERNS: [&str; 40] = [
        "[a-c]+x?",
        "[^a]*b",
        "(?:ab|c)*",
        "a{2,4}",
        "(?:a|bc){3}",
        "a{2,}b?",
        "(a|)(b|c|)",
        "é+[^é]?",
        "\\p{Greek}+1",
        "(?:(?:a|bc)|(?:x(?:1|A)))*",
        "(?i)ab",
        ".",
        "(?s).",
        "\\d{1,3}",
        "\\w+",
        "a|",
        "|",
        "()",
        "^a$",
        "^(?:a|b)$|^c",
        "(a*)*",
        "(a?){2,3}b",
        "x{0}y",
        "a{0}",
        "[a-z&&[^aeiou]]+",
        "(?:a|b|ab)*c",
        "(?m)^a$",
        "[^\\n]*",
        "😀+|α",
        "(?-u:[a-c])+",
        "(?:a|b)?(?:c|)",
        "[^a-c]{1,2}",
        "$",
        "^a|b$",
        "x*?y+?",
        "(?:a{1,2}){2}",
        "(?:(?:a|)|b)+",
        "\\x{F0000}|[\\x{F0000}-\\x{F0002}]{2}",
        "(?:^)*a(?:$)?",
        "(?:[^a]|ab){0,3}c?",
    ];

    #[test]
    fn from_regex_agrees_with_the_regex_engine() {
        let mut r = SplitMix64(0x5EED_C0DE);
        let mut total_accepted = 0;
        for pattern in PATTERNS {
            let g = regex(pattern);
            let re = Regex::new(&format!("^(?:{pattern})$")).unwrap();
            let check = |s: &[u8]| {
                let expected = re.is_match(s);
                assert_eq!(
                    g.accepts(s),
                    expected,
                    "{pattern:?} on {:?}\n{g}",
                    String::from_utf8_lossy(s)
                );
                expected
            };
            let mut accepted = 0;
            for _ in 0..400 {
                accepted += usize::from(check(&random_bytes(&mut r, 5)));
            }
            // Sentences of the grammar and near misses of them.
            for _ in 0..150 {
                let s = random_sentence(&g, &mut r, 6);
                assert!(check(&s), "{pattern:?}: sentence {s:?} rejected");
                accepted += 1;
                check(&mutate(&s, b"abcx1\n\xC3", &mut r));
            }
            total_accepted += accepted;
        }
        assert!(total_accepted > PATTERNS.len() * 150);
    }

    #[test]
    fn from_regex_shapes() {
        // Bounded repetition is linear, like GBNF's.
        assert!(regex("[a-z]{10,5000}").size() < 5 * 5000);
        // Helpers are `root_N`, children of the root.
        let g = regex("(?:ab|c)*d");
        assert_eq!(g.rule(g.root()).name, "root");
        assert_eq!(g.rule_id("root"), Some(g.root()));
        assert!(
            g.rules()[1..].iter().all(|r| r.name.starts_with("root_")
                && r.origin == RuleOrigin::Helper { parent: g.root() })
        );
        // Literals are merged across captures.
        let g = regex("(a)(b)c");
        assert_eq!(
            g.rule(g.root()).alternatives,
            vec![vec![Symbol::Literal(b"abc"[..].into())]]
        );
        // What matches nothing is dropped from an alternation.
        let g = regex("[a&&b]|x|[a&&b]y*");
        assert!(g.accepts(b"x") && !g.accepts(b""));
    }

    #[test]
    fn from_regex_errors_name_the_construct_and_offset() {
        let unsupported = |pattern: &str, offset: usize, needle: &str| {
            let e = from_regex(pattern, &GbnfLimits::default()).unwrap_err();
            match &e {
                GrammarError::Unsupported { location, what } => {
                    assert_eq!(*location, Location::Offset(offset), "{pattern:?}: {e}");
                    assert!(what.contains(needle), "{pattern:?}: {e}");
                }
                other => panic!("{pattern:?}: {other:?}"),
            }
        };
        unsupported("a(?=b)", 1, "look-ahead");
        unsupported("a(?!b)", 1, "negative look-ahead");
        unsupported("(?<=a)b", 0, "look-behind");
        unsupported("(?<!a)b", 0, "negative look-behind");
        unsupported("(a)\\1", 3, "back-reference `\\1`");
        unsupported("a^b", 1, "`^`");
        unsupported("a$b", 1, "`$`");
        unsupported("(?:^a)*", 3, "`^`");
        unsupported("(?:a$){2}", 4, "`$`");
        unsupported("(?:a|b?)\\Ab", 8, "`^`");
        unsupported("\\bfoo", 0, "`\\b`");
        unsupported("a\\Bb", 1, "`\\B`");
        for pattern in ["(?-u:\\xFF)", "(?-u:[\\x80-\\xFF])", "(?-u:.)"] {
            let e = from_regex(pattern, &GbnfLimits::default()).unwrap_err();
            assert!(
                matches!(
                    e,
                    GrammarError::InvalidRegex {
                        location: Location::Offset(_),
                        ..
                    }
                ),
                "{pattern:?}: {e:?}"
            );
        }
        let e = from_regex("ab(c", &GbnfLimits::default()).unwrap_err();
        assert!(matches!(e, GrammarError::InvalidRegex { .. }), "{e:?}");
        for pattern in ["[a&&b]", "a[a&&b]", "(?:[a&&b])+"] {
            let e = from_regex(pattern, &GbnfLimits::default()).unwrap_err();
            assert!(matches!(e, GrammarError::InvalidSpec(_)), "{e:?}");
        }
        // `[a&&b]*` is the empty string.
        assert!(regex("[a&&b]*").accepts(b""));
    }

    #[test]
    fn from_regex_limits() {
        let knob =
            |pattern: &str, limits: &GbnfLimits| match from_regex(pattern, limits).unwrap_err() {
                GrammarError::LimitExceeded { knob, .. } => knob,
                other => panic!("{pattern:?}: {other:?}"),
            };
        let default = GbnfLimits::default();
        assert_eq!(knob("a{10001}", &default), "GbnfLimits::max_repetition");
        assert_eq!(knob("a{2,10001}", &default), "GbnfLimits::max_repetition");
        let shallow = GbnfLimits {
            max_nesting_depth: 3,
            ..GbnfLimits::default()
        };
        assert_eq!(
            knob("((((((a))))))", &shallow),
            "GbnfLimits::max_nesting_depth"
        );
        let small = GbnfLimits {
            max_grammar_size: 1000,
            ..GbnfLimits::default()
        };
        assert_eq!(knob("[a-z]{2000}", &small), "GbnfLimits::max_grammar_size");
        assert_eq!(
            knob("(?:(?:ab){600}){600}", &small),
            "GbnfLimits::max_grammar_size"
        );
        // Deep nesting within the limit stays off the call stack.
        let deep = format!("{}a{}", "(?:b|".repeat(5000), ")".repeat(5000));
        let g = from_regex(
            &deep,
            &GbnfLimits {
                max_nesting_depth: 20_000,
                ..GbnfLimits::default()
            },
        )
        .unwrap();
        assert!(g.accepts(b"a") && g.accepts(b"b") && !g.accepts(b"ab"));
    }

    #[test]
    fn splice_a_context_free_content() {
        let skeleton = regex(&format!("a{}b", p(0)));
        let content = gbnf(r#"root ::= "(" root ")" | "x""#);
        let g = splice(&skeleton, &[(p(0), &content)], &GbnfLimits::default()).unwrap();
        for yes in ["a((x))b", "axb", "a(x)b"] {
            assert!(g.accepts(yes.as_bytes()), "{yes}\n{g}");
        }
        for no in ["a((x)b", "ab", "a()b", &format!("a{}b", p(0)), "a((x))"] {
            assert!(!g.accepts(no.as_bytes()), "{no}\n{g}");
        }
        // The content's rules are appended, prefixed; the root stays.
        assert_eq!(g.root(), skeleton.root());
        let id = g.rule_id("splice0.root").unwrap();
        assert_eq!(id.index(), skeleton.rules().len());
        assert!(g.to_string().contains("splice0.root ::="));
    }

    #[test]
    fn splice_placeholder_classes_and_mixed_classes() {
        let x = gbnf(r#"root ::= "x""#);
        let nested = gbnf(r#"root ::= "(" root ")" | "y""#);
        // A class of two placeholders: either piece.
        let skeleton = regex(&format!("a[{}{}]", p(0), p(1)));
        let g = splice(
            &skeleton,
            &[(p(0), &x), (p(1), &nested)],
            &Default::default(),
        )
        .unwrap();
        for yes in ["ax", "a(y)", "ay"] {
            assert!(g.accepts(yes.as_bytes()), "{yes}\n{g}");
        }
        for no in ["a", "axy", "a(x)"] {
            assert!(!g.accepts(no.as_bytes()), "{no}\n{g}");
        }
        // A class with other members keeps the placeholder as a character.
        let skeleton = regex("[^a]");
        let aa = gbnf(r#"root ::= "aa""#);
        let g = splice(&skeleton, &[(p(0), &aa)], &Default::default()).unwrap();
        assert!(g.accepts(p(0).to_string().as_bytes()) && g.accepts(b"b"));
        assert!(!g.accepts(b"aa"));
        // Several occurrences share one copy of the piece.
        let skeleton = regex(&format!("{0}-{0}|{0}", p(0)));
        let g = splice(&skeleton, &[(p(0), &nested)], &Default::default()).unwrap();
        assert_eq!(
            g.rules().len(),
            skeleton.rules().len() + nested.rules().len()
        );
        assert!(g.accepts(b"(y)-((y))") && g.accepts(b"y") && !g.accepts(b"y-"));
    }

    #[test]
    fn splice_checks_and_nests() {
        let x = gbnf(r#"root ::= "x""#);
        let e = splice(&regex("a"), &[(p(0), &x), (p(0), &x)], &Default::default());
        assert!(matches!(e, Err(GrammarError::InvalidSpec(_))), "{e:?}");
        let small = GbnfLimits {
            max_grammar_size: 10,
            ..GbnfLimits::default()
        };
        let big = gbnf(r#"root ::= "a" | "b" | "c" | "d" | "e" | "f""#);
        let e = splice(&regex(&p(0).to_string()), &[(p(0), &big)], &small);
        assert!(
            matches!(e, Err(GrammarError::LimitExceeded { .. })),
            "{e:?}"
        );
        // A spliced grammar spliced again: names stay unique.
        let dyck = gbnf("root ::= \"(\" root \")\" root | \"\"");
        let inner = splice(
            &regex(&format!("<{}>", p(0))),
            &[(p(0), &dyck)],
            &Default::default(),
        )
        .unwrap();
        let outer = splice(
            &splice(
                &regex(&format!("{0}|{0}{1}", p(0), p(1))),
                &[(p(0), &inner)],
                &Default::default(),
            )
            .unwrap(),
            &[(p(1), &inner)],
            &Default::default(),
        )
        .unwrap();
        let mut names: Vec<&str> = outer.rules().iter().map(|r| r.name.as_str()).collect();
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n, "{outer}");
        assert!(outer.rule_id("splice0.splice0.root").is_some(), "{outer}");
        for yes in ["<()>", "<(())()><>", "<>"] {
            assert!(outer.accepts(yes.as_bytes()), "{yes}\n{outer}");
        }
        for no in ["<(>", "<><><>", ""] {
            assert!(!outer.accepts(no.as_bytes()), "{no}\n{outer}");
        }
    }

    /// The reference reading of tagged text (as in the tests of
    /// `regular::tagged_text`): left to right, free text until a trigger
    /// begins, then a whole tag opened by it: its begin, a sentence of its
    /// content grammar, its end.
    fn tagged_reference(text: &[char], triggers: &[&str], tags: &[GrammarTag<'_>]) -> bool {
        let triggers: Vec<Vec<char>> = triggers.iter().map(|t| t.chars().collect()).collect();
        // Memo of whether the suffix from i is accepted.
        let mut memo: Vec<Option<bool>> = vec![None; text.len() + 1];
        memo[text.len()] = Some(true);
        for i in (0..text.len()).rev() {
            let ok = match triggers.iter().position(|t| text[i..].starts_with(t)) {
                None => memo[i + 1].expect("later suffixes first"),
                Some(t) => tags.iter().filter(|tag| tag.trigger == t).any(|tag| {
                    let begin: Vec<char> = tag.begin.chars().collect();
                    let end: Vec<char> = tag.end.chars().collect();
                    (i + begin.len() + end.len()..=text.len()).any(|k| {
                        let region = &text[i..k];
                        memo[k] == Some(true)
                            && region.starts_with(&begin)
                            && region.ends_with(&end)
                            && tag.content.accepts(
                                region[begin.len()..region.len() - end.len()]
                                    .iter()
                                    .collect::<String>()
                                    .as_bytes(),
                            )
                    })
                }),
            };
            memo[i] = Some(ok);
        }
        memo[0] == Some(true)
    }

    #[test]
    fn tagged_grammar_agrees_with_the_left_to_right_reading() {
        let parens = gbnf(r#"root ::= "(" root ")" | [0-9]"#);
        let anbn = gbnf(r#"root ::= "a" root "b" | """#);
        let dyck = gbnf(r#"root ::= "[" root "]" root | """#);
        let triggers = ["<f", "[[", "zz"];
        let tags = [
            GrammarTag {
                trigger: 0,
                begin: "<f",
                content: &parens,
                end: ">",
            },
            GrammarTag {
                trigger: 0,
                begin: "<fx",
                content: &anbn,
                end: ">",
            },
            GrammarTag {
                trigger: 1,
                begin: "[[",
                content: &dyck,
                end: "]]",
            },
        ];
        let g = tagged_grammar(
            &triggers,
            &tags,
            &GbnfLimits::default(),
            &RegularLimits::default(),
        )
        .unwrap();
        let check = |text: &str| {
            let chars: Vec<char> = text.chars().collect();
            let expected = tagged_reference(&chars, &triggers, &tags);
            assert_eq!(g.accepts(text.as_bytes()), expected, "{text:?}");
            expected
        };
        for yes in ["", "free <f((1))> text", "<fxaabb>[[[][]]]", "z[[]]a<f1>"] {
            assert!(check(yes), "{yes}");
        }
        for no in ["<f((1)>", "<fxaab>", "[[[]]", "zz", "<f1> <f"] {
            assert!(!check(no), "{no}");
        }
        let alphabet = [
            '<', 'f', 'x', '(', ')', '1', '>', '[', ']', 'a', 'b', 'z', 'é',
        ];
        let mut r = SplitMix64(0x7A66_ED00);
        let (mut accepted, mut tagged) = (0, 0);
        for _ in 0..2500 {
            let text: String = (0..r.below(11))
                .map(|_| alphabet[r.below(alphabet.len())])
                .collect();
            accepted += usize::from(check(&text));
        }
        // Texts built from tags, and near misses of them.
        for _ in 0..400 {
            let mut text = String::new();
            for _ in 0..1 + r.below(3) {
                for _ in 0..r.below(3) {
                    text.push(['a', 'b', 'é', ' ', '(', 'z'][r.below(6)]);
                }
                let tag = &tags[r.below(tags.len())];
                text.push_str(tag.begin);
                text.push_str(&String::from_utf8(random_sentence(tag.content, &mut r, 4)).unwrap());
                text.push_str(tag.end);
            }
            tagged += usize::from(check(&text));
            let near = mutate(text.as_bytes(), b"<f>[]()ab1", &mut r);
            if let Ok(near) = String::from_utf8(near) {
                check(&near);
            }
        }
        assert!(accepted > 300 && tagged > 300, "{accepted} / {tagged}");
    }

    #[test]
    fn tagged_grammar_rejects_bad_tags() {
        let x = gbnf(r#"root ::= "x""#);
        let tag = |trigger, begin, end| GrammarTag {
            trigger,
            begin,
            content: &x,
            end,
        };
        let limits = (GbnfLimits::default(), RegularLimits::default());
        let run = |triggers: &[&str], tags: &[GrammarTag<'_>]| {
            tagged_grammar(triggers, tags, &limits.0, &limits.1)
        };
        let bad_placeholder = format!("<{}", p(0));
        for (triggers, tags) in [
            (&["<f"][..], vec![tag(0, "<g", ">")]),
            (&["<f"], vec![tag(1, "<f", ">")]),
            (&["<f"], vec![tag(0, "<f", &bad_placeholder)]),
            (
                &[bad_placeholder.as_str()],
                vec![tag(0, &bad_placeholder, ">")],
            ),
            (&["<f", "f"], vec![tag(0, "<f", ">")]),
        ] {
            let e = run(triggers, &tags);
            assert!(
                matches!(e, Err(GrammarError::InvalidSpec(_))),
                "{triggers:?}: {e:?}"
            );
        }
        // No tags at all: free text without the triggers.
        let g = run(&["<f"], &[]).unwrap();
        assert!(g.accepts(b"abc") && !g.accepts(b"a<fb"));
    }
}
