//! Tests of the lexeme rows against plain walks of the trie.

use super::*;
use tokensieve_automata::FIRST_LEAD;
use tokensieve_core::Vocabulary;
use tokensieve_core::testing::SplitMix64;

/// Every byte, then random tokens of ASCII, quotes, backslashes and
/// pieces of multi-byte characters (cut anywhere, so some tokens are
/// not well-formed UTF-8), and long ASCII ones.
fn vocabulary() -> Vocabulary {
    let pieces: [&[u8]; 16] = [
        b"a",
        b"b",
        b"y",
        b" ",
        b"\"",
        b"\\",
        b":",
        b"\n",
        "é".as_bytes(),
        "中".as_bytes(),
        "😀".as_bytes(),
        // A line separator, a no-break space (both `\s`) and a
        // character with the separator's lead byte.
        "\u{2028}".as_bytes(),
        "\u{a0}".as_bytes(),
        "€".as_bytes(),
        b"\xff",
        // A character cut short: what follows breaks UTF-8.
        b"\xc3",
    ];
    let mut rng = SplitMix64(7);
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    for _ in 0..3000 {
        let mut t = Vec::new();
        for _ in 0..1 + rng.below(5) {
            t.extend_from_slice(pieces[rng.below(pieces.len())]);
        }
        let cut = rng.below(3);
        t.drain(..cut.min(t.len() - 1));
        tokens.push(t);
    }
    // Long tokens of many characters (words and spaces, a quote or a
    // backslash here and there): deeper than a bounded string's budget.
    for _ in 0..500 {
        let t: Vec<u8> = (0..6 + rng.below(20))
            .map(|_| b"aby :\"\\"[rng.below(7)])
            .collect();
        tokens.push(t);
    }
    Vocabulary::from_byte_tokens(tokens)
}

/// Limits wide enough for every automaton of these tests.
fn limits(minimize: bool) -> DfaLimits {
    DfaLimits {
        nfa_size_limit: 10 << 20,
        dfa_size_limit: 32 << 20,
        determinize_size_limit: 32 << 20,
        max_dfa_states: 10_000,
        minimize,
    }
}

/// `regex` as an eager lexeme on `trie` (of `vocab`), with skeletons
/// of its own.
fn eager_lexeme(
    regex: &str,
    vocab: &Vocabulary,
    trie: &Arc<TokenTrie>,
    limits: &DfaLimits,
) -> Lexeme {
    Lexeme::new(
        Making::Now(LexDfa::Eager(ByteDfa::build(regex, limits).unwrap())),
        trie.clone(),
        vocab.mask_words(),
        Arc::default(),
    )
}

/// `regex` as an eager lexeme on `trie` (of `vocab`), with `skeletons`.
fn lexeme_with(
    regex: &str,
    vocab: &Vocabulary,
    trie: &Arc<TokenTrie>,
    skeletons: &Arc<Skeletons>,
) -> Lexeme {
    Lexeme::new(
        Making::Now(LexDfa::Eager(
            ByteDfa::build(regex, &limits(false)).unwrap(),
        )),
        trie.clone(),
        vocab.mask_words(),
        skeletons.clone(),
    )
}

/// `regex` as a lazily built lexeme on `trie` (of `vocab`), with
/// `skeletons`.
fn lazy_lexeme_with(
    regex: &str,
    vocab: &Vocabulary,
    trie: &Arc<TokenTrie>,
    skeletons: Arc<Skeletons>,
) -> Lexeme {
    Lexeme::new(
        Making::Now(LexDfa::Lazy(LazyDfa::build(regex, &limits(false)).unwrap())),
        trie.clone(),
        vocab.mask_words(),
        skeletons,
    )
}

/// The walk without taking subtrees whole: every node visited.
fn plain_walk(l: &Lexeme, state: u32) -> (Vec<u32>, Vec<(u32, u32)>) {
    let trie = &*l.trie;
    let (mut inside, mut exits) = (Vec::new(), Vec::new());
    let mut stack = vec![DEAD; trie.max_depth + 1];
    stack[0] = state;
    let mut i = 1;
    while i < trie.nodes.len() {
        let node = trie.nodes[i];
        let next = l.dfa().next(stack[node.depth as usize - 1], node.byte);
        if next == DEAD {
            i = node.next as usize;
            continue;
        }
        stack[node.depth as usize] = next;
        let range = trie.token_start[i] as usize..trie.token_start[i + 1] as usize;
        inside.extend_from_slice(&trie.tokens[range]);
        if l.dfa().is_accepting(next) && node.next as usize > i + 1 {
            exits.push((i as u32, node.depth));
        }
        i += 1;
    }
    inside.sort_unstable();
    (inside, exits)
}

/// The index of `state` holds the tokens and exits of the full walk.
fn assert_walks_as_a_full_walk(l: &Lexeme, state: u32, what: &str) {
    assert_index_is_the_full_walk(l, state, &l.build_state(state), what);
}

/// `index` (of `state`) holds the tokens and exits of the full walk.
fn assert_index_is_the_full_walk(l: &Lexeme, state: u32, index: &StateIndex, what: &str) {
    let (inside, exits) = plain_walk(l, state);
    let mut row = vec![0u32; l.words];
    index.inside.or_into(&mut row);
    let got: Vec<u32> = (0..(l.words * 32) as u32)
        .filter(|&t| row[t as usize / 32] & (1 << (t % 32)) != 0)
        .collect();
    assert_eq!(got, inside, "{what}, state {state}");
    let listed: Vec<(u32, u32)> = index.exits.iter(&l.trie).collect();
    assert_eq!(listed, exits, "{what}, state {state}");
    assert_eq!(index.exits.len(), exits.len(), "{what}, state {state}");
    let span: usize = exits
        .iter()
        .map(|&(n, _)| (l.trie.nodes[n as usize].next - n) as usize)
        .sum();
    assert_eq!(index.exit_span, span, "{what}, state {state}");
}

/// A row kept from set to set: a sparse set leaves it all zeros (a
/// stale bit would be a token the next set allows wrongly), a dense
/// one takes it.
#[test]
fn a_kept_row_is_left_empty_by_the_set_made_of_it() {
    let words = 4096;
    let mut row = vec![0u32; words];
    for id in [0u32, 31, 32, 4000, 77_777, 131_071] {
        row[id as usize / 32] |= 1 << (id % 32);
    }
    match TokenSet::from_scratch(&mut row) {
        TokenSet::Sparse(ids) => assert_eq!(ids, [0, 31, 32, 4000, 77_777, 131_071]),
        TokenSet::Dense(_) => panic!("six tokens are kept as ids"),
    }
    assert_eq!(row.len(), words, "a sparse set leaves the row");
    assert!(row.iter().all(|&w| w == 0), "and leaves it all zeros");
    let mut row = vec![u32::MAX; words];
    match TokenSet::from_scratch(&mut row) {
        TokenSet::Dense(bits) => {
            assert!(bits.len() == words && bits.iter().all(|&w| w == u32::MAX))
        }
        TokenSet::Sparse(_) => panic!("every token is kept as the row"),
    }
    assert!(row.is_empty(), "a dense set takes the row");
}

