//! The GBNF front end: llama.cpp's grammar syntax parsed and validated into a
//! [`Grammar`].
//!
//! # Syntax
//!
//! ```text
//! # a comment, to the end of the line
//! root   ::= greeting (", " name)* "!"
//! greeting ::= "hello" | "hi"
//! name   ::= [A-Z] [a-z]{1,15}
//! ```
//!
//! * A rule is `name ::= alternatives`; names are `[a-zA-Z0-9-]+`.
//! * Alternatives are separated by `|`; an alternative is a sequence of items,
//!   possibly empty (it then matches the empty string).
//! * Items: string literals `"…"`, character classes `[a-z0-9_]` and negated
//!   classes `[^"\\]`, `.` (any character), rule names, groups `( … )`.
//! * Any item can be followed by `*`, `+`, `?`, `{m}`, `{m,}` or `{m,n}`;
//!   an operator applies to the item just before it (a whole literal, a
//!   whole group), and operators stack (`x*?`).
//! * Escapes, in literals and classes alike: `\n \r \t \\ \" \[ \] \- \^`,
//!   `\xHH`, `\uHHHH`, `\UHHHHHHHH`. A hex escape names a *code point*
//!   (`\xFF` is `ÿ`, two UTF-8 bytes), not a raw byte: grammars are over
//!   Unicode scalar values, as in llama.cpp. Surrogates and values above
//!   `10FFFF` are errors.
//! * In a class, `a-z` is a range; a `-` first or last is itself, and a `]`
//!   must be escaped (`[]` is an error rather than an empty class).
//!
//! # Where a rule ends
//!
//! Whitespace, newlines and comments separate items anywhere. A rule ends
//! where the next `name ::=` begins (or at the end of the input), and that
//! next definition must start on a new line. Every grammar llama.cpp accepts
//! is read the same way here; this is slightly more lenient than llama.cpp,
//! which ends a rule at a newline outside parentheses unless the line ends
//! with `|` (so here a continuation line may also *start* with `|` or with
//! more items). One consequence shared with llama.cpp: `a ::=` followed by
//! a new definition defines `a` as the empty string.
//!
//! # Decisions where llama.cpp differs or is silent
//!
//! * A rule defined twice is an error naming both places (llama.cpp keeps
//!   the last definition silently).
//! * Literals and classes cannot span lines: a raw newline inside `"…"` or
//!   `[…]` reports the literal as unterminated at its opening quote, which
//!   is where the mistake usually is. Write `\n`.
//! * Left recursion is fine (llama.cpp rejects it; an Earley parser does not
//!   need to).
//! * Every defined rule, reachable from the root or not, must be well formed
//!   and able to finish (produce some finite string); unreachable rules are
//!   otherwise ignored. A missing root rule is an error with no location.
//! * Token references (`<think>`, `<[1234]>`, newer llama.cpp) are not
//!   supported.
//!
//! # Desugaring
//!
//! A group with several alternatives becomes a helper rule; a group with one
//! alternative is spliced in place. Repetitions become helper rules named
//! `parent_N`: `x*` is `R ::= "" | R x` and `x+` is `R ::= x | R x` (left
//! recursion keeps Earley item sets small), `x?` is `R ::= "" | x`,
//! `x{m,n}` is `m` copies of `x` followed by a chain of `n - m` nested
//! optionals (`O_k ::= "" | x O_(k-1)`), so its size is linear in `n`, and a
//! repetition of a multi-symbol item first turns the item into one helper
//! rule, so nested repetitions add up instead of multiplying. A loop
//! repeated is one loop (`(x*)*` and `(x+)*` are `x*`, `(x+)+` is `x+`).
//! Adjacent literals are merged.
//!
//! # Limits
//!
//! The parser is iterative (open groups live on a heap stack) and every
//! analysis is a linear worklist, so no input can overflow the call stack or
//! go quadratic. [`GbnfLimits`] bounds group nesting, repetition counts and
//! the total size of the desugared grammar, so none can allocate without
//! bound either; exceeding one is [`GrammarError::LimitExceeded`] naming the
//! knob and the place.

use std::collections::HashMap;

use tokensieve_core::{GrammarError, Location};

use crate::grammar::{CharClass, Grammar, Rule, RuleId, RuleOrigin, Symbol};

/// Resource limits of the GBNF front end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GbnfLimits {
    /// Deepest nesting of `( … )` groups. Costs a small heap frame per
    /// level (never call stack); deeper nesting is a mistake or an attack,
    /// not a grammar. Default: 128.
    pub max_nesting_depth: usize,
    /// Largest `m` or `n` in `{m}`, `{m,}`, `{m,n}`. `x{m,n}` costs about
    /// `2n` symbols and `n - m` helper rules. Default: 10_000 (llama.cpp
    /// stops at 2_000).
    pub max_repetition: u32,
    /// Largest desugared grammar, counted as one per alternative plus one
    /// per symbol (see [`Grammar::size`]), as helper rules are created. One
    /// unit is a few dozen bytes here and per-position work in the matcher.
    /// Default: 1_000_000.
    pub max_grammar_size: usize,
}

