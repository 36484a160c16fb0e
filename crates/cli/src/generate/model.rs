//! A quantized GGUF model on the CPU with candle: the Llama family
//! (`general.architecture = llama`: SmolLM2, Llama 2/3, Mistral-style
//! models) through `candle_transformers::models::quantized_llama`.

use super::decoder::LanguageModel;
use crate::common::BadInput;
use candle_core::quantized::gguf_file;
use candle_core::{Device, Tensor};
use candle_transformers::models::quantized_llama::ModelWeights;
use std::path::Path;

/// Architectures this loader runs (the GGUF `general.architecture`).
pub const SUPPORTED_ARCHITECTURES: &[&str] = &["llama"];

pub struct CandleModel {
    weights: ModelWeights,
    device: Device,
    /// Tokens in the KV cache, so a truncation can be replayed (candle's
    /// cache can only be cleared, not shortened).
    history: Vec<u32>,
    /// The cache holds more than `history`: the next forward rebuilds it.
    stale: bool,
    /// Rows of the output projection: the logits' width.
    pub vocab_rows: usize,
}

impl CandleModel {
    /// Loads the weights of a GGUF file; bad input (not GGUF, another
    /// architecture) is a [`BadInput`].
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let shown = path.display();
        let mut file = std::fs::File::open(path)
            .map_err(|e| BadInput(format!("cannot open model {shown}: {e}")))?;
        let content = gguf_file::Content::read(&mut file)
            .map_err(|e| BadInput(format!("{shown} is not a GGUF model candle can read: {e}")))?;
        let arch = content
            .metadata
            .get("general.architecture")
            .and_then(|v| v.to_string().ok())
            .cloned()
            .unwrap_or_default();
        if !SUPPORTED_ARCHITECTURES.contains(&arch.as_str()) {
            return Err(BadInput(format!(
                "{shown}: GGUF architecture `{arch}` is not supported (supported: {})",
                SUPPORTED_ARCHITECTURES.join(", ")
            ))
            .into());
        }
        let vocab_rows = content
            .tensor_infos
            .get("token_embd.weight")
            .map(|t| t.shape.dims()[0])
            .ok_or_else(|| BadInput(format!("{shown}: no token_embd.weight tensor")))?;
        let device = Device::Cpu;
        let weights = ModelWeights::from_gguf(content, &mut file, &device)
            .map_err(|e| BadInput(format!("{shown}: cannot load the weights: {e}")))?;
        Ok(CandleModel {
            weights,
            device,
            history: Vec::new(),
            stale: false,
            vocab_rows,
        })
    }
}

impl LanguageModel for CandleModel {
    fn forward(&mut self, tokens: &[u32], pos: usize) -> anyhow::Result<Vec<f32>> {
        anyhow::ensure!(
            pos == self.history.len(),
            "forward at {pos}, cache holds {}",
            self.history.len()
        );
        let (input, at) = if self.stale {
            // Rebuild the cache: position 0 makes candle start a new one.
            let mut all = self.history.clone();
            all.extend_from_slice(tokens);
            (all, 0)
        } else {
            (tokens.to_vec(), pos)
        };
        let x = Tensor::new(input.as_slice(), &self.device)?.unsqueeze(0)?;
        let logits = self.weights.forward(&x, at)?;
        let logits = logits
            .squeeze(0)?
            .to_dtype(candle_core::DType::F32)?
            .to_vec1::<f32>()?;
        self.history.extend_from_slice(tokens);
        self.stale = false;
        Ok(logits)
    }

    fn truncate(&mut self, pos: usize) {
        if pos < self.history.len() {
            self.history.truncate(pos);
            self.stale = true;
        }
        if pos == 0 {
            self.weights.clear_kv_cache();
            self.stale = false;
        }
    }
}
