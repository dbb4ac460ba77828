/* kiln C API (C11): opaque handles, plain types, and an int status from every call.

   Conventions
   - Every function returns 0 on success and non-zero on failure; the failing
     thread's message is then in kiln_last_error(). Nothing exits or aborts the
     process, and no C++ exception crosses this boundary.
   - Handles (kiln_array, kiln_vector_array, kiln_closure) are pointers to opaque
     objects. Initialize them to NULL. A function that produces a handle takes a
     pointer to one: when *out is NULL a new handle is stored there, otherwise the
     handle already in *out is reassigned in place, so `kiln_add(&c, c, b)` is fine
     and loops need no frees in between. On failure *out is left unchanged.
     Release every handle once with its _free function (NULL is accepted).
   - A handle may be used from any thread, but one handle must not be reassigned
     on one thread while another thread uses it. Arrays are immutable values;
     sharing them between threads is safe.
   - Pointers returned through out parameters (strings, shapes) stay valid as long
     as the handle they came from is neither freed nor reassigned. */
#ifndef KILN_C_KILN_H
#define KILN_C_KILN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- handles and plain types ------------------------------------------------- */

typedef struct kiln_array_s* kiln_array;
typedef struct kiln_vector_array_s* kiln_vector_array;
typedef struct kiln_closure_s* kiln_closure;

/* Element types, in the order of kiln::Dtype. */
typedef enum kiln_dtype {
#define KILN_C_DTYPE(E, n, t) E,
#include "kiln/c/kiln_dtypes.def"
#undef KILN_C_DTYPE
  KILN_NUM_DTYPES
} kiln_dtype;

typedef enum kiln_device_type { KILN_DEVICE_CPU = 0, KILN_DEVICE_CUDA = 1 } kiln_device_type;

/* A device: a type and an ordinal (0 for the CPU). */
typedef struct kiln_device {
  kiln_device_type type;
  int index;
} kiln_device;

/* A stream: an ordered queue of work on one device. Each thread has its own
   default stream per device, so streams of different threads never wait on
   each other. */
typedef struct kiln_stream {
  kiln_device device;
  int index;
} kiln_stream;

typedef enum kiln_compile_mode {
  KILN_COMPILE_DISABLED = 0, /* call the function directly */
  KILN_COMPILE_NO_SIMPLIFY = 1, /* trace and replay, without graph passes */
  KILN_COMPILE_NO_FUSE = 2, /* passes, but no fusion */
  KILN_COMPILE_ENABLED = 3 /* everything */
} kiln_compile_mode;

/* How compiled calls get the generated kernels of their fused CPU regions, as
   kiln::FusedKernels (docs/codegen.md, "Tiers"; the default comes from KILN_FUSED_KERNELS). */
typedef enum kiln_fused_kernels {
  KILN_FUSED_KERNELS_BACKGROUND = 0, /* interpreted at once while a pool compiles them */
  KILN_FUSED_KERNELS_WAIT = 1, /* a call compiles (or waits for) them first */
  KILN_FUSED_KERNELS_OFF = 2 /* never generated: the interpreter runs fused regions */
} kiln_fused_kernels;

/* Process-wide counters, as kiln::Stats. */
typedef struct kiln_stats {
  uint64_t kernels_launched;
  uint64_t arrays_materialized;
  uint64_t traces;
  uint64_t cache_hits;
  uint64_t cache_misses;
  uint64_t interim_calls;
  uint64_t fused_calls;
  uint64_t fused_arrivals;
  uint64_t fused_arrival_ns;
} kiln_stats;

/* ---- errors ------------------------------------------------------------------- */

/* The calling thread's last error message ("" when none); valid until the next
   failing call on this thread. Never NULL. */
const char* kiln_last_error(void);

/* Clears the calling thread's last error message. */
int kiln_clear_error(void);

/* Sets the calling thread's last error message. A closure callback calls this
   before returning non-zero so that apply or compile fails with `msg`. */
int kiln_set_error(const char* msg);

/* Called with the message of every failing call, on the failing thread, after
   the last error is set. */
typedef void (*kiln_error_handler_fn)(const char* msg, void* data);

/* Installs a process-wide error handler (NULL removes it). `dtor(data)`, if given,
   runs once when the handler is replaced or removed and no call still uses it. */
