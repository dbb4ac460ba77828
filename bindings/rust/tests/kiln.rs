use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;

use kiln::{compile, compile1, compile2, random, Array, CompileOptions, Dtype, Function};

fn close(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() <= 1e-5 * (1.0 + y.abs()))
}

fn named(name: &str) -> CompileOptions {
    CompileOptions {
        name: name.to_string(),
        ..Default::default()
    }
}

#[test]
fn arrays_round_trip() {
    let a = Array::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).unwrap();
    assert_eq!(a.shape(), vec![2, 3]);
    assert_eq!(a.ndim(), 2);
    assert_eq!(a.size(), 6);
    assert_eq!(a.dtype(), Dtype::Float32);
    assert_eq!(a.dtype().name(), "float32");
    assert_eq!(Dtype::Float64.size(), 8);
    assert_eq!(a.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    assert_eq!(a.to_vec::<i64>().unwrap()[5], 6);

    fn round_trip<T: kiln::Element + PartialEq + std::fmt::Debug>(data: &[T], dtype: Dtype) {
        let a = Array::from_vec(data).unwrap();
        assert_eq!(a.dtype(), dtype);
        assert_eq!(a.to_vec::<T>().unwrap(), data);
    }
    round_trip(&[true, false, true], Dtype::Bool);
    round_trip(&[1u8, 255], Dtype::Uint8);
    round_trip(&[1u16, 65535], Dtype::Uint16);
    round_trip(&[1u32, 1 << 31], Dtype::Uint32);
    round_trip(&[1u64, 1 << 63], Dtype::Uint64);
    round_trip(&[-1i8, 127], Dtype::Int8);
    round_trip(&[-1i16, 32767], Dtype::Int16);
    round_trip(&[-1i32, 1 << 30], Dtype::Int32);
    round_trip(&[-1i64, 1 << 62], Dtype::Int64);
    round_trip(&[-1.5f64, 1e300], Dtype::Float64);

    let h = a.astype(Dtype::Float16).unwrap();
    assert_eq!(h.dtype(), Dtype::Float16);
    assert_eq!(h.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);

    let s = Array::scalar(2.5, Dtype::Float64).unwrap();
    assert_eq!(s.item::<f64>().unwrap(), 2.5);
    assert_eq!(s.shape(), Vec::<usize>::new());
    let i = Array::scalar_int(-7, Dtype::Int16).unwrap();
    assert_eq!(i.item::<i64>().unwrap(), -7);
    assert_eq!(i.to_string(), "array(-7, shape=(), dtype=int16)");
    let err = a.item::<f32>().unwrap_err();
    assert!(
        err.message()
            .contains("[item] item() needs an array of size 1, got shape (2,3)"),
        "{err}"
    );

    let err = Array::from_slice(&[1.0f32, 2.0, 3.0], &[2, 2]).unwrap_err();
    assert_eq!(err.message(), "[array] got 3 elements for shape (2,2) which holds 4");

    // Clones share the array; each handle frees itself.
    let b = a.clone();
    assert_eq!(a.id(), b.id());
    drop(a);
    assert_eq!(b.to_vec::<f32>().unwrap()[0], 1.0);
}