impl Default for GbnfLimits {
    fn default() -> Self {
        GbnfLimits {
            max_nesting_depth: 128,
            max_repetition: 10_000,
            max_grammar_size: 1_000_000,
        }
    }
}

/// Parses `text` (GBNF) with `root` as the start rule.
pub fn parse(
    text: &str,
    root: &str,
    limits: &GbnfLimits,
) -> std::result::Result<Grammar, GrammarError> {
    let mut parser = Parser {
        src: text,
        lines: Lines::new(text),
        bytes: text.as_bytes(),
        pos: 0,
        limits,
        rules: Vec::new(),
        def_offset: Vec::new(),
        first_use: Vec::new(),
        names: HashMap::new(),
        current: RuleId(0),
        helper_count: 0,
        last_token_end: 0,
        size: 0,
    };
    parser.parse_grammar()?;
    parser.finish(root)
}

/// Byte offsets to 1-based lines and columns (columns count characters).
/// Line starts are found once, so that recording where each of many rules
/// is defined stays linear in the grammar's length.
struct Lines<'a> {
    src: &'a str,
    starts: Vec<usize>,
}

impl<'a> Lines<'a> {
    fn new(src: &'a str) -> Self {
        let starts = std::iter::once(0)
            .chain(src.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        Lines { src, starts }
    }

    fn at(&self, offset: usize) -> (usize, usize) {
        let line = self.starts.partition_point(|&start| start <= offset);
        let column = self.src[self.starts[line - 1]..offset].chars().count() + 1;
        (line, column)
    }
}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-'
}

struct Parser<'a> {
    src: &'a str,
    lines: Lines<'a>,
    bytes: &'a [u8],
    pos: usize,
    limits: &'a GbnfLimits,
    rules: Vec<Rule>,
    /// Byte offset of each rule's definition (helpers: of their group or
    /// operator); `None` for a name used but not (yet) defined.
    def_offset: Vec<Option<usize>>,
    /// Byte offset of the first reference to each rule, and the user rule
    /// that made it.
    first_use: Vec<Option<(usize, RuleId)>>,
    names: HashMap<String, RuleId>,
    /// The user rule being parsed, parent of the helpers made now.
    current: RuleId,
    helper_count: u32,
    /// End of the last token consumed, to tell whether a newline precedes
    /// the next rule definition.
    last_token_end: usize,
    /// Running grammar size, checked against `max_grammar_size`.
    size: usize,
}

type Result<T> = std::result::Result<T, GrammarError>;