int kiln_set_error_handler(kiln_error_handler_fn fn, void* data, void (*dtor)(void* data));

/* ---- dtypes ------------------------------------------------------------------- */

/* Bytes per element. */
int kiln_dtype_size(size_t* out, kiln_dtype dtype);
/* "float32", "bool", ...; a static string. */
int kiln_dtype_name(const char** out, kiln_dtype dtype);
/* Parses a name printed by kiln_dtype_name. */
int kiln_dtype_from_name(kiln_dtype* out, const char* name);

/* ---- arrays ------------------------------------------------------------------- */

/* An empty handle (holding no array); useful as a target to reassign. */
int kiln_array_new(kiln_array* out);
/* An array of the given shape and dtype copied from `data`, row-major, holding
   the product of `shape` elements of `dtype` (bool is one byte, float16 and
   bfloat16 are their 16-bit patterns). `shape` may be NULL when ndim is 0. */
int kiln_array_new_data(kiln_array* out, const void* data, const int64_t* shape, int ndim, kiln_dtype dtype);
/* A 0-d array of `dtype` holding `value` converted to it. */
int kiln_array_new_float(kiln_array* out, double value, kiln_dtype dtype);
int kiln_array_new_int(kiln_array* out, int64_t value, kiln_dtype dtype);
int kiln_array_new_bool(kiln_array* out, bool value);
/* A 0-d array holding `value` in the dtype an op with a C++ scalar of that kind
   would give with `like` (like's dtype unless the scalar is of a higher kind), on like's device. */
int kiln_array_new_float_like(kiln_array* out, double value, const kiln_array like);
int kiln_array_new_int_like(kiln_array* out, int64_t value, const kiln_array like);
/* Makes *out refer to the same array as `src` (arrays are immutable; no copy). */
int kiln_array_set(kiln_array* out, const kiln_array src);
/* Releases the handle. */
int kiln_array_free(kiln_array a);

/* Whether the handle holds an array. */
int kiln_array_valid(bool* out, const kiln_array a);
int kiln_array_ndim(int* out, const kiln_array a);
/* A pointer to ndim sizes (NULL for 0-d arrays). */
int kiln_array_shape(const int64_t** out, const kiln_array a);
/* Size of one axis; negative axes count from the end. */
int kiln_array_dim(int64_t* out, const kiln_array a, int axis);
/* Number of elements, bytes per element, total bytes. */
int kiln_array_size(size_t* out, const kiln_array a);
int kiln_array_itemsize(size_t* out, const kiln_array a);
int kiln_array_nbytes(size_t* out, const kiln_array a);
int kiln_array_dtype(kiln_dtype* out, const kiln_array a);
int kiln_array_device(kiln_device* out, const kiln_array a);
/* Identity of the underlying node: equal for handles of the same array. */
int kiln_array_id(const void** out, const kiln_array a);

/* Computes the array if not yet done. */
int kiln_array_eval(const kiln_array a);
int kiln_array_is_evaluated(bool* out, const kiln_array a);
/* Evaluates and writes every element, row-major, converted to `as`, into `dst`,
   which holds `dst_nbytes` bytes (at least size * size of `as`). */
int kiln_array_copy_to(void* dst, size_t dst_nbytes, const kiln_array a, kiln_dtype as);
/* The single element of a size-1 array, converted; evaluates. One function per
   dtype: kiln_array_item_bool, kiln_array_item_uint8, ..., kiln_array_item_float64. */
#define KILN_C_DTYPE(E, n, t) int kiln_array_item_##n(t* out, const kiln_array a);
#include "kiln/c/kiln_dtypes.def"
#undef KILN_C_DTYPE
/* A printable description: shape, dtype and (evaluating) the values. The string
   is allocated; release it with kiln_string_free. */
int kiln_array_tostring(char** out, const kiln_array a);
int kiln_string_free(char* s);

/* ---- vectors of arrays -------------------------------------------------------- */

