//! The token trie: every grammar token of a vocabulary, by its bytes, laid out
//! in preorder so a depth-first walk is a forward scan that skips a whole
//! subtree in one jump when the DFA dies. Built once per vocabulary and
//! shared (process-wide, keyed on [`Vocabulary::fingerprint`]).

use crate::Vocabulary;
use std::sync::{Arc, Mutex, Weak};

/// The first lead byte of a multi-byte UTF-8 character: bit 0 of
/// [`Below::leads`].
pub const FIRST_LEAD: u8 = 0xC2;
/// Every lead byte, `0xC2` to `0xF4`.
pub const ALL_LEADS: u64 = (1 << (0xF4 - FIRST_LEAD + 1)) - 1;

/// One trie node (the root is node 0 and has no byte).
#[derive(Debug, Clone, Copy)]
pub struct Node {
    /// Index of the first node after this node's subtree.
    pub next: u32,
    /// Depth (1 for a token's first byte).
    pub depth: u32,
    /// The byte on the edge into this node.
    pub byte: u8,
}

/// Grammar tokens of one vocabulary as a preorder trie.
#[derive(Debug)]
pub struct TokenTrie {
    pub nodes: Vec<Node>,
    /// Tokens ending at node `i`: `tokens[token_start[i]..token_start[i + 1]]`.
    pub token_start: Vec<u32>,
    pub tokens: Vec<u32>,
    pub max_depth: usize,
    /// Per node: what lies on the edges strictly below it (see
    /// [`Below`]), so a walk can take a whole subtree at once when its
    /// automaton state loops on all of it.
    pub below: Vec<Below>,
    /// The children of node `i`, in byte order: their bytes are
    /// `kid_bytes[kid_start[i]..kid_start[i + 1]]` and their nodes the same
    /// range of `kid_nodes`. A walk that kills most bytes reads the bytes
    /// of a node's children from one place instead of visiting each child
    /// (whose nodes lie far apart, a subtree between each two).
    pub kid_start: Vec<u32>,
    pub kid_bytes: Vec<u8>,
    pub kid_nodes: Vec<u32>,
    /// Every token of the trie as a mask row ([`Vocabulary::mask_words`]
    /// words): a walk that keeps most of the vocabulary starts from it and
    /// clears what dies, instead of setting each token it keeps.
    pub all: Vec<u32>,
    /// Per node `i` (and one past the last): how many nodes before `i` in
    /// preorder have nodes below them, and the sizes of their subtrees
    /// summed. Differences give both for every node of a subtree at once
    /// (a walk's exits where each inner node of a subtree is one: a
    /// name's letters).
    pub inner_before: Vec<u32>,
    pub inner_span_before: Vec<u64>,
    fingerprint: u64,
}

/// The bytes on the edges below one trie node.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Below {
    /// Bit `b` of `ascii[b / 64]` set when ASCII byte `b` is on an edge
    /// below the node.
    pub ascii: [u64; 2],
    /// Bit `b - 0xC2` set when lead byte `b` (`0xC2` to `0xF4`) is on an
    /// edge below the node (see `TextStep::leads` in tokensieve-automata).
    pub leads: u64,
    /// Whether a non-ASCII byte is on an edge below the node.
    pub non_ascii: bool,
    /// Whether every path below the node, read from a UTF-8 character
    /// boundary at the node, is a prefix of well-formed UTF-8.
    pub utf8: bool,
    /// Bytes on the longest path below the node (at most `u16::MAX`).
    pub height: u16,
}

impl TokenTrie {
    /// Builds the trie of `vocab`'s grammar tokens (special, stop, padding and
    /// empty tokens left out).
    pub fn new(vocab: &Vocabulary) -> TokenTrie {
        Self::with_fingerprint(vocab, vocab.fingerprint())
    }