impl Parser<'_> {
    fn error(&self, offset: usize, message: impl Into<String>) -> GrammarError {
        let (line, column) = self.lines.at(offset);
        GrammarError::InvalidGrammar {
            location: Location::LineColumn { line, column },
            message: message.into(),
        }
    }

    fn limit(&self, offset: usize, what: &str, limit: usize, knob: &str) -> GrammarError {
        let (line, column) = self.lines.at(offset);
        GrammarError::LimitExceeded {
            what: format!("{what} at line {line}, column {column}"),
            limit,
            knob: format!("GbnfLimits::{knob}"),
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn peek_char(&self) -> Option<char> {
        self.src[self.pos..].chars().next()
    }

    /// What is at the current position, for messages.
    fn found(&self) -> String {
        match self.peek_char() {
            None => "the end of the input".into(),
            Some(_) if self.rule_definition_at(self.pos) => {
                format!("the definition of `{}`", self.name_at(self.pos))
            }
            Some(c) => format!("{c:?}"),
        }
    }

    fn name_at(&self, at: usize) -> &str {
        let len = self.bytes[at..]
            .iter()
            .take_while(|&&b| is_name_byte(b))
            .count();
        &self.src[at..at + len]
    }

    /// Whether `name ::=` starts at `at`.
    fn rule_definition_at(&self, at: usize) -> bool {
        let mut i = at + self.name_at(at).len();
        if i == at {
            return false;
        }
        while matches!(self.bytes.get(i), Some(b' ' | b'\t')) {
            i += 1;
        }
        self.bytes[i..].starts_with(b"::=")
    }

    /// Skips spaces, tabs, newlines and `#` comments.
    fn skip_ws(&mut self) {
        while let Some(b) = self.peek() {
            match b {
                b' ' | b'\t' | b'\r' | b'\n' => self.pos += 1,
                b'#' => {
                    while self.peek().is_some_and(|b| b != b'\n') {
                        self.pos += 1;
                    }
                }
                _ => break,
            }
        }
    }

    fn skip_blanks(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.pos += 1;
        }
    }

    fn grow(&mut self, by: usize, at: usize) -> Result<()> {
        self.size = self.size.saturating_add(by);
        if self.size > self.limits.max_grammar_size {
            return Err(self.limit(
                at,
                "grammar size after desugaring",
                self.limits.max_grammar_size,
                "max_grammar_size",
            ));
        }
        Ok(())
    }

    fn rule_for_name(&mut self, name: &str) -> RuleId {
        if let Some(&id) = self.names.get(name) {
            return id;
        }
        let id = RuleId(self.rules.len() as u32);
        self.rules.push(Rule {
            name: name.to_owned(),
            alternatives: Vec::new(),
            origin: RuleOrigin::Defined { line: 0, column: 0 },
        });
        self.def_offset.push(None);
        self.first_use.push(None);
        self.names.insert(name.to_owned(), id);
        id
    }

    fn new_helper(&mut self, alternatives: Vec<Vec<Symbol>>, at: usize) -> Result<RuleId> {
        self.grow(alternatives.len(), at)?;
        self.helper_count += 1;
        let id = RuleId(self.rules.len() as u32);
        self.rules.push(Rule {
            name: format!(
                "{}_{}",
                self.rules[self.current.index()].name,
                self.helper_count
            ),
            alternatives,
            origin: RuleOrigin::Helper {
                parent: self.current,
            },
        });
        self.def_offset.push(Some(at));
        self.first_use.push(None);
        Ok(id)
    }

    fn parse_grammar(&mut self) -> Result<()> {
        self.skip_ws();
        if self.peek().is_none() {
            return Err(self.error(0, "the grammar is empty: it defines no rule"));
        }
        while self.peek().is_some() {
            self.parse_rule()?;
            self.skip_ws();
        }
        Ok(())
    }

    fn parse_rule(&mut self) -> Result<()> {
        let name_start = self.pos;
        let name = self.name_at(name_start).to_owned();
        if name.is_empty() {
            return Err(self.error(
                self.pos,
                format!("expected a rule name, found {}", self.found()),
            ));
        }
        self.pos += name.len();
        self.skip_blanks();
        if !self.bytes[self.pos..].starts_with(b"::=") {
            return Err(self.error(
                self.pos,
                format!(
                    "expected `::=` after the rule name `{name}`, found {}",
                    self.found()
                ),
            ));
        }
        self.pos += 3;
        self.last_token_end = self.pos;

        let id = self.rule_for_name(&name);
        if let Some(first) = self.def_offset[id.index()] {
            let (line, column) = self.lines.at(first);
            return Err(self.error(
                name_start,
                format!(
                    "rule `{name}` is defined twice (first at line {line}, column {column}); \
                     join the alternatives with `|` in one definition"
                ),
            ));
        }
        let (line, column) = self.lines.at(name_start);
        self.def_offset[id.index()] = Some(name_start);
        self.rules[id.index()].origin = RuleOrigin::Defined { line, column };
        self.current = id;
        self.helper_count = 0;

        let alternatives = self.parse_body()?;
        self.rules[id.index()].alternatives = alternatives;

        self.skip_ws();
        match self.peek() {
            None => Ok(()),
            Some(_) if self.rule_definition_at(self.pos) => {
                if self.src[self.last_token_end..self.pos].contains('\n') {
                    Ok(())
                } else {
                    Err(self.error(
                        self.pos,
                        format!(
                            "the definition of `{}` must start on a new line",
                            self.name_at(self.pos)
                        ),
                    ))
                }
            }
            Some(b')') => Err(self.error(self.pos, "unmatched `)`")),
            Some(_) => Err(self.error(self.pos, format!("unexpected {}", self.found()))),
        }
    }

    /// The body of a rule: alternatives up to the next definition, the end
    /// of the input or an unmatched `)`. Iterative, with an explicit stack
    /// of open groups, so nesting costs heap, never call stack.
    fn parse_body(&mut self) -> Result<Vec<Vec<Symbol>>> {
        let mut stack = vec![Frame::new(self.pos)];
        loop {
            self.skip_ws();
            let start = self.pos;
            let top = stack.last_mut().expect("the rule's own frame");
            let Some(b) = self.peek() else {
                break;
            };
            match b {
                b'|' => {
                    self.pos += 1;
                    top.end_alternative();
                }
                b')' => {
                    if stack.len() == 1 {
                        break;
                    }
                    self.pos += 1;
                    let group = stack.pop().expect("an open group");
                    let open = group.open;
                    let mut alternatives = group.finish();
                    self.grow(alternatives.len(), start)?;
                    let parent = stack.last_mut().expect("the rule's own frame");
                    parent.last_start = Some(parent.items.len());
                    if alternatives.len() == 1 {
                        parent.items.append(&mut alternatives[0]);
                    } else {
                        let helper = self.new_helper(alternatives, open)?;
                        self.grow(1, start)?;
                        let parent = stack.last_mut().expect("the rule's own frame");
                        parent.items.push(Symbol::NonTerminal(helper));
                    }
                }
                b'(' => {
                    if stack.len() > self.limits.max_nesting_depth {
                        return Err(self.limit(
                            start,
                            "nesting of `(` groups",
                            self.limits.max_nesting_depth,
                            "max_nesting_depth",
                        ));
                    }
                    self.pos += 1;
                    stack.push(Frame::new(start));
                }
                b'*' | b'+' | b'?' | b'{' => {
                    let (min, max) = self.parse_operator()?;
                    let top = stack.last_mut().expect("the rule's own frame");
                    let Some(first) = top.last_start else {
                        let op = &self.src[start..self.pos];
                        return Err(
                            self.error(start, format!("`{op}` must follow an item to repeat"))
                        );
                    };
                    let repeated: Vec<Symbol> = top.items.drain(first..).collect();
                    if let Some(symbol) = self.repeat(repeated, min, max, start)? {
                        stack
                            .last_mut()
                            .expect("the rule's own frame")
                            .items
                            .push(symbol);
                    }
                }
                b if is_name_byte(b) && self.rule_definition_at(start) => break,
                _ => {
                    let symbol = self.parse_atom()?;
                    let top = stack.last_mut().expect("the rule's own frame");
                    top.last_start = Some(top.items.len());
                    if let Some(symbol) = symbol {
                        self.grow(1, start)?;
                        stack
                            .last_mut()
                            .expect("the rule's own frame")
                            .items
                            .push(symbol);
                    }
                }
            }
            self.last_token_end = self.pos;
        }
        if stack.len() > 1 {
            let open = stack.last().expect("an open group").open;
            return Err(self.error(
                open,
                format!("unclosed `(`: expected `)` before {}", self.found()),
            ));
        }
        let alternatives = stack.pop().expect("the rule's own frame").finish();
        self.grow(alternatives.len(), self.pos)?;
        Ok(alternatives)
    }

    /// A literal, class, `.` or rule name at the current position; `None`
    /// for the empty literal `""`.
    fn parse_atom(&mut self) -> Result<Option<Symbol>> {
        let start = self.pos;
        match self.bytes[start] {
            b'"' => {
                let literal = self.parse_literal()?;
                Ok((!literal.is_empty()).then(|| Symbol::Literal(literal.into_bytes().into())))
            }
            b'[' => Ok(Some(Symbol::Class(self.parse_class()?))),
            b'.' => {
                self.pos += 1;
                Ok(Some(Symbol::Class(CharClass::any())))
            }
            b if is_name_byte(b) => {
                let name = self.name_at(start).to_owned();
                self.pos += name.len();
                let id = self.rule_for_name(&name);
                if self.first_use[id.index()].is_none() {
                    self.first_use[id.index()] = Some((start, self.current));
                }
                Ok(Some(Symbol::NonTerminal(id)))
            }
            b'<' => Err(self.error(
                start,
                "token references (`<…>`) are not supported; write the text as a literal",
            )),
            _ => Err(self.error(start, format!("unexpected {}", self.found()))),
        }
    }

    /// A string literal, the current byte being its opening `"`.
    fn parse_literal(&mut self) -> Result<String> {
        let open = self.pos;
        self.pos += 1;
        let mut text = String::new();
        loop {
            match self.peek_char() {
                None => return Err(self.error(open, "unterminated string literal")),
                Some('\n' | '\r') => {
                    return Err(self.error(
                        open,
                        "unterminated string literal (a literal cannot span lines; \
                         write `\\n` for a newline)",
                    ));
                }
                Some('"') => {
                    self.pos += 1;
                    return Ok(text);
                }
                Some('\\') => text.push(self.parse_escape()?),
                Some(c) => {
                    self.pos += c.len_utf8();
                    text.push(c);
                }
            }
        }
    }

    /// An escape, the current byte being its `\`.
    fn parse_escape(&mut self) -> Result<char> {
        let at = self.pos;
        self.pos += 1;
        let Some(c) = self.peek_char() else {
            return Err(self.error(at, "incomplete escape at the end of the input"));
        };
        self.pos += c.len_utf8();
        let digits = match c {
            'n' => return Ok('\n'),
            'r' => return Ok('\r'),
            't' => return Ok('\t'),
            '\\' | '"' | '[' | ']' | '-' | '^' => return Ok(c),
            'x' => 2,
            'u' => 4,
            'U' => 8,
            _ => {
                return Err(self.error(
                    at,
                    format!(
                        "unknown escape `\\{c}` (known: \\n \\r \\t \\\\ \\\" \\[ \\] \\- \\^ \
                         \\xHH \\uHHHH \\UHHHHHHHH)"
                    ),
                ));
            }
        };
        let hex = self.bytes[self.pos..]
            .iter()
            .take(digits)
            .take_while(|b| b.is_ascii_hexdigit())
            .count();
        if hex != digits {
            return Err(self.error(
                at,
                format!("`\\{c}` must be followed by exactly {digits} hex digits"),
            ));
        }
        let text = &self.src[self.pos..self.pos + digits];
        self.pos += digits;
        let value = u32::from_str_radix(text, 16).expect("checked hex digits");
        char::from_u32(value).ok_or_else(|| {
            self.error(
                at,
                format!(
                    "`\\{c}{text}` is not a Unicode scalar value \
                     (surrogates and values above 10FFFF are not characters)"
                ),
            )
        })
    }

    /// One character of a class (raw or escaped); the class is unterminated
    /// at the end of the line or input.
    fn class_char(&mut self, open: usize) -> Result<char> {
        match self.peek_char() {
            None | Some('\n' | '\r') => Err(self.error(
                open,
                "unterminated character class: expected `]` before the end of the line",
            )),
            Some('\\') => self.parse_escape(),
            Some(c) => {
                self.pos += c.len_utf8();
                Ok(c)
            }
        }
    }

    /// A character class, the current byte being its `[`.
    fn parse_class(&mut self) -> Result<CharClass> {
        let open = self.pos;
        self.pos += 1;
        let negated = self.peek() == Some(b'^');
        if negated {
            self.pos += 1;
        }
        let mut ranges = Vec::new();
        loop {
            if self.peek() == Some(b']') {
                self.pos += 1;
                break;
            }
            let at = self.pos;
            let lo = self.class_char(open)?;
            let is_range = self.peek() == Some(b'-')
                && !matches!(self.bytes.get(self.pos + 1), None | Some(b']'));
            if !is_range {
                ranges.push((lo, lo));
                continue;
            }
            self.pos += 1;
            let hi = self.class_char(open)?;
            if hi < lo {
                return Err(self.error(
                    at,
                    format!(
                        "inverted range `{}` in a character class: U+{:04X} comes after U+{:04X}",
                        &self.src[at..self.pos],
                        lo as u32,
                        hi as u32
                    ),
                ));
            }
            ranges.push((lo, hi));
        }
        if ranges.is_empty() && !negated {
            return Err(self.error(
                open,
                "empty character class `[]` matches nothing (write `\\]` for a `]`)",
            ));
        }
        CharClass::new(ranges, negated)
            .ok_or_else(|| self.error(open, "the character class matches no character"))
    }

    /// A repetition operator at the current position, as (min, max).
    fn parse_operator(&mut self) -> Result<(u32, Option<u32>)> {
        let open = self.pos;
        let op = self.bytes[open];
        self.pos += 1;
        match op {
            b'*' => return Ok((0, None)),
            b'+' => return Ok((1, None)),
            b'?' => return Ok((0, Some(1))),
            _ => {}
        }
        self.skip_blanks();
        let min = self.parse_count()?;
        self.skip_blanks();
        let max = if self.peek() == Some(b',') {
            self.pos += 1;
            self.skip_blanks();
            if self.peek().is_some_and(|b| b.is_ascii_digit()) {
                Some(self.parse_count()?)
            } else {
                None
            }
        } else {
            Some(min)
        };
        self.skip_blanks();
        if self.peek() != Some(b'}') {
            return Err(self.error(
                self.pos,
                format!(
                    "expected `,` or `}}` in a repetition, found {}",
                    self.found()
                ),
            ));
        }
        self.pos += 1;
        if let Some(max) = max {
            if min > max {
                return Err(self.error(
                    open,
                    format!(
                        "repetition `{}`: the minimum {min} is greater than the maximum {max}",
                        &self.src[open..self.pos]
                    ),
                ));
            }
        }
        Ok((min, max))
    }

    fn parse_count(&mut self) -> Result<u32> {
        let start = self.pos;
        let len = self.bytes[start..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        if len == 0 {
            return Err(self.error(
                start,
                format!("expected a number in a repetition, found {}", self.found()),
            ));
        }
        self.pos += len;
        let digits = &self.src[start..self.pos];
        match digits.parse::<u32>() {
            Ok(n) if n <= self.limits.max_repetition => Ok(n),
            _ => {
                let shown = if digits.len() > 20 {
                    format!("{}…", &digits[..20])
                } else {
                    digits.to_owned()
                };
                Err(self.limit(
                    start,
                    &format!("repetition count {shown}"),
                    self.limits.max_repetition as usize,
                    "max_repetition",
                ))
            }
        }
    }

    /// Desugars `item{min,max}` (`max` `None`: unbounded) into one symbol,
    /// or `None` when it can only match the empty string.
    fn repeat(
        &mut self,
        mut item: Vec<Symbol>,
        min: u32,
        max: Option<u32>,
        at: usize,
    ) -> Result<Option<Symbol>> {
        if item.is_empty() || max == Some(0) {
            return Ok(None);
        }
        let x = if item.len() == 1 {
            item.pop().expect("one symbol")
        } else {
            Symbol::NonTerminal(self.new_helper(vec![item], at)?)
        };
        let (m, n) = (min as usize, max.map(|n| n as usize));
        // A loop repeated is a loop: `(y*)` under any count but zero is
        // `y*`, `(y+)*` and `(y+)?` are `y*`, `(y+)+` is `y+`. Nested loops
        // over one item accept the same text as one loop, but an Earley
        // parse carries an item for every loop and every way to split the
        // text among them (a hundred stacked `*` made one token cost more
        // than `max_step_work`).
        if let Some((plus, y)) = self.loop_of(&x) {
            match (plus, m, n) {
                (false, _, _) | (true, 1, None) => return Ok(Some(x)),
                (true, 0, None | Some(1)) => return self.repeat(vec![y], 0, None, at),
                _ => {}
            }
        }
        // Checked before building anything so that a huge count fails fast.
        let cost = match n {
            None => m + 5,
            Some(n) => m + 3 * (n - m) + 2,
        };
        self.grow(cost, at)?;
        let copies = |x: &Symbol| vec![x.clone(); m];
        let symbol = match n {
            Some(1) if m == 1 => x,
            None if m == 0 => {
                let star = self.new_helper(Vec::new(), at)?;
                self.rules[star.index()].alternatives =
                    vec![vec![], vec![Symbol::NonTerminal(star), x]];
                Symbol::NonTerminal(star)
            }
            None if m == 1 => {
                let plus = self.new_helper(Vec::new(), at)?;
                self.rules[plus.index()].alternatives =
                    vec![vec![x.clone()], vec![Symbol::NonTerminal(plus), x]];
                Symbol::NonTerminal(plus)
            }
            None => {
                let star = self.new_helper(Vec::new(), at)?;
                self.rules[star.index()].alternatives =
                    vec![vec![], vec![Symbol::NonTerminal(star), x.clone()]];
                let mut seq = copies(&x);
                seq.push(Symbol::NonTerminal(star));
                Symbol::NonTerminal(self.new_helper(vec![seq], at)?)
            }
            Some(n) if n == m => Symbol::NonTerminal(self.new_helper(vec![copies(&x)], at)?),
            Some(n) => {
                // O_1 ::= "" | x ; O_k ::= "" | x O_(k-1)
                let mut optional = self.new_helper(vec![vec![], vec![x.clone()]], at)?;
                for _ in 1..n - m {
                    optional = self.new_helper(
                        vec![vec![], vec![x.clone(), Symbol::NonTerminal(optional)]],
                        at,
                    )?;
                }
                if m == 0 {
                    Symbol::NonTerminal(optional)
                } else {
                    let mut seq = copies(&x);
                    seq.push(Symbol::NonTerminal(optional));
                    Symbol::NonTerminal(self.new_helper(vec![seq], at)?)
                }
            }
        };
        Ok(Some(symbol))
    }

    /// `(false, y)` when `x` is a helper made by [`Self::repeat`] for `y*`
    /// (`R ::= "" | R y`), `(true, y)` for `y+` (`R ::= y | R y`).
    fn loop_of(&self, x: &Symbol) -> Option<(bool, Symbol)> {
        let Symbol::NonTerminal(id) = x else {
            return None;
        };
        let rule = &self.rules[id.index()];
        if !matches!(rule.origin, RuleOrigin::Helper { .. }) {
            return None;
        }
        match rule.alternatives.as_slice() {
            [first, again] if again.len() == 2 && again[0] == *x => {
                let y = &again[1];
                match first.as_slice() {
                    [] => Some((false, y.clone())),
                    [only] if only == y => Some((true, y.clone())),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// Checks what only the whole grammar can tell and hands it out.
    fn finish(self, root: &str) -> Result<Grammar> {
        // Undefined rules, reported at their first use in the text.
        let mut undefined: Vec<(usize, RuleId, RuleId)> = (0..self.rules.len())
            .filter(|&i| self.def_offset[i].is_none())
            .filter_map(|i| {
                self.first_use[i].map(|(offset, user)| (offset, RuleId(i as u32), user))
            })
            .collect();
        undefined.sort();
        if let Some(&(offset, id, user)) = undefined.first() {
            let mut message = format!(
                "undefined rule `{}` (used in the definition of `{}`)",
                self.rules[id.index()].name,
                self.rules[user.index()].name
            );
            if undefined.len() > 1 {
                let others: Vec<&str> = undefined[1..]
                    .iter()
                    .map(|&(_, id, _)| self.rules[id.index()].name.as_str())
                    .collect();
                message.push_str(&format!("; also undefined: {}", others.join(", ")));
            }
            return Err(self.error(offset, message));
        }

        let Some(&root_id) = self.names.get(root) else {
            let mut defined: Vec<(usize, &str)> = self
                .names
                .iter()
                .map(|(name, id)| (self.def_offset[id.index()].unwrap_or(0), name.as_str()))
                .collect();
            defined.sort();
            let names: Vec<&str> = defined.iter().map(|&(_, n)| n).collect();
            return Err(GrammarError::InvalidGrammar {
                location: Location::None,
                message: format!(
                    "the root rule `{root}` is not defined (defined rules: {})",
                    names.join(", ")
                ),
            });
        };

        let grammar = Grammar {
            rules: self.rules,
            root: root_id,
            names: self.names,
        };

        // Rules that can never finish, reported at the earliest user rule
        // among them (a helper stands for its parent).
        let productive = productive_rules(&grammar);
        let culprit = grammar
            .rules
            .iter()
            .enumerate()
            .filter(|&(i, _)| !productive[i])
            .map(|(i, rule)| match rule.origin {
                RuleOrigin::Helper { parent } => parent,
                RuleOrigin::Defined { .. } => RuleId(i as u32),
            })
            .min_by_key(|id| self.def_offset[id.index()]);
        if let Some(id) = culprit {
            let offset = self.def_offset[id.index()].unwrap_or(0);
            let (line, column) = self.lines.at(offset);
            return Err(GrammarError::InvalidGrammar {
                location: Location::LineColumn { line, column },
                message: format!(
                    "rule `{}` can never produce a finite string: every alternative \
                     needs `{}` itself again or another rule that never finishes",
                    grammar.rule(id).name,
                    grammar.rule(id).name
                ),
            });
        }
        Ok(grammar)
    }
}

/// An open group (or the rule body itself) while parsing.
struct Frame {
    /// Byte offset of the `(` (of the body for the rule's own frame).
    open: usize,
    alternatives: Vec<Vec<Symbol>>,
    items: Vec<Symbol>,
    /// Where the last item's symbols start in `items`: what an operator
    /// repeats. `None` until the alternative has an item.
    last_start: Option<usize>,
}

impl Frame {
    fn new(open: usize) -> Self {
        Frame {
            open,
            alternatives: Vec::new(),
            items: Vec::new(),
            last_start: None,
        }
    }

    fn end_alternative(&mut self) {
        let items = std::mem::take(&mut self.items);
        self.alternatives.push(merge_literals(items));
        self.last_start = None;
    }

    fn finish(mut self) -> Vec<Vec<Symbol>> {
        self.end_alternative();
        self.alternatives
    }
}

/// Which rules derive at least one finite string (classes are never empty,
/// so every terminal does).
fn productive_rules(grammar: &Grammar) -> Vec<bool> {
    grammar.rules_where(|_| true)
}

/// Joins runs of adjacent literals into one.
fn merge_literals(items: Vec<Symbol>) -> Vec<Symbol> {
    let mut out: Vec<Symbol> = Vec::with_capacity(items.len());
    let mut run: Vec<u8> = Vec::new();
    for item in items {
        match item {
            Symbol::Literal(bytes) => run.extend_from_slice(&bytes),
            other => {
                if !run.is_empty() {
                    out.push(Symbol::Literal(std::mem::take(&mut run).into()));
                }
                out.push(other);
            }
        }
    }
    if !run.is_empty() {
        out.push(Symbol::Literal(run.into()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grammar(text: &str) -> Grammar {
        parse(text, "root", &GbnfLimits::default()).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    fn root_alternatives(g: &Grammar) -> &[Vec<Symbol>] {
        &g.rule(g.root()).alternatives
    }

    fn literal(s: &str) -> Symbol {
        Symbol::Literal(s.as_bytes().into())
    }

    #[test]
    fn line_column_counts_characters() {
        let src = "ab\ncé\u{1F600}x\n";
        let lines = Lines::new(src);
        assert_eq!(lines.at(0), (1, 1));
        assert_eq!(lines.at(2), (1, 3));
        assert_eq!(lines.at(3), (2, 1));
        assert_eq!(lines.at(src.len() - 2), (2, 4));
        assert_eq!(lines.at(src.len()), (3, 1));
    }

    #[test]
    fn adjacent_literals_and_single_groups_are_spliced() {
        let g = grammar(r#"root ::= "a" "b" ("c" "\x64") "e""#);
        assert_eq!(root_alternatives(&g), &[vec![literal("abcde")]]);
        assert_eq!(g.rules().len(), 1);
    }

    #[test]
    fn repetition_applies_to_the_whole_last_item() {
        // `"ab"*`: the literal as a whole, not its last character.
        let g = grammar(r#"root ::= "x" "ab"*"#);
        let alts = root_alternatives(&g);
        assert_eq!(alts.len(), 1);
        assert_eq!(alts[0][0], literal("x"));
        let Symbol::NonTerminal(star) = alts[0][1] else {
            panic!("{g}")
        };
        // Left recursive: R ::= "" | R "ab".
        assert_eq!(
            g.rule(star).alternatives,
            vec![vec![], vec![Symbol::NonTerminal(star), literal("ab")]]
        );
        assert_eq!(g.rule(star).name, "root_1");
        assert_eq!(g.rule(star).origin, RuleOrigin::Helper { parent: g.root() });
    }

    #[test]
    fn multi_symbol_items_become_one_helper_before_repeating() {
        let g = grammar(r#"root ::= ("a" [b]){3}"#);
        let Symbol::NonTerminal(rep) = root_alternatives(&g)[0][0] else {
            panic!("{g}")
        };
        let alts = &g.rule(rep).alternatives;
        assert_eq!(alts.len(), 1);
        assert_eq!(alts[0].len(), 3);
        assert!(alts[0].iter().all(|s| *s == alts[0][0]));
    }

    #[test]
    fn bounded_repetition_is_linear() {
        let g = grammar(r#"root ::= [a-z]{10,5000}"#);
        assert!(g.size() < 5 * 5000, "size {}", g.size());
        let g = grammar(r#"root ::= [a-z]{5000}"#);
        assert!(g.size() < 5000 + 10, "size {}", g.size());
    }

    #[test]
    fn rule_origins_and_names() {
        let g = grammar("# header\nroot ::= item+\n  item ::= [0-9]");
        let item = g.rule_id("item").unwrap();
        assert_eq!(
            g.rule(item).origin,
            RuleOrigin::Defined { line: 3, column: 3 }
        );
        assert_eq!(
            g.rule(g.root()).origin,
            RuleOrigin::Defined { line: 2, column: 1 }
        );
        let mut names: Vec<&str> = g.names().map(|(n, _)| n).collect();
        names.sort();
        assert_eq!(names, ["item", "root"]);
        assert_eq!(g.rule_id("root_1"), None);
    }

    #[test]
    fn escapes_decode_to_code_points() {
        let g = grammar(r#"root ::= "\n\r\t\\\"\[\]\-\^\x41\u00e9\U0001F600""#);
        assert_eq!(
            root_alternatives(&g),
            &[vec![literal("\n\r\t\\\"[]-^Aé\u{1F600}")]]
        );
    }

    #[test]
    fn classes_parse_ranges_negation_and_dashes() {
        let class = |text: &str| match &root_alternatives(&grammar(text))[0][0] {
            Symbol::Class(c) => c.clone(),
            other => panic!("{other:?}"),
        };
        assert_eq!(class("root ::= [a-cx]").ranges(), &[('a', 'c'), ('x', 'x')]);
        assert_eq!(class("root ::= [-a-]").ranges(), &[('-', '-'), ('a', 'a')]);
        assert_eq!(class("root ::= [c-ea-c]").ranges(), &[('a', 'e')]);
        let not_quote = class(r#"root ::= [^"\\]"#);
        assert!(!not_quote.contains('"') && !not_quote.contains('\\'));
        assert!(not_quote.contains('a') && not_quote.contains(char::MAX));
        assert_eq!(class("root ::= [^]"), CharClass::any());
        assert_eq!(class("root ::= ."), CharClass::any());
    }

    #[test]
    fn display_shows_the_desugared_grammar() {
        let g = grammar("root ::= (\"a\\n\" | [^x-z\\]]) root?");
        let text = g.to_string();
        assert!(text.starts_with("root ::= root_1 root_2\n"), "{text}");
        assert!(
            text.contains("root_1 ::= \"a\\n\" | [\\x00-\\\\\\^-w{-\\U0010FFFF]"),
            "{text}"
        );
    }

    #[test]
    fn loops_of_loops_are_one_loop() {
        // A hundred stacked `*` make one helper, as one `*` does.
        let stacked = grammar(&format!(r#"root ::= "ab"{}"#, "*".repeat(100)));
        let single = grammar(r#"root ::= "ab"*"#);
        assert_eq!(stacked.rules().len(), 2, "{stacked}");
        assert_eq!(stacked.to_string(), single.to_string());
        // Every form, against the same language written with one loop
        // each, on every string of up to six letters.
        let nested = grammar(r#"root ::= ("a"+)* "b" ("c"+)+ ("d"+)? ("e"*){2,3} ("a"*)+ ("c"?)*"#);
        let flat = grammar(r#"root ::= "a"* "b" "c"+ "d"* "e"* "a"* "c"*"#);
        let letters = b"abcde";
        let mut texts = vec![Vec::new()];
        for len in 1..=6 {
            let mut next = Vec::new();
            for t in texts.iter().filter(|t: &&Vec<u8>| t.len() == len - 1) {
                for &l in letters {
                    let mut u = t.clone();
                    u.push(l);
                    next.push(u);
                }
            }
            texts.extend(next);
        }
        let mut accepted = 0;
        for t in &texts {
            let want = flat.accepts(t);
            assert_eq!(nested.accepts(t), want, "{:?}", String::from_utf8_lossy(t));
            accepted += usize::from(want);
        }
        assert!(accepted > 100, "{accepted} texts accepted");
        // `("c"?)*` above keeps its `?` helper (not a loop); a count of a
        // loop other than those collapsed keeps its copies.
        let counted = grammar(r#"root ::= ("a"+){2}"#);
        assert!(
            counted.accepts(b"aa") && !counted.accepts(b"a"),
            "{counted}"
        );
    }
}
