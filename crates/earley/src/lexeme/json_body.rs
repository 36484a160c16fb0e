//! The JSON string body: its walks kept per vocabulary
//! ([`VocabSkeleton`]), and a state's row read from them where the state
//! is inside a string ([`Lexeme::body_walk`]).

use super::*;

/// The step of a JSON string's body: every character but the quote, the
/// backslash and the control characters U+0000 to U+001F (RFC 8259).
pub(super) const JSON_STRING_BODY: StepKey =
    ([0xFFFF_FFFB_0000_0000, 0xFFFF_FFFF_EFFF_FFFF], ALL_LEADS);

/// The skeletons of a JSON string's body on one vocabulary: what every
/// string value and key of a JSON grammar walks through. They depend on the
/// vocabulary alone, so a backend keeps them, with the token trie: the
/// free body's (a walk of the whole trie, about 0.5 ms on Llama 3's) and
/// those of bounded strings' budgets made with it, and every grammar's
/// [`Skeletons`] asks them first.
#[derive(Debug, Clone)]
pub(crate) struct VocabSkeleton(pub(super) Arc<VocabWalks>);

/// What a vocabulary keeps of JSON strings for every grammar on it (see
/// [`VocabSkeleton`]).
#[derive(Debug, Default)]
pub(super) struct VocabWalks {
    pub(super) table: SkeletonTable,
    /// The walk from the body of a string that ends its lexeme (made on
    /// first use; `None` if the reference automaton cannot be built).
    pub(super) body: OnceLock<Option<BodyWalk>>,
    /// The same for a key's body ([`Body::Key`]).
    pub(super) key_body: OnceLock<Option<BodyWalk>>,
    /// The walks found by signature of every grammar whose lexemes are
    /// shared (see [`Skeletons::kept_walks`]).
    pub(super) kept_walks: Arc<KeptWalks>,
    /// The texts past JSON's whitespace between tokens, for walks from
    /// the start of a run of it and from one byte into it (made with the
    /// skeletons).
    pub(super) whitespace: Vec<RunTexts>,
}

/// The string bodies a vocabulary keeps the walk of ([`BodyWalk`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Body {
    /// A JSON string's, `STRING_CHAR*"`: any character, escapes too.
    Value,
    /// An object's other keys' (any key but the named properties), whose
    /// characters are those no key writes escaped, `[^"\\\x00-\x1F]*"`
    /// ([`OtherKeys`]): the body a value's walk cannot serve, as the
    /// value's takes a backslash where the key's dies.
    Key,
}

impl Body {
    pub(super) fn regex(self) -> String {
        match self {
            Body::Value => format!(r#"{}*""#, tokensieve_json_schema::STRING_CHAR),
            Body::Key => r#"[^"\\\x00-\x1F]*""#.to_string(),
        }
    }
}

/// The walk from an unconstrained JSON string's body to the end of its
/// lexeme at the closing quote, `STRING_CHAR*"`: the same for every
/// lexeme whose automaton goes on from a state as this one's does from
/// its start (a string value at the end of its lexeme), whichever lexeme
/// and grammar it is in.
#[derive(Debug)]
pub(super) struct BodyWalk {
    pub(super) dfa: ByteDfa,
    pub(super) index: Arc<StateIndex>,
    /// The text of the tokens past the body's closing quote.
    pub(super) quote: TextTrie,
}

/// The most states of a lexeme compared with [`BodyWalk`]'s automaton
/// (which has nine).
pub(super) const BODY_STATES: usize = 32;

impl VocabSkeleton {
    /// The skeletons of a JSON string's body on `trie`, without the texts
    /// past whitespace.
    #[cfg(test)]
    pub(crate) fn json_string_body(trie: &TokenTrie) -> VocabSkeleton {
        VocabSkeleton::json(trie, 0)
    }

    /// The skeletons of a JSON string's body on `trie`, and the texts
    /// past a run of up to `max_whitespace` bytes of JSON's whitespace
    /// and past the rest of one after its first byte ([`RunTexts`]: a
    /// pass over the trie each, made here so that no mask pays for them;
    /// none for 0). A state one byte into a run is as common as one at
    /// its start: Llama 3 writes the space before a number as a token of
    /// its own.
    pub(crate) fn json(trie: &TokenTrie, max_whitespace: u32) -> VocabSkeleton {
        let bytes = [1u64 << b' ' | 1 << b'\t' | 1 << b'\n' | 1 << b'\r', 0];
        let whitespace = [max_whitespace, max_whitespace.saturating_sub(1)]
            .into_iter()
            .filter(|&left| left >= 2)
            .map(|left| RunTexts::new(trie, bytes, left))
            .collect();
        let walks = VocabWalks {
            whitespace,
            ..VocabWalks::default()
        };
        let (ascii, leads) = JSON_STRING_BODY;
        let step = TextStep {
            ascii,
            utf8: true,
            leads,
            to: 0,
        };
        // And every budget's: a bounded string near its end asks one,
        // each a walk of the whole trie (1-4 ms on Llama 3's, the most for
        // the least budgets, whose frontier holds most tokens), which made
        // the first mask of each of them in a process a slow one. About 37
        // ms for all of them, once per vocabulary, with the trie.
        let full = trie.max_depth as u32;
        walks.table.get(trie, &step, full);
        for budget in chain_budgets(full) {
            walks.table.get(trie, &step, budget);
        }
        VocabSkeleton(Arc::new(walks))
    }

