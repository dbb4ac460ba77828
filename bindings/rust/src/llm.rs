//! Language models (include/kiln/c/kiln_llm.h): a [`Model`] is loaded once and shared
//! read-only by any number of threads (it is `Send + Sync`); a [`Session`] is one
//! conversation and its KV cache, used by one thread at a time (it is `Send`, not `Sync`,
//! and its methods that change it take `&mut self`).
//!
//! ```no_run
//! let model = kiln::llm::Model::load(kiln::llm::default_model_path()?)?;
//! let prompt = model.tokenize("The capital of France is", false, false)?;
//! let mut session = model.session()?;
//! let r = session.generate(&prompt, &Default::default(), |_, text| {
//!     print!("{text}");
//!     true // false stops
//! })?;
//! # Ok::<(), kiln::Error>(())
//! ```

use std::any::Any;
use std::ffi::{CStr, CString};
use std::os::raw::{c_char, c_int, c_void};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::ptr;

use crate::{check, make, sys, Array, Dtype, Error, Result};

/// Where new weights, activations and caches live.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Device {
    #[default]
    Cpu,
    /// A GPU by ordinal.
    Cuda(i32),
}

impl Device {
    fn to_c(self) -> sys::kiln_device {
        match self {
            Device::Cpu => sys::kiln_device {
                type_: sys::KILN_DEVICE_CPU,
                index: 0,
            },
            Device::Cuda(i) => sys::kiln_device {
                type_: sys::KILN_DEVICE_CUDA,
                index: i,
            },
        }
    }
}

/// Options of [`Model::load_with`].
#[derive(Clone, Copy, Debug)]
pub struct LoadOptions {
    pub device: Device,
    /// Activations and KV caches: float32, float16 or bfloat16. Weights keep their stored type.
    pub dtype: Dtype,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            device: Device::Cpu,
            dtype: Dtype::Float32,
        }
    }
}

/// A C string for kiln, or an error naming the call when `s` holds a NUL byte.
fn c_string(func: &str, what: &str, s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::new(format!("[{func}] the {what} contains a NUL byte")))
}

/// Takes a string kiln allocated, releasing it.
unsafe fn take_string(s: *mut c_char) -> String {
    let out = CStr::from_ptr(s).to_string_lossy().into_owned();
    sys::kiln_string_free(s);
    out
}

/// Where scripts/setup puts the default model (SmolLM2-135M-Instruct, Q4_1 GGUF): in
/// `$KILN_MODELS_DIR`, else `${XDG_CACHE_HOME:-$HOME/.cache}/kiln-models`. The file may not exist.
pub fn default_model_path() -> Result<PathBuf> {
    let mut s = ptr::null_mut();
    check(unsafe { sys::kiln_llm_default_model_path(&mut s) })?;
    Ok(PathBuf::from(unsafe { take_string(s) }))
}

/// A model's configuration and special tokens (`None` when the vocabulary has none).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ModelInfo {
    pub vocab_size: usize,
    pub n_layers: usize,
    pub d_model: usize,
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    pub ffn_dim: usize,
    pub context_length: usize,
    /// Bytes of weights one decode step reads.
    pub weight_bytes: usize,
    /// Features of each head that RoPE rotates.
    pub rope_dims: usize,
    pub rope_base: f32,
    /// Position multiplier (linear rope scaling: 1 / factor).
    pub rope_scale: f32,
    /// Rotate adjacent pairs (GGUF llama), else halves (NeoX, Qwen).
    pub rope_traditional: bool,
    pub norm_eps: f32,
    /// Biases on q, k and v (Qwen2).
    pub qkv_bias: bool,
    /// RMSNorm over each head of q and k (Qwen3).
    pub qk_norm: bool,
    /// The token embedding is also the output projection.
    pub tied_embeddings: bool,
    pub bos: Option<i32>,
    pub eos: Option<i32>,
    /// End of turn ("<|im_end|>", "<|eot_id|>").
    pub eot: Option<i32>,
}

