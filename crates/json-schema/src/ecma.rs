//! ECMA-262 `pattern` -> `regex-syntax` translation.
//!
//! JSON Schema patterns are ECMA-262 regexes with *search* semantics (the
//! string must contain a match unless `^`/`$` anchor it). Validators in the
//! wild use their host's engine instead (Python's `re` most often), so every
//! construct whose meaning differs between the two is translated to what both
//! accept (`\d` is `[0-9]`; `\D` excludes every Unicode decimal digit; `\s`
//! is the whitespace both agree on), or rejected (`\A`, `\Z`, possessive
//! quantifiers, inline flags). Look-around and back-references are not
//! regular and are rejected; so is a word boundary `\b` (a DFA walked byte by
//! byte cannot look one byte ahead).
//!
//! For string *values* the characters are restricted to the
//! [`Universe::JsonUnescaped`] set (no `"`, `\` or control characters), so a
//! match never needs a JSON escape: the regex over the JSON text is then the
//! pattern over the decoded string, a subset of the valid strings.

use super::rx::{self, Lang};

/// Which characters a translated pattern may match.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Universe {
    /// Characters that appear in a JSON string without an escape.
    JsonUnescaped,
    /// Any Unicode scalar value (for matching property names at compile time).
    Any,
}

/// The regex-syntax class of characters a JSON string holds unescaped.
pub(crate) const UNESCAPED_CLASS: &str = r#"[^"\\\x00-\x1F]"#;

impl Universe {
    fn restrict(self, class_body: &str) -> String {
        match self {
            // The body gets its own brackets: in `[^a&&b]` the `^` would
            // negate the intersection.
            Universe::JsonUnescaped => format!(r#"[[{class_body}]&&[^"\\\x00-\x1F]]"#),
            Universe::Any => format!("[{class_body}]"),
        }
    }

    fn allows(self, c: char) -> bool {
        match self {
            Universe::JsonUnescaped => !(c == '"' || c == '\\' || (c as u32) < 0x20),
            Universe::Any => true,
        }
    }

    fn any_char(self) -> Lang {
        match self {
            Universe::JsonUnescaped => Lang::atom(UNESCAPED_CLASS, 1),
            Universe::Any => Lang::atom(r"[\x{0}-\x{10FFFF}]", 1),
        }
    }
}

/// A parsed pattern.
#[derive(Clone, Debug, PartialEq)]
enum Node {
    Empty,
    /// A literal character.
    Char(char),
    /// A character class: the body of a regex-syntax bracket class (a union
    /// of items), not yet restricted to the universe.
    Class(String),
    Start,
    End,
    Concat(Vec<Node>),
    Alt(Vec<Node>),
    Repeat(Box<Node>, u32, Option<u32>),
}

impl Node {
    /// (min, max) length in characters; `None` = unbounded.
    fn char_len(&self) -> (u64, Option<u64>) {
        match self {
            Node::Empty | Node::Start | Node::End => (0, Some(0)),
            Node::Char(_) | Node::Class(_) => (1, Some(1)),
            Node::Concat(items) => items.iter().fold((0, Some(0)), |(lo, hi), n| {
                let (a, b) = n.char_len();
                (lo + a, hi.zip(b).map(|(x, y)| x + y))
            }),
            Node::Alt(items) => {
                let mut lo = u64::MAX;
                let mut hi = Some(0);
                for n in items {
                    let (a, b) = n.char_len();
                    lo = lo.min(a);
                    hi = hi.zip(b).map(|(x, y)| x.max(y));
                }
                (if items.is_empty() { 0 } else { lo }, hi)
            }
            Node::Repeat(inner, min, max) => {
                let (a, b) = inner.char_len();
                let hi = match (b, max) {
                    (Some(0), _) => Some(0),
                    (Some(b), Some(m)) => Some(b * u64::from(*m)),
                    _ => None,
                };
                (a * u64::from(*min), hi)
            }
        }
    }

    fn has_anchor(&self) -> bool {
        match self {
            Node::Start | Node::End => true,
            Node::Concat(items) | Node::Alt(items) => items.iter().any(Node::has_anchor),
            Node::Repeat(inner, ..) => inner.has_anchor(),
            _ => false,
        }
    }

