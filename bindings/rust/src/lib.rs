//! Safe Rust bindings to kiln's C API: lazy arrays, ops, and compiled functions
//! that trace once per input signature and replay from any number of threads.
//!
//! Every fallible call returns [`Result`]; kiln's message (tagged with the op,
//! e.g. `[matmul] inner dimensions differ: (2,3) @ (2,3)`) is in [`Error`].
//! [`Array`] and [`Function`] free their handles on drop and are `Send + Sync`.
//! Language models (loading, tokens, sessions, generation) are in [`llm`]; groups of ranks and
//! their collectives in [`distributed`]; graphs as data
//! (`.kgraph` programs) run through [`Executable`].

pub mod distributed;
pub mod executable;
pub mod llm;
pub mod sys;

pub use executable::{ExecMode, Executable, RunOptions};

use std::ffi::{CStr, CString};
use std::fmt;
use std::os::raw::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

/// A failure reported by kiln.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    message: String,
}

impl Error {
    pub fn new(message: impl Into<String>) -> Self {
        Error {
            message: message.into(),
        }
    }
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

/// Turns a C status into a Result, reading this thread's last error.
fn check(rc: c_int) -> Result<()> {
    if rc == 0 {
        return Ok(());
    }
    // SAFETY: kiln_last_error never returns NULL and the string lives until the
    // next failing call on this thread.
    let msg = unsafe { CStr::from_ptr(sys::kiln_last_error()) };
    Err(Error::new(msg.to_string_lossy().into_owned()))
}

/// Element types, in the C API's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum Dtype {
    Bool = 0,
    Uint8,
    Uint16,
    Uint32,
    Uint64,
    Int8,
    Int16,
    Int32,
    Int64,
    Float16,
    BFloat16,
    Float32,
    Float64,
}

impl Dtype {
    const ALL: [Dtype; 13] = [
        Dtype::Bool,
        Dtype::Uint8,
        Dtype::Uint16,
        Dtype::Uint32,
        Dtype::Uint64,
        Dtype::Int8,
        Dtype::Int16,
        Dtype::Int32,
        Dtype::Int64,
        Dtype::Float16,
        Dtype::BFloat16,
        Dtype::Float32,
        Dtype::Float64,
    ];

    fn from_c(d: sys::kiln_dtype) -> Result<Dtype> {
        Dtype::ALL
            .get(d as usize)
            .copied()
            .ok_or_else(|| Error::new(format!("invalid dtype {d}")))
    }

    /// "float32", "bool", ...
    pub fn name(self) -> &'static str {
        let mut p = ptr::null();
        // SAFETY: every Dtype is valid, and names are static strings.
        unsafe {
            if sys::kiln_dtype_name(&mut p, self as sys::kiln_dtype) != 0 {
                return "?";
            }
            CStr::from_ptr(p).to_str().unwrap_or("?")
        }
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        let mut n = 0usize;
        // SAFETY: plain out parameter.
        unsafe { sys::kiln_dtype_size(&mut n, self as sys::kiln_dtype) };
        n
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A Rust type that holds one element of a dtype (float16 and bfloat16 have
/// none; read them as f32).
pub trait Element: Copy + Default + sealed::Sealed {
    const DTYPE: Dtype;
}

macro_rules! element {
    ($($t:ty => $d:ident),*) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t { const DTYPE: Dtype = Dtype::$d; }
    )*};
}
element!(bool => Bool, u8 => Uint8, u16 => Uint16, u32 => Uint32, u64 => Uint64, i8 => Int8, i16 => Int16,
         i32 => Int32, i64 => Int64, f32 => Float32, f64 => Float64);

/// A handle to an immutable, lazily computed array. Cloning makes another
/// handle to the same array; dropping frees the handle.
pub struct Array {
    h: sys::kiln_array,
}

// SAFETY: kiln arrays are immutable values with atomic reference counts, made
// to be shared, evaluated and freed on any thread.
unsafe impl Send for Array {}
unsafe impl Sync for Array {}

impl Drop for Array {
    fn drop(&mut self) {
        // SAFETY: h came from kiln and is freed once, here.
        unsafe { sys::kiln_array_free(self.h) };
    }
}

