//! Regex fragments that know their precedence, so that combinators add
//! `(?:...)` only where needed, and that carry the size figures the lowering
//! limits are checked against (text length, expanded size, AST nesting).
//!
//! [`Lang::Never`] is the empty language: it vanishes from alternations and
//! swallows sequences, which is how unsatisfiable sub-schemas (`false`, a
//! pruned recursion, an enum filtered to nothing) drop out of the result.

use hashbrown::HashSet;

/// How tightly a fragment's text binds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Prec {
    /// Matches only the empty string; the text is empty.
    Empty,
    /// One regex atom (a literal character, a class, a group): can take a
    /// quantifier as is.
    Atom,
    /// An atom with a quantifier: needs a group before another quantifier
    /// (`x{2}?` would be a lazy `x{2}`), not in a concatenation.
    Quantified,
    /// A concatenation: needs a group before a quantifier.
    Concat,
    /// An alternation: needs a group inside a concatenation too.
    Alt,
}

/// A regular language, as regex text or as the empty language.
#[derive(Clone, Debug)]
pub(crate) enum Lang {
    Never,
    Re(Rx),
}

#[derive(Clone, Debug)]
pub(crate) struct Rx {
    pub text: String,
    pub prec: Prec,
    /// Depth of the `regex-syntax` AST this text parses to (its nest limit
    /// counts groups, repetitions, alternations, concatenations and classes).
    pub nest: u32,
    /// Size of the text once counted repetitions are expanded, which is what
    /// NFA construction pays for.
    pub weight: u64,
}

impl Lang {
    pub fn empty() -> Lang {
        Lang::Re(Rx {
            text: String::new(),
            prec: Prec::Empty,
            nest: 0,
            weight: 0,
        })
    }

    /// A literal string, escaped.
    pub fn lit(s: &str) -> Lang {
        let mut chars = s.chars();
        match (chars.next(), chars.next()) {
            (None, _) => Lang::empty(),
            (Some(_), None) => Lang::Re(Rx {
                text: regex_syntax::escape(s),
                prec: Prec::Atom,
                nest: 0,
                weight: s.len() as u64,
            }),
            _ => Lang::Re(Rx {
                text: regex_syntax::escape(s),
                prec: Prec::Concat,
                nest: 1,
                weight: s.len() as u64,
            }),
        }
    }

    /// A piece of regex text; `nest` is its AST depth. Unless the text is
    /// one atom (a bracket class, a `(?:...)` group) it is wrapped in a group,
    /// so that a quantifier applies to all of it.
    pub fn atom(text: impl Into<String>, nest: u32) -> Lang {
        let text = text.into();
        let weight = text.len() as u64;
        let (text, nest) = if is_atomic(&text) {
            (text, nest)
        } else {
            (grouped(&text, 0), nest + 1)
        };
        Lang::Re(Rx {
            text,
            prec: Prec::Atom,
            nest,
            weight,
        })
    }

    pub fn is_never(&self) -> bool {
        matches!(self, Lang::Never)
    }

    pub fn text(&self) -> Option<&str> {
        match self {
            Lang::Never => None,
            Lang::Re(rx) => Some(&rx.text),
        }
    }

    pub fn len(&self) -> usize {
        self.text().map_or(0, str::len)
    }

    pub fn nest(&self) -> u32 {
        match self {
            Lang::Never => 0,
            Lang::Re(rx) => rx.nest,
        }
    }

    pub fn weight(&self) -> u64 {
        match self {
            Lang::Never => 0,
            Lang::Re(rx) => rx.weight,
        }
    }

    /// True when the language is exactly {""}.
    #[cfg(test)]
    pub fn is_empty_string(&self) -> bool {
        matches!(
            self,
            Lang::Re(Rx {
                prec: Prec::Empty,
                ..
            })
        )
    }
}

/// Whether `text` is a single bracket class or a single group.
fn is_atomic(text: &str) -> bool {
    let bytes = text.as_bytes();
    let (open, close) = match bytes.first() {
        Some(b'[') => (b'[', b']'),
        Some(b'(') => (b'(', b')'),
        _ => return false,
    };
    let mut depth = 0usize;
    let mut class_depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'\\' {
            i += 2;
            continue;
        }
        if open == b'(' {
            // Parentheses inside a class are literals.
            match b {
                b'[' => class_depth += 1,
                b']' if class_depth > 0 => class_depth -= 1,
                b'(' if class_depth == 0 => depth += 1,
                b')' if class_depth == 0 => depth -= 1,
                _ => {}
            }
        } else if b == open {
            depth += 1;
        } else if b == close {
            depth -= 1;
        }
        if depth == 0 {
            return i == bytes.len() - 1 && b == close;
        }
        i += 1;
    }
    false
}

