//! The lowering driver: resolves `$ref`s, merges the keywords of a
//! conjunction of sub-schemas (`allOf`, `$ref` siblings) into one
//! [`Merged`] description, distributes it over `anyOf`/`oneOf`, and
//! dispatches on the JSON types that remain.

use super::LoweringLimits;
use super::layout::{Layout, key_text};
use super::resources::{Resources, ref_hides_id};
use super::rx::{self, Lang};
use hashbrown::HashMap;
use serde_json::{Map, Value};
use std::rc::Rc;
use std::sync::Arc;
use tokensieve_automata::json_keys::OtherKeys;
use tokensieve_core::{GrammarError, SpecOptions};
use tokensieve_grammar::pieces::Verbatim;

// JSON value kinds, as bits. Numbers split into integral and non-integral
// values (`integer` = INTEGER, `number` = INTEGER | FRACTION).
pub(crate) const NULL: u8 = 1;
pub(crate) const BOOLEAN: u8 = 2;
pub(crate) const OBJECT: u8 = 4;
pub(crate) const ARRAY: u8 = 8;
pub(crate) const STRING: u8 = 16;
pub(crate) const INTEGER: u8 = 32;
pub(crate) const FRACTION: u8 = 64;
pub(crate) const ALL_TYPES: u8 = 127;

/// A JSON string's character, any (escapes included, no lone
/// surrogates): what an unconstrained string's body repeats.
pub const STRING_CHAR: &str = r#"(?:[^"\\\x00-\x1F]|\\["\\/bfnrt]|\\u(?:[0-9A-Ca-cEFef][0-9A-Fa-f]{3}|[Dd][0-7][0-9A-Fa-f]{2}))"#;

/// Any JSON string, quotes included (keys of an object of any value, or
/// where no name is kept out).
pub(crate) fn any_string() -> Lang {
    Lang::atom(format!("\"{STRING_CHAR}*\""), 4)
}

/// Regex length from which a definition reached by a plain `$ref` becomes a
/// rule of the context-free result instead of being written in place.
const SHARED_RULE_MIN_LEN: usize = 1024;

/// Regex length from which the language of any sub-schema (a nested
/// object, an array's items) becomes a rule of the context-free result,
/// written once: an object's optional members are written in several
/// copies ([`super::structure`]), so a member's value is copied once per
/// level of objects above it, and a 7 KB schema of nested objects without
/// `additionalProperties: false` wrote a 1.8 MB regex (most of its
/// compile: parsing the copies, splitting them, freeing them). From 4 KiB
/// down to 512 bytes, a bench run of the slowest MaskBench compiles does
/// 1.13 G fewer instructions (of 25.4), 1.04 G of them in the piece split
/// and lexeme lowering: the masks do the same work. At 256 bytes they do
/// more, as more lexemes end at rule boundaries.
const SHARED_NODE_MIN_LEN: usize = 512;

/// Shortest text of an object's extra-member key (any string but its
/// property names) made a verbatim rule in context-free mode: such keys
/// were most of the text a big schema's lowering writes (Kubernetes: two
/// thirds), parsed at every compile though an output seldom enters them.
const VERBATIM_KEY_MIN_LEN: usize = 512;

/// Most rules the context-free result may have: the placeholder characters
/// of plane 15 ([`tokensieve_grammar::compose::placeholder`]).
const MAX_PLACEHOLDERS: usize = 0xFFFE;

/// Most cases a chain of `not`s may split a schema into.
const MAX_NOT_VARIANTS: usize = 64;

/// Keywords that never affect validity.
const ANNOTATIONS: &[&str] = &[
    "$schema",
    "$id",
    "id",
    "$anchor",
    "$dynamicAnchor",
    "$vocabulary",
    "$comment",
    "$defs",
    "definitions",
    "title",
    "description",
    "default",
    "examples",
    "example",
    "deprecated",
    "readOnly",
    "writeOnly",
    "contentMediaType",
    "contentEncoding",
    "contentSchema",
    "format",
    "nullable",
    "discriminator",
    "xml",
    "externalDocs",
];

/// A sub-schema and its JSON pointer.
#[derive(Clone, Debug)]
pub(crate) struct Node<'a> {
    pub v: &'a Value,
    pub ptr: String,
}

impl<'a> Node<'a> {
    pub fn child(&self, v: &'a Value, key: &str) -> Node<'a> {
        Node {
            v,
            ptr: self.at(key),
        }
    }

    /// The JSON pointer of `key` below this node. (Made for every node
    /// lowered, so written in one allocation, without the formatting
    /// machinery.)
    pub fn at(&self, key: &str) -> String {
        let mut ptr = String::with_capacity(self.ptr.len() + 1 + key.len());
        ptr.push_str(&self.ptr);
        ptr.push('/');
        push_pointer_token(&mut ptr, key);
        ptr
    }
}

/// A JSON pointer token as the key it names (`~1` is `/`, `~0` is `~`).
fn unescape_token(token: &str) -> std::borrow::Cow<'_, str> {
    if token.contains('~') {
        token.replace("~1", "/").replace("~0", "~").into()
    } else {
        token.into()
    }
}

/// The value at JSON pointer `fragment` (decoded) below `from`, and its
/// pointer written canonically.
fn follow_pointer<'a>(from: &'a Value, fragment: &str) -> Option<(&'a Value, String)> {
    let mut target = from;
    let mut canonical = String::new();
    for token in fragment.split('/').skip(1) {
        let token = unescape_token(token);
        target = match target {
            Value::Object(map) => map.get(&*token),
            Value::Array(items) => token.parse::<usize>().ok().and_then(|i| items.get(i)),
            _ => None,
        }?;
        canonical.push('/');
        push_pointer_token(&mut canonical, &token);
    }
    Some((target, canonical))
}

/// `token` escaped as a JSON pointer writes it (`~` as `~0`, `/` as `~1`).
pub(crate) fn push_pointer_token(out: &mut String, token: &str) {
    if !token.contains(['~', '/']) {
        out.push_str(token);
        return;
    }
    for c in token.chars() {
        match c {
            '~' => out.push_str("~0"),
            '/' => out.push_str("~1"),
            c => out.push(c),
        }
    }
}

/// A numeric bound as written.
#[derive(Clone, Debug)]
pub(crate) struct Bound<'a> {
    pub value: &'a Value,
    pub exclusive: bool,
    pub ptr: String,
}

/// Where a keyword of a conjunction came from: the ids of the schema
/// objects expanded in place on the way to it (the conjunction's own nodes
/// first, its own schema object last). Every expansion gets a fresh id
/// ([`Lowerer::expand`]), so an id is in an origin exactly when the keyword
/// sits in that schema object or in one of its in-place sub-schemas (`allOf`,
/// `$ref`, the chosen `anyOf`/`oneOf` branch, a present `dependentSchemas`
/// trigger's schema): the scope that `unevaluatedProperties` and
/// `unevaluatedItems` see. `not` starts an origin of its own (what it
/// evaluates does not count outside it).
pub(crate) type Origin = Vec<u32>;

/// The object keywords of one sub-schema (they interact: `additionalProperties`
/// is relative to the `properties` next to it).
#[derive(Clone, Debug)]
pub(crate) struct ObjPart<'a> {
    pub props: Vec<(&'a str, Node<'a>)>,
    pub additional: Option<Node<'a>>,
    pub pattern_props: Vec<(&'a str, Node<'a>)>,
    pub origin: Origin,
}

/// The array keywords of one sub-schema.
#[derive(Clone, Debug)]
pub(crate) struct ArrPart<'a> {
    pub prefix: Vec<Node<'a>>,
    pub rest: Option<Node<'a>>,
    pub origin: Origin,
}

/// An `unevaluatedProperties` or `unevaluatedItems` keyword: the members
/// (items) that nothing in its scope evaluates must be valid under `schema`.
#[derive(Clone, Debug)]
pub(crate) struct Unevaluated<'a> {
    pub schema: Node<'a>,
    /// The origin of its schema object (its id last).
    pub origin: Origin,
}

impl Unevaluated<'_> {
    /// The id of the schema object holding the keyword.
    pub fn id(&self) -> u32 {
        *self.origin.last().expect("an origin names its own node")
    }

    /// Whether something that came from `origin` is within its scope.
    pub fn sees(&self, origin: &[u32]) -> bool {
        origin.contains(&self.id())
    }

    /// Whether it constrains anything (`true` and `{}` only evaluate).
    pub fn constrains(&self) -> bool {
        !is_trivially_true(self.schema.v)
    }
}

#[derive(Clone, Debug)]
pub(crate) enum Dependency<'a> {
    Names(Vec<String>),
    /// A `dependentSchemas` entry, applied in place (when its trigger is
    /// present) under the origin of the schema object holding it.
    Schema(Node<'a>, Origin),
}

/// A `contains` keyword with its bounds: at least `min` and at most `max`
/// items satisfy `node`.
#[derive(Clone, Debug)]
pub(crate) struct Contains<'a> {
    pub node: Node<'a>,
    pub min: u64,
    pub max: Option<u64>,
}

#[derive(Clone, Debug)]
pub(crate) struct Disjunction<'a> {
    pub one_of: bool,
    pub branches: Vec<Node<'a>>,
    pub ptr: String,
    /// The origin of the schema object holding it: its branches are
    /// expanded (later, in [`Lowerer::lower_merged`]) under it.
    pub origin: Origin,
}

/// `if`/`then`/`else`: `(if ∧ then) ∨ (¬if ∧ else)`, a missing branch being
/// `true`.
#[derive(Clone, Debug)]
pub(crate) struct Conditional<'a> {
    pub condition: Node<'a>,
    pub then: Option<Node<'a>>,
    pub otherwise: Option<Node<'a>>,
}

