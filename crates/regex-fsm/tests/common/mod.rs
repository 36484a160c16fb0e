//! Oracles for the tests, independent of the backend's own DFA code: full
//! matches from `regex_automata::meta::Regex` (`^(?:...)$`), and "can this
//! prefix still be completed" from a plain `regex-automata` dense DFA plus a
//! breadth-first search for a match.

#![allow(dead_code)]

use regex_automata::dfa::{Automaton, StartKind, dense};
use regex_automata::util::primitives::StateID;
use regex_automata::util::start;
use regex_automata::{Anchored, MatchKind};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use tokensieve_core::Vocabulary;
use tokensieve_regex_fsm::{RegexFsmBackend, RegexFsmConfig};

pub fn tiny_backend() -> RegexFsmBackend {
    RegexFsmBackend::new(
        Arc::new(tokensieve_core::vocab::fixtures::json_tiny()),
        RegexFsmConfig::default(),
    )
}

/// Full match by the `regex` crate's engine.
pub struct FullMatch(regex_automata::meta::Regex);

impl FullMatch {
    pub fn new(pattern: &str) -> Self {
        FullMatch(
            regex_automata::meta::Regex::new(&format!("^(?:{pattern})$"))
                .unwrap_or_else(|e| panic!("oracle cannot build {pattern:?}: {e}")),
        )
    }

    pub fn is_match(&self, s: &[u8]) -> bool {
        self.0.is_match(s)
    }
}

/// Is a byte string a prefix of some full match?
pub struct PrefixOracle {
    dfa: dense::DFA<Vec<u32>>,
    start: StateID,
    can_finish: HashMap<StateID, bool>,
}

impl PrefixOracle {
    pub fn new(pattern: &str) -> Self {
        let dfa = dense::Builder::new()
            .configure(
                dense::Config::new()
                    .match_kind(MatchKind::All)
                    .start_kind(StartKind::Anchored),
            )
            .build(pattern)
            .unwrap_or_else(|e| panic!("oracle cannot build {pattern:?}: {e}"));
        let start = dfa
            .start_state(&start::Config::new().anchored(Anchored::Yes))
            .unwrap();
        PrefixOracle {
            dfa,
            start,
            can_finish: HashMap::new(),
        }
    }

    pub fn viable(&mut self, bytes: &[u8]) -> bool {
        let mut s = self.start;
        for &b in bytes {
            s = self.dfa.next_state(s, b);
            if self.dfa.is_dead_state(s) {
                return false;
            }
        }
        self.finishes(s)
    }

    pub fn full_match(&self, bytes: &[u8]) -> bool {
        let mut s = self.start;
        for &b in bytes {
            s = self.dfa.next_state(s, b);
        }
        self.dfa.is_match_state(self.dfa.next_eoi_state(s))
    }

    fn finishes(&mut self, from: StateID) -> bool {
        if let Some(&r) = self.can_finish.get(&from) {
            return r;
        }
        let mut seen = HashSet::from([from]);
        let mut queue = VecDeque::from([from]);
        let mut found = false;
        while let Some(s) = queue.pop_front() {
            if self.dfa.is_match_state(self.dfa.next_eoi_state(s)) {
                found = true;
                break;
            }
            for b in 0..=255u8 {
                let t = self.dfa.next_state(s, b);
                if !self.dfa.is_dead_state(t) && seen.insert(t) {
                    queue.push_back(t);
                }
            }
        }
        self.can_finish.insert(from, found);
        found
    }
}

pub fn allowed(row: &[u32], id: u32) -> bool {
    tokensieve_core::bitmask::row_is_allowed(row, id)
}

/// Token ids of a vocabulary that a grammar may match, plus stop tokens.
pub fn all_ids(vocab: &Vocabulary) -> Vec<u32> {
    (0..vocab.vocab_size() as u32).collect()
}
