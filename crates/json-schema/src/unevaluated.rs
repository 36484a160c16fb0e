//! `unevaluatedProperties` and `unevaluatedItems`: which members (items) a
//! keyword's scope evaluates, from the [`Origin`]s the merge recorded, and
//! the schemas that then apply to the ones it does not.
//!
//! Within the scope of such a keyword (its schema object and the sub-schemas
//! applied in place below it, see [`Origin`]) a member is evaluated by
//! `properties` naming it, a `patternProperties` pattern matching it, or an
//! `additionalProperties` next to them (which takes every other member); an
//! item by `prefixItems` (the first n) or `items` (every other). A nested
//! `unevaluated*` keyword evaluates everything its own scope left over, so
//! with one below it every member (item) is evaluated. Every schema object of
//! a conjunction holds for a value the lowering accepts, so the parts it
//! recorded evaluate exactly what they would under a validator; what the
//! lowering cannot see (`if`, `contains`) is an error when in scope.
//!
//! [`Origin`]: super::lower::Origin

use super::lower::{Lowerer, Merged, Node, Unevaluated};
use tokensieve_core::GrammarError;

/// Which members a question is about.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Member<'n> {
    /// The member with this name.
    Named(&'n str),
    /// Members whose keys no `properties` names and no `patternProperties`
    /// pattern matches (the extra members when there are no patterns).
    Unmatched,
    /// Members whose keys match every pattern of the (single) part with
    /// patterns and that no `properties` names (the extra members of
    /// `pattern_member`).
    MatchingPatterns,
}

impl<'a> Lowerer<'a> {
    /// The `unevaluatedProperties` schemas that apply to `member`: those of
    /// the keywords in whose scope nothing evaluates it.
    pub(crate) fn unevaluated_member_nodes(
        &mut self,
        m: &Merged<'a>,
        member: Member<'_>,
    ) -> Result<Vec<Node<'a>>, GrammarError> {
        self.check_untracked(m, &m.uneval_props, "unevaluatedProperties")?;
        let mut nodes = Vec::new();
        for u in m.uneval_props.iter().filter(|u| u.constrains()) {
            if nested_unevaluated(&m.uneval_props, u) {
                continue;
            }
            let mut evaluated = false;
            for part in m.obj_parts.iter().filter(|p| u.sees(&p.origin)) {
                evaluated = part.additional.is_some()
                    || match member {
                        Member::Named(name) => {
                            let mut matched = part.props.iter().any(|(n, _)| *n == name);
                            for (pattern, node) in &part.pattern_props {
                                matched = matched || self.name_matches(pattern, &node.ptr, name)?;
                            }
                            matched
                        }
                        Member::Unmatched => false,
                        Member::MatchingPatterns => !part.pattern_props.is_empty(),
                    };
                if evaluated {
                    break;
                }
            }
            if !evaluated {
                nodes.push(u.schema.clone());
            }
        }
        Ok(nodes)
    }

    /// The `unevaluatedItems` schemas that apply to the item at `index`, or
    /// (`None`) to the items past every `prefixItems`.
    pub(crate) fn unevaluated_item_nodes(
        &self,
        m: &Merged<'a>,
        index: Option<usize>,
    ) -> Result<Vec<Node<'a>>, GrammarError> {
        self.check_untracked(m, &m.uneval_items, "unevaluatedItems")?;
        let mut nodes = Vec::new();
        for u in m.uneval_items.iter().filter(|u| u.constrains()) {
            if nested_unevaluated(&m.uneval_items, u) {
                continue;
            }
            let evaluated = m
                .arr_parts
                .iter()
                .filter(|p| u.sees(&p.origin))
                .any(|p| p.rest.is_some() || index.is_some_and(|i| i < p.prefix.len()));
            if !evaluated {
                nodes.push(u.schema.clone());
            }
        }
        Ok(nodes)
    }

    /// An error when a keyword that evaluates in ways not tracked here is
    /// in the scope of one of `list` that constrains.
    fn check_untracked(
        &self,
        m: &Merged<'a>,
        list: &[Unevaluated<'a>],
        keyword: &str,
    ) -> Result<(), GrammarError> {
        for u in list.iter().filter(|u| u.constrains()) {
            for (what, ptr, origin) in &m.untracked {
                let relevant = *what == "if" || keyword == "unevaluatedItems";
                if relevant && u.sees(origin) {
                    return Err(GrammarError::unsupported_at(
                        &u.schema.ptr,
                        format!("`{keyword}` with `{what}` in its scope (at {ptr})"),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Whether another keyword of `list` lies in the scope of `u`: it evaluates
/// whatever its own scope did not, so everything is evaluated for `u`.
fn nested_unevaluated(list: &[Unevaluated<'_>], u: &Unevaluated<'_>) -> bool {
    list.iter().any(|o| o.id() != u.id() && u.sees(&o.origin))
}
