//! The Executable from Rust (graphs from text and files, modes, parameters, runs, slots,
//! handles and feeds, commits, pipelined runs, the active extent, warm-up compiles, threads
//! sharing one executable), compile3, and panics in traced functions kept off stderr.

use std::sync::Arc;
use std::thread;

use kiln::llm::Device;
use kiln::{compile3, Array, CompileOptions, Dtype, ExecMode, Executable, RunOptions};

// Graphs shared with the C and Go tests.
fn graph(name: &str) -> String {
    format!("{}/../../tests/runtime/graphs/{name}", env!("CARGO_MANIFEST_DIR"))
}

const MODES: [ExecMode; 3] = [ExecMode::Eager, ExecMode::Lazy, ExecMode::Compiled];
const NONE: RunOptions = RunOptions { active_extent: None };

fn affine(mode: ExecMode) -> Executable {
    let e = Executable::load(&graph("affine.kgraph"), mode, Device::Cpu).unwrap();
    e.set_param("w", &[1.0, 2.0, 3.0]).unwrap();
    e
}

fn rows(n: usize, start: f32) -> Array {
    let v: Vec<f32> = (0..n * 3).map(|i| start + i as f32).collect();
    Array::from_slice(&v, &[n, 3]).unwrap()
}

fn total(n: usize, start: f32) -> f32 {
    (0..n * 3).map(|k| (start + k as f32) * (1 + k % 3) as f32 + 1.0).sum()
}

fn err_contains<T>(r: kiln::Result<T>, text: &str) {
    match r {
        Ok(_) => panic!("expected an error containing {text:?}"),
        Err(e) => assert!(
            e.message().contains(text),
            "{:?} does not contain {text:?}",
            e.message()
        ),
    }
}

#[test]
fn modes_runs_and_names() {
    for m in MODES {
        let e = affine(m);
        assert_eq!(e.mode(), m);
        assert_eq!(e.input_names(), vec!["x"]);
        assert_eq!(e.output_names(), vec!["y", "total"]);
        assert!(e.has_param("w"));
        let x = rows(2, 0.0);
        let out = e.run(&[("x", &x)], &NONE).unwrap();
        assert_eq!(out[1].to_vec::<f32>().unwrap()[0], total(2, 0.0));
        let out = e.run(&[("x", &x)], &RunOptions { active_extent: Some(1) }).unwrap();
        assert_eq!(out[0].shape(), vec![1, 3]);
        let x64 = Array::from_slice(&[1.0f64, 1.0, 1.0], &[1, 3]).unwrap();
        err_contains(
            e.run(&[("x", &x64)], &NONE),
            "[run] input 'x' is float32, given float64",
        );
        let out = e.run_f32(&[("x", &x64)], &NONE).unwrap();
        assert_eq!(out[0].to_vec::<f32>().unwrap()[2], 4.0);
        assert_eq!(out[1].dtype(), Dtype::Float32);
        e.warm_compile(&[]).unwrap();
        e.warm_compile(&[("x", &[2, 3])]).unwrap();
        err_contains(
            e.warm_compile(&[("nope", &[2])]),
            "[warm_compile] the graph has no input 'nope'",
        );
        assert!(e.extent_blocker(&[("x", &[2, 3])]).unwrap().contains("total"));
    }
}

#[test]
fn slots_params_and_errors() {
    let e = affine(ExecMode::Compiled);
    let mut arena = vec![0u8; e.arena_bytes().unwrap()];
    let x: Vec<u8> = (0..24).flat_map(|_| 1.0f32.to_le_bytes()).collect();
    e.run_slots(&[&x], &mut arena).unwrap();
    let (off, n) = e.output_slot(1).unwrap();
    assert_eq!(n, 4);
    assert_eq!(f32::from_le_bytes(arena[off..off + 4].try_into().unwrap()), 72.0);
    err_contains(e.run_slots(&[&x], &mut arena[..8]), "fewer bytes");
    err_contains(
        e.set_param("w", &[1.0, 2.0, 3.0, 4.0]),
        "[set_param] parameter 'w' (3) holds 3 values, given 4",
    );
    err_contains(
        e.set_param_bytes("w", &[0u8; 12], Dtype::Int32),
        "is float32, given int32",
    );
    e.set_param_bytes("w", &x[..12], Dtype::Float32).unwrap();
    let r = rows(2, 0.0);
    err_contains(e.run(&[("y", &r)], &NONE), "[run] the graph has no input 'y'");
    err_contains(
        e.run(&[("x", &r)], &RunOptions { active_extent: Some(3) }),
        "active extent 3 is outside the bucket of 2 rows",
    );
    err_contains(
        Executable::parse(
            "kgraph 1\ngraph g {\n  output y\n}\n",
            "bad.kgraph",
            ExecMode::Lazy,
            Device::Cpu,
        ),
        "bad.kgraph:3:3: [verify] output 'y' is not defined",
    );
    err_contains(
        Executable::load("/nonexistent/g.kgraph", ExecMode::Lazy, Device::Cpu),
        "/nonexistent/g.kgraph",
    );
    err_contains(
        Executable::load(&graph("affine.kgraph"), ExecMode::Lazy, Device::Cuda(99)),
        "[executable] device cuda:99",
    );
}

