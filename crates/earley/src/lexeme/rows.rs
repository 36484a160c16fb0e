//! Building a state's row: one walk of the trie ([`Lexeme::build_state`]),
//! the free zone of a search, and the rows one state shares with another.

use super::*;

impl Lexeme {
    /// One depth-first walk of the trie from `state`, skipping a subtree at
    /// the first byte the DFA refuses, and taking a subtree whole where the
    /// DFA state's text step covers everything below it for as deep as it
    /// goes ([`TextRuns`]): in a string body, free or of bounded length,
    /// only the subtrees holding a quote, a backslash or a control byte are
    /// walked.
    pub(super) fn build_state(&self, state: u32) -> StateIndex {
        let trie = &*self.trie;
        // A list of ids while few, a row once many: a wide state (a string
        // body) holds most of the vocabulary, and sorting its ids would
        // cost more than the walk.
        let mut walk = Walk::new(self.words);
        // A wide loop at the root (a string body) walks through the
        // grammar's skeleton of it, and so does a chain of states (a
        // string of bounded length); another wide state scans the whole
        // trie in one pass.
        if self.is_wide(state) {
            if let Some(zone) = self.zone_before_skeleton(state) {
                self.scan_zone(state, &zone, &mut walk);
            } else if let Some((skeleton, into)) = self.loop_skeleton(state) {
                // No zone in an intersection or a counted repetition (see
                // `Lexeme::zone_before_skeleton`): a word count under a
                // length gathered up to its limit at each new word and
                // found nothing (Github_hard o21073: 11.9 -> 7.2 M
                // instructions for its slowest mask).
                let limit = if self.holds_counts() {
                    0
                } else if skeleton.escapes.len() >= ZONE_ESCAPES {
                    ZONE_STATES
                } else if (skeleton.escape_nodes + self.entry_nodes(state, into)) * ZONE_SPAN_SHARE
                    >= trie.nodes.len()
                {
                    SMALL_ZONE_STATES
                } else {
                    0
                };
                if limit > 0 && self.zone_is_wider(state, limit) {
                    // A search in a string (an unanchored `pattern`): the
                    // loop's escapes are the bytes that go on a partial
                    // match, most of the trie; the zone's are the quote's
                    // and the backslash's.
                    let zone = *self
                        .free_zone(state, limit)
                        .expect("a zone wider than the step");
                    self.scan_zone(state, &zone, &mut walk);
                } else if let Some(index) = (state != into && self.index_state(into) == into)
                    .then(|| self.deviation(state, into))
                    .flatten()
                {
                    return index;
                } else {
                    self.scan_escapes(state, into, &skeleton, &mut walk);
                }
            } else if let Some(skeleton) = self.chain_skeleton(state) {
                match self.chain_zone(state, &skeleton) {
                    Some(zone) => self.scan_zone(state, &zone, &mut walk),
                    None => self.scan_chain(state, &skeleton, &mut walk),
                }
            } else {
                // A pass from the root covers every token: where the
                // refused runs hold fewer (most of a wide state's), the row
                // starts from every token and they are cleared.
                let (mut kept, mut refused) = (Runs::default(), Runs::default());
                let at = (0, state, 0);
                let exits = &mut walk.exits;
                self.scan_subtree(at, &mut Vec::new(), &mut kept, &mut refused, exits);
                walk.take_from_root(trie, &[&kept], &[&refused]);
            }
        } else {
            let mut kept = Runs::default();
            let room = &mut BelowRoom::default();
            self.walk_below(0, state, 0, (&mut kept, &mut walk.exits), room);
            for &(a, b) in &kept.runs {
                walk.add(&trie.tokens[a as usize..b as usize]);
            }
        }
        walk.into_index(trie)
    }