/// One tensor of a model file as the file holds it. Dense: `w` holds the values. Quantized in
/// kiln's affine format: `w` is the packed uint32 codes, and
/// `x.quantized_matmul(&w, scales, biases, true, group_size, bits)` is x times the tensor transposed.
#[derive(Clone, Debug)]
pub struct Tensor {
    pub w: Array,
    /// Quantized only.
    pub scales: Option<Array>,
    pub biases: Option<Array>,
    /// 0 when dense.
    pub group_size: i32,
    pub bits: i32,
}

/// One turn of a conversation.
#[derive(Clone, Copy, Debug)]
pub struct ChatMessage<'a> {
    /// "system", "user" or "assistant".
    pub role: &'a str,
    pub content: &'a str,
}

/// A loaded language model (GGUF or safetensors), freed on drop; sessions keep what they need
/// of it.
pub struct Model {
    h: sys::kiln_llm_model,
}

// SAFETY: the C API shares a loaded model read-only between any number of threads: its weights,
// tokenizer and compiled step are immutable, and compiled calls are thread-safe.
unsafe impl Send for Model {}
unsafe impl Sync for Model {}

impl Drop for Model {
    fn drop(&mut self) {
        unsafe { sys::kiln_llm_model_free(self.h) };
    }
}

impl Model {
    /// Loads a model onto the CPU with float32 activations; errors name the file.
    pub fn load(path: impl AsRef<Path>) -> Result<Model> {
        Model::load_with(path, &LoadOptions::default())
    }

    pub fn load_with(path: impl AsRef<Path>, options: &LoadOptions) -> Result<Model> {
        let path = path.as_ref();
        let text = path.to_str().ok_or_else(|| {
            Error::new(format!(
                "[kiln_llm_model_load] the path {} is not UTF-8",
                path.display()
            ))
        })?;
        let c = c_string("kiln_llm_model_load", "path", text)?;
        let mut h = ptr::null_mut();
        check(unsafe { sys::kiln_llm_model_load(&mut h, c.as_ptr(), options.device.to_c(), options.dtype as c_int) })?;
        Ok(Model { h })
    }

    /// The model's configuration.
    pub fn info(&self) -> ModelInfo {
        let mut i = sys::kiln_llm_model_info::default();
        // SAFETY: self.h is a live model, so this cannot fail.
        let rc = unsafe { sys::kiln_llm_model_get_info(&mut i, self.h) };
        assert!(rc == 0, "kiln_llm_model_get_info failed: {}", check(rc).unwrap_err());
        let token = |t: i32| (t >= 0).then_some(t);
        ModelInfo {
            vocab_size: i.vocab_size as usize,
            n_layers: i.n_layers as usize,
            d_model: i.d_model as usize,
            n_heads: i.n_heads as usize,
            n_kv_heads: i.n_kv_heads as usize,
            head_dim: i.head_dim as usize,
            ffn_dim: i.ffn_dim as usize,
            context_length: i.context_length as usize,
            weight_bytes: i.weight_bytes,
            rope_dims: i.rope_dims as usize,
            rope_base: i.rope_base,
            rope_scale: i.rope_scale,
            rope_traditional: i.rope_traditional,
            norm_eps: i.norm_eps,
            qkv_bias: i.qkv_bias,
            qk_norm: i.qk_norm,
            tied_embeddings: i.tied_embeddings,
            bos: token(i.bos_token),
            eos: token(i.eos_token),
            eot: token(i.eot_token),
        }
    }

    /// Whether the file holds a tensor of this name (GGUF naming: "blk.0.attn_q.weight",
    /// "token_embd.weight"; safetensors names are mapped to these).
    pub fn has_tensor(&self, name: &str) -> bool {
        let Ok(c) = CString::new(name) else { return false };
        let mut has = false;
        let rc = unsafe { sys::kiln_llm_model_has_tensor(&mut has, self.h, c.as_ptr()) };
        rc == 0 && has
    }

