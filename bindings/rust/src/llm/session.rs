//! Sessions, batched steps and generation (kiln_llm_session_*, kiln_llm_step, kiln_llm_generate).

use std::any::Any;
use std::os::raw::{c_char, c_int, c_void};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

use crate::{check, make, sys, Array, Error, Result};

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
    pub(super) fn from_handle(h: sys::kiln_llm_session) -> Session {
        Session { h }
    }

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
