//! Regular grammars as regular expressions.
//!
//! A grammar whose recursion is all "linear at one end" describes a regular
//! language, and then a regex backend can serve it at table-read speed:
//! [`Grammar::to_regex`] finds out and writes the regex (regex-syntax
//! dialect, whole-output match, no anchors).
//!
//! Rules are grouped into strongly connected components of the reference
//! graph and solved callees first:
//!
//! * a rule that refers to no rule of its own component is the alternation
//!   of its alternatives;
//! * a component of one rule `A` whose alternatives are `A β` (left
//!   recursive), `α A` (right recursive) or free of `A` (`γ`) is
//!   `α* γ β*` — the GBNF front end desugars `x*` and `x+` this way;
//! * a larger component whose members occur only as the last symbol of an
//!   alternative (right-linear, like `list ::= item ("," list)?`) is a system
//!   of equations `X = a X' + b`, solved by Arden's lemma (`X = a* b`) and
//!   substitution.
//!
//! Anything else (a rule between other symbols of its own derivation, as in
//! `value ::= "[" value "]"`) is context-free and gets
//! [`GrammarError::Unsupported`] naming the rule and where it is defined.
//! Inlining copies a rule's regex at every use, so the text is bounded by
//! [`RegularLimits::max_regex_len`].

use std::collections::{BTreeMap, BTreeSet, HashMap};

use tokensieve_core::{GrammarError, Location};

use crate::grammar::{Grammar, RuleId, RuleOrigin, Symbol};
use regex_syntax::hir::{Class, ClassUnicode, ClassUnicodeRange, Hir, HirKind, Repetition};

/// Bounds on [`Grammar::to_regex`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegularLimits {
    /// Longest regex written, in bytes (rules are copied where they are
    /// used, so nested references can multiply). Default 1 MiB.
    pub max_regex_len: usize,
    /// Most distinct trigger prefixes [`tagged_text`] takes (the states of
    /// its trigger automaton). Default 1,024.
    pub max_trigger_states: usize,
}

impl Default for RegularLimits {
    fn default() -> Self {
        RegularLimits {
            max_regex_len: 1 << 20,
            max_trigger_states: 1024,
        }
    }
}

/// Regexes of any one character, and of the empty language.
const ANY_CHAR: &str = "[\\x{0}-\\x{10FFFF}]";
const NOTHING: &str = "[^\\x{0}-\\x{10FFFF}]";

/// A regex term: `None` is the empty language, `Some("")` the empty string.
type Term = Option<String>;

impl Grammar {
    /// The regex of the root rule's language, when the grammar is regular
    /// (see the [module docs](crate::regular) for what is recognised).
    pub fn to_regex(&self, limits: &RegularLimits) -> Result<String, GrammarError> {
        Solver {
            grammar: self,
            limits,
            solved: vec![None; self.rules.len()],
            used_outside: vec![false; self.rules.len()],
        }
        .solve(self.root)
    }
}

impl Grammar {
    /// The regex of every rule (reachable from the root) whose language is
    /// regular, `None` for the others: a rule is regular when its own
    /// component is solvable (see the [module docs](crate::regular)) and
    /// every rule it refers to is regular. A rule whose regex would exceed
    /// [`RegularLimits::max_regex_len`] counts as not regular, and so does
    /// every rule solved after the regexes written so far exceed 16 times
    /// that in all (rules are copied where they are used, so a long chain
    /// of rules each using the last twice would otherwise fill memory).
    /// This is how the earley backend finds its lexemes: the regular parts
    /// of a context-free grammar.
    pub fn rule_regexes(&self, limits: &RegularLimits) -> Vec<Option<String>> {
        let mut solver = Solver {
            grammar: self,
            limits,
            solved: vec![None; self.rules.len()],
            // Every member is wanted, not only those used outside.
            used_outside: vec![true; self.rules.len()],
        };
        let mut regular = vec![false; self.rules.len()];
        let budget = limits.max_regex_len.saturating_mul(16);
        let mut written = 0usize;
        for component in components(self, self.root) {
            let callees_regular = written <= budget
                && component.iter().all(|&r| {
                    self.rule(r).alternatives.iter().flatten().all(|s| match s {
                        Symbol::NonTerminal(t) => component.contains(t) || regular[t.index()],
                        _ => true,
                    })
                });
            if callees_regular && solver.solve_component(&component).is_ok() {
                for &r in &component {
                    regular[r.index()] = true;
                    written += solver.solved[r.index()].as_ref().map_or(0, String::len);
                }
            } else {
                for &r in &component {
                    solver.solved[r.index()] = None;
                }
            }
        }
        solver
            .solved
            .into_iter()
            .zip(regular)
            .map(|(regex, ok)| regex.filter(|_| ok))
            .collect()
    }
}

/// The syntax trees of a grammar's regular rules, built from the rules
/// themselves instead of parsing the text of [`Grammar::rule_regexes`]
/// (which copies every rule into each rule using it, so its text is parsed
/// many times over): a rule is the alternation of its sequences, a rule
/// recursive only through itself `α* γ β*` as the solver writes it; a rule
/// of a mutually recursive set is its regex parsed. Trees, and their
/// [`Measure`], are kept by rule.
pub struct RuleHirs<'g> {
    grammar: &'g Grammar,
    regexes: &'g [Option<String>],
    trees: HashMap<RuleId, Result<Hir, GrammarError>>,
    measures: HashMap<RuleId, Option<Measure>>,
    /// Rules being built (a reference back to one is mutual recursion).
    open: Vec<RuleId>,
}

/// What a tree costs before it is built: its weight (about its NFA
/// states, and the states of a lazily built DFA that does not blow up:
/// [`crate::pieces::weight`] with a character class weighing what its
/// UTF-8 encoding takes, [`class_weight`]) and how deep it nests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Measure {
    pub weight: u64,
    pub depth: u32,
}

impl Measure {
    /// The measure of `parts` in a row (or one of them).
    pub fn join(parts: impl IntoIterator<Item = Measure>) -> Measure {
        parts.into_iter().fold(
            Measure {
                weight: 0,
                depth: 1,
            },
            |m, p| Measure {
                weight: m.weight.saturating_add(p.weight),
                depth: m.depth.max(p.depth.saturating_add(1)),
            },
        )
    }