impl Clone for Array {
    fn clone(&self) -> Self {
        let mut h = ptr::null_mut();
        // SAFETY: self.h is a live handle; a NULL out receives a new one.
        let rc = unsafe { sys::kiln_array_set(&mut h, self.h) };
        assert!(rc == 0, "kiln_array_set failed: {}", check(rc).unwrap_err());
        Array { h }
    }
}

/// The handle of an optional array, NULL when absent.
fn handle_or_null(a: Option<&Array>) -> sys::kiln_array {
    a.map_or(ptr::null_mut(), |a| a.h)
}

/// The language-model ops of kiln/nn.h.
impl Array {
    /// MLX's affine quantization along the last axis: (packed uint32, scales, biases) per group of
    /// `group_size` (32, 64, 128) at `bits` 2, 3, 4, 5, 6 or 8.
    pub fn quantize(&self, group_size: i32, bits: i32) -> Result<(Array, Array, Array)> {
        let (mut p, mut s, mut b) = (ptr::null_mut(), ptr::null_mut(), ptr::null_mut());
        // SAFETY: self.h is live; the three NULL outs each receive a new handle on success.
        check(unsafe { sys::kiln_quantize(&mut p, &mut s, &mut b, self.h, group_size, bits) })?;
        Ok((Array { h: p }, Array { h: s }, Array { h: b }))
    }

    /// scale * q + bias for every packed value of `self`.
    pub fn dequantize(&self, scales: &Array, biases: &Array, group_size: i32, bits: i32) -> Result<Array> {
        make(|o| unsafe { sys::kiln_dequantize(o, self.h, scales.h, biases.h, group_size, bits) })
    }

    /// self @ dequantize(w)^T when `transpose` (w [N, K]), else self @ dequantize(w).
    pub fn quantized_matmul(
        &self,
        w: &Array,
        scales: &Array,
        biases: &Array,
        transpose: bool,
        group_size: i32,
        bits: i32,
    ) -> Result<Array> {
        make(|o| unsafe { sys::kiln_quantized_matmul(o, self.h, w.h, scales.h, biases.h, transpose, group_size, bits) })
    }

    /// RMS normalization over the last axis.
    pub fn rms_norm(&self, weight: Option<&Array>, eps: f32) -> Result<Array> {
        make(|o| unsafe { sys::kiln_rms_norm(o, self.h, handle_or_null(weight), eps) })
    }

    /// Layer normalization over the last axis.
    pub fn layer_norm(&self, weight: Option<&Array>, bias: Option<&Array>, eps: f32) -> Result<Array> {
        make(|o| unsafe { sys::kiln_layer_norm(o, self.h, handle_or_null(weight), handle_or_null(bias), eps) })
    }

    /// Rotary embedding of the first `dims` features at positions offset + row (offset int32, [] or
    /// [B]); frequencies base^(-2i/dims), or 1/freqs when given.
    pub fn rope(
        &self,
        dims: i32,
        traditional: bool,
        base: f32,
        scale: f32,
        offset: &Array,
        freqs: Option<&Array>,
    ) -> Result<Array> {
        make(|o| unsafe {
            sys::kiln_rope(
                o,
                self.h,
                dims,
                traditional,
                base,
                scale,
                offset.h,
                handle_or_null(freqs),
            )
        })
    }

    /// softmax(self k^T scale + mask) v with grouped-query heads (self is q [B, Hq, Lq, D]).
    pub fn scaled_dot_product_attention(
        &self,
        k: &Array,
        v: &Array,
        scale: f32,
        mask: Option<&Array>,
        causal: bool,
        key_lengths: Option<&Array>,
    ) -> Result<Array> {
        make(|o| unsafe {
            sys::kiln_scaled_dot_product_attention(
                o,
                self.h,
                k.h,
                v.h,
                scale,
                handle_or_null(mask),
                causal,
                handle_or_null(key_lengths),
            )
        })
    }

    /// `update` written at `start` (int32, one entry per axis in `axes`); in place when nothing
    /// else holds self's buffer.
    pub fn slice_update_at(&self, update: &Array, start: &Array, axes: &[i32]) -> Result<Array> {
        make(|o| unsafe { sys::kiln_slice_update_at(o, self.h, update.h, start.h, axes.as_ptr(), axes.len()) })
    }
}

/// Runs a C call that produces an array into a new handle.
fn make(f: impl FnOnce(*mut sys::kiln_array) -> c_int) -> Result<Array> {
    let mut h: sys::kiln_array = ptr::null_mut();
    check(f(&mut h))?;
    Ok(Array { h })
}

