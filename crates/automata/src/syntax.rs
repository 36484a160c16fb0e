//! A fast parser for the regex text our lowerings write.
//!
//! regex-syntax parses a pattern into an abstract syntax tree with spans
//! and then translates it; on the texts the JSON Schema lowering writes (a
//! JSON string's character class repeated hundreds of times, key sets as
//! class differences) that is most of a compile. [`parse`] reads the same
//! dialect straight into a [`Hir`] built with regex-syntax's own
//! constructors, so the tree is the one regex-syntax would give, and
//! classes written more than once are built once; with a [`Memo`] kept
//! across texts, so are long groups (copied, not read again). It reads a subset:
//! literals and escapes, `.`, bracketed classes (nested, negated, with
//! `&&`, `--` and `~~`), groups, alternation and greedy repetition. For
//! anything else (flags, anchors, Perl and Unicode classes, lazy
//! repetition, a text that nests deep, and every error) it answers with
//! regex-syntax's parse, so the language and the errors are regex-syntax's.

use hashbrown::HashMap;

use regex_syntax::hir::{Capture, Class, ClassUnicode, ClassUnicodeRange, Dot, Hir, Repetition};

/// `text` parsed as regex-syntax parses it in Unicode mode with UTF-8
/// matching only and `nest_limit`. (The error is regex-syntax's own, as
/// its parser returns it, for callers that name its construct and offset.)
#[allow(clippy::result_large_err)]
pub fn parse(text: &str, nest_limit: u32) -> Result<Hir, regex_syntax::Error> {
    parse_with(text, nest_limit, &mut Memo::default())
}

/// The fast reading of `text` alone: `None` where [`parse`] would hand the
/// text to regex-syntax (for tests and profiles that count how much of a
/// lowering is read fast).
#[doc(hidden)]
pub fn parse_fast_only(text: &str, nest_limit: u32) -> Option<Hir> {
    fast(text, nest_limit, &mut Memo::default())
}

/// [`parse`], reusing what `memo` kept of texts parsed with it before:
/// classes, and groups written several times (a member of an object
/// comes twice in the lowering of optional members in order, and so does
/// every definition inlined in two places).
#[allow(clippy::result_large_err)]
pub fn parse_with<'a>(
    text: &'a str,
    nest_limit: u32,
    memo: &mut Memo<'a>,
) -> Result<Hir, regex_syntax::Error> {
    if let Some(hir) = fast(text, nest_limit, memo) {
        return Ok(hir);
    }
    regex_syntax::ParserBuilder::new()
        .utf8(true)
        .nest_limit(nest_limit)
        .build()
        .parse(text)
}

/// What [`parse_with`] keeps from one text to the next. Its keys borrow the
/// texts, so it lives no longer than they do.
#[derive(Default)]
pub struct Memo<'a> {
    /// Classes met before, by their text (from `[` to its `]`), with the
    /// levels their reading went below the class's own.
    classes: HashMap<&'a str, (Hir, u32)>,
    /// Non-capturing groups of at least [`MEMO_GROUP_LEN`] bytes, by their
    /// first [`MEMO_GROUP_LEN`] bytes: the group's whole text, its tree
    /// once the text has been read [`MEMO_KEEP_AT`] times, how often it
    /// was read, and how deep it nests.
    groups: HashMap<&'a str, Vec<Group<'a>>>,
    /// Bytes of the texts parsed with this memo, and of the groups whose
    /// trees it keeps: kept no more than read, so that nested groups met
    /// twice (each level's tree kept) cost memory in proportion to the
    /// input, not to its size times its depth.
    read: usize,
    kept: usize,
}

struct Group<'a> {
    text: &'a str,
    tree: Option<Hir>,
    /// Times the group was read (not copied from `tree`).
    met: u32,
    height: u32,
}

/// Groups shorter than this are read again each time: a copy of the tree
/// saves little on them, and every group would be looked up.
const MEMO_GROUP_LEN: usize = 64;

/// Reads of a group before its tree is kept. Not on the second: most
/// groups read twice are never met again (or only inside a longer group
/// that is copied whole), and a kept copy nobody takes costs a copy and a
/// drop. On five of the slowest MaskBench schemas the split does 13%
/// fewer instructions keeping at the fourth read than at the second (10%
/// at the third, 13% at the sixth; never keeping does 14% more).
const MEMO_KEEP_AT: u32 = 4;