    fn max_repeat(&self) -> u32 {
        match self {
            Node::Concat(items) | Node::Alt(items) => {
                items.iter().map(Node::max_repeat).max().unwrap_or(0)
            }
            Node::Repeat(inner, min, max) => (*min).max(max.unwrap_or(0)).max(inner.max_repeat()),
            _ => 0,
        }
    }

    fn lower(&self, universe: Universe) -> Lang {
        match self {
            Node::Empty => Lang::empty(),
            Node::Char(c) => {
                if universe.allows(*c) {
                    Lang::lit(&c.to_string())
                } else {
                    Lang::Never
                }
            }
            Node::Class(body) => Lang::atom(universe.restrict(body), 3),
            Node::Start | Node::End => unreachable!("anchors are removed before lowering"),
            Node::Concat(items) => rx::seq(items.iter().map(|n| n.lower(universe))),
            Node::Alt(items) => rx::alt(items.iter().map(|n| n.lower(universe))),
            Node::Repeat(inner, min, max) => rx::repeat(inner.lower(universe), *min, *max),
        }
    }
}

/// One top-level alternative of a pattern with its anchors taken off.
#[derive(Clone, Debug)]
struct Branch {
    start: bool,
    end: bool,
    items: Vec<Node>,
}

/// A pattern ready to be lowered with search semantics.
#[derive(Clone, Debug)]
pub(crate) struct SearchPattern {
    branches: Vec<Branch>,
    max_repeat: u32,
    /// Whether the translation means exactly what ECMA-262 means (see
    /// [`SearchPattern::is_exact`]).
    exact: bool,
}

impl SearchPattern {
    pub fn parse(pattern: &str) -> Result<SearchPattern, String> {
        let mut parser = Parser::new(pattern);
        let node = parser.parse()?;
        let exact = parser.exact;
        let max_repeat = node.max_repeat();
        let alternatives = match node {
            Node::Alt(items) => items,
            other => vec![other],
        };
        let mut branches = Vec::new();
        for alternative in alternatives {
            let mut items = Vec::new();
            flatten(alternative, &mut items);
            let mut start = false;
            while items.first() == Some(&Node::Start) {
                items.remove(0);
                start = true;
            }
            let mut end = false;
            while items.last() == Some(&Node::End) {
                items.pop();
                end = true;
            }
            if items.iter().any(Node::has_anchor) {
                return Err(
                    "an anchor (`^`/`$`) that is not at the start or end of an alternative".into(),
                );
            }
            branches.push(Branch { start, end, items });
        }
        Ok(SearchPattern {
            branches,
            max_repeat,
            exact,
        })
    }

    /// Whether a string [`SearchPattern::search_regex`] finds no match in
    /// has none in ECMA-262 nor in Python's `re` either, for strings of
    /// Basic Multilingual Plane characters without line terminators (where
    /// `.` and `$` differ between the two). Not so with a class escape
    /// (`\d`, `\w`, `\s` and their negations are ASCII in one, Unicode in
    /// the other; the translation takes what both accept), `\p{..}` (no
    /// such thing in `re`) or `\u{..}` (plain letters to ECMA-262 without
    /// the `u` flag). A check that must say "no match" needs it exact; a
    /// match means a match in both either way.
    pub fn is_exact(&self) -> bool {
        self.exact
    }

    /// The largest counted repetition bound in the pattern.
    pub fn max_repeat(&self) -> u32 {
        self.max_repeat
    }

    /// The language of strings (over `universe`) that contain a match, with
    /// a length in characters within `min_len..=max_len`. Errors when the
    /// length bounds cannot be combined with the pattern exactly.
    pub fn lower(
        &self,
        universe: Universe,
        min_len: u64,
        max_len: Option<u64>,
    ) -> Result<Lang, String> {
        let mut alternatives = Vec::new();
        for branch in &self.branches {
            let mut items = Vec::new();
            if !branch.start {
                items.push(Node::Repeat(Box::new(Node::Class(String::new())), 0, None));
            }
            items.extend(branch.items.iter().cloned());
            if !branch.end {
                items.push(Node::Repeat(Box::new(Node::Class(String::new())), 0, None));
            }
            alternatives.push(lower_items_with_length(&items, universe, min_len, max_len)?);
        }
        Ok(rx::alt(alternatives))
    }