    /// The free zone of `state`: the characters (ASCII bytes and the lead
    /// bytes of multi-byte ones) that keep every string of them, read from
    /// `state`, in live states where the lexeme does not end. A text step
    /// says that of the characters that lead to one state; a zone allows
    /// many (in `.*[0-9a-f]{64}.*` a hex digit goes on a partial match,
    /// another character starts it again, and every one of them stays in
    /// the search): a walk takes a subtree whole where the zone covers its
    /// bytes, wherever in the search they lead.
    ///
    /// Gathered by taking bytes out: from the bytes `state` takes without
    /// ending, the states they reach are gathered; where one kills or ends
    /// on a byte of the set, the bytes that first reached it leave the set
    /// (those it fails, at `state` itself; the lead bytes of characters
    /// that fail, always), and the states are gathered again, until every
    /// gathered state keeps every byte of the set. Many sets may hold; this
    /// one keeps the characters a body goes on with (an escape's backslash
    /// leaves, not the letters the escape refuses). Every state gathered is
    /// given the same zone (its own may be wider; this one holds from it
    /// too). `None` where nothing is free, or past `limit` states (a
    /// string of bounded length gathers a state per character: its walks
    /// are the chain's); a state that a gathering of a smaller limit met
    /// keeps that `None` (always sound: its walks scan escapes). A zone is
    /// a [`TextStep`] whose `to` is the state it was gathered from.
    pub(super) fn free_zone(&self, state: u32, limit: usize) -> Option<&TextStep> {
        self.zone_within(state, limit, true)
    }

    /// [`Lexeme::free_zone`], but where `keep_none` is false a gathering
    /// that fails is not kept: none is kept for the states it met either
    /// (each would walk without a zone of its own), and a gathering from
    /// one of them may find one.
    fn zone_within(&self, state: u32, limit: usize, keep_none: bool) -> Option<&TextStep> {
        if let Some(known) = self.zones.get(state) {
            return known.as_ref();
        }
        let (zone, members, met) = self.gather_zone(state, limit);
        if zone.is_none() && !keep_none {
            return None;
        }
        for &m in &members {
            let _ = self.zones.slot(m).set(zone);
        }
        // A state met on the way but left out holds no zone of its own
        // (none is always sound): gathering from each of them again
        // would cost a gathering per state (a word count's).
        for m in met {
            let _ = self.zones.slot(m).set(None);
        }
        self.zones.get_or_init(state, || zone).as_ref()
    }

