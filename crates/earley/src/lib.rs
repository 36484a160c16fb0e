//! # tokensieve-earley (no matcher yet)
//!
//! The context-free backend of DESIGN.md §3. Its front ends live in
//! `tokensieve-grammar`; the matcher is being written.