fn shape_i64(shape: &[usize]) -> Vec<i64> {
    shape.iter().map(|&d| d as i64).collect()
}

fn shape_str(shape: &[usize]) -> String {
    let parts: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    format!("({})", parts.join(","))
}

impl Array {
    /// Copies `data` (row-major) into a new array of `shape`; the dtype follows T.
    pub fn from_slice<T: Element>(data: &[T], shape: &[usize]) -> Result<Array> {
        let n: usize = shape.iter().product();
        if n != data.len() {
            return Err(Error::new(format!(
                "[array] got {} elements for shape {} which holds {}",
                data.len(),
                shape_str(shape),
                n
            )));
        }
        let s = shape_i64(shape);
        // SAFETY: data holds exactly the shape's element count of T's dtype.
        make(|o| unsafe {
            sys::kiln_array_new_data(
                o,
                data.as_ptr() as *const c_void,
                s.as_ptr(),
                s.len() as c_int,
                T::DTYPE as c_int,
            )
        })
    }

    /// A 1-D array of `data`.
    pub fn from_vec<T: Element>(data: &[T]) -> Result<Array> {
        Array::from_slice(data, &[data.len()])
    }

    /// A 0-d array of `dtype` holding `value`.
    pub fn scalar(value: f64, dtype: Dtype) -> Result<Array> {
        make(|o| unsafe { sys::kiln_array_new_float(o, value, dtype as c_int) })
    }

    /// A 0-d array of `dtype` holding the integer `value`.
    pub fn scalar_int(value: i64, dtype: Dtype) -> Result<Array> {
        make(|o| unsafe { sys::kiln_array_new_int(o, value, dtype as c_int) })
    }

    /// A 0-d array holding `value` in the dtype arithmetic with `self` would give it.
    pub fn scalar_like(&self, value: f64) -> Result<Array> {
        make(|o| unsafe { sys::kiln_array_new_float_like(o, value, self.h) })
    }

    pub fn zeros(shape: &[usize], dtype: Dtype) -> Result<Array> {
        let s = shape_i64(shape);
        make(|o| unsafe { sys::kiln_zeros(o, s.as_ptr(), s.len() as c_int, dtype as c_int) })
    }

    pub fn ones(shape: &[usize], dtype: Dtype) -> Result<Array> {
        let s = shape_i64(shape);
        make(|o| unsafe { sys::kiln_ones(o, s.as_ptr(), s.len() as c_int, dtype as c_int) })
    }

    pub fn full(shape: &[usize], value: f64, dtype: Dtype) -> Result<Array> {
        let s = shape_i64(shape);
        make(|o| unsafe { sys::kiln_full(o, s.as_ptr(), s.len() as c_int, value, dtype as c_int) })
    }

    /// [start, stop) in steps of step.
    pub fn arange(start: f64, stop: f64, step: f64, dtype: Dtype) -> Result<Array> {
        make(|o| unsafe { sys::kiln_arange(o, start, stop, step, dtype as c_int) })
    }

    pub fn shape(&self) -> Vec<usize> {
        let mut nd: c_int = 0;
        let mut p: *const i64 = ptr::null();
        // SAFETY: p points at nd sizes owned by the live handle.
        unsafe {
            if sys::kiln_array_ndim(&mut nd, self.h) != 0 || sys::kiln_array_shape(&mut p, self.h) != 0 {
                return Vec::new();
            }
            if nd == 0 {
                return Vec::new();
            }
            std::slice::from_raw_parts(p, nd as usize)
                .iter()
                .map(|&d| d as usize)
                .collect()
        }
    }

    pub fn ndim(&self) -> usize {
        self.shape().len()
    }

    pub fn size(&self) -> usize {
        let mut n = 0usize;
        unsafe { sys::kiln_array_size(&mut n, self.h) };
        n
    }

    pub fn dtype(&self) -> Dtype {
        let mut d: sys::kiln_dtype = 0;
        unsafe { sys::kiln_array_dtype(&mut d, self.h) };
        Dtype::from_c(d).unwrap_or(Dtype::Float32)
    }

    /// Identity of the underlying array: equal for clones.
    pub fn id(&self) -> usize {
        let mut p: *const c_void = ptr::null();
        unsafe { sys::kiln_array_id(&mut p, self.h) };
        p as usize
    }

