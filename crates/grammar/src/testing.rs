//! Random grammars and strings for the differential tests of every backend
//! (seeded, reproducible; not part of the stable API).

use tokensieve_core::testing::SplitMix64;

/// A random GBNF expression over a few atoms and rules `x`, `y` and `root`
/// (so some grammars recurse, at an end, in the middle or on the left).
pub fn random_expr(r: &mut SplitMix64, depth: u32) -> String {
    const ATOMS: [&str; 10] = [
        "\"a\"",
        "\"ab\"",
        "\"\"",
        "[a-b]",
        "[^a]",
        "x",
        "y",
        "root",
        "\"é\"",
        "\"(\" root \")\"",
    ];
    let base = if depth < 3 && r.below(3) == 0 {
        let parts: Vec<String> = (0..1 + r.below(3))
            .map(|_| random_expr(r, depth + 1))
            .collect();
        format!(
            "({})",
            parts.join(if r.below(2) == 0 { " | " } else { " " })
        )
    } else {
        ATOMS[r.below(ATOMS.len())].to_string()
    };
    let rep = ["", "", "", "*", "+", "?", "{2}", "{1,3}", "{0,}"][r.below(9)];
    let mut s = format!("{base}{rep}");
    if depth < 2 && r.below(3) == 0 {
        s = format!("{s} {}", random_expr(r, depth + 1));
    }
    if depth < 2 && r.below(4) == 0 {
        s = format!("{s} | {}", random_expr(r, depth + 1));
    }
    s
}

/// A random three-rule grammar (`root`, `x`, `y`) in GBNF; it may be
/// invalid (a rule that never finishes), which the parser reports.
pub fn random_gbnf(r: &mut SplitMix64) -> String {
    format!(
        "root ::= {}\nx ::= {}\ny ::= \"b\" | \"c\" x? | y \"a\"\n",
        random_expr(r, 0),
        random_expr(r, 1).replace("root", "y")
    )
}

/// A random string over pieces that the random grammars use (and a lone
/// UTF-8 lead byte, which no grammar accepts on its own).
pub fn random_text(r: &mut SplitMix64, max_pieces: usize) -> Vec<u8> {
    const PIECES: [&[u8]; 7] = [b"a", b"b", b"c", "é".as_bytes(), b"(", b")", b"\xC3"];
    let mut s = Vec::new();
    for _ in 0..r.below(max_pieces + 1) {
        s.extend_from_slice(PIECES[r.below(PIECES.len())]);
    }
    s
}

/// A random sentence of `grammar` (from its root): alternatives are picked
/// at random while the derivation is shallower than `depth`, then along
/// the shortest way out, so it always ends.
pub fn random_sentence(grammar: &crate::Grammar, r: &mut SplitMix64, depth: usize) -> Vec<u8> {
    use crate::Symbol;
    let rules = grammar.rules();
    // Height of the lowest derivation tree of each rule, and the
    // alternative that reaches it.
    let mut height = vec![usize::MAX; rules.len()];
    let mut best = vec![0usize; rules.len()];
    loop {
        let mut changed = false;
        for (i, rule) in rules.iter().enumerate() {
            for (a, alt) in rule.alternatives.iter().enumerate() {
                let h = alt
                    .iter()
                    .map(|s| match s {
                        Symbol::NonTerminal(t) => height[t.index()],
                        _ => 0,
                    })
                    .max()
                    .unwrap_or(0)
                    .saturating_add(1);
                if h < height[i] {
                    height[i] = h;
                    best[i] = a;
                    changed = true;
                }
            }
        }
        if !changed {
            break;
        }
    }
    let mut out = Vec::new();
    // (symbol, depth) to expand, last first.
    let mut stack: Vec<(Symbol, usize)> = vec![(Symbol::NonTerminal(grammar.root()), 0)];
    while let Some((symbol, d)) = stack.pop() {
        match symbol {
            Symbol::Literal(bytes) => out.extend_from_slice(&bytes),
            Symbol::Class(class) => {
                let ranges = class.ranges();
                let c = loop {
                    let (lo, hi) = ranges[r.below(ranges.len())];
                    let span = (hi as u32 - lo as u32) as usize + 1;
                    // Mostly near the start of a range: readable, and the
                    // rest of the range still gets picked.
                    let off = if r.below(2) == 0 {
                        r.below(span.min(4))
                    } else {
                        r.below(span)
                    };
                    if let Some(c) = char::from_u32(lo as u32 + off as u32) {
                        break c;
                    }
                };
                let mut buf = [0; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
            Symbol::NonTerminal(t) => {
                let alts = &rules[t.index()].alternatives;
                let a = if d < depth {
                    r.below(alts.len())
                } else {
                    best[t.index()]
                };
                for s in alts[a].iter().rev() {
                    stack.push((s.clone(), d + 1));
                }
            }
        }
    }
    out
}

/// A near miss of `text`: one byte deleted, inserted or replaced (with a
/// byte from `alphabet`), or the text cut short.
pub fn mutate(text: &[u8], alphabet: &[u8], r: &mut SplitMix64) -> Vec<u8> {
    let mut s = text.to_vec();
    let at = r.below(s.len() + 1);
    let byte = alphabet[r.below(alphabet.len())];
    match r.below(4) {
        0 if at < s.len() => {
            s.remove(at);
        }
        1 => s.insert(at, byte),
        2 if at < s.len() => s[at] = byte,
        _ => s.truncate(at),
    }
    s
}