/// Texts sharing a group's first bytes, kept at most.
const MEMO_GROUPS_PER_PREFIX: usize = 8;

/// The fast reading of `text`, or `None` where it leaves the subset.
fn fast<'a>(text: &'a str, nest_limit: u32, memo: &mut Memo<'a>) -> Option<Hir> {
    memo.read += text.len();
    let mut p = Parser {
        text,
        at: 0,
        // Deeper than this is left to regex-syntax, which counts its own
        // way (every group, alternation, sequence, repetition and class).
        budget: nest_limit / 4,
        deepest: 0,
        captures: 0,
        memo,
        stack: Vec::new(),
        bytes: Vec::new(),
    };
    let hir = p.alternation(0)?;
    (p.at == text.len()).then_some(hir)
}

struct Parser<'a, 'm> {
    text: &'a str,
    at: usize,
    budget: u32,
    /// The deepest nesting reached so far (a group's height is what its
    /// reading adds to it).
    deepest: u32,
    captures: u32,
    memo: &'m mut Memo<'a>,
    /// Items of the sequences and alternations being read, innermost
    /// last: each reading takes its own from the top into a vector of
    /// their exact number (no vector grown item by item).
    stack: Vec<Hir>,
    /// The literal characters of the sequences being read, the same way.
    bytes: Vec<u8>,
}

/// One side of a class operation, or a class item.
type Set = ClassUnicode;

