//! Graphs as data: [`Executable`] runs a `.kgraph` program (docs/executable.md) eagerly,
//! lazily or compiled, over include/kiln/c/kiln_executable.h. One executable may be run,
//! committed to and read from any number of threads at once.

use std::ffi::{CStr, CString};
use std::os::raw::{c_char, c_int, c_void};
use std::ptr;
use std::sync::Mutex;

use crate::llm::Device;
use crate::{check, make, sys, Array, Dtype, Error, Result, Vector};

/// How an executable runs its graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExecMode {
    /// Evaluate after each node.
    Eager,
    /// Build the whole graph, evaluate once.
    Lazy,
    /// Trace once per input signature, replay.
    Compiled,
}

impl ExecMode {
    fn to_c(self) -> sys::kiln_exec_mode {
        match self {
            ExecMode::Eager => sys::KILN_EXEC_EAGER,
            ExecMode::Lazy => sys::KILN_EXEC_LAZY,
            ExecMode::Compiled => sys::KILN_EXEC_COMPILED,
        }
    }
}

/// Options of one run: the active extent (only the first n rows of inputs whose leading
/// dimension is symbolic are live).
#[derive(Clone, Copy, Debug, Default)]
pub struct RunOptions {
    pub active_extent: Option<usize>,
}

impl RunOptions {
    fn extent(&self) -> i64 {
        self.active_extent.map_or(sys::KILN_NO_EXTENT, |n| n as i64)
    }
}

/// Memory a host handle reads in place, owned by the executable (zero copy).
struct HostMemory(*mut u8, usize);

/// A `.kgraph` program ready to run. Send + Sync: kiln's executable has its own locks.
pub struct Executable {
    h: sys::kiln_executable,
    host: Mutex<Vec<HostMemory>>,
}

// SAFETY: the C executable is made to be shared between threads; host memory is only
// touched through &mut self or kiln's own synchronization.
unsafe impl Send for Executable {}
unsafe impl Sync for Executable {}

impl Drop for Executable {
    fn drop(&mut self) {
        // SAFETY: h came from kiln and is freed once; it waits for committed runs first,
        // so no run reads the host memory freed after it.
        unsafe { sys::kiln_executable_free(self.h) };
        for m in self
            .host
            .get_mut()
            .map(|v| v.drain(..).collect::<Vec<_>>())
            .unwrap_or_default()
        {
            // SAFETY: allocated in host_handle with this layout.
            unsafe { std::alloc::dealloc(m.0, std::alloc::Layout::from_size_align(m.1, 64).unwrap()) };
        }
    }
}

fn cstr(s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::new(format!("[executable] '{s}' contains NUL")))
}

/// Names and arrays of one input set, in C form.
struct Named {
    _names: Vec<CString>,
    ptrs: Vec<*const c_char>,
    v: Vector,
}

fn named(inputs: &[(&str, &Array)]) -> Result<Named> {
    let names = inputs.iter().map(|(n, _)| cstr(n)).collect::<Result<Vec<_>>>()?;
    let ptrs = names.iter().map(|n| n.as_ptr()).collect();
    let arrays: Vec<&Array> = inputs.iter().map(|(_, a)| *a).collect();
    Ok(Named {
        _names: names,
        ptrs,
        v: Vector::from_arrays(&arrays)?,
    })
}

/// Named shapes in C form.
fn with_shapes<T>(
    shapes: &[(&str, &[usize])],
    f: impl FnOnce(*const *const c_char, *const *const i64, *const c_int, usize) -> c_int,
    then: impl FnOnce() -> T,
) -> Result<T> {
    let names = shapes.iter().map(|(n, _)| cstr(n)).collect::<Result<Vec<_>>>()?;
    let name_ptrs: Vec<*const c_char> = names.iter().map(|n| n.as_ptr()).collect();
    let dims: Vec<Vec<i64>> = shapes
        .iter()
        .map(|(_, s)| s.iter().map(|&d| d as i64).collect())
        .collect();
    let dim_ptrs: Vec<*const i64> = dims.iter().map(|d| d.as_ptr()).collect();
    let ndims: Vec<c_int> = dims.iter().map(|d| d.len() as c_int).collect();
    check(f(name_ptrs.as_ptr(), dim_ptrs.as_ptr(), ndims.as_ptr(), shapes.len()))?;
    Ok(then())
}

