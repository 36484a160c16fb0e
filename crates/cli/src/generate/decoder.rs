//! The constrained decoding loop, independent of any model: fill the mask,
//! apply it, sample, accept; and jump-forward that keeps the model's view
//! canonical. `tokensieve generate` drives it with a candle model; the tests
//! below drive it with a deterministic fake model over real grammars.
//!
//! The model is fed lazily: a sampled token reaches the model only when the
//! next logits are needed. So when jump-forward retokenizes the boundary
//! (the last sampled token plus the forced bytes), the sampled token is
//! usually not in the model's cache yet and nothing is recomputed. Before
//! every forward pass the loop compares what the model has seen with the
//! grammar's tokens (prompt + output) and truncates the model's cache at the
//! first difference, so the two can never disagree.

use anyhow::{Context, bail};
use std::time::{Duration, Instant};
use tokensieve::{GrammarObject, LogitsMut, MaskDevice, Vocabulary};

/// A causal language model with a KV cache.
pub trait LanguageModel {
    /// Feeds `tokens` at positions `pos..pos + tokens.len()` (the cache holds
    /// exactly `pos` earlier tokens) and returns the logits that follow the
    /// last one: one per vocabulary id.
    fn forward(&mut self, tokens: &[u32], pos: usize) -> anyhow::Result<Vec<f32>>;
    /// Forgets positions `pos..`: the next forward starts at `pos`.
    fn truncate(&mut self, pos: usize);
}

/// The model's tokenizer, for retokenizing jump-forward boundaries: tokens
/// whose bytes are exactly `text`, as the tokenizer would produce them, or
/// `None` when it cannot spell `text` exactly.
pub trait Encoder {
    fn encode(&self, text: &[u8]) -> Option<Vec<u32>>;
}

/// How the next token is picked from the masked logits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sampling {
    /// 0 = greedy (the lowest id among equal maxima).
    pub temperature: f32,
    /// Nucleus sampling: the smallest set of tokens whose probability reaches `top_p`.
    pub top_p: f32,
    pub seed: u64,
}

#[derive(Debug, Clone, Copy)]
pub struct DecodeOptions {
    /// No token is sampled once the output has this many (forced tokens
    /// included); a jump-forward that starts below it may end above it.
    pub max_tokens: usize,
    pub jump_forward: bool,
    pub sampling: Sampling,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// A stop token was sampled (the matcher allowed it: the output may end).
    StopToken(u32),
    MaxTokens,
}

/// What a generation produced, with its counters.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Output tokens, without the stop token.
    pub tokens: Vec<u32>,
    pub text: Vec<u8>,
    pub stop: Option<StopReason>,
    /// Tokens chosen by the sampler.
    pub sampled: usize,
    /// Tokens appended by jump-forward, without sampling.
    pub forced: usize,
    /// Bytes appended by jump-forward.
    pub forced_bytes: usize,
    /// Jump-forwards whose retokenization changed the sampled token.
    pub retokenized: usize,
    /// Positions the model had to recompute after a retokenized boundary.
    pub recomputed: usize,
    pub forward_passes: usize,
    pub prompt_time: Duration,
    /// Time in forward passes after the prompt's.
    pub model_time: Duration,
    /// Time filling and applying masks.
    pub mask_time: Duration,
    pub total_time: Duration,
}

