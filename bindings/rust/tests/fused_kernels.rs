// The fused-kernel policy, in a test binary of its own: the policy and the counters it is
// checked by are process-wide, and the tests of one binary run on several threads at once.
use kiln::{compile1, fused_kernels, set_fused_kernels, stats, Array, CompileOptions, FusedKernels};

#[test]
fn fused_kernels_policy_picks_the_tier() {
    let saved = fused_kernels();
    let x = Array::from_slice(&[0.0f32, 1.0, 2.0], &[3]).unwrap();
    let want: Vec<f32> = [0.0f32, 1.0, 2.0].iter().map(|v| v.exp() * 3.0 + 1.0).collect();
    for policy in [FusedKernels::Off, FusedKernels::Wait] {
        set_fused_kernels(policy).unwrap();
        assert_eq!(fused_kernels(), policy);
        let f = compile1(
            |x: &Array| x.exp()?.multiply(&x.scalar_like(3.0)?)?.add(&x.scalar_like(1.0)?),
            &CompileOptions { name: format!("affine_{policy:?}"), ..Default::default() },
        )
        .unwrap();
        let before = stats();
        for _ in 0..3 {
            let got: Vec<f32> = f.call(&x).unwrap().to_vec().unwrap();
            assert!(got.iter().zip(&want).all(|(g, w)| (g - w).abs() <= 1e-5 * (1.0 + w.abs())), "{got:?}");
        }
        let s = stats();
        let counts = (s.interim_calls - before.interim_calls, s.fused_calls - before.fused_calls);
        // off: every call interprets the fused region; wait: every call runs its generated kernel.
        let (interim, fused) = if policy == FusedKernels::Off { (3, 0) } else { (0, 3) };
        assert_eq!(counts, (interim, fused), "{policy:?}: interim and fused calls");
    }
    set_fused_kernels(saved).unwrap();
    assert_eq!(fused_kernels(), saved);
}
