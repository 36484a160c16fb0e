//! JSON Schema lowering, one for both backends.
//!
//! [`schema_to_regex`] turns a JSON Schema into a regex (`regex-syntax`
//! syntax, matched against the whole output) whose language is the JSON
//! texts valid under the schema, or a **subset** of them, never a superset:
//! what regex-fsm serves. [`schema_to_grammar`] is the same lowering in its
//! context-free mode, for earley: where the regex would need a depth bound
//! (recursive `$ref`s, values of any depth, extra members with any value)
//! it writes a reference to a rule instead, and the result is a set of
//! regexes linked into one [`Grammar`]. Every keyword below means the same
//! in both.
//! What would constrain the output and cannot be expressed is an error that
//! names its JSON pointer (`/properties/foo/pattern: look-ahead is not
//! supported`); nothing constraining is ever silently dropped.
//!
//! # What is lowered
//!
//! | keywords | how |
//! |---|---|
//! | `type` (and type arrays), `enum`, `const` | alternation; constants in every whitespace spelling the policy allows, numbers also as `1`/`1.0` and Python's `1e-05` (an integral one as an integer only where an integer-only `type` applies) |
//! | `enum`/`const` beside other keywords | each value checked against the conjunction's schema objects themselves (`validate`: every keyword, `not`/`anyOf`/`oneOf`/`if` and `$ref` included), before anything is split into cases; only values that check cannot decide (`unevaluated*`, a known `format` a string fails, a pattern translated inexactly, a fractional `multipleOf`, ...) go by the language of the rest, and are dropped when that cannot be lowered but other values were found valid |
//! | `properties`, `required` | members in declared order; optional members may be left out, with commas right for every subset |
//! | `additionalProperties` | `false`: none; a schema: extra members after the declared ones, keys that are not declared names; `true`/absent: see below |
//! | `patternProperties` | applied to the declared properties whose name matches; an object's patterns give members whose (escape-free) keys match them where no key matches two patterns (decided on their automata), beside named properties in context-free mode only; keys no pattern matches, and patterns that share keys, get no members (a subset) |
//! | `propertyNames` | declared names that fail it are not generated; no extra members, but in context-free mode, where an extra key is an intersection rule: a valid name and no declared one |
//! | `minProperties`/`maxProperties` | when implied by `required`/the declared set, or `minProperties: 1`; `maxProperties` also as a count of the extra members of an object that declares none (else extras are off under it) |
//! | `dependentRequired`/`dependencies`/`dependentSchemas` | by splitting on whether the trigger is present |
//! | `items`, `prefixItems`, `additionalItems`, `minItems`, `maxItems` | counted repetitions |
//! | `contains`, `minContains`, `maxContains` | items counted left to right: counted items satisfy the item schema and `contains`, the others the item schema (and, under `maxContains`, `¬contains` as for `not`); with `prefixItems` and item counts |
//! | `uniqueItems` | when every position takes a finite set of constants: the sequences of distinct values (JSON equality) |
//! | `unevaluatedProperties`, `unevaluatedItems` | the members (items) that nothing in the keyword's scope evaluates get its schema; the scope is the schema object and what it applies in place (`allOf`, `$ref`, the `anyOf`/`oneOf` branch lowered, a present trigger's `dependentSchemas`; not `not`); an error when an `if` (or, for items, a `contains`) is in scope |
//! | `minLength`/`maxLength` | counted characters (an escape is one character); folded into a pattern's or format's regex where one variable part takes them, else (context-free mode) an intersection rule |
//! | `pattern` | ECMA-262 with search semantics, restricted to characters needing no JSON escape (see `ecma`); several patterns, formats, lengths and excluded values on one string are, in context-free mode, an intersection rule ([`SchemaGrammar::intersections`]: a backend builds the product automaton), in regular mode an error where one regex cannot say them |
//! | `format` | `date-time`, `date`, `time`, `uuid`, `email`, `hostname`, `uri`, `ipv4` enforced; others are annotations |
//! | `minimum`/`maximum`/`exclusive*`, `multipleOf` | exact digit ranges for integers; integer bounds for numbers (no exponent form), plus one inclusive positive non-integer `minimum` (compared digit by digit); `multipleOf` 1, 2, 5, 10^k |
//! | `anyOf`, `allOf` | alternation; merging (distributing over `anyOf`/`oneOf`) |
//! | `oneOf` | alternation when the branches are provably disjoint (by type, constant values, a required discriminator property, closed property sets or `^literal` pattern prefixes); otherwise each overlapping branch `B_i` is restricted to `B_i ∧ ¬B_j` for the branches it may overlap, when those negations are exact (no keyword's negation dropped); an error otherwise |
//! | `if`/`then`/`else` | `(if ∧ then) ∨ (¬if ∧ else)`, the negation as for `not` |
//! | `not` | of `{}`/`true`, `type`, `enum`/`const` (over a finite set, or excluding null, a boolean or strings: a complement of the strings' trie whose characters are spelled one way), `required`, `properties` (some member present with a value its schema rejects), bounds and lengths, applicators that allow everything (`additionalProperties: true`, ...), `anyOf`/`allOf`/`oneOf` (none or two branches hold)/`not`/`$ref` of those |
//! | `$ref` (`#`, `#/json/pointer`, `$defs`, `definitions`; an embedded resource's URI, its `$id` resolved against its base; an anchor: `$anchor`, `$dynamicAnchor`, `$id: "#name"`) | inlined; another document's URI (nothing is fetched) and `$dynamicRef` are errors; recursion is an error unless `max_depth` bounds its unfolding. Context-free mode: recursion, a plain `$ref` to a definition whose regex is 1 KiB or more, and any other sub-schema whose regex is 512 bytes or more, become rules (written once) |
//!
//! Annotations (`title`, `description`, `default`, `examples`, `$comment`,
//! `deprecated`, `readOnly`, ...) and unknown keywords are ignored.
//! `uniqueItems: true` (unless at most one item, or over small sets of
//! constants) and `$dynamicRef` are errors.
//!
//! # Testing a decoder against the schema
//!
//! [`instances`] builds valid and near-miss JSON values from a schema's own
//! keywords (not from this crate's lowering of it), deterministic from a
//! seed: values meant to be valid, and each changed at one of the schema's
//! boundaries (a length or count one past its bound, a number just outside
//! its range, a required member left out, an extra member, a wrong type, an
//! `enum` neighbour, a pattern broken by one character). A validator judges
//! them; a decoder's verdict on their text must agree with it.
//!
//! # Decisions where the specification leaves room
//!
//! * **Extra properties.** `additionalProperties` absent or `true` means "any
//!   other member with any value". Any value needs bounded nesting, so extra
//!   members are generated only when [`SpecOptions::max_depth`] is set (values
//!   nested at most that deep); otherwise no extra members are generated (a
//!   subset). With `strict`, an absent `additionalProperties` means none.
//!   The context-free mode needs no bound: extra members (and `{}`) take any
//!   value at any depth, unless `max_depth` is set.
//!   Extra members come after the declared ones, with plain (escape-free) keys
//!   where the object keeps names out (declared, required, forbidden), any
//!   key otherwise.
//! * **Unconstrained values** (`{}`, a property without a type) are JSON
//!   values nested at most `max_depth`, or [`DEFAULT_FREE_VALUE_DEPTH`]
//!   levels when it is `None` (a subset).
//! * **Whitespace** under `Whitespace::Any` goes between tokens only, at most
//!   `max_whitespace` characters a run; never before the value or after it.
//! * **Formats** are annotations in 2020-12 but many validators assert them:
//!   the known ones are enforced with a regex that is a subset of both
//!   readings; unknown ones constrain nothing.
//! * **Numbers**: integers are spelled canonically (`-?(0|[1-9][0-9]*)`, no
//!   `1.0`); bounded `number`s have no exponent form; exclusive bounds on
//!   `number` limit the fraction to 6 digits so that no literal rounds onto
//!   the bound when parsed as a double.
//! * **Patterns** match the decoded string; the lowering only generates
//!   characters that need no escape inside a pattern-constrained string.
//!   Where ECMA-262 and Python's `re` differ (`\d`, `\w`, `\s`), both must
//!   accept.
//! * **Recursion** with `max_depth: Some(d)`: a `$ref` may be re-entered at
//!   most `d` times along a path; deeper branches are dropped.