#[test]
fn subtrees_taken_whole_give_the_rows_of_a_full_walk() {
    let vocab = vocabulary();
    let trie = Arc::new(TokenTrie::new(&vocab));
    let limits = limits(true);
    let regexes = [
        r#""([^"\\\x00-\x1f]|\\["\\/bfnrt])*""#,
        r#""([^"\\]|\\.)*" *: *"#,
        r#"[^é"]*"#,
        r#"a[^"\n]{0,6}y"#,
        r#""[^"\\]{2,40}""#,
        r#"([ab ]|中)*:"#,
        // A loop that keeps most of the vocabulary: its row starts
        // from every token and clears what its escapes refuse.
        r"[^\n]*\n",
        // States whose step leads into a loop with other bytes: the
        // first character narrower (not `a`, not `é`) or wider (a
        // quote, where the loop takes none) than the loop's.
        r#"[^"a\\][^"\\]*""#,
        r#""[^"é]([^"\\]|\\.)*""#,
        r#"[^\n]([^"\\]|\\["n])*!"#,
        // Unanchored searches in a string (a JSON Schema `pattern`):
        // each step of a partial match is a state of its own whose
        // walks fall back into the loop (the loop walk).
        r#""[^"\\]*ab[^"\\]*""#,
        r#""[^"\\]*[ab]{3}[^"\\]*""#,
        r#""[^"\\]*(y:|中é)[^"\\]*" *:"#,
        // With JSON escapes, a search whose partial matches take
        // letters of the body: each walks the zone of the search (every
        // character but the quote and the backslash), not the loop's
        // skeleton, whose escapes are every letter of the match.
        r#""(?:[^"\\]|\\["\\/bfnrt])*[aby]{2}(?:[^"\\]|\\["\\/bfnrt])*""#,
        r#""[^"\\]*(?:a|é){2}[^"\\]*""#,
        // A letter after which a character fails: its lead byte
        // leaves the zone.
        r#""(?:[^"\\a]|a[^"\\é])*""#,
        // Strings of bounded length: chains of states, each count its
        // own, walked through skeletons with budgets below and at the
        // trie's depth.
        r#""(?:[^"\\\x00-\x1F]|\\["\\/bfnrt]){0,40}" *,"#,
        r#"(?:[^"\\:]|\\["\\]|中){3,12}:"#,
        // Near a chain's end (strings of fixed or bounded length):
        // most tokens are deeper than what is left, and the state
        // after the budget takes a quote only; with a long budget,
        // most of the vocabulary is kept and the frontier's refusals
        // are cleared from every token.
        r#""[^"\\]{9}""#,
        r#"[^"\\]{0,12}","#,
        // Loops that take most characters but not all: their escapes
        // are at the lead bytes of those they leave out.
        r#""[^"\\\x00-\x1F\x{2028}\x{2029}]*""#,
        r#""(?:[^"\\\s]|\\["\\])*"\s*"#,
        r#""(?:[^"\\\s]{1,3}\s){0,9}[^"\\\s]+""#,
    ];
    let mut taken_whole = 0;
    let mut into_loop = 0;
    let mut loop_walks = 0;
    let mut chains = [0; 2];
    let mut zones = 0;
    for regex in regexes {
        let l = eager_lexeme(regex, &vocab, &trie, &limits);
        for state in 1..l.dfa().num_states() as u32 {
            assert_walks_as_a_full_walk(&l, state, regex);
            taken_whole += usize::from(l.runs.run(l.dfa(), state) > 1);
            into_loop += usize::from(l.loop_skeleton(state).is_some_and(|(_, into)| {
                into != state
                    && l.first_bytes(state)
                        .iter()
                        .map(|w| w.count_ones())
                        .sum::<u32>()
                        >= WIDE
            }));
            zones += usize::from(
                l.is_wide(state)
                    && l.loop_skeleton(state).is_some()
                    && l.zone_is_wider(state, ZONE_STATES),
            );
            if l.loop_skeleton(state).is_none() && l.chain_skeleton(state).is_some() {
                let budgeted = l.runs.run(l.dfa(), state) < trie.max_depth as u32;
                chains[usize::from(budgeted)] += 1;
            }
        }
        loop_walks += l.loops.lock().unwrap().len();
    }
    assert!(
        chains.iter().all(|&n| n >= 3),
        "chains walked with and without a budget: {chains:?}"
    );
    assert!(taken_whole >= 3, "the loops this test is about were found");
    assert!(loop_walks >= 3, "walks into a loop took the loop walk");
    assert!(into_loop >= 3, "states leading into a loop were found");
    assert!(zones >= 4, "searches walked through their zones: {zones}");
}

/// A name's exits are written a subtree at a time where every byte below
/// loops on its accepting state; expanded, they are the full walk's, with
/// its count and span.
#[test]
fn exits_listed_a_subtree_at_a_time_are_those_of_a_full_walk() {
    let vocab = vocabulary();
    let trie = Arc::new(TokenTrie::new(&vocab));
    let limits = limits(true);
    // Names: every byte below most nodes of the letters loops on one
    // accepting state, whose exits are each subtree's inner nodes.
    let regexes = [
        r"[aby]+",
        r" ?[ab][aby]*",
        r"[aby]+(:[aby]+)*",
        r"[^\n:]+",
        r#"[ab]+( "[^"]*")?"#,
    ];
    let mut whole = 0;
    for regex in regexes {
        let l = eager_lexeme(regex, &vocab, &trie, &limits);
        for state in 1..l.dfa().num_states() as u32 {
            assert_walks_as_a_full_walk(&l, state, regex);
            let index = l.build_state(state);
            whole += index
                .exits
                .entries()
                .iter()
                .filter(|&&(_, depth)| depth & WHOLE_EXIT != 0)
                .count();
        }
    }
    assert!(whole > 0, "no subtree of exits listed whole");
}