#[test]
fn handles_feeds_and_commits() {
    let ones = Array::from_slice(&[1.0f32, 1.0, 1.0], &[3]).unwrap();
    for m in MODES {
        let e = Executable::load(&graph("accumulator.kgraph"), m, Device::Cpu).unwrap();
        let (host, p, n) = e.host_handle(&[3], Dtype::Float32).unwrap();
        assert_eq!(n, 12);
        e.bind_input("s", host).unwrap();
        e.feed(0, host).unwrap();
        for _ in 0..4 {
            e.run(&[("x", &ones)], &NONE).unwrap();
        }
        // SAFETY: no run is in flight; p holds 3 float32 values.
        assert_eq!(unsafe { *(p as *const f32) }, 1.875, "{m:?}");
        let zero = Array::from_slice(&[0.0f32, 0.0, 0.0], &[3]).unwrap();
        let dev = e.device_handle(&zero).unwrap();
        e.clear_feeds().unwrap();
        e.bind_input("s", dev).unwrap();
        e.feed(0, dev).unwrap();
        for _ in 0..4 {
            e.commit(&[("x", &ones)], &NONE).unwrap();
        }
        let runs = e.sync().unwrap();
        assert_eq!(runs.len(), 4);
        assert_eq!(runs[3][0].to_vec::<f32>().unwrap()[0], 1.875);
        assert_eq!(e.read_handle(dev).unwrap().to_vec::<f32>().unwrap()[0], 1.875);
        e.write_handle(dev, &ones).unwrap();
        let set = vec![("x", &ones)];
        let piped = e.run_pipelined(&[set.clone(), set.clone(), set], &NONE).unwrap();
        assert_eq!(piped.len(), 3);
        assert_eq!(piped[2][0].to_vec::<f32>().unwrap()[0], 1.875);
        let wrong = Array::scalar_int(1, Dtype::Int32).unwrap();
        err_contains(
            e.commit(&[("x", &wrong)], &NONE),
            "[run] input 'x' is float32, given int32",
        );
        e.unbind_input("s").unwrap();
        err_contains(e.run(&[("x", &ones)], &NONE), "[run] input 's' is missing");
        err_contains(e.read_handle(9), "[read_handle] no handle 9");
    }
}

#[test]
fn threads_share_one_executable() {
    for m in MODES {
        let e = Arc::new(affine(m));
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let e = e.clone();
                thread::spawn(move || {
                    for i in 0..20 {
                        let (n, start) = (1 + (t + i) % 8, i as f32);
                        let x = rows(n, start);
                        let out = e.run(&[("x", &x)], &NONE).unwrap();
                        assert_eq!(out[1].to_vec::<f32>().unwrap()[0], total(n, start));
                        e.commit(&[("x", &x)], &NONE).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(e.sync().unwrap().len(), 160, "{m:?}");
    }
}

#[test]
fn compile3_calls_a_function_of_three_arrays() {
    let f = compile3(|a, b, c| a.add(&b.multiply(c)?), &CompileOptions::default()).unwrap();
    let a = Array::from_slice(&[1.0f32, 2.0], &[2]).unwrap();
    let b = Array::from_slice(&[3.0f32, 4.0], &[2]).unwrap();
    let c = Array::from_slice(&[5.0f32, 6.0], &[2]).unwrap();
    assert_eq!(f.call(&a, &b, &c).unwrap().to_vec::<f32>().unwrap(), vec![16.0, 26.0]);
    let g = f.clone();
    assert_eq!(g.call(&c, &b, &a).unwrap().to_vec::<f32>().unwrap(), vec![8.0, 14.0]);
}

#[test]
fn a_panic_in_a_traced_function_is_returned_not_printed() {
    // Run in a child process so that its stderr can be read.
    if std::env::var_os("KILN_PANIC_CHILD").is_some() {
        let f = kiln::compile(
            |_: &[Array]| -> kiln::Result<Vec<Array>> { panic!("quiet explosion") },
            &CompileOptions::default(),
        )
        .unwrap();
        let x = Array::from_slice(&[1.0f32], &[1]).unwrap();
        let err = f.call(&[&x]).err().expect("the panic is the call's error");
        assert_eq!(err.message(), "kiln: panic in traced function: quiet explosion");
        // A panic outside a traced function still reaches the hook.
        let _ = std::panic::catch_unwind(|| panic!("loud explosion"));
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "a_panic_in_a_traced_function_is_returned_not_printed",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("KILN_PANIC_CHILD", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed: {stderr}");
    assert!(
        !stderr.contains("quiet explosion"),
        "the traced panic was printed: {stderr}"
    );
    assert!(
        stderr.contains("loud explosion"),
        "other panics must still be printed: {stderr}"
    );
}