    /// The measure of `hir` as built: `pieces::weight_by` with
    /// `Measure::class`, and the depth, in one reading of the tree (the
    /// earley lowering measures every piece of a big schema).
    pub fn of(hir: &Hir) -> Measure {
        let (weight, depth) = match hir.kind() {
            HirKind::Empty | HirKind::Look(_) => (0, 0),
            HirKind::Literal(lit) => (lit.0.len() as u64, 0),
            HirKind::Class(c) => (Measure::class(c), 0),
            HirKind::Capture(c) => {
                let sub = Measure::of(&c.sub);
                (sub.weight, sub.depth)
            }
            HirKind::Repetition(r) => {
                let sub = Measure::of(&r.sub);
                let copies = r.max.unwrap_or(r.min).max(r.min).max(1);
                (sub.weight.saturating_mul(copies as u64), sub.depth)
            }
            HirKind::Concat(subs) | HirKind::Alternation(subs) => {
                subs.iter().map(Measure::of).fold((0u64, 0), |(w, d), m| {
                    (w.saturating_add(m.weight), d.max(m.depth))
                })
            }
        };
        Measure {
            weight,
            depth: 1 + depth,
        }
    }

    /// [`Measure::of`] when its weight is at most `max_weight`, else
    /// `None`, reading no more of a heavier tree than it takes to tell
    /// (what taking a big piece apart asks of every part at every level).
    pub fn within(hir: &Hir, max_weight: u64) -> Option<Measure> {
        let weight = crate::pieces::weight_by_at_most(hir, &Measure::class, max_weight);
        (weight <= max_weight).then(|| Measure {
            weight,
            depth: Measure::depth(hir),
        })
    }

    fn class(class: &Class) -> u64 {
        match class {
            Class::Unicode(c) => class_weight(c.ranges().last().map_or('\0', |r| r.end())),
            Class::Bytes(_) => 1,
        }
    }

    fn depth(hir: &Hir) -> u32 {
        1 + match hir.kind() {
            HirKind::Concat(subs) | HirKind::Alternation(subs) => {
                subs.iter().map(Measure::depth).max().unwrap_or(0)
            }
            HirKind::Repetition(r) => Measure::depth(&r.sub),
            HirKind::Capture(c) => Measure::depth(&c.sub),
            _ => 0,
        }
    }
}

/// What one character of a class whose greatest member is `max` weighs:
/// its own state and the UTF-8 continuation states its longest encodings
/// need (after a lead byte, each byte range of what may follow is a state
/// of its own).
pub fn class_weight(max: char) -> u64 {
    match max as u32 {
        0..=0x7F => 1,
        0x80..=0x7FF => 2,
        0x800..=0xFFFF => 5,
        _ => 8,
    }
}

/// A reference back to a rule being built: mutual recursion.
struct Cycle;

/// How one rule's alternatives read (see [`RuleHirs`]): those ending in
/// the rule (`right`), those starting with it (`left`), the others.
struct Shape<'a> {
    right: Vec<&'a [Symbol]>,
    base: Vec<&'a [Symbol]>,
    left: Vec<&'a [Symbol]>,
}

fn shape(g: &Grammar, rule: RuleId) -> Option<Shape<'_>> {
    let mut out = Shape {
        right: Vec::new(),
        base: Vec::new(),
        left: Vec::new(),
    };
    for alt in &g.rule(rule).alternatives {
        let is_self = |s: &Symbol| matches!(s, Symbol::NonTerminal(t) if *t == rule);
        match alt.iter().filter(|s| is_self(s)).count() {
            0 => out.base.push(&alt[..]),
            1 if alt.len() > 1 && is_self(&alt[0]) => out.left.push(&alt[1..]),
            1 if is_self(&alt[alt.len() - 1]) => out.right.push(&alt[..alt.len() - 1]),
            _ => return None,
        }
    }
    Some(out)
}

/// The measure of one terminal symbol (`None` for a rule reference).
pub fn terminal_measure(symbol: &Symbol) -> Option<Measure> {
    match symbol {
        Symbol::Literal(bytes) => Some(Measure {
            weight: bytes.len() as u64,
            depth: 1,
        }),
        Symbol::Class(class) => Some(Measure {
            weight: class_weight(class.ranges().last().map_or('\0', |r| r.1)),
            depth: 1,
        }),
        Symbol::NonTerminal(_) => None,
    }
}

impl<'g> RuleHirs<'g> {
    /// Trees for the rules of `grammar` whose regex (`regexes`, from
    /// [`Grammar::rule_regexes`]) is known.
    pub fn new(grammar: &'g Grammar, regexes: &'g [Option<String>]) -> Self {
        RuleHirs {
            grammar,
            regexes,
            trees: HashMap::new(),
            measures: HashMap::new(),
            open: Vec::new(),
        }
    }

    /// The tree of regular rule `rule` (`None` when it is not regular).
    pub fn rule(&mut self, rule: RuleId) -> Option<Result<Hir, GrammarError>> {
        self.regexes[rule.index()].as_ref()?;
        Some(match self.build(rule) {
            Ok(hir) => hir,
            Err(Cycle) => unreachable!("no rule is open at the top"),
        })
    }

    /// The measure of regular rule `rule`, without building its tree
    /// (`None` when it is not regular or its regex does not parse).
    pub fn measure(&mut self, rule: RuleId) -> Option<Measure> {
        self.regexes[rule.index()].as_ref()?;
        match self.measure_of(rule) {
            Ok(m) => m,
            Err(Cycle) => unreachable!("no rule is open at the top"),
        }
    }

    /// The regex of `rule` parsed (and kept).
    fn parsed(&mut self, rule: RuleId) -> Result<Hir, GrammarError> {
        if let Some(known) = self.trees.get(&rule) {
            return known.clone();
        }
        let text = self.regexes[rule.index()]
            .as_deref()
            .expect("only regular rules are built");
        let hir = tokensieve_automata::dfa::parse(text);
        self.trees.insert(rule, hir.clone());
        hir
    }

    fn measure_of(&mut self, rule: RuleId) -> Result<Option<Measure>, Cycle> {
        if let Some(&known) = self.measures.get(&rule) {
            return Ok(known);
        }
        if self.open.contains(&rule) {
            return Err(Cycle);
        }
        self.open.push(rule);
        let measured = self.measure_alternatives(rule);
        self.open.pop();
        let m = match measured {
            Ok(m) => m,
            // See [`RuleHirs::build`].
            Err(Cycle) => self.parsed(rule).ok().map(|hir| Measure::of(&hir)),
        };
        self.measures.insert(rule, m);
        Ok(m)
    }

    fn measure_alternatives(&mut self, rule: RuleId) -> Result<Option<Measure>, Cycle> {
        let g = self.grammar;
        let Some(shape) = shape(g, rule) else {
            return Err(Cycle);
        };
        let mut parts = Vec::new();
        for symbols in shape.right.iter().chain(&shape.base).chain(&shape.left) {
            let mut seq = Vec::with_capacity(symbols.len());
            for symbol in symbols.iter() {
                seq.push(match symbol {
                    Symbol::NonTerminal(t) => match self.measure_of(*t)? {
                        Some(m) => m,
                        None => return Ok(None),
                    },
                    terminal => terminal_measure(terminal).expect("a terminal"),
                });
            }
            // A sequence inside an alternation inside a repetition.
            let m = Measure::join(seq);
            parts.push(Measure {
                weight: m.weight,
                depth: m.depth.saturating_add(2),
            });
        }
        Ok(Some(Measure::join(parts)))
    }