/* An empty vector. */
int kiln_vector_array_new(kiln_vector_array* out);
/* A vector holding the n given arrays (shared, not copied). */
int kiln_vector_array_new_data(kiln_vector_array* out, const kiln_array* arrays, size_t n);
/* Makes *out hold the same arrays as `src` (a new vector of the same arrays). */
int kiln_vector_array_set(kiln_vector_array* out, const kiln_vector_array src);
int kiln_vector_array_free(kiln_vector_array v);
/* Appends one array. */
int kiln_vector_array_append(kiln_vector_array v, const kiln_array a);
/* Appends every array of `other`. */
int kiln_vector_array_append_vector(kiln_vector_array v, const kiln_vector_array other);
/* The array at index i, into *out. */
int kiln_vector_array_get(kiln_array* out, const kiln_vector_array v, size_t i);
int kiln_vector_array_size(size_t* out, const kiln_vector_array v);
/* Removes every array. */
int kiln_vector_array_clear(kiln_vector_array v);

/* ---- evaluation, devices and streams ------------------------------------------ */

/* Computes the given arrays and what they depend on; each node once, even when
   other threads evaluate overlapping graphs. */
int kiln_eval(const kiln_vector_array arrays);
/* Starts evaluation on the calling thread's default stream and returns at once
   (GPU work is launched by the calling thread on its CUDA stream, without waiting).
   A later eval, copy or item waits for it; errors surface there (or in
   kiln_synchronize). */
int kiln_async_eval(const kiln_vector_array arrays);
/* Waits until the work this thread queued on `stream` with kiln_async_eval is
   done, and reports its first error. Fails for a device that is not there. */
int kiln_synchronize(kiln_stream stream);

/* Evaluate every op as it is built (debugging). */
int kiln_set_eager(bool eager);
int kiln_get_eager(bool* out);
int kiln_get_stats(kiln_stats* out);
int kiln_reset_stats(void);

/* The device new arrays are placed on. */
int kiln_default_device(kiln_device* out);
/* Fails for a device kiln was built without. */
int kiln_set_default_device(kiln_device device);
/* How many devices of the type this build can use (1 for the CPU). */
int kiln_device_count(int* out, kiln_device_type type);
/* The calling thread's default stream on `device` (which must be there). */
int kiln_default_stream(kiln_stream* out, kiln_device device);

/* ---- compile mode ------------------------------------------------------------- */

int kiln_set_compile_mode(kiln_compile_mode mode);
int kiln_get_compile_mode(kiln_compile_mode* out);
/* Process-wide; applies to the next compiled call of any thread. */
int kiln_set_fused_kernels(kiln_fused_kernels policy);
int kiln_get_fused_kernels(kiln_fused_kernels* out);

/* ---- ops: creation ------------------------------------------------------------ */

int kiln_zeros(kiln_array* out, const int64_t* shape, int ndim, kiln_dtype dtype);
int kiln_ones(kiln_array* out, const int64_t* shape, int ndim, kiln_dtype dtype);
int kiln_full(kiln_array* out, const int64_t* shape, int ndim, double value, kiln_dtype dtype);
/* `value` (0-d) broadcast to shape, in value's dtype. */
int kiln_full_array(kiln_array* out, const int64_t* shape, int ndim, const kiln_array value);
int kiln_zeros_like(kiln_array* out, const kiln_array a);
int kiln_ones_like(kiln_array* out, const kiln_array a);
int kiln_full_like(kiln_array* out, const kiln_array a, double value);
/* [start, stop) in steps of step, like numpy.arange. */
int kiln_arange(kiln_array* out, double start, double stop, double step, kiln_dtype dtype);
/* num evenly spaced values from start to stop inclusive. */
int kiln_linspace(kiln_array* out, double start, double stop, int64_t num, kiln_dtype dtype);
/* n x m with ones on diagonal k; m < 0 means m = n. */
int kiln_eye(kiln_array* out, int64_t n, int64_t m, int64_t k, kiln_dtype dtype);

/* ---- ops: elementwise --------------------------------------------------------- */

/* kiln_abs, kiln_exp, ... (the list is kiln/c/kiln_unary_ops.def, generated from the
   op registry; docs/ops.md says what each op computes). Math on bool or integer
   inputs computes in float32. */
#define KILN_C_UNARY(name) int kiln_##name(kiln_array* out, const kiln_array a);
#include "kiln/c/kiln_unary_ops.def"
#undef KILN_C_UNARY

/* kiln_add, kiln_less, ... (the list is kiln/c/kiln_binary_ops.def, generated):
   broadcasting, dtypes promoted. */