/// A search in a JSON string for a long alternation (an unanchored
/// `pattern` from a MaskBench schema), in a DFA that is not minimized,
/// as a lazy one is not: its loops' zones hold every partial match,
/// more states than a gathering of 128 reached (none was found, and
/// each loop was scanned escape by escape). The loops walk through
/// their zones, and every walk is the full walk.
#[test]
fn a_long_search_walks_through_its_zone() {
    let vocab = vocabulary();
    let trie = Arc::new(TokenTrie::new(&vocab));
    let limits = limits(false);
    // (The line break and the indent after `\` are not in the string.)
    let search = "(?:srn:reference-data/ResourceSecurityClassification:RESTRICTED\
                  |CLASSIFIED|CONFIDENTIAL|MOST-CONFIDENTIAL:[0-9]*)";
    let body = r#"(?:[^"\\]|\\["\\/bfnrt])*"#;
    let l = eager_lexeme(
        &format!(r#""{body}{search}{body}""#),
        &vocab,
        &trie,
        &limits,
    );
    assert!(
        l.dfa().num_states() > 200,
        "a search of {} states",
        l.dfa().num_states()
    );
    let mut zones = 0;
    for state in 1..l.dfa().num_states() as u32 {
        assert_walks_as_a_full_walk(&l, state, "a search for a long alternation");
        zones += usize::from(
            l.is_wide(state)
                && l.loop_skeleton(state).is_some()
                && l.zone_is_wider(state, ZONE_STATES),
        );
    }
    assert!(zones >= 5, "loops walked through their zones: {zones}");
}

/// A search in a JSON string (an unanchored `pattern`) walks through the
/// zone of every string character, whose skeleton is the vocabulary's
/// string body's: its loops' own steps leave out the pattern's first
/// bytes, and a skeleton of theirs would be a pass over the whole trie at
/// a mask. Every walk is the full walk, lexemes shared or not.
#[test]
fn a_search_in_a_string_walks_through_the_bodys_skeleton() {
    let vocab = vocabulary();
    let trie = Arc::new(TokenTrie::new(&vocab));
    let known = VocabSkeleton::json_string_body(&trie);
    let made = known.0.table.len();
    // A pattern's string holds no escapes (the lowering's).
    let body = r#"[^"\\\x00-\x1F]"#;
    let regex = format!(r#""{body}*(?:ab|y:){body}*""#);
    for shared in [true, false] {
        let skeletons = Arc::new(Skeletons::starting_with(&known, shared));
        let l = lazy_lexeme_with(&regex, &vocab, &trie, skeletons.clone());
        // (A lazy automaton makes states as they are walked.)
        let (mut state, mut zones) = (1, 0);
        while state < l.dfa().num_states() as u32 {
            zones += usize::from(l.zone_before_skeleton(state).is_some());
            assert_index_is_the_full_walk(&l, state, l.state(state), &regex);
            state += 1;
        }
        assert!(zones >= 1, "{zones} loops walked through the zone");
        assert_eq!(skeletons.own.len(), 0, "no skeleton of a loop's own");
        assert_eq!(known.0.table.len(), made, "nor the vocabulary's");
    }
}

/// A search whose pattern has a one-character wildcard (`ab.y`,
/// unanchored) has chains: after `ab` the step is any character once,
/// then `y`, and every other byte goes back to the search, so the
/// chain's frontier is most of the trie. Those states walk through the
/// zone of every string character instead (the vocabulary's body
/// skeleton), and every walk is the full walk, lexemes shared or not;
/// a string of bounded length keeps its chains.
#[test]
fn a_search_with_a_wildcard_walks_its_chains_through_the_zone() {
    let vocab = vocabulary();
    let trie = Arc::new(TokenTrie::new(&vocab));
    let known = VocabSkeleton::json_string_body(&trie);
    let body = r#"[^"\\\x00-\x1F]"#;
    for (regex, zoned) in [
        (format!(r#""{body}*ab{body}y{body}*""#), true),
        (format!(r#""{body}{{0,9}}""#), false),
    ] {
        for shared in [true, false] {
            let skeletons = Arc::new(Skeletons::starting_with(&known, shared));
            let l = lazy_lexeme_with(&regex, &vocab, &trie, skeletons);
            let (mut state, mut zones) = (1, 0);
            while state < l.dfa().num_states() as u32 {
                let chain = l.is_wide(state)
                    && l.zone_before_skeleton(state).is_none()
                    && l.loop_skeleton(state).is_none();
                let zoned_chain = chain
                    && l.chain_skeleton(state)
                        .is_some_and(|skeleton| l.chain_zone(state, &skeleton).is_some());
                zones += usize::from(zoned_chain);
                let walks = super::skeleton::ZONE_WALKS.with(|c| c.get());
                assert_index_is_the_full_walk(&l, state, &l.build_state(state), &regex);
                let walked = super::skeleton::ZONE_WALKS.with(|c| c.get()) > walks;
                assert!(
                    !zoned_chain || walked,
                    "{regex}: chain state {state} walked without its zone"
                );
                state += 1;
            }
            if zoned {
                assert!(
                    zones >= 1,
                    "{regex}: {zones} chains walked through the zone"
                );
            } else {
                assert_eq!(zones, 0, "{regex}: a bounded string's chains are its own");
            }
        }
    }
}

/// The last characters of strings of fixed and bounded length, on a
/// vocabulary of words (most tokens shorter than the strings, some
/// longer): each count is walked through the skeleton of exactly what
/// is left, whose frontier is refused a byte at a time where the
/// count's end refuses the byte. Where most tokens are kept, the walk
/// starts from every token and clears the refused ones, so every
/// refusal must be counted: each walk is the full walk.
#[test]
fn chains_near_their_end_walk_as_a_full_walk() {
    let mut rng = SplitMix64(11);
    let mut tokens: Vec<Vec<u8>> = (0x20..0x7Fu8).map(|b| vec![b]).collect();
    for _ in 0..2000 {
        let most = if rng.below(6) == 0 { 24 } else { 6 };
        let len = 1 + rng.below(most);
        tokens.push((0..len).map(|_| b"abcdefgh xyz\\"[rng.below(13)]).collect());
    }
    for _ in 0..100 {
        let len = 1 + rng.below(12);
        let mut t: Vec<u8> = (0..len).map(|_| b"abxy "[rng.below(5)]).collect();
        t.extend_from_slice(b"\",");
        tokens.push(t);
    }
    let vocab = Vocabulary::from_byte_tokens(tokens);
    let trie = Arc::new(TokenTrie::new(&vocab));
    let (mut frontiers, mut cleared) = (0, 0);
    for regex in [r#""[^"\\]{9}" *,"#, r#""[^"\\]{0,12}" *,"#] {
        let l = eager_lexeme(regex, &vocab, &trie, &limits(true));
        for state in 1..l.dfa().num_states() as u32 {
            assert_walks_as_a_full_walk(&l, state, regex);
            let Some(skeleton) = l.chain_skeleton(state) else {
                continue;
            };
            if l.loop_skeleton(state).is_some() || skeleton.frontier.is_empty() {
                continue;
            }
            assert_eq!(skeleton.budget, l.runs.run(l.dfa(), state), "{regex}");
            frontiers += 1;
            cleared += usize::from(plain_walk(&l, state).0.len() * 2 > trie.tokens.len());
        }
    }
    assert!(
        frontiers >= 10,
        "chains walked through a frontier: {frontiers}"
    );
    assert!(cleared >= 4, "walks that cleared the refused: {cleared}");
}

/// A chain's states scan the subtrees below their closing quotes once
/// between them: every quote's scan at once where each leads to one state
/// (a string of at most some length), each quote's alone where some lead
/// nowhere (below a minimum length) or elsewhere (two strings of
/// different lengths followed by different text). Every walk is the full
/// walk.
#[test]
fn quotes_of_a_chain_are_scanned_once_for_its_states() {
    let vocab = vocabulary();
    let trie = Arc::new(TokenTrie::new(&vocab));
    let regexes = [
        r#""(?:[^"\\]|\\["\\]){0,30}" *,"#,
        r#""[^"\\]{4,30}" *:"#,
        r#""(?:[^"\\]{0,12}"a|[^"\\]{3,6}"b)"#,
    ];
    let mut kept = 0;
    for regex in regexes {
        let l = eager_lexeme(regex, &vocab, &trie, &limits(true));
        for state in 1..l.dfa().num_states() as u32 {
            assert_walks_as_a_full_walk(&l, state, regex);
        }
        kept += l.quote_scans.lock().unwrap().len();
    }
    let [whole, alone] = super::skeleton::QUOTE_WALKS.with(|c| c.get());
    assert!(kept >= 3, "quote scans kept: {kept}");
    assert!(
        whole >= 10,
        "chain walks taking every quote at once: {whole}"
    );
    assert!(alone >= 10, "quotes taken alone: {alone}");
}

/// A string value that ends its lexeme walks its body once for every
/// lexeme on the vocabulary (the vocabulary's walk, whatever the key
/// before it); a body that goes on past its quote takes that walk and
/// walks only what comes after the quote; a body of other characters
/// walks its own. Every walk is the full walk.
#[test]
fn string_bodies_share_the_vocabularys_walk() {
    #[derive(Debug, PartialEq, Clone, Copy)]
    enum Body {
        /// The vocabulary's walk itself.
        Shared,
        /// The vocabulary's walk, with what follows the quote walked.
        PastTheQuote,
        /// The lexeme's own walk through the body's escapes.
        Own,
    }
    let vocab = vocabulary();
    let trie = Arc::new(TokenTrie::new(&vocab));
    let limits = limits(false);
    let body = tokensieve_json_schema::STRING_CHAR;
    let known = VocabSkeleton::json_string_body(&trie);
    let seeded = Arc::new(Skeletons::starting_with(&known, true));
    // The regex, and how its body state (after the prefix) is walked.
    let cases = [
        (format!(r#""a" *: *"{body}*""#), Body::Shared),
        (format!(r#"\{{"b":"{body}*""#), Body::Shared),
        // Not accepting after the quote, then accepting and going on,
        // then a key and another string.
        (format!(r#""c":"{body}*" *,"#), Body::PastTheQuote),
        (format!(r#""e":"{body}*" *"#), Body::PastTheQuote),
        (
            format!(r#""f":"{body}*" *, *"g": *"{body}*""#),
            Body::PastTheQuote,
        ),
        (r#""d":"(?:[^"\\é]|\\["\\/bfnrt])*""#.to_string(), Body::Own),
    ];
    let mut walked = Vec::new();
    for (regex, expected) in &cases {
        let dfa = ByteDfa::build(regex, &limits).unwrap();
        let l = Lexeme::new(
            Making::Now(LexDfa::Eager(dfa)),
            trie.clone(),
            vocab.mask_words(),
            seeded.clone(),
        );
        let prefix = regex
            .split_inclusive(':')
            .next()
            .unwrap()
            .replace([' ', '*', '\\'], "");
        let mut state = l.dfa().start();
        for b in format!("{prefix}\"").bytes() {
            state = l.dfa().next(state, b);
        }
        assert!(state != DEAD && l.is_wide(state), "{regex}: a body state");
        l.state(state);
        let index = l.states.get(state).unwrap().clone();
        let body_walk = known
            .body(super::Body::Value, &trie, vocab.mask_words())
            .unwrap();
        let how = if Arc::ptr_eq(&index, &body_walk.index) {
            Body::Shared
        } else if l.loops.lock().unwrap().is_empty() {
            Body::PastTheQuote
        } else {
            Body::Own
        };
        assert_eq!(how, *expected, "{regex}: how the body is walked");
        for s in 1..l.dfa().num_states() as u32 {
            assert_index_is_the_full_walk(&l, s, l.state(s), regex);
        }
        walked.push(how);
    }
    assert_eq!(walked, cases.map(|c| c.1));
}

/// A key's body (characters no key writes escaped: an object's other
/// keys) walks from the vocabulary's walk of that body, as a value's
/// does from a value's: shared where the lexeme ends at the quote,
/// walked past the quote where it goes on to the colon, never through
/// the body's escapes; other keys' lexemes of one grammar with the same
/// text after the keys share that walk, where nothing else in them
/// reads a quote; and every state's index is the full walk.
#[test]
fn key_bodies_share_the_vocabularys_walk() {
    let vocab = vocabulary();
    let trie = Arc::new(TokenTrie::new(&vocab));
    let known = VocabSkeleton::json_string_body(&trie);
    let seeded = Arc::new(Skeletons::starting_with(&known, true));
    let key = known.body(Body::Key, &trie, vocab.mask_words()).unwrap();
    let c = r#"[^"\\\x00-\x1F]"#;
    let lexeme = |regex: &str, minimal: bool| {
        let dfa = ByteDfa::build(regex, &limits(minimal)).unwrap();
        Lexeme::new(
            Making::Now(LexDfa::Eager(dfa)),
            trie.clone(),
            vocab.mask_words(),
            seeded.clone(),
        )
    };
    let after = |l: &Lexeme, text: &str| {
        let state = text
            .bytes()
            .fold(l.dfa().start(), |s, b| l.dfa().next(s, b));
        assert!(state != DEAD && l.is_wide(state), "{text}: a body state");
        state
    };
    // The regex, and whether its body's walk is the vocabulary's own.
    let cases = [
        (format!(r#""{c}*""#), true),
        (format!(r#""{c}*" *: *"#), false),
        // Any key but "ab" and "b".
        (
            format!(r#""(?:|[^"\\\x00-\x1Fab]{c}*|a|a[^"\\\x00-\x1Fb]{c}*|ab{c}+|b{c}+)" *: *"#),
            false,
        ),
    ];
    for minimal in [false, true] {
        for (regex, shared) in &cases {
            let l = lexeme(regex, minimal);
            let state = after(&l, "\"x");
            l.state(state);
            let index = l.states.get(state).unwrap().clone();
            assert_eq!(Arc::ptr_eq(&index, &key.index), *shared, "{regex}");
            assert!(
                l.loops.lock().unwrap().is_empty(),
                "{regex}: escapes walked"
            );
            for s in 1..l.dfa().num_states() as u32 {
                assert_index_is_the_full_walk(&l, s, l.state(s), regex);
            }
        }
    }
    // Other keys' lexemes as the lowering makes them (the keys from
    // their names, then text): those of one grammar with the same text
    // after the keys share one walk past the quote. A quote in a part
    // but the keys leaves a lexeme to its own: before the keys, a
    // string just like a key's body (whose quote the pair of walks
    // cannot tell from the key's) would be going on past the quote.
    let tree = |t: &str| SourcePart::Tree(Arc::new(tokensieve_automata::parse(t).unwrap()));
    let keys = |names: &[&str]| {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        SourcePart::Keys(Arc::new(OtherKeys::new(&names)))
    };
    let parts_lexeme = |parts: Vec<SourcePart>| {
        let recipe = Recipe {
            source: TreeSource::Parts(parts, Arc::default()),
            limits: limits(false),
            weight: 100,
            nullable: false,
        };
        Lexeme::new(
            Making::Later(recipe),
            trie.clone(),
            vocab.mask_words(),
            seeded.clone(),
        )
    };
    let colon = " *: *";
    let string_before = format!(r#"(?:"{c}*" *: *y *, *)?"#);
    // The lexeme, the text to its keys' body, and whether it shares.
    let cases = [
        (
            parts_lexeme(vec![keys(&["ab", "b"]), tree(colon)]),
            "\"x",
            true,
        ),
        (
            parts_lexeme(vec![tree(" *, *"), keys(&["a", "y"]), tree(colon)]),
            " , \"x",
            true,
        ),
        (
            parts_lexeme(vec![tree(&string_before), keys(&["b"]), tree(colon)]),
            "\"x",
            false,
        ),
        (
            parts_lexeme(vec![keys(&["b"]), tree(&format!("{colon}\"a\""))]),
            "\"x",
            false,
        ),
    ];
    let mut shared: Option<Arc<StateIndex>> = None;
    for (l, text, shares) in &cases {
        assert_eq!(l.after_keys.is_some(), *shares, "{text}");
        let state = after(l, text);
        l.state(state);
        let index = l.states.get(state).unwrap().clone();
        assert!(l.loops.lock().unwrap().is_empty(), "{text}: escapes walked");
        match &shared {
            Some(first) => assert_eq!(Arc::ptr_eq(first, &index), *shares, "{text}"),
            None => shared = Some(index),
        }
        let mut s = 1;
        while s < l.dfa().num_states() as u32 {
            assert_index_is_the_full_walk(l, s, l.state(s), text);
            s += 1;
        }
    }
    // A string value after the colon, its body a key's: past its quote
    // only the comma is left, not the colon and the string.
    let l = parts_lexeme(vec![keys(&["b"]), tree(&format!(r#"{colon}"{c}*" *,"#))]);
    assert!(l.after_keys.is_none());
    for text in ["\"x", "\"q\" : \"x"] {
        let state = after(&l, text);
        assert_index_is_the_full_walk(&l, state, l.state(state), text);
    }
}

/// An object's other keys: any key but the named ones, then its colon.
/// A state partway through a named key (most characters go on into
/// any other key's body, the next one of the name and the quote after
/// it do not) is walked from the body's own walk, differing only along
/// the names; each such walk is the full walk, and so is every other.
#[test]
fn keys_but_the_named_ones_walk_from_the_body() {
    let vocab = vocabulary();
    let trie = Arc::new(TokenTrie::new(&vocab));
    let c = r#"(?:[^"\\]|\\["\\/bfnrt])"#;
    // Every key but "ab", "aby", "b" and "é" (whose middle is a state
    // of its own, apart from the body's middle of a character).
    let keys =
        format!(r#""(?:|[^"\\abé]{c}*|a|a[^"\\b]{c}*|ab[^"\\y]{c}*|aby{c}+|b{c}+|é{c}+)" *: *"#);
    // A string, or its first characters "ab" alone: the state after
    // them may end where the body's loop may not.
    let prefix = format!(r#""(?:ab|{c}*")"#);
    // Any string but "ab", which goes on with an x: after "ab" the
    // quote leads where the body's quote does not end.
    let apart = format!(r#""(?:|[^"\\a]{c}*|a|a[^"\\b]{c}*|ab{c}+)"|"ab"x"#);
    let (mut deviated, mut alike) = (0, 0);
    for regex in [&keys, &prefix, &apart] {
        // Eager, minimal or not, and lazy: the lazy automaton makes a
        // state of its own for the middle of a character after a key's
        // first characters and after the body, which walk alike.
        let lazy = LazyDfa::build(regex, &limits(false)).unwrap();
        let lexemes = [
            eager_lexeme(regex, &vocab, &trie, &limits(false)),
            eager_lexeme(regex, &vocab, &trie, &limits(true)),
            Lexeme::new(
                Making::Now(LexDfa::Lazy(lazy)),
                trie.clone(),
                vocab.mask_words(),
                Arc::default(),
            ),
        ];
        for l in &lexemes {
            // (A lazy automaton makes states as they are walked.)
            let mut state = 1;
            while state < l.dfa().num_states() as u32 {
                if l.is_wide(state)
                    && let Some((_, into)) = l.loop_skeleton(state)
                    && into != state
                    && let Some(index) = l.deviation(state, into)
                {
                    assert_index_is_the_full_walk(l, state, &index, "deviation");
                    deviated += 1;
                }
                assert_walks_as_a_full_walk(l, state, regex);
                state += 1;
            }
            alike += l
                .alike
                .lock()
                .unwrap()
                .values()
                .filter(|&&same| same)
                .count();
        }
    }
    assert!(alike >= 1, "states found to walk alike: {alike}");
    assert!(deviated >= 20, "states walked from the body: {deviated}");
}

/// Intersections (a pattern under a length) walk as every node would:
/// their text steps are made from their parts' steps.
#[test]
fn intersections_give_the_rows_of_a_full_walk() {
    let vocab = vocabulary();
    let trie = Arc::new(TokenTrie::new(&vocab));
    let cases: [&[&str]; 3] = [
        &[
            r#""(?:[^"\\\s]+\s+){0,3}[^"\\\s]+""#,
            r#""[^"\\\x00-\x1F]{0,14}""#,
        ],
        &[r#""[^"\\]*a[^"\\]*" *,"#, r#""[^"\\]{2,30}" *,"#],
        &[r#""[^"\\\x{2028}]*""#, r#""[^"\\]{0,40}""#],
    ];
    let mut states = 0;
    for patterns in cases {
        let product = LazyProduct::build(patterns, &limits(false)).unwrap();
        let l = Lexeme::new(
            Making::Now(LexDfa::Product(product)),
            trie.clone(),
            vocab.mask_words(),
            Arc::default(),
        );
        let mut seen = vec![l.dfa().start()];
        let mut k = 0;
        while k < seen.len() && k < 60 {
            let state = seen[k];
            k += 1;
            assert_walks_as_a_full_walk(&l, state, &format!("{patterns:?}"));
            states += 1;
            for b in 0..=255u8 {
                let t = l.dfa().next(state, b);
                if t != DEAD && !seen.contains(&t) {
                    seen.push(t);
                }
            }
        }
    }
    assert!(states >= 100, "{states} states walked");
}

/// Intersections under a long length: a state whose count its index
/// moves ([`LazyProduct::shifted`]) gets the tokens and exits of its
/// own full walk, a pattern with a long completion (after the colon,
/// 24 letters, longer than any token) and a least length included.
#[test]
fn intersections_under_a_long_length_index_as_their_full_walk() {
    let vocab = vocabulary();
    let trie = Arc::new(TokenTrie::new(&vocab));
    let char = r#"(?:[^"\\\x00-\x1F]|\\["\\/bfnrt])"#;
    // Each with the bytes its random texts are made of.
    let cases = [
        (
            vec![
                r#""(?:[^"\\\s]+\s+){0,5}[^"\\\s]+""#.to_owned(),
                format!(r#""{char}{{0,70}}""#),
            ],
            &b"ab  \\n"[..],
        ),
        (
            vec![
                r#""[^"\\]*:[ab]{24}""#.to_owned(),
                format!(r#""{char}{{0,100}}""#),
            ],
            &b"ab:"[..],
        ),
        (
            vec![
                r#""[^"\\]*y[^"\\]*""#.to_owned(),
                format!(r#""{char}{{9,90}}""#),
            ],
            &b"aby"[..],
        ),
    ];
    let mut rng = SplitMix64(37);
    let mut shifted = 0;
    for (patterns, alphabet) in &cases {
        let regexes: Vec<&str> = patterns.iter().map(String::as_str).collect();
        let product = LazyProduct::build(&regexes, &limits(false)).unwrap();
        let l = Lexeme::new(
            Making::Now(LexDfa::Product(product)),
            trie.clone(),
            vocab.mask_words(),
            Arc::default(),
        );
        // The states of random texts, as far as each goes: counts up
        // to the length's bounds.
        let mut seen = hashbrown::HashSet::new();
        for _ in 0..40 {
            let mut state = l.dfa().next(l.dfa().start(), b'"');
            for _ in 0..110 {
                if state == DEAD {
                    break;
                }
                if seen.insert(state) {
                    let index = l.state(state);
                    assert_index_is_the_full_walk(&l, state, index, &format!("{patterns:?}"));
                    shifted += usize::from(l.index_state(state) != state);
                }
                state = l.dfa().next(state, alphabet[rng.below(alphabet.len())]);
            }
        }
    }
    assert!(shifted >= 100, "{shifted} states indexed through a shift");
}

/// A skeleton narrowed from the JSON body's of the same budget is the one
/// a pass over the trie makes, for steps that leave out some of the
/// body's ASCII bytes, some of its lead bytes (ECMAScript's `.` leaves out
/// U+2028's), or every lead byte, at every budget.
#[test]
fn narrowed_skeletons_are_the_skeletons_of_their_steps() {
    let vocab = vocabulary();
    let trie = Arc::new(TokenTrie::new(&vocab));
    let body = json_string_body_step();
    let full = trie.max_depth as u32;
    let mut budgets = chain_budgets(full);
    budgets.push(full);
    let mut rng = SplitMix64(43);
    let mut steps = vec![
        TextStep {
            leads: body.leads & !(1 << (0xE2 - FIRST_LEAD)),
            utf8: false,
            ..body
        },
        TextStep {
            ascii: [
                body.ascii[0] & !(1 << b':'),
                body.ascii[1] & !(1 << (b'a' - 64)),
            ],
            ..body
        },
        TextStep {
            leads: 0,
            utf8: false,
            ..body
        },
    ];
    for _ in 0..20 {
        let mut step = body;
        for _ in 0..1 + rng.below(4) {
            let b = rng.below(256) as u8;
            if b < 0x80 {
                step.ascii[b as usize / 64] &= !(1 << (b % 64));
            } else if (FIRST_LEAD..=0xF4).contains(&b) {
                step.leads &= !(1 << (b - FIRST_LEAD));
                step.utf8 = false;
            }
        }
        steps.push(step);
    }
    let mut parted = 0;
    for budget in budgets {
        let wide = Skeleton::new(&trie, &body, budget);
        for step in &steps {
            let made = Skeleton::new(&trie, step, budget);
            let narrowed = Skeleton::narrowed(&trie, &wide, &body, step);
            assert_eq!(
                format!("{narrowed:?}"),
                format!("{made:?}"),
                "{step:?} within {budget}"
            );
            parted += made.escapes.len() - wide.escapes.len().min(made.escapes.len());
        }
    }
    assert!(parted >= 100, "{parted} escapes more than the body's");
}

/// A word count under a length (a product whose every word is a new
/// state) tries no free zone, before its loop's skeleton or in place of
/// it: a gathering would meet a new state at every character, each a
/// product's expansion, and fail at its limit.
#[test]
fn an_intersection_gathers_no_zone() {
    let vocab = vocabulary();
    let trie = Arc::new(TokenTrie::new(&vocab));
    let char = r#"(?:[^"\\\x00-\x1F]|\\["\\/bfnrt])"#;
    let regexes = [
        r#""(?:[^"\\\s]+\s+){0,49}[^"\\\s]+""#.to_owned(),
        format!(r#""{char}{{0,300}}""#),
    ];
    let regexes: Vec<&str> = regexes.iter().map(String::as_str).collect();
    let product = LazyProduct::build(&regexes, &limits(false)).unwrap();
    let l = Lexeme::new(
        Making::Now(LexDfa::Product(product)),
        trie.clone(),
        vocab.mask_words(),
        Arc::default(),
    );
    let mut rng = SplitMix64(41);
    let mut state = l.dfa().next(l.dfa().start(), b'"');
    let mut loops = 0;
    for _ in 0..60 {
        // Walks start from the held count (`Lexeme::index_state`), a loop.
        let held = l.index_state(state);
        loops += usize::from(l.loop_into(held).is_some());
        let made = l.dfa().num_states();
        assert!(l.zone_before_skeleton(held).is_none(), "state {held}");
        assert_eq!(l.dfa().num_states(), made, "states made for a zone");
        assert_walks_as_a_full_walk(&l, state, &format!("{regexes:?}"));
        assert_walks_as_a_full_walk(&l, held, &format!("{regexes:?}"));
        assert!(
            l.zones.get(held).is_none() && l.zones.get(state).is_none(),
            "a zone gathered from state {held}"
        );
        state = l.dfa().next(state, b"aab "[rng.below(4)]);
        assert_ne!(state, DEAD);
    }
    assert!(loops >= 10, "{loops} held loops");
}

/// A deferred lexeme reads its recipe in place when it is made, and
/// frees it only when released (as a grammar holding it is dropped):
/// freeing a big syntax tree is no mask's work.
#[test]
fn a_made_lexeme_keeps_its_tree_until_released() {
    let vocab = vocabulary();
    let trie = Arc::new(TokenTrie::new(&vocab));
    let tree = Arc::new(tokensieve_automata::parse(r#""[ab]*""#).unwrap());
    let recipe = Recipe {
        source: TreeSource::Tree(tree.clone()),
        limits: limits(false),
        weight: 10,
        nullable: false,
    };
    let l = Lexeme::new(
        Making::Later(recipe),
        trie,
        vocab.mask_words(),
        Arc::default(),
    );
    l.release_recipe();
    assert_eq!(Arc::strong_count(&tree), 2, "an unmade lexeme keeps it");
    assert!(l.dfa().next(l.dfa().start(), b'"') != DEAD);
    assert_eq!(Arc::strong_count(&tree), 2, "making reads it in place");
    l.release_recipe();
    assert_eq!(Arc::strong_count(&tree), 1, "released once made");
}

/// A row becomes its sorted ids while they would take less than an
/// eighth of its memory, and stays the row from there on, wherever
/// they lie.
#[test]
fn rows_of_few_tokens_are_ids_and_of_many_the_row() {
    let words = 64;
    let limit = words / 8;
    for count in [0, 1, limit - 1, limit, words * 32] {
        for spread in [1, 7919] {
            // From the last token down, `spread` apart (7,919 is
            // prime: no id twice).
            let bits = words * 32;
            let mut ids: Vec<u32> = (0..count)
                .map(|i| (bits - 1 - i * spread % bits) as u32)
                .collect();
            let mut row = vec![0u32; words];
            for &t in &ids {
                row[t as usize / 32] |= 1 << (t % 32);
            }
            ids.sort_unstable();
            match TokenSet::from_row(row.clone()) {
                TokenSet::Sparse(got) => {
                    assert!(count < limit, "{count} ids kept as ids");
                    assert_eq!(got, ids);
                }
                TokenSet::Dense(got) => {
                    assert!(count >= limit, "{count} ids kept as a row");
                    assert_eq!(got, row);
                }
            }
        }
    }
}

/// A JSON string (the JSON Schema lowering's string, escapes and all)
/// walks through the skeleton the backend makes with the vocabulary,
/// finding what it finds with one made from its own step.
#[test]
fn a_json_string_walks_through_the_vocabulary_skeleton() {
    let vocab = vocabulary();
    let trie = Arc::new(TokenTrie::new(&vocab));
    let limits = limits(false);
    let string = &format!(r#""{}*" *, *"#, tokensieve_json_schema::STRING_CHAR);
    let seeded = Arc::new(Skeletons::starting_with(
        &VocabSkeleton::json_string_body(&trie),
        true,
    ));
    let own = Arc::new(Skeletons::default());
    let lexeme = |skeletons: &Arc<Skeletons>| {
        let dfa = ByteDfa::build(string, &limits).unwrap();
        Lexeme::new(
            Making::Now(LexDfa::Eager(dfa)),
            trie.clone(),
            vocab.mask_words(),
            skeletons.clone(),
        )
    };
    let (a, b) = (lexeme(&seeded), lexeme(&own));
    for state in 1..a.dfa().num_states() as u32 {
        let (x, y) = (a.build_state(state), b.build_state(state));
        let (mut rx, mut ry) = (
            vec![0u32; vocab.mask_words()],
            vec![0u32; vocab.mask_words()],
        );
        x.inside.or_into(&mut rx);
        y.inside.or_into(&mut ry);
        assert_eq!(rx, ry, "state {state}");
        let listed = |i: &StateIndex| i.exits.iter(&a.trie).collect::<Vec<_>>();
        assert_eq!(listed(&x), listed(&y), "state {state}");
    }
    let own = own.own.0.lock().unwrap();
    assert_eq!(
        own.list.len(),
        1,
        "the string's body walked through a skeleton"
    );
    assert_eq!(
        own.list[0].0,
        (JSON_STRING_BODY, trie.max_depth as u32),
        "the body's step is the vocabulary's"
    );
    assert_eq!(seeded.own.len(), 0, "no skeleton made beside it");
}

/// The vocabulary's skeletons hold every budget a chain may ask of a
/// JSON string's body: a bounded string walks to its end without
/// making one (a mask would pay for it), and each walk is the full walk.
#[test]
fn bounded_json_strings_walk_through_the_vocabularys_budgets() {
    let vocab = vocabulary();
    let trie = Arc::new(TokenTrie::new(&vocab));
    let full = trie.max_depth as u32;
    for run in 1..full + 8 {
        let budget = chain_budget(run, full);
        assert!(
            budget == full || chain_budgets(full).contains(&budget),
            "{run}"
        );
    }
    let known = VocabSkeleton::json_string_body(&trie);
    let made = chain_budgets(full).len() + 1;
    assert_eq!(known.0.table.len(), made);
    let seeded = Arc::new(Skeletons::starting_with(&known, true));
    let body = tokensieve_json_schema::STRING_CHAR;
    let mut chains = 0;
    for regex in [
        format!(r#""{body}{{0,40}}""#),
        format!(r#""{body}{{7}}" *,"#),
    ] {
        let dfa = ByteDfa::build(&regex, &limits(false)).unwrap();
        let l = Lexeme::new(
            Making::Now(LexDfa::Eager(dfa)),
            trie.clone(),
            vocab.mask_words(),
            seeded.clone(),
        );
        for state in 1..l.dfa().num_states() as u32 {
            chains += usize::from(l.chain_skeleton(state).is_some());
            assert_index_is_the_full_walk(&l, state, l.state(state), &regex);
        }
    }
    assert!(chains >= 20, "{chains} chains walked");
    // (Other steps, a `\u` escape's hex digits, a run of spaces, are
    // the vocabulary's too where lexemes are shared.)
    let own = seeded.own.0.lock().unwrap();
    assert!(
        own.list.iter().all(|(k, _)| k.0 != JSON_STRING_BODY),
        "no body skeleton made beside the vocabulary's"
    );
    let bodies = |table: &SkeletonTable| {
        let kept = table.0.lock().unwrap();
        kept.list
            .iter()
            .filter(|(k, _)| k.0 == JSON_STRING_BODY)
            .count()
    };
    assert_eq!(bodies(&known.0.table), made, "no budget made at a mask");
}

/// Where lexemes are shared, a step other than a JSON string body's (a
/// pattern's class) has one skeleton for every grammar of the vocabulary;
/// a grammar whose lexemes are its own makes its own, and both walk alike.
#[test]
fn skeletons_of_other_steps_are_the_vocabularys_where_lexemes_are_shared() {
    let vocab = vocabulary();
    let trie = Arc::new(TokenTrie::new(&vocab));
    let known = VocabSkeleton::json_string_body(&trie);
    let before = known.0.table.len();
    // Printable ASCII but the quote and the backslash: wide, and not a
    // JSON string's body (no escapes, no other characters).
    let regex = r#""[ !#-\[\]-~]*""#;
    let walks = |skeletons: &Arc<Skeletons>| {
        let l = lexeme_with(regex, &vocab, &trie, skeletons);
        (1..l.dfa().num_states() as u32)
            .map(|state| {
                let index = l.state(state);
                assert_index_is_the_full_walk(&l, state, index, regex);
                let mut row = vec![0u32; vocab.mask_words()];
                index.inside.or_into(&mut row);
                (row, index.exits.iter(&trie).collect::<Vec<_>>())
            })
            .collect::<Vec<_>>()
    };
    let first = Arc::new(Skeletons::starting_with(&known, true));
    let second = Arc::new(Skeletons::starting_with(&known, true));
    let cold = Arc::new(Skeletons::starting_with(&known, false));
    let shared = walks(&first);
    let made = known.0.table.len();
    assert!(made > before, "the body's skeleton is the vocabulary's");
    assert_eq!(first.own.len(), 0);
    assert_eq!(walks(&second), shared);
    assert_eq!(known.0.table.len(), made, "made once for both grammars");
    assert_eq!(second.own.len(), 0);
    assert_eq!(walks(&cold), shared);
    assert!(cold.own.len() > 0, "a cold grammar makes its own");
    assert_eq!(known.0.table.len(), made);
}

/// Whitespace between JSON tokens is walked by counting its bytes (the
/// state's run, [`LazyDfa::chain`]): the first walk makes no state per
/// count, and the walk from every state gives the rows of a full walk.
#[test]
fn whitespace_runs_walk_as_a_full_walk() {
    let vocab = vocabulary();
    let trie = Arc::new(TokenTrie::new(&vocab));
    let ws = r"[ \t\n\r]";
    for regex in [
        format!(r#"\{{{ws}{{0,20}}"a"{ws}{{0,20}}:{ws}{{0,20}}(?:y|"b*"){ws}{{0,20}}\}}"#),
        format!(r":{ws}{{0,12}}"),
        format!(r"a{ws}{{0,9}}(?:b{ws}{{0,9}})*"),
        // A run before an optional key and one before the next: one run.
        format!(r#"\{{(?:{ws}{{0,20}}"a",)?{ws}{{0,20}}"b"\}}"#),
    ] {
        let dfa = LazyDfa::build(&regex, &limits(false)).unwrap();
        let l = Lexeme::new(
            Making::Now(LexDfa::Lazy(dfa)),
            trie.clone(),
            vocab.mask_words(),
            Arc::new(Skeletons::default()),
        );
        let start = l.start();
        let _ = l.build_state(start);
        // The start, the state after its first byte, the one after the
        // whole run (and the dead one).
        assert!(
            l.dfa().num_states() <= 5,
            "{regex}: {} states made by the first walk",
            l.dfa().num_states()
        );
        // Every state a text reaches, each run partway through.
        let mut states = vec![start];
        let mut k = 0;
        while let Some(&state) = states.get(k) {
            k += 1;
            for b in 0..=255u8 {
                let next = l.dfa().next(state, b);
                if next != DEAD && !states.contains(&next) {
                    states.push(next);
                }
            }
        }
        let runs = states
            .iter()
            .filter(|&&s| l.dfa().chain(s).is_some())
            .count();
        assert!(runs >= 8, "{regex}: {runs} states partway through a run");
        for &state in &states {
            assert_walks_as_a_full_walk(&l, state, &format!("{regex} from state {state}"));
        }
    }
}

/// A regex text two lexemes hold (an object's "any other key", in the
/// run of its first member and in the run after a comma) is parsed
/// once, and the lexeme of parts matches what their joined text does.
#[test]
fn a_text_of_two_lexemes_is_parsed_once() {
    let texts = ParsedTexts::default();
    let key: Arc<str> = Arc::from(r#""(?:[a-c]|d[a-z]*)""#);
    let comma = Arc::new(tokensieve_automata::parse(r"[ ]?,[ ]?").unwrap());
    let colon = Arc::new(tokensieve_automata::parse(r":[0-9]+").unwrap());
    let first = parts_dfa(
        &[
            SourcePart::Text(key.clone()),
            SourcePart::Tree(colon.clone()),
        ],
        &texts,
        &limits(false),
    )
    .unwrap();
    let tree = texts.tree(&Arc::from(&*key)).unwrap();
    let after = parts_dfa(
        &[
            SourcePart::Tree(comma),
            SourcePart::Text(Arc::from(&*key)),
            SourcePart::Tree(colon),
        ],
        &texts,
        &limits(false),
    )
    .unwrap();
    assert!(Arc::ptr_eq(&tree, &texts.tree(&key).unwrap()));
    assert_eq!(texts.known().len(), 1);
    let joined = [
        (first, format!("(?:{key})(?::[0-9]+)")),
        (after, format!("(?:[ ]?,[ ]?)(?:{key})(?::[0-9]+)")),
    ];
    let accepts = |a: &LazyDfa, bytes: &[u8]| {
        let mut s = a.start();
        for &b in bytes {
            s = a.next(s, b);
        }
        s != DEAD && a.is_accepting(s)
    };
    for (i, text, ok) in [
        (0, &br#""a":0"#[..], true),
        (0, br#""dab":12"#, true),
        (0, br#""e":1"#, false),
        (0, br#":0"a""#, false),
        (1, br#" , "d":0"#, true),
        (1, br#","b":3"#, true),
        (1, br#""b":3,"#, false),
    ] {
        let dfa = &joined[i].0;
        assert_eq!(accepts(dfa, text), ok, "{}", String::from_utf8_lossy(text));
    }
    let mut rng = SplitMix64(17);
    let alphabet = br#"abcdz" ,:0"#;
    for (dfa, text) in &joined {
        let reference = LazyDfa::build(text, &limits(false)).unwrap();
        for _ in 0..2_000 {
            let bytes: Vec<u8> = (0..rng.below(10))
                .map(|_| alphabet[rng.below(alphabet.len())])
                .collect();
            assert_eq!(
                accepts(dfa, &bytes),
                accepts(&reference, &bytes),
                "{text} on {bytes:?}"
            );
        }
    }
}

/// Walks past a string value's closing quote are kept by what the state
/// after the quote does to the text of tokens past a quote: lexemes that
/// differ only deeper than any token reaches share one index, those that
/// tokens tell apart (a colon where a comma was, the lexeme ending after
/// the spaces or not) do not; every index is the full walk. A grammar
/// that does not share lexemes keeps its own.
#[test]
fn walks_past_the_quote_are_shared_by_signature() {
    let vocab = vocabulary();
    let trie = Arc::new(TokenTrie::new(&vocab));
    let known = VocabSkeleton::json_string_body(&trie);
    let body = tokensieve_json_schema::STRING_CHAR;
    let walk = |regex: &str, skeletons: &Arc<Skeletons>| {
        let l = lexeme_with(regex, &vocab, &trie, skeletons);
        let state = b"\"x"
            .iter()
            .fold(l.dfa().start(), |s, &b| l.dfa().next(s, b));
        assert!(state != DEAD && l.is_wide(state), "{regex}: a body state");
        let index = l.body_walk(state).expect("walked past the quote");
        for s in 1..l.dfa().num_states() as u32 {
            assert_index_is_the_full_walk(&l, s, l.state(s), regex);
        }
        assert_index_is_the_full_walk(&l, state, &index, regex);
        index
    };
    // No token of the test vocabulary holds a comma or a `q`: past the
    // quote, tokens read spaces at most.
    let comma_q = format!(r#""{body}*" *,qq"#);
    let comma_w = format!(r#""{body}*" *,ww"#);
    let colon = format!(r#""{body}*" *:qq"#);
    let ends = format!(r#""{body}*" *"#);
    let shared = Arc::new(Skeletons::starting_with(&known, true));
    let first = walk(&comma_q, &shared);
    assert!(
        Arc::ptr_eq(&first, &walk(&comma_w, &shared)),
        "tokens cannot tell them apart"
    );
    assert!(
        !Arc::ptr_eq(&first, &walk(&colon, &shared)),
        "a quote then a colon is a token"
    );
    assert!(
        !Arc::ptr_eq(&first, &walk(&ends, &shared)),
        "the lexeme ends after the spaces"
    );
    // The same after the quote, and a space there ends the lexeme or not.
    let spaced = walk(&format!(r#""{body}*" +,qq"#), &shared);
    let spaced_end = walk(&format!(r#""{body}*" +"#), &shared);
    assert!(
        !Arc::ptr_eq(&spaced, &spaced_end),
        "the lexeme ends at a space"
    );
    // Another grammar on the vocabulary finds it where lexemes are shared,
    // and makes its own where they are not.
    let other = Arc::new(Skeletons::starting_with(&known, true));
    assert!(Arc::ptr_eq(&first, &walk(&comma_w, &other)));
    let cold = Arc::new(Skeletons::starting_with(&known, false));
    let own = walk(&comma_w, &cold);
    assert!(!Arc::ptr_eq(&first, &own));
    assert!(Arc::ptr_eq(&own, &walk(&comma_q, &cold)));
    let quote = &known
        .body(Body::Value, &trie, vocab.mask_words())
        .unwrap()
        .quote;
    assert!(quote.len() > 1, "tokens go on past a quote");
}

/// The index of the state after a colon in `regex` (a lazy lexeme on
/// `trie`, whose next bytes are a run of whitespace), checked against
/// the full walk, and whether it was read from the vocabulary's texts
/// past whitespace ([`Lexeme::run_walk`]).
fn walk_after_colon(
    regex: &str,
    vocab: &Vocabulary,
    trie: &Arc<TokenTrie>,
    skeletons: &Arc<Skeletons>,
) -> (Arc<StateIndex>, bool) {
    let dfa = LazyDfa::build(regex, &limits(false)).unwrap();
    let l = Lexeme::new(
        Making::Now(LexDfa::Lazy(dfa)),
        trie.clone(),
        vocab.mask_words(),
        skeletons.clone(),
    );
    let state = l.dfa().next(l.start(), b':');
    assert!(l.dfa().chain(state).is_some(), "{regex}: a run");
    let found = l.run_walk(state);
    let index = found
        .clone()
        .unwrap_or_else(|| Arc::new(l.build_state(state)));
    assert_index_is_the_full_walk(&l, state, &index, regex);
    (index, found.is_some())
}

/// Walks from the start of a run of JSON's whitespace are kept by what
/// the state does to the text of tokens past the run (each escape's
/// subtree from the state, each subtree past the run's end from the state
/// after it): lexemes that differ only deeper than any token reaches
/// share one index, those that tokens tell apart do not, the rest of a
/// run after its first byte is read too, a run of another bound is walked
/// as before, and every index is the full walk.
#[test]
fn whitespace_walks_are_shared_by_signature() {
    let vocab = vocabulary();
    let trie = Arc::new(TokenTrie::new(&vocab));
    let known = VocabSkeleton::json(&trie, 4);
    let shared = Arc::new(Skeletons::starting_with(&known, true));
    let ws = r"[ \t\n\r]";
    let walk = |regex: &str| walk_after_colon(regex, &vocab, &trie, &shared);
    // No token of the test vocabulary holds a `q` or a `w`.
    let (first, read) = walk(&format!(r#":{ws}{{0,4}}"qq"#));
    assert!(read, "a run of four is read from the texts");
    let (same, _) = walk(&format!(r#":{ws}{{0,4}}"ww"#));
    assert!(Arc::ptr_eq(&first, &same), "tokens cannot tell them apart");
    for other in [
        format!(r#":{ws}{{0,4}}:qq"#),
        format!(r#":{ws}{{0,4}}"#),
        format!(r#":{ws}{{0,4}}y"#),
    ] {
        let (index, read) = walk(&other);
        assert!(read && !Arc::ptr_eq(&first, &index), "{other}");
    }
    // A run before an optional key and one before the next: one chain,
    // read from the texts.
    let (_, read) = walk(&format!(r#":(?:{ws}{{0,4}}"qq,)?{ws}{{0,4}}"ww"#));
    assert!(read, "runs before two keys are read from the texts");
    // One byte into a run of four, three are left.
    let (_, read) = walk(&format!(r#":{ws}{{0,3}}"qq"#));
    assert!(
        read,
        "the rest of a run after its first byte is read from the texts"
    );
    let (_, read) = walk(&format!(r#":{ws}{{0,2}}"qq"#));
    assert!(!read, "a run of another bound is walked");
}

/// What a token does past a whole run of whitespace is read from the
/// state after the run: two lexemes that differ only there (a token of
/// four spaces, a quote and a `b`, where no shorter run goes on to a
/// `b`) do not share a walk.
#[test]
fn whitespace_walks_read_past_the_runs_end() {
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    tokens.extend([b"  ".to_vec(), b"    \"b".to_vec(), b"\"".to_vec()]);
    let vocab = Vocabulary::from_byte_tokens(tokens);
    let trie = Arc::new(TokenTrie::new(&vocab));
    let known = VocabSkeleton::json(&trie, 4);
    let shared = Arc::new(Skeletons::starting_with(&known, true));
    let walk = |regex: &str| {
        let (index, read) = walk_after_colon(regex, &vocab, &trie, &shared);
        assert!(read, "{regex}: read from the texts");
        index
    };
    let b = walk(r#":[ \t\n\r]{0,4}"b"#);
    let c = walk(r#":[ \t\n\r]{0,4}"c"#);
    assert!(!Arc::ptr_eq(&b, &c));
}

#[test]
fn exits_are_sorted_as_a_comparison_sort_would() {
    let mut r = SplitMix64(0x5047_0e17);
    for len in [0, 1, 100, 4095, 4096, 5000, 120_000] {
        // Distinct nodes over more than 16 bits, then a few repeated with
        // another depth.
        let mut nodes: Vec<u32> = (0..len as u32).map(|i| i * 37 % 400_009).collect();
        for i in (1..nodes.len()).rev() {
            nodes.swap(i, r.below(i + 1));
        }
        let mut exits: Vec<(u32, u32)> = nodes.iter().map(|&n| (n, n % 23)).collect();
        if len > 10 {
            exits.push((exits[3].0, exits[3].1 + 1));
        }
        let mut expected = exits.clone();
        expected.sort_unstable();
        walk::sort_exits(&mut exits);
        assert_eq!(exits, expected, "{len} exits");
    }
}

/// States found by the texts they read fill a budget of their own: past
/// it they are made and not kept, and the walks kept by signature for
/// JSON's strings and whitespace are kept as before.
#[test]
fn language_keys_keep_to_a_budget_of_their_own() {
    let walks = KeptWalks::default();
    let row = || StateIndex {
        inside: TokenSet::Dense(vec![0; 4096]),
        exits: ExitList::default(),
        exit_span: 0,
    };
    let each = 4096 * 4 + 4;
    let fits = KEPT_LANGUAGE_BYTES / each;
    for k in 0..fits + 2 {
        walks.keep(WalkKey::Language, vec![k as u32], row());
    }
    assert!(walks.get(WalkKey::Language, &[0]).is_some());
    assert!(walks.get(WalkKey::Language, &[fits as u32 - 1]).is_some());
    assert!(
        walks.get(WalkKey::Language, &[fits as u32 + 1]).is_none(),
        "past the budget"
    );
    let run = WalkKey::Run([1, 0], 4);
    walks.keep(run, vec![7], row());
    assert!(
        walks.get(run, &[7]).is_some(),
        "a JSON walk is kept beside them"
    );
}
