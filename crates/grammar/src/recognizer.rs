//! The reference recognizer: [`Grammar::accepts`], a plain Earley parser
//! over bytes. It is the **test oracle**, written to be obviously right, not
//! fast (cubic time, a hash set per input position, no token trie, no
//! rollback); the production matcher is separate and is checked against it.
//!
//! The grammar is first lowered to bytes: a literal becomes its UTF-8 bytes,
//! a class becomes a rule whose alternatives are the class's UTF-8
//! byte-range sequences ([`CharClass::utf8_sequences`]). Empty rules are
//! handled the Aycock–Horspool way: predicting a nullable rule also moves the
//! dot past it, so completions never have to look back into the set being
//! built.
//!
//! [`CharClass::utf8_sequences`]: crate::grammar::CharClass::utf8_sequences

use std::collections::HashSet;

use crate::grammar::{ByteRange, Grammar, Symbol};

#[derive(Debug, Clone, Copy)]
enum ByteSymbol {
    Byte(ByteRange),
    Rule(usize),
}

/// A grammar over bytes; rule `i < grammar.rules().len()` is the grammar's
/// rule `i`, later ones stand for character classes.
struct ByteGrammar {
    rules: Vec<Vec<Vec<ByteSymbol>>>,
    nullable: Vec<bool>,
}