impl<'a> Parser<'a, '_> {
    fn peek(&self) -> Option<char> {
        self.text[self.at..].chars().next()
    }

    fn peek2(&self) -> Option<char> {
        let mut chars = self.text[self.at..].chars();
        chars.next();
        chars.next()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.at += c.len_utf8();
        Some(c)
    }

    fn eat(&mut self, s: &str) -> bool {
        if self.text[self.at..].starts_with(s) {
            self.at += s.len();
            true
        } else {
            false
        }
    }

    /// Alternatives up to a `)` or the end, at nesting `depth`.
    fn alternation(&mut self, depth: u32) -> Option<Hir> {
        if !self.enter(depth) {
            return None;
        }
        let first = self.concat(depth)?;
        if self.peek() != Some('|') {
            return Some(first);
        }
        let base = self.stack.len();
        self.stack.push(first);
        while self.eat("|") {
            let alternative = self.concat(depth)?;
            self.stack.push(alternative);
        }
        Some(Hir::alternation(self.stack.drain(base..).collect()))
    }

    /// Items up to a `|`, a `)` or the end. Literal characters in a row
    /// (none with a quantifier of its own) make one literal, as
    /// `Hir::concat` would join them, without a tree node each.
    fn concat(&mut self, depth: u32) -> Option<Hir> {
        // (A reading that fails ends the whole fast reading: what it left
        // on the stacks is not read again.)
        let (base, run) = (self.stack.len(), self.bytes.len());
        while let Some(c) = self.peek() {
            if c == '|' || c == ')' {
                break;
            }
            let char = match c {
                '\\' => {
                    self.bump();
                    // An escape that is no one character: regex-syntax's.
                    Some(self.escape()?)
                }
                '(' | '[' | '.' | '^' | '$' | '*' | '+' | '?' | '{' => None,
                c => {
                    self.bump();
                    Some(c)
                }
            };
            let Some(char) = char else {
                self.flush_literal(run);
                let atom = self.atom(depth)?;
                let item = self.repetition(atom)?;
                self.stack.push(item);
                continue;
            };
            if matches!(self.peek(), Some('*' | '+' | '?' | '{')) {
                self.flush_literal(run);
                let item = self.repetition(literal(char))?;
                self.stack.push(item);
            } else {
                let mut buf = [0u8; 4];
                self.bytes
                    .extend_from_slice(char.encode_utf8(&mut buf).as_bytes());
            }
        }
        self.flush_literal(run);
        // One item is its own concatenation (`Hir::concat` would take it
        // apart and build it again: an allocation and a free a node).
        Some(if self.stack.len() == base + 1 {
            self.stack.pop().expect("one")
        } else {
            Hir::concat(self.stack.drain(base..).collect())
        })
    }

    /// The literal characters gathered from `run`, if any, as one item.
    fn flush_literal(&mut self, run: usize) {
        if self.bytes.len() > run {
            let hir = Hir::literal(&self.bytes[run..]);
            self.bytes.truncate(run);
            self.stack.push(hir);
        }
    }

    fn atom(&mut self, depth: u32) -> Option<Hir> {
        let c = self.bump()?;
        Some(match c {
            '(' => {
                let capture = !self.eat("?:");
                if self.peek() == Some('?') {
                    return None;
                }
                if !capture {
                    return self.group(depth);
                }
                self.captures += 1;
                let index = Some(self.captures);
                let sub = self.alternation(depth + 1)?;
                if !self.eat(")") {
                    return None;
                }
                match index {
                    Some(index) => Hir::capture(Capture {
                        index,
                        name: None,
                        sub: Box::new(sub),
                    }),
                    None => sub,
                }
            }
            '[' => {
                let start = self.at - 1;
                // A class read before is not read again. Where its text is
                // a known class's, reading would take exactly that text (a
                // class's reading looks at nothing past its `]`) and give
                // that class, so `class_end` need only guess the end: a
                // wrong guess is a text no class was read from.
                if let Some(end) = class_end(self.text, self.at)
                    && let Some((known, height)) = self.memo.classes.get(&self.text[start..end])
                    && depth + 1 + height <= self.budget
                {
                    self.deepest = self.deepest.max(depth + 1 + height);
                    self.at = end;
                    return Some(known.clone());
                }
                let outer = std::mem::replace(&mut self.deepest, depth + 1);
                let set = self.class(depth + 1)?;
                let height = self.deepest - (depth + 1);
                self.deepest = self.deepest.max(outer);
                let source = &self.text[start..self.at];
                let hir = Hir::class(Class::Unicode(set));
                self.memo.classes.insert(source, (hir.clone(), height));
                hir
            }
            '\\' => literal(self.escape()?),
            '.' => Hir::dot(Dot::AnyCharExceptLF),
            '^' | '$' | '*' | '+' | '?' | '{' | ')' | '|' => return None,
            c => literal(c),
        })
    }

    /// Whether reading may go to nesting `depth` (noted as reached).
    fn enter(&mut self, depth: u32) -> bool {
        self.deepest = self.deepest.max(depth);
        depth <= self.budget
    }

    /// A non-capturing group after its `(?:`, through its `)`: a copy of
    /// the tree of the same text met before, where there is one. A group's
    /// reading depends only on its text (there is no capture in it to
    /// number), so the copy is the tree reading it again would give, and
    /// it is taken only where that reading would stay within the budget.
    fn group(&mut self, depth: u32) -> Option<Hir> {
        let start = self.at - 3;
        let prefix = self.text.get(start..start + MEMO_GROUP_LEN);
        if let Some(prefix) = prefix
            && let Some(known) = self.memo.groups.get(prefix)
            && let Some(g) = known
                .iter()
                .find(|g| self.text[start..].starts_with(g.text))
            && let Some(tree) = &g.tree
            && depth + g.height <= self.budget
        {
            self.deepest = self.deepest.max(depth + g.height);
            self.at = start + g.text.len();
            return Some(tree.clone());
        }
        let outer = std::mem::replace(&mut self.deepest, depth);
        let sub = self.alternation(depth + 1)?;
        if !self.eat(")") {
            return None;
        }
        let height = self.deepest - depth;
        self.deepest = self.deepest.max(outer);
        let text = &self.text[start..self.at];
        if let Some(prefix) = prefix
            && text.len() >= MEMO_GROUP_LEN
            && sub.properties().explicit_captures_len() == 0
        {
            let (read, kept) = (self.memo.read, self.memo.kept);
            let known = self.memo.groups.entry(prefix).or_default();
            if let Some(g) = known.iter_mut().find(|g| g.text == text) {
                g.met += 1;
                if g.tree.is_none() && g.met >= MEMO_KEEP_AT && kept + text.len() <= read {
                    g.tree = Some(sub.clone());
                    self.memo.kept += text.len();
                }
            } else if known.len() < MEMO_GROUPS_PER_PREFIX {
                known.push(Group {
                    text,
                    tree: None,
                    met: 1,
                    height,
                });
            }
        }
        Some(sub)
    }

    /// A greedy repetition operator after `atom`, if there is one.
    fn repetition(&mut self, atom: Hir) -> Option<Hir> {
        let (min, max) = match self.peek() {
            Some('*') => (0, None),
            Some('+') => (1, None),
            Some('?') => (0, Some(1)),
            Some('{') => {
                self.bump();
                let min = self.number()?;
                let max = if self.eat(",") {
                    if self.peek() == Some('}') {
                        None
                    } else {
                        Some(self.number()?)
                    }
                } else {
                    Some(min)
                };
                if self.peek() != Some('}') || max.is_some_and(|max| max < min) {
                    return None;
                }
                (min, max)
            }
            _ => return Some(atom),
        };
        self.bump();
        // Lazy or stacked repetition: regex-syntax's to read.
        if matches!(self.peek(), Some('?' | '*' | '+' | '{')) {
            return None;
        }
        Some(Hir::repetition(Repetition {
            min,
            max,
            greedy: true,
            sub: Box::new(atom),
        }))
    }

    fn number(&mut self) -> Option<u32> {
        let start = self.at;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.at += 1;
        }
        self.text[start..self.at].parse().ok()
    }

    /// The character an escape (after its `\`) stands for; `None` for an
    /// escape that is no one character (`\d`, `\b`, `\p{..}` …).
    fn escape(&mut self) -> Option<char> {
        let c = self.bump()?;
        match c {
            'x' => {
                let digits = if self.eat("{") {
                    let start = self.at;
                    while self.peek().is_some_and(|c| c.is_ascii_hexdigit()) {
                        self.at += 1;
                    }
                    let digits = &self.text[start..self.at];
                    if !self.eat("}") || digits.is_empty() || digits.len() > 8 {
                        return None;
                    }
                    digits
                } else {
                    let digits = self.text.get(self.at..self.at + 2)?;
                    if !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
                        return None;
                    }
                    self.at += 2;
                    digits
                };
                char::from_u32(u32::from_str_radix(digits, 16).ok()?)
            }
            'n' => Some('\n'),
            'r' => Some('\r'),
            't' => Some('\t'),
            'f' => Some('\x0C'),
            'v' => Some('\x0B'),
            'a' => Some('\x07'),
            c if regex_syntax::is_escapeable_character(c) && !c.is_whitespace() => Some(c),
            _ => None,
        }
    }

    /// A bracketed class after its `[`, through its `]`.
    fn class(&mut self, depth: u32) -> Option<Set> {
        if !self.enter(depth) {
            return None;
        }
        let negated = self.eat("^");
        let mut set = self.union(depth, true)?;
        loop {
            if self.eat("]") {
                break;
            }
            let op: fn(&mut Set, &Set) = if self.eat("&&") {
                Set::intersect
            } else if self.eat("--") {
                Set::difference
            } else if self.eat("~~") {
                Set::symmetric_difference
            } else {
                return None;
            };
            let rhs = self.union(depth, false)?;
            op(&mut set, &rhs);
        }
        if negated {
            set.negate();
        }
        Some(set)
    }

    /// Class items up to an operator or the closing `]` (a `]` first in
    /// the class is a literal).
    fn union(&mut self, depth: u32, first: bool) -> Option<Set> {
        let mut set = Set::empty();
        let mut first = first;
        loop {
            let c = self.peek()?;
            if c == ']' && !first {
                return Some(set);
            }
            if c == ']' && self.peek2() == Some('-') {
                // A `]` first in a class starts no range in regex-syntax
                // (`[]-z]` is `]`, `-` and `z`).
                return None;
            }
            if self.text[self.at..].starts_with("&&")
                || self.text[self.at..].starts_with("--")
                || self.text[self.at..].starts_with("~~")
            {
                // First in a class, regex-syntax reads an operator's
                // characters its own way (`[--a]` is `-` and `a`).
                return (!first).then_some(set);
            }
            first = false;
            if c == '[' {
                if self.peek2() == Some(':') {
                    return None;
                }
                self.bump();
                set.union(&self.class(depth + 1)?);
                continue;
            }
            let lo = self.class_char()?;
            let is_range = self.peek() == Some('-') && !matches!(self.peek2(), Some(']' | '-'));
            let hi = if is_range {
                self.bump();
                self.class_char()?
            } else {
                lo
            };
            if hi < lo {
                return None;
            }
            set.push(ClassUnicodeRange::new(lo, hi));
        }
    }

    /// One character of a class: a literal or an escape.
    fn class_char(&mut self) -> Option<char> {
        match self.bump()? {
            '\\' => self.escape(),
            '[' => None,
            c => Some(c),
        }
    }
}