    fn build(&mut self, rule: RuleId) -> Result<Result<Hir, GrammarError>, Cycle> {
        if let Some(known) = self.trees.get(&rule) {
            return Ok(known.clone());
        }
        if self.open.contains(&rule) {
            return Err(Cycle);
        }
        self.open.push(rule);
        let built = self.alternatives(rule);
        self.open.pop();
        let hir = match built {
            Ok(hir) => hir,
            // A reference back to a rule being built (mutual recursion, or
            // the rule in the middle of itself): the rule's own regex holds
            // the solved system. Rules above go on with it as a whole.
            Err(Cycle) => return Ok(self.parsed(rule)),
        };
        self.trees.insert(rule, hir.clone());
        Ok(hir)
    }

    /// `right* base left*` over the rule's alternatives.
    fn alternatives(&mut self, rule: RuleId) -> Result<Result<Hir, GrammarError>, Cycle> {
        let g = self.grammar;
        let Some(shape) = shape(g, rule) else {
            return Err(Cycle);
        };
        let mut lists = [Vec::new(), Vec::new(), Vec::new()];
        for (list, alts) in lists
            .iter_mut()
            .zip([&shape.right, &shape.base, &shape.left])
        {
            for symbols in alts.iter() {
                let mut seq = Vec::with_capacity(symbols.len());
                for symbol in symbols.iter() {
                    seq.push(match symbol {
                        Symbol::NonTerminal(t) => match self.build(*t)? {
                            Ok(hir) => hir,
                            Err(e) => return Ok(Err(e)),
                        },
                        terminal => terminal_hir(terminal).expect("a terminal"),
                    });
                }
                list.push(Hir::concat(seq));
            }
        }
        let [right, base, left] = lists;
        let star = |terms: Vec<Hir>| {
            (!terms.is_empty()).then(|| {
                Hir::repetition(Repetition {
                    min: 0,
                    max: None,
                    greedy: true,
                    sub: Box::new(Hir::alternation(terms)),
                })
            })
        };
        let mut seq = Vec::new();
        seq.extend(star(right));
        seq.push(Hir::alternation(base));
        seq.extend(star(left));
        Ok(Ok(Hir::concat(seq)))
    }
}

/// The syntax tree of one terminal symbol, `None` for a rule reference.
pub fn terminal_hir(symbol: &Symbol) -> Option<Hir> {
    match symbol {
        Symbol::Literal(bytes) => Some(Hir::literal(bytes.to_vec())),
        Symbol::Class(class) => Some(Hir::class(Class::Unicode(ClassUnicode::new(
            class
                .ranges()
                .iter()
                .map(|&(lo, hi)| ClassUnicodeRange::new(lo, hi)),
        )))),
        Symbol::NonTerminal(_) => None,
    }
}

/// `text` as a regex (regex-syntax dialect) matching exactly it.
pub fn escape(text: &str) -> String {
    regex_syntax::escape(text)
}

/// The regex of a choice list, `(?:a|b|…)` of the escaped strings; an
/// empty list is [`GrammarError::InvalidSpec`].
pub fn choice_regex(choices: &[String]) -> Result<String, GrammarError> {
    if choices.is_empty() {
        return Err(GrammarError::InvalidSpec(
            "a choice constraint needs at least one string".into(),
        ));
    }
    let alternatives: Vec<String> = choices.iter().map(|c| escape(c)).collect();
    Ok(format!("(?:{})", alternatives.join("|")))
}

/// The regex (regex-syntax dialect) of one terminal symbol, `None` for a
/// rule reference: a literal escaped, a class as its code point ranges.
pub fn terminal_regex(symbol: &Symbol) -> Option<String> {
    match symbol {
        Symbol::Literal(bytes) => {
            let text = std::str::from_utf8(bytes).expect("literals are valid UTF-8");
            Some(regex_syntax::escape(text))
        }
        Symbol::Class(class) => {
            let mut out = String::from("[");
            for &(lo, hi) in class.ranges() {
                out.push_str(&format!("\\x{{{:X}}}", lo as u32));
                if hi != lo {
                    out.push_str(&format!("-\\x{{{:X}}}", hi as u32));
                }
            }
            out.push(']');
            Some(out)
        }
        Symbol::NonTerminal(_) => None,
    }
}

struct Solver<'g> {
    grammar: &'g Grammar,
    limits: &'g RegularLimits,
    /// The regex of each rule solved so far (always a group or atom).
    solved: Vec<Option<String>>,
    /// Rules referred to from another component, or the root: the only
    /// members of a recursive component whose regex is needed.
    used_outside: Vec<bool>,
}