    /// Computes the array if not yet done.
    pub fn eval(&self) -> Result<()> {
        check(unsafe { sys::kiln_array_eval(self.h) })
    }

    pub fn is_evaluated(&self) -> bool {
        let mut b = false;
        unsafe { sys::kiln_array_is_evaluated(&mut b, self.h) };
        b
    }

    /// Evaluates and returns every element, row-major, converted to T.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        let mut out = vec![T::default(); self.size()];
        let nbytes = out.len() * std::mem::size_of::<T>();
        // SAFETY: out has room for size() elements of T's dtype.
        check(unsafe { sys::kiln_array_copy_to(out.as_mut_ptr() as *mut c_void, nbytes, self.h, T::DTYPE as c_int) })?;
        Ok(out)
    }

    /// The single element of a size-1 array, converted to T.
    pub fn item<T: Element>(&self) -> Result<T> {
        if self.size() != 1 {
            return Err(Error::new(format!(
                "[item] item() needs an array of size 1, got shape {}",
                shape_str(&self.shape())
            )));
        }
        Ok(self.to_vec::<T>()?[0])
    }

    pub fn astype(&self, dtype: Dtype) -> Result<Array> {
        make(|o| unsafe { sys::kiln_astype(o, self.h, dtype as c_int) })
    }

    /// cond ? a : b, broadcasting all three.
    pub fn where_(cond: &Array, a: &Array, b: &Array) -> Result<Array> {
        make(|o| unsafe { sys::kiln_where(o, cond.h, a.h, b.h) })
    }

    fn reduce(&self, f: sys::kiln_reduce_fn, axes: &[i32], keepdims: bool) -> Result<Array> {
        make(|o| unsafe { f(o, self.h, axes.as_ptr(), axes.len(), keepdims) })
    }

    /// Reductions over `axes` (every axis when empty).
    pub fn sum(&self, axes: &[i32], keepdims: bool) -> Result<Array> {
        self.reduce(sys::kiln_sum, axes, keepdims)
    }
    pub fn prod(&self, axes: &[i32], keepdims: bool) -> Result<Array> {
        self.reduce(sys::kiln_prod, axes, keepdims)
    }
    pub fn mean(&self, axes: &[i32], keepdims: bool) -> Result<Array> {
        self.reduce(sys::kiln_mean, axes, keepdims)
    }
    pub fn max(&self, axes: &[i32], keepdims: bool) -> Result<Array> {
        self.reduce(sys::kiln_max, axes, keepdims)
    }
    pub fn min(&self, axes: &[i32], keepdims: bool) -> Result<Array> {
        self.reduce(sys::kiln_min, axes, keepdims)
    }
    pub fn all(&self, axes: &[i32], keepdims: bool) -> Result<Array> {
        self.reduce(sys::kiln_all, axes, keepdims)
    }
    pub fn any(&self, axes: &[i32], keepdims: bool) -> Result<Array> {
        self.reduce(sys::kiln_any, axes, keepdims)
    }
    pub fn logsumexp(&self, axes: &[i32], keepdims: bool) -> Result<Array> {
        self.reduce(sys::kiln_logsumexp, axes, keepdims)
    }

    /// Index (int32) of the first largest element along axis.
    pub fn argmax(&self, axis: i32) -> Result<Array> {
        make(|o| unsafe { sys::kiln_argmax(o, self.h, axis, false) })
    }

    /// Softmax over `axes` (the last axis when empty).
    pub fn softmax(&self, axes: &[i32]) -> Result<Array> {
        make(|o| unsafe { sys::kiln_softmax(o, self.h, axes.as_ptr(), axes.len()) })
    }

    /// numpy.matmul semantics.
    pub fn matmul(&self, other: &Array) -> Result<Array> {
        make(|o| unsafe { sys::kiln_matmul(o, self.h, other.h) })
    }

    /// One dimension may be -1.
    pub fn reshape(&self, shape: &[i64]) -> Result<Array> {
        make(|o| unsafe { sys::kiln_reshape(o, self.h, shape.as_ptr(), shape.len() as c_int) })
    }

    /// Permutes axes (reverses them when perm is empty).
    pub fn transpose(&self, perm: &[i32]) -> Result<Array> {
        make(|o| unsafe { sys::kiln_transpose(o, self.h, perm.as_ptr(), perm.len()) })
    }

    pub fn broadcast_to(&self, shape: &[usize]) -> Result<Array> {
        let s = shape_i64(shape);
        make(|o| unsafe { sys::kiln_broadcast_to(o, self.h, s.as_ptr(), s.len() as c_int) })
    }

    pub fn expand_dims(&self, axis: i32) -> Result<Array> {
        make(|o| unsafe { sys::kiln_expand_dims(o, self.h, axis) })
    }

    /// start:stop along every axis (Python rules).
    pub fn slice(&self, start: &[i64], stop: &[i64]) -> Result<Array> {
        if start.len() != stop.len() {
            return Err(Error::new("[slice] start and stop need the same length"));
        }
        make(|o| unsafe {
            sys::kiln_slice(
                o,
                self.h,
                start.as_ptr(),
                stop.as_ptr(),
                ptr::null(),
                start.len() as c_int,
            )
        })
    }

    /// Joins arrays along an existing axis.
    pub fn concatenate(arrays: &[&Array], axis: i32) -> Result<Array> {
        let v = Vector::from_arrays(arrays)?;
        make(|o| unsafe { sys::kiln_concatenate(o, v.0, axis) })
    }

    // ---- sorting and selection: along axis, NaN after every number; indices are int32.

    /// The k largest elements along axis, largest first (equal ones in index order), and
    /// their indices.
    pub fn topk(&self, k: i32, axis: i32) -> Result<(Array, Array)> {
        let mut indices: sys::kiln_array = ptr::null_mut();
        let values = make(|o| unsafe { sys::kiln_topk(o, &mut indices, self.h, k, axis) })?;
        Ok((values, Array { h: indices }))
    }

    pub fn sort(&self, axis: i32) -> Result<Array> {
        make(|o| unsafe { sys::kiln_sort(o, self.h, axis) })
    }

    /// Indices that sort along axis (stable).
    pub fn argsort(&self, axis: i32) -> Result<Array> {
        make(|o| unsafe { sys::kiln_argsort(o, self.h, axis) })
    }

    /// Indices putting the kth smallest in place, no larger one before it and no smaller
    /// one after it.
    pub fn argpartition(&self, kth: i32, axis: i32) -> Result<Array> {
        make(|o| unsafe { sys::kiln_argpartition(o, self.h, kth, axis) })
    }

    pub fn partition(&self, kth: i32, axis: i32) -> Result<Array> {
        make(|o| unsafe { sys::kiln_partition(o, self.h, kth, axis) })
    }
}