/// Runs constrained generation after `prompt` until a stop token or
/// `max_tokens`, masking logits on `device`; `on_text` receives the output
/// bytes as they are decided.
// Each argument plays its own part (model, device, tokenizer, vocabulary,
// matcher, prompt, options, output); a struct holding them would only rename them.
#[allow(clippy::too_many_arguments)]
pub fn generate(
    model: &mut dyn LanguageModel,
    device: &dyn MaskDevice,
    encoder: &dyn Encoder,
    vocab: &Vocabulary,
    matcher: &mut Box<dyn GrammarObject>,
    prompt: &[u32],
    options: &DecodeOptions,
    on_text: &mut dyn FnMut(&[u8]),
) -> anyhow::Result<Outcome> {
    let start = Instant::now();
    let mut out = Outcome::default();
    let mut rng = tokensieve::testing::SplitMix64(options.sampling.seed);
    // What the model's cache holds (prompt + output tokens fed so far).
    let mut seen: Vec<u32> = Vec::new();
    let mut row = vec![0u32; vocab.mask_words()];
    model.truncate(0);
    // A grammar may be certain of how the output starts (`{"name":` …).
    if options.jump_forward && options.max_tokens > 0 {
        let forced = matcher.jump_forward();
        if !forced.is_empty() {
            jump(encoder, vocab, matcher, &mut out, None, &forced)?;
            on_text(&forced);
        }
    }
    while out.tokens.len() < options.max_tokens {
        // Bring the model in line with the grammar's tokens, then read logits.
        let wanted: Vec<u32> = prompt.iter().chain(&out.tokens).copied().collect();
        let (common, feed) = plan_feed(&seen, &wanted);
        if common < seen.len() {
            out.recomputed += seen.len() - common;
            model.truncate(common);
            seen.truncate(common);
        }
        if feed.is_empty() {
            bail!("internal: nothing new to feed the model at position {common}");
        }
        let t = Instant::now();
        let mut logits = model.forward(&feed, common)?;
        if seen.is_empty() {
            out.prompt_time += t.elapsed();
        } else {
            out.model_time += t.elapsed();
        }
        out.forward_passes += 1;
        seen.extend(&feed);
        if logits.len() != vocab.vocab_size() {
            bail!(
                "the model gives {} logits but the vocabulary has {} ids",
                logits.len(),
                vocab.vocab_size()
            );
        }

        let t = Instant::now();
        matcher.fill_bitmask(&mut row);
        device
            .apply_token_bitmask_inplace(
                LogitsMut::F32(&mut logits),
                vocab.vocab_size(),
                &row,
                None,
            )
            .context("applying the mask")?;
        out.mask_time += t.elapsed();

        let token = sample(&logits, &options.sampling, &mut rng)
            .context("the grammar allows no token here (a dead end: a backend bug)")?;
        matcher.accept_token(token).with_context(|| {
            format!("the matcher refused token {token}, which its mask allowed")
        })?;
        if vocab.is_stop(token) {
            out.stop = Some(StopReason::StopToken(token));
            break;
        }
        out.sampled += 1;
        out.tokens.push(token);
        let bytes = vocab.token_bytes(token);
        out.text.extend_from_slice(bytes);
        on_text(bytes);

        if options.jump_forward && out.tokens.len() < options.max_tokens {
            let forced = matcher.jump_forward();
            if !forced.is_empty() {
                jump(encoder, vocab, matcher, &mut out, Some(token), &forced)?;
                on_text(&forced);
            }
        }
    }
    if out.stop.is_none() {
        out.stop = Some(StopReason::MaxTokens);
    }
    out.total_time = start.elapsed();
    Ok(out)
}

/// Where the model's cache (`seen`) and the grammar's tokens (`wanted`)
/// part, and what to feed from there. With lazy feeding a retokenized
/// boundary token has not reached the model yet, so `common == seen.len()`
/// in practice; a caller that feeds eagerly gets the rollback here.
fn plan_feed(seen: &[u32], wanted: &[u32]) -> (usize, Vec<u32>) {
    let common = seen.iter().zip(wanted).take_while(|(a, b)| a == b).count();
    (common, wanted[common..].to_vec())
}

/// Appends the certain bytes `forced` after the sampled `token` (`None` at
/// the start of the output): the boundary `token + forced` is retokenized as
/// the model's tokenizer would write it, the matcher steps back over `token`
/// and walks the new tokens. If the tokenizer cannot spell the boundary in
/// tokens the grammar accepts, `token` stays and `forced` alone is encoded;
/// the grammar's bytes are certain, so one of the two succeeds unless the
/// vocabulary cannot spell them at all (then an error).
fn jump(
    encoder: &dyn Encoder,
    vocab: &Vocabulary,
    matcher: &mut Box<dyn GrammarObject>,
    out: &mut Outcome,
    token: Option<u32>,
    forced: &[u8],
) -> anyhow::Result<()> {
    // Try on a fork, so a refused attempt leaves the matcher as it was.
    let attempt = |rollback: usize, text: &[u8]| -> Option<(Box<dyn GrammarObject>, Vec<u32>)> {
        let ids = encoder.encode(text)?;
        if ids.is_empty() || vocab.decode(&ids) != text {
            return None;
        }
        let mut fork = matcher.fork();
        fork.rollback(rollback).ok()?;
        fork.accept_tokens(&ids).ok()?;
        Some((fork, ids))
    };
    let retokenized = token.and_then(|token| {
        let mut boundary = vocab.token_bytes(token).to_vec();
        boundary.extend_from_slice(forced);
        attempt(1, &boundary).map(|(fork, ids)| (token, fork, ids))
    });
    if let Some((token, fork, ids)) = retokenized {
        *matcher = fork;
        out.tokens.pop();
        if ids[0] != token {
            out.retokenized += 1;
        }
        out.forced += ids.len() - 1;
        out.tokens.extend(&ids);
    } else if let Some((fork, ids)) = attempt(0, forced) {
        *matcher = fork;
        out.forced += ids.len();
        out.tokens.extend(&ids);
    } else {
        bail!(
            "jump-forward: the tokenizer cannot spell the certain bytes {:?} in tokens the grammar accepts",
            String::from_utf8_lossy(forced)
        );
    }
    out.forced_bytes += forced.len();
    out.text.extend_from_slice(forced);
    Ok(())
}