    /// One tensor of the file, on the CPU (viewing the mapped file where its layout allows); the
    /// error names the file and tensor when there is none.
    pub fn tensor(&self, name: &str) -> Result<Tensor> {
        let c = c_string("kiln_llm_model_tensor", "name", name)?;
        let (mut w, mut s, mut b) = (ptr::null_mut(), ptr::null_mut(), ptr::null_mut());
        let (mut group_size, mut bits) = (0, 0);
        check(unsafe {
            sys::kiln_llm_model_tensor(&mut w, &mut s, &mut b, &mut group_size, &mut bits, self.h, c.as_ptr())
        })?;
        // Dense tensors leave scales and biases NULL, as they were.
        let optional = |h: sys::kiln_array| (!h.is_null()).then_some(Array { h });
        Ok(Tensor {
            w: Array { h: w },
            scales: optional(s),
            biases: optional(b),
            group_size,
            bits,
        })
    }

    /// Text to token ids. `add_special`: BOS/EOS as the model asks; `parse_special`: control-token
    /// text such as "<|im_start|>" becomes its id.
    pub fn tokenize(&self, text: &str, add_special: bool, parse_special: bool) -> Result<Vec<i32>> {
        let c = c_string("kiln_llm_tokenize", "text", text)?;
        let (mut ids, mut n) = (ptr::null_mut(), 0usize);
        check(unsafe { sys::kiln_llm_tokenize(&mut ids, &mut n, self.h, c.as_ptr(), add_special, parse_special) })?;
        // SAFETY: kiln allocated n ids (never a NULL pointer on success).
        let out = unsafe { std::slice::from_raw_parts(ids, n) }.to_vec();
        unsafe { sys::kiln_llm_tokens_free(ids) };
        Ok(out)
    }

    /// Token ids to text (always valid UTF-8).
    pub fn detokenize(&self, ids: &[i32]) -> Result<String> {
        let mut s = ptr::null_mut();
        check(unsafe { sys::kiln_llm_detokenize(&mut s, self.h, ids.as_ptr(), ids.len()) })?;
        Ok(unsafe { take_string(s) })
    }

    /// The messages through the model's chat template (ChatML or Llama 3), the assistant's turn
    /// opened; tokenize it with `parse_special`.
    pub fn chat_prompt(&self, messages: &[ChatMessage]) -> Result<String> {
        let mut roles = Vec::with_capacity(messages.len());
        let mut contents = Vec::with_capacity(messages.len());
        for m in messages {
            roles.push(c_string("kiln_llm_chat_prompt", "role", m.role)?);
            contents.push(c_string("kiln_llm_chat_prompt", "content", m.content)?);
        }
        let r: Vec<*const c_char> = roles.iter().map(|c| c.as_ptr()).collect();
        let c: Vec<*const c_char> = contents.iter().map(|c| c.as_ptr()).collect();
        let mut s = ptr::null_mut();
        check(unsafe { sys::kiln_llm_chat_prompt(&mut s, self.h, r.as_ptr(), c.as_ptr(), messages.len()) })?;
        Ok(unsafe { take_string(s) })
    }

    /// Whether generation ends at this token (end of sequence or of turn).
    pub fn is_end_of_generation(&self, token: i32) -> bool {
        let mut end = false;
        let rc = unsafe { sys::kiln_llm_is_end_of_generation(&mut end, self.h, token) };
        rc == 0 && end
    }

    /// An empty conversation on this model.
    pub fn session(&self) -> Result<Session> {
        let mut h = ptr::null_mut();
        check(unsafe { sys::kiln_llm_session_new(&mut h, self.h) })?;
        Ok(Session { h })
    }
}

/// One conversation: the tokens it holds and their KV cache, freed on drop.
pub struct Session {
    h: sys::kiln_llm_session,
}

// SAFETY: a session may move between threads (the C API asks only that one thread use it at a
// time, which &mut self and the absence of Sync give).
unsafe impl Send for Session {}

impl Drop for Session {
    fn drop(&mut self) {
        unsafe { sys::kiln_llm_session_free(self.h) };
    }
}

impl Session {
    /// Tokens the session holds.
    pub fn position(&self) -> usize {
        let mut n = 0i64;
        unsafe { sys::kiln_llm_session_position(&mut n, self.h) };
        n as usize
    }