/// Where the bracketed class whose items start at byte `at` of `text`
/// (after its `[`) ends, past its `]`, as the class syntax reads it
/// (escapes, a `]` first, nested classes), or `None` where the text ends
/// first. A guess [`Parser::atom`] checks against the classes it read.
fn class_end(text: &str, at: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut i = at;
    let mut open = 1u32;
    // At the start of a class (after `[` and a `^`): a `]` there is a
    // member.
    let mut first = true;
    if bytes.get(i) == Some(&b'^') {
        i += 1;
    }
    while let Some(&b) = bytes.get(i) {
        i += 1;
        match b {
            b'\\' => {
                // `\x{...}` to its `}`; any other escape is one character
                // (continuation bytes of a wide one are skipped as members).
                if bytes.get(i) == Some(&b'x') && bytes.get(i + 1) == Some(&b'{') {
                    i += bytes[i..].iter().position(|&b| b == b'}')? + 1;
                } else {
                    i += 1;
                }
            }
            b'[' => {
                open += 1;
                if bytes.get(i) == Some(&b'^') {
                    i += 1;
                }
                first = true;
                continue;
            }
            b']' if !first => {
                open -= 1;
                if open == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
        first = false;
    }
    None
}

fn literal(c: char) -> Hir {
    let mut buf = [0u8; 4];
    Hir::literal(c.encode_utf8(&mut buf).as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[allow(clippy::result_large_err)]
    fn slow(text: &str) -> Result<Hir, regex_syntax::Error> {
        slow_under(text, 256)
    }

    /// regex-syntax's reading of `text` under `nest_limit`.
    #[allow(clippy::result_large_err)]
    fn slow_under(text: &str, nest_limit: u32) -> Result<Hir, regex_syntax::Error> {
        regex_syntax::ParserBuilder::new()
            .utf8(true)
            .nest_limit(nest_limit)
            .build()
            .parse(text)
    }

    /// Every text the fast reading takes gives regex-syntax's tree.
    fn agrees(text: &str) -> bool {
        match fast(text, 256, &mut Memo::default()) {
            Some(hir) => {
                assert_eq!(Ok(&hir), slow(text).as_ref(), "{text}");
                true
            }
            None => false,
        }
    }

    #[test]
    fn the_lowerings_dialect_reads_as_regex_syntax_reads_it() {
        let taken = [
            r#"\{[ \t\n\r]{0,20}(?:"a"[ \t\n\r]{0,20}:[ \t\n\r]{0,20}(?:true|false))?\}"#,
            r#""(?:[^"\\\x00-\x1F]|\\["\\/bfnrt]|\\u(?:[0-9A-Ca-cEFef][0-9A-Fa-f]{3}|[Dd][0-7][0-9A-Fa-f]{2}))*""#,
            r#""(?:[[^"\\\x00-\x1F]--[\x{73}\x{64}]][^"\\\x00-\x1F]*|d|da)""#,
            r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?",
            r"[a-z&&[^aeiou]]+|[\x{0}-\x{10FFFF}~~[b-y]]|[]a]|[-a-]|[a-b-c]|[\]\-\^]",
            r"(a|b)(c(d))|(?:)|a{3}|a{2,}|a{2,5}|x?|.|\.|\/|\-|é[é-ü]\x{1F600}\xFF",
            r"[^\x{0}-\x{10FFFF}]|a||",
            "",
        ];
        for text in taken {
            assert!(agrees(text), "not taken fast: {text}");
        }
        let left = [
            r"\d+",
            r"^a$",
            r"a+?",
            r"(?i)a",
            r"[[:alpha:]]",
            r"\pL",
            r"\bx",
            r"a**",
            r"a{3,2}",
            r"(?<n>a)",
            r"[z-a]",
            r"(a",
            r"a)",
            r"[a",
            r"\x{D800}",
            r"\<",
        ];
        for text in left {
            assert!(!agrees(text), "taken fast: {text}");
        }
    }

    #[test]
    fn deep_texts_and_errors_are_regex_syntaxs() {
        let deep = format!("{}a{}", "(?:".repeat(300), ")".repeat(300));
        assert!(parse(&deep, 256).is_err());
        let shallow = format!("{}a{}", "(?:".repeat(20), ")".repeat(20));
        assert!(agrees(&shallow));
        assert!(parse("a{3,2}", 256).is_err());
        assert!(parse("[z-a]", 256).is_err());
    }

    /// Random texts of the dialect's pieces (well-formed or not): whatever
    /// the fast reading takes, regex-syntax reads the same way.
    #[test]
    fn random_texts_agree() {
        use tokensieve_core::testing::SplitMix64;
        let atoms = [
            "a",
            "é",
            "\\x41",
            "\\x{1F600}",
            "\\.",
            "\\-",
            "\\\\",
            ".",
            "[a-c]",
            "[^a]",
            "[[a-z]--[aeiou]]",
            "[a&&b]",
            "[]]",
            "[-]",
            "(",
            ")",
            "(?:",
            "|",
            "*",
            "+",
            "?",
            "{2}",
            "{1,3}",
            "{2,}",
            "{",
            "}",
            "]",
            "[",
            "\\n",
            "\\d",
            "^",
            "$",
            "-",
            "&&",
            "~~",
            "\\x{110000}",
            "[\\x00-\\x1F]",
            "\"",
        ];
        let mut rng = SplitMix64(7);
        let mut taken = 0;
        for _ in 0..20_000 {
            let n = 1 + rng.below(12);
            let text: String = (0..n).map(|_| atoms[rng.below(atoms.len())]).collect();
            if agrees(&text) {
                taken += 1;
            }
        }
        assert!(taken > 1_000, "only {taken} random texts taken fast");
    }

    /// Classes met again are copied from the memo (one memo for all the
    /// texts, as a split keeps it), and every text still reads as
    /// regex-syntax reads it: random texts of class pieces (a `]` first,
    /// escaped brackets, nested classes, operators, broken classes), and
    /// classes nested up to the budget and past it.
    #[test]
    fn classes_met_again_read_as_regex_syntax_reads_them() {
        use tokensieve_core::testing::SplitMix64;
        let pieces = [
            "[", "]", "^", "a", "-", "z", "\\]", "\\[", "\\x{5D}", "\\x5B", "&&", "--", "~~", "[:",
            "é", "\\\\", "\\-", "(", ")", "*", "{2}", "\\",
        ];
        let mut rng = SplitMix64(11);
        let texts: Vec<String> = (0..20_000)
            .map(|_| {
                let n = 2 + rng.below(10);
                let body: String = (0..n).map(|_| pieces[rng.below(pieces.len())]).collect();
                // A class (often well formed) twice, so the second meets the first.
                let class = format!("[{body}]");
                format!("{class}x{class}")
            })
            .collect();
        let mut memo = Memo::default();
        let mut fast_texts = 0;
        for text in &texts {
            let read = parse_with(text, 256, &mut memo);
            assert_eq!(read.as_ref().ok(), slow(text).as_ref().ok(), "{text}");
            assert_eq!(read.is_err(), slow(text).is_err(), "{text}");
            fast_texts += usize::from(fast(text, 256, &mut Memo::default()).is_some());
        }
        assert!(
            fast_texts > 1_000,
            "only {fast_texts} random texts read fast"
        );
        assert!(
            memo.classes.len() > 100,
            "the memo kept {} classes",
            memo.classes.len()
        );
        // Nested classes met again near the budget (a quarter of the nest
        // limit): taken from the memo only where reading them again would
        // stay within it.
        let nested = |levels: usize| format!("{}a{}", "[".repeat(levels), "]".repeat(levels));
        let cases: Vec<(u32, String)> = [16u32, 24, 32]
            .into_iter()
            .flat_map(|limit| (1..=limit as usize / 4 + 2).map(move |levels| (limit, levels)))
            .flat_map(|(limit, levels)| {
                (0..3).map(move |wrap| {
                    let (open, close) = ("(?:".repeat(wrap), ")".repeat(wrap));
                    (limit, format!("{open}{}{close}", nested(levels)))
                })
            })
            .collect();
        // A class read under a generous limit, met again under one its
        // nesting passes: read again (and refused), not copied.
        let deep = nested(10);
        let cases: Vec<(u32, String)> = [(256, deep.clone()), (8, deep)]
            .into_iter()
            .chain(cases)
            .collect();
        let mut memo = Memo::default();
        for (limit, text) in &cases {
            let read = parse_with(text, *limit, &mut memo);
            let slow = slow_under(text, *limit);
            assert_eq!(read.is_err(), slow.is_err(), "{text} under {limit}");
            if let Ok(hir) = read {
                assert_eq!(Ok(hir), slow, "{text} under {limit}");
            }
        }
        // The guess of a class's end, on classes as the lowering writes them.
        for class in [
            r"[a-z]",
            r"[]a]",
            r"[^]a]",
            r"[\]\[]",
            r"[\x{5D}-\x{10FFFF}]",
            r"[[a-z]--[aeiou]]",
            r"[é-ë]",
        ] {
            assert_eq!(class_end(class, 1), Some(class.len()), "{class}");
        }
        assert_eq!(class_end("[a-z", 1), None);
    }

    /// Groups met again are copied from the memo, across texts too, and
    /// every text still reads as regex-syntax reads it: a group holding a
    /// capture (numbered by its place), one that would nest past the
    /// budget where it is met again, and texts that start like a kept
    /// group but go on otherwise.
    #[test]
    fn groups_met_again_read_as_regex_syntax_reads_them() {
        let member = r#"(?:[ \t\n\r]{0,20},[ \t\n\r]{0,20}"metadata"[ \t\n\r]{0,20}:[ \t\n\r]{0,20}(?:true|false|null))"#;
        assert!(member.len() >= MEMO_GROUP_LEN);
        let longer = member.replace("null)", "null|0)");
        let captured = format!("(?:(a){})", &member[3..]);
        let deep = |levels: usize, inner: &str| {
            format!("{}{inner}{}", "(?:".repeat(levels), ")".repeat(levels))
        };
        let texts = [
            format!("x{member}y{member}?z{member}{member}*"),
            format!("{member}|{longer}|{member}{longer}|{longer}{longer}*"),
            captured.repeat(MEMO_KEEP_AT as usize + 1),
            deep(58, member),
            deep(63, member),
            deep(70, member),
            format!("{member}{member}"),
        ];
        let deeper: Vec<(u32, String)> = (4..=48)
            .flat_map(|limit| (0..=limit / 4 + 1).map(move |levels| (limit, levels)))
            .map(|(limit, levels)| (limit, deep(levels as usize, member)))
            .collect();
        let mut memo = Memo::default();
        let mut hits = 0;
        for text in &texts {
            let kept: usize = memo
                .groups
                .values()
                .flatten()
                .filter(|g| g.tree.is_some())
                .count();
            let read = parse_with(text, 256, &mut memo);
            assert_eq!(read.as_ref().ok(), slow(text).as_ref().ok(), "{text}");
            assert_eq!(read.is_err(), slow(text).is_err(), "{text}");
            hits += usize::from(kept > 0);
        }
        assert!(hits >= 5, "the memo kept no group");
        // The groups read [`MEMO_KEEP_AT`] times are kept, by the text they
        // were read from.
        let kept: Vec<&str> = memo
            .groups
            .values()
            .flatten()
            .filter(|g| g.tree.is_some())
            .map(|g| g.text)
            .collect();
        assert!(
            kept.contains(&member) && kept.contains(&longer.as_str()),
            "{kept:?}"
        );
        assert!(
            !kept.contains(&captured.as_str()),
            "a group with a capture was kept"
        );
        // Met again deeper, under every nest limit: kept only where reading
        // it would stay within the budget (past it, regex-syntax reads it,
        // or refuses it as too deep).
        for (limit, text) in &deeper {
            let slow = slow_under(text, *limit);
            let read = parse_with(text, *limit, &mut memo);
            assert_eq!(read.ok(), slow.ok(), "{text} under nest limit {limit}");
        }
        assert!(memo.kept <= memo.read);
    }

    /// Nested groups met again keep their trees only up to the bytes read:
    /// memory in proportion to the input, and the same reading past it.
    #[test]
    fn a_memo_keeps_no_more_than_it_read() {
        let member = r#"(?:[ \t\n\r]{0,20},[ \t\n\r]{0,20}"metadata"[ \t\n\r]{0,20}:[ \t\n\r]{0,20}(?:true|false|null))"#;
        let nested = format!("{}{member}{}", "(?:a".repeat(40), ")".repeat(40));
        let text = nested.repeat(MEMO_KEEP_AT as usize + 1);
        let mut memo = Memo::default();
        let read = parse_with(&text, 1024, &mut memo).expect("a regex");
        assert_eq!(Ok(read), slow(&text));
        let unbounded: usize = (0..=40).map(|k| nested.len() - 2 * k).sum();
        assert!(unbounded > text.len(), "the test needs the cap to bite");
        assert!(
            memo.kept > 0 && memo.kept <= memo.read,
            "{} of {}",
            memo.kept,
            memo.read
        );
    }
}