    /// The zone of `state`, the states it gathered, and every other state
    /// met on the way (see [`Lexeme::free_zone`]).
    pub(super) fn gather_zone(
        &self,
        state: u32,
        limit: usize,
    ) -> (Option<TextStep>, Vec<u32>, Vec<u32>) {
        let dfa = self.dfa();
        if state == DEAD || dfa.is_accepting(state) {
            return (None, Vec::new(), Vec::new());
        }
        let classes = self.class_bytes();
        let ascii_of = |c: &[u64; 4]| [c[0], c[1]];
        // The ASCII bytes a state takes to a live state where the lexeme
        // goes on.
        let quiet = |t: u32| {
            let mut set = [0u64; 2];
            for (c, &to) in classes.iter().zip(dfa.row(t)) {
                if to != DEAD && !dfa.is_accepting(to) {
                    let bytes = ascii_of(c);
                    set = [set[0] | bytes[0], set[1] | bytes[1]];
                }
            }
            set
        };
        let mut ascii = quiet(state);
        let mut ends = Vec::new();
        let mut leads = utf8_live_leads(dfa, state, &mut ends);
        // The states gathered, each with the bytes that first reached it
        // (`None`: a multi-byte character) and how many characters from
        // `state` it is.
        let mut members: Vec<(u32, Option<[u64; 2]>, u32)> = Vec::new();
        let mut seen: hashbrown::HashSet<u32> = hashbrown::HashSet::new();
        let mut met: hashbrown::HashSet<u32> = hashbrown::HashSet::new();
        loop {
            met.extend(members.iter().map(|m| m.0));
            members.clear();
            seen.clear();
            members.push((state, Some([0, 0]), 0));
            seen.insert(state);
            let (mut kept_ascii, mut kept_leads) = (ascii, leads);
            // The depth of the nearest states that failed: deeper ones are
            // left for the next round (they may be reached only through the
            // bytes that leave now).
            let mut failed_at = u32::MAX;
            let mut i = 0;
            while i < members.len() {
                if members.len() > limit {
                    met.extend(members.iter().map(|m| m.0));
                    return (None, Vec::new(), met.into_iter().collect());
                }
                let (t, entry, depth) = members[i];
                if depth > failed_at {
                    break;
                }
                i += 1;
                // Bytes of the zone `t` kills or ends on, and whether a
                // character of the zone's leads fails from it.
                let mut failing = [0u64; 2];
                let mut leads_kept = leads;
                for (c, &to) in classes.iter().zip(dfa.row(t)) {
                    let bytes = ascii_of(c);
                    let bytes = [bytes[0] & ascii[0], bytes[1] & ascii[1]];
                    if bytes == [0, 0] {
                        continue;
                    }
                    if to == DEAD || dfa.is_accepting(to) {
                        failing = [failing[0] | bytes[0], failing[1] | bytes[1]];
                    } else if seen.insert(to) {
                        members.push((to, Some(bytes), depth + 1));
                    }
                }
                if leads != 0 {
                    ends.clear();
                    leads_kept &= utf8_live_leads(dfa, t, &mut ends);
                    for &to in &ends {
                        if seen.insert(to) {
                            members.push((to, None, depth + 1));
                        }
                    }
                }
                if failing == [0, 0] && leads_kept == leads {
                    continue;
                }
                failed_at = depth;
                kept_leads &= leads_kept;
                match entry {
                    _ if failing == [0, 0] => {}
                    Some(bytes) if depth > 0 => {
                        kept_ascii = [kept_ascii[0] & !bytes[0], kept_ascii[1] & !bytes[1]]
                    }
                    Some(_) => {
                        kept_ascii = [kept_ascii[0] & !failing[0], kept_ascii[1] & !failing[1]]
                    }
                    None => kept_leads = 0,
                }
            }
            if (kept_ascii, kept_leads) == (ascii, leads) {
                break;
            }
            (ascii, leads) = (kept_ascii, kept_leads);
        }
        let members: Vec<u32> = members.into_iter().map(|(m, ..)| m).collect();
        met.extend(members.iter().copied());
        if ascii == [0, 0] {
            return (None, Vec::new(), met.into_iter().collect());
        }
        let zone = TextStep {
            ascii,
            utf8: leads == ALL_LEADS,
            leads,
            to: state,
        };
        for m in &members {
            met.remove(m);
        }
        (Some(zone), members, met.into_iter().collect())
    }

    /// Whether the free zone of `state` takes more than its text step: a
    /// walk through the zone keeps more subtrees whole than the step's.
    pub(super) fn zone_is_wider(&self, state: u32, limit: usize) -> bool {
        self.wider_zone(state, limit, true).is_some()
    }

    /// The free zone of `state` if it takes more than its text step (see
    /// [`Lexeme::zone_is_wider`]); a gathering that fails is kept only
    /// with `keep_none` ([`Lexeme::zone_within`]).
    pub(super) fn wider_zone(&self, state: u32, limit: usize, keep_none: bool) -> Option<TextStep> {
        // A zone wider than a step that takes every multi-byte character
        // has another ASCII byte, whose state keeps every byte of the step
        // alive: in a string's body, the backslash's escape kills most
        // letters, and the quote ends the lexeme. Nothing to gather then.
        let dfa = self.dfa();
        let step = self.runs.step(dfa, state).copied();
        if let Some(step) = step
            && step.leads == ALL_LEADS
        {
            let first = self.first_bytes(state);
            let classes = self.class_bytes();
            let narrows = |b: usize| {
                let t = dfa.next(state, b as u8);
                t == DEAD
                    || dfa.is_accepting(t)
                    || classes.iter().zip(dfa.row(t)).any(|(c, &to)| {
                        (c[0] & step.ascii[0] != 0 || c[1] & step.ascii[1] != 0)
                            && (to == DEAD || dfa.is_accepting(to))
                    })
            };
            let mut others = [first[0] & !step.ascii[0], first[1] & !step.ascii[1]];
            let mut wider = false;
            for (w, word) in others.iter_mut().enumerate() {
                while *word != 0 && !wider {
                    wider = !narrows(w * 64 + word.trailing_zeros() as usize);
                    *word &= *word - 1;
                }
            }
            if !wider {
                return None;
            }
        }
        let zone = self.zone_within(state, limit, keep_none).copied()?;
        let wider = match step {
            None => true,
            Some(step) => {
                let within = |a: u64, b: u64| a & !b == 0;
                within(step.ascii[0], zone.ascii[0])
                    && within(step.ascii[1], zone.ascii[1])
                    && within(step.leads, zone.leads)
                    && (step.ascii, step.leads) != (zone.ascii, zone.leads)
            }
        };
        wider.then_some(zone)
    }