impl ByteGrammar {
    fn new(grammar: &Grammar) -> Self {
        let mut rules: Vec<Vec<Vec<ByteSymbol>>> = vec![Vec::new(); grammar.rules().len()];
        let mut lowered = Vec::with_capacity(grammar.rules().len());
        for rule in grammar.rules() {
            let mut alternatives = Vec::with_capacity(rule.alternatives.len());
            for alt in &rule.alternatives {
                let mut seq = Vec::new();
                for sym in alt {
                    match sym {
                        Symbol::Literal(bytes) => seq.extend(
                            bytes
                                .iter()
                                .map(|&b| ByteSymbol::Byte(ByteRange { start: b, end: b })),
                        ),
                        Symbol::Class(class) => {
                            let id = rules.len();
                            rules.push(
                                class
                                    .utf8_sequences()
                                    .into_iter()
                                    .map(|s| s.into_iter().map(ByteSymbol::Byte).collect())
                                    .collect(),
                            );
                            seq.push(ByteSymbol::Rule(id));
                        }
                        Symbol::NonTerminal(id) => seq.push(ByteSymbol::Rule(id.index())),
                    }
                }
                alternatives.push(seq);
            }
            lowered.push(alternatives);
        }
        for (i, alternatives) in lowered.into_iter().enumerate() {
            rules[i] = alternatives;
        }
        let mut nullable = grammar.nullable();
        nullable.resize(rules.len(), false);
        ByteGrammar { rules, nullable }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Item {
    rule: usize,
    alt: usize,
    dot: usize,
    origin: usize,
}

impl Item {
    fn advance(self) -> Item {
        Item {
            dot: self.dot + 1,
            ..self
        }
    }
}

#[derive(Default)]
struct EarleySet {
    items: Vec<Item>,
    seen: HashSet<Item>,
}

impl EarleySet {
    fn add(&mut self, item: Item) {
        if self.seen.insert(item) {
            self.items.push(item);
        }
    }
}

impl Grammar {
    /// Whether `input` is a sentence of the grammar (from its root), by a
    /// plain Earley recognizer over bytes. This is the test oracle: simple
    /// and slow (cubic in the worst case); do not use it to constrain
    /// decoding.
    pub fn accepts(&self, input: &[u8]) -> bool {
        let g = ByteGrammar::new(self);
        let root = self.root().index();
        let Some(sets) = chart(&g, root, input) else {
            return false;
        };
        sets[input.len()].items.iter().any(|item| {
            item.rule == root && item.origin == 0 && item.dot == g.rules[root][item.alt].len()
        })
    }

    /// Whether `input` is a prefix of some sentence of the grammar (a
    /// sentence itself included): the text a matcher may have accepted so
    /// far. Sound because every rule of a grammar can finish (the GBNF
    /// parser rejects those that cannot), so an Earley set that is not
    /// empty after the last byte always leads to a sentence. The same
    /// oracle as [`accepts`](Self::accepts), just as slow.
    pub fn accepts_prefix(&self, input: &[u8]) -> bool {
        let g = ByteGrammar::new(self);
        chart(&g, self.root().index(), input).is_some()
    }
}

impl Grammar {
    /// The bytes that may follow `input` in a sentence (`None` when `input`
    /// is not a prefix of one): one chart for all 256 bytes, where
    /// [`accepts_prefix`](Self::accepts_prefix) would take one each. Sound
    /// for the same reason.
    pub fn next_bytes(&self, input: &[u8]) -> Option<[bool; 256]> {
        let g = ByteGrammar::new(self);
        let sets = chart(&g, self.root().index(), input)?;
        let mut next = [false; 256];
        for item in &sets[input.len()].items {
            if let Some(ByteSymbol::Byte(range)) = g.rules[item.rule][item.alt].get(item.dot) {
                for b in range.start..=range.end {
                    next[b as usize] = true;
                }
            }
        }
        Some(next)
    }
}

/// The Earley sets of `input` from `root`, or `None` once a byte leaves
/// the next set empty (no sentence starts with the input so far).
fn chart(g: &ByteGrammar, root: usize, input: &[u8]) -> Option<Vec<EarleySet>> {
    let mut sets: Vec<EarleySet> = (0..=input.len()).map(|_| EarleySet::default()).collect();
    for alt in 0..g.rules[root].len() {
        sets[0].add(Item {
            rule: root,
            alt,
            dot: 0,
            origin: 0,
        });
    }
    for i in 0..=input.len() {
        let mut k = 0;
        while k < sets[i].items.len() {
            let item = sets[i].items[k];
            k += 1;
            let seq = &g.rules[item.rule][item.alt];
            match seq.get(item.dot) {
                None => {
                    let waiting: Vec<Item> = sets[item.origin]
                        .items
                        .iter()
                        .filter(|p| {
                            matches!(
                                g.rules[p.rule][p.alt].get(p.dot),
                                Some(ByteSymbol::Rule(r)) if *r == item.rule
                            )
                        })
                        .copied()
                        .collect();
                    for parent in waiting {
                        sets[i].add(parent.advance());
                    }
                }
                Some(&ByteSymbol::Rule(r)) => {
                    for alt in 0..g.rules[r].len() {
                        sets[i].add(Item {
                            rule: r,
                            alt,
                            dot: 0,
                            origin: i,
                        });
                    }
                    if g.nullable[r] {
                        sets[i].add(item.advance());
                    }
                }
                Some(&ByteSymbol::Byte(range)) => {
                    if i < input.len() && range.contains(input[i]) {
                        sets[i + 1].add(item.advance());
                    }
                }
            }
        }
        if i < input.len() && sets[i + 1].items.is_empty() {
            return None;
        }
    }
    Some(sets)
}

#[cfg(test)]
mod tests {
    use crate::Grammar;

    #[test]
    fn prefixes_of_sentences_and_only_those() {
        let g = Grammar::from_gbnf(r#"root ::= "(" root ")" | "é" | """#, "root").unwrap();
        for yes in [
            &b""[..],
            b"(",
            b"((",
            b"(()",
            b"(\xC3",
            b"(\xC3\xA9)",
            b"()",
        ] {
            assert!(g.accepts_prefix(yes), "{yes:?}");
        }
        for no in [&b")"[..], b"())", b"(\xA9", b"\xC3(", b"x"] {
            assert!(!g.accepts_prefix(no), "{no:?}");
        }
        assert!(g.accepts(b"(())") && !g.accepts(b"(("));
        for text in [&b""[..], b"(", b"(\xC3", b"()", b")", b"(\xC3\xA9)"] {
            let next = g.next_bytes(text);
            assert_eq!(next.is_some(), g.accepts_prefix(text), "{text:?}");
            for b in 0..=255u8 {
                let mut more = text.to_vec();
                more.push(b);
                let expected = g.accepts_prefix(&more);
                assert_eq!(next.is_some_and(|n| n[b as usize]), expected, "{more:?}");
            }
        }
    }
}
