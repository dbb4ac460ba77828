//! Raw declarations of the C API (include/kiln/c/kiln.h and kiln_llm.h), written by hand, except the
//! elementwise ops, which build.rs writes from the C API's generated op lists.
//! Every function returns 0 on success; see the header for each one's contract.
#![allow(non_camel_case_types)]

use std::os::raw::{c_char, c_double, c_int, c_void};

#[repr(C)]
pub struct kiln_array_s {
    _private: [u8; 0],
}
#[repr(C)]
pub struct kiln_vector_array_s {
    _private: [u8; 0],
}
#[repr(C)]
pub struct kiln_closure_s {
    _private: [u8; 0],
}

pub type kiln_array = *mut kiln_array_s;
pub type kiln_vector_array = *mut kiln_vector_array_s;
pub type kiln_closure = *mut kiln_closure_s;
/// The C enum `kiln_dtype`, in kiln::Dtype's order.
pub type kiln_dtype = c_int;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct kiln_stats {
    pub kernels_launched: u64,
    pub arrays_materialized: u64,
    pub traces: u64,
    pub cache_hits: u64,
    pub cache_misses: u64,
    pub interim_calls: u64,
    pub fused_calls: u64,
    pub fused_arrivals: u64,
    pub fused_arrival_ns: u64,
}

/// The C enum `kiln_fused_kernels`: 0 background, 1 wait, 2 off.
pub type kiln_fused_kernels = c_int;

pub type kiln_closure_fn =
    unsafe extern "C" fn(out: *mut kiln_vector_array, input: kiln_vector_array, payload: *mut c_void) -> c_int;
pub type kiln_dtor_fn = unsafe extern "C" fn(payload: *mut c_void);

pub type kiln_unary_fn = unsafe extern "C" fn(out: *mut kiln_array, a: kiln_array) -> c_int;
pub type kiln_binary_fn = unsafe extern "C" fn(out: *mut kiln_array, a: kiln_array, b: kiln_array) -> c_int;
pub type kiln_reduce_fn = unsafe extern "C" fn(
    out: *mut kiln_array,
    a: kiln_array,
    axes: *const c_int,
    naxes: usize,
    keepdims: bool,
) -> c_int;