impl Executable {
    /// The graph in `text`; `path` (may be "") names it in errors and is the folder its
    /// params file is read from.
    pub fn parse(text: &str, path: &str, mode: ExecMode, device: Device) -> Result<Executable> {
        let t = cstr(text)?;
        let p = cstr(path)?;
        let pp = if path.is_empty() { ptr::null() } else { p.as_ptr() };
        let mut h = ptr::null_mut();
        check(unsafe { sys::kiln_executable_parse(&mut h, t.as_ptr(), pp, mode.to_c(), device.to_c()) })?;
        Ok(Executable {
            h,
            host: Mutex::new(Vec::new()),
        })
    }

    /// The `.kgraph` file at `path`.
    pub fn load(path: &str, mode: ExecMode, device: Device) -> Result<Executable> {
        let p = cstr(path)?;
        let mut h = ptr::null_mut();
        check(unsafe { sys::kiln_executable_load(&mut h, p.as_ptr(), mode.to_c(), device.to_c()) })?;
        Ok(Executable {
            h,
            host: Mutex::new(Vec::new()),
        })
    }

    pub fn mode(&self) -> ExecMode {
        let mut m = 0;
        unsafe { sys::kiln_executable_mode(&mut m, self.h) };
        match m {
            sys::KILN_EXEC_EAGER => ExecMode::Eager,
            sys::KILN_EXEC_LAZY => ExecMode::Lazy,
            _ => ExecMode::Compiled,
        }
    }

    fn names(
        &self,
        count: unsafe extern "C" fn(*mut usize, sys::kiln_executable) -> c_int,
        name: unsafe extern "C" fn(*mut *const c_char, sys::kiln_executable, usize) -> c_int,
    ) -> Vec<String> {
        let mut n = 0usize;
        unsafe { count(&mut n, self.h) };
        (0..n)
            .map(|i| {
                let mut s = ptr::null();
                unsafe { name(&mut s, self.h, i) };
                if s.is_null() {
                    String::new()
                } else {
                    unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned()
                }
            })
            .collect()
    }

    /// The graph's inputs in declaration order.
    pub fn input_names(&self) -> Vec<String> {
        self.names(sys::kiln_executable_num_inputs, sys::kiln_executable_input_name)
    }

    /// The graph's outputs in order.
    pub fn output_names(&self) -> Vec<String> {
        self.names(sys::kiln_executable_num_outputs, sys::kiln_executable_output_name)
    }

    /// Sets a parameter from float32 values, converted to its declared dtype.
    pub fn set_param(&self, name: &str, data: &[f32]) -> Result<()> {
        let n = cstr(name)?;
        check(unsafe { sys::kiln_executable_set_param(self.h, n.as_ptr(), data.as_ptr(), data.len()) })
    }

    /// Sets a parameter from bytes already in its declared dtype.
    pub fn set_param_bytes(&self, name: &str, data: &[u8], dtype: Dtype) -> Result<()> {
        let n = cstr(name)?;
        check(unsafe {
            sys::kiln_executable_set_param_typed(
                self.h,
                n.as_ptr(),
                data.as_ptr() as *const c_void,
                data.len(),
                dtype as i32,
            )
        })
    }

    /// Sets every parameter found in a safetensors-layout file.
    pub fn load_params(&self, path: &str) -> Result<()> {
        let p = cstr(path)?;
        check(unsafe { sys::kiln_executable_load_params(self.h, p.as_ptr()) })
    }

    pub fn has_param(&self, name: &str) -> bool {
        let Ok(n) = cstr(name) else { return false };
        let mut has = false;
        unsafe { sys::kiln_executable_has_param(&mut has, self.h, n.as_ptr()) == 0 && has }
    }