/// Random numbers: Threefry-2x32 under explicit keys (kiln/random.h). A key is a uint32
/// array of shape (2); the same key gives the same numbers on every device.
pub mod random {
    use super::{make, shape_i64, sys, Array, Dtype, Result};
    use std::os::raw::c_int;

    /// The key of a seed.
    pub fn key(seed: u64) -> Result<Array> {
        make(|o| unsafe { sys::kiln_random_key(o, seed) })
    }

    /// `num` new keys (shape (num, 2)) from one.
    pub fn split(key: &Array, num: i32) -> Result<Array> {
        make(|o| unsafe { sys::kiln_random_split(o, key.h, num) })
    }

    /// Random uint32 words of `shape`.
    pub fn bits(shape: &[usize], key: &Array) -> Result<Array> {
        let s = shape_i64(shape);
        make(|o| unsafe { sys::kiln_random_bits(o, s.as_ptr(), s.len() as c_int, key.h) })
    }

    /// Uniform in [low, high) of a floating dtype.
    pub fn uniform(shape: &[usize], key: &Array, dtype: Dtype, low: f64, high: f64) -> Result<Array> {
        let s = shape_i64(shape);
        make(|o| unsafe { sys::kiln_random_uniform(o, s.as_ptr(), s.len() as c_int, key.h, dtype as c_int, low, high) })
    }

    /// Normal with mean `loc` and standard deviation `scale`.
    pub fn normal(shape: &[usize], key: &Array, dtype: Dtype, loc: f64, scale: f64) -> Result<Array> {
        let s = shape_i64(shape);
        make(|o| unsafe { sys::kiln_random_normal(o, s.as_ptr(), s.len() as c_int, key.h, dtype as c_int, loc, scale) })
    }

    /// True with probability `p`, elementwise.
    pub fn bernoulli(p: &Array, key: &Array) -> Result<Array> {
        make(|o| unsafe { sys::kiln_random_bernoulli(o, p.h, key.h) })
    }