    fn with_fingerprint(vocab: &Vocabulary, fingerprint: u64) -> TokenTrie {
        let mut items: Vec<(&[u8], u32)> = vocab.grammar_tokens().map(|(id, b)| (b, id)).collect();
        items.sort_unstable();
        let mut nodes = vec![Node {
            next: 0,
            depth: 0,
            byte: 0,
        }];
        let mut token_start = vec![0u32];
        let mut tokens = Vec::with_capacity(items.len());
        // path[d] = node at depth d on the current path.
        let mut path: Vec<usize> = vec![0];
        let mut prev: &[u8] = &[];
        let mut max_depth = 0;
        for (bytes, id) in items {
            let common = prev.iter().zip(bytes).take_while(|(a, b)| a == b).count();
            while path.len() > common + 1 {
                let done = path.pop().expect("path holds the root");
                nodes[done].next = nodes.len() as u32;
            }
            for (d, &byte) in bytes.iter().enumerate().skip(common) {
                path.push(nodes.len());
                nodes.push(Node {
                    next: 0,
                    depth: d as u32 + 1,
                    byte,
                });
                token_start.push(tokens.len() as u32);
            }
            // Sorted order: `bytes` is either `prev` again (a duplicate token)
            // or has new nodes, so its node is the last one.
            tokens.push(id);
            max_depth = max_depth.max(bytes.len());
            prev = bytes;
        }
        while let Some(done) = path.pop() {
            nodes[done].next = nodes.len() as u32;
        }
        token_start.push(tokens.len() as u32);
        let parent = parents(&nodes);
        let below = below(&nodes, &parent);
        let mut kid_start = vec![0u32; nodes.len() + 1];
        for &p in &parent[1..] {
            kid_start[p + 1] += 1;
        }
        for i in 0..nodes.len() {
            kid_start[i + 1] += kid_start[i];
        }
        // Preorder visits each node's children in byte order.
        let mut kid_bytes = vec![0u8; nodes.len() - 1];
        let mut kid_nodes = vec![0u32; nodes.len() - 1];
        let mut filled = kid_start.clone();
        for (i, node) in nodes.iter().enumerate().skip(1) {
            let at = &mut filled[parent[i]];
            kid_bytes[*at as usize] = node.byte;
            kid_nodes[*at as usize] = i as u32;
            *at += 1;
        }
        let mut inner_before = vec![0u32; nodes.len() + 1];
        let mut inner_span_before = vec![0u64; nodes.len() + 1];
        for (i, node) in nodes.iter().enumerate() {
            let inner = node.next as usize > i + 1;
            let span = if inner {
                u64::from(node.next) - i as u64
            } else {
                0
            };
            inner_before[i + 1] = inner_before[i] + u32::from(inner);
            inner_span_before[i + 1] = inner_span_before[i] + span;
        }
        let mut all = vec![0u32; vocab.mask_words()];
        for &t in &tokens {
            all[t as usize / 32] |= 1 << (t % 32);
        }
        TokenTrie {
            nodes,
            token_start,
            tokens,
            all,
            max_depth,
            below,
            kid_start,
            kid_bytes,
            kid_nodes,
            inner_before,
            inner_span_before,
            fingerprint,
        }
    }

    /// The children of node `i`: their bytes and their nodes.
    #[inline]
    pub fn kids(&self, i: usize) -> (&[u8], &[u32]) {
        let range = self.kid_start[i] as usize..self.kid_start[i + 1] as usize;
        (&self.kid_bytes[range.clone()], &self.kid_nodes[range])
    }

    /// The tokens at node `i` alone.
    #[inline]
    pub fn node_tokens(&self, i: usize) -> &[u32] {
        &self.tokens[self.token_start[i] as usize..self.token_start[i + 1] as usize]
    }

    /// The tokens of node `i` and of every node below it (preorder keeps
    /// them contiguous).
    #[inline]
    pub fn subtree_tokens(&self, i: usize) -> &[u32] {
        let end = self.nodes[i].next as usize;
        &self.tokens[self.token_start[i] as usize..self.token_start[end] as usize]
    }

    /// The shared trie of `vocab`: built on first use, reused by every
    /// backend on a vocabulary with the same fingerprint while one is alive.
    pub fn shared(vocab: &Vocabulary) -> Arc<TokenTrie> {
        static CACHE: Mutex<Vec<(u64, Weak<TokenTrie>)>> = Mutex::new(Vec::new());
        let fingerprint = vocab.fingerprint();
        {
            let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
            cache.retain(|(_, w)| w.strong_count() > 0);
            if let Some(t) = cache
                .iter()
                .find(|(f, _)| *f == fingerprint)
                .and_then(|(_, w)| w.upgrade())
            {
                return t;
            }
        }
        // Built outside the lock: two threads may race to build the same
        // trie, both results are correct, one is kept.
        let trie = Arc::new(Self::with_fingerprint(vocab, fingerprint));
        let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
        cache.push((fingerprint, Arc::downgrade(&trie)));
        trie
    }

    /// Trie nodes, the root included.
    pub fn num_nodes(&self) -> usize {
        self.nodes.len()
    }

