//! The grammar IR: a plain context-free grammar over Unicode scalar values,
//! the form every front end (GBNF today) lowers to and the matcher consumes.
//!
//! A [`Grammar`] is a list of [`Rule`]s indexed by [`RuleId`]; a rule is a
//! list of alternatives, an alternative a sequence of [`Symbol`]s. There is
//! no repetition, grouping or optionality here: front ends desugar them into
//! helper rules, so a matcher only ever sees terminals and rule references.
//!
//! Terminals are strings ([`Symbol::Literal`], stored as UTF-8 bytes) and
//! character classes ([`Symbol::Class`], sets of code points). A matcher that
//! walks bytes gets a class as UTF-8 byte-range sequences from
//! [`CharClass::utf8_sequences`].

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use regex_syntax::hir::{ClassUnicode, ClassUnicodeRange};
use regex_syntax::utf8::Utf8Sequences;

/// The index of a rule in [`Grammar::rules`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuleId(pub u32);

impl RuleId {
    /// The position of the rule in [`Grammar::rules`].
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for RuleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// An inclusive range of bytes, one step of a UTF-8 sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ByteRange {
    pub start: u8,
    pub end: u8,
}

impl ByteRange {
    pub fn contains(self, byte: u8) -> bool {
        self.start <= byte && byte <= self.end
    }
}

/// A non-empty set of Unicode scalar values, kept as sorted, disjoint,
/// non-adjacent inclusive ranges. Cloning is cheap (the ranges are shared),
/// which matters when `{m,n}` copies a class `m` times.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CharClass {
    ranges: Arc<[(char, char)]>,
}

impl CharClass {
    /// The class of the given inclusive ranges (in any order, overlapping or
    /// not), or of their complement when `negated`. `None` when the result
    /// holds no character at all. A range given as `(hi, lo)` is read as
    /// `(lo, hi)`; the GBNF parser rejects inverted ranges before this.
    pub fn new(ranges: impl IntoIterator<Item = (char, char)>, negated: bool) -> Option<Self> {
        let mut class = ClassUnicode::new(
            ranges
                .into_iter()
                .map(|(lo, hi)| ClassUnicodeRange::new(lo, hi)),
        );
        if negated {
            class.negate();
        }
        let ranges: Arc<[(char, char)]> = class
            .ranges()
            .iter()
            .map(|r| (r.start(), r.end()))
            .collect();
        (!ranges.is_empty()).then_some(CharClass { ranges })
    }

    /// One character.
    pub fn single(c: char) -> Self {
        CharClass {
            ranges: Arc::new([(c, c)]),
        }
    }

    /// Every Unicode scalar value (GBNF's `.`). As everywhere, a range
    /// spanning the surrogate block means the scalar values in it (a `char`
    /// cannot be a surrogate, and the UTF-8 sequences skip them).
    pub fn any() -> Self {
        CharClass {
            ranges: Arc::new([('\0', char::MAX)]),
        }
    }

    /// The sorted, disjoint, non-adjacent inclusive ranges.
    pub fn ranges(&self) -> &[(char, char)] {
        &self.ranges
    }

    pub fn contains(&self, c: char) -> bool {
        self.ranges
            .binary_search_by(|&(lo, hi)| {
                if hi < c {
                    std::cmp::Ordering::Less
                } else if lo > c {
                    std::cmp::Ordering::Greater
                } else {
                    std::cmp::Ordering::Equal
                }
            })
            .is_ok()
    }

    /// The class as alternatives of byte-range sequences: a byte string is
    /// the UTF-8 encoding of a member iff it matches exactly one of the
    /// returned sequences (they are disjoint). Each sequence is 1 to 4 ranges
    /// long. This is `regex_syntax::utf8::Utf8Sequences` over every range.
    pub fn utf8_sequences(&self) -> Vec<Vec<ByteRange>> {
        let mut out = Vec::new();
        for &(lo, hi) in self.ranges.iter() {
            for seq in Utf8Sequences::new(lo, hi) {
                out.push(
                    seq.as_slice()
                        .iter()
                        .map(|r| ByteRange {
                            start: r.start,
                            end: r.end,
                        })
                        .collect(),
                );
            }
        }
        out
    }
}

impl fmt::Display for CharClass {
    /// GBNF syntax, e.g. `[a-z_]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for &(lo, hi) in self.ranges.iter() {
            write_class_char(f, lo)?;
            if hi != lo {
                f.write_str("-")?;
                write_class_char(f, hi)?;
            }
        }
        f.write_str("]")
    }
}

