//! The automaton view of a lexeme: [`LexDfa`], a whole DFA or one made as
//! it is walked, behind one [`Automaton`] interface.

use super::*;

/// A lexeme's automaton: built whole, or as it is walked (one regex's, or
/// the intersection of several).
// One per lexeme, inside its `Arc`: boxing the big variant would add a
// pointer chase to every DFA step.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum LexDfa {
    Eager(ByteDfa),
    Lazy(LazyDfa),
    /// An intersection of regexes (see [`LazyProduct`]).
    Product(LazyProduct),
    /// A long counted repetition and what follows it (see
    /// [`LazyCounted`]), made by the piece split.
    Counted(Arc<LazyCounted>),
    /// A deferred lazy DFA that could not be made (see [`Lexeme::dfa`]):
    /// no byte goes in, and [`LexDfa::exhausted`] names why.
    Failed(GrammarError),
}

/// Every byte in one class, for [`LexDfa::Failed`].
pub(super) static ONE_CLASS: [u8; 256] = [0; 256];
/// The one transition of a [`LexDfa::Failed`] state.
pub(super) static DEAD_ROW: [u32; 1] = [DEAD];

impl LexDfa {
    #[inline]
    pub(crate) fn start(&self) -> u32 {
        match self {
            LexDfa::Eager(d) => d.start(),
            LexDfa::Lazy(d) => d.start(),
            LexDfa::Product(d) => d.start(),
            LexDfa::Counted(d) => d.start(),
            LexDfa::Failed(_) => LazyDfa::START,
        }
    }

    // Always inlined: a walk's inner loop (see `walk_below`) asks it of
    // every child, and a call there costs more than the lookup.
    #[inline(always)]
    pub(crate) fn next(&self, state: u32, byte: u8) -> u32 {
        match self {
            LexDfa::Eager(d) => d.next(state, byte),
            LexDfa::Lazy(d) => d.next(state, byte),
            LexDfa::Product(d) => d.next(state, byte),
            LexDfa::Counted(d) => d.next(state, byte),
            LexDfa::Failed(_) => DEAD,
        }
    }

    /// The transitions of `state` by byte class where the automaton keeps
    /// them as a row; `None` where it would make the row for the asking
    /// (a counted repetition's: a state per class) or has none: ask
    /// [`LexDfa::next`] byte by byte.
    #[inline]
    pub(crate) fn kept_row(&self, state: u32) -> Option<&[u32]> {
        match self {
            LexDfa::Eager(d) => Some(d.row(state)),
            LexDfa::Lazy(d) => Some(d.row_of(state)),
            LexDfa::Product(d) => Some(d.row_of(state)),
            LexDfa::Counted(_) | LexDfa::Failed(_) => None,
        }
    }

    /// The transitions of `state` by byte class (see [`LexDfa::classes`]).
    #[inline]
    pub(crate) fn row(&self, state: u32) -> &[u32] {
        match self {
            LexDfa::Eager(d) => d.row(state),
            LexDfa::Lazy(d) => d.row_of(state),
            LexDfa::Product(d) => d.row_of(state),
            LexDfa::Counted(d) => d.row_of(state),
            LexDfa::Failed(_) => &DEAD_ROW,
        }
    }

    #[inline]
    pub(crate) fn classes(&self) -> &[u8; 256] {
        match self {
            LexDfa::Eager(d) => d.classes(),
            LexDfa::Lazy(d) => d.classes(),
            LexDfa::Product(d) => d.classes(),
            LexDfa::Counted(d) => d.classes(),
            LexDfa::Failed(_) => &ONE_CLASS,
        }
    }

    #[inline]
    pub(crate) fn is_accepting(&self, state: u32) -> bool {
        match self {
            LexDfa::Eager(d) => d.is_accepting(state),
            LexDfa::Lazy(d) => d.is_accepting(state),
            LexDfa::Product(d) => d.is_accepting(state),
            LexDfa::Counted(d) => d.is_accepting(state),
            LexDfa::Failed(_) => false,
        }
    }