/// Everything a conjunction of sub-schemas says, merged.
#[derive(Clone, Debug)]
pub(crate) struct Merged<'a> {
    /// `ref_stack` length when this conjunction started (refs below it are
    /// the ancestors, for recursion detection).
    pub base: usize,
    /// The targets of the `$ref`s expanded into this conjunction: a second
    /// `$ref` to one of them adds nothing. (Not `ref_stack` above `base`:
    /// the negations of a `not` expand into several copies of one
    /// conjunction, and the stack then holds their refs together.)
    pub refs: Vec<String>,
    /// The schema objects conjoined here, each as written (with its
    /// `anyOf`, `not`, `if`, ... still in it): the ones expanded from
    /// outside an expansion (an `allOf` branch or a `$ref` target is in its
    /// parent already). With [`Merged::negated`] they are exactly what a
    /// value of this conjunction must satisfy; the fields below are what
    /// the lowering made of them, possibly narrowed (a case of a split).
    pub sources: Vec<&'a Value>,
    /// Schemas a value of this conjunction must *not* satisfy: the `not`s
    /// (of `not`, a failed `if`, an overlapping `oneOf` branch) already
    /// split into the cases of the fields below.
    pub negated: Vec<&'a Value>,
    pub types: u8,
    pub enum_vals: Option<Vec<&'a Value>>,
    /// Some keyword other than type/enum/const constrains the value.
    pub constrained: bool,
    // strings
    pub min_len: u64,
    pub max_len: Option<u64>,
    pub len_ptr: String,
    pub patterns: Vec<(&'a str, String)>,
    pub formats: Vec<(&'a str, String)>,
    /// String values excluded (by `not`, or a failed `if`), with the
    /// pointer of the keyword that excluded them.
    pub not_strings: Vec<(&'a str, String)>,
    // numbers
    pub lower: Vec<Bound<'a>>,
    pub upper: Vec<Bound<'a>>,
    pub multiple_of: Vec<(f64, String)>,
    // objects
    /// Shared between copies: a `not` or a split copies the conjunction
    /// once per case, and the parts are rarely added to after.
    pub obj_parts: Rc<Vec<ObjPart<'a>>>,
    pub required: Vec<String>,
    pub forbidden: Vec<String>,
    pub min_props: Option<(u64, String)>,
    pub max_props: Option<(u64, String)>,
    pub property_names: Vec<Node<'a>>,
    pub dependencies: Vec<(String, Dependency<'a>, String)>,
    pub no_extras: bool,
    /// Members that must be present with a value that is *not* valid under
    /// the schema (from negating `properties`).
    pub member_nots: Vec<(String, Node<'a>)>,
    // arrays
    /// Shared between copies, as [`Merged::obj_parts`].
    pub arr_parts: Rc<Vec<ArrPart<'a>>>,
    pub min_items: u64,
    pub max_items: Option<u64>,
    pub items_ptr: String,
    pub unique_items: Option<String>,
    pub contains: Vec<Contains<'a>>,
    // evaluation
    pub uneval_props: Vec<Unevaluated<'a>>,
    pub uneval_items: Vec<Unevaluated<'a>>,
    /// Keywords that may evaluate members or items in ways the lowering
    /// does not track (`if`, `contains`): an `unevaluated*` keyword that
    /// sees one is an error. (keyword, its pointer, origin)
    pub untracked: Vec<(&'static str, String, Origin)>,
    // combinators
    pub nots: Vec<Node<'a>>,
    pub disjunctions: Vec<Disjunction<'a>>,
    pub conditionals: Vec<Conditional<'a>>,
}

impl<'a> Merged<'a> {
    /// Whether nothing but `type` has been merged in: the values of the
    /// kinds in `types` satisfy it.
    pub(crate) fn only_types(&self) -> bool {
        self.enum_vals.is_none()
            && !self.constrained
            && self.min_len == 0
            && self.max_len.is_none()
            && self.patterns.is_empty()
            && self.formats.is_empty()
            && self.not_strings.is_empty()
            && self.lower.is_empty()
            && self.upper.is_empty()
            && self.multiple_of.is_empty()
            && self.obj_parts.is_empty()
            && self.required.is_empty()
            && self.forbidden.is_empty()
            && self.min_props.is_none()
            && self.max_props.is_none()
            && self.property_names.is_empty()
            && self.dependencies.is_empty()
            && !self.no_extras
            && self.member_nots.is_empty()
            && self.arr_parts.is_empty()
            && self.min_items == 0
            && self.max_items.is_none()
            && self.unique_items.is_none()
            && self.contains.is_empty()
            && !self.uneval_props.iter().any(Unevaluated::constrains)
            && !self.uneval_items.iter().any(Unevaluated::constrains)
            && self.nots.is_empty()
            && self.disjunctions.is_empty()
            && self.conditionals.is_empty()
    }

    pub(crate) fn new(base: usize) -> Self {
        Merged {
            base,
            refs: Vec::new(),
            sources: Vec::new(),
            negated: Vec::new(),
            types: ALL_TYPES,
            enum_vals: None,
            constrained: false,
            min_len: 0,
            max_len: None,
            len_ptr: String::new(),
            patterns: Vec::new(),
            formats: Vec::new(),
            not_strings: Vec::new(),
            lower: Vec::new(),
            upper: Vec::new(),
            multiple_of: Vec::new(),
            obj_parts: Rc::default(),
            required: Vec::new(),
            forbidden: Vec::new(),
            min_props: None,
            max_props: None,
            property_names: Vec::new(),
            dependencies: Vec::new(),
            no_extras: false,
            member_nots: Vec::new(),
            arr_parts: Rc::default(),
            min_items: 0,
            max_items: None,
            items_ptr: String::new(),
            unique_items: None,
            contains: Vec::new(),
            uneval_props: Vec::new(),
            uneval_items: Vec::new(),
            untracked: Vec::new(),
            nots: Vec::new(),
            disjunctions: Vec::new(),
            conditionals: Vec::new(),
        }
    }
}

pub(crate) struct Lowerer<'a> {
    pub root: &'a Value,
    pub options: &'a SpecOptions,
    pub layout: Layout,
    pub limits: &'a LoweringLimits,
    /// Resolved pointers of the `$ref`s being expanded, outermost first.
    pub ref_stack: Vec<String>,
    /// The single sub-schemas being lowered (pointer, level key),
    /// outermost first: one met again inside itself (through an `allOf`
    /// with a `$ref` back to its parent) is its rule.
    lowering: Vec<(String, u32)>,
    pub depth: u32,
    cache: HashMap<(String, u32), Lang>,
    any_cache: HashMap<(u32, u32), Lang>,
    pub name_regexes: HashMap<String, regex_automata::meta::Regex>,
    /// Patterns (and `format:NAME`s) compiled for [`super::validate`]:
    /// the search regex and whether a miss means no match in ECMA-262;
    /// `None` for one that did not translate.
    pub exact_patterns: HashMap<String, Option<(regex_automata::meta::Regex, bool)>>,
    /// How many times a recursive `$ref` was cut off at `max_depth`.
    pub pruned: u64,
    /// How many keywords' negations were dropped or approximated from below
    /// (see [`Lowerer::negate`]).
    pub negations_dropped: u64,
    /// Context-free mode (`Some`): recursive `$ref`s and unbounded values
    /// become references to rules instead of errors and depth bounds.
    pub rules: Option<Rules>,
    /// The origin of the schema object being expanded (see [`Origin`]).
    scope: Origin,
    /// The id the next expanded schema object gets.
    next_node_id: u32,
    /// How many [`Lowerer::expand`]s are under way: a node expanded inside
    /// another is part of it, not a source of its own.
    expanding: u32,
    /// Whether a sub-schema may have an `$id` of its own (the document's
    /// text holds the key): else no `$ref` is looked for in one.
    pub(crate) may_embed: bool,
    /// The document's resources and anchors, indexed when a `$ref` first
    /// names one by URI or by anchor.
    resources: std::cell::OnceCell<Result<Resources, GrammarError>>,
    /// What is left of the document's budget for checking `enum` values
    /// ([`super::validate::MAX_VALIDATE_DOCUMENT_STEPS`]).
    pub validate_steps_left: u64,
}

/// What a rule of the context-free result stands for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum RuleTarget {
    /// The sub-schema at this JSON pointer.
    Schema(String),
    /// Any JSON value.
    AnyValue,
    /// The texts every one of these regexes matches (a string under a
    /// pattern and a length): a rule of one [`tokensieve_grammar::pieces::Piece::Intersection`].
    Intersection(Vec<String>),
    /// An object key that is none of these names: a verbatim rule (see
    /// [`SchemaGrammar::verbatim`]).
    KeyComplement(Vec<String>),
}

/// How many times a recursive `$ref` merged into a conjunction with other
/// sub-schemas (where it cannot be a rule of its own) is expanded again
/// within itself: unfolding is exact, and where the conjunction's other
/// parts forbid what the recursion needs (a string property matched by a
/// `patternProperties` whose value is the recursive object), it ends.
const MAX_UNFOLDINGS: usize = 1;

/// What [`Lowerer::recursive_conjunct`] decides of a conjunction.
enum Recursion {
    /// The node at this index, a `$ref` to the sub-schema at this pointer,
    /// is the whole conjunction: the target's rule.
    Rule(usize, String),
    /// No value satisfies the conjunction.
    Empty,
}

/// The rules of the context-free result. Rule `i` is written in the regex of
/// another as the character [`placeholder`](tokensieve_grammar::compose::placeholder)`(i)`.
#[derive(Default)]
pub(crate) struct Rules {
    index: HashMap<(RuleTarget, u32), usize>,
    bodies: Vec<Option<String>>,
    pending: Vec<(usize, RuleTarget, u32)>,
    /// The rules that are intersections, with their regexes.
    intersections: Vec<(usize, Vec<String>)>,
    /// The verbatim rules, with what is known of them.
    verbatim: Vec<(usize, Verbatim)>,
    /// Whether the schema writes no placeholder character, so that a rule
    /// of a schema without recursion is no error (asked once).
    placeholders_free: Option<bool>,
}

impl Rules {
    /// A new rule for `key` whose body is `text`: its id.
    fn add(&mut self, key: (RuleTarget, u32), text: &str) -> usize {
        let id = self.bodies.len();
        self.bodies.push(Some(text.to_owned()));
        self.index.insert(key, id);
        id
    }
}

/// The result of the context-free lowering: regexes in which the characters
/// [`placeholder`](tokensieve_grammar::compose::placeholder)`(i)` stand for rule `i`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchemaGrammar {
    /// The regex of a whole document.
    pub root: String,
    /// Rule `i`'s regex.
    pub rules: Vec<String>,
    /// What rule `i` stands for: the JSON pointer of its sub-schema, or
    /// `"(any value)"`, or the pointer of the string whose constraints
    /// intersect.
    pub rule_sources: Vec<String>,
    /// The rules that are the intersection of regexes (rule index, the
    /// regexes): no regex can write them, so their text in `rules`
    /// matches nothing, and a consumer that cannot build an intersection
    /// must refuse the grammar ([`tokensieve_grammar::pieces::split_with`] takes them).
    pub intersections: Vec<(usize, Vec<String>)>,
    /// The rules that are one reference-free regex, with what the lowering
    /// knows of them ([`Verbatim`]): the key of an object's extra members,
    /// any string but its property names, which is a big regex of a small
    /// language. Their text in `rules` is the regex; a consumer that takes
    /// them ([`tokensieve_grammar::pieces::split_with`]) keeps the text unparsed in the
    /// place of each reference, for a backend that parses it only if an
    /// output enters it.
    pub verbatim: Vec<(usize, Verbatim)>,
}

pub(crate) fn lower_document(
    schema: &Value,
    may_embed: bool,
    options: &SpecOptions,
    max_whitespace: u32,
    limits: &LoweringLimits,
) -> Result<String, GrammarError> {
    let mut lowerer = Lowerer::new(schema, options, max_whitespace, limits)?;
    lowerer.may_embed = may_embed;
    let root = Node {
        v: schema,
        ptr: String::new(),
    };
    let lang = lowerer.lower_nodes(vec![root], 0)?;
    match lang {
        Lang::Never => Err(GrammarError::schema_at(
            "",
            "no JSON value satisfies this schema (within the bounds of the lowering)",
        )),
        Lang::Re(rx) => Ok(rx.text),
    }
}

/// The context-free lowering of a whole document: `lower_document` with
/// recursion and unbounded values as rules.
pub(crate) fn lower_document_cf(
    schema: &Value,
    may_embed: bool,
    options: &SpecOptions,
    max_whitespace: u32,
    limits: &LoweringLimits,
) -> Result<SchemaGrammar, GrammarError> {
    let mut lowerer = Lowerer::new(schema, options, max_whitespace, limits)?;
    lowerer.may_embed = may_embed;
    lowerer.rules = Some(Rules::default());
    let root = Node {
        v: schema,
        ptr: String::new(),
    };
    let root = match lowerer.lower_nodes(vec![root], 0)? {
        Lang::Never => {
            return Err(GrammarError::schema_at(
                "",
                "no JSON value satisfies this schema (within the bounds of the lowering)",
            ));
        }
        Lang::Re(rx) => rx.text,
    };
    while let Some((id, target, level)) = lowerer.rules.as_mut().and_then(|r| r.pending.pop()) {
        let body = match &target {
            RuleTarget::AnyValue => lowerer.any_of_kind(ALL_TYPES, 1, level)?,
            RuleTarget::Intersection(_) | RuleTarget::KeyComplement(_) => {
                unreachable!("intersections and key complements are never pending")
            }
            RuleTarget::Schema(ptr) => {
                let v = resolve_pointer(schema, ptr).expect("a resolved target");
                lowerer.ref_stack = vec![ptr.clone()];
                let node = Node {
                    v,
                    ptr: ptr.clone(),
                };
                let body = lowerer.lower_nodes(vec![node], level);
                lowerer.ref_stack.clear();
                body?
            }
        };
        let Some(text) = body.text() else {
            let at = match &target {
                RuleTarget::Schema(ptr) => ptr.as_str(),
                RuleTarget::AnyValue
                | RuleTarget::Intersection(_)
                | RuleTarget::KeyComplement(_) => "",
            };
            return Err(GrammarError::schema_at(
                at,
                "no finite JSON value satisfies this recursive sub-schema",
            ));
        };
        let rules = lowerer.rules.as_mut().expect("context-free mode");
        rules.bodies[id] = Some(text.to_owned());
    }
    let rules = lowerer.rules.take().expect("context-free mode");
    let mut rule_sources = vec![String::new(); rules.bodies.len()];
    for ((target, _), &id) in &rules.index {
        rule_sources[id] = match target {
            RuleTarget::Schema(ptr) if ptr.is_empty() => "#".to_owned(),
            RuleTarget::Schema(ptr) => ptr.clone(),
            RuleTarget::AnyValue => "(any value)".to_owned(),
            RuleTarget::Intersection(_) => "(an intersection of string constraints)".to_owned(),
            RuleTarget::KeyComplement(_) => "(a key none of the named properties)".to_owned(),
        };
    }
    let bodies = rules.bodies;
    let rules_intersections = rules.intersections;
    let verbatim = rules.verbatim;
    // Asked already where a verbatim rule was made.
    if !bodies.is_empty() && rules.placeholders_free != Some(true) && uses_placeholder_range(schema)
    {
        return Err(GrammarError::unsupported_at(
            "",
            "characters of Unicode planes 15 and 16 (private use) in a recursive schema: \
             they stand for rules in its grammar",
        ));
    }
    let rules = bodies
        .into_iter()
        .map(|b| b.expect("every rule was lowered"))
        .collect();
    Ok(SchemaGrammar {
        root,
        rules,
        rule_sources,
        intersections: rules_intersections,
        verbatim,
    })
}

/// Rule `id` written in a regex: its placeholder character.
fn placeholder_lang(id: usize) -> Lang {
    let c = tokensieve_grammar::compose::placeholder(id).expect("under MAX_PLACEHOLDERS");
    Lang::lit(c.encode_utf8(&mut [0; 4]))
}

/// Whether any string of `v` (keys included) holds a character of the
/// placeholder planes, or a pattern escape that could write one.
fn uses_placeholder_range(v: &Value) -> bool {
    fn text(s: &str) -> bool {
        // Each case needs a backslash or a character from U+C0000 up (its
        // UTF-8 lead byte F3 or F4): most strings (descriptions) have
        // neither and are read once, not lowercased and searched ten times.
        if !s.bytes().any(|b| b == b'\\' || b >= 0xF3) {
            return false;
        }
        let lower = s.to_ascii_lowercase();
        s.chars()
            .any(|c| c as u32 >= tokensieve_grammar::compose::PLACEHOLDER_BASE)
            || lower.contains("\\u{f")
            || lower.contains("\\u{10")
            || [
                "\\udb8", "\\udb9", "\\udba", "\\udbb", "\\udbc", "\\udbd", "\\udbe", "\\udbf",
            ]
            .iter()
            .any(|e| lower.contains(e))
    }
    match v {
        Value::String(s) => text(s),
        Value::Array(items) => items.iter().any(uses_placeholder_range),
        Value::Object(map) => map
            .iter()
            .any(|(k, v)| text(k) || uses_placeholder_range(v)),
        _ => false,
    }
}

/// The value at a resolved JSON pointer (`""` is the document).
fn resolve_pointer<'a>(doc: &'a Value, ptr: &str) -> Option<&'a Value> {
    if ptr.is_empty() {
        Some(doc)
    } else {
        doc.pointer(ptr)
    }
}