mod ecma;
mod format;
pub mod instances;
mod layout;
mod lower;
mod numeric;
mod resources;
mod rx;
mod structure;
mod unevaluated;
mod validate;

use tokensieve_automata::OtherKeys;
use tokensieve_core::{GrammarError, SpecOptions};
use tokensieve_grammar::pieces::{self, PieceGrammar, PieceLimits};
use tokensieve_grammar::{GbnfLimits, Grammar, compose};

/// How deep values the schema leaves unconstrained may nest when
/// [`SpecOptions::max_depth`] is `None`.
pub const DEFAULT_FREE_VALUE_DEPTH: u32 = 2;

/// Resource limits of the lowering. Exceeding one is
/// [`GrammarError::LimitExceeded`], never a truncated regex.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoweringLimits {
    /// Longest regex text produced. Default 4 MiB.
    pub max_regex_len: usize,
    /// Largest regex once counted repetitions are expanded (what NFA
    /// construction costs). Default 16 MiB.
    pub max_expanded_len: u64,
    /// Deepest regex syntax tree (regex-syntax's nest limit, 256 in this
    /// backend's parser). Default 250.
    pub max_nest: u32,
    /// Largest counted repetition (`maxLength`, `maxItems`, `{n,m}` in a
    /// pattern). Default 10 000.
    pub max_repeat: u32,
    /// Most values in one `enum`. Default 10 000.
    pub max_enum_values: usize,
    /// Deepest nesting of sub-schemas being lowered. Default 128.
    pub max_schema_depth: u32,
    /// Most rules of a context-free result ([`schema_to_grammar`]): one per
    /// recursive sub-schema, plus one for values of any depth. Default 4096.
    pub max_rules: usize,
    /// Whether an object's `patternProperties` patterns (one, or several
    /// that share no key) give members with matching keys (else none: a
    /// subset). Default true; a backend may turn it off to retry a
    /// schema whose automaton the members make too big.
    pub pattern_members: bool,
    /// Whether the context-free result may hold an object's other keys
    /// unwritten: a verbatim rule whose [`tokensieve_grammar::pieces::Verbatim::keys`]
    /// are the language and whose text is only their
    /// [`tokensieve_automata::json_keys::OtherKeys::stand_in`] (writing the text was a tenth
    /// of a Kubernetes schema's compile). For a backend that builds those
    /// keys from their names; [`SchemaGrammar::rule_regex`] writes the
    /// text for any other use. Default false.
    pub other_keys_unwritten: bool,
}