impl Solver<'_> {
    fn solve(&mut self, root: RuleId) -> Result<String, GrammarError> {
        let components = components(self.grammar, root);
        let mut component_of = vec![usize::MAX; self.grammar.rules.len()];
        for (c, members) in components.iter().enumerate() {
            for r in members {
                component_of[r.index()] = c;
            }
        }
        self.used_outside[root.index()] = true;
        for (q, rule) in self.grammar.rules.iter().enumerate() {
            if component_of[q] == usize::MAX {
                continue;
            }
            for symbol in rule.alternatives.iter().flatten() {
                if let Symbol::NonTerminal(t) = symbol
                    && component_of[t.index()] != component_of[q]
                {
                    self.used_outside[t.index()] = true;
                }
            }
        }
        for component in components {
            self.solve_component(&component)?;
        }
        Ok(self.solved[root.index()]
            .clone()
            .expect("the root's component was solved"))
    }

    fn solve_component(&mut self, members: &[RuleId]) -> Result<(), GrammarError> {
        let g = self.grammar;
        let index_of: HashMap<RuleId, usize> =
            members.iter().enumerate().map(|(i, &r)| (r, i)).collect();
        let recursive = members.len() > 1
            || g.rule(members[0])
                .alternatives
                .iter()
                .flatten()
                .any(|s| matches!(s, Symbol::NonTerminal(t) if *t == members[0]));
        if !recursive {
            let rule = members[0];
            let mut alts = Vec::new();
            for alt in &g.rule(rule).alternatives {
                alts.push(Some(self.sequence(alt)?));
            }
            return self.store(rule, union(alts));
        }
        if members.len() == 1 {
            return self.solve_single(members[0]);
        }
        // Right-linear system: X_i = Σ_j coef[i][j] X_j + constant[i].
        let mut system = System::new(members.len());
        for (i, &rule) in members.iter().enumerate() {
            for alt in &g.rule(rule).alternatives {
                let inner = alt
                    .iter()
                    .position(|s| matches!(s, Symbol::NonTerminal(t) if index_of.contains_key(t)));
                match inner {
                    None => {
                        let term = self.sequence(alt)?;
                        system.constant[i] = add(system.constant[i].take(), Some(term));
                    }
                    Some(p) if p + 1 == alt.len() => {
                        let Symbol::NonTerminal(target) = alt[p] else {
                            unreachable!("position found a rule reference")
                        };
                        let prefix = self.sequence(&alt[..p])?;
                        system.add_term(i, index_of[&target], prefix);
                    }
                    Some(_) => return Err(self.not_regular(rule, members)),
                }
            }
        }
        // Only members something outside the component refers to (or the
        // root) are ever copied: solve for those alone.
        for (target, &rule) in members.iter().enumerate() {
            if !self.used_outside[rule.index()] {
                continue;
            }
            match system.clone().solve(target, self.limits.max_regex_len) {
                Ok(regex) => self.store(rule, regex)?,
                Err(i) => return Err(self.too_long(members[i])),
            }
        }
        Ok(())
    }

    /// One rule recursive only through itself: `α* γ β*` when every
    /// alternative is `A β`, `α A` or free of `A`.
    fn solve_single(&mut self, rule: RuleId) -> Result<(), GrammarError> {
        let (mut left, mut right, mut base) = (Vec::new(), Vec::new(), Vec::new());
        for alt in &self.grammar.rule(rule).alternatives {
            let is_self = |s: &Symbol| matches!(s, Symbol::NonTerminal(t) if *t == rule);
            match alt.iter().filter(|s| is_self(s)).count() {
                0 => base.push(Some(self.sequence(alt)?)),
                1 if alt.len() > 1 && is_self(&alt[0]) => {
                    left.push(Some(self.sequence(&alt[1..])?));
                }
                1 if is_self(&alt[alt.len() - 1]) => {
                    right.push(Some(self.sequence(&alt[..alt.len() - 1])?));
                }
                _ => return Err(self.not_regular(rule, &[rule])),
            }
        }
        let star = |terms: Vec<Term>| union(terms).map(|t| format!("(?:{t})*"));
        // No base (no way out of the recursion): the rule derives no string.
        // The front end rejects such grammars; keep the empty language.
        let regex = union(base).map(|base| {
            concat(
                &concat(&star(right).unwrap_or_default(), &base),
                &star(left).unwrap_or_default(),
            )
        });
        self.store(rule, regex)
    }

    /// The regex of a sequence of symbols whose rules are all solved.
    fn sequence(&self, symbols: &[Symbol]) -> Result<String, GrammarError> {
        let mut out = String::new();
        for symbol in symbols {
            match symbol {
                Symbol::NonTerminal(t) => match &self.solved[t.index()] {
                    Some(r) => out.push_str(r),
                    // Solved to the empty language: so is the sequence. The
                    // front end guarantees every rule derives a string, so
                    // this does not happen for parsed grammars.
                    None => out.push_str(NOTHING),
                },
                terminal => {
                    out.push_str(&terminal_regex(terminal).expect("a terminal has a regex"))
                }
            }
            if out.len() > self.limits.max_regex_len {
                break;
            }
        }
        Ok(out)
    }

    fn store(&mut self, rule: RuleId, regex: Term) -> Result<(), GrammarError> {
        let regex = regex.unwrap_or_else(|| NOTHING.to_string());
        if regex.len() > self.limits.max_regex_len {
            return Err(self.too_long(rule));
        }
        self.solved[rule.index()] = Some(format!("(?:{regex})"));
        Ok(())
    }

    fn too_long(&self, rule: RuleId) -> GrammarError {
        GrammarError::LimitExceeded {
            what: format!(
                "the regex of grammar rule `{}` (rules are copied where they are used)",
                self.user_name(rule)
            ),
            limit: self.limits.max_regex_len,
            knob: "max_regex_len".into(),
        }
    }

    fn not_regular(&self, rule: RuleId, members: &[RuleId]) -> GrammarError {
        let mut names: Vec<&str> = members.iter().map(|&r| self.user_name(r)).collect();
        names.sort_unstable();
        names.dedup();
        let cycle = if names.len() > 1 {
            format!(" (recursive through {})", names.join(", "))
        } else {
            String::new()
        };
        GrammarError::Unsupported {
            location: self.location(rule),
            what: format!(
                "rule `{}`{cycle}: recursion that is not at one end of its \
                 alternatives (a context-free, not regular, language; this needs an \
                 Earley backend)",
                self.user_name(rule)
            ),
        }
    }

    /// The user-defined rule a (possibly helper) rule belongs to.
    fn user_rule(&self, mut rule: RuleId) -> RuleId {
        while let RuleOrigin::Helper { parent } = self.grammar.rule(rule).origin {
            if parent == rule {
                break;
            }
            rule = parent;
        }
        rule
    }

    fn user_name(&self, rule: RuleId) -> &str {
        &self.grammar.rule(self.user_rule(rule)).name
    }

    fn location(&self, rule: RuleId) -> Location {
        match self.grammar.rule(self.user_rule(rule)).origin {
            RuleOrigin::Defined { line, column } => Location::LineColumn { line, column },
            RuleOrigin::Helper { .. } => Location::None,
        }
    }
}

/// One tagged region of [`tagged_text`]: the trigger that opens it (an index
/// into the trigger list) and the regex of the whole region, which must
/// start with that trigger's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tag {
    pub trigger: usize,
    pub regex: String,
}