pub(crate) fn any_object(
    options: &SpecOptions,
    max_whitespace: u32,
    limits: &LoweringLimits,
) -> Result<String, GrammarError> {
    let Some(depth) = options.max_depth else {
        return Err(GrammarError::unsupported_at(
            "",
            "any JSON object without `max_depth` (a regex cannot express unbounded nesting)",
        ));
    };
    if depth == 0 {
        return Err(GrammarError::InvalidConfig(
            "max_depth 0 leaves no room for an object".into(),
        ));
    }
    let empty = Value::Object(Map::new());
    let mut lowerer = Lowerer::new(&empty, options, max_whitespace, limits)?;
    let value = lowerer.any_value(depth - 1, 1)?;
    let member = lowerer.layout.member(any_string(), value);
    let body = rx::seq([
        member.clone(),
        rx::repeat(rx::seq([lowerer.layout.item_sep(0), member]), 0, None),
    ]);
    let lang = lowerer.layout.container('{', body, true, '}', 0);
    lowerer.check(&lang, "")?;
    Ok(lang
        .text()
        .expect("an object regex is never empty")
        .to_string())
}

impl<'a> Lowerer<'a> {
    pub(crate) fn new(
        root: &'a Value,
        options: &'a SpecOptions,
        max_whitespace: u32,
        limits: &'a LoweringLimits,
    ) -> Result<Self, GrammarError> {
        Ok(Lowerer {
            root,
            options,
            layout: Layout::new(&options.whitespace, max_whitespace)?,
            limits,
            ref_stack: Vec::new(),
            lowering: Vec::new(),
            depth: 0,
            cache: HashMap::new(),
            any_cache: HashMap::new(),
            name_regexes: HashMap::new(),
            exact_patterns: HashMap::new(),
            pruned: 0,
            negations_dropped: 0,
            rules: None,
            scope: Vec::new(),
            next_node_id: 0,
            expanding: 0,
            may_embed: true,
            resources: std::cell::OnceCell::new(),
            validate_steps_left: super::validate::MAX_VALIDATE_DOCUMENT_STEPS,
        })
    }

    /// Errors when `lang` is over a limit.
    pub fn check(&self, lang: &Lang, ptr: &str) -> Result<(), GrammarError> {
        let limits = self.limits;
        let at = if ptr.is_empty() { "schema root" } else { ptr };
        if lang.len() > limits.max_regex_len {
            return Err(GrammarError::LimitExceeded {
                what: format!("regex length for {at} ({} bytes)", lang.len()),
                limit: limits.max_regex_len,
                knob: "LoweringLimits::max_regex_len".into(),
            });
        }
        if lang.weight() > limits.max_expanded_len {
            return Err(GrammarError::LimitExceeded {
                what: format!("expanded regex size for {at} ({} bytes)", lang.weight()),
                limit: limits.max_expanded_len as usize,
                knob: "LoweringLimits::max_expanded_len".into(),
            });
        }
        if lang.nest() > limits.max_nest {
            return Err(GrammarError::LimitExceeded {
                what: format!("regex nesting depth for {at} ({})", lang.nest()),
                limit: limits.max_nest as usize,
                knob: "LoweringLimits::max_nest".into(),
            });
        }
        Ok(())
    }

    pub fn check_repeat(&self, n: u64, ptr: &str) -> Result<u32, GrammarError> {
        if n > u64::from(self.limits.max_repeat) {
            return Err(GrammarError::LimitExceeded {
                what: format!("repetition count {n} at {ptr}"),
                limit: self.limits.max_repeat as usize,
                knob: "LoweringLimits::max_repeat".into(),
            });
        }
        Ok(n as u32)
    }

    /// Depth of values the schema leaves unconstrained.
    pub fn free_depth(&self) -> u32 {
        self.options
            .max_depth
            .unwrap_or(super::DEFAULT_FREE_VALUE_DEPTH)
    }

    /// Whether unbounded nesting becomes rules (context-free mode, with no
    /// `max_depth` asked for).
    /// Whether this is the context-free lowering (rules allowed).
    pub(crate) fn context_free(&self) -> bool {
        self.rules.is_some()
    }

    pub(crate) fn unbounded(&self) -> bool {
        self.rules.is_some() && self.options.max_depth.is_none()
    }

    /// The placeholder of the rule for `target` at `level`, registered (and
    /// its body queued) on first use.
    fn rule_ref(
        &mut self,
        target: RuleTarget,
        level: u32,
        ptr: &str,
    ) -> Result<Lang, GrammarError> {
        if self.layout.level_matters() {
            return Err(GrammarError::unsupported_at(
                ptr,
                "recursion or values of any depth with an indented layout",
            ));
        }
        let what = || format!("grammar rules for recursive sub-schemas at {ptr}");
        let (id, new) = self.rule_id((target.clone(), level), what)?;
        if new {
            let rules = self.rules.as_mut().expect("context-free mode");
            rules.bodies.push(None);
            rules.pending.push((id, target, level));
        }
        Ok(placeholder_lang(id))
    }

    /// The id of the rule for `key`, and whether it is new (its body still
    /// to be pushed by the caller), within `LoweringLimits::max_rules`.
    fn rule_id(
        &mut self,
        key: (RuleTarget, u32),
        what: impl FnOnce() -> String,
    ) -> Result<(usize, bool), GrammarError> {
        let limit = self.limits.max_rules.min(MAX_PLACEHOLDERS);
        let rules = self.rules.as_mut().expect("context-free mode");
        if let Some(&id) = rules.index.get(&key) {
            return Ok((id, false));
        }
        let id = rules.bodies.len();
        if id >= limit {
            return Err(GrammarError::LimitExceeded {
                what: what(),
                limit,
                knob: "LoweringLimits::max_rules".into(),
            });
        }
        rules.index.insert(key, id);
        Ok((id, true))
    }

    /// In context-free mode, a rule for the texts every one of `regexes`
    /// matches (`None` outside it: a regex cannot say this).
    pub(crate) fn intersection_ref(
        &mut self,
        regexes: Vec<String>,
        ptr: &str,
    ) -> Result<Option<Lang>, GrammarError> {
        if self.rules.is_none() {
            return Ok(None);
        }
        let key = (RuleTarget::Intersection(regexes.clone()), 0);
        let what = || format!("grammar rules, at the string constraints of {ptr}");
        let (id, new) = self.rule_id(key, what)?;
        if new {
            let rules = self.rules.as_mut().expect("context-free mode");
            // Matches nothing: what a consumer that ignores
            // `intersections` gets, never a wider language.
            rules.bodies.push(Some("[^\\x00-\\x{10FFFF}]".into()));
            rules.intersections.push((id, regexes));
        }
        Ok(Some(placeholder_lang(id)))
    }

    /// A quoted object key that is none of `names`, as `make` writes it
    /// (the key's language and what is known of it); in context-free mode,
    /// where that text is long ([`VERBATIM_KEY_MIN_LEN`]), a verbatim rule
    /// of it, made the first time these names ask for it. Written inline
    /// outside context-free mode, past the rule limit, or where the schema
    /// writes a placeholder character (a rule would then be an error in a
    /// schema that needs none).
    pub(crate) fn key_complement(
        &mut self,
        names: &[String],
        make: impl FnOnce() -> (Lang, Verbatim),
    ) -> Lang {
        let schema = self.root;
        let limit = self.limits.max_rules.min(MAX_PLACEHOLDERS);
        let Some(rules) = self.rules.as_mut() else {
            return make().0;
        };
        let key = (RuleTarget::KeyComplement(names.to_vec()), 0);
        if let Some(&id) = rules.index.get(&key) {
            return placeholder_lang(id);
        }
        // Heavy keys left unwritten where the backend asks for the names
        // alone: a key this heavy is a verbatim rule below anyway (its
        // text as long as `VERBATIM_KEY_MIN_LEN` but in a few cases).
        if self.limits.other_keys_unwritten
            && rules.bodies.len() < limit
            && let Some(verbatim) = super::structure::deferred_key_complement(names)
            && *rules
                .placeholders_free
                .get_or_insert_with(|| !uses_placeholder_range(schema))
        {
            let keys = Arc::new(OtherKeys::new(names));
            let id = rules.add(key, &keys.stand_in());
            let keys = Some(keys);
            rules.verbatim.push((id, Verbatim { keys, ..verbatim }));
            return placeholder_lang(id);
        }
        let (lang, verbatim) = make();
        if lang.len() < VERBATIM_KEY_MIN_LEN
            || rules.bodies.len() >= limit
            || !*rules
                .placeholders_free
                .get_or_insert_with(|| !uses_placeholder_range(schema))
        {
            return lang;
        }
        let Some(text) = lang.text() else {
            return lang;
        };
        let id = rules.add(key, text);
        // The names go with the text, for a backend that builds the key
        // from them (made only here: inline keys need no names).
        let keys = Some(Arc::new(OtherKeys::new(names)));
        rules.verbatim.push((id, Verbatim { keys, ..verbatim }));
        placeholder_lang(id)
    }

    /// In context-free mode, a node that is only a `$ref` (and annotations)
    /// to a sub-schema already being expanded: the target, whose rule it
    /// becomes.
    fn recursive_ref(&self, node: &Node<'a>) -> Result<Option<(&'a Value, String)>, GrammarError> {
        Ok(self
            .pure_ref(node)?
            .filter(|(_, target_ptr)| self.ref_stack.contains(target_ptr)))
    }