    /// Whether `state` takes at least [`WIDE`] bytes: its walks scan the
    /// trie in preorder rather than child list by child list.
    pub(crate) fn is_wide(&self, state: u32) -> bool {
        self.width(state) >= WIDE
    }

    /// How many bytes `state` can take.
    pub(super) fn width(&self, state: u32) -> u32 {
        self.first_bytes(state).iter().map(|w| w.count_ones()).sum()
    }

    /// The index of `state`, which leads into the loop `into` (the state
    /// of a key after its first characters, where most characters go on
    /// into any other key's body), made from the loop's own index where
    /// the two walks go alike but for a few bytes. The walks are followed
    /// together, a state of each: where both reach the same state, or
    /// states that read every text alike ([`Lexeme::same_walks`]: the
    /// lazy automaton makes a state of its own for the middle of a
    /// character after each), their subtrees are one; where only this
    /// state's lives, its subtree is scanned; where only the loop's, it
    /// is cleared; where both live, the node is kept and its exit mended,
    /// and the walks go on below. An object's other keys (any string but
    /// the named properties) walked their body's escapes once per
    /// character typed of a named key (10,000 walks of ~100 µs in a pass
    /// over MaskBench); the loop's index is the vocabulary's string body's.
    /// `None` where the two differ on more than a [`DEVIATION_SHARE`] of
    /// the root's children, or on more than [`DEVIATION_NODES`] nodes.
    /// (Not for a state whose loop's index is another state's, as a
    /// counted repetition's is: that one may be `state`'s own.)
    pub(super) fn deviation(&self, state: u32, into: u32) -> Option<StateIndex> {
        let trie = &*self.trie;
        let dfa = self.dfa();
        let classes = dfa.classes();
        // Only the middles of characters (no ASCII byte live, the same
        // bytes live in both) are compared: a comparison makes the states
        // it meets, and a key's next character and the body's are apart.
        // The pairs met, most of them many times (every lead byte of a
        // character), are asked of the lexeme once each.
        let mut met_pairs: Vec<((u32, u32), bool)> = Vec::new();
        let mut differ = |a: u32, b: u32| {
            if a == b {
                return false;
            }
            if a == DEAD || b == DEAD {
                return true;
            }
            let live = self.first_bytes(a);
            if live[0] | live[1] != 0 || live != self.first_bytes(b) {
                return true;
            }
            match met_pairs.iter().find(|p| p.0 == (a, b)) {
                Some(&(_, same)) => !same,
                None => {
                    let same = self.same_walks(a, b);
                    met_pairs.push(((a, b), same));
                    !same
                }
            }
        };
        let (root, looped) = (dfa.row(state), dfa.row(into));
        let (bytes, _) = trie.kids(0);
        let apart = bytes
            .iter()
            .map(|&b| classes[b as usize] as usize)
            .filter(|&c| differ(root[c], looped[c]))
            .count();
        if apart * DEVIATION_SHARE > bytes.len() {
            return None;
        }
        let index = self.state(into);
        let mut walk = Walk::new(self.words);
        walk.inside = vec![0u32; self.words];
        index.inside.write_into(&mut walk.inside);
        // Subtrees and nodes the loop's walk no longer speaks for: its
        // exits there are dropped.
        let mut replaced: Vec<(u32, u32)> = Vec::new();
        let (mut kept, mut refused) = (Runs::default(), Runs::default());
        let mut stack: Vec<&[u32]> = vec![&[]; trie.max_depth + 1];
        let mut todo = vec![(0usize, state, into)];
        let mut met = 0;
        while let Some((c, at, loop_at)) = todo.pop() {
            let (row, loop_row) = (dfa.row(at), dfa.row(loop_at));
            let (bytes, kids) = trie.kids(c);
            for (&b, &k) in bytes.iter().zip(kids) {
                let class = classes[b as usize] as usize;
                let (next, loop_next) = (row[class], loop_row[class]);
                if !differ(next, loop_next) {
                    continue;
                }
                met += 1;
                if met > DEVIATION_NODES {
                    return None;
                }
                let (k, end) = (k as usize, trie.nodes[k as usize].next as usize);
                let depth = trie.nodes[k].depth;
                if next == DEAD || loop_next == DEAD {
                    for &t in trie.subtree_tokens(k) {
                        walk.inside[t as usize / 32] &= !(1 << (t % 32));
                    }
                    replaced.push((k as u32, end as u32));
                    if next != DEAD {
                        stack[depth as usize - 1] = row;
                        let exits = &mut walk.exits;
                        self.scan_range(k, end, &mut stack, &mut kept, &mut refused, exits);
                    }
                    continue;
                }
                // Both keep the node's tokens; it is an exit as this
                // state's walk accepts there.
                if end > k + 1 {
                    replaced.push((k as u32, k as u32 + 1));
                    if dfa.is_accepting(next) {
                        walk.exits.push((k as u32, depth));
                    }
                    todo.push((k, next, loop_next));
                }
            }
        }
        for &(a, b) in &kept.runs {
            for &t in &trie.tokens[a as usize..b as usize] {
                walk.inside[t as usize / 32] |= 1 << (t % 32);
            }
        }
        // The ranges are disjoint (nothing is walked inside one): each
        // exit is looked up among them, not compared with every one.
        replaced.sort_unstable();
        walk.exits.extend(index.exits.iter(trie).filter(|&(n, _)| {
            let after = replaced.partition_point(|&(a, _)| a <= n);
            after == 0 || replaced[after - 1].1 <= n
        }));
        Some(walk.into_index(trie))
    }