    #[inline]
    pub(crate) fn forced_byte(&self, state: u32) -> Option<u8> {
        match self {
            LexDfa::Eager(d) => d.forced_byte(state),
            LexDfa::Lazy(d) => d.forced_byte(state),
            LexDfa::Product(d) => d.forced_byte(state),
            LexDfa::Counted(d) => d.forced_byte(state),
            LexDfa::Failed(_) => None,
        }
    }

    #[inline]
    pub(crate) fn at_char_boundary(&self, state: u32) -> bool {
        match self {
            LexDfa::Eager(d) => d.at_char_boundary(state),
            LexDfa::Lazy(d) => d.at_char_boundary(state),
            LexDfa::Product(d) => d.at_char_boundary(state),
            LexDfa::Counted(d) => d.at_char_boundary(state),
            LexDfa::Failed(_) => true,
        }
    }

    /// States: all of an eager DFA's, those made so far of a lazy one.
    pub(crate) fn num_states(&self) -> usize {
        match self {
            LexDfa::Eager(d) => d.num_states(),
            LexDfa::Lazy(d) => d.num_states(),
            LexDfa::Product(d) => d.num_states(),
            LexDfa::Counted(d) => d.num_states(),
            LexDfa::Failed(_) => 0,
        }
    }

    /// What compiling made, in DFA states: an eager DFA's states; for a
    /// lazy one, a quarter of its NFA states (what its compile cost; an
    /// NFA state is about a quarter of a DFA state's weight, as
    /// `Lowering::fits_lazily_in` reads a tree's measure).
    pub(crate) fn compiled_states(&self) -> usize {
        match self {
            LexDfa::Eager(d) => d.num_states(),
            LexDfa::Lazy(d) => d.nfa_states().div_ceil(4),
            LexDfa::Product(d) => d.nfa_states().div_ceil(4),
            LexDfa::Counted(d) => d.nfa_states().div_ceil(4),
            LexDfa::Failed(_) => 0,
        }
    }

    pub(crate) fn memory_bytes(&self) -> usize {
        match self {
            LexDfa::Eager(d) => d.memory_bytes(),
            LexDfa::Lazy(d) => d.memory_bytes(),
            LexDfa::Product(d) => d.memory_bytes(),
            LexDfa::Counted(d) => d.memory_bytes(),
            LexDfa::Failed(_) => 0,
        }
    }

    /// The limit a lazy DFA ran into (a transition it made dead), if any.
    /// The run of one class of bytes `state` is partway through, where the
    /// automaton can tell (see [`LazyDfa::chain`]).
    #[inline]
    pub(crate) fn chain(&self, state: u32) -> Option<Chain> {
        match self {
            LexDfa::Lazy(d) => d.chain(state),
            _ => None,
        }
    }

    pub(crate) fn exhausted(&self) -> Option<GrammarError> {
        match self {
            LexDfa::Lazy(d) if d.exhausted() => Some(d.exhausted_error()),
            LexDfa::Product(d) if d.exhausted() => Some(d.exhausted_error()),
            LexDfa::Counted(d) if d.exhausted() => Some(d.exhausted_error()),
            LexDfa::Failed(e) => Some(e.clone()),
            _ => None,
        }
    }
}

impl Automaton for LexDfa {
    #[inline]
    fn start(&self) -> u32 {
        LexDfa::start(self)
    }
    #[inline]
    fn next(&self, state: u32, byte: u8) -> u32 {
        LexDfa::next(self, state, byte)
    }
    #[inline]
    fn is_accepting(&self, state: u32) -> bool {
        LexDfa::is_accepting(self, state)
    }
    fn byte_classes(&self) -> Option<&[u8; 256]> {
        Some(self.classes())
    }
    #[inline]
    fn row_by_class(&self, state: u32) -> Option<&[u32]> {
        Some(self.row(state))
    }
    #[inline]
    fn known_text_step(&self, state: u32) -> Option<Option<TextStep>> {
        match self {
            LexDfa::Counted(d) => d.known_text_step(state),
            LexDfa::Product(d) => Automaton::known_text_step(d, state),
            _ => None,
        }
    }
}