/// The regex of free text with tagged regions (XGrammar's structural tags):
/// text in which no trigger occurs, except that wherever one begins, one of
/// the tags opened by that trigger follows in full, after which free text
/// resumes. "Begins" is read left to right: a trigger occurrence that starts
/// in free text and would end inside a tag's opening trigger is not allowed.
///
/// Triggers must be non-empty and none may contain another (then the first
/// trigger in the text is always unambiguous); both are
/// [`GrammarError::InvalidSpec`].
///
/// Built as a right-linear system over the Aho-Corasick automaton of the
/// triggers (a state per trigger prefix, reached by the longest suffix of
/// the text that is one), solved like a grammar component.
pub fn tagged_text(
    triggers: &[&str],
    tags: &[Tag],
    limits: &RegularLimits,
) -> Result<String, GrammarError> {
    for (i, t) in triggers.iter().enumerate() {
        if t.is_empty() {
            return Err(GrammarError::InvalidSpec("an empty trigger".into()));
        }
        for (j, u) in triggers.iter().enumerate() {
            if i != j && u.contains(t) && (u != t || j < i) {
                return Err(GrammarError::InvalidSpec(format!(
                    "trigger {t:?} occurs inside trigger {u:?}: the first trigger in a text \
                     would be ambiguous"
                )));
            }
        }
    }
    if let Some(tag) = tags.iter().find(|tag| tag.trigger >= triggers.len()) {
        return Err(GrammarError::InvalidSpec(format!(
            "a tag refers to trigger {} of {}",
            tag.trigger,
            triggers.len()
        )));
    }
    // The trie of the triggers over characters: state 0 is the empty prefix.
    let mut child: HashMap<(usize, char), usize> = HashMap::new();
    // Per state: the trigger it completes, if any.
    let mut full: Vec<Option<usize>> = vec![None];
    for (i, t) in triggers.iter().enumerate() {
        let mut state = 0;
        for c in t.chars() {
            state = *child.entry((state, c)).or_insert_with(|| {
                full.push(None);
                full.len() - 1
            });
        }
        full[state] = Some(i);
    }
    let states = full.len();
    if states > limits.max_trigger_states {
        return Err(GrammarError::LimitExceeded {
            what: format!(
                "the trigger automaton ({states} states, one per distinct trigger prefix)"
            ),
            limit: limits.max_trigger_states,
            knob: "max_trigger_states".into(),
        });
    }
    let mut alphabet: Vec<char> = triggers.iter().flat_map(|t| t.chars()).collect();
    alphabet.sort_unstable();
    alphabet.dedup();
    let letter = |c: char| alphabet.binary_search(&c).expect("a trigger character");
    // goto[p][letter(c)]: the longest suffix of prefix(p)·c that is a
    // trigger prefix (Aho-Corasick, breadth first through failure links).
    let mut goto = vec![vec![0usize; alphabet.len()]; states];
    let mut fail = vec![0usize; states];
    let mut queue = std::collections::VecDeque::from([0usize]);
    while let Some(p) = queue.pop_front() {
        for (l, &c) in alphabet.iter().enumerate() {
            match child.get(&(p, c)) {
                Some(&q) => {
                    fail[q] = if p == 0 { 0 } else { goto[fail[p]][l] };
                    goto[p][l] = q;
                    queue.push_back(q);
                }
                None => goto[p][l] = if p == 0 { 0 } else { goto[fail[p]][l] },
            }
        }
    }
    // Trigger states are where the text would contain a trigger: never
    // entered from free text. The others are the variables.
    let live: Vec<usize> = (0..states).filter(|&p| full[p].is_none()).collect();
    let var: HashMap<usize, usize> = live.iter().enumerate().map(|(v, &p)| (p, v)).collect();
    let mut system = System::new(live.len());
    let triggers_chars: Vec<Vec<char>> = triggers.iter().map(|t| t.chars().collect()).collect();
    for (v, &p) in live.iter().enumerate() {
        system.constant[v] = Some(String::new());
        // Free characters, grouped by target; characters of no trigger go
        // back to the empty prefix.
        let mut by_target: BTreeMap<usize, Vec<char>> = BTreeMap::new();
        let mut elsewhere = Vec::new();
        for (l, &c) in alphabet.iter().enumerate() {
            let q = goto[p][l];
            if q != 0 {
                elsewhere.push(c);
                if full[q].is_none() {
                    by_target.entry(q).or_default().push(c);
                }
            }
        }
        // Back to the empty prefix: every character except those of the
        // triggers that lead elsewhere (or into a trigger).
        system.add_term(v, var[&0], class(&elsewhere, true));
        for (q, chars) in by_target {
            system.add_term(v, var[&q], class(&chars, false));
        }
        // A tag may open here when reading its trigger from this state
        // meets no trigger before the trigger's own last character.
        for (i, chars) in triggers_chars.iter().enumerate() {
            let mut q = p;
            let clean = chars[..chars.len() - 1].iter().all(|&c| {
                q = goto[q][letter(c)];
                full[q].is_none()
            });
            if !clean {
                continue;
            }
            let opened: Vec<Term> = tags
                .iter()
                .filter(|tag| tag.trigger == i)
                .map(|tag| Some(group(&tag.regex)))
                .collect();
            if let Some(regions) = union(opened) {
                system.add_term(v, var[&0], regions);
            }
        }
    }
    match system.solve(var[&0], limits.max_regex_len) {
        Ok(Some(regex)) => Ok(regex),
        Ok(None) => unreachable!("free text may always end"),
        Err(_) => Err(GrammarError::LimitExceeded {
            what: "the regex of the free text around the tags".into(),
            limit: limits.max_regex_len,
            knob: "max_regex_len".into(),
        }),
    }
}

/// A character class of `chars`, or of every other character (`negated`).
fn class(chars: &[char], negated: bool) -> String {
    if chars.is_empty() {
        return if negated { ANY_CHAR } else { NOTHING }.into();
    }
    let mut out = String::from(if negated { "[^" } else { "[" });
    for &c in chars {
        out.push_str(&format!("\\x{{{:X}}}", c as u32));
    }
    out.push(']');
    out
}

/// A right-linear system `X_i = Σ_j rows[i][j] X_j | constant[i]`, rows
/// kept sparse (most variables refer to two or three others).
#[derive(Clone, Default)]
struct System {
    rows: Vec<BTreeMap<usize, String>>,
    constant: Vec<Term>,
}

impl System {
    fn new(n: usize) -> Self {
        System {
            rows: vec![BTreeMap::new(); n],
            constant: vec![None; n],
        }
    }

    /// Adds the term `a X_j` to equation `i`.
    fn add_term(&mut self, i: usize, j: usize, a: String) {
        let slot = self.rows[i].remove(&j);
        if let Some(t) = add(slot, Some(a)) {
            self.rows[i].insert(j, t);
        }
    }