    /// A literal that every matching string starts with: the common start
    /// of the alternatives' leading literal characters when every
    /// alternative is anchored at `^` (empty otherwise).
    pub fn literal_prefix(&self) -> String {
        let mut common: Option<Vec<char>> = None;
        for branch in &self.branches {
            if !branch.start {
                return String::new();
            }
            let own: Vec<char> = branch
                .items
                .iter()
                .map_while(|n| match n {
                    Node::Char(c) => Some(*c),
                    _ => None,
                })
                .collect();
            common = Some(match common {
                None => own,
                Some(old) => old
                    .into_iter()
                    .zip(own)
                    .take_while(|(a, b)| a == b)
                    .map(|(a, _)| a)
                    .collect(),
            });
        }
        common.unwrap_or_default().into_iter().collect()
    }

    /// Whether `name` contains a match (used for `patternProperties`).
    pub fn search_regex(&self) -> String {
        let alternatives = self.branches.iter().map(|b| {
            let body = rx::seq(b.items.iter().map(|n| n.lower(Universe::Any)));
            let body = body
                .text()
                .map(|t| format!("(?:{t})"))
                .unwrap_or_else(|| "[a&&b]".into());
            format!(
                "{}{}{}",
                if b.start { r"\A" } else { "" },
                body,
                if b.end { r"\z" } else { "" }
            )
        });
        alternatives.collect::<Vec<_>>().join("|")
    }
}

/// `Node::Class("")` inside the wrappers stands for "any character of the
/// universe"; it is lowered here rather than as an empty class.
fn lower_item(node: &Node, universe: Universe) -> Lang {
    match node {
        Node::Repeat(inner, 0, None) if **inner == Node::Class(String::new()) => {
            rx::repeat(universe.any_char(), 0, None)
        }
        Node::Repeat(inner, min, max) if **inner == Node::Class(String::new()) => {
            rx::repeat(universe.any_char(), *min, *max)
        }
        other => other.lower(universe),
    }
}

fn lower_items_with_length(
    items: &[Node],
    universe: Universe,
    min_len: u64,
    max_len: Option<u64>,
) -> Result<Lang, String> {
    let whole = Node::Concat(items.to_vec());
    let (lo, hi) = whole.char_len();
    let within = lo >= min_len
        && match (hi, max_len) {
            (_, None) => true,
            (Some(h), Some(m)) => h <= m,
            (None, Some(_)) => false,
        };
    if within {
        return Ok(rx::seq(items.iter().map(|n| lower_item(n, universe))));
    }
    if hi.is_some_and(|h| h < min_len) || max_len.is_some_and(|m| lo > m) {
        return Ok(Lang::Never);
    }
    // Exactly one variable-length item that repeats a single character:
    // its bounds absorb the length limits.
    let variable: Vec<usize> = items
        .iter()
        .enumerate()
        .filter(|(_, n)| {
            let (a, b) = n.char_len();
            Some(a) != b
        })
        .map(|(i, _)| i)
        .collect();
    if let [index] = variable[..]
        && let Node::Repeat(inner, min, max) = &items[index]
        && inner.char_len() == (1, Some(1))
    {
        let fixed: u64 = items
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != index)
            .map(|(_, n)| n.char_len().0)
            .sum();
        let new_min = u64::from(*min).max(min_len.saturating_sub(fixed));
        let new_max = match (max, max_len) {
            (Some(a), Some(b)) => Some(u64::from(*a).min(b.saturating_sub(fixed))),
            (Some(a), None) => Some(u64::from(*a)),
            (None, Some(b)) => Some(b.saturating_sub(fixed)),
            (None, None) => None,
        };
        if new_max.is_some_and(|m| m < new_min) {
            return Ok(Lang::Never);
        }
        let to_u32 =
            |v: u64| u32::try_from(v).map_err(|_| "a length bound beyond 2^32".to_string());
        let mut adjusted = items.to_vec();
        adjusted[index] = Node::Repeat(
            inner.clone(),
            to_u32(new_min)?,
            new_max.map(to_u32).transpose()?,
        );
        return Ok(rx::seq(adjusted.iter().map(|n| lower_item(n, universe))));
    }
    Err("a pattern with several variable-length parts combined with minLength/maxLength".into())
}