    /// The [`BodyWalk`] on `trie` (the vocabulary's: every lexeme holding
    /// this has it), made now if no walk has needed it yet.
    pub(super) fn body(
        &self,
        body: Body,
        trie: &Arc<TokenTrie>,
        words: usize,
    ) -> Option<&BodyWalk> {
        let slot = match body {
            Body::Value => &self.0.body,
            Body::Key => &self.0.key_body,
        };
        slot.get_or_init(|| {
            let regex = body.regex();
            let limits = DfaLimits {
                nfa_size_limit: 1 << 20,
                dfa_size_limit: 1 << 20,
                determinize_size_limit: 1 << 20,
                max_dfa_states: BODY_STATES,
                minimize: true,
            };
            let dfa = ByteDfa::build(&regex, &limits).ok()?;
            let lexeme = Lexeme::new(
                Making::Now(LexDfa::Eager(dfa.clone())),
                trie.clone(),
                words,
                Arc::new(Skeletons::starting_with(self, false)),
            );
            let index = Arc::new(lexeme.build_state(dfa.start()));
            let exits: Vec<(u32, u32)> = index.exits.iter(trie).collect();
            let quote = TextTrie::below(trie, &exits);
            Some(BodyWalk { dfa, index, quote })
        })
        .as_ref()
    }
}

impl Lexeme {
    /// The vocabulary's walk of a string's body ([`BodyWalk`]) if `state`
    /// goes on as that body does up to its closing quote: every byte
    /// string leads from both to live states alike, accepting alike (the
    /// automata are compared state by state from there, as far as
    /// [`BODY_STATES`]), and every closing quote to one state of the
    /// lexeme. Where that state ends the lexeme as the body's does (no
    /// byte goes on), the walk is the body's, shared; where the lexeme
    /// goes on after the quote (a string value in a lexeme that runs on
    /// to the next key, its separators and spaces), it is the body's with
    /// what the vocabulary's tokens do past each closing quote walked
    /// from that state: the body's exits, a few hundred trie nodes, where
    /// walking the body again read its 1,500 escapes. The [`Body`] asked
    /// is a value's where the state takes a backslash, else a key's (an
    /// object's other keys, then their colon: in MaskBench's slow masks,
    /// most of the walks through escapes left were of these). Past a
    /// key's quote, the other keys' lexemes of one grammar with the same
    /// text after the keys share one walk ([`Skeletons`]), as every
    /// object's lexeme of them otherwise made its own.
    pub(super) fn body_walk(&self, state: u32) -> Option<Arc<StateIndex>> {
        let vocab = self.skeletons.vocab.as_ref()?;
        if !self.is_wide(state) || self.loop_into(state).is_none() {
            return None;
        }
        let dfa = self.dfa();
        // A value's body takes a backslash (an escape), a key's does not:
        // the one whose walk may serve is asked.
        let kind = if dfa.row(state)[dfa.classes()[b'\\' as usize] as usize] != DEAD {
            Body::Value
        } else {
            Body::Key
        };
        let body = vocab.body(kind, &self.trie, self.words)?;
        let after = self.after_the_body(state, body, kind == Body::Key)?;
        if dfa.is_accepting(after) && dfa.row(after).iter().all(|&t| t == DEAD) {
            return Some(body.index.clone());
        }
        // Past a key's quote, the language is the text after the keys (the
        // lexeme is the keys then that text, and the loop is the keys'
        // own): one walk serves every such lexeme of the grammar.
        let shared = match (kind, &self.after_keys) {
            (Body::Key, Some(text)) => Some(text),
            _ => None,
        };
        let Some(text) = shared else {
            return Some(self.past_the_quote_kept(body, kind, after));
        };
        let known = self
            .skeletons
            .past_keys
            .lock()
            .expect("key walks")
            .get(text)
            .cloned();
        if let Some(known) = known {
            return Some(known);
        }
        // Made without the lock held: two lexemes may both make it, and
        // the first is kept.
        let made = self.past_the_quote_kept(body, kind, after);
        let mut walks = self.skeletons.past_keys.lock().expect("key walks");
        Some(walks.entry(text.clone()).or_insert(made).clone())
    }