/// The concatenation of `parts`.
pub(crate) fn seq(parts: impl IntoIterator<Item = Lang>) -> Lang {
    let mut kept: Vec<Rx> = Vec::new();
    for part in parts {
        match part {
            Lang::Never => return Lang::Never,
            Lang::Re(rx) if rx.prec == Prec::Empty => {}
            Lang::Re(rx) => kept.push(rx),
        }
    }
    match kept.len() {
        0 => Lang::empty(),
        1 => Lang::Re(kept.pop().expect("one part")),
        _ => {
            let mut text = String::with_capacity(kept.iter().map(|r| r.text.len() + 4).sum());
            let mut nest = 0;
            let mut weight = 0;
            for rx in kept {
                weight += rx.weight;
                if rx.prec == Prec::Alt {
                    text.push_str("(?:");
                    text.push_str(&rx.text);
                    text.push(')');
                    nest = nest.max(rx.nest + 1);
                } else {
                    text.push_str(&rx.text);
                    // A concatenation inside a concatenation is flattened by
                    // the parser, so it does not add a level.
                    nest = nest.max(if rx.prec == Prec::Concat {
                        rx.nest.saturating_sub(1)
                    } else {
                        rx.nest
                    });
                }
            }
            Lang::Re(Rx {
                text,
                prec: Prec::Concat,
                nest: nest + 1,
                weight,
            })
        }
    }
}

/// The union of `parts` (duplicates removed).
pub(crate) fn alt(parts: impl IntoIterator<Item = Lang>) -> Lang {
    let mut kept: Vec<Rx> = Vec::new();
    let mut has_empty = false;
    for part in parts {
        match part {
            Lang::Never => {}
            Lang::Re(rx) if rx.prec == Prec::Empty => has_empty = true,
            Lang::Re(rx) => kept.push(rx),
        }
    }
    // Duplicates by text, without copying the texts (a key complement's
    // trie nests a dozen alternations: copies at every level were most of
    // its cost).
    if kept.len() > 1 {
        let first: Vec<bool> = {
            let mut seen: HashSet<&str> = HashSet::with_capacity(kept.len());
            kept.iter()
                .map(|rx| seen.insert(rx.text.as_str()))
                .collect()
        };
        if first.iter().any(|&f| !f) {
            let mut keep = first.into_iter();
            kept.retain(|_| keep.next().unwrap_or(false));
        }
    }
    let body = match kept.len() {
        0 => {
            return if has_empty {
                Lang::empty()
            } else {
                Lang::Never
            };
        }
        1 => Lang::Re(kept.pop().expect("one part")),
        _ => {
            let mut text = String::with_capacity(kept.iter().map(|r| r.text.len() + 1).sum());
            let mut nest = 0;
            let mut weight = 0;
            for (i, rx) in kept.into_iter().enumerate() {
                if i > 0 {
                    text.push('|');
                }
                text.push_str(&rx.text);
                weight += rx.weight;
                nest = nest.max(if rx.prec == Prec::Alt {
                    rx.nest.saturating_sub(1)
                } else {
                    rx.nest
                });
            }
            Lang::Re(Rx {
                text,
                prec: Prec::Alt,
                nest: nest + 1,
                weight,
            })
        }
    };
    if has_empty { opt(body) } else { body }
}