    /// int32 indices drawn from softmax(logits) along axis, which is removed.
    pub fn categorical(logits: &Array, key: &Array, axis: i32) -> Result<Array> {
        make(|o| unsafe { sys::kiln_random_categorical(o, logits.h, key.h, axis) })
    }
}

// The elementwise ops: build.rs writes one `name: kiln_name` pair per row of the generated
// C lists (kiln/c/kiln_unary_ops.def, kiln_binary_ops.def), which come from kiln's op
// registry, so a new op needs no edit here.
macro_rules! unary_ops {
    ($($name:ident: $cfn:ident),* $(,)?) => {
        impl Array {$(
            #[doc = concat!("Elementwise `", stringify!($name), "`.")]
            pub fn $name(&self) -> Result<Array> {
                make(|o| unsafe { sys::$cfn(o, self.h) })
            }
        )*}
        const UNARY: &[&str] = &[$(stringify!($name)),*];
    };
}

macro_rules! binary_ops {
    ($($name:ident: $cfn:ident),* $(,)?) => {
        impl Array {$(
            #[doc = concat!("Broadcasting `", stringify!($name), "`.")]
            pub fn $name(&self, other: &Array) -> Result<Array> {
                make(|o| unsafe { sys::$cfn(o, self.h, other.h) })
            }
        )*}
        const BINARY: &[&str] = &[$(stringify!($name)),*];
    };
}

mod elementwise {
    use super::*;
    include!(concat!(env!("OUT_DIR"), "/elementwise_ops.rs"));

    pub fn names() -> (&'static [&'static str], &'static [&'static str]) {
        (UNARY, BINARY)
    }
}

/// Names of the wrapped elementwise ops (unary, binary), in the registry's order.
pub fn elementwise_op_names() -> (&'static [&'static str], &'static [&'static str]) {
    elementwise::names()
}

impl fmt::Display for Array {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = ptr::null_mut();
        // SAFETY: the string is allocated by kiln and released with kiln_string_free.
        unsafe {
            if sys::kiln_array_tostring(&mut s, self.h) != 0 {
                return write!(f, "array(<{}>)", check(1).unwrap_err());
            }
            let r = f.write_str(&CStr::from_ptr(s).to_string_lossy());
            sys::kiln_string_free(s);
            r
        }
    }
}

impl fmt::Debug for Array {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// An owned C vector of arrays.
struct Vector(sys::kiln_vector_array);

impl Vector {
    fn from_arrays(arrays: &[&Array]) -> Result<Vector> {
        let mut v = Vector(ptr::null_mut());
        check(unsafe { sys::kiln_vector_array_new(&mut v.0) })?;
        for a in arrays {
            check(unsafe { sys::kiln_vector_array_append(v.0, a.h) })?;
        }
        Ok(v)
    }

    /// New handles to every array of a (borrowed) C vector.
    fn arrays_of(v: sys::kiln_vector_array) -> Result<Vec<Array>> {
        let mut n = 0usize;
        check(unsafe { sys::kiln_vector_array_size(&mut n, v) })?;
        (0..n)
            .map(|i| make(|o| unsafe { sys::kiln_vector_array_get(o, v, i) }))
            .collect()
    }
}

impl Drop for Vector {
    fn drop(&mut self) {
        unsafe { sys::kiln_vector_array_free(self.0) };
    }
}

/// Computes the arrays and what they depend on.
pub fn eval(arrays: &[&Array]) -> Result<()> {
    let v = Vector::from_arrays(arrays)?;
    check(unsafe { sys::kiln_eval(v.0) })
}

/// Starts computing the arrays and returns at once; reading them waits.
pub fn async_eval(arrays: &[&Array]) -> Result<()> {
    let v = Vector::from_arrays(arrays)?;
    check(unsafe { sys::kiln_async_eval(v.0) })
}

/// Process-wide counters of what kiln ran.
pub fn stats() -> sys::kiln_stats {
    let mut s = sys::kiln_stats::default();
    unsafe { sys::kiln_get_stats(&mut s) };
    s
}

// ---- functions ------------------------------------------------------------------

type Callback = dyn Fn(&[Array]) -> Result<Vec<Array>> + Send + Sync;

/// A function kiln can call: a plain closure ([`Function::new`]) or a compiled
/// one ([`compile`]). Cheap to clone; callable from many threads at once.
pub struct Function {
    c: sys::kiln_closure,
}

// SAFETY: closures are reference counted atomically by kiln, and the Rust
// callback they hold is Send + Sync.
unsafe impl Send for Function {}
unsafe impl Sync for Function {}

impl Drop for Function {
    fn drop(&mut self) {
        unsafe { sys::kiln_closure_free(self.c) };
    }
}

impl Clone for Function {
    fn clone(&self) -> Self {
        let mut c = ptr::null_mut();
        let rc = unsafe { sys::kiln_closure_set(&mut c, self.c) };
        assert!(rc == 0, "kiln_closure_set failed: {}", check(rc).unwrap_err());
        Function { c }
    }
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic payload".to_string()
    }
}

