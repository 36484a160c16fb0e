//! Repetitions lifted over what comes before them in an alternative, so
//! that a repetition starts where its alternative starts.
//!
//! A repetition lowers to a left-recursive rule, `S ::= z | S y` (`z`
//! empty for `y*`, `y` for `y+`). In `A ::= x S`, `S` starts where `x`
//! ends; where `x` may end at several places (`[a-z]+` that may follow
//! itself, a lexeme that may be empty), every one of them is an origin of
//! its own: after `x a b c`, the items waiting in `S` for the next `y`
//! come once per split of the letters, every later byte of the word adds
//! one more, and every closure after a lexeme completes into all of them.
//! A mask walk meets such a word at every trie node of every token made
//! of letters: with `seq ::= item (ws item)*`, `ws ::= [ \t]*`, `item ::=
//! [a-z]+ | "(" seq ")"`, the first mask was past twenty million item
//! operations.
//!
//! Rewritten as `A ::= T`, `T ::= x z | T y`, the repetition's items start
//! where `x` starts, whatever its splits: every split completes into the
//! same items, and the closures after them are the same closure (the walk
//! shares it). The language is the same; only the derivations change.

use hashbrown::HashMap;

use crate::parser::Sym;

/// A left-recursive rule of two alternatives, `S ::= base | S step`, with
/// `S` in neither `base` nor `step`.
struct Repetition {
    base: Vec<Sym>,
    step: Vec<Sym>,
}

/// The symbols of the alternative starting at `start` (its `End` left out).
fn alternative(syms: &[Sym], start: u32) -> &[Sym] {
    let rest = &syms[start as usize..];
    let end = rest
        .iter()
        .position(|s| matches!(s, Sym::End(_)))
        .expect("every alternative ends");
    &rest[..end]
}

/// The repetition rule `rule` is, if it is one.
fn repetition(syms: &[Sym], alts: &[Vec<u32>], rule: u32) -> Option<Repetition> {
    let [a, b] = alts[rule as usize][..] else {
        return None;
    };
    let (a, b) = (alternative(syms, a), alternative(syms, b));
    let recursive = |alt: &[Sym]| alt.first() == Some(&Sym::Rule(rule));
    let (base, step) = match (recursive(a), recursive(b)) {
        (false, true) => (a, &b[1..]),
        (true, false) => (b, &a[1..]),
        _ => return None,
    };
    let mentions = |part: &[Sym]| part.contains(&Sym::Rule(rule));
    if step.is_empty() || mentions(base) || mentions(step) {
        return None;
    }
    Some(Repetition {
        base: base.to_vec(),
        step: step.to_vec(),
    })
}