#[test]
fn ops_and_errors() {
    let a = Array::from_slice(&[0.0f32, 1.0, 2.0, 3.0, 4.0, 5.0], &[2, 3]).unwrap();
    let b = Array::from_slice(&[1.0f32, 0.0, 0.0, 1.0, 1.0, 1.0], &[3, 2]).unwrap();
    let c = a.matmul(&b).unwrap();
    assert!(close(&c.to_vec::<f32>().unwrap(), &[2.0, 3.0, 8.0, 9.0]));
    let err = a.matmul(&a).unwrap_err();
    assert!(err.message().contains("[matmul] inner dimensions differ"), "{err}");
    let as_dyn: Box<dyn std::error::Error> = Box::new(err.clone());
    assert_eq!(as_dyn.to_string(), err.message());

    let e = a.exp().unwrap().add(&a).unwrap();
    let want: Vec<f32> = (0..6).map(|i| (i as f32).exp() + i as f32).collect();
    assert!(close(&e.to_vec::<f32>().unwrap(), &want));
    let two = a.scalar_like(2.0).unwrap();
    assert!(close(
        &a.multiply(&two).unwrap().to_vec::<f32>().unwrap(),
        &[0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
    ));
    assert_eq!(
        a.less(&two).unwrap().to_vec::<bool>().unwrap(),
        vec![true, true, false, false, false, false]
    );
    let err = a.add(&b).unwrap_err();
    assert!(
        err.message()
            .contains("[add] shapes (2,3) and (3,2) cannot be broadcast together"),
        "{err}"
    );
    let err = a.bitwise_not().unwrap_err();
    assert!(err.message().starts_with("[bitwise_not]"), "{err}");

    assert!(close(
        &a.sum(&[1], false).unwrap().to_vec::<f32>().unwrap(),
        &[3.0, 12.0]
    ));
    assert_eq!(a.sum(&[], false).unwrap().item::<f32>().unwrap(), 15.0);
    assert_eq!(a.max(&[0], true).unwrap().shape(), vec![1, 3]);
    assert_eq!(a.mean(&[], false).unwrap().item::<f32>().unwrap(), 2.5);
    assert_eq!(a.argmax(1).unwrap().to_vec::<i32>().unwrap(), vec![2, 2]);
    let rows = a.softmax(&[]).unwrap().sum(&[-1], false).unwrap();
    assert!(close(&rows.to_vec::<f32>().unwrap(), &[1.0, 1.0]));
    let t = a.reshape(&[3, -1]).unwrap().transpose(&[]).unwrap();
    assert_eq!(t.shape(), vec![2, 3]);
    assert!(close(&t.to_vec::<f32>().unwrap(), &[0.0, 2.0, 4.0, 1.0, 3.0, 5.0]));
    let err = a.reshape(&[4, 2]).unwrap_err();
    assert_eq!(
        err.message(),
        "[reshape] cannot reshape array of size 6 into shape (4,2)"
    );
    let cat = Array::concatenate(&[&a, &a], 1).unwrap();
    assert_eq!(cat.shape(), vec![2, 6]);
    assert!(close(
        &a.slice(&[1, -2], &[2, 3]).unwrap().to_vec::<f32>().unwrap(),
        &[4.0, 5.0]
    ));
    let z = Array::zeros(&[2], Dtype::Int32).unwrap();
    let o = Array::ones(&[2], Dtype::Int32).unwrap();
    let w = Array::where_(&o.greater(&z).unwrap(), &o, &z).unwrap();
    assert_eq!(w.to_vec::<i32>().unwrap(), vec![1, 1]);
    assert_eq!(
        Array::full(&[2], 3.0, Dtype::Float64).unwrap().to_vec::<f64>().unwrap(),
        vec![3.0, 3.0]
    );
    assert_eq!(
        Array::arange(0.0, 3.0, 1.0, Dtype::Int64)
            .unwrap()
            .to_vec::<i64>()
            .unwrap(),
        vec![0, 1, 2]
    );
    assert_eq!(
        a.expand_dims(0).unwrap().broadcast_to(&[2, 2, 3]).unwrap().shape(),
        vec![2, 2, 3]
    );

    let lazy = a.sqrt().unwrap();
    assert!(!lazy.is_evaluated());
    kiln::eval(&[&lazy]).unwrap();
    assert!(lazy.is_evaluated());
    let later = a.square().unwrap();
    kiln::async_eval(&[&later]).unwrap();
    assert!(close(
        &later.to_vec::<f32>().unwrap(),
        &[0.0, 1.0, 4.0, 9.0, 16.0, 25.0]
    ));
    assert!(kiln::stats().kernels_launched > 0);
}

struct DropCounter(Arc<AtomicUsize>);
impl Drop for DropCounter {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn random_and_selection() {
    let key = random::key(42).unwrap();
    // MLX's split of key(42): the bits are MLX's and JAX's (docs/random.md).
    let keys = random::split(&key, 2).unwrap().to_vec::<u32>().unwrap();
    assert_eq!(keys, vec![2465931498, 3679230171, 255383827, 267815257]);
    assert_eq!(random::bits(&[3, 5], &key).unwrap().shape(), vec![3, 5]);
    let u = random::uniform(&[100], &key, Dtype::Float32, 2.0, 3.0)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    assert!(u.iter().all(|&x| (2.0..3.0).contains(&x)));
    assert_eq!(
        random::normal(&[4], &key, Dtype::Float64, 0.0, 1.0).unwrap().dtype(),
        Dtype::Float64
    );
    let p = Array::from_vec(&[0.0f32, 1.0, 1.0]).unwrap();
    assert_eq!(
        random::bernoulli(&p, &key).unwrap().to_vec::<i32>().unwrap(),
        vec![0, 1, 1]
    );
    let inf = f32::NEG_INFINITY;
    let logits = Array::from_slice(&[inf, 0.0, inf, 0.0, inf, inf], &[2, 3]).unwrap();
    assert_eq!(
        random::categorical(&logits, &key, -1).unwrap().to_vec::<i32>().unwrap(),
        vec![1, 0]
    );
    let a = Array::from_vec(&[3.0f32, 1.0, 2.0, 1.0]).unwrap();
    let (values, indices) = a.topk(2, -1).unwrap();
    assert_eq!(values.to_vec::<f32>().unwrap(), vec![3.0, 2.0]);
    assert_eq!(indices.to_vec::<i32>().unwrap(), vec![0, 2]);
    assert_eq!(a.sort(0).unwrap().to_vec::<f32>().unwrap(), vec![1.0, 1.0, 2.0, 3.0]);
    assert_eq!(a.argsort(0).unwrap().to_vec::<i32>().unwrap(), vec![1, 3, 2, 0]);
    assert_eq!(a.argpartition(-1, 0).unwrap().to_vec::<i32>().unwrap()[3], 0);
    assert_eq!(a.partition(0, 0).unwrap().to_vec::<f32>().unwrap()[0], 1.0);
    let err = a.topk(5, -1).unwrap_err();
    assert!(err.to_string().contains("[topk] k 5 is out of range"), "{}", err);
}

#[test]
fn compile_traces_once_and_releases_state() {
    let traces = Arc::new(AtomicUsize::new(0));
    let drops = Arc::new(AtomicUsize::new(0));
    let (t, guard) = (traces.clone(), DropCounter(drops.clone()));
    let f = compile1(
        move |x: &Array| {
            let _keep = &guard;
            t.fetch_add(1, Ordering::SeqCst);
            x.multiply(&x.scalar_like(2.0)?)?.add(&x.scalar_like(1.0)?)
        },
        &named("affine"),
    )
    .unwrap();
    let x3 = Array::from_vec(&[0.0f32, 1.0, 2.0]).unwrap();
    let x4 = Array::from_vec(&[0.0f32, 1.0, 2.0, 3.0]).unwrap();
    for _ in 0..3 {
        assert!(close(&f.call(&x3).unwrap().to_vec::<f32>().unwrap(), &[1.0, 3.0, 5.0]));
    }
    assert_eq!(traces.load(Ordering::SeqCst), 1);
    f.call(&x4).unwrap();
    assert_eq!(traces.load(Ordering::SeqCst), 2);
    let g = f.clone();
    drop(f);
    assert_eq!(drops.load(Ordering::SeqCst), 0);
    g.call(&x3).unwrap();
    drop(g);
    assert_eq!(
        drops.load(Ordering::SeqCst),
        1,
        "the closure's state is dropped exactly once"
    );

    // Shapeless: one trace for every length.
    let straces = Arc::new(AtomicUsize::new(0));
    let st = straces.clone();
    let neg = compile1(
        move |x: &Array| {
            st.fetch_add(1, Ordering::SeqCst);
            x.negative()
        },
        &CompileOptions {
            shapeless: true,
            name: "neg".into(),
        },
    )
    .unwrap();
    neg.call(&x3).unwrap();
    assert!(close(
        &neg.call(&x4).unwrap().to_vec::<f32>().unwrap(),
        &[0.0, -1.0, -2.0, -3.0]
    ));
    assert_eq!(straces.load(Ordering::SeqCst), 1);

    // Nesting: a compiled function calling another inside its trace.
    let inner = neg.clone();
    let outer = compile2(
        move |a: &Array, b: &Array| inner.call(&a.add(b)?)?.exp(),
        &named("outer"),
    )
    .unwrap();
    let want: Vec<f32> = [0.0f32, 2.0, 4.0].iter().map(|v| (-v).exp()).collect();
    assert!(close(&outer.call(&x3, &x3).unwrap().to_vec::<f32>().unwrap(), &want));
    let err = outer.0.call(&[&x3]).unwrap_err();
    assert_eq!(err.message(), "[outer] expected 2 inputs, got 1");

    // Many outputs; an uncompiled function; compiling a compiled function.
    let both = Function::new(|xs: &[Array]| Ok(vec![xs[0].clone(), xs[0].exp()?])).unwrap();
    assert_eq!(both.call(&[&x3]).unwrap().len(), 2);
    let twice = both.compile(&named("both")).unwrap().compile(&named("again")).unwrap();
    let outs = twice.call(&[&x4]).unwrap();
    assert_eq!(outs.len(), 2);
    assert_eq!(outs[1].shape(), vec![4]);
}

#[test]
fn errors_and_panics_in_traces() {
    let calls = Arc::new(AtomicUsize::new(0));
    let panic_next = Arc::new(AtomicBool::new(true));
    let (c, p) = (calls.clone(), panic_next.clone());
    let f = compile(
        move |xs: &[Array]| {
            c.fetch_add(1, Ordering::SeqCst);
            if p.load(Ordering::SeqCst) {
                panic!("flaky exploded");
            }
            Ok(vec![xs[0].sqrt()?])
        },
        &named("flaky"),
    )
    .unwrap();
    let x = Array::from_vec(&[4.0f32, 9.0]).unwrap();
    let err = f.call(&[&x]).unwrap_err();
    assert_eq!(err.message(), "kiln: panic in traced function: flaky exploded");
    // The failed trace cached nothing: the next call traces again, then replays.
    panic_next.store(false, Ordering::SeqCst);
    assert!(close(&f.call(&[&x]).unwrap()[0].to_vec::<f32>().unwrap(), &[2.0, 3.0]));
    f.call(&[&x]).unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 2);

    let mm = compile2(|a: &Array, b: &Array| a.matmul(b), &named("mm")).unwrap();
    let m = Array::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).unwrap();
    let err = mm.call(&m, &m).unwrap_err();
    assert!(err.message().contains("[matmul] inner dimensions differ"), "{err}");
    let custom = compile(|_: &[Array]| Err(kiln::Error::new("custom failure")), &named("custom")).unwrap();
    assert_eq!(custom.call(&[&x]).unwrap_err().message(), "custom failure");
}