fn set_error(msg: &str) {
    let c = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    unsafe { sys::kiln_set_error(c.as_ptr()) };
}

thread_local! {
    // Set while this thread runs a traced callback, whose panics become the call's error.
    static IN_CALLBACK: std::cell::Cell<bool> = std::cell::Cell::new(false);
}

// The default hook would print a panic that the call returns as its error: quiet it
// inside callbacks, and keep whatever hook runs elsewhere.
fn quiet_panics_in_callbacks() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !IN_CALLBACK.with(|c| c.get()) {
                previous(info);
            }
        }));
    });
}

unsafe extern "C" fn trampoline(
    out: *mut sys::kiln_vector_array,
    input: sys::kiln_vector_array,
    payload: *mut c_void,
) -> c_int {
    // No panic may unwind into C: catch it and report it as the call's error.
    let outer = IN_CALLBACK.with(|c| c.replace(true));
    let result = catch_unwind(AssertUnwindSafe(|| -> Result<()> {
        let f = &*(payload as *const Box<Callback>);
        let inputs = Vector::arrays_of(input)?;
        let outputs = f(&inputs)?;
        for a in &outputs {
            check(sys::kiln_vector_array_append(*out, a.h))?;
        }
        Ok(())
    }));
    IN_CALLBACK.with(|c| c.set(outer));
    match result {
        Ok(Ok(())) => 0,
        Ok(Err(e)) => {
            set_error(e.message());
            1
        }
        Err(p) => {
            set_error(&format!(
                "kiln: panic in traced function: {}",
                panic_message(p.as_ref())
            ));
            1
        }
    }
}

unsafe extern "C" fn release(payload: *mut c_void) {
    // Dropping user state must not unwind into C either.
    let _ = catch_unwind(AssertUnwindSafe(|| drop(Box::from_raw(payload as *mut Box<Callback>))));
}

/// Options for [`compile`].
#[derive(Clone, Debug, Default)]
pub struct CompileOptions {
    /// Trace once per input rank and dtype instead of once per shape.
    pub shapeless: bool,
    /// Shown in kiln's warnings and graph dumps.
    pub name: String,
}

impl Function {
    /// Wraps `f` as a kiln closure without compiling it. A panic in `f` becomes
    /// the error of the call. `f` is dropped when kiln drops its last reference.
    pub fn new<F>(f: F) -> Result<Function>
    where
        F: Fn(&[Array]) -> Result<Vec<Array>> + Send + Sync + 'static,
    {
        quiet_panics_in_callbacks();
        let boxed: Box<Box<Callback>> = Box::new(Box::new(f));
        let payload = Box::into_raw(boxed) as *mut c_void;
        let mut c = ptr::null_mut();
        // On failure kiln has already called release(payload).
        check(unsafe { sys::kiln_closure_new_func_payload(&mut c, trampoline, payload, Some(release)) })?;
        Ok(Function { c })
    }

    /// A compiled version of this function (which may itself be compiled).
    pub fn compile(&self, options: &CompileOptions) -> Result<Function> {
        let name = CString::new(options.name.as_str()).map_err(|_| Error::new("[compile] name contains NUL"))?;
        let mut c = ptr::null_mut();
        check(unsafe { sys::kiln_compile_named(&mut c, self.c, name.as_ptr(), options.shapeless) })?;
        Ok(Function { c })
    }

    /// Calls the function; the outputs are lazy arrays.
    pub fn call(&self, inputs: &[&Array]) -> Result<Vec<Array>> {
        let v = Vector::from_arrays(inputs)?;
        let mut out = Vector(ptr::null_mut());
        check(unsafe { sys::kiln_closure_apply(&mut out.0, self.c, v.0) })?;
        Vector::arrays_of(out.0)
    }
}