#define KILN_C_BINARY(name) int kiln_##name(kiln_array* out, const kiln_array a, const kiln_array b);
#include "kiln/c/kiln_binary_ops.def"
#undef KILN_C_BINARY

/* Converts the element type (float to integer truncates toward zero, saturates). */
int kiln_astype(kiln_array* out, const kiln_array a, kiln_dtype dtype);
/* cond ? a : b, broadcasting all three. */
int kiln_where(kiln_array* out, const kiln_array cond, const kiln_array a, const kiln_array b);
/* min(max(a, lo), hi); lo or hi may be NULL (absent). */
int kiln_clip(kiln_array* out, const kiln_array a, const kiln_array lo, const kiln_array hi);

/* ---- ops: reductions ---------------------------------------------------------- */

/* kiln_sum, kiln_mean, ... (the list is kiln/c/kiln_reduce_ops.def, generated); axes may be
   negative; naxes == 0 reduces every axis. */
#define KILN_C_REDUCE(name) \
  int kiln_##name(kiln_array* out, const kiln_array a, const int* axes, size_t naxes, bool keepdims);
#include "kiln/c/kiln_reduce_ops.def"
#undef KILN_C_REDUCE

/* Variance with ddof degrees of freedom removed from the divisor. */
int kiln_var(kiln_array* out, const kiln_array a, const int* axes, size_t naxes, bool keepdims, int ddof);
/* Index (int32) of the first largest / smallest element along axis. */
int kiln_argmax(kiln_array* out, const kiln_array a, int axis, bool keepdims);
int kiln_argmin(kiln_array* out, const kiln_array a, int axis, bool keepdims);
/* As above over the flattened array. */
int kiln_argmax_all(kiln_array* out, const kiln_array a, bool keepdims);
int kiln_argmin_all(kiln_array* out, const kiln_array a, bool keepdims);
/* Softmax over the given axes; naxes == 0 means the last axis. */
int kiln_softmax(kiln_array* out, const kiln_array a, const int* axes, size_t naxes);
/* Cumulative sum along axis (inclusive unless told, forward unless reverse). */
int kiln_cumsum(kiln_array* out, const kiln_array a, int axis, bool reverse, bool inclusive);

/* ---- ops: random numbers ----------------------------------------------------- */

/* Threefry-2x32 under explicit keys, as kiln/random.h describes: a key is a uint32
   array of shape (2); the same key gives the same numbers on every device. */
int kiln_random_key(kiln_array* out, uint64_t seed);
/* num new keys from one (uint32, shape (num, 2)). */
int kiln_random_split(kiln_array* out, const kiln_array key, int num);
/* Random uint32 words of the given shape. */
int kiln_random_bits(kiln_array* out, const int64_t* shape, int ndim, const kiln_array key);
/* Uniform in [low, high) of a floating dtype. */
int kiln_random_uniform(kiln_array* out, const int64_t* shape, int ndim, const kiln_array key, kiln_dtype dtype,
                        double low, double high);
/* Normal with mean loc and standard deviation scale. */
int kiln_random_normal(kiln_array* out, const int64_t* shape, int ndim, const kiln_array key, kiln_dtype dtype,
                       double loc, double scale);
/* True with probability p, elementwise (bool, shape of p). */
int kiln_random_bernoulli(kiln_array* out, const kiln_array p, const kiln_array key);
/* Indices (int32, axis removed) drawn from softmax(logits) along axis. */
int kiln_random_categorical(kiln_array* out, const kiln_array logits, const kiln_array key, int axis);

/* ---- ops: sorting and selection ----------------------------------------------- */
/* Along axis, NaN after every number (numpy.sort's order); indices are int32. */

/* The k largest elements, largest first (equal ones in index order), and their indices. */
int kiln_topk(kiln_array* values, kiln_array* indices, const kiln_array a, int k, int axis);
int kiln_sort(kiln_array* out, const kiln_array a, int axis);
/* Stable. */
int kiln_argsort(kiln_array* out, const kiln_array a, int axis);
/* Indices putting the kth smallest (kth may be negative) in place, no larger one before
   it and no smaller one after it. */
int kiln_argpartition(kiln_array* out, const kiln_array a, int kth, int axis);
int kiln_partition(kiln_array* out, const kiln_array a, int kth, int axis);

/* ---- ops: linear algebra ------------------------------------------------------ */