impl Default for LoweringLimits {
    fn default() -> Self {
        LoweringLimits {
            max_regex_len: 4 << 20,
            max_expanded_len: 16 << 20,
            max_nest: 250,
            max_repeat: 10_000,
            max_enum_values: 10_000,
            max_schema_depth: 128,
            max_rules: 4096,
            pattern_members: true,
            other_keys_unwritten: false,
        }
    }
}

/// Lowers a JSON Schema (JSON text) to a regex whose whole-match language is
/// exactly the JSON texts valid under the schema (or a subset of them, never a
/// superset). `max_whitespace` bounds each run of whitespace under
/// `Whitespace::Any`.
pub fn schema_to_regex(
    schema_json: &str,
    options: &SpecOptions,
    max_whitespace: u32,
) -> Result<String, GrammarError> {
    schema_to_regex_with_limits(
        schema_json,
        options,
        max_whitespace,
        &LoweringLimits::default(),
    )
}

/// [`schema_to_regex`] with explicit limits.
pub fn schema_to_regex_with_limits(
    schema_json: &str,
    options: &SpecOptions,
    max_whitespace: u32,
    limits: &LoweringLimits,
) -> Result<String, GrammarError> {
    let schema: serde_json::Value = serde_json::from_str(schema_json)
        .map_err(|e| GrammarError::schema_at("", format!("the schema is not JSON: {e}")))?;
    let may_embed = may_embed_resources(schema_json);
    on_big_stack(|| lower::lower_document(&schema, may_embed, options, max_whitespace, limits))
}