/// Picks a token from masked logits (`-inf` = not allowed); `None` if none is allowed.
pub fn sample(
    logits: &[f32],
    s: &Sampling,
    rng: &mut tokensieve::testing::SplitMix64,
) -> Option<u32> {
    let allowed = |x: f32| x > f32::NEG_INFINITY;
    if s.temperature <= 0.0 {
        let mut best: Option<(u32, f32)> = None;
        for (i, &x) in logits.iter().enumerate() {
            if allowed(x) && best.is_none_or(|(_, b)| x > b) {
                best = Some((i as u32, x));
            }
        }
        return best.map(|(i, _)| i);
    }
    let max = logits
        .iter()
        .copied()
        .filter(|&x| allowed(x))
        .fold(f32::NEG_INFINITY, f32::max);
    if max == f32::NEG_INFINITY {
        return None;
    }
    let mut probs: Vec<(u32, f32)> = logits
        .iter()
        .enumerate()
        .filter(|(_, x)| allowed(**x))
        .map(|(i, &x)| (i as u32, ((x - max) / s.temperature).exp()))
        .collect();
    let total: f32 = probs.iter().map(|p| p.1).sum();
    probs.iter_mut().for_each(|p| p.1 /= total);
    if s.top_p < 1.0 {
        probs.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut mass = 0.0;
        let keep = probs
            .iter()
            .position(|p| {
                mass += p.1;
                mass >= s.top_p
            })
            .map_or(probs.len(), |i| i + 1);
        probs.truncate(keep);
    }
    let total: f32 = probs.iter().map(|p| p.1).sum();
    // 24 random bits are plenty for a probability draw.
    let mut r = (rng.next_u64() >> 40) as f32 / (1u64 << 24) as f32 * total;
    for &(id, p) in &probs {
        if r < p {
            return Some(id);
        }
        r -= p;
    }
    probs.last().map(|p| p.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use tokensieve::{BackendConfig, Constraint, ConstraintSpec, SpecOptions, Whitespace};

    /// A model that "wants" to write `target`: the logit of a token is its
    /// length when the output so far plus the token is still a prefix of the
    /// target, else 0, and a stop token scores high once the target is done.
    /// It checks that it is fed contiguously and records what it saw.
    struct FakeModel<'a> {
        vocab: &'a Vocabulary,
        prompt_len: usize,
        target: Vec<u8>,
        seen: Vec<u32>,
        truncations: usize,
    }

    impl LanguageModel for FakeModel<'_> {
        fn forward(&mut self, tokens: &[u32], pos: usize) -> anyhow::Result<Vec<f32>> {
            assert_eq!(pos, self.seen.len(), "fed at the wrong position");
            self.seen.extend_from_slice(tokens);
            let written = self.vocab.decode(&self.seen[self.prompt_len..]);
            let mut logits = vec![0.0f32; self.vocab.vocab_size()];
            for (id, b) in self.vocab.grammar_tokens() {
                let mut next = written.clone();
                next.extend_from_slice(b);
                if self.target.starts_with(&next) {
                    logits[id as usize] = b.len() as f32;
                }
            }
            if written == self.target {
                for &s in self.vocab.stop_tokens() {
                    logits[s as usize] = 100.0;
                }
            }
            Ok(logits)
        }

        fn truncate(&mut self, pos: usize) {
            self.truncations += 1;
            self.seen.truncate(pos);
        }
    }

    struct Greedy<'a>(&'a Vocabulary);
    impl Encoder for Greedy<'_> {
        fn encode(&self, text: &[u8]) -> Option<Vec<u32>> {
            self.0.encode_greedy(text)
        }
    }

    struct Hf<'a>(&'a tokensieve::hf::HfTokenizer);
    impl Encoder for Hf<'_> {
        fn encode(&self, text: &[u8]) -> Option<Vec<u32>> {
            self.0.encode(std::str::from_utf8(text).ok()?).ok()
        }
    }

    const SCHEMA: &str = r#"{"type": "object", "properties": {
        "name": {"type": "string"}, "is_active": {"type": "boolean"},
        "favourite_colour": {"enum": ["red", "green", "blue"]}},
        "required": ["name", "is_active", "favourite_colour"]}"#;
    const TARGET: &str = r#"{"name":"Ada","is_active":true,"favourite_colour":"green"}"#;

    fn run(
        vocab: &Arc<Vocabulary>,
        encoder: &dyn Encoder,
        target: &str,
        constraint: &Constraint,
        jump_forward: bool,
    ) -> (Outcome, Vec<u32>) {
        let backend =
            tokensieve::create_backend("regex-fsm", &BackendConfig::default(), vocab.clone())
                .unwrap();
        let grammar = backend.compile(constraint).unwrap();
        let mut matcher = grammar.matcher();
        let prompt = [vocab.stop_tokens()[0]];
        let mut model = FakeModel {
            vocab,
            prompt_len: 1,
            target: target.as_bytes().to_vec(),
            seen: Vec::new(),
            truncations: 0,
        };
        let options = DecodeOptions {
            max_tokens: 200,
            jump_forward,
            sampling: Sampling {
                temperature: 0.0,
                top_p: 1.0,
                seed: 0,
            },
        };
        let mut streamed = Vec::new();
        let out = generate(
            &mut model,
            &tokensieve::CpuDevice,
            encoder,
            vocab,
            &mut matcher,
            &prompt,
            &options,
            &mut |b| streamed.extend_from_slice(b),
        )
        .unwrap();
        assert_eq!(streamed, out.text, "the stream is the output");
        assert_eq!(
            vocab.decode(&out.tokens),
            out.text,
            "the tokens spell the output"
        );
        // The grammar accepts exactly the tokens the model was fed (and the
        // model saw the prompt and every output token but, at most, the last).
        assert!(matcher.is_terminated());
        let mut replay = grammar.matcher();
        replay.accept_tokens(&out.tokens).unwrap();
        assert!(replay.is_accepting());
        assert_eq!(model.seen[..1], prompt);
        let fed = &model.seen[1..];
        assert!(out.tokens.starts_with(fed) && out.tokens.len() - fed.len() <= 1);
        assert_eq!(
            model.truncations, 1,
            "only the reset at the start: lazy feeding never rolls back"
        );
        assert_eq!(out.recomputed, 0);
        (out, model.seen)
    }

    fn schema() -> Constraint {
        Constraint::with_options(
            ConstraintSpec::JsonSchema(SCHEMA.into()),
            SpecOptions {
                whitespace: Whitespace::Compact,
                ..Default::default()
            },
        )
    }

    #[test]
    fn jump_forward_keeps_the_greedy_output_on_the_fixture_vocabulary() {
        let vocab = Arc::new(tokensieve::vocab::fixtures::json_tiny());
        let encoder = Greedy(&vocab);
        let (plain, _) = run(&vocab, &encoder, TARGET, &schema(), false);
        let (jumped, _) = run(&vocab, &encoder, TARGET, &schema(), true);
        assert_eq!(String::from_utf8(plain.text.clone()).unwrap(), TARGET);
        assert_eq!(plain.text, jumped.text);
        assert_eq!(plain.stop, jumped.stop);
        assert_eq!(plain.forced, 0);
        assert!(jumped.forced > 0 && jumped.forced_bytes >= "{\"name\":\"".len());
        assert!(
            jumped.sampled < plain.sampled,
            "{} vs {}",
            jumped.sampled,
            plain.sampled
        );
    }

    /// With a real tokenizer the forced bytes come out in the tokenizer's
    /// own tokens, and the boundary token changes where the tokenizer merges
    /// the sampled token with what follows.
    #[test]
    fn jump_forward_retokenizes_with_a_real_tokenizer() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../../shared/data/tokenizers/llama3/tokenizer.json"
        );
        if !std::path::Path::new(path).exists() {
            tokensieve::skip!("{path} not present");
            return;
        }
        let tok = tokensieve::hf::HfTokenizer::from_file(path).unwrap();
        let vocab = Arc::new(tok.vocabulary().clone());
        let encoder = Hf(&tok);
        let (plain, _) = run(&vocab, &encoder, TARGET, &schema(), false);
        let (jumped, _) = run(&vocab, &encoder, TARGET, &schema(), true);
        assert_eq!(String::from_utf8(plain.text.clone()).unwrap(), TARGET);
        assert_eq!(plain.text, jumped.text);
        assert!(jumped.forced > 0);
        // The forced runs are in the tokenizer's own tokens: each forced run
        // re-encodes to itself.
        assert_eq!(jumped.sampled + jumped.forced, jumped.tokens.len());
        // A choice list whose members share a long prefix: after the first
        // sampled token the rest is certain.
        let choice = Constraint::new(ConstraintSpec::Choice(vec![
            "positive sentiment".into(),
            "negative sentiment".into(),
        ]));
        let (plain, _) = run(&vocab, &encoder, "negative sentiment", &choice, false);
        let (jumped, _) = run(&vocab, &encoder, "negative sentiment", &choice, true);
        assert_eq!(plain.text, jumped.text);
        assert_eq!(jumped.sampled, 1, "one token to choose, the rest is forced");
        assert_eq!(jumped.tokens, tok.encode("negative sentiment").unwrap());
    }

    #[test]
    fn max_tokens_stops_sampling() {
        let vocab = tokensieve::vocab::fixtures::json_tiny();
        let backend = tokensieve::create_backend(
            "regex-fsm",
            &BackendConfig::default(),
            Arc::new(vocab.clone()),
        )
        .unwrap();
        let grammar = backend.compile(&schema()).unwrap();
        for (jump_forward, max) in [(false, 3), (true, 3), (false, 0)] {
            let mut model = FakeModel {
                vocab: &vocab,
                prompt_len: 1,
                target: TARGET.as_bytes().to_vec(),
                seen: Vec::new(),
                truncations: 0,
            };
            let options = DecodeOptions {
                max_tokens: max,
                jump_forward,
                sampling: Sampling {
                    temperature: 0.0,
                    top_p: 1.0,
                    seed: 0,
                },
            };
            let mut matcher = grammar.matcher();
            let prompt = [vocab.stop_tokens()[0]];
            let out = generate(
                &mut model,
                &tokensieve::CpuDevice,
                &Greedy(&vocab),
                &vocab,
                &mut matcher,
                &prompt,
                &options,
                &mut |_| {},
            )
            .unwrap();
            assert_eq!(out.stop, Some(StopReason::MaxTokens));
            assert!(TARGET.as_bytes().starts_with(&out.text));
            if jump_forward {
                // The last sampled step started below the limit; its jump may pass it.
                assert!(out.sampled <= max && out.tokens.len() >= max, "{out:?}");
            } else {
                assert_eq!((out.tokens.len(), out.sampled), (max, max));
            }
        }
    }

    #[test]
    fn the_model_is_cut_back_to_the_first_difference() {
        assert_eq!(plan_feed(&[1, 2, 3], &[1, 2, 3, 4, 5]), (3, vec![4, 5]));
        // A boundary token the model saw was retokenized: 3 becomes 7 8.
        assert_eq!(plan_feed(&[1, 2, 3], &[1, 2, 7, 8]), (2, vec![7, 8]));
        assert_eq!(plan_feed(&[], &[1, 2]), (0, vec![1, 2]));
        assert_eq!(plan_feed(&[1, 2], &[1, 2]), (2, vec![]));
    }

    #[test]
    fn sampling_respects_the_mask_temperature_and_top_p() {
        let mut rng = tokensieve::testing::SplitMix64(7);
        let ninf = f32::NEG_INFINITY;
        let greedy = Sampling {
            temperature: 0.0,
            top_p: 1.0,
            seed: 0,
        };
        assert_eq!(sample(&[1.0, 3.0, 3.0, ninf], &greedy, &mut rng), Some(1));
        assert_eq!(sample(&[ninf, ninf], &greedy, &mut rng), None);
        let hot = Sampling {
            temperature: 1.0,
            top_p: 1.0,
            seed: 0,
        };
        let mut counts = [0usize; 4];
        for _ in 0..4000 {
            counts[sample(&[0.0, 0.0, ninf, 0.0f32.ln_1p()], &hot, &mut rng).unwrap() as usize] +=
                1;
        }
        assert_eq!(counts[2], 0, "a masked token is never sampled");
        assert!(
            counts
                .iter()
                .enumerate()
                .all(|(i, &c)| i == 2 || (1100..1600).contains(&c)),
            "{counts:?}"
        );
        // top_p 0.5 of [0.6, 0.3, 0.1]: only the first survives.
        let nucleus = Sampling {
            temperature: 1.0,
            top_p: 0.5,
            seed: 0,
        };
        let logits = [0.6f32.ln(), 0.3f32.ln(), 0.1f32.ln()];
        assert!((0..200).all(|_| sample(&logits, &nucleus, &mut rng) == Some(0)));
        assert_eq!(sample(&[ninf, ninf], &hot, &mut rng), None);
    }
}