    /// The state `state` reaches at `body`'s closing quote, where it goes
    /// on as `body` does up to it (see [`Lexeme::body_walk`]). With
    /// `one_each`, each of the body's states goes with one state of the
    /// lexeme only: a key's loop does (after the names, one state per
    /// state of the body), and a search inside a string, whose states a
    /// body's would all meet, is told apart at its second state, not
    /// after [`BODY_STATES`] of them (a key body's walk asked of every
    /// wide loop without a backslash cost more than it saved).
    pub(super) fn after_the_body(
        &self,
        state: u32,
        body: &BodyWalk,
        one_each: bool,
    ) -> Option<u32> {
        let dfa = self.dfa();
        let classes = dfa.classes();
        // Each state of the lexeme met, with the body's state it goes on
        // as (the body's automaton is minimal: one each), up to the
        // closing quote (the body's one accepting state, where it ends).
        let mut pairs = vec![(state, body.dfa.start())];
        let mut after_quote = None;
        let mut k = 0;
        while let Some(&(x, y)) = pairs.get(k) {
            k += 1;
            if dfa.is_accepting(x) || body.dfa.is_accepting(y) {
                return None;
            }
            let row = dfa.row(x);
            // Most bytes go where the byte before them went.
            let mut last = (DEAD, DEAD);
            for b in 0..=255u8 {
                let next = (row[classes[b as usize] as usize], body.dfa.next(y, b));
                if next == last {
                    continue;
                }
                last = next;
                match next {
                    (DEAD, DEAD) => {}
                    (DEAD, _) | (_, DEAD) => return None,
                    (x, y) if body.dfa.is_accepting(y) => match after_quote {
                        Some(a) if a != x => return None,
                        _ => after_quote = Some(x),
                    },
                    (x, y) => match pairs.iter().find(|p| p.0 == x) {
                        Some(p) if p.1 != y => return None,
                        Some(_) => {}
                        None if pairs.len() >= BODY_STATES => return None,
                        None if one_each && pairs.iter().any(|p| p.1 == y) => return None,
                        None => pairs.push((x, y)),
                    },
                }
            }
        }
        let after = after_quote?;
        // A state met as the body's and as the one after the quote is
        // left to the lexeme's own walk.
        (!pairs.iter().any(|p| p.0 == after)).then_some(after)
    }

    /// The index of `state` at the start of a run of JSON's whitespace or
    /// one byte into it (a narrow state whose [`Chain`] one of the
    /// vocabulary's [`RunTexts`] serves), found by its signature among those made before or made now
    /// and kept; `None` for any other state, or one whose signature reads
    /// too much.
    pub(super) fn run_walk(&self, state: u32) -> Option<Arc<StateIndex>> {
        let all = &self.skeletons.vocab.as_ref()?.0.whitespace;
        let dfa = self.dfa();
        let chain = dfa.chain(state)?;
        let texts = all.iter().find(|t| t.serves(&chain))?;
        if self.is_wide(state) {
            return None;
        }
        let signature = texts.signature(dfa, state, &chain)?;
        let walks = &self.skeletons.kept_walks;
        let key = texts.key();
        Some(
            walks
                .get(key, &signature)
                .unwrap_or_else(|| walks.keep(key, signature, self.build_state(state))),
        )
    }

    /// [`Lexeme::past_the_quote`] from `after`, found by its signature
    /// ([`TextTrie::signature`] on the text past the quote) among those
    /// made before (by any lexeme of this grammar, or of any grammar
    /// where lexemes are shared) or made now and kept: most lexemes past
    /// a string value go on alike for as far as tokens reach (a comma,
    /// spaces and a quote before a key of their own).
    pub(super) fn past_the_quote_kept(
        &self,
        body: &BodyWalk,
        kind: Body,
        after: u32,
    ) -> Arc<StateIndex> {
        let Some(signature) = body.quote.signature(self.dfa(), after) else {
            return Arc::new(self.past_the_quote(&body.index, after));
        };
        let key = WalkKey::PastQuote(kind);
        let walks = &self.skeletons.kept_walks;
        walks
            .get(key, &signature)
            .unwrap_or_else(|| walks.keep(key, signature, self.past_the_quote(&body.index, after)))
    }

    /// The index of a state that goes on as the body indexed `body` does
    /// up to the closing quote, and from `after` past it: the body's
    /// tokens (each ends inside the body or at the quote, where `after`
    /// is live), and below each of the body's exits what a walk from
    /// `after` keeps and where it may end. An exit is one where `after`
    /// accepts, as it is the body's.
    pub(super) fn past_the_quote(&self, body: &StateIndex, after: u32) -> StateIndex {
        let trie = &*self.trie;
        let mut walk = Walk::new(self.words);
        match &body.inside {
            TokenSet::Sparse(ids) => walk.add(ids),
            // A row taken whole: what is added is or-ed into it.
            TokenSet::Dense(row) => walk.inside = row.clone(),
        }
        let ends_here = self.dfa().is_accepting(after);
        let mut kept = Runs::default();
        let room = &mut BelowRoom::default();
        for (node, depth) in body.exits.iter(trie) {
            if ends_here {
                walk.exits.push((node, depth));
            }
            self.walk_below(node, after, depth, (&mut kept, &mut walk.exits), room);
        }
        for &(a, b) in &kept.runs {
            walk.add(&trie.tokens[a as usize..b as usize]);
        }
        walk.into_index(trie)
    }
}
