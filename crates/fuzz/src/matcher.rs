//! The `matcher` target: the input picks a small grammar (one of
//! [`GRAMMARS`] or a random one) and then a sequence of matcher calls
//! (accept a token, accept bytes, fill a mask, roll back, fork, reset,
//! jump forward, accept the stop token) that is played on both backends
//! (and on earley with every lexeme exit filtered by what may follow it) at
//! once and checked against the reference recognizer after every call:
//! a call succeeds exactly when the text it leads to is a prefix of the
//! language (a sentence, for the stop token); every token in a filled mask
//! is accepted and every token outside it refused; `is_accepting` is the
//! recognizer's verdict on the text so far; jump-forward bytes are the only
//! way on.

use std::collections::HashMap;

use tokensieve_core::bitmask::row_is_allowed;
use tokensieve_core::testing::SplitMix64;
use tokensieve_core::{Constraint, GrammarBackend, GrammarObject, StepError};
use tokensieve_grammar::Grammar;
use tokensieve_grammar::testing::random_gbnf;

use crate::backends::{backends, check_error, compile_both, eos, is_limit, matchers, vocabulary};

/// Small grammars (root `root`): regular ones, which both backends
/// compile, and context-free ones (nested, left-recursive, ambiguous) for
/// earley alone; multi-byte characters; tokens of the vocabulary that
/// cross their boundaries.
pub const GRAMMARS: &[&str] = &[
    r#"root ::= [a-c]* "x""#,
    r#"root ::= ("ab" | "a" [0-9]+)? "," root | "end""#,
    r#"root ::= ("true" | "false" | "null" | "-"? [0-9]{1,3}) (", " root)?"#,
    r#"root ::= "[" ( str ("," str)* )? "]"
str ::= "\"" ( [^"\\] | "\\" ["\\nu] )* "\"""#,
    r#"root ::= "{\"" [a-z]{1,4} "\": " ("null" | [0-9]+ | "\"" [a-c]* "\"") "}""#,
    r#"root ::= "é"+ | "😀" [^a]? | "(é)""#,
    r#"root ::= "a"{2,5} "b"? | "" "#,
    r#"root ::= ( "(" root ")" | "[" root "]" | [a-c] )*"#,
    r#"root ::= expr
expr ::= expr [-+] term | term
term ::= term [*/] factor | factor
factor ::= "-" factor | "(" expr ")" | [0-9]+ ("." [0-9]+)?"#,
    r#"root ::= s
s ::= s s | "a" | "" | "b" s "b""#,
    r#"root ::= "{" ( pair ("," pair)* )? "}"
pair ::= "\"" [a-z]+ "\":" value
value ::= root | "[" ( value ("," value)* )? "]" | [0-9]+ | "true" | "null""#,
    r#"root ::= ws "x" ws | ws "(" root ")" ws
ws ::= [ \t\n]*"#,
];

/// Most calls one input plays, and the longest text it builds: the
/// recognizer is cubic, and a run must stay in milliseconds.
const MAX_CALLS: usize = 64;
const MAX_TEXT: usize = 96;

/// The input read as a stream of choices (zero once it runs out).
struct Choices<'a>(&'a [u8]);