    /// Runs once with inputs in their declared dtypes; the outputs are evaluated.
    pub fn run(&self, inputs: &[(&str, &Array)], options: &RunOptions) -> Result<Vec<Array>> {
        let n = named(inputs)?;
        let mut out = Vector(ptr::null_mut());
        check(unsafe { sys::kiln_executable_run(&mut out.0, self.h, n.ptrs.as_ptr(), n.v.0, options.extent()) })?;
        Vector::arrays_of(out.0)
    }

    /// Runs once, converting inputs to their declared dtypes and outputs to float32.
    pub fn run_f32(&self, inputs: &[(&str, &Array)], options: &RunOptions) -> Result<Vec<Array>> {
        let n = named(inputs)?;
        let mut out = Vector(ptr::null_mut());
        check(unsafe { sys::kiln_executable_run_f32(&mut out.0, self.h, n.ptrs.as_ptr(), n.v.0, options.extent()) })?;
        Vector::arrays_of(out.0)
    }

    /// Bytes of the arena [`Executable::run_slots`] writes into.
    pub fn arena_bytes(&self) -> Result<usize> {
        let mut n = 0;
        check(unsafe { sys::kiln_executable_arena_bytes(&mut n, self.h) })?;
        Ok(n)
    }

    /// Where output i goes in the arena: (offset, capacity in bytes).
    pub fn output_slot(&self, i: usize) -> Result<(usize, usize)> {
        let (mut o, mut n) = (0, 0);
        check(unsafe { sys::kiln_executable_output_slot(&mut o, &mut n, self.h, i) })?;
        Ok((o, n))
    }

    /// Positional inputs (graph order, declared dtypes, symbols at their bounds, raw bytes);
    /// output i is written at its slot's offset in `arena`.
    pub fn run_slots(&self, inputs: &[&[u8]], arena: &mut [u8]) -> Result<()> {
        if arena.len() < self.arena_bytes()? {
            return Err(Error::new("[run_slots] the arena holds fewer bytes than arena_bytes()"));
        }
        let ptrs: Vec<*const c_void> = inputs.iter().map(|b| b.as_ptr() as *const c_void).collect();
        check(unsafe {
            sys::kiln_executable_run_slots(
                self.h,
                ptrs.as_ptr(),
                ptrs.len(),
                arena.as_mut_ptr() as *mut c_void,
                sys::KILN_NO_EXTENT,
            )
        })
    }

    /// Memory for an array of `shape` and `dtype` that runs read in place (owned by the
    /// executable, zeroed); returns the handle and the memory's address and length, which
    /// stay valid while the executable lives. Read or write it only between runs.
    pub fn host_handle(&self, shape: &[usize], dtype: Dtype) -> Result<(i32, *mut u8, usize)> {
        let bytes = shape.iter().try_fold(dtype.size(), |n, &d| n.checked_mul(d));
        let bytes = bytes.ok_or_else(|| Error::new("[host_handle] shape too large"))?;
        let layout = std::alloc::Layout::from_size_align(bytes.max(1), 64).map_err(|e| Error::new(e.to_string()))?;
        // SAFETY: a non-zero size; freed in drop with the same layout.
        let p = unsafe { std::alloc::alloc_zeroed(layout) };
        if p.is_null() {
            return Err(Error::new("[host_handle] out of memory"));
        }
        let dims: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
        let mut id = 0;
        let rc = unsafe {
            sys::kiln_executable_host_handle(
                &mut id,
                self.h,
                p as *mut c_void,
                dims.as_ptr(),
                dims.len() as c_int,
                dtype as i32,
            )
        };
        if let Err(e) = check(rc) {
            unsafe { std::alloc::dealloc(p, layout) };
            return Err(e);
        }
        self.host
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(HostMemory(p, bytes.max(1)));
        Ok((id, p, bytes))
    }

    /// A copy of `value` kept on the executable's device; returns its handle.
    pub fn device_handle(&self, value: &Array) -> Result<i32> {
        let mut id = 0;
        check(unsafe { sys::kiln_executable_device_handle(&mut id, self.h, value.h) })?;
        Ok(id)
    }

    pub fn write_handle(&self, handle: i32, value: &Array) -> Result<()> {
        check(unsafe { sys::kiln_executable_write_handle(self.h, handle, value.h) })
    }