    /// Keeps the first n tokens (a conversation going on from a shared prefix).
    pub fn truncate(&mut self, n: usize) -> Result<()> {
        check(unsafe { sys::kiln_llm_session_truncate(self.h, n as i64) })
    }

    /// Forgets every token and frees the KV cache.
    pub fn clear(&mut self) -> Result<()> {
        check(unsafe { sys::kiln_llm_session_clear(self.h) })
    }

    /// Appends tokens (prefilled in chunks); the logits after the last one: [vocab] float32.
    pub fn append(&mut self, ids: &[i32]) -> Result<Array> {
        make(|o| unsafe { sys::kiln_llm_session_append(o, self.h, ids.as_ptr(), ids.len()) })
    }

    /// Appends tokens in one step; the logits after each of them: [ids.len(), vocab] float32.
    pub fn append_all(&mut self, ids: &[i32]) -> Result<Array> {
        make(|o| unsafe { sys::kiln_llm_session_append_all(o, self.h, ids.as_ptr(), ids.len()) })
    }

    /// Appends the prompt, then samples until an end-of-generation or stop token,
    /// `max_tokens`, the context length, or `on_token` returns false. `on_token` gets each token
    /// with the whole UTF-8 characters it completes (maybe ""), and, if a character was left
    /// unfinished at the end, token -1 with the rest. A panic in `on_token` stops generation
    /// and resumes once kiln has returned.
    pub fn generate<F>(&mut self, prompt: &[i32], options: &GenerateOptions, mut on_token: F) -> Result<GenerateResult>
    where
        F: FnMut(i32, &str) -> bool,
    {
        let max_tokens = c_int::try_from(options.max_tokens).map_err(|_| {
            Error::new(format!(
                "[kiln_llm_generate] max_tokens {} is too large",
                options.max_tokens
            ))
        })?;
        let o = sys::kiln_llm_generate_options {
            max_tokens,
            sampling: options.sampling.to_c(),
            stop_tokens: options.stop_tokens.as_ptr(),
            n_stop_tokens: options.stop_tokens.len(),
        };
        let mut g = Generation {
            on_token: &mut on_token,
            tokens: Vec::new(),
            text: String::new(),
            panic: None,
        };
        let mut st = sys::kiln_llm_generate_stats::default();
        let rc = unsafe {
            sys::kiln_llm_generate(
                self.h,
                prompt.as_ptr(),
                prompt.len(),
                &o,
                Some(token_trampoline),
                &mut g as *mut Generation as *mut c_void,
                &mut st,
            )
        };
        if let Some(p) = g.panic {
            resume_unwind(p);
        }
        check(rc)?;
        Ok(GenerateResult {
            tokens: g.tokens,
            text: g.text,
            prompt_tokens: st.prompt_tokens as usize,
            prompt_seconds: st.prompt_seconds,
            generate_seconds: st.generate_seconds,
            stop_reason: StopReason::from_c(st.stop_reason)?,
        })
    }
}

/// One decode step of several sessions of one model together (the batched decode):
/// `sessions[i]` appends `tokens[i]`. The logits: [sessions.len(), vocab] float32. Sessions may
/// join and leave between steps.
pub fn step(sessions: &mut [&mut Session], tokens: &[i32]) -> Result<Array> {
    if sessions.len() != tokens.len() {
        return Err(Error::new(format!(
            "[kiln_llm_step] {} tokens for {} sessions",
            tokens.len(),
            sessions.len()
        )));
    }
    let mut hs: Vec<sys::kiln_llm_session> = sessions.iter().map(|s| s.h).collect();
    make(|o| unsafe { sys::kiln_llm_step(o, hs.as_mut_ptr(), tokens.as_ptr(), hs.len()) })
}

/// How generation picks each token. `Default` is kiln's defaults (temperature 0.8, top-k 40,
/// top-p 0.95, min-p 0.05); [`Sampling::greedy`] always takes the most likely token.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sampling {
    /// 0 or less: greedy.
    pub temperature: f32,
    /// 0: off.
    pub top_k: i32,
    /// 1: off.
    pub top_p: f32,
    /// 0: off.
    pub min_p: f32,
    /// 1: off.
    pub repetition_penalty: f32,
    pub repeat_last_n: i32,
    pub seed: u64,
}