    /// Solves for `X_target`: the other variables are eliminated one by one
    /// by Arden's lemma (`X = a X | b` is `X = a* b`) and substitution, each
    /// time the one with the fewest (uses × terms), which keeps chains
    /// (trigger automata, right-recursive lists) from multiplying their
    /// copies; `X_target` last. Work is proportional to the terms touched,
    /// not to the square of the variables. `Err(i)` when equation `i` grows
    /// past `max_len` bytes.
    fn solve(mut self, target: usize, max_len: usize) -> Result<Term, usize> {
        let n = self.constant.len();
        let mut users: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); n];
        for (i, row) in self.rows.iter().enumerate() {
            for &j in row.keys() {
                users[j].insert(i);
            }
        }
        let mut done = vec![false; n];
        for _ in 0..n {
            let k = (0..n)
                .filter(|&k| !done[k] && k != target)
                .min_by_key(|&k| {
                    let uses = users[k].iter().filter(|&&i| i != k).count();
                    (uses * (self.rows[k].len() + 1), k)
                })
                .unwrap_or(target);
            done[k] = true;
            let star = self.rows[k].remove(&k).map(|a| format!("(?:{a})*"));
            users[k].remove(&k);
            if let Some(star) = &star {
                for t in self.rows[k].values_mut() {
                    *t = concat(star, t);
                }
                self.constant[k] = self.constant[k].take().map(|t| concat(star, &t));
            }
            if k == target {
                break;
            }
            let row_k = std::mem::take(&mut self.rows[k]);
            let constant_k = self.constant[k].clone();
            for &j in row_k.keys() {
                users[j].remove(&k);
            }
            for i in std::mem::take(&mut users[k]) {
                let Some(a) = self.rows[i].remove(&k) else {
                    continue;
                };
                for (&j, b) in &row_k {
                    self.add_term(i, j, concat(&a, b));
                    users[j].insert(i);
                }
                if let Some(b) = &constant_k {
                    self.constant[i] = add(self.constant[i].take(), Some(concat(&a, b)));
                }
                let len: usize = self.rows[i]
                    .values()
                    .chain(&self.constant[i])
                    .map(String::len)
                    .sum();
                if len > max_len {
                    return Err(i);
                }
            }
        }
        Ok(self.constant[target].take())
    }
}

/// `a | b`, with the empty language as identity.
fn add(a: Term, b: Term) -> Term {
    match (a, b) {
        (None, t) | (t, None) => t,
        (Some(a), Some(b)) if a == b => Some(a),
        (Some(a), Some(b)) => Some(format!("{a}|{b}")),
    }
}

/// The alternation of `terms` (the empty language when there are none).
fn union(terms: Vec<Term>) -> Term {
    terms.into_iter().fold(None, add)
}

/// `a` then `b`, each grouped so that an alternation inside stays inside.
fn concat(a: &str, b: &str) -> String {
    match (a.is_empty(), b.is_empty()) {
        (true, _) => group(b),
        (_, true) => group(a),
        _ => format!("{}{}", group(a), group(b)),
    }
}

fn group(t: &str) -> String {
    if t.is_empty() {
        String::new()
    } else {
        format!("(?:{t})")
    }
}

