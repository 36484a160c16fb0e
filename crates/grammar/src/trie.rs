//! The token trie: every grammar token of a vocabulary, by its bytes, laid out
//! in preorder so a depth-first walk is a forward scan that skips a whole
//! subtree in one jump when the DFA dies. Built once per vocabulary and
//! shared (process-wide, keyed on [`Vocabulary::fingerprint`]).

use std::sync::{Arc, Mutex, Weak};
use tokensieve_core::Vocabulary;

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
    fingerprint: u64,
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
        TokenTrie {
            nodes,
            token_start,
            tokens,
            max_depth,
            fingerprint,
        }
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
            + self.token_start.len() * 4
            + self.tokens.len() * 4
    }
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
    }
}