/// `x{min,max}` (`max = None`: unbounded).
pub(crate) fn repeat(x: Lang, min: u32, max: Option<u32>) -> Lang {
    if max == Some(0) {
        return Lang::empty();
    }
    if let Some(max) = max {
        debug_assert!(min <= max);
    }
    let rx = match x {
        Lang::Never => return if min == 0 { Lang::empty() } else { Lang::Never },
        Lang::Re(rx) if rx.prec == Prec::Empty => return Lang::empty(),
        Lang::Re(rx) => rx,
    };
    if min == 1 && max == Some(1) {
        return Lang::Re(rx);
    }
    // Room for the widest quantifier, `{m,n}` of two u32.
    const QUANTIFIER: usize = 23;
    let (mut text, mut nest) = if rx.prec == Prec::Atom {
        let mut text = rx.text;
        text.reserve(QUANTIFIER);
        (text, rx.nest)
    } else {
        (grouped(&rx.text, QUANTIFIER), rx.nest + 1)
    };
    nest += 1;
    let number = |n: u32, text: &mut String| {
        use std::fmt::Write;
        write!(text, "{n}").expect("a String takes any text");
    };
    match (min, max) {
        (0, Some(1)) => text.push('?'),
        (0, None) => text.push('*'),
        (1, None) => text.push('+'),
        (m, max) => {
            text.push('{');
            number(m, &mut text);
            match max {
                Some(n) if n == m => {}
                Some(n) => {
                    text.push(',');
                    number(n, &mut text);
                }
                None => text.push(','),
            }
            text.push('}');
        }
    }
    let copies = match max {
        Some(n) => u64::from(n.max(1)),
        None => u64::from(min.max(1)) + 1,
    };
    Lang::Re(Rx {
        text,
        prec: Prec::Quantified,
        nest,
        weight: rx.weight.saturating_mul(copies),
    })
}

/// `(?:text)` in a string of its size and `room` bytes more: written
/// without the formatting machinery, whose first guess of the size is the
/// literal parts', so that a long text grew by copies.
fn grouped(text: &str, room: usize) -> String {
    let mut out = String::with_capacity(text.len() + 4 + room);
    out.push_str("(?:");
    out.push_str(text);
    out.push(')');
    out
}

/// `x?`
pub(crate) fn opt(x: Lang) -> Lang {
    repeat(x, 0, Some(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(l: &Lang) -> &str {
        l.text().expect("not never")
    }

    #[test]
    fn combinators_group_only_where_needed() {
        let a = Lang::lit("a");
        let bc = Lang::lit("bc");
        assert_eq!(t(&seq([a.clone(), bc.clone()])), "abc");
        assert_eq!(t(&alt([a.clone(), bc.clone()])), "a|bc");
        assert_eq!(
            t(&seq([alt([a.clone(), bc.clone()]), a.clone()])),
            "(?:a|bc)a"
        );
        assert_eq!(t(&opt(bc.clone())), "(?:bc)?");
        assert_eq!(t(&repeat(a.clone(), 2, Some(5))), "a{2,5}");
        assert_eq!(t(&opt(repeat(a.clone(), 2, Some(5)))), "(?:a{2,5})?");
        assert_eq!(
            t(&seq([repeat(a.clone(), 2, Some(5)), a.clone()])),
            "a{2,5}a"
        );
        assert_eq!(t(&alt([a.clone(), Lang::empty()])), "a?");
        assert_eq!(t(&alt([a.clone(), a.clone()])), "a");
        assert_eq!(t(&Lang::lit("{.}")), r"\{\.\}");
        assert_eq!(t(&opt(Lang::atom("[0-9]+", 2))), "(?:[0-9]+)?");
        assert_eq!(t(&opt(Lang::atom("[a-z]", 1))), "[a-z]?");
        assert_eq!(t(&opt(Lang::atom("[a-z][0-9]", 1))), "(?:[a-z][0-9])?");
        assert_eq!(t(&opt(Lang::atom("(?:a|b)", 1))), "(?:a|b)?");
        assert_eq!(t(&opt(Lang::atom("(?:a)(?:b)", 1))), "(?:(?:a)(?:b))?");
        assert_eq!(t(&opt(Lang::atom("[\\]x]", 1))), "[\\]x]?");
    }

    #[test]
    fn never_vanishes_and_swallows() {
        let a = Lang::lit("a");
        assert!(seq([a.clone(), Lang::Never]).is_never());
        assert_eq!(t(&alt([a.clone(), Lang::Never])), "a");
        assert!(alt([Lang::Never, Lang::Never]).is_never());
        assert!(opt(Lang::Never).is_empty_string());
        assert!(repeat(Lang::Never, 1, None).is_never());
    }

    #[test]
    fn nest_matches_regex_syntax_depth() {
        // regex-syntax rejects nesting beyond its limit; our estimate must not
        // be lower than the real depth.
        let mut x = Lang::lit("a");
        for _ in 0..40 {
            x = opt(seq([Lang::lit("b"), alt([x, Lang::lit("cd")])]));
        }
        let real = regex_syntax::ParserBuilder::new()
            .nest_limit(x.nest())
            .build()
            .parse(t(&x));
        assert!(real.is_ok(), "estimate {} too low", x.nest());
    }
}