/// The strongly connected components of the rules `root` reaches, callees
/// before callers (Tarjan, iterative).
fn components(g: &Grammar, root: RuleId) -> Vec<Vec<RuleId>> {
    let n = g.rules.len();
    let refs = |r: usize| -> Vec<usize> {
        g.rules[r]
            .alternatives
            .iter()
            .flatten()
            .filter_map(|s| match s {
                Symbol::NonTerminal(t) => Some(t.index()),
                _ => None,
            })
            .collect()
    };
    let mut index = vec![usize::MAX; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut out = Vec::new();
    let mut next = 0;
    // (rule, its references, how many of them are done)
    let mut work: Vec<(usize, Vec<usize>, usize)> = Vec::new();
    index[root.index()] = next;
    low[root.index()] = next;
    next += 1;
    stack.push(root.index());
    on_stack[root.index()] = true;
    work.push((root.index(), refs(root.index()), 0));
    while let Some((v, edges, done)) = work.last_mut() {
        let v = *v;
        if *done < edges.len() {
            let w = edges[*done];
            *done += 1;
            if index[w] == usize::MAX {
                index[w] = next;
                low[w] = next;
                next += 1;
                stack.push(w);
                on_stack[w] = true;
                let r = refs(w);
                work.push((w, r, 0));
            } else if on_stack[w] {
                low[v] = low[v].min(index[w]);
            }
            continue;
        }
        work.pop();
        if let Some((parent, _, _)) = work.last() {
            low[*parent] = low[*parent].min(low[v]);
        }
        if low[v] == index[v] {
            let mut component = Vec::new();
            loop {
                let w = stack.pop().expect("v is on the stack");
                on_stack[w] = false;
                component.push(RuleId(w as u32));
                if w == v {
                    break;
                }
            }
            component.reverse();
            out.push(component);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use regex_automata::dfa::{Automaton, dense};
    use regex_automata::{Anchored, Input};

    fn regex_of(gbnf: &str) -> Result<String, GrammarError> {
        Grammar::from_gbnf(gbnf, "root")?.to_regex(&RegularLimits::default())
    }

    fn full_match(dfa: &dense::DFA<Vec<u32>>, s: &[u8]) -> bool {
        let input = Input::new(s).anchored(Anchored::Yes);
        dfa.try_search_fwd(&input)
            .expect("no quit bytes")
            .is_some_and(|m| m.offset() == s.len())
    }

    fn dfa(regex: &str) -> dense::DFA<Vec<u32>> {
        dense::DFA::new(&format!("^(?:{regex})$")).expect("the regex compiles")
    }

    /// Every string over `alphabet` up to `len` bytes: the regex and the
    /// grammar (Earley oracle) agree.
    fn agrees(gbnf: &str, alphabet: &[&str], len: usize) {
        let g = Grammar::from_gbnf(gbnf, "root").unwrap();
        let regex = g.to_regex(&RegularLimits::default()).unwrap();
        let dfa = dfa(&regex);
        let mut frontier: Vec<Vec<u8>> = vec![Vec::new()];
        let mut checked = 0;
        while let Some(s) = frontier.pop() {
            assert_eq!(
                full_match(&dfa, &s),
                g.accepts(&s),
                "{gbnf:?} / {regex} on {:?}",
                String::from_utf8_lossy(&s)
            );
            checked += 1;
            for a in alphabet {
                if s.len() + a.len() <= len {
                    let mut t = s.clone();
                    t.extend_from_slice(a.as_bytes());
                    frontier.push(t);
                }
            }
        }
        assert!(checked > 1);
    }

    #[test]
    fn repetition_and_groups() {
        agrees(
            r#"root ::= ("ab" | [c-d])* "x"? [0-9]{1,3}"#,
            &["a", "b", "c", "d", "x", "1", "é"],
            6,
        );
        agrees(r#"root ::= [^a]+ "é" | "a"{2,}"#, &["a", "b", "é"], 6);
    }

    #[test]
    fn right_linear_mutual_recursion() {
        let gbnf = "root ::= item (\",\" root)?\nitem ::= [a-b]+";
        agrees(gbnf, &["a", "b", ","], 7);
        // Two rules that call each other at their ends.
        agrees(
            "root ::= \"a\" x | \"\"\nx ::= \"b\" root | \"c\"",
            &["a", "b", "c"],
            7,
        );
    }

    #[test]
    fn left_and_right_recursion_in_one_rule() {
        agrees(
            "root ::= \"a\" root | root \"b\" | \"c\"",
            &["a", "b", "c"],
            6,
        );
    }

    #[test]
    fn context_free_grammars_are_errors_naming_the_rule() {
        for (gbnf, rule) in [
            ("root ::= \"(\" root \")\" | \"\"", "root"),
            (
                "root ::= value\nvalue ::= \"[\" list \"]\" | \"1\"\nlist ::= value (\",\" value)*",
                "value",
            ),
        ] {
            let e = regex_of(gbnf).unwrap_err();
            let text = e.to_string();
            assert!(matches!(e, GrammarError::Unsupported { .. }), "{text}");
            assert!(
                text.contains(&format!("`{rule}`")) || text.contains("list"),
                "{text}"
            );
            assert!(text.contains("line"), "{text}");
        }
    }

    #[test]
    fn blowups_hit_the_limit() {
        // Each rule uses the previous one twice: 2^30 copies.
        let mut gbnf = String::from("root ::= r0\nr30 ::= \"ab\"\n");
        for i in 0..30 {
            gbnf.push_str(&format!("r{i} ::= r{} r{}\n", i + 1, i + 1));
        }
        let e = regex_of(&gbnf).unwrap_err();
        assert!(e.to_string().contains("max_regex_len"), "{e}");
    }

    struct Rng(u64);
    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n as u64) as usize
        }
    }

    /// A random GBNF expression over a few atoms, rules `x`, `y` and `root`
    /// (so some grammars recurse, at an end or in the middle).
    fn expr(r: &mut Rng, depth: u32) -> String {
        const ATOMS: [&str; 9] = [
            "\"a\"", "\"ab\"", "\"\"", "[a-b]", "[^a]", "x", "y", "root", "\"é\"",
        ];
        let base = if depth < 3 && r.below(3) == 0 {
            let parts: Vec<String> = (0..1 + r.below(3)).map(|_| expr(r, depth + 1)).collect();
            format!(
                "({})",
                parts.join(if r.below(2) == 0 { " | " } else { " " })
            )
        } else {
            ATOMS[r.below(ATOMS.len())].to_string()
        };
        let rep = ["", "", "", "*", "+", "?", "{2}", "{1,3}", "{0,}"][r.below(9)];
        let mut s = format!("{base}{rep}");
        if depth < 2 && r.below(3) == 0 {
            s = format!("{s} {}", expr(r, depth + 1));
        }
        if depth < 2 && r.below(4) == 0 {
            s = format!("{s} | {}", expr(r, depth + 1));
        }
        s
    }

    /// Whenever a random grammar converts, the regex and the Earley
    /// recognizer agree on every short string over its bytes.
    /// A chain of rules each copying the last: the regexes written stop at
    /// a bound (the rest stay grammar rules), memory does not grow with the
    /// square of the chain.
    #[test]
    fn rule_regexes_are_bounded_in_total() {
        let n = 4_000;
        let mut gbnf = String::from("root ::= \"(\" root \")\" | r3999\nr0 ::= \"ab\"\n");
        for i in 1..n {
            gbnf.push_str(&format!("r{i} ::= r{} \"x\"\n", i - 1));
        }
        let g = Grammar::from_gbnf(&gbnf, "root").unwrap();
        let limits = RegularLimits::default();
        let regexes = g.rule_regexes(&limits);
        let total: usize = regexes.iter().flatten().map(String::len).sum();
        assert!(total <= 17 * limits.max_regex_len, "{total} bytes written");
        assert!(regexes[g.rule_id("r0").unwrap().index()].is_some());
        assert!(regexes[g.root().index()].is_none());
    }

    #[test]
    fn random_grammars_agree_with_the_recognizer() {
        let mut r = Rng(0x9E37_79B9_7F4A_7C15);
        let (mut converted, mut refused) = (0, 0);
        for _ in 0..400 {
            let gbnf = format!(
                "root ::= {}\nx ::= {}\ny ::= \"b\" | \"c\" x?\n",
                expr(&mut r, 0),
                expr(&mut r, 1).replace("root", "y")
            );
            let Ok(g) = Grammar::from_gbnf(&gbnf, "root") else {
                continue;
            };
            let regex = match g.to_regex(&RegularLimits {
                max_regex_len: 1 << 16,
                ..RegularLimits::default()
            }) {
                Ok(regex) => regex,
                Err(e) => {
                    assert!(
                        matches!(
                            e,
                            GrammarError::Unsupported { .. } | GrammarError::LimitExceeded { .. }
                        ),
                        "{gbnf}: {e}"
                    );
                    refused += 1;
                    continue;
                }
            };
            converted += 1;
            let dfa = dfa(&regex);
            let alphabet: [&[u8]; 5] = [b"a", b"b", b"c", "é".as_bytes(), b"\xC3"];
            for _ in 0..60 {
                let mut s = Vec::new();
                for _ in 0..r.below(7) {
                    s.extend_from_slice(alphabet[r.below(alphabet.len())]);
                }
                assert_eq!(
                    full_match(&dfa, &s),
                    g.accepts(&s),
                    "{gbnf}\n{regex}\non {s:?}"
                );
            }
        }
        assert!(
            converted > 100 && refused > 10,
            "converted {converted}, refused {refused}"
        );
    }

    /// Trees built from the rules (`RuleHirs`) say what the rules' regex
    /// text says, mutual recursion and self-recursion included, and their
    /// measure bounds the tree built.
    #[test]
    fn rule_trees_agree_with_rule_regexes() {
        let mut r = Rng(0x7EE5);
        let mut rules = 0;
        for _ in 0..300 {
            let gbnf = format!(
                "root ::= {}\nx ::= {}\ny ::= \"b\" | \"c\" x?\n",
                expr(&mut r, 0),
                expr(&mut r, 1).replace("root", "y")
            );
            let Ok(g) = Grammar::from_gbnf(&gbnf, "root") else {
                continue;
            };
            let regexes = g.rule_regexes(&RegularLimits::default());
            let mut trees = RuleHirs::new(&g, &regexes);
            for (i, regex) in regexes.iter().enumerate() {
                let Some(regex) = regex else { continue };
                let rule = RuleId(i as u32);
                let tree = trees.rule(rule).unwrap().unwrap();
                let m = trees.measure(rule).unwrap();
                let built = Measure::of(&tree);
                assert!(
                    built.weight <= m.weight && built.depth <= m.depth,
                    "{gbnf}: {built:?} > {m:?}"
                );
                let text = dfa(regex);
                let limits = tokensieve_automata::DfaLimits {
                    nfa_size_limit: 10 << 20,
                    dfa_size_limit: 32 << 20,
                    determinize_size_limit: 32 << 20,
                    max_dfa_states: 50_000,
                    minimize: true,
                };
                let lazy = tokensieve_automata::lazy::LazyDfa::from_hir(&tree, &limits).unwrap();
                let alphabet: [&[u8]; 5] = [b"a", b"b", b"c", "é".as_bytes(), b"\xC3"];
                for _ in 0..40 {
                    let mut s = Vec::new();
                    for _ in 0..r.below(7) {
                        s.extend_from_slice(alphabet[r.below(alphabet.len())]);
                    }
                    let mut state = lazy.start();
                    for &b in &s {
                        state = lazy.next(state, b);
                    }
                    let by_tree =
                        state != tokensieve_automata::dfa::DEAD && lazy.is_accepting(state);
                    assert_eq!(by_tree, full_match(&text, &s), "{gbnf}\n{regex}\non {s:?}");
                }
                rules += 1;
            }
        }
        assert!(rules > 300, "only {rules} regular rules");
    }

    /// The reference reading of tagged text: left to right, free text
    /// until a trigger begins, then a whole tag opened by it.
    fn tagged_reference(
        text: &[char],
        triggers: &[&str],
        tags: &[(usize, dense::DFA<Vec<u32>>)],
    ) -> bool {
        fn from(
            i: usize,
            text: &[char],
            triggers: &[Vec<char>],
            tags: &[(usize, dense::DFA<Vec<u32>>)],
        ) -> bool {
            if i == text.len() {
                return true;
            }
            match triggers.iter().position(|t| text[i..].starts_with(t)) {
                None => from(i + 1, text, triggers, tags),
                Some(t) => tags.iter().filter(|(tr, _)| *tr == t).any(|(_, dfa)| {
                    (i + 1..=text.len()).any(|k| {
                        let s: String = text[i..k].iter().collect();
                        full_match(dfa, s.as_bytes()) && from(k, text, triggers, tags)
                    })
                }),
            }
        }
        let triggers: Vec<Vec<char>> = triggers.iter().map(|t| t.chars().collect()).collect();
        from(0, text, &triggers, tags)
    }

    #[test]
    fn tagged_text_agrees_with_the_left_to_right_reading() {
        /// Triggers, and tags as (trigger index, regex).
        type Case<'a> = (&'a [&'a str], &'a [(usize, &'a str)]);
        let cases: [Case; 4] = [
            (&["<f"], &[(0, "<f[0-9]>"), (0, "<fx>")]),
            (&["aab", "bc"], &[(0, "aab[x0]*>"), (1, "bc>")]),
            (&["é>"], &[(0, "é>(?:a|b)+é")]),
            (&["xx"], &[]),
        ];
        let alphabet = ['<', 'f', 'a', 'b', 'c', '0', 'x', '>', 'é'];
        let mut r = Rng(0x2545_F491_4F6C_DD1D);
        for (triggers, tags) in cases {
            let tag_list: Vec<Tag> = tags
                .iter()
                .map(|&(trigger, regex)| Tag {
                    trigger,
                    regex: regex.into(),
                })
                .collect();
            let regex = tagged_text(triggers, &tag_list, &RegularLimits::default()).unwrap();
            let whole = dfa(&regex);
            let tag_dfas: Vec<(usize, dense::DFA<Vec<u32>>)> =
                tags.iter().map(|&(t, re)| (t, dfa(re))).collect();
            let mut accepted = 0;
            for _ in 0..3000 {
                let text: Vec<char> = (0..r.below(9))
                    .map(|_| alphabet[r.below(alphabet.len())])
                    .collect();
                let s: String = text.iter().collect();
                let expected = tagged_reference(&text, triggers, &tag_dfas);
                accepted += usize::from(expected);
                assert_eq!(
                    full_match(&whole, s.as_bytes()),
                    expected,
                    "{triggers:?} {tags:?} on {s:?}\n{regex}"
                );
            }
            assert!(accepted > 100, "{triggers:?}: only {accepted} accepted");
            // Overlaps, against the reference by hand: in "aabc>" the
            // trigger "aab" begins first, and no tag it opens fits.
            for text in [
                "aabc>",
                "abc>",
                "xbc>",
                "aab0>bc>",
                "<f<f1>",
                "<<fx>",
                "é>é>aé",
            ] {
                let chars: Vec<char> = text.chars().collect();
                assert_eq!(
                    full_match(&whole, text.as_bytes()),
                    tagged_reference(&chars, triggers, &tag_dfas),
                    "{triggers:?} on {text:?}"
                );
            }
            // A tag in the middle of text is accepted.
            if let Some(&(_, re)) = tags.first()
                && re.starts_with("<f")
            {
                assert!(full_match(&whole, "ab <f7> c".as_bytes()));
                assert!(!full_match(&whole, "ab <f c".as_bytes()));
            }
        }
    }

    #[test]
    fn tagged_text_rejects_ambiguous_triggers() {
        for triggers in [&["<f", "x<fy"][..], &["", "a"], &["ab", "ab"]] {
            let e = tagged_text(triggers, &[], &RegularLimits::default());
            assert!(
                matches!(e, Err(GrammarError::InvalidSpec(_))),
                "{triggers:?}: {e:?}"
            );
        }
    }

    #[test]
    fn large_inputs_end_in_a_regex_or_a_named_limit() {
        // Rules in one right-linear cycle: 800 took minutes with a cubic
        // solver; 60 are checked against their meaning.
        let cycle = |n: usize| {
            let mut gbnf = String::from("root ::= r0\n");
            for i in 0..n {
                gbnf.push_str(&format!(
                    "r{i} ::= \"a\" r{} | \"b\" r0 | \"c\"\n",
                    (i + 1) % n
                ));
            }
            regex_of(&gbnf).unwrap()
        };
        assert!(cycle(800).len() < 1 << 16);
        let dfa = dfa(&cycle(60));
        assert!(full_match(&dfa, b"aabac") && full_match(&dfa, b"c") && !full_match(&dfa, b"aab"));
        // Too many trigger prefixes.
        let triggers: Vec<String> = (0..1000).map(|i| format!("<t{i:04}x")).collect();
        let refs: Vec<&str> = triggers.iter().map(String::as_str).collect();
        let e = tagged_text(&refs, &[], &RegularLimits::default()).unwrap_err();
        assert!(e.to_string().contains("max_trigger_states"), "{e}");
    }

    #[test]
    fn literals_are_escaped() {
        agrees(
            r#"root ::= "a.b*" | "(\\)" | "[x]""#,
            &["a", ".", "b", "*", "(", "\\", ")", "[", "x", "]"],
            5,
        );
    }
}