pub use lower::{STRING_CHAR, SchemaGrammar};
pub(crate) use structure::quoted_key_complement;

/// The regex text of `keys` (a quoted key that is none of its names): what
/// the lowering writes for an object's other keys, for a consumer that
/// parses it rather than building [`OtherKeys`]' automaton from the names.
pub fn other_keys_regex(keys: &OtherKeys) -> String {
    let (lang, _) = quoted_key_complement(keys.names());
    lang.text()
        .expect("some key is none of the names")
        .to_owned()
}

/// Whether a schema's text may hold an `$id` (or draft 4's `id`) key, so
/// that a sub-schema may be a resource of its own: where it cannot,
/// resolving a `$ref` needs no walk along its pointer looking for one (3%
/// of a Kubernetes compile). A `\u` escape could spell the key.
fn may_embed_resources(schema_json: &str) -> bool {
    ["\"$id\"", "\"id\"", "\\u"]
        .iter()
        .any(|key| schema_json.contains(key))
}

/// The context-free lowering, for a backend that parses recursion: the
/// same meaning as [`schema_to_regex`], but with no depth bound where the
/// schema sets none (unless [`SpecOptions::max_depth`] asks for one):
///
/// * a `$ref` (alone but for annotations) to a sub-schema it is already
///   inside becomes a rule, so recursion goes to any depth;
/// * values the schema leaves unconstrained (`{}`, a property with no
///   schema) are any JSON value, nested to any depth;
/// * extra object members are allowed, with any value, unless the schema
///   (or [`SpecOptions::strict`]) forbids them, as JSON Schema says.
///
/// Without any of these the result has no rules and its root is the regex
/// [`schema_to_regex`] would give without `max_depth`. Recursion with an
/// indented layout, or a recursive `$ref` next to other keywords, is
/// [`GrammarError::Unsupported`], naming its pointer.
pub fn schema_to_grammar(
    schema_json: &str,
    options: &SpecOptions,
    max_whitespace: u32,
    limits: &LoweringLimits,
) -> Result<SchemaGrammar, GrammarError> {
    let schema: serde_json::Value = serde_json::from_str(schema_json)
        .map_err(|e| GrammarError::schema_at("", format!("the schema is not JSON: {e}")))?;
    let may_embed = may_embed_resources(schema_json);
    on_big_stack(|| lower::lower_document_cf(&schema, may_embed, options, max_whitespace, limits))
}

impl SchemaGrammar {
    /// The result as a [`PieceGrammar`]: every sub-expression without a
    /// rule reference stays one regex (see [`tokensieve_grammar::pieces`]), so a backend
    /// gets the schema's regular parts whole.
    pub fn to_pieces(&self) -> Result<PieceGrammar, GrammarError> {
        self.to_pieces_with(&PieceLimits::default())
    }

    /// [`SchemaGrammar::to_pieces`] with explicit limits: with
    /// [`PieceLimits::block_weight`], long counted repetitions (the
    /// characters of a `maxLength: 4096` string) are taken apart into
    /// blocks, for a backend whose automata cannot hold them whole.
    pub fn to_pieces_with(&self, limits: &PieceLimits) -> Result<PieceGrammar, GrammarError> {
        let g = pieces::split_with(
            &self.root,
            &self.rules,
            &self.intersections,
            &self.verbatim,
            limits,
        )?;
        if g.productive().iter().any(|&p| !p) {
            return Err(self.endless());
        }
        Ok(g)
    }