    pub fn read_handle(&self, handle: i32) -> Result<Array> {
        make(|o| unsafe { sys::kiln_executable_read_handle(o, self.h, handle) })
    }

    /// Input `name` reads the handle on runs that do not pass it.
    pub fn bind_input(&self, name: &str, handle: i32) -> Result<()> {
        let n = cstr(name)?;
        check(unsafe { sys::kiln_executable_bind_input(self.h, n.as_ptr(), handle) })
    }

    pub fn unbind_input(&self, name: &str) -> Result<()> {
        let n = cstr(name)?;
        check(unsafe { sys::kiln_executable_unbind_input(self.h, n.as_ptr()) })
    }

    /// After each run, output `output` becomes the handle's value (recurrent state).
    pub fn feed(&self, output: usize, handle: i32) -> Result<()> {
        check(unsafe { sys::kiln_executable_feed(self.h, output, handle) })
    }

    pub fn clear_feeds(&self) -> Result<()> {
        check(unsafe { sys::kiln_executable_clear_feeds(self.h) })
    }

    /// Starts a run and returns at once (its inputs are checked now); [`Executable::sync`]
    /// collects it.
    pub fn commit(&self, inputs: &[(&str, &Array)], options: &RunOptions) -> Result<()> {
        let n = named(inputs)?;
        check(unsafe { sys::kiln_executable_commit(self.h, n.ptrs.as_ptr(), n.v.0, options.extent()) })
    }

    fn split(&self, out: Vector, runs: usize) -> Result<Vec<Vec<Array>>> {
        let mut flat = Vector::arrays_of(out.0)?;
        let per = if runs == 0 { 0 } else { flat.len() / runs };
        let mut res = Vec::with_capacity(runs);
        for _ in 0..runs {
            let rest = flat.split_off(per);
            res.push(flat);
            flat = rest;
        }
        Ok(res)
    }

    /// Waits for every committed run; their outputs in commit order. The first error of
    /// any run is returned after all have finished.
    pub fn sync(&self) -> Result<Vec<Vec<Array>>> {
        let mut out = Vector(ptr::null_mut());
        let mut runs = 0;
        check(unsafe { sys::kiln_executable_sync(&mut out.0, &mut runs, self.h) })?;
        self.split(out, runs)
    }

    /// Runs each input set (all with the same names), overlapping one set's preparation
    /// with the previous one's evaluation.
    pub fn run_pipelined(&self, sets: &[Vec<(&str, &Array)>], options: &RunOptions) -> Result<Vec<Vec<Array>>> {
        if sets.is_empty() {
            return Ok(Vec::new());
        }
        let named_sets = sets.iter().map(|s| named(s)).collect::<Result<Vec<_>>>()?;
        let vs: Vec<sys::kiln_vector_array> = named_sets.iter().map(|n| n.v.0).collect();
        let mut out = Vector(ptr::null_mut());
        check(unsafe {
            sys::kiln_executable_run_pipelined(
                &mut out.0,
                self.h,
                named_sets[0].ptrs.as_ptr(),
                vs.as_ptr(),
                vs.len(),
                options.extent(),
            )
        })?;
        self.split(out, sets.len())
    }

    /// Compiled mode: traces and compiles now what a first run with inputs of these shapes
    /// would (inputs not named: symbols at their bounds). Other modes: nothing to do.
    pub fn warm_compile(&self, shapes: &[(&str, &[usize])]) -> Result<()> {
        with_shapes(
            shapes,
            |n, s, d, k| unsafe { sys::kiln_executable_warm_compile(self.h, n, s, d, k) },
            || (),
        )
    }

    /// Why an active extent would fall back to the whole bucket for inputs of these shapes
    /// ("" when it would not).
    pub fn extent_blocker(&self, shapes: &[(&str, &[usize])]) -> Result<String> {
        let mut s: *mut c_char = ptr::null_mut();
        let sp = &mut s as *mut *mut c_char;
        with_shapes(
            shapes,
            |n, sh, d, k| unsafe { sys::kiln_executable_extent_blocker(sp, self.h, n, sh, d, k) },
            || {
                let text = unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned();
                unsafe { sys::kiln_string_free(s) };
                text
            },
        )
    }
}