/// How compiled calls get the generated kernels of their fused CPU regions (docs/codegen.md,
/// "Tiers"); the default comes from `KILN_FUSED_KERNELS`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum FusedKernels {
    /// A region whose kernel is not ready runs through the interpreter while a small pool
    /// compiles it; later calls use the kernel.
    Background = 0,
    /// A call compiles (or waits for) its kernels first.
    Wait = 1,
    /// Kernels are never generated: the interpreter runs every fused region.
    Off = 2,
}

/// Sets the fused-kernel policy for the whole process, from the next compiled call on.
pub fn set_fused_kernels(policy: FusedKernels) -> Result<()> {
    check(unsafe { sys::kiln_set_fused_kernels(policy as sys::kiln_fused_kernels) })
}

/// The fused-kernel policy in force.
pub fn fused_kernels() -> FusedKernels {
    let mut p: sys::kiln_fused_kernels = 0;
    unsafe { sys::kiln_get_fused_kernels(&mut p) };
    match p {
        1 => FusedKernels::Wait,
        2 => FusedKernels::Off,
        _ => FusedKernels::Background,
    }
}

/// Compiles `f`: traced once per input signature, replayed on later calls.
pub fn compile<F>(f: F, options: &CompileOptions) -> Result<Function>
where
    F: Fn(&[Array]) -> Result<Vec<Array>> + Send + Sync + 'static,
{
    Function::new(f)?.compile(options)
}

/// A compiled function of one array returning one array.
#[derive(Clone)]
pub struct Function1(pub Function);

impl Function1 {
    pub fn call(&self, a: &Array) -> Result<Array> {
        single(self.0.call(&[a])?)
    }
}

/// A compiled function of two arrays returning one array.
#[derive(Clone)]
pub struct Function2(pub Function);

impl Function2 {
    pub fn call(&self, a: &Array, b: &Array) -> Result<Array> {
        single(self.0.call(&[a, b])?)
    }
}

/// A compiled function of three arrays returning one array.
#[derive(Clone)]
pub struct Function3(pub Function);

impl Function3 {
    pub fn call(&self, a: &Array, b: &Array, c: &Array) -> Result<Array> {
        single(self.0.call(&[a, b, c])?)
    }
}

fn single(mut outs: Vec<Array>) -> Result<Array> {
    if outs.len() != 1 {
        return Err(Error::new(format!("[call] expected 1 output, got {}", outs.len())));
    }
    Ok(outs.pop().unwrap())
}

fn arity(name: &str, n: usize, inputs: &[Array]) -> Result<()> {
    if inputs.len() != n {
        return Err(Error::new(format!(
            "[{name}] expected {n} inputs, got {}",
            inputs.len()
        )));
    }
    Ok(())
}

/// Compiles a function of one array.
pub fn compile1<F>(f: F, options: &CompileOptions) -> Result<Function1>
where
    F: Fn(&Array) -> Result<Array> + Send + Sync + 'static,
{
    let name = options.name.clone();
    let g = compile(
        move |inputs: &[Array]| {
            arity(&name, 1, inputs)?;
            Ok(vec![f(&inputs[0])?])
        },
        options,
    )?;
    Ok(Function1(g))
}

/// Compiles a function of two arrays.
pub fn compile2<F>(f: F, options: &CompileOptions) -> Result<Function2>
where
    F: Fn(&Array, &Array) -> Result<Array> + Send + Sync + 'static,
{
    let name = options.name.clone();
    let g = compile(
        move |inputs: &[Array]| {
            arity(&name, 2, inputs)?;
            Ok(vec![f(&inputs[0], &inputs[1])?])
        },
        options,
    )?;
    Ok(Function2(g))
}

/// Compiles a function of three arrays.
pub fn compile3<F>(f: F, options: &CompileOptions) -> Result<Function3>
where
    F: Fn(&Array, &Array, &Array) -> Result<Array> + Send + Sync + 'static,
{
    let name = options.name.clone();
    let g = compile(
        move |inputs: &[Array]| {
            arity(&name, 3, inputs)?;
            Ok(vec![f(&inputs[0], &inputs[1], &inputs[2])?])
        },
        options,
    )?;
    Ok(Function3(g))
}