// Several threads compile functions of their own and call a shared one, at once.
#[test]
fn threads_compile_and_call() {
    const THREADS: usize = 8;
    const ITERS: usize = 50;
    let traces = Arc::new(AtomicUsize::new(0));
    let t = traces.clone();
    let shared = compile1(
        move |x: &Array| {
            t.fetch_add(1, Ordering::SeqCst);
            x.tanh()?.add(x)
        },
        &named("shared"),
    )
    .unwrap();
    let barrier = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|g| {
            let shared = shared.clone();
            let barrier = barrier.clone();
            thread::spawn(move || {
                barrier.wait();
                let scale = (g + 1) as f64;
                let own = compile1(
                    move |x: &Array| x.multiply(&x.scalar_like(scale)?),
                    &CompileOptions {
                        shapeless: true,
                        name: format!("own{g}"),
                    },
                )
                .unwrap();
                for i in 0..ITERS {
                    let n = 2 + (g + i) % 3;
                    let data: Vec<f32> = (0..n).map(|j| j as f32 * 0.5).collect();
                    let x = Array::from_vec(&data).unwrap();
                    let z = own.call(&shared.call(&x).unwrap()).unwrap();
                    let got = z.to_vec::<f32>().unwrap();
                    let want: Vec<f32> = data.iter().map(|v| (v.tanh() + v) * scale as f32).collect();
                    assert!(close(&got, &want), "thread {g}: {got:?} != {want:?}");
                }
            })
        })
        .collect();
    drop(shared);
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(
        traces.load(Ordering::SeqCst),
        3,
        "one trace per shape, however many threads raced"
    );
}

// Ops added to kiln's registry reach Rust through build.rs, with no edit to the binding.
#[test]
fn registry_ops() {
    let x = Array::from_vec(&[-0.5f32, 0.0, 0.5]).unwrap();
    let y = Array::from_vec(&[0.5f32, 0.0, -1.0]).unwrap();
    assert!(close(&x.erfinv().unwrap().to_vec::<f32>().unwrap(), &[-0.47693628, 0.0, 0.47693628]));
    assert!(close(&x.softplus().unwrap().to_vec::<f32>().unwrap(), &[0.47407698, 0.69314718, 0.97407698]));
    assert!(close(&x.logaddexp(&y).unwrap().to_vec::<f32>().unwrap(), &[0.81326169, 0.69314718, 0.70141327]));
    let (unary, binary) = kiln::elementwise_op_names();
    assert!(unary.contains(&"erfinv") && unary.contains(&"softplus") && binary.contains(&"logaddexp"));
}