fn flatten(node: Node, out: &mut Vec<Node>) {
    match node {
        Node::Concat(items) => {
            for item in items {
                flatten(item, out);
            }
        }
        Node::Empty => {}
        other => out.push(other),
    }
}

/// Recursive-descent parser for the ECMA-262 pattern grammar (with the
/// Annex B leniencies both ECMA engines and Python accept).
struct Parser {
    chars: Vec<char>,
    pos: usize,
    depth: usize,
    /// No construct read so far means something else in ECMA-262.
    exact: bool,
}

const MAX_GROUP_DEPTH: usize = 64;

impl Parser {
    fn new(pattern: &str) -> Parser {
        Parser {
            chars: pattern.chars().collect(),
            pos: 0,
            depth: 0,
            exact: true,
        }
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn peek_at(&self, k: usize) -> Option<char> {
        self.chars.get(self.pos + k).copied()
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn looking_at(&self, s: &str) -> bool {
        s.chars()
            .enumerate()
            .all(|(i, c)| self.peek_at(i) == Some(c))
    }

    fn parse(&mut self) -> Result<Node, String> {
        let node = self.alternation()?;
        if self.pos < self.chars.len() {
            return Err(format!("unbalanced `)` at character {}", self.pos));
        }
        Ok(node)
    }

    fn alternation(&mut self) -> Result<Node, String> {
        let mut branches = vec![self.concatenation()?];
        while self.eat('|') {
            branches.push(self.concatenation()?);
        }
        Ok(if branches.len() == 1 {
            branches.pop().expect("one branch")
        } else {
            Node::Alt(branches)
        })
    }

    fn concatenation(&mut self) -> Result<Node, String> {
        let mut items = Vec::new();
        while let Some(c) = self.peek() {
            if c == '|' || c == ')' {
                break;
            }
            let atom = self.term()?;
            let atom = self.quantified(atom)?;
            items.push(atom);
        }
        Ok(match items.len() {
            0 => Node::Empty,
            1 => items.pop().expect("one item"),
            _ => Node::Concat(items),
        })
    }

    fn quantified(&mut self, atom: Node) -> Result<Node, String> {
        let (min, max) = match self.peek() {
            Some('*') => {
                self.pos += 1;
                (0, None)
            }
            Some('+') => {
                self.pos += 1;
                (1, None)
            }
            Some('?') => {
                self.pos += 1;
                (0, Some(1))
            }
            Some('{') => match self.counted()? {
                Some(bounds) => bounds,
                None => return Ok(atom),
            },
            _ => return Ok(atom),
        };
        if matches!(atom, Node::Start | Node::End) {
            return Err("a quantifier on an anchor".into());
        }
        // Lazy quantifiers match the same language.
        self.eat('?');
        if matches!(self.peek(), Some('+')) {
            return Err("possessive quantifier".into());
        }
        if matches!(self.peek(), Some('*' | '?'))
            || (self.peek() == Some('{') && self.is_counted_here())
        {
            return Err("nothing to repeat (a quantifier after a quantifier)".into());
        }
        Ok(Node::Repeat(Box::new(atom), min, max))
    }

    fn is_counted_here(&self) -> bool {
        let mut probe = Parser {
            chars: self.chars.clone(),
            pos: self.pos,
            depth: 0,
            exact: true,
        };
        matches!(probe.counted(), Ok(Some(_)))
    }

    /// `{n}`, `{n,}`, `{n,m}`; `None` (and nothing consumed) when the brace
    /// does not start a quantifier (then it is a literal, as in Annex B).
    fn counted(&mut self) -> Result<Option<(u32, Option<u32>)>, String> {
        let save = self.pos;
        self.pos += 1;
        let Some(min) = self.number() else {
            self.pos = save;
            return Ok(None);
        };
        let max = if self.eat(',') {
            if self.peek() == Some('}') {
                None
            } else {
                match self.number() {
                    Some(m) => Some(m),
                    None => {
                        self.pos = save;
                        return Ok(None);
                    }
                }
            }
        } else {
            Some(min)
        };
        if !self.eat('}') {
            self.pos = save;
            return Ok(None);
        }
        let min = u32::try_from(min).map_err(|_| "a repetition count beyond 2^32".to_string())?;
        let max = max
            .map(|m| u32::try_from(m).map_err(|_| "a repetition count beyond 2^32".to_string()))
            .transpose()?;
        if max.is_some_and(|m| m < min) {
            return Err("numbers out of order in a `{}` quantifier".into());
        }
        Ok(Some((min, max)))
    }

    fn number(&mut self) -> Option<u64> {
        let start = self.pos;
        let mut value: u64 = 0;
        while let Some(d) = self.peek().and_then(|c| c.to_digit(10)) {
            value = value.saturating_mul(10).saturating_add(u64::from(d));
            self.pos += 1;
        }
        (self.pos > start).then_some(value)
    }

    fn term(&mut self) -> Result<Node, String> {
        let c = self.peek().expect("caller checked");
        match c {
            '^' => {
                self.pos += 1;
                Ok(Node::Start)
            }
            '$' => {
                self.pos += 1;
                Ok(Node::End)
            }
            '.' => {
                self.pos += 1;
                Ok(Node::Class(r"^\n\r\x{2028}\x{2029}".into()))
            }
            '(' => self.group(),
            '[' => self.class(),
            '\\' => self.escape(),
            '*' | '+' | '?' => Err(format!("nothing to repeat before `{c}`")),
            '{' => {
                if self.is_counted_here() {
                    Err("nothing to repeat before `{`".into())
                } else {
                    self.pos += 1;
                    Ok(Node::Char('{'))
                }
            }
            _ => {
                self.pos += 1;
                Ok(Node::Char(c))
            }
        }
    }

    fn group(&mut self) -> Result<Node, String> {
        self.pos += 1;
        if self.eat('?') {
            if self.eat(':') {
            } else if self.looking_at("=") || self.looking_at("!") {
                return Err("look-ahead".into());
            } else if self.looking_at("<=") || self.looking_at("<!") {
                return Err("look-behind".into());
            } else if self.eat('<')
                || (self.looking_at("P<") && {
                    self.pos += 2;
                    true
                })
            {
                while let Some(c) = self.peek() {
                    self.pos += 1;
                    if c == '>' {
                        break;
                    }
                    if !(c.is_alphanumeric() || c == '_' || c == '$') {
                        return Err("a malformed group name".into());
                    }
                }
            } else if self.looking_at("P=") {
                return Err("back-reference".into());
            } else {
                return Err("inline flags or an unknown group kind `(?`".into());
            }
        }
        self.depth += 1;
        if self.depth > MAX_GROUP_DEPTH {
            return Err(format!("groups nested deeper than {MAX_GROUP_DEPTH}"));
        }
        let inner = self.alternation()?;
        self.depth -= 1;
        if !self.eat(')') {
            return Err("an unclosed `(`".into());
        }
        Ok(inner)
    }

    fn class(&mut self) -> Result<Node, String> {
        self.pos += 1;
        let negated = self.eat('^');
        if self.peek() == Some(']') {
            // `[]` is the empty class in ECMA-262, but `]` is a literal first
            // member in Python: the two readings differ.
            return Err("a class starting with `]` (`[]` / `[^]`) means different things in ECMA-262 and Python".into());
        }
        let mut body = String::new();
        if negated {
            body.push('^');
        }
        loop {
            let Some(c) = self.peek() else {
                return Err("an unclosed `[`".into());
            };
            if c == ']' {
                self.pos += 1;
                break;
            }
            let first = self.class_atom(negated)?;
            if self.peek() == Some('-') && self.peek_at(1).is_some_and(|c| c != ']') {
                self.pos += 1;
                let second = self.class_atom(negated)?;
                match (first, second) {
                    (ClassAtom::Char(a), ClassAtom::Char(b)) => {
                        if a > b {
                            return Err("a character class range out of order".into());
                        }
                        body.push_str(&format!("{}-{}", class_char(a), class_char(b)));
                    }
                    _ => return Err("a character class range with a class escape as an end".into()),
                }
            } else {
                match first {
                    ClassAtom::Char(a) => body.push_str(&class_char(a)),
                    ClassAtom::Set(s) => body.push_str(&s),
                }
            }
        }
        if body.is_empty() || body == "^" {
            return Err("an empty character class".into());
        }
        Ok(Node::Class(body))
    }

    /// One member of a class. `in_negated`: the class is negated, so class
    /// escapes take their *wide* reading (see [`class_escape`]).
    fn class_atom(&mut self, in_negated: bool) -> Result<ClassAtom, String> {
        let c = self.peek().expect("caller checked");
        self.pos += 1;
        if c != '\\' {
            if c == '[' && self.peek() == Some(':') {
                return Err("POSIX class syntax `[:...:]`".into());
            }
            return Ok(ClassAtom::Char(c));
        }
        let Some(e) = self.peek() else {
            return Err("a trailing `\\`".into());
        };
        self.pos += 1;
        if let Some(set) = class_escape(e, !in_negated) {
            self.exact = false;
            return Ok(ClassAtom::Set(set));
        }
        match e {
            'b' => Ok(ClassAtom::Char('\u{8}')),
            'p' | 'P' => Ok(ClassAtom::Set(self.unicode_property(e)?)),
            _ => self.char_escape(e).map(ClassAtom::Char),
        }
    }

    fn escape(&mut self) -> Result<Node, String> {
        self.pos += 1;
        let Some(e) = self.peek() else {
            return Err("a trailing `\\`".into());
        };
        self.pos += 1;
        if let Some(set) = class_escape(e, true) {
            self.exact = false;
            return Ok(Node::Class(set));
        }
        match e {
            'b' | 'B' => Err(format!("word boundary `\\{e}`")),
            '1'..='9' => Err("back-reference".into()),
            'k' if self.peek() == Some('<') => Err("back-reference".into()),
            'p' | 'P' => Ok(Node::Class(self.unicode_property(e)?)),
            _ => self.char_escape(e).map(Node::Char),
        }
    }

    fn unicode_property(&mut self, e: char) -> Result<String, String> {
        self.exact = false;
        if !self.eat('{') {
            return Err(format!("`\\{e}` without `{{...}}`"));
        }
        let mut name = String::new();
        loop {
            match self.peek() {
                None => return Err("an unclosed `\\p{`".into()),
                Some('}') => {
                    self.pos += 1;
                    break;
                }
                Some(c) if c.is_ascii_alphanumeric() || c == '_' || c == '=' => {
                    name.push(c);
                    self.pos += 1;
                }
                Some(_) => return Err("a malformed Unicode property name".into()),
            }
        }
        let text = format!("\\{e}{{{name}}}");
        regex_syntax::Parser::new()
            .parse(&text)
            .map_err(|_| format!("unknown Unicode property `{name}`"))?;
        Ok(text)
    }

    /// A character escape (after the backslash).
    fn char_escape(&mut self, e: char) -> Result<char, String> {
        Ok(match e {
            't' => '\t',
            'n' => '\n',
            'r' => '\r',
            'f' => '\u{c}',
            'v' => '\u{b}',
            '0' => {
                if self.peek().is_some_and(|c| c.is_ascii_digit()) {
                    return Err("an octal escape".into());
                }
                '\0'
            }
            'c' => match self.peek() {
                Some(l) if l.is_ascii_alphabetic() => {
                    self.pos += 1;
                    char::from((l as u8) % 32)
                }
                _ => return Err("a malformed `\\c` escape".into()),
            },
            'x' => {
                let v = self.hex_digits(2).ok_or("a malformed `\\x` escape")?;
                char::from_u32(v).expect("two hex digits")
            }
            'u' => {
                let v = if self.eat('{') {
                    self.exact = false;
                    let mut v: u32 = 0;
                    let mut n = 0;
                    while let Some(d) = self.peek().and_then(|c| c.to_digit(16)) {
                        v = v.saturating_mul(16).saturating_add(d);
                        n += 1;
                        self.pos += 1;
                    }
                    if n == 0 || !self.eat('}') {
                        return Err("a malformed `\\u{...}` escape".into());
                    }
                    v
                } else {
                    let hi = self.hex_digits(4).ok_or("a malformed `\\u` escape")?;
                    if (0xD800..0xDC00).contains(&hi) && self.looking_at("\\u") {
                        let save = self.pos;
                        self.pos += 2;
                        match self.hex_digits(4) {
                            Some(lo) if (0xDC00..0xE000).contains(&lo) => {
                                0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                            }
                            _ => {
                                self.pos = save;
                                hi
                            }
                        }
                    } else {
                        hi
                    }
                };
                char::from_u32(v)
                    .ok_or("an escape of a lone surrogate or a value beyond U+10FFFF")?
            }
            c if c.is_ascii_alphanumeric() => {
                // Identity escapes of letters mean different things in
                // different engines (`\A` is `A` in ECMA-262, an anchor in Python).
                return Err(format!("the escape `\\{c}`"));
            }
            c => c,
        })
    }

    fn hex_digits(&mut self, n: usize) -> Option<u32> {
        let mut v = 0;
        for k in 0..n {
            v = v * 16 + self.peek_at(k)?.to_digit(16)?;
        }
        self.pos += n;
        Some(v)
    }
}

enum ClassAtom {
    Char(char),
    /// A nested class (as regex-syntax text) for a class escape.
    Set(String),
}

/// `\d \D \w \W \s \S` as a nested regex-syntax class. `narrow`: the reading
/// every engine agrees matches (the intersection of ECMA-262 and Python);
/// otherwise the *wide* reading (the union), used inside negated classes so
/// that the negation is narrow again.
fn class_escape(e: char, narrow: bool) -> Option<String> {
    // ECMA-262 \s, without U+FEFF (not whitespace for Python).
    const SPACE_BOTH: &str =
        r"\t\n\x0B\x0C\r\x20\xA0\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}";
    // Python's \s (Unicode White_Space plus \x1C-\x1F) plus ECMA's U+FEFF.
    const SPACE_EITHER: &str = r"\s\x1C-\x1F\x{FEFF}";
    Some(match (e, narrow) {
        ('d', true) => "[0-9]".into(),
        ('d', false) => r"[0-9\p{Nd}]".into(),
        ('D', true) => r"[^0-9\p{Nd}]".into(),
        ('D', false) => "[^0-9]".into(),
        ('w', true) => "[0-9A-Za-z_]".into(),
        ('w', false) => r"[0-9A-Za-z_\w\p{L}\p{N}]".into(),
        ('W', true) => r"[^0-9A-Za-z_\w\p{L}\p{N}]".into(),
        ('W', false) => "[^0-9A-Za-z_]".into(),
        ('s', true) => format!("[{SPACE_BOTH}]"),
        ('s', false) => format!("[{SPACE_EITHER}]"),
        ('S', true) => format!("[^{SPACE_EITHER}]"),
        ('S', false) => format!("[^{SPACE_BOTH}]"),
        _ => return None,
    })
}

/// A character as a class member, escaped so no class syntax can misread it.
fn class_char(c: char) -> String {
    format!("\\x{{{:X}}}", c as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use regex_automata::meta::Regex;

    /// Whole-string matcher for a pattern under JSON string-content rules.
    fn content(pattern: &str, min: u64, max: Option<u64>) -> Regex {
        let sp = SearchPattern::parse(pattern).unwrap();
        let lang = sp.lower(Universe::JsonUnescaped, min, max).unwrap();
        let text = lang.text().unwrap_or("[a&&b]");
        Regex::new(&format!("^(?:{text})$")).unwrap()
    }

    #[test]
    fn search_semantics_and_anchors() {
        let r = content("abc", 0, None);
        assert!(r.is_match("xxabcxx"));
        assert!(!r.is_match("ab"));
        let r = content("^abc$", 0, None);
        assert!(r.is_match("abc"));
        assert!(!r.is_match("abcd"));
        let r = content("^a|b$", 0, None);
        assert!(r.is_match("axx"));
        assert!(r.is_match("xxb"));
        assert!(!r.is_match("xax"));
    }

    #[test]
    fn class_escapes_are_ascii_and_agree_with_python() {
        let r = content(r"^\d+$", 0, None);
        assert!(r.is_match("0123"));
        assert!(!r.is_match("١٢")); // Arabic-Indic digits: \d in Python only
        let r = content(r"^\D+$", 0, None);
        assert!(r.is_match("ab"));
        assert!(!r.is_match("١")); // not \D in Python
        let r = content(r"^[^\d]+$", 0, None);
        assert!(!r.is_match("١"));
        let r = content(r"^\w+$", 0, None);
        assert!(r.is_match("a_Z9"));
        assert!(!r.is_match("é"));
        let r = content(r"^\S+$", 0, None);
        assert!(!r.is_match("a b"));
        assert!(!r.is_match("a\u{85}"));
    }

    #[test]
    fn values_never_need_escapes() {
        let r = content(r"^.+$", 0, None);
        assert!(r.is_match("abc"));
        assert!(!r.is_match("a\"b"));
        assert!(!r.is_match("a\\b"));
        let r = content("^[\"a]$", 0, None);
        assert!(r.is_match("a"));
        assert!(!r.is_match("\""));
    }

    #[test]
    fn unsupported_constructs_are_errors() {
        for p in [
            r"(?=a)", r"(?!a)", r"(?<=a)b", r"(a)\1", r"\bword", r"a*+", r"(?i)a", r"\Aa", "a^b",
            "[]",
        ] {
            assert!(SearchPattern::parse(p).is_err(), "{p} should be rejected");
        }
    }

    #[test]
    fn lengths_fold_into_a_single_repetition() {
        let r = content(r"^[a-z]+$", 2, Some(3));
        assert!(r.is_match("ab") && r.is_match("abc"));
        assert!(!r.is_match("a") && !r.is_match("abcd"));
        let r = content(r"^[a-z]", 0, Some(3));
        assert!(r.is_match("a--"));
        assert!(!r.is_match("a---"));
        let sp = SearchPattern::parse(r"^[a-z]+-[0-9]+$").unwrap();
        assert!(sp.lower(Universe::JsonUnescaped, 0, Some(5)).is_err());
        // Bounds the pattern already implies need no rewriting.
        let r = content(r"^[a-z]{2}$", 1, Some(5));
        assert!(r.is_match("ab"));
    }

    #[test]
    fn misc_syntax() {
        let r = content(r"^a{2,3}(?:bc|d)?\u00e9\x41[\]\-x]{1}\.$", 0, None);
        assert!(r.is_match("aabcéA-."));
        assert!(r.is_match("aaaéA]."));
        let r = content("^{a}$", 0, None);
        assert!(r.is_match("{a}"));
        let r = content(r"^(?<year>[0-9]{4})$", 0, None);
        assert!(r.is_match("2024"));
    }
}

#[cfg(test)]
mod negation_tests {
    use super::*;
    use regex_automata::meta::Regex;

    #[test]
    fn negated_class_stays_inside_the_universe() {
        let sp = SearchPattern::parse("^[^\u{0}]+$").unwrap();
        let lang = sp.lower(Universe::JsonUnescaped, 0, None).unwrap();
        let r = Regex::new(&format!("^(?:{})$", lang.text().unwrap())).unwrap();
        assert!(r.is_match("abc"));
        assert!(!r.is_match("a\\b"));
        assert!(!r.is_match("a\"b"));
        assert!(!r.is_match("a\u{1}b"));
    }
}