/// Rewrites every alternative `x S w` (`x` not empty, `S` a repetition,
/// the alternative not one of a repetition) as `T w` with a new rule
/// `T ::= x base | T step`, left to right (`x S1 v S2` becomes `T2`, with
/// `T2 ::= T1 v base2 | T2 step2`). New rules and alternatives are added
/// at the end; the alternatives they replace are left unreferenced.
/// `nullable_lexeme` tells whether a lexeme matches the empty string.
pub(crate) fn lift_repetitions(
    syms: &mut Vec<Sym>,
    alts: &mut Vec<Vec<u32>>,
    nullable: &mut Vec<bool>,
    nullable_lexeme: impl Fn(u32) -> bool,
) {
    let rules = alts.len() as u32;
    let repetitions: HashMap<u32, Repetition> = (0..rules)
        .filter_map(|r| repetition(syms, alts, r).map(|rep| (r, rep)))
        .collect();
    if repetitions.is_empty() {
        return;
    }
    let nullable_sym = |nullable: &[bool], s: &Sym| match *s {
        Sym::Lex(l) => nullable_lexeme(l),
        Sym::Rule(r) => nullable[r as usize],
        Sym::End(_) => unreachable!("an alternative's symbols hold no end"),
    };
    for rule in 0..rules {
        if repetitions.contains_key(&rule) {
            continue;
        }
        for k in 0..alts[rule as usize].len() {
            let old = alternative(syms, alts[rule as usize][k]).to_vec();
            let mut lifted: Vec<Sym> = Vec::with_capacity(old.len());
            for sym in old.iter() {
                let rep = match sym {
                    Sym::Rule(s) if !lifted.is_empty() => repetitions.get(s),
                    _ => None,
                };
                let Some(rep) = rep else {
                    lifted.push(*sym);
                    continue;
                };
                let t = alts.len() as u32;
                let first = syms.len() as u32;
                syms.extend(lifted.iter().chain(&rep.base).copied());
                syms.push(Sym::End(t));
                let second = syms.len() as u32;
                syms.push(Sym::Rule(t));
                syms.extend(rep.step.iter().copied());
                syms.push(Sym::End(t));
                let t_nullable = lifted
                    .iter()
                    .chain(&rep.base)
                    .all(|s| nullable_sym(nullable, s));
                alts.push(vec![first, second]);
                nullable.push(t_nullable);
                lifted.clear();
                lifted.push(Sym::Rule(t));
            }
            if lifted != old {
                alts[rule as usize][k] = syms.len() as u32;
                syms.extend(lifted);
                syms.push(Sym::End(rule));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A flat grammar from rules written as lists of alternatives.
    fn flat(rules: &[&[&[Sym]]]) -> (Vec<Sym>, Vec<Vec<u32>>) {
        let mut syms = Vec::new();
        let mut alts = Vec::new();
        for (r, rule) in rules.iter().enumerate() {
            let mut starts = Vec::new();
            for alt in rule.iter() {
                starts.push(syms.len() as u32);
                syms.extend(alt.iter().copied());
                syms.push(Sym::End(r as u32));
            }
            alts.push(starts);
        }
        (syms, alts)
    }

    fn rule_alts(syms: &[Sym], alts: &[Vec<u32>], r: usize) -> Vec<Vec<Sym>> {
        alts[r]
            .iter()
            .map(|&s| alternative(syms, s).to_vec())
            .collect()
    }

    use Sym::{Lex, Rule};

    #[test]
    fn a_star_after_a_prefix_becomes_a_rule_starting_with_the_prefix() {
        // 0: seq ::= L0 S    1: S ::= "" | S L1 L0
        let (mut syms, mut alts) =
            flat(&[&[&[Lex(0), Rule(1)]], &[&[], &[Rule(1), Lex(1), Lex(0)]]]);
        let mut nullable = vec![false, true];
        lift_repetitions(&mut syms, &mut alts, &mut nullable, |l| l == 1);
        assert_eq!(rule_alts(&syms, &alts, 0), vec![vec![Rule(2)]]);
        assert_eq!(
            rule_alts(&syms, &alts, 2),
            vec![vec![Lex(0)], vec![Rule(2), Lex(1), Lex(0)]]
        );
        assert_eq!(nullable, vec![false, true, false]);
        // The repetition itself is left as it was.
        assert_eq!(
            rule_alts(&syms, &alts, 1),
            vec![vec![], vec![Rule(1), Lex(1), Lex(0)]]
        );
    }

    #[test]
    fn two_repetitions_in_one_alternative_nest_and_the_rest_stays() {
        // 0: a ::= L0 P L1 S L2   1: P ::= L3 | P L3   2: S ::= "" | S L4
        let (mut syms, mut alts) = flat(&[
            &[&[Lex(0), Rule(1), Lex(1), Rule(2), Lex(2)]],
            &[&[Lex(3)], &[Rule(1), Lex(3)]],
            &[&[], &[Rule(2), Lex(4)]],
        ]);
        let mut nullable = vec![false, false, true];
        lift_repetitions(&mut syms, &mut alts, &mut nullable, |l| l == 1);
        assert_eq!(rule_alts(&syms, &alts, 0), vec![vec![Rule(4), Lex(2)]]);
        assert_eq!(
            rule_alts(&syms, &alts, 3),
            vec![vec![Lex(0), Lex(3)], vec![Rule(3), Lex(3)]]
        );
        assert_eq!(
            rule_alts(&syms, &alts, 4),
            vec![vec![Rule(3), Lex(1)], vec![Rule(4), Lex(4)]]
        );
        assert_eq!(nullable, vec![false, false, true, false, false]);
    }

    #[test]
    fn a_repetition_first_in_its_alternative_or_not_one_is_left_alone() {
        // 0: a ::= S L0 | L0 R   1: S ::= "" | S L1   2: R ::= L1 | L1 R (right)
        let (mut syms, mut alts) = flat(&[
            &[&[Rule(1), Lex(0)], &[Lex(0), Rule(2)]],
            &[&[], &[Rule(1), Lex(1)]],
            &[&[Lex(1)], &[Lex(1), Rule(2)]],
        ]);
        let before = (syms.clone(), alts.clone());
        let mut nullable = vec![false, true, false];
        lift_repetitions(&mut syms, &mut alts, &mut nullable, |_| false);
        assert_eq!((syms, alts), before);
    }

    #[test]
    fn the_lifted_rule_is_nullable_when_its_prefix_and_base_are() {
        // 0: a ::= L0 S    1: S ::= "" | S L1; L0 matches "".
        let (mut syms, mut alts) = flat(&[&[&[Lex(0), Rule(1)]], &[&[], &[Rule(1), Lex(1)]]]);
        let mut nullable = vec![true, true];
        lift_repetitions(&mut syms, &mut alts, &mut nullable, |l| l == 0);
        assert_eq!(nullable, vec![true, true, true]);
    }
}