    /// Rule `i`'s regex: its text, or where the text was left unwritten
    /// ([`LoweringLimits::other_keys_unwritten`]), the text of its keys.
    pub fn rule_regex(&self, i: usize) -> std::borrow::Cow<'_, str> {
        let text = &self.rules[i];
        if text.starts_with(tokensieve_automata::json_keys::STAND_IN_MARK)
            && let Some(keys) = self
                .verbatim
                .iter()
                .find(|(r, _)| *r == i)
                .and_then(|(_, v)| v.keys.as_ref())
        {
            return other_keys_regex(keys).into();
        }
        text.into()
    }

    fn endless(&self) -> GrammarError {
        GrammarError::schema_at(
            "",
            format!(
                "no finite JSON value satisfies the recursion through {}",
                self.rule_sources.join(", ")
            ),
        )
    }

    /// The result as a [`Grammar`]: each regex through
    /// [`compose::from_regex`], linked by [`compose::link`] (placeholder
    /// `i` becomes a reference to rule `i`'s root).
    pub fn to_grammar(&self, limits: &GbnfLimits) -> Result<Grammar, GrammarError> {
        if let Some((i, _)) = self.intersections.first() {
            return Err(GrammarError::Unsupported {
                location: tokensieve_core::Location::None,
                what: format!(
                    "a grammar of rules for this schema: {} (rule {i}) is an intersection of regexes",
                    self.rule_sources[*i]
                ),
            });
        }
        let root = compose::from_regex(&self.root, limits)?;
        // Linking copies every rule's grammar whole, so the linked size is
        // at least their sum: past the limit, nothing more is built (a
        // Kubernetes schema's rules summed past it took 1.1 s to link and
        // refuse).
        let mut size = root.size();
        let mut rules = Vec::with_capacity(self.rules.len());
        for i in 0..self.rules.len() {
            let rule = compose::from_regex(&self.rule_regex(i), limits)?;
            size += rule.size();
            if size > limits.max_grammar_size {
                return Err(GrammarError::LimitExceeded {
                    what: format!(
                        "the composed grammar's size (over {size}, from its first {} of {} rules)",
                        i + 1,
                        self.rules.len()
                    ),
                    limit: limits.max_grammar_size,
                    knob: "GbnfLimits::max_grammar_size".into(),
                });
            }
            rules.push(rule);
        }
        if rules.is_empty() {
            return Ok(root);
        }
        let pieces: Vec<(char, &Grammar)> = rules
            .iter()
            .enumerate()
            .map(|(i, g)| (compose::placeholder(i).expect("few enough rules"), g))
            .collect();
        compose::link(&root, &pieces, limits).map_err(|e| match e {
            // The one way linking fails on regexes that each match something:
            // a recursion that never ends.
            GrammarError::InvalidGrammar { .. } => self.endless(),
            other => other,
        })
    }
}

/// Stack for the recursive lowering. Lowering recurses once per schema level
/// (serde_json already caps documents at 128 levels) and per `$ref` unfold;
/// in debug builds a level can take tens of KiB, more than a caller's thread
/// (2 MiB for test threads and rayon workers) may have. Mapped for each
/// lowering and touched only as deep as it goes. (A thread of its own, as
/// before, cost a small schema's compile 0.2 ms more: the thread's start,
/// and its allocations freed on another thread.)
const LOWERING_STACK: usize = 256 << 20;

/// Runs `f` on a stack of [`LOWERING_STACK`] bytes, on the caller's thread
/// (the stack is switched, not the thread: the lowering's memory stays in
/// the caller's allocator arena), so a deeply nested schema is a
/// `LimitExceeded` error, never a stack overflow.
fn on_big_stack<T>(f: impl FnOnce() -> Result<T, GrammarError>) -> Result<T, GrammarError> {
    stacker::grow(LOWERING_STACK, f)
}

/// A regex for any JSON object, nested at most `options.max_depth` deep
/// (an error when `max_depth` is `None`: a regex cannot express unbounded nesting).
pub fn json_object_regex(
    options: &SpecOptions,
    max_whitespace: u32,
) -> Result<String, GrammarError> {
    on_big_stack(|| lower::any_object(options, max_whitespace, &LoweringLimits::default()))
}

#[cfg(test)]
mod tests;