    /// Tokens in the trie.
    pub fn num_tokens(&self) -> usize {
        self.tokens.len()
    }

    /// Longest token, in bytes.
    pub fn max_depth(&self) -> usize {
        self.max_depth
    }

    /// The vocabulary fingerprint this trie was built from.
    pub fn fingerprint(&self) -> u64 {
        self.fingerprint
    }

    /// Heap bytes held.
    pub fn memory_bytes(&self) -> usize {
        self.nodes.len() * std::mem::size_of::<Node>()
            + self.below.len() * std::mem::size_of::<Below>()
            + self.token_start.len() * 4
            + self.kid_start.len() * 4
            + self.kid_bytes.len() * 5
            + self.tokens.len() * 4
            + self.all.len() * 4
            + self.inner_before.len() * 12
    }
}

/// Where a UTF-8 decoder stands: at a character boundary, or owing
/// continuation bytes, some of them in a narrowed range (after `E0`, `ED`,
/// `F0`, `F4`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Utf8At {
    Boundary = 0,
    Owe1,
    Owe2,
    Owe3,
    AfterE0,
    AfterED,
    AfterF0,
    AfterF4,
}

const UTF8_STATES: [Utf8At; 8] = [
    Utf8At::Boundary,
    Utf8At::Owe1,
    Utf8At::Owe2,
    Utf8At::Owe3,
    Utf8At::AfterE0,
    Utf8At::AfterED,
    Utf8At::AfterF0,
    Utf8At::AfterF4,
];

impl Utf8At {
    /// The decoder after `b`, or `None` when `b` breaks well-formed UTF-8.
    pub fn step(self, b: u8) -> Option<Utf8At> {
        use Utf8At::*;
        let cont = |lo: u8, hi: u8, then: Utf8At| (lo..=hi).contains(&b).then_some(then);
        match self {
            Boundary => match b {
                0x00..=0x7F => Some(Boundary),
                0xC2..=0xDF => Some(Owe1),
                0xE0 => Some(AfterE0),
                0xED => Some(AfterED),
                0xE1..=0xEF => Some(Owe2),
                0xF0 => Some(AfterF0),
                0xF4 => Some(AfterF4),
                0xF1..=0xF3 => Some(Owe3),
                _ => None,
            },
            Owe1 => cont(0x80, 0xBF, Boundary),
            Owe2 => cont(0x80, 0xBF, Owe1),
            Owe3 => cont(0x80, 0xBF, Owe2),
            AfterE0 => cont(0xA0, 0xBF, Owe1),
            AfterED => cont(0x80, 0x9F, Owe1),
            AfterF0 => cont(0x90, 0xBF, Owe2),
            AfterF4 => cont(0x80, 0x8F, Owe2),
        }
    }
}

/// The parent of every node (the root's is itself).
fn parents(nodes: &[Node]) -> Vec<usize> {
    let mut parent = vec![0usize; nodes.len()];
    let mut path: Vec<usize> = vec![0];
    for (i, node) in nodes.iter().enumerate().skip(1) {
        path.truncate(node.depth as usize);
        parent[i] = *path.last().expect("the root is on every path");
        path.push(i);
    }
    parent
}