impl Default for Sampling {
    fn default() -> Self {
        let mut c = sys::kiln_llm_sampling::default();
        unsafe { sys::kiln_llm_sampling_default(&mut c) };
        Sampling {
            temperature: c.temperature,
            top_k: c.top_k,
            top_p: c.top_p,
            min_p: c.min_p,
            repetition_penalty: c.repetition_penalty,
            repeat_last_n: c.repeat_last_n,
            seed: c.seed,
        }
    }
}

impl Sampling {
    pub fn greedy() -> Self {
        Sampling {
            temperature: 0.0,
            ..Default::default()
        }
    }

    fn to_c(self) -> sys::kiln_llm_sampling {
        sys::kiln_llm_sampling {
            temperature: self.temperature,
            top_k: self.top_k,
            top_p: self.top_p,
            min_p: self.min_p,
            repetition_penalty: self.repetition_penalty,
            repeat_last_n: self.repeat_last_n,
            seed: self.seed,
        }
    }
}

/// Bounds of a generation; `Default` is 256 tokens with the default sampling.
#[derive(Clone, Debug, PartialEq)]
pub struct GenerateOptions {
    pub max_tokens: usize,
    pub sampling: Sampling,
    /// Ids that also end generation, besides the model's own end-of-generation tokens.
    pub stop_tokens: Vec<i32>,
}

impl Default for GenerateOptions {
    fn default() -> Self {
        GenerateOptions {
            max_tokens: 256,
            sampling: Sampling::default(),
            stop_tokens: Vec::new(),
        }
    }
}

/// Why a generation stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// An end-of-generation or stop token (not kept).
    StopToken,
    MaxTokens,
    ContextFull,
    /// The callback returned false.
    Callback,
}

impl StopReason {
    fn from_c(r: sys::kiln_llm_stop_reason) -> Result<StopReason> {
        Ok(match r {
            sys::KILN_LLM_STOP_TOKEN => StopReason::StopToken,
            sys::KILN_LLM_STOP_MAX_TOKENS => StopReason::MaxTokens,
            sys::KILN_LLM_STOP_CONTEXT_FULL => StopReason::ContextFull,
            sys::KILN_LLM_STOP_CALLBACK => StopReason::Callback,
            _ => return Err(Error::new(format!("[kiln_llm_generate] unknown stop reason {r}"))),
        })
    }
}

/// What [`Session::generate`] produced.
#[derive(Clone, Debug, PartialEq)]
pub struct GenerateResult {
    /// Generated, the stop token excluded.
    pub tokens: Vec<i32>,
    pub text: String,
    pub prompt_tokens: usize,
    /// Prefill, to the first token's logits.
    pub prompt_seconds: f64,
    /// Every later step.
    pub generate_seconds: f64,
    pub stop_reason: StopReason,
}

/// The state one generate call shares with its token callback.
struct Generation<'a> {
    on_token: &'a mut dyn FnMut(i32, &str) -> bool,
    tokens: Vec<i32>,
    text: String,
    panic: Option<Box<dyn Any + Send>>,
}

unsafe extern "C" fn token_trampoline(token: i32, text: *const c_char, len: usize, payload: *mut c_void) -> c_int {
    let g = &mut *(payload as *mut Generation);
    if g.panic.is_some() {
        return 1;
    }
    let bytes = if len == 0 {
        &[][..]
    } else {
        std::slice::from_raw_parts(text as *const u8, len)
    };
    let piece = String::from_utf8_lossy(bytes);
    if token >= 0 {
        g.tokens.push(token);
    }
    g.text.push_str(&piece);
    // No panic may unwind into C: keep it, stop, and resume it in generate.
    let on_token = &mut g.on_token;
    match catch_unwind(AssertUnwindSafe(|| on_token(token, &piece))) {
        Ok(true) => 0,
        Ok(false) => 1,
        Err(p) => {
            g.panic = Some(p);
            1
        }
    }
}