impl Choices<'_> {
    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }

    fn below(&mut self, n: usize) -> usize {
        let v = u16::from_le_bytes([self.byte(), self.byte()]) as usize;
        v % n.max(1)
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// What the recognizer says about the text the matchers have accepted.
struct Oracle {
    grammar: Grammar,
    text: Vec<u8>,
    terminated: bool,
    /// `(text length, terminated)` before each step, oldest first (all of
    /// them; the matchers keep the last `max_rollback`).
    history: Vec<(usize, bool)>,
    prefixes: HashMap<Vec<u8>, bool>,
    /// The bytes that may follow the text, by text.
    next: HashMap<Vec<u8>, Option<[bool; 256]>>,
}

impl Oracle {
    /// Whether `text` followed by `byte` may go on: one chart per text
    /// answers all 256 bytes (most tokens of a mask are single bytes).
    fn next_byte(&mut self, text: &[u8], byte: u8) -> bool {
        let grammar = &self.grammar;
        let next = self
            .next
            .entry(text.to_vec())
            .or_insert_with(|| grammar.next_bytes(text));
        next.is_some_and(|n| n[byte as usize])
    }

    fn is_prefix(&mut self, text: &[u8]) -> bool {
        if let Some(&v) = self.prefixes.get(text) {
            return v;
        }
        let v = self.grammar.accepts_prefix(text);
        self.prefixes.insert(text.to_vec(), v);
        v
    }

    /// Whether the current text followed by `more` may go on.
    fn takes(&mut self, more: &[u8]) -> bool {
        if self.terminated {
            return false;
        }
        let text = self.text.clone();
        match more {
            [] => self.is_prefix(&text),
            [first, ..] if !self.next_byte(&text, *first) => false,
            [_] => true,
            _ => {
                let mut t = text;
                t.extend_from_slice(more);
                self.is_prefix(&t)
            }
        }
    }

    fn accepting(&self) -> bool {
        self.grammar.accepts(&self.text)
    }

    fn push(&mut self, more: &[u8], stop: bool) {
        self.history.push((self.text.len(), self.terminated));
        self.text.extend_from_slice(more);
        self.terminated |= stop;
    }
}

/// The matchers of both backends (those that compiled) and the oracle.
struct Run {
    matchers: Vec<(&'static str, Box<dyn GrammarObject>)>,
    oracle: Oracle,
    /// The first matcher's last mask, for picking allowed tokens.
    last_mask: Vec<u32>,
}

/// How a step of every matcher went: all as the oracle says, or a named
/// limit that ends the run (not a bug).
enum Outcome {
    Agreed,
    Limit,
}

impl Run {
    /// Plays one step on every matcher and checks its result against
    /// `expected` (the oracle's "it goes on"); on success the oracle moves
    /// by `more` (and to terminated for the stop token).
    fn step(
        &mut self,
        what: &str,
        expected: bool,
        more: &[u8],
        stop: bool,
        call: impl Fn(&mut dyn GrammarObject) -> Result<(), StepError>,
    ) -> Outcome {
        for (name, m) in &mut self.matchers {
            match call(&mut **m) {
                Ok(()) => assert!(
                    expected,
                    "{name}: {what} was taken after {:?}, but the recognizer refuses it",
                    String::from_utf8_lossy(&self.oracle.text)
                ),
                Err(e) if is_limit(&e) => return Outcome::Limit,
                Err(e) => assert!(
                    !expected,
                    "{name}: {what} was refused after {:?} ({e}), but the recognizer takes it",
                    String::from_utf8_lossy(&self.oracle.text)
                ),
            }
        }
        if expected {
            self.oracle.push(more, stop);
        }
        Outcome::Agreed
    }

    /// Every matcher's state against the oracle's.
    fn check_state(&mut self) {
        let accepting = self.oracle.accepting();
        let history = self.oracle.history.len();
        for (name, m) in &self.matchers {
            assert_eq!(
                m.is_terminated(),
                self.oracle.terminated,
                "{name}: is_terminated after {:?}",
                String::from_utf8_lossy(&self.oracle.text)
            );
            assert_eq!(
                m.is_accepting(),
                accepting,
                "{name}: is_accepting after {:?}",
                String::from_utf8_lossy(&self.oracle.text)
            );
            assert!(
                m.rollback_available() <= history,
                "{name}: {} steps to roll back, {history} taken",
                m.rollback_available()
            );
        }
    }

    /// Every matcher's mask, token by token, against the oracle.
    fn check_masks(&mut self) {
        let vocab = vocabulary();
        let mut row = vec![0u32; vocab.mask_words()];
        let accepting = self.oracle.accepting();
        let mut expected = vec![false; vocab.vocab_size()];
        for (t, e) in expected.iter_mut().enumerate() {
            let t = t as u32;
            *e = if t == eos() {
                accepting || self.oracle.terminated
            } else {
                vocab
                    .grammar_bytes(t)
                    .is_some_and(|bytes| self.oracle.takes(bytes))
            };
        }
        for (i, (name, m)) in self.matchers.iter_mut().enumerate() {
            m.fill_bitmask(&mut row);
            for (t, &e) in expected.iter().enumerate() {
                assert_eq!(
                    row_is_allowed(&row, t as u32),
                    e,
                    "{name}: token {t} ({:?}) in the mask after {:?}",
                    String::from_utf8_lossy(vocab.token_bytes(t as u32)),
                    String::from_utf8_lossy(&self.oracle.text)
                );
            }
            if i == 0 {
                self.last_mask.clone_from(&row);
            }
        }
    }

    /// A token: usually one of the last mask's, sometimes any id.
    fn pick_token(&self, c: &mut Choices) -> u32 {
        let n = vocabulary().vocab_size();
        if c.byte() < 192 {
            let allowed: Vec<u32> = (0..n as u32)
                .filter(|&t| row_is_allowed(&self.last_mask, t))
                .collect();
            if !allowed.is_empty() {
                return allowed[c.below(allowed.len())];
            }
        }
        c.below(n) as u32
    }

    fn accept_token(&mut self, t: u32) -> Outcome {
        let vocab = vocabulary();
        let (expected, more, stop) = if t == eos() {
            let ok = !self.oracle.terminated && self.oracle.accepting();
            (ok, Vec::new(), true)
        } else {
            let bytes = vocab.grammar_bytes(t).unwrap_or_default().to_vec();
            (self.oracle.takes(&bytes), bytes, false)
        };
        let what = format!(
            "token {t} ({:?})",
            String::from_utf8_lossy(vocab.token_bytes(t))
        );
        self.step(&what, expected, &more, stop, |m| m.accept_token(t))
    }

    fn accept_bytes(&mut self, bytes: &[u8]) -> Outcome {
        let expected = self.oracle.takes(bytes);
        let what = format!("bytes {:?}", String::from_utf8_lossy(bytes));
        self.step(&what, expected, bytes, false, |m| m.accept_bytes(bytes))
    }

    /// Each matcher's jump-forward bytes: certain (no other first byte
    /// goes on, and the text so far is not a sentence), a prefix of the
    /// language, and taken by `accept_bytes`; the run then takes the first
    /// matcher's.
    fn jump_forward(&mut self, take: bool) -> Outcome {
        let mut first = None;
        for i in 0..self.matchers.len() {
            let jump = self.matchers[i].1.jump_forward();
            let name = self.matchers[i].0;
            if jump.is_empty() {
                continue;
            }
            assert!(
                self.oracle.takes(&jump),
                "{name}: jump_forward {:?} after {:?} leaves the language",
                String::from_utf8_lossy(&jump),
                String::from_utf8_lossy(&self.oracle.text)
            );
            assert!(
                !self.oracle.accepting(),
                "{name}: jump_forward {:?} after the sentence {:?}, which may end",
                String::from_utf8_lossy(&jump),
                String::from_utf8_lossy(&self.oracle.text)
            );
            for b in 0..=255u8 {
                if b != jump[0] {
                    assert!(
                        !self.oracle.takes(&[b]),
                        "{name}: jump_forward {:?} after {:?}, but byte {b:#04x} also goes on",
                        String::from_utf8_lossy(&jump),
                        String::from_utf8_lossy(&self.oracle.text)
                    );
                }
            }
            first.get_or_insert(jump);
        }
        match first {
            Some(jump) if take => self.accept_bytes(&jump),
            _ => Outcome::Agreed,
        }
    }

    /// Rolls every matcher back `k` steps, where every one can.
    fn rollback(&mut self, c: &mut Choices) -> Outcome {
        let can = self
            .matchers
            .iter()
            .map(|(_, m)| m.rollback_available())
            .min()
            .unwrap_or(0);
        let most = self
            .matchers
            .iter()
            .map(|(_, m)| m.rollback_available())
            .max()
            .unwrap_or(0);
        if c.byte() < 32 {
            // Too far for every matcher: an error, nothing undone.
            for (name, m) in &mut self.matchers {
                match m.rollback(most + 1) {
                    Err(StepError::RollbackTooFar { .. }) => {}
                    other => panic!("{name}: rollback({}) past the history: {other:?}", most + 1),
                }
            }
            return Outcome::Agreed;
        }
        let k = c.below(can + 1);
        for (name, m) in &mut self.matchers {
            if let Err(e) = m.rollback(k) {
                panic!("{name}: rollback({k}) with {can} available: {e}");
            }
        }
        let keep = self.oracle.history.len() - k;
        if k > 0 {
            let (len, terminated) = self.oracle.history[keep];
            self.oracle.text.truncate(len);
            self.oracle.terminated = terminated;
        }
        self.oracle.history.truncate(keep);
        Outcome::Agreed
    }

    /// Forks every matcher. Either the run goes on with the forks, or a
    /// fork takes a token and the originals must be as they were.
    fn fork(&mut self, c: &mut Choices) -> Outcome {
        let t = self.pick_token(c);
        if c.byte() < 128 {
            for (_, m) in &mut self.matchers {
                *m = m.fork();
            }
            return Outcome::Agreed;
        }
        let vocab = vocabulary();
        let mut before = vec![0u32; vocab.mask_words()];
        let mut after = before.clone();
        for (name, m) in &mut self.matchers {
            m.fill_bitmask(&mut before);
            let accepting = m.is_accepting();
            let mut f = m.fork();
            match f.accept_token(t) {
                Err(e) if is_limit(&e) => return Outcome::Limit,
                _ => {}
            }
            drop(f);
            m.fill_bitmask(&mut after);
            assert!(
                before == after && accepting == m.is_accepting(),
                "{name}: a fork's token {t} changed the original"
            );
        }
        Outcome::Agreed
    }

    fn reset(&mut self) {
        for (_, m) in &mut self.matchers {
            m.reset();
        }
        for (name, m) in &self.matchers {
            assert_eq!(m.rollback_available(), 0, "{name}: history after reset");
        }
        self.oracle.text.clear();
        self.oracle.history.clear();
        self.oracle.terminated = false;
    }
}

/// The grammar an input picks: one of [`GRAMMARS`], or (first byte past
/// them) a random one seeded by the next eight bytes.
fn pick_grammar(c: &mut Choices) -> String {
    let i = c.byte() as usize % (GRAMMARS.len() + 1);
    if i < GRAMMARS.len() {
        return GRAMMARS[i].to_string();
    }
    let seed = (0..8).fold(0u64, |s, _| s << 8 | c.byte() as u64);
    random_gbnf(&mut SplitMix64(seed))
}

/// The target's body.
pub fn matcher(data: &[u8]) {
    let mut c = Choices(data);
    let gbnf = pick_grammar(&mut c);
    let grammar = match Grammar::from_gbnf(&gbnf, "root") {
        Ok(g) => g,
        Err(e) => return check_error("gbnf", &e),
    };
    let constraint = Constraint::ebnf(&gbnf, "root");
    let mut compiled = compile_both(&constraint);
    let filtered = backends().earley_filtered.compile(&constraint);
    if let Err(e) = &filtered {
        check_error("earley follow_exits=0 item_summaries=1 group_walks=1", e);
    }
    compiled.push((
        "earley follow_exits=0 item_summaries=1 group_walks=1",
        filtered,
    ));
    let mut run = Run {
        matchers: matchers(&compiled),
        oracle: Oracle {
            grammar,
            text: Vec::new(),
            terminated: false,
            history: Vec::new(),
            prefixes: HashMap::new(),
            next: HashMap::new(),
        },
        last_mask: vec![0; vocabulary().mask_words()],
    };
    if run.matchers.is_empty() {
        return;
    }
    run.check_masks();
    for _ in 0..MAX_CALLS {
        if c.is_empty() {
            break;
        }
        let outcome = match c.byte() % 16 {
            0..=5 => {
                let t = run.pick_token(&mut c);
                if run.oracle.text.len() + vocabulary().token_bytes(t).len() > MAX_TEXT {
                    run.reset();
                    Outcome::Agreed
                } else {
                    run.accept_token(t)
                }
            }
            6 => run.accept_token(eos()),
            7 => {
                let n = 1 + c.below(6);
                let bytes: Vec<u8> = (0..n).map(|_| c.byte()).collect();
                run.accept_bytes(&bytes)
            }
            8..=10 => {
                run.check_masks();
                Outcome::Agreed
            }
            11 => run.rollback(&mut c),
            12 => run.fork(&mut c),
            13 => {
                run.reset();
                Outcome::Agreed
            }
            _ => {
                let take = c.byte() < 192 && run.oracle.text.len() < MAX_TEXT;
                run.jump_forward(take)
            }
        };
        if let Outcome::Limit = outcome {
            return;
        }
        run.check_state();
    }
    run.check_masks();
}