fn write_class_char(f: &mut fmt::Formatter<'_>, c: char) -> fmt::Result {
    match c {
        '\\' | ']' | '[' | '-' | '^' => write!(f, "\\{c}"),
        _ => write_escaped(f, c),
    }
}

fn write_escaped(f: &mut fmt::Formatter<'_>, c: char) -> fmt::Result {
    match c {
        '\n' => f.write_str("\\n"),
        '\r' => f.write_str("\\r"),
        '\t' => f.write_str("\\t"),
        c if c.is_control() => write!(f, "\\x{:02X}", c as u32),
        // Private use and noncharacters have no glyph worth printing.
        c if matches!(c as u32, 0xE000..=0xF8FF | 0xFFF0..=0xFFFF | 0xF0000..) => {
            if (c as u32) <= 0xFFFF {
                write!(f, "\\u{:04X}", c as u32)
            } else {
                write!(f, "\\U{:08X}", c as u32)
            }
        }
        c => write!(f, "{c}"),
    }
}

/// One element of an alternative.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Symbol {
    /// A non-empty string, as its UTF-8 bytes (always valid UTF-8).
    Literal(Arc<[u8]>),
    /// Any one character of the class (one to four UTF-8 bytes).
    Class(CharClass),
    /// A reference to a rule.
    NonTerminal(RuleId),
}

impl Symbol {
    pub fn is_terminal(&self) -> bool {
        !matches!(self, Symbol::NonTerminal(_))
    }
}

/// A sequence of symbols; the empty sequence matches the empty string.
pub type Alternative = Vec<Symbol>;

/// Where a rule comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleOrigin {
    /// Written by the user; the 1-based line and column of its name.
    Defined { line: usize, column: usize },
    /// Made by the front end for a group or repetition inside `parent` (a
    /// user-defined rule).
    Helper { parent: RuleId },
}

/// A rule: a name and its alternatives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// The user's name, or `parent_N` for helper rules (`_` cannot appear in
    /// a GBNF name, so helper names never clash with the user's).
    pub name: String,
    pub alternatives: Vec<Alternative>,
    pub origin: RuleOrigin,
}

/// A validated context-free grammar: every referenced rule exists, the root
/// exists, every rule can produce at least one finite string, and every
/// character class is non-empty. Rules the root cannot reach are kept (and
/// were validated) but play no part in the language.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grammar {
    pub(crate) rules: Vec<Rule>,
    pub(crate) root: RuleId,
    pub(crate) names: HashMap<String, RuleId>,
}

impl Grammar {
    /// Parses a GBNF grammar (llama.cpp syntax) with [`GbnfLimits::default`]
    /// and `root` as the start rule. See [`crate::gbnf`] for the syntax.
    ///
    /// [`GbnfLimits::default`]: crate::gbnf::GbnfLimits
    pub fn from_gbnf(text: &str, root: &str) -> Result<Grammar, tokensieve_core::GrammarError> {
        crate::gbnf::parse(text, root, &crate::gbnf::GbnfLimits::default())
    }

    /// All rules, user-defined and helper, indexed by [`RuleId`].
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    pub fn rule(&self, id: RuleId) -> &Rule {
        &self.rules[id.index()]
    }

    /// The start rule.
    pub fn root(&self) -> RuleId {
        self.root
    }

    /// The id of a user-defined rule.
    pub fn rule_id(&self, name: &str) -> Option<RuleId> {
        self.names.get(name).copied()
    }

    /// User-defined rule names and their ids (in no particular order).
    pub fn names(&self) -> impl Iterator<Item = (&str, RuleId)> {
        self.names.iter().map(|(n, &id)| (n.as_str(), id))
    }

    /// Total size: one per alternative plus one per symbol. This is what
    /// [`GbnfLimits::max_grammar_size`](crate::gbnf::GbnfLimits) bounds.
    pub fn size(&self) -> usize {
        self.rules
            .iter()
            .flat_map(|r| &r.alternatives)
            .map(|a| 1 + a.len())
            .sum()
    }

    /// Which rules can derive the empty string.
    pub fn nullable(&self) -> Vec<bool> {
        // Literals and classes are never empty, so only rules can vanish.
        self.rules_where(|_| false)
    }

