//! Errors: build-time (`GrammarError`) apart from step-time (`StepError`).
//!
//! Every message says *what* went wrong and *where*: a JSON pointer into a
//! schema, a byte offset into a regex, a line and column in a grammar.

use std::fmt;

/// Where in the user's input a problem is.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Location {
    /// A JSON pointer into a schema, e.g. `/properties/foo/pattern`.
    Pointer(String),
    /// A byte offset into a regular expression.
    Offset(usize),
    /// A 1-based line and column in a grammar or file.
    LineColumn { line: usize, column: usize },
    /// A file path.
    File(String),
    /// Nowhere in particular.
    None,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Pointer(p) if p.is_empty() => write!(f, "schema root"),
            Location::Pointer(p) => write!(f, "{p}"),
            Location::Offset(o) => write!(f, "offset {o}"),
            Location::LineColumn { line, column } => write!(f, "line {line}, column {column}"),
            Location::File(p) => write!(f, "{p}"),
            Location::None => write!(f, "input"),
        }
    }
}

/// Why a constraint could not be turned into a grammar, or a backend could
/// not be created. Never a panic, never a silently wider language.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GrammarError {
    /// The input is well formed but uses something this backend cannot express.
    #[error("{location}: {what} is not supported")]
    Unsupported { location: Location, what: String },
    /// The backend does not handle this kind of constraint at all.
    #[error("backend `{backend}` does not support {kind} constraints (it supports: {supported})")]
    UnsupportedSpec {
        backend: String,
        kind: String,
        supported: String,
    },
    /// A malformed JSON Schema.
    #[error("invalid JSON schema at {location}: {message}")]
    InvalidSchema { location: Location, message: String },
    /// A malformed regular expression.
    #[error("invalid regex at {location}: {message}")]
    InvalidRegex { location: Location, message: String },
    /// A malformed EBNF/GBNF grammar.
    #[error("invalid grammar at {location}: {message}")]
    InvalidGrammar { location: Location, message: String },
    /// A malformed constraint that is none of the above (empty choice list…).
    #[error("invalid constraint: {0}")]
    InvalidSpec(String),
    /// A named resource limit was exceeded (DFA states, index size, depth…).
    #[error("{what} exceeds the limit of {limit} (set by {knob})")]
    LimitExceeded {
        what: String,
        limit: usize,
        knob: String,
    },
    /// The vocabulary/tokenizer file could not be read or understood.
    #[error("vocabulary error in {location}: {message}")]
    Vocabulary { location: Location, message: String },
    /// No backend is registered under this name.
    #[error("unknown backend `{name}`; available: {}", available.join(", "))]
    UnknownBackend {
        name: String,
        available: Vec<String>,
    },
    /// A configuration value the backend cannot use.
    #[error("invalid configuration: {0}")]
    InvalidConfig(String),
    /// A pending compilation was cancelled.
    #[error("compilation was cancelled")]
    Cancelled,
    /// Waiting for a pending compilation timed out (it keeps running).
    #[error("compilation did not finish within {millis} ms")]
    Timeout { millis: u128 },
    /// A backend panicked while compiling; the panic was caught.
    #[error("backend panicked: {0}")]
    Panic(String),
    /// The backend asked for refused the constraint (`error`: unsupported,
    /// or past one of its limits) and the registered backends named in
    /// `takers` compile it (`tokensieve::create_backend` adds this).
    #[error("{error}; {}", takers_text(takers))]
    TakenElsewhere {
        error: Box<GrammarError>,
        takers: Vec<String>,
    },
}

/// "the `earley` backend takes it", "the `earley` and `auto` backends take it".
fn takers_text(takers: &[String]) -> String {
    let names: Vec<String> = takers.iter().map(|t| format!("`{t}`")).collect();
    match names.as_slice() {
        [] => "no other backend takes it".to_string(),
        [one] => format!("the {one} backend takes it"),
        [init @ .., last] => format!("the {} and {last} backends take it", init.join(", ")),
    }
}

impl GrammarError {
    /// The error itself, without the backends a
    /// [`GrammarError::TakenElsewhere`] names: what to match on.
    pub fn refusal(&self) -> &GrammarError {
        match self {
            GrammarError::TakenElsewhere { error, .. } => error.refusal(),
            other => other,
        }
    }

    /// Whether another backend may take what this error refuses: the
    /// constraint is well formed, but unsupported here or past a limit
    /// (not a syntax error, not a vocabulary or configuration problem).
    pub fn is_refusal(&self) -> bool {
        matches!(
            self.refusal(),
            GrammarError::Unsupported { .. }
                | GrammarError::UnsupportedSpec { .. }
                | GrammarError::LimitExceeded { .. }
        )
    }

    /// Shorthand for [`GrammarError::Unsupported`] at a JSON pointer.
    pub fn unsupported_at(pointer: impl Into<String>, what: impl Into<String>) -> Self {
        GrammarError::Unsupported {
            location: Location::Pointer(pointer.into()),
            what: what.into(),
        }
    }

    /// Shorthand for [`GrammarError::InvalidSchema`] at a JSON pointer.
    pub fn schema_at(pointer: impl Into<String>, message: impl Into<String>) -> Self {
        GrammarError::InvalidSchema {
            location: Location::Pointer(pointer.into()),
            message: message.into(),
        }
    }
}

/// Why a step on a matcher failed. The matcher's state is unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StepError {
    /// The token is not allowed in the current state.
    #[error("token {token} is not allowed here")]
    TokenRejected { token: u32 },
    /// The bytes are not allowed in the current state (at `offset` into them).
    #[error("bytes rejected at offset {offset}")]
    BytesRejected { offset: usize },
    /// The token id is outside the vocabulary, or is a special/padding token.
    #[error("token id {token} is not a token of this vocabulary")]
    InvalidToken { token: u32 },
    /// A stop token was accepted earlier; nothing more can be accepted.
    #[error("the matcher has terminated")]
    Terminated,
    /// `rollback(k)` asked for more steps than are kept.
    #[error("cannot roll back {requested} steps: only {available} are kept")]
    RollbackTooFar { requested: usize, available: usize },
    /// The matcher hit an internal error earlier and refuses further work.
    #[error("matcher is in an error state: {0}")]
    Poisoned(String),
    /// A step needed more work or memory than a named limit allows (a
    /// pathological grammar or input); the matcher refuses further tokens.
    #[error("{what} exceeds the limit of {limit} (set by {knob})")]
    LimitExceeded {
        what: String,
        limit: usize,
        knob: String,
    },
}