    /// Whether states `a` and `b` read every text alike (both die, both
    /// accept): every pair of states the same bytes lead them to is one
    /// state twice, or a pair whose bytes again lead alike, as far as
    /// [`ALIKE_PAIRS`] pairs (the middles of a character after two states
    /// of a body meet again within three bytes). Answers are kept.
    pub(super) fn same_walks(&self, a: u32, b: u32) -> bool {
        let alike = || self.alike.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&known) = alike().get(&(a, b)) {
            return known;
        }
        let dfa = self.dfa();
        let classes = self.class_bytes().len();
        let mut pairs = vec![(a, b)];
        let mut k = 0;
        let ok = 'check: {
            while let Some(&(x, y)) = pairs.get(k) {
                k += 1;
                if x == DEAD || y == DEAD || dfa.is_accepting(x) != dfa.is_accepting(y) {
                    break 'check false;
                }
                let (rx, ry) = (dfa.row(x), dfa.row(y));
                for c in 0..classes {
                    let next = (rx[c], ry[c]);
                    if next.0 == next.1 || pairs.contains(&next) {
                        continue;
                    }
                    if pairs.len() >= ALIKE_PAIRS {
                        break 'check false;
                    }
                    pairs.push(next);
                }
            }
            true
        };
        alike().insert((a, b), ok);
        ok
    }
}