/* numpy.matmul semantics: 1-D operands are promoted and the added axis removed,
   leading (batch) axes broadcast. */
int kiln_matmul(kiln_array* out, const kiln_array a, const kiln_array b);

/* ---- ops: layout -------------------------------------------------------------- */

/* One dimension may be -1 and is inferred. */
int kiln_reshape(kiln_array* out, const kiln_array a, const int64_t* shape, int ndim);
/* Permutes axes; nperm == 0 reverses them. */
int kiln_transpose(kiln_array* out, const kiln_array a, const int* perm, size_t nperm);
int kiln_swapaxes(kiln_array* out, const kiln_array a, int axis1, int axis2);
int kiln_broadcast_to(kiln_array* out, const kiln_array a, const int64_t* shape, int ndim);
int kiln_expand_dims(kiln_array* out, const kiln_array a, int axis);
/* Removes the given size-1 axes, or all of them when naxes == 0. */
int kiln_squeeze(kiln_array* out, const kiln_array a, const int* axes, size_t naxes);
int kiln_flatten(kiln_array* out, const kiln_array a);
/* A contiguous copy. */
int kiln_copy(kiln_array* out, const kiln_array a);
/* start/stop/step for every one of the n axes (step NULL means all ones); values
   follow Python slicing: clamped, negative counting from the end. */
int kiln_slice(kiln_array* out, const kiln_array a, const int64_t* start, const int64_t* stop, const int64_t* step,
               int n);
/* A copy of a with the region start:stop:step replaced by update (broadcast). */
int kiln_slice_update(kiln_array* out, const kiln_array a, const kiln_array update, const int64_t* start,
                      const int64_t* stop, const int64_t* step, int n);
int kiln_concatenate(kiln_array* out, const kiln_vector_array arrays, int axis);
int kiln_stack(kiln_array* out, const kiln_vector_array arrays, int axis);
/* Splits into `sections` equal parts along axis. */
int kiln_split(kiln_vector_array* out, const kiln_array a, int sections, int axis);
/* Splits before each of the n indices along axis. */
int kiln_split_indices(kiln_vector_array* out, const kiln_array a, const int64_t* indices, size_t n, int axis);
/* Pads each of the n axes with widths[2i] elements before and widths[2i+1] after. */
int kiln_pad(kiln_array* out, const kiln_array a, const int64_t* widths, int n, double pad_value);
/* numpy.take along axis. */
int kiln_take(kiln_array* out, const kiln_array a, const kiln_array indices, int axis);
/* numpy.take_along_axis. */
int kiln_take_along_axis(kiln_array* out, const kiln_array a, const kiln_array indices, int axis);

/* ---- ops: language models (kiln/nn.h) ---------------------------------------- */

/* Affine quantization in MLX's format along the last axis: packed uint32 words,
   scales and biases (in w's dtype) per group of group_size (32, 64, 128) at bits
   2, 3, 4, 5, 6 or 8. */
int kiln_quantize(kiln_array* packed, kiln_array* scales, kiln_array* biases, const kiln_array w, int group_size,
                  int bits);
int kiln_dequantize(kiln_array* out, const kiln_array w, const kiln_array scales, const kiln_array biases,
                    int group_size, int bits);
/* x @ dequantize(w)^T when transpose (w [N, K]), else x @ dequantize(w) (w [K, N]). */
int kiln_quantized_matmul(kiln_array* out, const kiln_array x, const kiln_array w, const kiln_array scales,
                          const kiln_array biases, bool transpose, int group_size, int bits);
/* Norms over the last axis; weight and bias may be NULL. */
int kiln_rms_norm(kiln_array* out, const kiln_array x, const kiln_array weight, float eps);
int kiln_layer_norm(kiln_array* out, const kiln_array x, const kiln_array weight, const kiln_array bias, float eps);
/* Rotary embedding of the first dims features of x [..., L, D] at positions offset + l
   (offset: int32 [] or [B]); frequencies base^(-2i/dims), or 1/freqs when freqs is
   not NULL (base is then ignored). */
int kiln_rope(kiln_array* out, const kiln_array x, int dims, bool traditional, float base, float scale,
              const kiln_array offset, const kiln_array freqs);
/* Fused attention softmax(q k^T scale + mask) v, q [B, Hq, Lq, D], k/v [B, Hkv, Lk, D];
   mask (boolean keep or additive) and key_lengths (int32 [B]) may be NULL. */
