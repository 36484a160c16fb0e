//! JSON object keys as an automaton: [`OtherKeys`], the key of an object's
//! extra members (any quoted JSON key but some names), the one automaton of
//! this crate that knows JSON.
//!
//! An object that allows members beyond its declared properties takes as
//! their key any JSON string but the declared names. Written as a regex
//! (tokensieve-json-schema's `quoted_key_complement`), that key is a trie
//! of the names written three times over, up to 100 KB of text for an
//! object of a few hundred properties, which a backend then parses and
//! compiles: 37 M instructions to read and 23 M to compile on MaskBench's
//! largest, in the first mask that enters the key. [`OtherKeys`] keeps the
//! names, and [`crate::lazy::LazyDfa::from_sources`] builds the key's NFA
//! straight from their trie, one byte state a trie node (see
//! `nfa::Compiler::other_keys`), with no text read.

use std::sync::OnceLock;

/// A quoted JSON object key, `"` then a string of unescaped characters
/// (space to DEL but `"` and `\`, and every non-ASCII character) that is
/// none of the names, then `"`: the language of tokensieve-json-schema's
/// `quoted_key_complement` of the same names (its `other_keys_regex`
/// writes that text for a consumer that parses it).
#[derive(Debug, Clone)]
pub struct OtherKeys {
    /// The names a key may be written as unescaped, sorted, each once.
    names: Vec<String>,
    /// Their trie, made when an NFA first needs it (the two lexemes of an
    /// object's other keys, first member and after a comma, share it).
    trie: OnceLock<Vec<KeyNode>>,
}

/// Keys are the same language when their names are the same.
impl PartialEq for OtherKeys {
    fn eq(&self, other: &OtherKeys) -> bool {
        self.names == other.names
    }
}

impl Eq for OtherKeys {}

impl OtherKeys {
    /// The key that is none of `names`. A name holding a character that a
    /// key writes escaped equals no string of unescaped characters: it is
    /// left out, as it excludes nothing.
    pub fn new(names: &[String]) -> OtherKeys {
        let mut names: Vec<String> = names
            .iter()
            .filter(|n| n.chars().all(is_unescaped_key_char))
            .cloned()
            .collect();
        names.sort_unstable();
        names.dedup();
        OtherKeys {
            names,
            trie: OnceLock::new(),
        }
    }

    /// The names excluded (those written unescaped), sorted.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// A text that stands for this key where a grammar's rule holds it
    /// unwritten (tokensieve-json-schema's `SchemaGrammar::rule_regex`
    /// writes it): no regex the lowering writes begins with a NUL, and the names
    /// (listed as `Debug` quotes them) are the language.
    pub fn stand_in(&self) -> String {
        format!("{STAND_IN_MARK}other keys {:?}", self.names)
    }
}

/// The first character of every [`OtherKeys::stand_in`].
pub const STAND_IN_MARK: char = '\0';

impl OtherKeys {
    /// The names' trie: nodes in the order they were made (a node's
    /// children after it), each with its children by character (in
    /// character order) and whether a name ends there. Node 0 is the
    /// empty prefix.
    pub(crate) fn trie(&self) -> &[KeyNode] {
        self.trie.get_or_init(|| self.make_trie())
    }

    fn make_trie(&self) -> Vec<KeyNode> {
        let mut nodes = vec![KeyNode::default()];
        for name in &self.names {
            let mut at = 0;
            for c in name.chars() {
                // Names are sorted: a new child is the last of its node's.
                at = match nodes[at].children.last() {
                    Some(&(k, child)) if k == c => child as usize,
                    _ => {
                        nodes.push(KeyNode::default());
                        let child = nodes.len() - 1;
                        nodes[at].children.push((c, child as u32));
                        child
                    }
                };
            }
            nodes[at].end = true;
        }
        nodes
    }
}

/// A node of [`OtherKeys::trie`].
#[derive(Debug, Clone, Default)]
pub(crate) struct KeyNode {
    pub end: bool,
    pub children: Vec<(char, u32)>,
}

/// Whether a JSON string holds `c` as itself, not escaped: what the
/// lowering's class of unescaped characters (`[^"\\\x00-\x1F]`) matches.
pub fn is_unescaped_key_char(c: char) -> bool {
    c >= ' ' && c != '"' && c != '\\'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_sorted_once_and_escaped_ones_left_out() {
        let names: Vec<String> = ["b", "a", "b", "a\nb", "q\"", "ab", "é"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let keys = OtherKeys::new(&names);
        assert_eq!(keys.names(), ["a", "ab", "b", "é"]);
        let trie = keys.trie();
        // Root, a, ab, b, é.
        assert_eq!(trie.len(), 5);
        let kids: Vec<char> = trie[0].children.iter().map(|&(c, _)| c).collect();
        assert_eq!(kids, ['a', 'b', 'é']);
        assert!(!trie[0].end);
        let a = trie[0].children[0].1 as usize;
        assert!(trie[a].end);
        assert_eq!(trie[a].children.len(), 1);
    }
}