/// [`Below`] of every node, children before parents (reverse preorder).
fn below(nodes: &[Node], parent: &[usize]) -> Vec<Below> {
    let mut below = vec![Below::default(); nodes.len()];
    // Bit `d` of `valid[i]`: every path below `i` is well-formed UTF-8 when
    // the decoder stands at `UTF8_STATES[d]` at node `i`.
    let mut valid = vec![u8::MAX; nodes.len()];
    for i in (1..nodes.len()).rev() {
        let (b, p) = (nodes[i].byte, parent[i]);
        let mine = below[i];
        let up = &mut below[p];
        up.ascii[0] |= mine.ascii[0];
        up.ascii[1] |= mine.ascii[1];
        up.non_ascii |= mine.non_ascii;
        up.leads |= mine.leads;
        up.height = up.height.max(mine.height.saturating_add(1));
        if b < 0x80 {
            up.ascii[b as usize / 64] |= 1 << (b % 64);
        } else {
            up.non_ascii = true;
            if (FIRST_LEAD..=0xF4).contains(&b) {
                up.leads |= 1 << (b - FIRST_LEAD);
            }
        }
        for (d, at) in UTF8_STATES.iter().enumerate() {
            let ok = at.step(b).is_some_and(|to| valid[i] & (1 << to as u8) != 0);
            if !ok {
                valid[p] &= !(1 << d);
            }
        }
    }
    for (b, v) in below.iter_mut().zip(&valid) {
        b.utf8 = v & 1 != 0;
    }
    below
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preorder_layout() {
        let v = Vocabulary::from_byte_tokens(["ab", "a", "b", "abc", "a"]);
        let t = TokenTrie::new(&v);
        // root, a, ab, abc, b
        assert_eq!(t.num_nodes(), 5);
        let bytes: Vec<u8> = t.nodes[1..].iter().map(|n| n.byte).collect();
        assert_eq!(bytes, b"abcb");
        assert_eq!(t.nodes[1].next, 4); // subtree of "a" ends before "b"
        assert_eq!(t.nodes[0].next, 5);
        let at = |i: usize| &t.tokens[t.token_start[i] as usize..t.token_start[i + 1] as usize];
        assert_eq!(at(1), &[1, 4]); // both "a" tokens
        assert_eq!(at(2), &[0]);
        assert_eq!(at(3), &[3]);
        assert_eq!(at(4), &[2]);
        assert_eq!(t.max_depth(), 3);
        assert!(Arc::ptr_eq(&TokenTrie::shared(&v), &TokenTrie::shared(&v)));
        assert_eq!(t.subtree_tokens(1), &[1, 4, 0, 3]);
        assert_eq!(t.kids(0), (&b"ab"[..], &[1, 4][..]));
        assert_eq!(t.kids(1), (&b"b"[..], &[2][..]));
        assert_eq!(t.kids(3), (&b""[..], &[][..]));
    }

    #[test]
    fn inner_nodes_and_their_spans_counted_before_each_node() {
        let v = Vocabulary::from_byte_tokens([&b"a"[..], b"ab", b"abc", b"abd", b"b", b"bc"]);
        let t = TokenTrie::new(&v);
        let n = t.nodes.len();
        assert_eq!(t.inner_before.len(), n + 1);
        for i in 0..=n {
            let inner: Vec<usize> = (0..i)
                .filter(|&k| t.nodes[k].next as usize > k + 1)
                .collect();
            assert_eq!(t.inner_before[i] as usize, inner.len(), "node {i}");
            let span: u64 = inner
                .iter()
                .map(|&k| u64::from(t.nodes[k].next) - k as u64)
                .sum();
            assert_eq!(t.inner_span_before[i], span, "node {i}");
        }
        // The root, `a`, `ab` and `b` have nodes below them.
        assert_eq!(t.inner_before[n], 4);
    }

    #[test]
    fn what_lies_below_each_node() {
        let tokens: [&[u8]; 6] = [
            b"ab",
            b"a\xc3\xa9",
            b"b\xe2\x82",
            b"c\xe2\x28",
            b"d\xc3",
            b"e\x80",
        ];
        let v = Vocabulary::from_byte_tokens(tokens);
        let t = TokenTrie::new(&v);
        let node = |bytes: &[u8]| {
            let mut i = 0;
            for &b in bytes {
                i = (i + 1..t.nodes[i].next as usize)
                    .find(|&j| t.nodes[j].depth == t.nodes[i].depth + 1 && t.nodes[j].byte == b)
                    .expect("a node on the path");
            }
            t.below[i]
        };
        let a = node(b"a");
        assert_eq!(a.ascii, [0, 1 << (b'b' - 64)]);
        assert!(
            a.non_ascii && a.utf8,
            "\"ab\" and \"a\u{e9}\" are well-formed"
        );
        assert_eq!(a.leads, 1 << (0xC3 - FIRST_LEAD), "é's lead");
        // A character cut short at the end of a token is still a prefix.
        assert!(node(b"b").utf8 && node(b"d").utf8);
        // `E2 28` and a lone continuation byte are not.
        assert!(!node(b"c").utf8 && !node(b"e").utf8);
        assert!(!node(b"").utf8 && node(b"").non_ascii);
        // A leaf has nothing below it.
        assert_eq!(
            node(b"ab"),
            Below {
                ascii: [0; 2],
                leads: 0,
                non_ascii: false,
                utf8: true,
                height: 0
            }
        );
        assert_eq!((node(b"a").height, node(b"").height), (2, 3));
        // Below `b E2` is the continuation byte `82`: fine in the middle of
        // a character, but `utf8` reads from a boundary at the node.
        assert!(!node(b"b\xe2").utf8);
    }
}