int kiln_scaled_dot_product_attention(kiln_array* out, const kiln_array q, const kiln_array k, const kiln_array v,
                                      float scale, const kiln_array mask, bool causal, const kiln_array key_lengths);
/* a with update written at start (int32, one entry per axis in axes) along the
   naxes axes; in place when nothing else holds a's buffer. */
int kiln_slice_update_at(kiln_array* out, const kiln_array a, const kiln_array update, const kiln_array start,
                         const int* axes, size_t naxes);

/* ---- groups of ranks and their collectives (docs/distributed.md) -------------- */

/* One rank of a group: one per device, each used by its own thread, every rank calling the
   same collectives in the same order. */
typedef struct kiln_group_s* kiln_group;

/* One rank per device of this process, rank i on devices[i]: out[i] receives rank i's handle
   (free each with kiln_group_free). CUDA devices (distinct): one NCCL communicator each; CPU
   devices: threads meeting in shared memory. */
int kiln_group_local(const kiln_device* devices, size_t n, kiln_group* out);
int kiln_group_free(kiln_group g);
int kiln_group_rank(int* out, const kiln_group g);
int kiln_group_size(int* out, const kiln_group g);
/* Ends the group for all its ranks, from any thread: each rank waiting in a collective, and
   each later collective, fails with `why` (a rank that failed before a collective would
   otherwise leave the others waiting in it for ever). */
int kiln_group_abort(const kiln_group g, const char* why);

/* Collectives over g (NULL: the group of one rank, whose collectives copy their input). */
/* The sum of every rank's x. */
int kiln_all_sum(kiln_array* out, const kiln_array x, const kiln_group g);
/* Every rank's x joined along axis in rank order. */
int kiln_all_gather(kiln_array* out, const kiln_array x, const kiln_group g, int axis);
/* The sum over the ranks, then this rank's part of axis 0. */
int kiln_reduce_scatter(kiln_array* out, const kiln_array x, const kiln_group g);

/* ---- closures and compile ----------------------------------------------------- */

/* A function of arrays. `in` is owned by kiln and must not be freed or changed.
   *out is an empty vector owned by kiln: append the results to it (or reassign
   it through any call taking a kiln_vector_array*). Return 0 on success; a
   non-zero return (after kiln_set_error(msg) to say why) fails the apply or
   compile that called it with that message. */
typedef int (*kiln_closure_fn)(kiln_vector_array* out, const kiln_vector_array in, void* payload);

/* A closure calling fn(out, in, NULL). */
int kiln_closure_new_func(kiln_closure* out, kiln_closure_fn fn);
/* A closure calling fn(out, in, payload). `dtor(payload)`, if given, runs exactly
   once, when the last reference to the closure goes (handles, compiled closures
   and compile caches hold references), on whichever thread that is. If this call
   fails, dtor(payload) has run before it returns. */
int kiln_closure_new_func_payload(kiln_closure* out, kiln_closure_fn fn, void* payload, void (*dtor)(void*));
/* Makes *out another reference to `src`. */
int kiln_closure_set(kiln_closure* out, const kiln_closure src);
int kiln_closure_free(kiln_closure c);
/* Calls the closure; *out receives its outputs (lazy arrays). */
int kiln_closure_apply(kiln_vector_array* out, const kiln_closure c, const kiln_vector_array in);

/* A closure that traces `fn` once per input signature (shapes, dtypes, ranks;
   with shapeless, not shapes) and replays the optimized result. It is a closure
   like any other: apply, nest (a compiled closure called while tracing is
   inlined) and free it the same way, from any thread. A trace whose callback
   fails makes that apply fail and leaves no cache entry. */
int kiln_compile(kiln_closure* out, const kiln_closure fn, bool shapeless);
/* As kiln_compile, with a name shown in warnings and graph dumps (may be NULL). */
int kiln_compile_named(kiln_closure* out, const kiln_closure fn, const char* name, bool shapeless);

/* The graph that produces `outputs`, in Graphviz DOT. The string is allocated;
   release it with kiln_string_free. */
int kiln_export_to_dot(char** out, const kiln_vector_array outputs);

#ifdef __cplusplus
}
#endif

#endif /* KILN_C_KILN_H */
