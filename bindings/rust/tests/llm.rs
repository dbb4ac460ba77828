//! The language-model API on the default model (SmolLM2-135M-Instruct, Q4_1), which
//! scripts/setup fetches; every test here says SKIP on stderr and returns when it is absent.
use std::io::Write;
use std::sync::OnceLock;
use std::thread;

use kiln::llm::{
    self, Activations, ChatMessage, Device, GenerateOptions, LoadOptions, Model, Sampling, Session, StopReason,
};
use kiln::Array;

// From tests/llm/golden/SmolLM2-135M-Instruct.Q4_1.json: llama.cpp's ids for the prompt and its
// greedy continuation up to its first near tie, which test_llm_model checks kiln's C++ model against.
const FRANCE_PROMPT: [i32; 5] = [504, 3575, 282, 4649, 314]; // "The capital of France is"
const FRANCE_GREEDY: [i32; 5] = [7042, 30, 198, 198, 504];

/// The default model, loaded once for every test, or None (after saying so) when it is absent.
fn model() -> Option<&'static Model> {
    static MODEL: OnceLock<Option<Model>> = OnceLock::new();
    let m = MODEL.get_or_init(|| {
        let path = llm::default_model_path().unwrap();
        path.exists().then(|| Model::load(&path).unwrap())
    });
    if m.is_none() {
        // Straight to stderr: the test harness captures eprintln!.
        let path = llm::default_model_path().unwrap();
        let _ = writeln!(
            std::io::stderr(),
            "SKIP: the default model is not at {} (scripts/setup fetches it)",
            path.display()
        );
    }
    m.as_ref()
}

fn greedy(n: usize) -> GenerateOptions {
    GenerateOptions {
        max_tokens: n,
        sampling: Sampling::greedy(),
        ..Default::default()
    }
}

/// The index of the largest entry of each row of [rows, vocab] (or [vocab]) logits.
fn argmax_rows(logits: &Array) -> Vec<i32> {
    logits.argmax(-1).unwrap().to_vec::<i32>().unwrap()
}

/// Appends the prompt, then n greedy tokens one step at a time.
fn decode_greedy(m: &Model, prompt: &[i32], n: usize) -> Vec<i32> {
    let mut s = m.session().unwrap();
    let mut logits = s.append(prompt).unwrap();
    let mut out = Vec::new();
    while out.len() < n {
        let next = argmax_rows(&logits)[0];
        out.push(next);
        logits = s.append(&[next]).unwrap();
    }
    out
}

// A tiny Mistral checkpoint without a tokenizer (tests/llm/golden/tiny, make_tiny_models.py;
// no download): its sliding window comes through, steps take token ids, tokenizing fails.
#[test]
fn tiny_model_without_tokenizer() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/llm/golden/tiny/mistral-f16");
    let m = Model::load(dir).unwrap();
    let info = m.info();
    assert_eq!((info.sliding_window, info.n_layers, info.vocab_size, info.bos), (5, 2, 128, None));
    let mut s = m.session().unwrap();
    assert_eq!(s.append(&[16, 32, 97, 56, 52, 14, 82]).unwrap().shape(), vec![128]);
    let err = m.tokenize("hi", false, false).unwrap_err();
    assert!(err.to_string().contains("has no tokenizer"), "{err}");
}

const TINY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/llm/golden/tiny/");

fn load_tiny(name: &str, options: &LoadOptions) -> kiln::Result<Model> {
    Model::load_with(format!("{TINY}{name}"), options)
}

/// Every position's logits of 16 tokens through a fresh session of m.
fn tiny_logits(m: &Model) -> Vec<f32> {
    let mut s = m.session().unwrap();
    let ids = [16, 32, 97, 56, 52, 14, 82, 77, 33, 100, 27, 111, 4, 43, 100, 16];
    s.append_all(&ids).unwrap().to_vec::<f32>().unwrap()
}

/// The largest |a - b| over rows of `vocab`, each relative to its row's largest |b|.
fn worst_relative(a: &[f32], b: &[f32], vocab: usize) -> f64 {
    assert_eq!(a.len(), b.len());
    let mut worst = 0f64;
    for (ra, rb) in a.chunks(vocab).zip(b.chunks(vocab)) {
        let top = rb.iter().fold(0f64, |m, &v| m.max(f64::from(v).abs()));
        for (&x, &y) in ra.iter().zip(rb) {
            worst = worst.max((f64::from(x) - f64::from(y)).abs() / top);
        }
    }
    worst
}

