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

use std::ffi::{CStr, CString};
use std::os::raw::{c_char, c_int};
use std::path::{Path, PathBuf};
use std::ptr;

use crate::{check, sys, Array, Dtype, Error, Result};

mod session;
pub use session::{step, GenerateOptions, GenerateResult, Sampling, Session, StopReason};

/// Where new weights, activations and caches live.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Device {
    #[default]
    Cpu,
    /// A GPU by ordinal.
    Cuda(i32),
}

impl Device {
    pub(crate) fn to_c(self) -> sys::kiln_device {
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

/// What the quantized products multiply the weights by (docs/llm.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Activations {
    /// The `KILN_LLM_ACTIVATIONS` knob: by default int16 on the CPU, exact elsewhere.
    #[default]
    Default = 0,
    /// The activations as they are, in float32.
    Exact = 1,
    /// Rounded to int8 blocks of 32, as llama.cpp does (fastest on the CPU).
    Int8 = 2,
    /// Rounded to int16 blocks of 32: integer products that answer as exact ones.
    Int16 = 3,
}

/// Options of [`Model::load_with`].
#[derive(Clone, Copy, Debug)]
pub struct LoadOptions {
    pub device: Device,
    /// Activations and KV caches: float32, float16 or bfloat16 (None: float32 on the CPU,
    /// bfloat16 on a GPU). Weights keep their stored type.
    pub dtype: Option<Dtype>,
    pub activations: Activations,
    /// Tensor parallelism over this many ranks (docs/distributed.md): on the CPU, threads; from
    /// `Device::Cuda(i)`, rank r on GPU i + r. The model's head count, key/value head count and
    /// feed-forward size must divide by it; its steps then run one at a time.
    pub tensor_parallel: usize,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            device: Device::Cpu,
            dtype: None,
            activations: Activations::Default,
            tensor_parallel: 1,
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
    /// Each query attends to the last this many keys (Mistral); 0: all.
    pub sliding_window: usize,
    /// None when the vocabulary has none, or the file has no tokenizer.
    pub bos: Option<i32>,
    pub eos: Option<i32>,
    /// End of turn ("<|im_end|>", "<|eot_id|>").
    pub eot: Option<i32>,
    /// Ranks the model is split over (1: not split).
    pub tensor_parallel: usize,
    /// What the quantized products multiply, resolved (never `Activations::Default`).
    pub activations: Activations,
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

    /// Loads a model with every option (device, compute dtype, activations, tensor parallelism).
    pub fn load_with(path: impl AsRef<Path>, options: &LoadOptions) -> Result<Model> {
        const LOAD: &str = "kiln_llm_model_load_with";
        let path = path.as_ref();
        let text = path
            .to_str()
            .ok_or_else(|| Error::new(format!("[{LOAD}] the path {} is not UTF-8", path.display())))?;
        let c = c_string(LOAD, "path", text)?;
        let ranks = options.tensor_parallel;
        let o = sys::kiln_llm_load_options {
            device: options.device.to_c(),
            dtype: options.dtype.map_or(sys::KILN_LLM_DTYPE_AUTO, |d| d as c_int),
            activations: options.activations as c_int,
            tensor_parallel: c_int::try_from(ranks)
                .map_err(|_| Error::new(format!("[{LOAD}] tensor_parallel {ranks} is out of range")))?,
        };
        let mut h = ptr::null_mut();
        check(unsafe { sys::kiln_llm_model_load_with(&mut h, c.as_ptr(), &o) })?;
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
            sliding_window: i.sliding_window as usize,
            bos: token(i.bos_token),
            eos: token(i.eos_token),
            eot: token(i.eot_token),
            tensor_parallel: i.tensor_parallel as usize,
            activations: match i.activations {
                1 => Activations::Exact,
                2 => Activations::Int8,
                3 => Activations::Int16,
                _ => Activations::Default,
            },
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
        Ok(Session::from_handle(h))
    }
}
