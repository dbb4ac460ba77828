/* kiln C API for graphs as data (C11), in the conventions of kiln.h: an int status from every
   call, the message in kiln_last_error(), handles released once with their _free function.

   An executable runs a .kgraph program (docs/executable.md) eagerly, lazily or compiled. Runs,
   commits and reads may come from any number of threads at once on one executable; they share
   its parameters and compiled traces. Inputs are passed by name: `names[i]` names `inputs[i]`. */
#ifndef KILN_C_KILN_EXECUTABLE_H
#define KILN_C_KILN_EXECUTABLE_H

#include "kiln/c/kiln.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kiln_executable_s* kiln_executable;

typedef enum kiln_exec_mode {
  KILN_EXEC_EAGER = 0, /* evaluate after each node */
  KILN_EXEC_LAZY = 1, /* build the whole graph, evaluate once */
  KILN_EXEC_COMPILED = 2 /* trace once per input signature, replay */
} kiln_exec_mode;

/* No active extent: every row of the inputs is live. */
#define KILN_NO_EXTENT (-1)

/* An executable of the graph in `text` (`path`, which may be NULL, names it in errors and
   is the folder its params file is read from), or of the .kgraph file at `path`. The
   graph's params file, when it names one, is loaded. */
int kiln_executable_parse(kiln_executable* out, const char* text, const char* path, kiln_exec_mode mode,
                          kiln_device device);
int kiln_executable_load(kiln_executable* out, const char* path, kiln_exec_mode mode, kiln_device device);
/* Waits for its committed runs (dropping their errors) and releases it. */
int kiln_executable_free(kiln_executable e);

int kiln_executable_mode(kiln_exec_mode* out, const kiln_executable e);
/* Inputs and outputs of the entry graph, in declaration order; names stay valid while e lives. */
int kiln_executable_num_inputs(size_t* out, const kiln_executable e);
int kiln_executable_input_name(const char** out, const kiln_executable e, size_t i);
int kiln_executable_num_outputs(size_t* out, const kiln_executable e);
int kiln_executable_output_name(const char** out, const kiln_executable e, size_t i);

/* Parameters: float32 values converted to the declared dtype, or bytes already in it. */
int kiln_executable_set_param(kiln_executable e, const char* name, const float* data, size_t count);
int kiln_executable_set_param_typed(kiln_executable e, const char* name, const void* data, size_t nbytes,
                                    kiln_dtype dtype);
/* Every parameter of a safetensors-layout file (mapped, not copied, when dtypes match). */
int kiln_executable_load_params(kiln_executable e, const char* path);
int kiln_executable_has_param(bool* out, const kiln_executable e, const char* name);

/* Runs once and evaluates: inputs in their declared dtypes; *out receives the outputs.
   `extent` is the active extent (KILN_NO_EXTENT for none). */
int kiln_executable_run(kiln_vector_array* out, kiln_executable e, const char* const* names,
                        const kiln_vector_array inputs, int64_t extent);
/* As kiln_executable_run, converting inputs to their declared dtypes and outputs to float32. */
int kiln_executable_run_f32(kiln_vector_array* out, kiln_executable e, const char* const* names,
                            const kiln_vector_array inputs, int64_t extent);
/* Positional inputs (graph order, declared dtypes, symbols at their bounds); output i is
   written at its slot's offset inside `arena` of kiln_executable_arena_bytes bytes. */
int kiln_executable_run_slots(kiln_executable e, const void* const* inputs, size_t n_inputs, void* arena,
                              int64_t extent);
int kiln_executable_arena_bytes(size_t* out, const kiln_executable e);
int kiln_executable_output_slot(size_t* offset, size_t* nbytes, const kiln_executable e, size_t i);

/* Handles. A host handle reads caller memory on every run (kept alive and unchanged by the
   caller while runs use it); a device handle holds a copy of `value` on e's device. */
int kiln_executable_host_handle(int* out, kiln_executable e, void* data, const int64_t* shape, int ndim,
                                kiln_dtype dtype);
int kiln_executable_device_handle(int* out, kiln_executable e, const kiln_array value);
int kiln_executable_write_handle(kiln_executable e, int handle, const kiln_array value);
int kiln_executable_read_handle(kiln_array* out, const kiln_executable e, int handle);
/* Input `name` reads the handle on runs that do not pass it. */
int kiln_executable_bind_input(kiln_executable e, const char* name, int handle);
int kiln_executable_unbind_input(kiln_executable e, const char* name);
/* After each run, output `output` becomes the handle's value (recurrent state). */
int kiln_executable_feed(kiln_executable e, size_t output, int handle);
int kiln_executable_clear_feeds(kiln_executable e);

/* Starts a run and returns; its inputs are checked now. kiln_executable_sync waits for
   every committed run and stores their outputs in commit order, one run after another
   (runs * num_outputs arrays), with the number of runs in *runs; the first error of
   any run is reported after all have finished. */
int kiln_executable_commit(kiln_executable e, const char* const* names, const kiln_vector_array inputs, int64_t extent);
int kiln_executable_sync(kiln_vector_array* out, size_t* runs, kiln_executable e);
/* Runs each of n input sets (all with the same names), overlapping one set's preparation
   with the previous one's evaluation; *out as kiln_executable_sync's. */
int kiln_executable_run_pipelined(kiln_vector_array* out, kiln_executable e, const char* const* names,
                                  const kiln_vector_array* sets, size_t n, int64_t extent);

/* Compiled mode: traces and compiles now what a first run would, on zeros of the given
   shapes (shapes[i] has ndims[i] sizes, for input names[i]; inputs not named: symbols at
   their bounds); feeds and handles are left alone. Other modes: nothing to do. */
int kiln_executable_warm_compile(kiln_executable e, const char* const* names, const int64_t* const* shapes,
                                 const int* ndims, size_t n);

/* Why an active extent would fall back to the whole bucket for inputs of these shapes
   ("" when it would not); allocated, release it with kiln_string_free. */
int kiln_executable_extent_blocker(char** out, const kiln_executable e, const char* const* names,
                                   const int64_t* const* shapes, const int* ndims, size_t n);

#ifdef __cplusplus
}
#endif

#endif /* KILN_C_KILN_EXECUTABLE_H */