extern "C" {
    // errors
    pub fn kiln_last_error() -> *const c_char;
    pub fn kiln_set_error(msg: *const c_char) -> c_int;
    pub fn kiln_clear_error() -> c_int;

    // dtypes
    pub fn kiln_dtype_size(out: *mut usize, dtype: kiln_dtype) -> c_int;
    pub fn kiln_dtype_name(out: *mut *const c_char, dtype: kiln_dtype) -> c_int;

    // arrays
    pub fn kiln_array_new_data(
        out: *mut kiln_array,
        data: *const c_void,
        shape: *const i64,
        ndim: c_int,
        dtype: kiln_dtype,
    ) -> c_int;
    pub fn kiln_array_new_float(out: *mut kiln_array, value: c_double, dtype: kiln_dtype) -> c_int;
    pub fn kiln_array_new_int(out: *mut kiln_array, value: i64, dtype: kiln_dtype) -> c_int;
    pub fn kiln_array_new_float_like(out: *mut kiln_array, value: c_double, like: kiln_array) -> c_int;
    pub fn kiln_array_set(out: *mut kiln_array, src: kiln_array) -> c_int;
    pub fn kiln_array_free(a: kiln_array) -> c_int;
    pub fn kiln_array_ndim(out: *mut c_int, a: kiln_array) -> c_int;
    pub fn kiln_array_shape(out: *mut *const i64, a: kiln_array) -> c_int;
    pub fn kiln_array_size(out: *mut usize, a: kiln_array) -> c_int;
    pub fn kiln_array_dtype(out: *mut kiln_dtype, a: kiln_array) -> c_int;
    pub fn kiln_array_id(out: *mut *const c_void, a: kiln_array) -> c_int;
    pub fn kiln_array_eval(a: kiln_array) -> c_int;
    pub fn kiln_array_is_evaluated(out: *mut bool, a: kiln_array) -> c_int;
    pub fn kiln_array_copy_to(dst: *mut c_void, dst_nbytes: usize, a: kiln_array, as_: kiln_dtype) -> c_int;
    pub fn kiln_array_tostring(out: *mut *mut c_char, a: kiln_array) -> c_int;
    pub fn kiln_string_free(s: *mut c_char) -> c_int;

    // vectors
    pub fn kiln_vector_array_new(out: *mut kiln_vector_array) -> c_int;
    pub fn kiln_vector_array_free(v: kiln_vector_array) -> c_int;
    pub fn kiln_vector_array_append(v: kiln_vector_array, a: kiln_array) -> c_int;
    pub fn kiln_vector_array_get(out: *mut kiln_array, v: kiln_vector_array, i: usize) -> c_int;
    pub fn kiln_vector_array_size(out: *mut usize, v: kiln_vector_array) -> c_int;

    // evaluation
    pub fn kiln_eval(arrays: kiln_vector_array) -> c_int;
    pub fn kiln_async_eval(arrays: kiln_vector_array) -> c_int;
    pub fn kiln_get_stats(out: *mut kiln_stats) -> c_int;

    // creation
    pub fn kiln_zeros(out: *mut kiln_array, shape: *const i64, ndim: c_int, dtype: kiln_dtype) -> c_int;
    pub fn kiln_ones(out: *mut kiln_array, shape: *const i64, ndim: c_int, dtype: kiln_dtype) -> c_int;
    pub fn kiln_full(out: *mut kiln_array, shape: *const i64, ndim: c_int, value: c_double, dtype: kiln_dtype)
        -> c_int;
    pub fn kiln_arange(
        out: *mut kiln_array,
        start: c_double,
        stop: c_double,
        step: c_double,
        dtype: kiln_dtype,
    ) -> c_int;

    pub fn kiln_astype(out: *mut kiln_array, a: kiln_array, dtype: kiln_dtype) -> c_int;
    pub fn kiln_where(out: *mut kiln_array, cond: kiln_array, a: kiln_array, b: kiln_array) -> c_int;

    // reductions, matmul
    pub fn kiln_sum(out: *mut kiln_array, a: kiln_array, axes: *const c_int, naxes: usize, keepdims: bool) -> c_int;
    pub fn kiln_prod(out: *mut kiln_array, a: kiln_array, axes: *const c_int, naxes: usize, keepdims: bool) -> c_int;
    pub fn kiln_mean(out: *mut kiln_array, a: kiln_array, axes: *const c_int, naxes: usize, keepdims: bool) -> c_int;
    pub fn kiln_max(out: *mut kiln_array, a: kiln_array, axes: *const c_int, naxes: usize, keepdims: bool) -> c_int;
    pub fn kiln_min(out: *mut kiln_array, a: kiln_array, axes: *const c_int, naxes: usize, keepdims: bool) -> c_int;
    pub fn kiln_all(out: *mut kiln_array, a: kiln_array, axes: *const c_int, naxes: usize, keepdims: bool) -> c_int;
    pub fn kiln_any(out: *mut kiln_array, a: kiln_array, axes: *const c_int, naxes: usize, keepdims: bool) -> c_int;
    pub fn kiln_logsumexp(
        out: *mut kiln_array,
        a: kiln_array,
        axes: *const c_int,
        naxes: usize,
        keepdims: bool,
    ) -> c_int;
    pub fn kiln_argmax(out: *mut kiln_array, a: kiln_array, axis: c_int, keepdims: bool) -> c_int;
    pub fn kiln_softmax(out: *mut kiln_array, a: kiln_array, axes: *const c_int, naxes: usize) -> c_int;
    pub fn kiln_matmul(out: *mut kiln_array, a: kiln_array, b: kiln_array) -> c_int;

    // random numbers
    pub fn kiln_random_key(out: *mut kiln_array, seed: u64) -> c_int;
    pub fn kiln_random_split(out: *mut kiln_array, key: kiln_array, num: c_int) -> c_int;
    pub fn kiln_random_bits(out: *mut kiln_array, shape: *const i64, ndim: c_int, key: kiln_array) -> c_int;
    pub fn kiln_random_uniform(
        out: *mut kiln_array,
        shape: *const i64,
        ndim: c_int,
        key: kiln_array,
        dtype: kiln_dtype,
        low: f64,
        high: f64,
    ) -> c_int;
    pub fn kiln_random_normal(
        out: *mut kiln_array,
        shape: *const i64,
        ndim: c_int,
        key: kiln_array,
        dtype: kiln_dtype,
        loc: f64,
        scale: f64,
    ) -> c_int;
    pub fn kiln_random_bernoulli(out: *mut kiln_array, p: kiln_array, key: kiln_array) -> c_int;
    pub fn kiln_random_categorical(out: *mut kiln_array, logits: kiln_array, key: kiln_array, axis: c_int) -> c_int;

    // sorting and selection
    pub fn kiln_topk(values: *mut kiln_array, indices: *mut kiln_array, a: kiln_array, k: c_int, axis: c_int) -> c_int;
    pub fn kiln_sort(out: *mut kiln_array, a: kiln_array, axis: c_int) -> c_int;
    pub fn kiln_argsort(out: *mut kiln_array, a: kiln_array, axis: c_int) -> c_int;
    pub fn kiln_argpartition(out: *mut kiln_array, a: kiln_array, kth: c_int, axis: c_int) -> c_int;
    pub fn kiln_partition(out: *mut kiln_array, a: kiln_array, kth: c_int, axis: c_int) -> c_int;

    // layout
    pub fn kiln_reshape(out: *mut kiln_array, a: kiln_array, shape: *const i64, ndim: c_int) -> c_int;
    pub fn kiln_transpose(out: *mut kiln_array, a: kiln_array, perm: *const c_int, nperm: usize) -> c_int;
    pub fn kiln_broadcast_to(out: *mut kiln_array, a: kiln_array, shape: *const i64, ndim: c_int) -> c_int;
    pub fn kiln_expand_dims(out: *mut kiln_array, a: kiln_array, axis: c_int) -> c_int;
    pub fn kiln_slice(
        out: *mut kiln_array,
        a: kiln_array,
        start: *const i64,
        stop: *const i64,
        step: *const i64,
        n: c_int,
    ) -> c_int;
    pub fn kiln_concatenate(out: *mut kiln_array, arrays: kiln_vector_array, axis: c_int) -> c_int;

    // closures and compile
    pub fn kiln_closure_new_func_payload(
        out: *mut kiln_closure,
        f: kiln_closure_fn,
        payload: *mut c_void,
        dtor: Option<kiln_dtor_fn>,
    ) -> c_int;
    pub fn kiln_closure_set(out: *mut kiln_closure, src: kiln_closure) -> c_int;
    pub fn kiln_closure_free(c: kiln_closure) -> c_int;
    pub fn kiln_closure_apply(out: *mut kiln_vector_array, c: kiln_closure, input: kiln_vector_array) -> c_int;
    pub fn kiln_compile_named(out: *mut kiln_closure, f: kiln_closure, name: *const c_char, shapeless: bool) -> c_int;
    pub fn kiln_set_fused_kernels(policy: kiln_fused_kernels) -> c_int;
    pub fn kiln_get_fused_kernels(out: *mut kiln_fused_kernels) -> c_int;

    // language-model ops (kiln/nn.h); optional arrays are NULL
    pub fn kiln_quantize(
        packed: *mut kiln_array,
        scales: *mut kiln_array,
        biases: *mut kiln_array,
        w: kiln_array,
        group_size: c_int,
        bits: c_int,
    ) -> c_int;
    pub fn kiln_dequantize(
        out: *mut kiln_array,
        w: kiln_array,
        scales: kiln_array,
        biases: kiln_array,
        group_size: c_int,
        bits: c_int,
    ) -> c_int;
    pub fn kiln_quantized_matmul(
        out: *mut kiln_array,
        x: kiln_array,
        w: kiln_array,
        scales: kiln_array,
        biases: kiln_array,
        transpose: bool,
        group_size: c_int,
        bits: c_int,
    ) -> c_int;
    pub fn kiln_rms_norm(out: *mut kiln_array, x: kiln_array, weight: kiln_array, eps: f32) -> c_int;
    pub fn kiln_layer_norm(
        out: *mut kiln_array,
        x: kiln_array,
        weight: kiln_array,
        bias: kiln_array,
        eps: f32,
    ) -> c_int;
    pub fn kiln_rope(
        out: *mut kiln_array,
        x: kiln_array,
        dims: c_int,
        traditional: bool,
        base: f32,
        scale: f32,
        offset: kiln_array,
        freqs: kiln_array,
    ) -> c_int;
    pub fn kiln_scaled_dot_product_attention(
        out: *mut kiln_array,
        q: kiln_array,
        k: kiln_array,
        v: kiln_array,
        scale: f32,
        mask: kiln_array,
        causal: bool,
        key_lengths: kiln_array,
    ) -> c_int;
    pub fn kiln_slice_update_at(
        out: *mut kiln_array,
        a: kiln_array,
        update: kiln_array,
        start: kiln_array,
        axes: *const c_int,
        naxes: usize,
    ) -> c_int;
}