// Tensor parallelism on the CPU's threads (docs/distributed.md): tiny checkpoints split over 2
// ranks give every position's logits within 1e-4 of the row's largest of one rank's (the bound
// of tests/llm/test_tensor_parallel.cpp: the row-parallel sums add in another order).
#[test]
fn tensor_parallel_equals_one_rank() {
    for name in ["llama-bf16", "qwen2-bf16", "mistral-f16"] {
        let one = load_tiny(name, &LoadOptions::default()).unwrap();
        let two = load_tiny(
            name,
            &LoadOptions {
                tensor_parallel: 2,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(
            (one.info().tensor_parallel, two.info().tensor_parallel),
            (1, 2),
            "{name}"
        );
        assert_eq!(two.info().n_heads, 4, "{name}: the whole model's shape");
        let (want, got) = (tiny_logits(&one), tiny_logits(&two));
        assert_eq!(got.len(), 16 * 128);
        let worst = worst_relative(&got, &want, 128);
        eprintln!("{name} on 2 ranks: largest difference {worst:.2e} of the row's largest logit");
        assert!(worst <= 1e-4, "{name} on 2 ranks: {worst:.2e}");
    }
}

// The activations reach the model, and bad load options fail saying what is wrong.
#[test]
fn load_options() {
    let with = |activations| LoadOptions {
        activations,
        ..Default::default()
    };
    let exact = load_tiny("llama-mlx-4bit", &with(Activations::Exact)).unwrap();
    let int8 = load_tiny("llama-mlx-4bit", &with(Activations::Int8)).unwrap();
    assert_eq!(
        (exact.info().activations, int8.info().activations),
        (Activations::Exact, Activations::Int8)
    );
    // int8 codes move a quantized model's logits off the exact ones, a little.
    let moved = worst_relative(&tiny_logits(&int8), &tiny_logits(&exact), 128);
    assert!(moved > 0.0 && moved < 0.1, "int8 against exact: {moved:.2e}");

    let fails = |options: LoadOptions, want: &str| {
        let err = load_tiny("llama-bf16", &options).err().unwrap();
        assert!(err.message().contains(want), "{err}");
    };
    let ranks = |tensor_parallel| LoadOptions {
        tensor_parallel,
        ..Default::default()
    };
    fails(ranks(0), "[llm] tensor parallelism needs 1 rank or more, not 0");
    fails(
        ranks(3),
        "llama-bf16: tensor parallelism over 3 ranks: n_heads (llama.attention.head_count) = 4 does not divide over 3 ranks",
    );
    fails(
        ranks(1 << 40),
        "[kiln_llm_model_load_with] tensor_parallel 1099511627776 is out of range",
    );
    // 64 ranks from cuda:0: more than any machine here has.
    fails(
        LoadOptions {
            device: Device::Cuda(0),
            tensor_parallel: 64,
            ..Default::default()
        },
        "[llm] tensor parallelism over 64 ranks from cuda:0 needs CUDA devices cuda:0 to cuda:63; ",
    );
}

#[test]
fn model_info_and_tokens() {
    let Some(m) = model() else { return };
    let info = m.info();
    // SmolLM2-135M's config.json: 30 layers of 576, 9 heads of 64, 3 kv heads, 1536 hidden,
    // rope_theta 100000, rms_norm_eps 1e-5, tied embeddings.
    assert_eq!(
        (
            info.vocab_size,
            info.n_layers,
            info.d_model,
            info.n_heads,
            info.n_kv_heads,
            info.head_dim,
            info.ffn_dim
        ),
        (49152, 30, 576, 9, 3, 64, 1536)
    );
    assert_eq!(
        (info.rope_dims, info.rope_base, info.rope_scale, info.rope_traditional),
        (64, 100000.0, 1.0, true)
    );
    assert_eq!(
        (info.norm_eps, info.qkv_bias, info.qk_norm, info.tied_embeddings),
        (1e-5, false, false, true)
    );
    assert_eq!(
        (info.bos, info.eos, info.eot, info.context_length, info.sliding_window),
        (Some(1), Some(2), Some(2), 8192, 0)
    );
    assert!(info.weight_bytes > 0);
    assert_eq!(info.tensor_parallel, 1);
    assert_ne!(info.activations, Activations::Default, "resolved");

    let ids = m.tokenize("The capital of France is", false, false).unwrap();
    assert_eq!(ids, FRANCE_PROMPT, "llama.cpp's ids");
    assert_eq!(m.detokenize(&ids).unwrap(), "The capital of France is");
    let prompt = m
        .chat_prompt(&[ChatMessage {
            role: "user",
            content: "What is a kiln?",
        }])
        .unwrap();
    assert!(
        prompt.contains("<|im_start|>user\nWhat is a kiln?<|im_end|>\n<|im_start|>assistant\n"),
        "{prompt}"
    );
    let end = m.tokenize("<|im_end|>", false, true).unwrap();
    assert_eq!(end, vec![info.eot.unwrap()]);
    assert!(m.is_end_of_generation(end[0]) && !m.is_end_of_generation(ids[0]));
    assert!(
        m.tokenize("<|im_end|>", false, false).unwrap().len() > 1,
        "without parse_special it is text"
    );
    let err = m.tokenize("a\0b", false, false).unwrap_err();
    assert_eq!(err.message(), "[kiln_llm_tokenize] the text contains a NUL byte");
    assert!(m.detokenize(&[49152]).unwrap_err().message().contains("49152"));
}

#[test]
fn model_tensors() {
    let Some(m) = model() else { return };
    let q = m.tensor("blk.0.attn_q.weight").unwrap();
    assert_eq!((q.group_size, q.bits, q.w.dtype()), (32, 4, kiln::Dtype::Uint32));
    assert_eq!(q.w.shape(), vec![576, 576 * 4 / 32]);
    assert_eq!(q.scales.as_ref().unwrap().shape(), vec![576, 18]);
    let norm = m.tensor("output_norm.weight").unwrap();
    assert!(norm.scales.is_none() && norm.biases.is_none() && norm.bits == 0);
    assert_eq!((norm.w.shape(), norm.w.dtype()), (vec![576], kiln::Dtype::Float32));
    assert!(m.has_tensor("token_embd.weight") && !m.has_tensor("output.weight"));
    let err = m.tensor("blk.99.attn_q.weight").unwrap_err();
    assert!(err.message().contains("blk.99.attn_q.weight"), "{err}");
}

/// Greedy generation gives llama.cpp's tokens, and three ways of decoding through the C API
/// agree: generate, one session stepped token by token, and batched steps of sessions at
/// different positions.
#[test]
fn greedy_generation() {
    let Some(m) = model() else { return };
    let mut s = m.session().unwrap();
    let mut streamed = String::new();
    let r = s
        .generate(&FRANCE_PROMPT, &greedy(8), |_, text| {
            streamed.push_str(text);
            true
        })
        .unwrap();
    assert_eq!(r.tokens[..5], FRANCE_GREEDY, "llama.cpp's greedy tokens");
    assert_eq!(
        (r.stop_reason, r.prompt_tokens, r.tokens.len()),
        (StopReason::MaxTokens, 5, 8)
    );
    assert_eq!(streamed, r.text);
    assert_eq!(r.text, m.detokenize(&r.tokens).unwrap());
    assert_eq!(s.position(), FRANCE_PROMPT.len() + 7);
    assert_eq!(decode_greedy(m, &FRANCE_PROMPT, 8), r.tokens);

    // Session i starts i tokens further into the sequence; each batched step feeds every
    // session its next token and must predict the one after.
    let seq: Vec<i32> = FRANCE_PROMPT.iter().chain(&r.tokens).copied().collect();
    let p = FRANCE_PROMPT.len();
    let mut sessions: Vec<Session> = (0..3).map(|_| m.session().unwrap()).collect();
    for (i, s) in sessions.iter_mut().enumerate() {
        s.append(&seq[..p + i]).unwrap();
    }
    for step in 0..4 {
        let tokens: Vec<i32> = (0..3).map(|i| seq[p + i + step]).collect();
        let mut refs: Vec<&mut Session> = sessions.iter_mut().collect();
        let got = argmax_rows(&llm::step(&mut refs, &tokens).unwrap());
        let want: Vec<i32> = (0..3).map(|i| seq[p + i + step + 1]).collect();
        assert_eq!(got, want, "step {step}");
    }

    // One step over the whole sequence: each position's top token is the next one.
    let all = m.session().unwrap().append_all(&seq).unwrap();
    assert_eq!(all.shape(), vec![seq.len(), 49152]);
    assert_eq!(argmax_rows(&all)[p - 1..seq.len() - 1], r.tokens[..]);
}

/// Several threads generate at once on one model, each with its own session, and get what one
/// thread gets alone.
#[test]
fn concurrent_generation() {
    let Some(m) = model() else { return };
    let chat = m
        .chat_prompt(&[ChatMessage {
            role: "user",
            content: "Name a color.",
        }])
        .unwrap();
    let prompt = m.tokenize(&chat, false, true).unwrap();
    let alone = decode_greedy(m, &prompt, 6);
    let results: Vec<Vec<i32>> = thread::scope(|scope| {
        let workers: Vec<_> = (0..4)
            .map(|_| {
                scope.spawn(|| {
                    m.session()
                        .unwrap()
                        .generate(&prompt, &greedy(6), |_, _| true)
                        .unwrap()
                        .tokens
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    for (i, tokens) in results.iter().enumerate() {
        // A stop token may end a generation early; up to there the tokens agree.
        assert!(
            !tokens.is_empty() && tokens[..] == alone[..tokens.len()],
            "thread {i}: {tokens:?}, alone {alone:?}"
        );
    }
    // A session moves to another thread; the model is shared by reference.
    let mut s = m.session().unwrap();
    let moved = thread::spawn(move || s.append(&prompt).map(|l| argmax_rows(&l)[0]))
        .join()
        .unwrap();
    assert_eq!(moved.unwrap(), alone[0]);
}

#[test]
fn generate_stops() {
    let Some(m) = model() else { return };
    let mut s = m.session().unwrap();
    let mut o = greedy(8);
    o.stop_tokens = vec![FRANCE_GREEDY[2]]; // the first "\n"
    let r = s.generate(&FRANCE_PROMPT, &o, |_, _| true).unwrap();
    assert_eq!(
        (r.stop_reason, &r.tokens[..]),
        (StopReason::StopToken, &FRANCE_GREEDY[..2])
    );
    assert_eq!(s.position(), FRANCE_PROMPT.len() + 2);

    s.clear().unwrap();
    assert_eq!(s.position(), 0);
    let mut calls = 0;
    let r = s
        .generate(&FRANCE_PROMPT, &greedy(8), |_, _| {
            calls += 1;
            calls < 3
        })
        .unwrap();
    assert_eq!(
        (r.stop_reason, calls, &r.tokens[..]),
        (StopReason::Callback, 3, &FRANCE_GREEDY[..3])
    );

    // A panic in the callback stops generation and comes out of generate.
    s.truncate(0).unwrap();
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = s.generate(&FRANCE_PROMPT, &greedy(8), |_, _| panic!("from the callback"));
    }));
    assert_eq!(*caught.unwrap_err().downcast::<&str>().unwrap(), "from the callback");
    assert_eq!(s.position(), FRANCE_PROMPT.len());
}

#[test]
fn language_model_errors() {
    let err = Model::load("/nonexistent/dir/model.gguf").err().unwrap();
    assert!(err.message().contains("/nonexistent/dir/model.gguf"), "{err}");
    let err = Model::load("a\0b").err().unwrap();
    assert_eq!(err.message(), "[kiln_llm_model_load_with] the path contains a NUL byte");

    let Some(m) = model() else { return };
    let mut s = m.session().unwrap();
    let err = s.append(&[49152]).unwrap_err();
    assert!(
        err.message()
            .contains("token id 49152 is outside the vocabulary (49152 tokens)"),
        "{err}"
    );
    assert!(s
        .truncate(5)
        .unwrap_err()
        .message()
        .contains("cannot truncate a session of 0 tokens to 5"));
    assert!(s
        .append(&[])
        .unwrap_err()
        .message()
        .contains("append needs at least one token"));
    assert!(s
        .generate(&[], &greedy(4), |_, _| true)
        .unwrap_err()
        .message()
        .contains("the prompt has no tokens"));
    let err = llm::step(&mut [&mut s], &[1, 2]).unwrap_err();
    assert_eq!(err.message(), "[kiln_llm_step] 2 tokens for 1 sessions");
    assert!(llm::step(&mut [], &[])
        .unwrap_err()
        .message()
        .contains("a step needs at least one session"));
}