    /// The least set of rules with an alternative whose every symbol is a
    /// terminal `terminal_ok` accepts or a rule in the set; linear in the
    /// grammar size (a count of pending symbols per alternative, not
    /// repeated passes, which would be quadratic on long rule chains).
    pub(crate) fn rules_where(&self, terminal_ok: impl Fn(&Symbol) -> bool) -> Vec<bool> {
        let mut holds = vec![false; self.rules.len()];
        // Per alternative: its rule and how many of its symbols are pending.
        let mut alt_rule: Vec<usize> = Vec::new();
        let mut pending: Vec<usize> = Vec::new();
        // Per rule: the alternatives it occurs in, once per occurrence.
        let mut occurs_in: Vec<Vec<usize>> = vec![Vec::new(); self.rules.len()];
        let mut queue: Vec<usize> = Vec::new();
        for (r, rule) in self.rules.iter().enumerate() {
            for alt in &rule.alternatives {
                let id = alt_rule.len();
                alt_rule.push(r);
                let mut count = 0;
                let mut possible = true;
                for sym in alt {
                    match sym {
                        Symbol::NonTerminal(t) => {
                            occurs_in[t.index()].push(id);
                            count += 1;
                        }
                        terminal => possible &= terminal_ok(terminal),
                    }
                }
                pending.push(if possible { count } else { usize::MAX });
                if possible && count == 0 && !holds[r] {
                    holds[r] = true;
                    queue.push(r);
                }
            }
        }
        while let Some(r) = queue.pop() {
            for &alt in &occurs_in[r] {
                if pending[alt] == usize::MAX {
                    continue;
                }
                pending[alt] -= 1;
                let owner = alt_rule[alt];
                if pending[alt] == 0 && !holds[owner] {
                    holds[owner] = true;
                    queue.push(owner);
                }
            }
        }
        holds
    }
}

impl fmt::Display for Grammar {
    /// The grammar back in GBNF syntax, helper rules included, one rule per
    /// line (helper names contain `_`, so the output is for reading, not for
    /// parsing again).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for rule in &self.rules {
            write!(f, "{} ::=", rule.name)?;
            for (i, alt) in rule.alternatives.iter().enumerate() {
                if i > 0 {
                    f.write_str(" |")?;
                }
                if alt.is_empty() {
                    f.write_str(" \"\"")?;
                }
                for sym in alt {
                    f.write_str(" ")?;
                    match sym {
                        Symbol::Literal(bytes) => {
                            f.write_str("\"")?;
                            for c in String::from_utf8_lossy(bytes).chars() {
                                match c {
                                    '"' | '\\' => write!(f, "\\{c}")?,
                                    _ => write_escaped(f, c)?,
                                }
                            }
                            f.write_str("\"")?;
                        }
                        Symbol::Class(class) => write!(f, "{class}")?,
                        Symbol::NonTerminal(id) => f.write_str(&self.rule(*id).name)?,
                    }
                }
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decodes `bytes` through the sequences, as a byte-walking matcher
    /// would: exactly one sequence must match.
    fn matching_sequences(class: &CharClass, bytes: &[u8]) -> usize {
        class
            .utf8_sequences()
            .iter()
            .filter(|seq| {
                seq.len() == bytes.len() && seq.iter().zip(bytes).all(|(r, &b)| r.contains(b))
            })
            .count()
    }

    #[test]
    fn utf8_sequences_cover_exactly_the_class() {
        let class = CharClass::new([('a', 'z'), ('é', 'é'), ('\u{7FF}', '\u{10000}')], true)
            .expect("non-empty");
        for c in [
            'a',
            'z',
            'é',
            '\u{800}',
            '\u{D7FF}',
            '\u{E000}',
            '\u{10000}',
            'A',
            'è',
            '\u{10001}',
            char::MAX,
        ] {
            let mut buf = [0; 4];
            let bytes = c.encode_utf8(&mut buf).as_bytes();
            assert_eq!(
                matching_sequences(&class, bytes),
                usize::from(class.contains(c)),
                "{c:?}"
            );
        }
        // Surrogates are not characters: their would-be encodings match nothing.
        assert_eq!(matching_sequences(&CharClass::any(), b"\xED\xA0\x80"), 0);
        assert_eq!(matching_sequences(&CharClass::any(), b"\xC0\x80"), 0);
        assert!(CharClass::new([('\0', char::MAX)], true).is_none());
    }

    #[test]
    fn nullable_rules() {
        let g = Grammar::from_gbnf(
            "root ::= a b\na ::= \"\" | \"x\"\nb ::= a a | \"y\"",
            "root",
        )
        .unwrap();
        let nullable = g.nullable();
        for name in ["root", "a", "b"] {
            assert!(nullable[g.rule_id(name).unwrap().index()], "{name}");
        }
        let g = Grammar::from_gbnf("root ::= a*\na ::= \"x\"", "root").unwrap();
        assert!(nullable_of(&g, "root") && !nullable_of(&g, "a"));
    }

    fn nullable_of(g: &Grammar, name: &str) -> bool {
        g.nullable()[g.rule_id(name).unwrap().index()]
    }
}