// ---- language models (kiln/c/kiln_llm.h) -------------------------------------------

#[repr(C)]
pub struct kiln_llm_model_s {
    _private: [u8; 0],
}
#[repr(C)]
pub struct kiln_llm_session_s {
    _private: [u8; 0],
}
pub type kiln_llm_model = *mut kiln_llm_model_s;
pub type kiln_llm_session = *mut kiln_llm_session_s;

/// The C enum `kiln_device_type`.
pub type kiln_device_type = c_int;
pub const KILN_DEVICE_CPU: kiln_device_type = 0;
pub const KILN_DEVICE_CUDA: kiln_device_type = 1;

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct kiln_device {
    pub type_: kiln_device_type,
    pub index: c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct kiln_llm_sampling {
    pub temperature: f32,
    pub top_k: c_int,
    pub top_p: f32,
    pub min_p: f32,
    pub repetition_penalty: f32,
    pub repeat_last_n: c_int,
    pub seed: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct kiln_llm_model_info {
    pub vocab_size: c_int,
    pub n_layers: c_int,
    pub d_model: c_int,
    pub n_heads: c_int,
    pub n_kv_heads: c_int,
    pub head_dim: c_int,
    pub context_length: i64,
    pub weight_bytes: usize,
    pub ffn_dim: c_int,
    pub rope_dims: c_int,
    pub rope_base: f32,
    pub rope_scale: f32,
    pub rope_traditional: bool,
    pub norm_eps: f32,
    pub qkv_bias: bool,
    pub qk_norm: bool,
    pub tied_embeddings: bool,
    pub sliding_window: i64,
    pub bos_token: i32,
    pub eos_token: i32,
    pub eot_token: i32,
    pub tensor_parallel: c_int,
    pub activations: kiln_llm_activations,
}

/// kiln_llm.h's KILN_LLM_DTYPE_AUTO (KILN_NUM_DTYPES, one past the last dtype): float32 on the
/// CPU, bfloat16 on a GPU.
pub const KILN_LLM_DTYPE_AUTO: kiln_dtype = crate::Dtype::Float64 as kiln_dtype + 1;

/// The C enum `kiln_llm_activations`: 0 default, 1 exact, 2 int8, 3 int16.
pub type kiln_llm_activations = c_int;

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct kiln_llm_load_options {
    pub device: kiln_device,
    pub dtype: kiln_dtype,
    pub activations: kiln_llm_activations,
    pub tensor_parallel: c_int,
}

/// The C enum `kiln_llm_stop_reason`.
pub type kiln_llm_stop_reason = c_int;
pub const KILN_LLM_STOP_TOKEN: kiln_llm_stop_reason = 0;
pub const KILN_LLM_STOP_MAX_TOKENS: kiln_llm_stop_reason = 1;
pub const KILN_LLM_STOP_CONTEXT_FULL: kiln_llm_stop_reason = 2;
pub const KILN_LLM_STOP_CALLBACK: kiln_llm_stop_reason = 3;

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct kiln_llm_generate_options {
    pub max_tokens: c_int,
    pub sampling: kiln_llm_sampling,
    pub stop_tokens: *const i32,
    pub n_stop_tokens: usize,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct kiln_llm_generate_stats {
    pub prompt_tokens: i64,
    pub generated_tokens: i64,
    pub prompt_seconds: c_double,
    pub generate_seconds: c_double,
    pub stop_reason: kiln_llm_stop_reason,
}

pub type kiln_llm_token_fn =
    unsafe extern "C" fn(token: i32, text: *const c_char, len: usize, payload: *mut c_void) -> c_int;

extern "C" {
    pub fn kiln_llm_sampling_default(out: *mut kiln_llm_sampling) -> c_int;
    pub fn kiln_llm_generate_options_default(out: *mut kiln_llm_generate_options) -> c_int;
    pub fn kiln_llm_default_model_path(out: *mut *mut c_char) -> c_int;
    pub fn kiln_llm_model_load(
        out: *mut kiln_llm_model,
        path: *const c_char,
        device: kiln_device,
        dtype: kiln_dtype,
    ) -> c_int;
    pub fn kiln_llm_model_load_with(
        out: *mut kiln_llm_model,
        path: *const c_char,
        options: *const kiln_llm_load_options,
    ) -> c_int;
    pub fn kiln_llm_model_free(m: kiln_llm_model) -> c_int;
    pub fn kiln_llm_model_get_info(out: *mut kiln_llm_model_info, m: kiln_llm_model) -> c_int;
    pub fn kiln_llm_model_has_tensor(out: *mut bool, m: kiln_llm_model, name: *const c_char) -> c_int;
    pub fn kiln_llm_model_tensor(
        w: *mut kiln_array,
        scales: *mut kiln_array,
        biases: *mut kiln_array,
        group_size: *mut c_int,
        bits: *mut c_int,
        m: kiln_llm_model,
        name: *const c_char,
    ) -> c_int;
    pub fn kiln_llm_tokenize(
        ids: *mut *mut i32,
        n: *mut usize,
        m: kiln_llm_model,
        text: *const c_char,
        add_special: bool,
        parse_special: bool,
    ) -> c_int;
    pub fn kiln_llm_tokens_free(ids: *mut i32) -> c_int;
    pub fn kiln_llm_detokenize(out: *mut *mut c_char, m: kiln_llm_model, ids: *const i32, n: usize) -> c_int;
    pub fn kiln_llm_chat_prompt(
        out: *mut *mut c_char,
        m: kiln_llm_model,
        roles: *const *const c_char,
        contents: *const *const c_char,
        n: usize,
    ) -> c_int;
    pub fn kiln_llm_is_end_of_generation(out: *mut bool, m: kiln_llm_model, token: i32) -> c_int;
    pub fn kiln_llm_session_new(out: *mut kiln_llm_session, m: kiln_llm_model) -> c_int;
    pub fn kiln_llm_session_free(s: kiln_llm_session) -> c_int;
    pub fn kiln_llm_session_position(out: *mut i64, s: kiln_llm_session) -> c_int;
    pub fn kiln_llm_session_truncate(s: kiln_llm_session, n: i64) -> c_int;
    pub fn kiln_llm_session_clear(s: kiln_llm_session) -> c_int;
    pub fn kiln_llm_session_append(logits: *mut kiln_array, s: kiln_llm_session, ids: *const i32, n: usize) -> c_int;
    pub fn kiln_llm_session_append_all(
        logits: *mut kiln_array,
        s: kiln_llm_session,
        ids: *const i32,
        n: usize,
    ) -> c_int;
    pub fn kiln_llm_step(
        logits: *mut kiln_array,
        sessions: *mut kiln_llm_session,
        tokens: *const i32,
        n: usize,
    ) -> c_int;
    pub fn kiln_llm_generate(
        s: kiln_llm_session,
        prompt: *const i32,
        n: usize,
        options: *const kiln_llm_generate_options,
        f: Option<kiln_llm_token_fn>,
        payload: *mut c_void,
        stats: *mut kiln_llm_generate_stats,
    ) -> c_int;
}

// kiln_abs, kiln_add, ...: one declaration per row of kiln/c/kiln_unary_ops.def and
// kiln_binary_ops.def (written by build.rs).
include!(concat!(env!("OUT_DIR"), "/elementwise_sys.rs"));

// ---- include/kiln/c/kiln_executable.h ----------------------------------------------

#[repr(C)]
pub struct kiln_executable_s {
    _private: [u8; 0],
}
pub type kiln_executable = *mut kiln_executable_s;
/// The C enum `kiln_exec_mode`.
pub type kiln_exec_mode = c_int;
pub const KILN_EXEC_EAGER: kiln_exec_mode = 0;
pub const KILN_EXEC_LAZY: kiln_exec_mode = 1;
pub const KILN_EXEC_COMPILED: kiln_exec_mode = 2;
pub const KILN_NO_EXTENT: i64 = -1;

extern "C" {
    pub fn kiln_executable_parse(
        out: *mut kiln_executable,
        text: *const c_char,
        path: *const c_char,
        mode: kiln_exec_mode,
        device: kiln_device,
    ) -> c_int;
    pub fn kiln_executable_load(
        out: *mut kiln_executable,
        path: *const c_char,
        mode: kiln_exec_mode,
        device: kiln_device,
    ) -> c_int;
    pub fn kiln_executable_free(e: kiln_executable) -> c_int;
    pub fn kiln_executable_mode(out: *mut kiln_exec_mode, e: kiln_executable) -> c_int;
    pub fn kiln_executable_num_inputs(out: *mut usize, e: kiln_executable) -> c_int;
    pub fn kiln_executable_input_name(out: *mut *const c_char, e: kiln_executable, i: usize) -> c_int;
    pub fn kiln_executable_num_outputs(out: *mut usize, e: kiln_executable) -> c_int;
    pub fn kiln_executable_output_name(out: *mut *const c_char, e: kiln_executable, i: usize) -> c_int;
    pub fn kiln_executable_set_param(e: kiln_executable, name: *const c_char, data: *const f32, count: usize) -> c_int;
    pub fn kiln_executable_set_param_typed(
        e: kiln_executable,
        name: *const c_char,
        data: *const c_void,
        nbytes: usize,
        dtype: kiln_dtype,
    ) -> c_int;
    pub fn kiln_executable_load_params(e: kiln_executable, path: *const c_char) -> c_int;
    pub fn kiln_executable_has_param(out: *mut bool, e: kiln_executable, name: *const c_char) -> c_int;
    pub fn kiln_executable_run(
        out: *mut kiln_vector_array,
        e: kiln_executable,
        names: *const *const c_char,
        inputs: kiln_vector_array,
        extent: i64,
    ) -> c_int;
    pub fn kiln_executable_run_f32(
        out: *mut kiln_vector_array,
        e: kiln_executable,
        names: *const *const c_char,
        inputs: kiln_vector_array,
        extent: i64,
    ) -> c_int;
    pub fn kiln_executable_run_slots(
        e: kiln_executable,
        inputs: *const *const c_void,
        n_inputs: usize,
        arena: *mut c_void,
        extent: i64,
    ) -> c_int;
    pub fn kiln_executable_arena_bytes(out: *mut usize, e: kiln_executable) -> c_int;
    pub fn kiln_executable_output_slot(offset: *mut usize, nbytes: *mut usize, e: kiln_executable, i: usize) -> c_int;
    pub fn kiln_executable_host_handle(
        out: *mut c_int,
        e: kiln_executable,
        data: *mut c_void,
        shape: *const i64,
        ndim: c_int,
        dtype: kiln_dtype,
    ) -> c_int;
    pub fn kiln_executable_device_handle(out: *mut c_int, e: kiln_executable, value: kiln_array) -> c_int;
    pub fn kiln_executable_write_handle(e: kiln_executable, handle: c_int, value: kiln_array) -> c_int;
    pub fn kiln_executable_read_handle(out: *mut kiln_array, e: kiln_executable, handle: c_int) -> c_int;
    pub fn kiln_executable_bind_input(e: kiln_executable, name: *const c_char, handle: c_int) -> c_int;
    pub fn kiln_executable_unbind_input(e: kiln_executable, name: *const c_char) -> c_int;
    pub fn kiln_executable_feed(e: kiln_executable, output: usize, handle: c_int) -> c_int;
    pub fn kiln_executable_clear_feeds(e: kiln_executable) -> c_int;
    pub fn kiln_executable_commit(
        e: kiln_executable,
        names: *const *const c_char,
        inputs: kiln_vector_array,
        extent: i64,
    ) -> c_int;
    pub fn kiln_executable_sync(out: *mut kiln_vector_array, runs: *mut usize, e: kiln_executable) -> c_int;
    pub fn kiln_executable_run_pipelined(
        out: *mut kiln_vector_array,
        e: kiln_executable,
        names: *const *const c_char,
        sets: *const kiln_vector_array,
        n: usize,
        extent: i64,
    ) -> c_int;
    pub fn kiln_executable_warm_compile(
        e: kiln_executable,
        names: *const *const c_char,
        shapes: *const *const i64,
        ndims: *const c_int,
        n: usize,
    ) -> c_int;
    pub fn kiln_executable_extent_blocker(
        out: *mut *mut c_char,
        e: kiln_executable,
        names: *const *const c_char,
        shapes: *const *const i64,
        ndims: *const c_int,
        n: usize,
    ) -> c_int;
}

// ---- groups of ranks and their collectives ----
#[repr(C)]
pub struct kiln_group_s {
    _private: [u8; 0],
}
pub type kiln_group = *mut kiln_group_s;

extern "C" {
    pub fn kiln_group_local(devices: *const kiln_device, n: usize, out: *mut kiln_group) -> c_int;
    pub fn kiln_group_free(g: kiln_group) -> c_int;
    pub fn kiln_group_rank(out: *mut c_int, g: kiln_group) -> c_int;
    pub fn kiln_group_size(out: *mut c_int, g: kiln_group) -> c_int;
    pub fn kiln_group_abort(g: kiln_group, why: *const c_char) -> c_int;
    pub fn kiln_all_sum(out: *mut kiln_array, x: kiln_array, g: kiln_group) -> c_int;
    pub fn kiln_all_gather(out: *mut kiln_array, x: kiln_array, g: kiln_group, axis: c_int) -> c_int;
    pub fn kiln_reduce_scatter(out: *mut kiln_array, x: kiln_array, g: kiln_group) -> c_int;
}