    /// A conjunction of one recursive `$ref` ([`Lowerer::recursive_ref`])
    /// with other sub-schemas, decided from their `type`s alone, without
    /// expanding the target again (which would recurse forever):
    /// [`Recursion::Rule`] where the others allow every value of the
    /// target (they name only types, each a superset of the types the
    /// target declares: `"items": {"type": "object", "anyOf":
    /// [{"$ref": "#/definitions/node"}]}` around an object definition), so
    /// that the conjunction is exactly the target; [`Recursion::Empty`]
    /// where some other allows none of the types the target declares, or
    /// is `false` (a string property also matched by a `patternProperties`
    /// whose value is the recursive object).
    fn recursive_conjunct(&self, nodes: &[Node<'a>]) -> Result<Option<Recursion>, GrammarError> {
        for (i, node) in nodes.iter().enumerate() {
            let Some((target, target_ptr)) = self.recursive_ref(node)? else {
                continue;
            };
            let kinds = declared_types(target);
            let others = nodes
                .iter()
                .enumerate()
                .filter(|&(j, _)| j != i)
                .map(|(_, n)| n.v);
            if others
                .clone()
                .any(|v| matches!(v, Value::Bool(false)) || kinds & declared_types(v) == 0)
            {
                return Ok(Some(Recursion::Empty));
            }
            let implied = others.clone().all(|v| match v {
                Value::Bool(b) => *b,
                Value::Object(obj) => obj.iter().all(|(k, v)| {
                    k == "type" && type_mask(v, "").is_ok_and(|t| kinds & !t == 0)
                        || !is_known_assertion(k) && k != "format"
                }),
                _ => false,
            });
            return Ok(implied.then_some(Recursion::Rule(i, target_ptr)));
        }
        Ok(None)
    }

    /// The target of a node that is only a `$ref` (and annotations).
    fn pure_ref(&self, node: &Node<'a>) -> Result<Option<(&'a Value, String)>, GrammarError> {
        let Some(obj) = node.v.as_object() else {
            return Ok(None);
        };
        let Some(Value::String(reference)) = obj.get("$ref") else {
            return Ok(None);
        };
        if obj
            .keys()
            .any(|k| k != "$ref" && (is_known_assertion(k) || k == "format"))
        {
            return Ok(None);
        }
        self.resolve(reference, &node.at("$ref")).map(Some)
    }

    /// Kinds outside which `node` has no value: those its own `type` and
    /// its `$ref` target's allow (all where neither says).
    fn own_types(&self, node: &Node<'a>) -> u8 {
        let target = match node.v.get("$ref") {
            Some(Value::String(reference)) => self.resolve(reference, &node.at("$ref")).ok(),
            _ => None,
        };
        declared_types(node.v) & target.map_or(ALL_TYPES, |(t, _)| declared_types(t))
    }

    /// In context-free mode, a node that is only a `$ref` to a sub-schema
    /// whose language is big: the target's rule, so that each definition is
    /// written once however many places use it (inlined, a schema that uses
    /// its definitions many times grows past every regex limit).
    fn shared_ref(&mut self, node: &Node<'a>, level: u32) -> Result<Option<Lang>, GrammarError> {
        let Some((target, target_ptr)) = self.pure_ref(node)? else {
            return Ok(None);
        };
        self.ref_stack.push(target_ptr.clone());
        let lang = self.lower_nodes(
            vec![Node {
                v: target,
                ptr: target_ptr.clone(),
            }],
            level,
        );
        self.ref_stack.pop();
        let lang = lang?;
        if lang.len() < SHARED_RULE_MIN_LEN {
            return Ok(Some(lang));
        }
        self.rule_ref(RuleTarget::Schema(target_ptr), level, &node.ptr)
            .map(Some)
    }

    /// The conjunction of `nodes` (a value valid under all of them), at
    /// nesting `level`.
    pub fn lower_nodes(&mut self, nodes: Vec<Node<'a>>, level: u32) -> Result<Lang, GrammarError> {
        let level_key = if self.layout.level_matters() {
            level
        } else {
            0
        };
        if self.unbounded() {
            match self.recursive_conjunct(&nodes)? {
                Some(Recursion::Rule(i, target)) => {
                    return self.rule_ref(RuleTarget::Schema(target), level_key, &nodes[i].ptr);
                }
                Some(Recursion::Empty) => return Ok(Lang::Never),
                None => {}
            }
        }
        if self.unbounded()
            && !self.layout.level_matters()
            && nodes.len() == 1
            && let Some(lang) = self.shared_ref(&nodes[0], level_key)?
        {
            return Ok(lang);
        }
        let cache_key = (nodes.len() == 1 && self.options.max_depth.is_none())
            .then(|| (nodes[0].ptr.clone(), level_key));
        if let Some(key) = &cache_key
            && let Some(hit) = self.cache.get(key)
        {
            return Ok(hit.clone());
        }
        // A sub-schema's language does not depend on where it is lowered
        // (the cache above says as much): met inside itself, it is its rule.
        if let Some((ptr, level)) = &cache_key
            && self.unbounded()
            && !self.layout.level_matters()
            && self.lowering.iter().any(|(p, l)| p == ptr && l == level)
        {
            return self.rule_ref(RuleTarget::Schema(ptr.clone()), *level, ptr);
        }
        let ptr = nodes.first().map(|n| n.ptr.clone()).unwrap_or_default();
        self.enter_schema(&ptr)?;
        let base = self.ref_stack.len();
        if let Some(key) = &cache_key {
            self.lowering.push(key.clone());
        }
        let result = self.lower_nodes_inner(nodes, level, base);
        if cache_key.is_some() {
            self.lowering.pop();
        }
        self.ref_stack.truncate(base);
        self.depth -= 1;
        let lang = result?;
        self.check(&lang, &ptr)?;
        let lang = match &cache_key {
            Some((_, level)) => self.shared_node(lang, &ptr, *level),
            None => lang,
        };
        if let Some(key) = cache_key {
            self.cache.insert(key, lang.clone());
        }
        Ok(lang)
    }

    /// In context-free mode with no `max_depth`, the language `lang` of
    /// the sub-schema at `ptr` as the placeholder of a new rule whose body
    /// it is, when it is long ([`SHARED_NODE_MIN_LEN`]); `lang` itself for
    /// the document's root, a sub-schema that already has a rule (whose
    /// body this may be), or past the rule limit.
    fn shared_node(&mut self, lang: Lang, ptr: &str, level: u32) -> Lang {
        if !self.unbounded()
            || self.layout.level_matters()
            || ptr.is_empty()
            || lang.len() < SHARED_NODE_MIN_LEN
        {
            return lang;
        }
        let limit = self.limits.max_rules.min(MAX_PLACEHOLDERS);
        let rules = self.rules.as_mut().expect("context-free mode");
        let key = (RuleTarget::Schema(ptr.to_owned()), level);
        if rules.index.contains_key(&key) || rules.bodies.len() >= limit {
            return lang;
        }
        let Some(text) = lang.text() else {
            return lang;
        };
        placeholder_lang(rules.add(key, text))
    }

    fn lower_nodes_inner(
        &mut self,
        nodes: Vec<Node<'a>>,
        level: u32,
        base: usize,
    ) -> Result<Lang, GrammarError> {
        let mut merged = Merged::new(base);
        for node in nodes {
            if !self.expand(&mut merged, node)? {
                return Ok(Lang::Never);
            }
        }
        self.lower_merged(merged, level)
    }

    /// Adds `node` to the conjunction. `Ok(false)`: it is unsatisfiable.
    /// Counts one more level of sub-schema nesting (the caller decrements
    /// `depth` when it leaves); past `max_schema_depth` it is an error.
    pub(crate) fn enter_schema(&mut self, ptr: &str) -> Result<(), GrammarError> {
        self.depth += 1;
        if self.depth > self.limits.max_schema_depth {
            self.depth -= 1;
            return Err(GrammarError::LimitExceeded {
                what: format!("sub-schema nesting at {ptr}"),
                limit: self.limits.max_schema_depth as usize,
                knob: "LoweringLimits::max_schema_depth".into(),
            });
        }
        Ok(())
    }

    /// Adds `node` to the conjunction `m`, as a schema object of its own
    /// within the current scope (see [`Origin`]). `Ok(false)`: it is
    /// unsatisfiable.
    pub fn expand(&mut self, m: &mut Merged<'a>, node: Node<'a>) -> Result<bool, GrammarError> {
        if self.expanding == 0 {
            m.sources.push(node.v);
        }
        let id = self.next_node_id;
        self.next_node_id = self.next_node_id.wrapping_add(1);
        self.scope.push(id);
        self.expanding += 1;
        let result = self.expand_node(m, node);
        self.expanding -= 1;
        self.scope.pop();
        result
    }

    /// [`Lowerer::expand`] under `origin` (the origin of the schema object
    /// that holds `node`), for sub-schemas applied after the merge: a
    /// disjunction's branches, `dependentSchemas`.
    pub(crate) fn expand_under(
        &mut self,
        m: &mut Merged<'a>,
        node: Node<'a>,
        origin: &[u32],
    ) -> Result<bool, GrammarError> {
        let saved = std::mem::replace(&mut self.scope, origin.to_vec());
        let result = self.expand(m, node);
        self.scope = saved;
        result
    }

    fn expand_node(&mut self, m: &mut Merged<'a>, node: Node<'a>) -> Result<bool, GrammarError> {
        let obj = match node.v {
            Value::Bool(b) => return Ok(*b),
            Value::Object(obj) => obj,
            _ => {
                return Err(GrammarError::schema_at(
                    &node.ptr,
                    "a schema must be an object or a boolean",
                ));
            }
        };
        if let Some(reference) = obj.get("$ref") {
            let ref_ptr = node.at("$ref");
            let Value::String(reference) = reference else {
                return Err(GrammarError::schema_at(ref_ptr, "`$ref` must be a string"));
            };
            let (target, target_ptr) = self.resolve(reference, &ref_ptr)?;
            if !m.refs.contains(&target_ptr) {
                let entered = self.ref_stack[..m.base]
                    .iter()
                    .filter(|p| **p == target_ptr)
                    .count();
                if entered > 0 {
                    match self.options.max_depth {
                        None if entered <= MAX_UNFOLDINGS => {}
                        None => {
                            return Err(GrammarError::unsupported_at(
                                ref_ptr,
                                format!("recursive `$ref` {reference:?} without `max_depth`"),
                            ));
                        }
                        Some(d) if entered as u32 > d => {
                            self.pruned += 1;
                            return Ok(false);
                        }
                        Some(_) => {}
                    }
                }
                self.ref_stack.push(target_ptr.clone());
                m.refs.push(target_ptr.clone());
                if !self.expand(
                    m,
                    Node {
                        v: target,
                        ptr: target_ptr,
                    },
                )? {
                    return Ok(false);
                }
            }
        }
        for key in ["$dynamicRef", "$recursiveRef"] {
            if obj.contains_key(key) {
                return Err(GrammarError::unsupported_at(
                    node.at(key),
                    format!("`{key}`"),
                ));
            }
        }
        self.keywords(m, &node, obj)
    }

    /// Resolves a `$ref` within the document: `#` or `#/json/pointer`, a
    /// resource's URI (its `$id` resolved against its base) with one of
    /// those, or an anchor (`#name`, `URI#name`). A pointer fragment
    /// written alone inside an embedded resource (a sub-schema with an
    /// `$id` of its own) is that resource's: looked up from it first,
    /// then (what authors of real schemas often mean, and the only reading
    /// left) from the root.
    pub(crate) fn resolve(
        &self,
        reference: &str,
        ref_ptr: &str,
    ) -> Result<(&'a Value, String), GrammarError> {
        let pointer_only = reference
            .strip_prefix('#')
            .is_some_and(|f| f.is_empty() || f.starts_with('/') || f.starts_with("%2F"));
        let nothing =
            || GrammarError::schema_at(ref_ptr, format!("`$ref` {reference:?} points to nothing"));
        if !pointer_only {
            let resources = self.resources().as_ref().map_err(Clone::clone)?;
            let Some((at, fragment)) = resources.find(reference, ref_ptr)? else {
                return Err(GrammarError::unsupported_at(
                    ref_ptr,
                    format!("`$ref` to another document ({reference:?})"),
                ));
            };
            let (resource, _) = follow_pointer(self.root, &at).ok_or_else(nothing)?;
            return follow_pointer(resource, &fragment)
                .map(|(target, path)| (target, at + &path))
                .ok_or_else(nothing);
        }
        let fragment = percent_decode(&reference[1..]);
        if let Some((resource, at)) = self.resource_of(ref_ptr)
            && let Some((target, path)) = follow_pointer(resource, &fragment)
        {
            return Ok((target, at + &path));
        }
        follow_pointer(self.root, &fragment).ok_or_else(nothing)
    }

    /// The document's resources and anchors, indexed on first use.
    fn resources(&self) -> &Result<Resources, GrammarError> {
        self.resources.get_or_init(|| Resources::index(self.root))
    }

    /// Whether every `$ref` of the document means the same wherever it is
    /// written: the document embeds no resource (no sub-schema with an
    /// `$id` of its own), so [`Lowerer::resolve`] may be asked without
    /// the reference's place (as [`super::validate`] asks).
    pub(crate) fn one_resource(&self) -> bool {
        !self.may_embed || self.resources().as_ref().is_ok_and(|r| r.count() == 1)
    }

    /// The innermost sub-schema with an `$id` of its own (not an anchor)
    /// on the way from the root to `ptr`, and its pointer.
    fn resource_of(&self, ptr: &str) -> Option<(&'a Value, String)> {
        if !self.may_embed {
            return None;
        }
        let mut node = self.root;
        let mut at = String::new();
        let mut found = None;
        for token in ptr.split('/').skip(1) {
            let token = unescape_token(token);
            node = match node {
                Value::Object(map) => map.get(&*token)?,
                Value::Array(items) => items.get(token.parse::<usize>().ok()?)?,
                _ => return found,
            };
            at.push('/');
            push_pointer_token(&mut at, &token);
            let id = ["$id", "id"]
                .iter()
                .find_map(|k| node.get(*k).and_then(Value::as_str));
            // In draft 7 and older an `$id` beside a `$ref` is ignored.
            let hidden = node.get("$ref").is_some() && ref_hides_id(self.root);
            if id.is_some_and(|id| !id.starts_with('#')) && !hidden {
                found = Some((node, at.clone()));
            }
        }
        found
    }

    fn keywords(
        &mut self,
        m: &mut Merged<'a>,
        node: &Node<'a>,
        obj: &'a Map<String, Value>,
    ) -> Result<bool, GrammarError> {
        let mut obj_part: Option<ObjPart<'a>> = None;
        let mut arr_part: Option<ArrPart<'a>> = None;
        for (key, v) in obj {
            let ptr = node.at(key);
            match key.as_str() {
                "type" => {
                    let mask = type_mask(v, &ptr)?;
                    m.types &= mask;
                }
                "enum" => {
                    let Value::Array(values) = v else {
                        return Err(GrammarError::schema_at(ptr, "`enum` must be an array"));
                    };
                    if values.len() > self.limits.max_enum_values {
                        return Err(GrammarError::LimitExceeded {
                            what: format!("`enum` of {} values at {ptr}", values.len()),
                            limit: self.limits.max_enum_values,
                            knob: "LoweringLimits::max_enum_values".into(),
                        });
                    }
                    intersect_enum(m, values.iter().collect());
                }
                "const" => intersect_enum(m, vec![v]),
                "minLength" | "maxLength" => {
                    let n = non_negative(v, &ptr)?;
                    m.constrained = true;
                    if key == "minLength" {
                        m.min_len = m.min_len.max(n);
                    } else {
                        m.max_len = Some(m.max_len.map_or(n, |x| x.min(n)));
                    }
                    m.len_ptr = ptr;
                }
                "pattern" => {
                    let Value::String(p) = v else {
                        return Err(GrammarError::schema_at(ptr, "`pattern` must be a string"));
                    };
                    m.constrained = true;
                    m.patterns.push((p, ptr));
                }
                "format" => {
                    let Value::String(f) = v else {
                        return Err(GrammarError::schema_at(ptr, "`format` must be a string"));
                    };
                    if super::format::format_regex(f).is_some() {
                        m.constrained = true;
                        m.formats.push((f, ptr));
                    }
                }
                "minimum" | "maximum" => {
                    if !v.is_number() {
                        return Err(GrammarError::schema_at(
                            ptr,
                            format!("`{key}` must be a number"),
                        ));
                    }
                    // Draft 4: a boolean `exclusiveMinimum` modifies `minimum`.
                    let sibling = if key == "minimum" {
                        "exclusiveMinimum"
                    } else {
                        "exclusiveMaximum"
                    };
                    let exclusive = obj.get(sibling) == Some(&Value::Bool(true));
                    m.constrained = true;
                    let bound = Bound {
                        value: v,
                        exclusive,
                        ptr,
                    };
                    if key == "minimum" {
                        m.lower.push(bound)
                    } else {
                        m.upper.push(bound)
                    }
                }
                "exclusiveMinimum" | "exclusiveMaximum" => match v {
                    Value::Bool(_) => {}
                    Value::Number(_) => {
                        m.constrained = true;
                        let bound = Bound {
                            value: v,
                            exclusive: true,
                            ptr,
                        };
                        if key == "exclusiveMinimum" {
                            m.lower.push(bound)
                        } else {
                            m.upper.push(bound)
                        }
                    }
                    _ => {
                        return Err(GrammarError::schema_at(
                            ptr,
                            format!("`{key}` must be a number"),
                        ));
                    }
                },
                "multipleOf" => {
                    let Some(k) = v.as_f64().filter(|k| *k > 0.0 && k.is_finite()) else {
                        return Err(GrammarError::schema_at(
                            ptr,
                            "`multipleOf` must be a number above 0",
                        ));
                    };
                    m.constrained = true;
                    if k == 1.0 || (k.fract() == 0.0) {
                        // Multiples of an integer are integers.
                        m.types &= !FRACTION;
                    }
                    if k != 1.0 {
                        m.multiple_of.push((k, ptr));
                    }
                }
                "properties" | "patternProperties" => {
                    let Value::Object(props) = v else {
                        return Err(GrammarError::schema_at(
                            ptr,
                            format!("`{key}` must be an object"),
                        ));
                    };
                    m.constrained = true;
                    let part = obj_part.get_or_insert_with(|| ObjPart {
                        props: Vec::new(),
                        additional: None,
                        pattern_props: Vec::new(),
                        origin: self.scope.clone(),
                    });
                    let pnode = Node { v, ptr };
                    for (name, schema) in props {
                        let entry = (name.as_str(), pnode.child(schema, name));
                        if key == "properties" {
                            part.props.push(entry);
                        } else {
                            part.pattern_props.push(entry);
                        }
                    }
                }
                "additionalProperties" => {
                    m.constrained = true;
                    let part = obj_part.get_or_insert_with(|| ObjPart {
                        props: Vec::new(),
                        additional: None,
                        pattern_props: Vec::new(),
                        origin: self.scope.clone(),
                    });
                    part.additional = Some(Node { v, ptr });
                }
                "required" => match v {
                    Value::Array(names) => {
                        m.constrained = true;
                        for name in names {
                            let Value::String(name) = name else {
                                return Err(GrammarError::schema_at(
                                    ptr,
                                    "`required` must list strings",
                                ));
                            };
                            if !m.required.contains(name) {
                                m.required.push(name.clone());
                            }
                        }
                    }
                    Value::Bool(false) => {}
                    Value::Bool(true) => {
                        return Err(GrammarError::unsupported_at(
                            ptr,
                            "draft-3 `required: true`",
                        ));
                    }
                    _ => return Err(GrammarError::schema_at(ptr, "`required` must be an array")),
                },
                "minProperties" | "maxProperties" => {
                    let n = non_negative(v, &ptr)?;
                    m.constrained = true;
                    if key == "minProperties" {
                        if m.min_props.as_ref().is_none_or(|(x, _)| n > *x) {
                            m.min_props = Some((n, ptr));
                        }
                    } else if m.max_props.as_ref().is_none_or(|(x, _)| n < *x) {
                        m.max_props = Some((n, ptr));
                    }
                }
                "propertyNames" => {
                    m.constrained = true;
                    m.property_names.push(Node { v, ptr });
                }
                "dependentRequired" | "dependentSchemas" | "dependencies" => {
                    let Value::Object(deps) = v else {
                        return Err(GrammarError::schema_at(
                            ptr,
                            format!("`{key}` must be an object"),
                        ));
                    };
                    m.constrained = true;
                    let dnode = Node { v, ptr };
                    for (trigger, dep) in deps {
                        let dep_ptr = dnode.at(trigger);
                        let dependency = match dep {
                            Value::Array(names) if key != "dependentSchemas" => Dependency::Names(
                                names
                                    .iter()
                                    .map(|n| {
                                        n.as_str().map(str::to_string).ok_or_else(|| {
                                            GrammarError::schema_at(
                                                &dep_ptr,
                                                "dependencies must list strings",
                                            )
                                        })
                                    })
                                    .collect::<Result<_, _>>()?,
                            ),
                            Value::Object(_) | Value::Bool(_) if key != "dependentRequired" => {
                                Dependency::Schema(dnode.child(dep, trigger), self.scope.clone())
                            }
                            _ => {
                                return Err(GrammarError::schema_at(
                                    dep_ptr,
                                    format!("a malformed `{key}` entry"),
                                ));
                            }
                        };
                        m.dependencies.push((trigger.clone(), dependency, dep_ptr));
                    }
                }
                "unevaluatedProperties" | "unevaluatedItems" => {
                    // Kept with its scope, even when it allows everything:
                    // it still evaluates every member (item) for the
                    // `unevaluated*` keywords of the schema objects around.
                    let entry = Unevaluated {
                        schema: Node { v, ptr },
                        origin: self.scope.clone(),
                    };
                    if entry.constrains() {
                        m.constrained = true;
                    }
                    if key == "unevaluatedProperties" {
                        m.uneval_props.push(entry);
                    } else {
                        m.uneval_items.push(entry);
                    }
                }
                "items" | "prefixItems" => {
                    m.constrained = true;
                    let part = arr_part.get_or_insert_with(|| ArrPart {
                        prefix: Vec::new(),
                        rest: None,
                        origin: self.scope.clone(),
                    });
                    let inode = Node {
                        v,
                        ptr: ptr.clone(),
                    };
                    match v {
                        Value::Array(items) => {
                            if !part.prefix.is_empty() {
                                return Err(GrammarError::schema_at(
                                    ptr,
                                    "both `prefixItems` and an array `items`",
                                ));
                            }
                            part.prefix = items
                                .iter()
                                .enumerate()
                                .map(|(i, s)| inode.child(s, &i.to_string()))
                                .collect();
                            if key == "items"
                                && let Some(additional) = obj.get("additionalItems")
                            {
                                part.rest = Some(node.child(additional, "additionalItems"));
                            }
                        }
                        _ if key == "items" => part.rest = Some(inode),
                        _ => {
                            return Err(GrammarError::schema_at(
                                ptr,
                                "`prefixItems` must be an array",
                            ));
                        }
                    }
                }
                "additionalItems" => {}
                "minItems" | "maxItems" => {
                    let n = non_negative(v, &ptr)?;
                    m.constrained = true;
                    if key == "minItems" {
                        m.min_items = m.min_items.max(n);
                    } else {
                        m.max_items = Some(m.max_items.map_or(n, |x| x.min(n)));
                    }
                    m.items_ptr = ptr;
                }
                "uniqueItems" => match v {
                    Value::Bool(true) => {
                        m.constrained = true;
                        m.unique_items = Some(ptr);
                    }
                    Value::Bool(false) => {}
                    _ => {
                        return Err(GrammarError::schema_at(
                            ptr,
                            "`uniqueItems` must be a boolean",
                        ));
                    }
                },
                "contains" => {
                    m.untracked
                        .push(("contains", ptr.clone(), self.scope.clone()));
                    let bound =
                        |k: &str| obj.get(k).map(|b| non_negative(b, &node.at(k))).transpose();
                    let min = bound("minContains")?.unwrap_or(1);
                    let max = bound("maxContains")?;
                    // `minContains: 0` and no `maxContains`: every array.
                    if min > 0 || max.is_some() {
                        m.constrained = true;
                        m.contains.push(Contains {
                            node: Node { v, ptr },
                            min,
                            max,
                        });
                    }
                }
                "not" => {
                    m.constrained = true;
                    m.nots.push(Node { v, ptr });
                }
                "allOf" | "anyOf" | "oneOf" => {
                    let Value::Array(branches) = v else {
                        return Err(GrammarError::schema_at(
                            ptr,
                            format!("`{key}` must be an array"),
                        ));
                    };
                    if branches.is_empty() {
                        return Err(GrammarError::schema_at(
                            ptr,
                            format!("`{key}` must not be empty"),
                        ));
                    }
                    let bnode = Node {
                        v,
                        ptr: ptr.clone(),
                    };
                    let branches: Vec<Node<'a>> = branches
                        .iter()
                        .enumerate()
                        .map(|(i, b)| bnode.child(b, &i.to_string()))
                        .collect();
                    if key == "allOf" {
                        for branch in branches {
                            if !self.expand(m, branch)? {
                                return Ok(false);
                            }
                        }
                    } else {
                        m.disjunctions.push(Disjunction {
                            one_of: key == "oneOf",
                            branches,
                            ptr,
                            origin: self.scope.clone(),
                        });
                    }
                }
                "if" if obj.contains_key("then") || obj.contains_key("else") => {
                    // Its branches are merged at lowering time, outside the
                    // scope tracking of `unevaluated*`: those are errors
                    // beside it.
                    m.untracked.push(("if", ptr.clone(), self.scope.clone()));
                    m.constrained = true;
                    m.conditionals.push(Conditional {
                        condition: node.child(v, "if"),
                        then: obj.get("then").map(|t| node.child(t, "then")),
                        otherwise: obj.get("else").map(|e| node.child(e, "else")),
                    });
                }
                // Alone it constrains nothing, but when it holds it evaluates
                // what it names.
                "if" => m.untracked.push(("if", ptr, self.scope.clone())),
                // `$ref` is handled by the caller; `then`/`else` without `if`,
                // `minContains`/`maxContains` without `contains`, annotations
                // and unknown keywords constrain nothing.
                _ => {}
            }
        }
        if let Some(part) = obj_part {
            Rc::make_mut(&mut m.obj_parts).push(part);
        }
        if let Some(part) = arr_part {
            Rc::make_mut(&mut m.arr_parts).push(part);
        }
        Ok(true)
    }

    /// The language of a merged conjunction: distributes over its
    /// disjunctions, then dispatches on types. An `enum` with more to it is
    /// first decided value by value ([`Lowerer::lower_finite`]).
    pub fn lower_merged(&mut self, m: Merged<'a>, level: u32) -> Result<Lang, GrammarError> {
        let more_than_enum = m.constrained
            || !m.disjunctions.is_empty()
            || !m.conditionals.is_empty()
            || !m.nots.is_empty();
        if m.enum_vals.is_some() && more_than_enum {
            self.lower_finite(m, level)
        } else {
            self.lower_cases(m, level)
        }
    }

    /// A conjunction with an `enum`: each value checked against its schema
    /// objects ([`super::validate`]) before anything is split into cases.
    /// Splitting may narrow (a `not` it cannot negate, an overlapping
    /// `oneOf`, a bound on depth) or fail where the values themselves are
    /// plainly valid or not. The values the check cannot decide go on
    /// through [`Lowerer::lower_cases`]; when that fails but some value was
    /// found valid, the undecided ones are dropped (a subset) rather than
    /// the schema refused.
    fn lower_finite(&mut self, mut m: Merged<'a>, level: u32) -> Result<Lang, GrammarError> {
        let types = m.types;
        let candidates: Vec<&'a Value> = m
            .enum_vals
            .take()
            .expect("caller checked")
            .into_iter()
            .filter(|v| types & kind_of(v) != 0)
            .collect();
        // The `not`s not yet split: those of its schema objects, and those
        // added from outside (a failed `if`, an overlapping `oneOf` branch).
        let nots: Vec<&'a Value> = m.nots.iter().map(|n| n.v).collect();
        let checked = self.check_enum_values(&m, &nots, &candidates);
        let mut valid = Vec::new();
        let mut undecided = Vec::new();
        for (v, (verdict, integer_tested)) in candidates.into_iter().zip(checked) {
            match verdict {
                Some(true) => valid.push((v, integer_tested)),
                Some(false) => {}
                None => undecided.push(v),
            }
        }
        let decided = self.enum_constants(&valid, types, level);
        if undecided.is_empty() {
            return Ok(decided);
        }
        m.enum_vals = Some(undecided);
        let (saved_refs, saved_depth) = (self.ref_stack.len(), self.depth);
        match self.lower_cases(m, level) {
            Ok(rest) => Ok(rx::alt([decided, rest])),
            Err(e) if !valid.is_empty() && is_expressiveness_error(&e) => {
                self.ref_stack.truncate(saved_refs);
                self.depth = saved_depth;
                Ok(decided)
            }
            Err(e) => Err(e),
        }
    }

    /// [`super::validate`]'s verdict on each of `candidates` under `m`'s
    /// schema objects and none of its negated ones nor of `nots`, with
    /// whether an integer-only `type` looked at it.
    fn check_enum_values(
        &mut self,
        m: &Merged<'a>,
        nots: &[&'a Value],
        candidates: &[&'a Value],
    ) -> Vec<(Option<bool>, bool)> {
        let mut negated = m.negated.clone();
        negated.extend_from_slice(nots);
        let mut validator = super::validate::Validator::new(self);
        candidates
            .iter()
            .map(|v| {
                let verdict = validator.check(&m.sources, &negated, v);
                (verdict, validator.integer_tested())
            })
            .collect()
    }

    /// Every spelling of each value, an integral number as an integer only
    /// where `types` allows no fraction or an integer-only `type` looked at
    /// it (`true` beside it): draft 4 calls `1.0` no integer.
    fn enum_constants(&self, values: &[(&'a Value, bool)], types: u8, level: u32) -> Lang {
        let integer_only = types & FRACTION == 0;
        rx::alt(values.iter().map(|&(v, integer_tested)| {
            match v {
                Value::Number(n) if (integer_only || integer_tested) && kind_of(v) == INTEGER => {
                    rx::alt(
                        super::layout::number_spellings(n)
                            .iter()
                            .filter(|s| !s.contains(['.', 'e', 'E']))
                            .map(|s| Lang::lit(s)),
                    )
                }
                _ => self.layout.constant(v, level),
            }
        }))
    }

    /// [`Lowerer::lower_merged`] without the value-by-value check of an
    /// `enum`: splits on conditionals and disjunctions.
    fn lower_cases(&mut self, mut m: Merged<'a>, level: u32) -> Result<Lang, GrammarError> {
        if let Some(conditional) = m.conditionals.pop() {
            return self.lower_conditional(m, conditional, level);
        }
        if m.disjunctions.is_empty() {
            return self.lower_simple(m, level);
        }
        self.drop_repeated_disjunctions(&mut m);
        let disjunction = m.disjunctions.remove(0);
        let mut alternatives = Vec::new();
        let mut shapes = Vec::new();
        for branch in &disjunction.branches {
            let saved = self.ref_stack.len();
            let result = self.lower_branch(
                m.clone(),
                branch.clone(),
                &disjunction.origin,
                level,
                disjunction.one_of,
            );
            self.ref_stack.truncate(saved);
            let (lang, shape) = result?;
            alternatives.push(lang);
            shapes.push(shape);
        }
        if disjunction.one_of {
            // A branch that may overlap others is restricted to the values
            // none of those others accepts: `B_i ∧ ¬B_j ∧ ...`. The
            // negation must be exact (no case dropped), else the restricted
            // branch would be needlessly small and the `oneOf` is an error.
            for i in 0..shapes.len() {
                let overlapping: Vec<usize> = (0..shapes.len())
                    .filter(|&j| {
                        j != i
                            && matches!((&shapes[i], &shapes[j]),
                                (Some(a), Some(b)) if !a.disjoint(b))
                    })
                    .collect();
                if overlapping.is_empty() || alternatives[i].is_never() {
                    continue;
                }
                let dropped_before = self.negations_dropped;
                let saved = self.ref_stack.len();
                let mut mb = m.clone();
                let branch = disjunction.branches[i].clone();
                let result = match self.expand_under(&mut mb, branch, &disjunction.origin) {
                    Ok(true) => {
                        mb.nots
                            .extend(overlapping.iter().map(|&j| disjunction.branches[j].clone()));
                        self.lower_merged(mb, level)
                    }
                    Ok(false) => Ok(Lang::Never),
                    Err(e) => Err(e),
                };
                self.ref_stack.truncate(saved);
                match result {
                    Ok(lang) if self.negations_dropped == dropped_before => {
                        alternatives[i] = lang;
                    }
                    _ => {
                        let (a, b) = (i.min(overlapping[0]), i.max(overlapping[0]));
                        return Err(GrammarError::unsupported_at(
                            &disjunction.ptr,
                            format!(
                                "`oneOf` whose branches {a} and {b} may overlap (an alternation would accept values valid under both)"
                            ),
                        ));
                    }
                }
            }
        }
        let lang = rx::alt(alternatives);
        self.check(&lang, &disjunction.ptr)?;
        Ok(lang)
    }

    /// `m ∧ ((if ∧ then) ∨ (¬if ∧ else))`. The two cases are disjoint and
    /// their union is exact; `¬if` goes through [`Lowerer::negate`], which
    /// may only narrow it (a case it cannot express is dropped).
    fn lower_conditional(
        &mut self,
        m: Merged<'a>,
        conditional: Conditional<'a>,
        level: u32,
    ) -> Result<Lang, GrammarError> {
        let mut alternatives = Vec::new();
        let saved = self.ref_stack.len();
        let mut holds = m.clone();
        let mut satisfiable = self.expand(&mut holds, conditional.condition.clone())?;
        if satisfiable && let Some(then) = conditional.then {
            satisfiable = self.expand(&mut holds, then)?;
        }
        if satisfiable {
            alternatives.push(self.lower_merged(holds, level)?);
        }
        self.ref_stack.truncate(saved);
        let mut fails = m;
        fails.nots.push(conditional.condition);
        let mut satisfiable = true;
        if let Some(otherwise) = conditional.otherwise {
            satisfiable = self.expand(&mut fails, otherwise)?;
        }
        if satisfiable {
            alternatives.push(self.lower_merged(fails, level)?);
        }
        self.ref_stack.truncate(saved);
        Ok(rx::alt(alternatives))
    }

    /// Drops from `m` each disjunction that repeats an earlier one (`X ∧ X =
    /// X`): a member named by `properties` and matched by a
    /// `patternProperties` that says the same `anyOf` of its items would
    /// otherwise be split into every pair of branches, each written out.
    /// Not where an `unevaluated*` keyword counts what the branches of each
    /// evaluate.
    fn drop_repeated_disjunctions(&self, m: &mut Merged<'a>) {
        if m.disjunctions.len() < 2 || !m.uneval_props.is_empty() || !m.uneval_items.is_empty() {
            return;
        }
        let mut i = 1;
        while i < m.disjunctions.len() {
            let (earlier, rest) = m.disjunctions.split_at(i);
            if earlier.iter().any(|d| self.same_disjunction(d, &rest[0])) {
                m.disjunctions.remove(i);
            } else {
                i += 1;
            }
        }
    }

    /// Whether two disjunctions hold the same values: both `oneOf` or both
    /// `anyOf`, branch by branch either the same `$ref` target or equal
    /// schemas that refer to nothing (a reference's meaning depends on
    /// where it is written).
    fn same_disjunction(&self, a: &Disjunction<'a>, b: &Disjunction<'a>) -> bool {
        a.one_of == b.one_of
            && a.branches.len() == b.branches.len()
            && a.branches.iter().zip(&b.branches).all(|(x, y)| {
                match (self.pure_ref(x), self.pure_ref(y)) {
                    (Ok(Some((_, p))), Ok(Some((_, q)))) => p == q,
                    _ => x.v == y.v && !refers(x.v),
                }
            })
    }

    /// One branch of a disjunction conjoined with the rest, and (for `oneOf`)
    /// an over-approximation of its values (`None`: provably no value).
    ///
    /// The branch is expanded in place under `origin` (that of the schema
    /// object holding the disjunction), so what it evaluates counts for the
    /// `unevaluated*` keywords of that object and its in-place ancestors.
    /// For `anyOf` that is the one chosen branch, while the specification
    /// counts every branch that holds: when several hold, fewer members
    /// count as evaluated here, and the language is narrower, never wider.
    fn lower_branch(
        &mut self,
        mut mb: Merged<'a>,
        branch: Node<'a>,
        origin: &[u32],
        level: u32,
        want_shape: bool,
    ) -> Result<(Lang, Option<Shape<'a>>), GrammarError> {
        // A recursive branch is decided by types alone, as in
        // `Lowerer::recursive_conjunct`: the target alone where the rest only
        // names types the target's own `type` lies within, nothing where the
        // rest allows none of them.
        if self.unbounded()
            && let Some((target, target_ptr)) = self.recursive_ref(&branch)?
        {
            let kinds = declared_types(target);
            if kinds & mb.types == 0 {
                // No values, so it overlaps no other branch.
                return Ok((Lang::Never, None));
            }
            if mb.only_types() && kinds & !mb.types == 0 {
                let lang = self.rule_ref(RuleTarget::Schema(target_ptr), level, &branch.ptr)?;
                // Of the target's own types: a `oneOf` of a string, the
                // recursive object and an array of them is disjoint.
                let shape = want_shape.then(|| Shape {
                    types: kinds,
                    ..Shape::any()
                });
                return Ok((lang, shape));
            }
        }
        // Where the rest of the conjunction adds nothing the branch does not
        // say itself (`"items": {"type": "object", "anyOf": [{"$ref": ..},
        // ..]}`, the targets objects), the branch's language is its own:
        // lowered as a node, it is cached and shared as a rule like any
        // sub-schema, not written out again at every place that lists it.
        let alone = self.unbounded() && mb.only_types() && mb.negated.is_empty();
        let alone = alone && mb.uneval_props.is_empty() && mb.uneval_items.is_empty();
        let alone = alone && self.own_types(&branch) & !mb.types == 0;
        let pruned_before = self.pruned;
        let saved = self.ref_stack.len();
        let (lang, shape) = if alone && !want_shape {
            (self.lower_nodes(vec![branch], level)?, None)
        } else if !self.expand_under(&mut mb, branch.clone(), origin)? {
            (Lang::Never, (self.pruned != pruned_before).then(Shape::any))
        } else {
            let shape = want_shape.then(|| self.shape_of_merged(&mb, 0));
            let lang = if alone {
                // What the expansion entered is not an ancestor of the node.
                self.ref_stack.truncate(saved);
                self.lower_nodes(vec![branch], level)?
            } else {
                self.lower_merged(mb, level)?
            };
            (lang, shape)
        };
        Ok((lang, shape))
    }

    /// An over-approximation of the values of a merged conjunction.
    fn shape_of_merged(&mut self, m: &Merged<'a>, depth: u32) -> Shape<'a> {
        let mut shape = Shape::any();
        shape.types = m.types;
        // A value satisfies a branch of each disjunction still to split: its
        // kind is one some branch's own `type` allows.
        for d in &m.disjunctions {
            shape.types &= d.branches.iter().fold(0, |t, b| t | declared_types(b.v));
        }
        if let Some(values) = &m.enum_vals {
            let values: Vec<&'a Value> = values
                .iter()
                .copied()
                .filter(|v| m.types & kind_of(v) != 0)
                .collect();
            shape.types = values.iter().fold(0, |t, v| t | kind_of(v));
            shape.values = Some(values);
        }
        if shape.types & STRING != 0 {
            // Patterns anchored at the start with a literal: the longest
            // such literal (every string starts with each of them).
            for (pattern, _) in &m.patterns {
                if let Ok(sp) = super::ecma::SearchPattern::parse(pattern) {
                    let prefix = sp.literal_prefix();
                    if prefix.len() > shape.prefix.len() {
                        shape.prefix = prefix;
                    }
                }
            }
        }
        if shape.types & OBJECT != 0 && depth < 3 {
            for name in &m.required {
                let nodes = super::structure::member_nodes(self, m, name).unwrap_or_default();
                let sub = self.shape_of_nodes(nodes, depth + 1);
                shape.props.push((name.clone(), sub));
            }
            for part in m.obj_parts.iter() {
                let closed_here = match &part.additional {
                    Some(Node {
                        v: Value::Bool(false),
                        ..
                    }) => true,
                    None => self.options.strict,
                    _ => false,
                };
                if closed_here && part.pattern_props.is_empty() {
                    let names: Vec<String> =
                        part.props.iter().map(|(n, _)| n.to_string()).collect();
                    shape.closed = Some(match shape.closed.take() {
                        None => names,
                        Some(old) => old.into_iter().filter(|n| names.contains(n)).collect(),
                    });
                }
            }
        }
        shape
    }

    fn shape_of_nodes(&mut self, nodes: Vec<Node<'a>>, depth: u32) -> Shape<'a> {
        let saved = self.ref_stack.len();
        let pruned_before = self.pruned;
        let mut m = Merged::new(saved);
        let mut shape = None;
        for node in nodes {
            match self.expand(&mut m, node) {
                Ok(true) => {}
                Ok(false) if self.pruned == pruned_before => {
                    shape = Some(Shape {
                        types: 0,
                        ..Shape::any()
                    })
                }
                _ => {
                    shape = Some(Shape::any());
                    break;
                }
            }
        }
        let shape = shape.unwrap_or_else(|| self.shape_of_merged(&m, depth));
        self.ref_stack.truncate(saved);
        shape
    }

    fn lower_simple(&mut self, mut m: Merged<'a>, level: u32) -> Result<Lang, GrammarError> {
        let nots = std::mem::take(&mut m.nots);
        let mut variants = vec![m];
        for node in nots {
            let mut next = Vec::new();
            for variant in variants {
                for mut case in self.negate(variant, &node, 0)? {
                    case.negated.push(node.v);
                    next.push(case);
                }
            }
            if next.len() > MAX_NOT_VARIANTS {
                return Err(GrammarError::LimitExceeded {
                    what: format!("cases of `not` at {}", node.ptr),
                    limit: MAX_NOT_VARIANTS,
                    knob: "MAX_NOT_VARIANTS".into(),
                });
            }
            variants = next;
        }
        let mut alternatives = Vec::new();
        for variant in variants {
            let lang = if variant.disjunctions.is_empty() && variant.nots.is_empty() {
                self.lower_types(variant, level)?
            } else {
                // A double negation conjoined a sub-schema with
                // combinators of its own: lowered like any conjunction
                // (one more level of sub-schema nesting).
                let ptr = variant
                    .disjunctions
                    .first()
                    .map(|d| d.ptr.clone())
                    .or_else(|| variant.nots.first().map(|n| n.ptr.clone()))
                    .unwrap_or_default();
                self.enter_schema(&ptr)?;
                let result = self.lower_merged(variant, level);
                self.depth -= 1;
                result?
            };
            alternatives.push(lang);
        }
        Ok(rx::alt(alternatives))
    }

    fn lower_types(&mut self, m: Merged<'a>, level: u32) -> Result<Lang, GrammarError> {
        if m.types == 0 {
            return Ok(Lang::Never);
        }
        if m.enum_vals.is_some() {
            return self.lower_enum(m, level);
        }
        let mut alternatives = Vec::new();
        if m.types & NULL != 0 {
            alternatives.push(Lang::lit("null"));
        }
        if m.types & BOOLEAN != 0 {
            alternatives.push(rx::alt([Lang::lit("true"), Lang::lit("false")]));
        }
        if m.types & (INTEGER | FRACTION) != 0 {
            alternatives.push(self.lower_number(&m)?);
        }
        if m.types & STRING != 0 {
            alternatives.push(self.lower_string(&m)?);
        }
        if m.types & ARRAY != 0 {
            alternatives.push(self.lower_array(&m, level)?);
        }
        if m.types & OBJECT != 0 {
            alternatives.push(self.lower_object_with_dependencies(m, level)?);
        }
        Ok(rx::alt(alternatives))
    }

    /// `m` and not `node`, as a union of cases. `¬(A ∧ B) = ¬A ∨ ¬B`, one
    /// case per keyword of `node`; a keyword whose negation cannot be
    /// expressed drops its case (the union shrinks: a subset), and when no
    /// case is left the `not` is an error.
    fn negate(
        &mut self,
        m: Merged<'a>,
        node: &Node<'a>,
        depth: u32,
    ) -> Result<Vec<Merged<'a>>, GrammarError> {
        if depth > 16 {
            return Err(GrammarError::unsupported_at(
                &node.ptr,
                "`not` nested this deeply",
            ));
        }
        let obj = match node.v {
            Value::Bool(true) => return Ok(Vec::new()),
            Value::Bool(false) => return Ok(vec![m]),
            Value::Object(obj) => obj,
            _ => {
                return Err(GrammarError::schema_at(
                    &node.ptr,
                    "a schema must be an object or a boolean",
                ));
            }
        };
        let mut cases = Vec::new();
        let mut dropped = false;
        for (key, v) in obj {
            if key == "format"
                && v.as_str()
                    .is_some_and(|f| super::format::format_regex(f).is_some())
            {
                // An enforced format has no case here: the union is smaller
                // than the negation under the assertion reading.
                self.negations_dropped += 1;
                continue;
            }
            if !is_known_assertion(key) || ANNOTATIONS.contains(&key.as_str()) {
                continue;
            }
            let ptr = node.at(key);
            match self.negate_keyword(m.clone(), node, obj, key, v, &ptr, depth)? {
                Some(found) => cases.extend(found),
                None => {
                    dropped = true;
                    self.negations_dropped += 1;
                }
            }
        }
        if dropped && cases.is_empty() {
            return Err(GrammarError::unsupported_at(
                &node.ptr,
                "this form of `not`",
            ));
        }
        Ok(cases)
    }

    /// `m` and not `{key: v}`; `None` when that cannot be expressed.
    #[allow(clippy::too_many_arguments)]
    fn negate_keyword(
        &mut self,
        mut m: Merged<'a>,
        node: &Node<'a>,
        obj: &'a Map<String, Value>,
        key: &str,
        v: &'a Value,
        ptr: &str,
        depth: u32,
    ) -> Result<Option<Vec<Merged<'a>>>, GrammarError> {
        let child = |v: &'a Value, k: &str| node.child(v, k);
        Ok(Some(match key {
            "type" => {
                m.types &= !type_mask(v, ptr)?;
                vec![m]
            }
            "enum" | "const" => {
                let excluded: Vec<&Value> = match (key, v) {
                    ("enum", Value::Array(values)) => values.iter().collect(),
                    ("const", v) => vec![v],
                    _ => return Err(GrammarError::schema_at(ptr, "`enum` must be an array")),
                };
                if let Some(values) = &mut m.enum_vals {
                    let excluded: super::layout::JsonSet = excluded.iter().copied().collect();
                    values.retain(|x| !excluded.contains(x));
                    vec![m]
                } else {
                    return Ok(exclude_values(m, &excluded, ptr));
                }
            }
            "required" => {
                let Value::Array(names) = v else {
                    return Ok(None);
                };
                // `required` holds for every non-object: its negation keeps
                // objects lacking one of the names.
                let mut cases = Vec::new();
                for name in names {
                    let Value::String(name) = name else {
                        return Err(GrammarError::schema_at(ptr, "`required` must list strings"));
                    };
                    if m.required.contains(name) {
                        continue;
                    }
                    let mut case = m.clone();
                    case.types &= OBJECT;
                    case.forbidden.push(name.clone());
                    cases.push(case);
                }
                cases
            }
            "properties" => {
                // Some declared member is present with a value its schema
                // rejects (one case per member).
                let Value::Object(props) = v else {
                    return Ok(None);
                };
                let pnode = child(v, "properties");
                let mut cases = Vec::new();
                for (name, schema) in props {
                    if is_trivially_true(schema) || m.forbidden.contains(name) {
                        continue;
                    }
                    let mut case = m.clone();
                    case.types &= OBJECT;
                    if !case.required.contains(name) {
                        case.required.push(name.clone());
                    }
                    case.member_nots
                        .push((name.clone(), pnode.child(schema, name)));
                    cases.push(case);
                }
                cases
            }
            "not" => {
                let saved = self.ref_stack.len();
                // Under an origin of its own: what a `not` evaluates does
                // not count outside it.
                let inner = self.expand_under(&mut m, child(v, "not"), &[]);
                match inner {
                    Ok(true) => vec![m],
                    Ok(false) => {
                        self.ref_stack.truncate(saved);
                        Vec::new()
                    }
                    Err(e) => return Err(e),
                }
            }
            "$ref" => {
                let Value::String(reference) = v else {
                    return Err(GrammarError::schema_at(ptr, "`$ref` must be a string"));
                };
                let (target, target_ptr) = self.resolve(reference, ptr)?;
                self.negate(
                    m,
                    &Node {
                        v: target,
                        ptr: target_ptr,
                    },
                    depth + 1,
                )?
            }
            "allOf" | "anyOf" => {
                let Value::Array(branches) = v else {
                    return Err(GrammarError::schema_at(
                        ptr,
                        format!("`{key}` must be an array"),
                    ));
                };
                let bnode = child(v, key);
                if key == "allOf" {
                    let mut cases = Vec::new();
                    for (i, b) in branches.iter().enumerate() {
                        cases.extend(self.negate(
                            m.clone(),
                            &bnode.child(b, &i.to_string()),
                            depth + 1,
                        )?);
                    }
                    cases
                } else {
                    let mut cases = vec![m];
                    for (i, b) in branches.iter().enumerate() {
                        let mut next = Vec::new();
                        for case in cases {
                            next.extend(self.negate(
                                case,
                                &bnode.child(b, &i.to_string()),
                                depth + 1,
                            )?);
                        }
                        if next.len() > MAX_NOT_VARIANTS {
                            return Ok(None);
                        }
                        cases = next;
                    }
                    cases
                }
            }
            "oneOf" => {
                // Not exactly one: none holds, or two (some pair) hold.
                let Value::Array(branches) = v else {
                    return Err(GrammarError::schema_at(ptr, "`oneOf` must be an array"));
                };
                let bnode = child(v, key);
                let branches: Vec<Node<'a>> = branches
                    .iter()
                    .enumerate()
                    .map(|(i, b)| bnode.child(b, &i.to_string()))
                    .collect();
                let mut cases = vec![m.clone()];
                for branch in &branches {
                    let mut next = Vec::new();
                    for case in cases {
                        next.extend(self.negate(case, branch, depth + 1)?);
                    }
                    if next.len() > MAX_NOT_VARIANTS {
                        return Ok(None);
                    }
                    cases = next;
                }
                for i in 0..branches.len() {
                    for j in i + 1..branches.len() {
                        // Each under an origin of its own: a failing `oneOf`
                        // evaluates nothing for the schema objects around.
                        let mut case = m.clone();
                        let saved = self.ref_stack.len();
                        let both = self.expand_under(&mut case, branches[i].clone(), &[])?
                            && self.expand_under(&mut case, branches[j].clone(), &[])?;
                        if both {
                            cases.push(case);
                        } else {
                            self.ref_stack.truncate(saved);
                        }
                        if cases.len() > MAX_NOT_VARIANTS {
                            return Ok(None);
                        }
                    }
                }
                cases
            }
            // An applicator that allows every member (item) it applies to
            // holds for every value: its negation has no case.
            "additionalProperties"
            | "propertyNames"
            | "items"
            | "additionalItems"
            | "unevaluatedProperties"
            | "unevaluatedItems"
                if is_trivially_true(v) =>
            {
                Vec::new()
            }
            "patternProperties" | "dependentSchemas"
                if v.as_object()
                    .is_some_and(|o| o.values().all(is_trivially_true)) =>
            {
                Vec::new()
            }
            "prefixItems"
                if v.as_array()
                    .is_some_and(|a| a.iter().all(is_trivially_true)) =>
            {
                Vec::new()
            }
            "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" => {
                if !v.is_number() {
                    // A draft-4 boolean modifier alone constrains nothing.
                    return Ok(if v.is_boolean() {
                        Some(Vec::new())
                    } else {
                        None
                    });
                }
                // Numbers on the other side of the bound; the bound flips
                // between inclusive and exclusive.
                let draft4_exclusive = |sibling: &str| obj.get(sibling) == Some(&Value::Bool(true));
                let exclusive = match key {
                    "minimum" => !draft4_exclusive("exclusiveMinimum"),
                    "maximum" => !draft4_exclusive("exclusiveMaximum"),
                    _ => false,
                };
                m.types &= INTEGER | FRACTION;
                m.constrained = true;
                let bound = Bound {
                    value: v,
                    exclusive,
                    ptr: ptr.to_string(),
                };
                if key.ends_with("inimum") {
                    m.upper.push(bound);
                } else {
                    m.lower.push(bound);
                }
                vec![m]
            }
            "minLength" | "maxLength" | "minItems" | "maxItems" => {
                let Some(n) = v.as_u64() else { return Ok(None) };
                let is_string = key.ends_with("Length");
                m.types &= if is_string { STRING } else { ARRAY };
                m.constrained = true;
                if key.starts_with("min") {
                    if n == 0 {
                        return Ok(Some(Vec::new()));
                    }
                    if is_string {
                        m.max_len = Some(m.max_len.map_or(n - 1, |x| x.min(n - 1)));
                        m.len_ptr = ptr.to_string();
                    } else {
                        m.max_items = Some(m.max_items.map_or(n - 1, |x| x.min(n - 1)));
                        m.items_ptr = ptr.to_string();
                    }
                } else if is_string {
                    m.min_len = m.min_len.max(n + 1);
                    m.len_ptr = ptr.to_string();
                } else {
                    m.min_items = m.min_items.max(n + 1);
                    m.items_ptr = ptr.to_string();
                }
                vec![m]
            }
            _ => return Ok(None),
        }))
    }

    fn lower_enum(&mut self, mut m: Merged<'a>, level: u32) -> Result<Lang, GrammarError> {
        let values = m.enum_vals.take().expect("caller checked");
        let types = m.types;
        let candidates: Vec<&'a Value> = values
            .into_iter()
            .filter(|v| m.types & kind_of(v) != 0)
            .collect();
        if candidates.is_empty() {
            return Ok(Lang::Never);
        }
        let kept = if m.constrained {
            self.enum_values_allowed(m, candidates, level)?
        } else {
            candidates.into_iter().map(|v| (v, false)).collect()
        };
        Ok(self.enum_constants(&kept, types, level))
    }

    /// The `candidates` (values of `m`'s `enum`) that the rest of `m`
    /// allows, each with whether an integer-only `type` looked at it. Each
    /// is checked against `m`'s schema objects themselves
    /// ([`super::validate`]); only those the check cannot decide go by the
    /// regex of the rest, which is a subset of the valid texts, so a value
    /// whose canonical spelling matches it is valid (and one it misses may
    /// be valid too, but is dropped). When the rest cannot be expressed,
    /// that is the error unless the check found some value valid: then the
    /// undecided ones are dropped.
    fn enum_values_allowed(
        &mut self,
        m: Merged<'a>,
        candidates: Vec<&'a Value>,
        level: u32,
    ) -> Result<Vec<(&'a Value, bool)>, GrammarError> {
        let checked = self.check_enum_values(&m, &[], &candidates);
        let mut regex = None;
        if checked.iter().any(|(verdict, _)| verdict.is_none()) {
            let (saved_refs, saved_depth) = (self.ref_stack.len(), self.depth);
            let rest = self
                .lower_simple(m, level)
                .and_then(|rest| self.compile(&rest, "enum"));
            match rest {
                Ok(compiled) => regex = compiled,
                Err(e)
                    if checked.iter().any(|(v, _)| *v == Some(true))
                        && is_expressiveness_error(&e) =>
                {
                    self.ref_stack.truncate(saved_refs);
                    self.depth = saved_depth;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(candidates
            .into_iter()
            .zip(checked)
            .filter(|(v, (verdict, _))| match verdict {
                Some(valid) => *valid,
                None => regex
                    .as_ref()
                    .is_some_and(|r| r.is_match(self.layout.canonical(v, level).as_bytes())),
            })
            .map(|(v, (_, integer_tested))| (v, integer_tested))
            .collect())
    }

    /// A whole-match regex for `lang` (`None` for the empty language).
    pub fn compile(
        &self,
        lang: &Lang,
        what: &str,
    ) -> Result<Option<regex_automata::meta::Regex>, GrammarError> {
        let Some(text) = lang.text() else {
            return Ok(None);
        };
        let regex = regex_automata::meta::Regex::builder()
            .syntax(
                regex_automata::util::syntax::Config::new().nest_limit(self.limits.max_nest + 8),
            )
            .configure(
                regex_automata::meta::Regex::config()
                    .nfa_size_limit(Some(256 << 20))
                    .hybrid_cache_capacity(4 << 20),
            )
            .build(&format!("^(?:{text})$"))
            .map_err(|e| GrammarError::InvalidRegex {
                location: tokensieve_core::error::Location::None,
                message: format!("internal regex for {what} did not compile: {e}"),
            })?;
        Ok(Some(regex))
    }

    /// Any JSON value nested at most `depth` levels, at `level`.
    pub fn any_value(&mut self, depth: u32, level: u32) -> Result<Lang, GrammarError> {
        let level_key = if self.layout.level_matters() {
            level
        } else {
            0
        };
        if self.unbounded() {
            return self.rule_ref(RuleTarget::AnyValue, level_key, "");
        }
        if let Some(hit) = self.any_cache.get(&(depth, level_key)) {
            return Ok(hit.clone());
        }
        let lang = self.any_of_kind(ALL_TYPES, depth, level)?;
        self.check(&lang, "")?;
        self.any_cache.insert((depth, level_key), lang.clone());
        Ok(lang)
    }

    /// Whether the property name matches an ECMA-262 pattern.
    pub fn name_matches(
        &mut self,
        pattern: &str,
        ptr: &str,
        name: &str,
    ) -> Result<bool, GrammarError> {
        if !self.name_regexes.contains_key(pattern) {
            let sp = super::ecma::SearchPattern::parse(pattern).map_err(|e| {
                GrammarError::unsupported_at(ptr, format!("pattern {pattern:?}: {e}"))
            })?;
            let regex = regex_automata::meta::Regex::new(&sp.search_regex()).map_err(|e| {
                GrammarError::unsupported_at(ptr, format!("pattern {pattern:?} ({e})"))
            })?;
            self.name_regexes.insert(pattern.to_string(), regex);
        }
        Ok(self.name_regexes[pattern].is_match(name))
    }

    /// Whether a property name is valid under `propertyNames`.
    pub fn name_allowed(&mut self, m: &Merged<'a>, name: &str) -> Result<bool, GrammarError> {
        if m.property_names.is_empty() {
            return Ok(true);
        }
        let lang = self.lower_nodes(m.property_names.clone(), 0)?;
        let ptr = m.property_names[0].ptr.clone();
        Ok(self
            .compile(&lang, &ptr)?
            .is_some_and(|r| r.is_match(key_text(name).as_bytes())))
    }
}

/// An over-approximation of a schema's values, to prove `oneOf` branches
/// disjoint.
#[derive(Clone, Debug)]
pub(crate) struct Shape<'a> {
    types: u8,
    /// The values, when finitely many.
    values: Option<Vec<&'a Value>>,
    /// Required members and their shapes.
    props: Vec<(String, Shape<'a>)>,
    /// The only member names objects may have.
    closed: Option<Vec<String>>,
    /// What every string (decoded) starts with.
    prefix: String,
}

impl<'a> Shape<'a> {
    fn any() -> Shape<'a> {
        Shape {
            types: ALL_TYPES,
            values: None,
            props: Vec::new(),
            closed: None,
            prefix: String::new(),
        }
    }

    /// Whether `v` may be a value of this shape.
    fn admits(&self, v: &Value) -> bool {
        self.admits_in(v, None)
    }

    /// Whether none of `values` may be a value of this shape: its own
    /// values, if it has them, put in a set once (two branches of a
    /// `oneOf`, each an `enum` of thousands, compared value by value cost
    /// a compile a second).
    fn admits_none(&self, values: &[&'a Value]) -> bool {
        let own: Option<super::layout::JsonSet> = self
            .values
            .as_ref()
            .map(|own| own.iter().copied().collect());
        values.iter().all(|v| !self.admits_in(v, own.as_ref()))
    }

    /// [`Shape::admits`], with this shape's values as `own` (a set of
    /// them) where the caller made one.
    fn admits_in(&self, v: &Value, own: Option<&super::layout::JsonSet>) -> bool {
        if self.types & kind_of(v) == 0 {
            return false;
        }
        let listed = match (own, &self.values) {
            (Some(own), _) => own.contains(v),
            (None, Some(values)) => values.iter().any(|x| super::layout::json_eq(x, v)),
            (None, None) => true,
        };
        if !listed {
            return false;
        }
        if let Value::String(s) = v
            && !s.starts_with(&self.prefix)
        {
            return false;
        }
        if let Value::Object(members) = v {
            if let Some(closed) = &self.closed
                && members.keys().any(|k| !closed.contains(k))
            {
                return false;
            }
            for (name, shape) in &self.props {
                match members.get(name) {
                    Some(x) if shape.admits(x) => {}
                    _ => return false,
                }
            }
        }
        true
    }

    /// True only when no value belongs to both.
    fn disjoint(&self, other: &Shape<'a>) -> bool {
        let common = self.types & other.types;
        if common == 0 {
            return true;
        }
        if let Some(values) = &self.values {
            return other.admits_none(values);
        }
        if let Some(values) = &other.values {
            return self.admits_none(values);
        }
        if common == STRING
            && !self.prefix.starts_with(&other.prefix)
            && !other.prefix.starts_with(&self.prefix)
        {
            return true;
        }
        if common == OBJECT {
            for (name, a) in &self.props {
                if other.closed.as_ref().is_some_and(|c| !c.contains(name)) {
                    return true;
                }
                if let Some((_, b)) = other.props.iter().find(|(n, _)| n == name)
                    && a.disjoint(b)
                {
                    return true;
                }
            }
            for (name, _) in &other.props {
                if self.closed.as_ref().is_some_and(|c| !c.contains(name)) {
                    return true;
                }
            }
        }
        false
    }
}

/// The kind bit of a value.
pub(crate) fn kind_of(v: &Value) -> u8 {
    match v {
        Value::Null => NULL,
        Value::Bool(_) => BOOLEAN,
        Value::Object(_) => OBJECT,
        Value::Array(_) => ARRAY,
        Value::String(_) => STRING,
        Value::Number(n) => {
            if n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0) {
                INTEGER
            } else {
                FRACTION
            }
        }
    }
}

/// The kinds a schema's own `type` keyword allows: every kind where it has
/// none (or a malformed one, which its lowering reports).
fn declared_types(schema: &Value) -> u8 {
    schema
        .get("type")
        .and_then(|t| type_mask(t, "").ok())
        .unwrap_or(ALL_TYPES)
}

/// Whether `schema` holds a reference or a base for one anywhere in it.
fn refers(schema: &Value) -> bool {
    match schema {
        Value::Object(obj) => obj.iter().any(|(k, v)| {
            matches!(
                k.as_str(),
                "$ref" | "$dynamicRef" | "$recursiveRef" | "$id" | "id" | "$anchor"
            ) || refers(v)
        }),
        Value::Array(items) => items.iter().any(refers),
        _ => false,
    }
}

/// The kinds a `type` keyword allows.
fn type_mask(v: &Value, ptr: &str) -> Result<u8, GrammarError> {
    let names: Vec<&Value> = match v {
        Value::Array(items) => items.iter().collect(),
        other => vec![other],
    };
    let mut mask = 0;
    for name in names {
        mask |= match name.as_str() {
            Some("null") => NULL,
            Some("boolean") => BOOLEAN,
            Some("object") => OBJECT,
            Some("array") => ARRAY,
            Some("string") => STRING,
            Some("integer") => INTEGER,
            Some("number") => INTEGER | FRACTION,
            Some(other) => {
                return Err(GrammarError::schema_at(
                    ptr,
                    format!("unknown type {other:?}"),
                ));
            }
            None => {
                return Err(GrammarError::schema_at(
                    ptr,
                    "`type` must be a string or an array of strings",
                ));
            }
        };
    }
    Ok(mask)
}

/// Most integers a negated `enum` may cut out of the numbers (one case per
/// gap between them).
const MAX_EXCLUDED_INTEGERS: usize = 16;

/// `m` (which has no `enum` of its own) and none of the `excluded` values, as
/// cases: the kinds no excluded value has; the remaining boolean; the
/// numbers between excluded integers, as exclusive integer bounds. `None`
/// when some excluded value cannot be cut out that way (a string, a
/// non-integer, a container, or an integer where `m` already bounds the
/// numbers).
fn exclude_values<'a>(m: Merged<'a>, excluded: &[&'a Value], ptr: &str) -> Option<Vec<Merged<'a>>> {
    static TRUE: Value = Value::Bool(true);
    static FALSE: Value = Value::Bool(false);
    let excluded: Vec<&'a Value> = excluded
        .iter()
        .copied()
        .filter(|x| m.types & kind_of(x) != 0)
        .collect();
    let touched = excluded.iter().fold(0, |t, x| t | kind_of(x));
    if touched & (OBJECT | ARRAY | FRACTION) != 0 {
        return None;
    }
    let mut cases = Vec::new();
    let mut untouched = m.clone();
    // Strings stay, less the excluded ones (a complement regex).
    untouched.types &= !(touched & !STRING);
    for x in &excluded {
        if let Value::String(s) = x {
            untouched.not_strings.push((s.as_str(), ptr.to_string()));
        }
    }
    if touched & INTEGER != 0 {
        untouched.types &= !FRACTION;
    }
    cases.push(untouched);
    if touched & BOOLEAN != 0 {
        let left: Vec<&'a Value> = [&TRUE, &FALSE]
            .into_iter()
            .filter(|b| !excluded.contains(b))
            .collect();
        if !left.is_empty() {
            let mut case = m.clone();
            case.types &= BOOLEAN;
            case.enum_vals = Some(left);
            cases.push(case);
        }
    }
    if touched & INTEGER != 0 {
        if !m.lower.is_empty() || !m.upper.is_empty() || !m.multiple_of.is_empty() {
            return None;
        }
        // Exclusive bounds on a `number` are served within this magnitude.
        const LIMIT: f64 = 1e8;
        let mut points: Vec<(f64, &'a Value)> = Vec::new();
        for x in excluded.iter().copied().filter(|x| kind_of(x) == INTEGER) {
            let f = x.as_f64()?;
            if f.abs() > LIMIT {
                return None;
            }
            points.push((f, x));
        }
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        points.dedup_by(|a, b| a.0 == b.0);
        if points.len() > MAX_EXCLUDED_INTEGERS {
            return None;
        }
        let bound = |value: &'a Value| Bound {
            value,
            exclusive: true,
            ptr: ptr.to_string(),
        };
        for gap in 0..=points.len() {
            let mut case = m.clone();
            case.types &= INTEGER | FRACTION;
            case.constrained = true;
            if gap > 0 {
                case.lower.push(bound(points[gap - 1].1));
            }
            if gap < points.len() {
                case.upper.push(bound(points[gap].1));
            }
            cases.push(case);
        }
    }
    Some(cases)
}

fn intersect_enum<'a>(m: &mut Merged<'a>, values: Vec<&'a Value>) {
    m.enum_vals = Some(match m.enum_vals.take() {
        None => {
            let mut seen = super::layout::JsonSet::new();
            values.into_iter().filter(|v| seen.insert(v)).collect()
        }
        Some(old) => {
            let values: super::layout::JsonSet = values.into_iter().collect();
            old.into_iter().filter(|o| values.contains(o)).collect()
        }
    });
}

fn non_negative(v: &Value, ptr: &str) -> Result<u64, GrammarError> {
    match v.as_u64() {
        Some(n) => Ok(n),
        None => match v.as_f64() {
            Some(f) if f >= 0.0 && f.fract() == 0.0 && f < 1.8e19 => Ok(f as u64),
            _ => Err(GrammarError::schema_at(
                ptr,
                "must be a non-negative integer",
            )),
        },
    }
}

/// Keywords that constrain instances (in some draft). Anything else is an
/// annotation or unknown, and is ignored.
pub(crate) fn is_known_assertion(key: &str) -> bool {
    matches!(
        key,
        "$ref"
            | "$dynamicRef"
            | "$recursiveRef"
            | "type"
            | "enum"
            | "const"
            | "minLength"
            | "maxLength"
            | "pattern"
            | "minimum"
            | "maximum"
            | "exclusiveMinimum"
            | "exclusiveMaximum"
            | "multipleOf"
            | "properties"
            | "patternProperties"
            | "additionalProperties"
            | "required"
            | "minProperties"
            | "maxProperties"
            | "propertyNames"
            | "dependentRequired"
            | "dependentSchemas"
            | "dependencies"
            | "unevaluatedProperties"
            | "items"
            | "prefixItems"
            | "additionalItems"
            | "minItems"
            | "maxItems"
            | "uniqueItems"
            | "contains"
            | "minContains"
            | "maxContains"
            | "unevaluatedItems"
            | "not"
            | "allOf"
            | "anyOf"
            | "oneOf"
            | "if"
            | "then"
            | "else"
    )
}

pub(crate) fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Ok(b) = u8::from_str_radix(
                std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("zz"),
                16,
            )
        {
            out.push(b);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap_or_else(|_| s.to_string())
}

/// Whether `e` says only that the lowering cannot express something (or
/// not within its limits), rather than that the schema is malformed.
fn is_expressiveness_error(e: &GrammarError) -> bool {
    matches!(
        e,
        GrammarError::Unsupported { .. }
            | GrammarError::LimitExceeded { .. }
            | GrammarError::InvalidRegex { .. }
    )
}

/// `true` or `{}`: a sub-schema that allows everything.
fn is_trivially_true(v: &Value) -> bool {
    matches!(v, Value::Bool(true)) || v.as_object().is_some_and(|o| o.is_empty())
}
