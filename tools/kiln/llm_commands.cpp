// kiln generate, chat and bench-llm: language models from the command line.
#include "llm_commands.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include <kiln/kiln.h>
#include <kiln/llm.h>

#include "llm_sessions_bench.h"

namespace fs = std::filesystem;
using namespace kiln;
using namespace kiln::llm;
using kiln::cli::SessionsSpeed;

namespace {

struct LlmOptions {
  std::string model;
  std::string prompt = "Write a haiku about a kiln.";
  std::string system;
  bool raw = false;  // the prompt as it is, no chat template
  GenerateOptions gen;
  LoadOptions load;
  int prompt_tokens = 512, gen_tokens = 128, repetitions = 3;  // bench-llm
  std::vector<int> batches, threads;  // bench-llm --batch, --threads
  bool json = false;
};

double to_double(const std::string& flag, const std::string& v) {
  try {
    size_t used = 0;
    double x = std::stod(v, &used);
    if (used == v.size()) return x;
  } catch (...) {
  }
  fail("kiln", flag, " needs a number, got '", v, "'");
}

int to_count(const std::string& flag, const std::string& v) {
  double x = to_double(flag, v);
  if (x < 0 || x != static_cast<double>(static_cast<int>(x)))
    fail("kiln", flag, " needs a whole number >= 0, got '", v, "'");
  return static_cast<int>(x);
}

Device parse_device(const std::string& d) {
  if (d == "cpu") return Device::cpu();
  if (d == "cuda") return Device::cuda(0);
  if (d.rfind("cuda:", 0) == 0) return Device::cuda(to_count("--device", d.substr(5)));
  fail("kiln", "unknown device '", d, "' (cpu, cuda or cuda:N)");
}

/* "1,4,16": counts of one or more. */
std::vector<int> to_counts(const std::string& flag, const std::string& v) {
  std::vector<int> out;
  size_t at = 0;
  while (at <= v.size()) {
    const size_t comma = std::min(v.find(',', at), v.size());
    const int n = to_count(flag, v.substr(at, comma - at));
    if (n < 1) fail("kiln", flag, " takes counts of 1 or more, got ", n);
    out.push_back(n);
    at = comma + 1;
  }
  return out;
}

QmmActivations parse_activations(const std::string& a) {
  if (auto mode = qmm_activations_named(a)) return *mode;
  fail("kiln", "unknown --activations '", a, "' (exact, int8 or int16)");
}

LlmOptions parse(int argc, char** argv) {
  LlmOptions o;
  SamplerOptions& s = o.gen.sampling;
  bool device_given = false;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) fail("kiln", a, " needs a value");
      return argv[++i];
    };
    if (a == "--prompt" || a == "-p")
      o.prompt = value();
    else if (a == "--system")
      o.system = value();
    else if (a == "--raw")
      o.raw = true;
    else if (a == "-n" || a == "--max-tokens")
      o.gen.max_tokens = o.gen_tokens = to_count(a, value());
    else if (a == "--temp")
      s.temperature = static_cast<float>(to_double(a, value()));
    else if (a == "--top-k")
      s.top_k = to_count(a, value());
    else if (a == "--top-p")
      s.top_p = static_cast<float>(to_double(a, value()));
    else if (a == "--min-p")
      s.min_p = static_cast<float>(to_double(a, value()));
    else if (a == "--repeat-penalty")
      s.repetition_penalty = static_cast<float>(to_double(a, value()));
    else if (a == "--seed")
      s.seed = static_cast<uint64_t>(to_count(a, value()));
    else if (a == "--device")
      o.load.device = parse_device(value()), device_given = true;
    else if (a == "--dtype")
      o.load.dtype = dtype_from_name(value());
    else if (a == "--activations")
      o.load.activations = parse_activations(value());
    else if (a == "--tp")
      o.load.tensor_parallel = std::max(1, to_count(a, value()));
    else if (a == "--pp")
      o.prompt_tokens = to_count(a, value());
    else if (a == "--tg")
      o.gen_tokens = to_count(a, value());
    else if (a == "-r" || a == "--repetitions")
      o.repetitions = std::max(1, to_count(a, value()));
    else if (a == "--batch")
      o.batches = to_counts(a, value());
    else if (a == "--threads")
      o.threads = to_counts(a, value());
    else if (a == "--json")
      o.json = true;
    else if (!a.empty() && a[0] == '-')
      fail("kiln", "unknown option '", a, "'");
    else if (o.model.empty())
      o.model = a;
    else
      fail("kiln", "more than one model given ('", o.model, "' and '", a, "')");
  }
  if (o.load.tensor_parallel > 1 && !device_given)
    o.load.device = Device::cuda(0);  // --tp is for GPUs; --device cpu to try it on threads
  if (o.model.empty() || o.model == "default") {
    o.model = default_model_path();
    if (!fs::exists(o.model))
      fail("kiln", "no model given, and the default model is not at ", o.model, " (scripts/setup fetches it)");
  }
  return o;
}

/* The prompt's ids: through the file's chat template unless --raw. */
std::vector<TokenId> prompt_ids(const Tokenizer& tok, const std::vector<ChatMessage>& messages, bool raw) {
  if (raw) return tok.encode(messages.back().content, true, false);
  ChatTemplate tmpl = ChatTemplate::recognize(tok.chat_template());
  return tok.encode(tmpl.render(messages), true, true);
}

std::vector<ChatMessage> conversation(const LlmOptions& o) {
  std::vector<ChatMessage> m;
  if (!o.system.empty()) m.push_back({"system", o.system});
  return m;
}

bool print_text(TokenId, const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
  return true;
}

void print_speed(const GenerateResult& r) {
  std::fprintf(stderr, "\n[kiln] prompt: %lld tokens, %.1f tokens/s; generation: %zu tokens, %.1f tokens/s (%s)\n",
               static_cast<long long>(r.prompt_tokens), r.prompt_tokens_per_second(), r.tokens.size(),
               r.generate_tokens_per_second(), r.stop_reason.c_str());
}

int cmd_generate(const LlmOptions& o) {
  auto model = Model::load(o.model, o.load);
  Tokenizer tok(model->file());
  auto messages = conversation(o);
  messages.push_back({"user", o.prompt});
  Session session(model);
  auto r = generate(session, tok, prompt_ids(tok, messages, o.raw), o.gen, print_text);
  std::fputc('\n', stdout);
  print_speed(r);
  return 0;
}

int cmd_chat(const LlmOptions& o) {
  auto model = Model::load(o.model, o.load);
  Tokenizer tok(model->file());
  Session session(model);
  auto messages = conversation(o);
  const bool interactive = isatty(STDIN_FILENO);
  std::string line;
  while (true) {
    if (interactive) std::fputs("> ", stdout), std::fflush(stdout);
    if (!std::getline(std::cin, line)) break;
    if (line.empty()) continue;
    messages.push_back({"user", line});
    std::vector<TokenId> ids = prompt_ids(tok, messages, o.raw);
    // Only what the session does not hold yet is prefilled.
    size_t same = 0;
    const auto& held = session.tokens();
    while (same < held.size() && same < ids.size() && held[same] == ids[same]) ++same;
    if (same == ids.size()) --same;  // at least one token, for fresh logits
    session.truncate(static_cast<int64_t>(same));
    auto r = generate(session, tok, {ids.begin() + static_cast<std::ptrdiff_t>(same), ids.end()}, o.gen, print_text);
    std::fputc('\n', stdout);
    std::fflush(stdout);
    if (interactive) print_speed(r);
    messages.push_back({"assistant", r.text});
  }
  return 0;
}

/* Prefill of --pp random tokens and decode of --tg tokens, as llama-bench's pp and tg tests. */
int cmd_bench(const LlmOptions& o) {
  auto model = Model::load(o.model, o.load);
  const ModelConfig& c = model->config();
  std::mt19937 rng(1);
  std::uniform_int_distribution<int32_t> pick(0, c.vocab_size - 1);
  auto random_tokens = [&](int n) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto& x : t) x = pick(rng);
    return t;
  };
  auto now = [] { return std::chrono::steady_clock::now(); };
  auto secs = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
  Session s(model);
  // Warm-up: trace and compile the step shapes used below.
  s.append(random_tokens(std::max(1, o.prompt_tokens)));
  s.append(random_tokens(1));
  wait_for_kernels();  // timed steps run the fused tier, not the interpreter meanwhile
  std::vector<double> pp, tg;
  reset_stats();
  for (int r = 0; r < o.repetitions; ++r) {
    s.reset();
    auto t0 = now();
    if (o.prompt_tokens > 0) s.append(random_tokens(o.prompt_tokens)).eval();
    pp.push_back(o.prompt_tokens / secs(t0, now()));
    s.reset();
    s.append(random_tokens(1));
    t0 = now();
    for (int i = 0; i < o.gen_tokens; ++i) s.append({pick(rng)}).eval();
    tg.push_back(o.gen_tokens / secs(t0, now()));
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const double weights_mb = static_cast<double>(model->weight_bytes()) / 1e6;
  const Stats st = stats();  // traces after the warm-up mean a step shape recompiles
  if (o.json) {
    std::printf(
        "{\"engine\":\"kiln\",\"model\":\"%s\",\"device\":\"%s\",\"dtype\":\"%s\",\"activations\":\"%s\","
        "\"weight_mb\":%.3f,\"pp\":%d,\"pp_tokens_per_s\":%.3f,\"tg\":%d,\"tg_tokens_per_s\":%.3f,"
        "\"repetitions\":%d,\"traces\":%llu,\"kernels\":%llu}\n",
        fs::path(o.model).filename().c_str(), model->device().str().c_str(), dtype_name(model->dtype()),
        kQmmActivationNames[static_cast<int>(model->activations())], weights_mb, o.prompt_tokens, median(pp),
        o.gen_tokens, median(tg), o.repetitions, static_cast<unsigned long long>(st.traces),
        static_cast<unsigned long long>(st.kernels_launched));
  } else {
    std::printf("| model | device | weights (MB) | test | tokens/s |\n|---|---|---|---|---|\n");
    std::printf("| %s | %s | %.1f | pp%d | %.1f |\n", fs::path(o.model).filename().c_str(),
                model->device().str().c_str(), weights_mb, o.prompt_tokens, median(pp));
    std::printf("| %s | %s | %.1f | tg%d | %.1f |\n", fs::path(o.model).filename().c_str(),
                model->device().str().c_str(), weights_mb, o.gen_tokens, median(tg));
    std::printf("(after warm-up: %llu traces, %llu kernels)\n", static_cast<unsigned long long>(st.traces),
                static_cast<unsigned long long>(st.kernels_launched));
  }
  for (const SessionsSpeed& r : kiln::cli::bench_sessions(model, o.batches, o.threads, o.gen_tokens)) {
    if (o.json)
      std::printf(
          "{\"engine\":\"kiln\",\"model\":\"%s\",\"device\":\"%s\",\"dtype\":\"%s\",\"activations\":\"%s\","
          "\"tg\":%d,\"%s\":%d,\"aggregate_tokens_per_s\":%.3f}\n",
          fs::path(o.model).filename().c_str(), model->device().str().c_str(), dtype_name(model->dtype()),
          kQmmActivationNames[static_cast<int>(model->activations())], o.gen_tokens, r.mode.c_str(), r.count,
          r.tokens_per_s);
    else
      std::printf("| %s | %s | %.1f | tg%d, %s %d | %.1f (all sessions) |\n", fs::path(o.model).filename().c_str(),
                  model->device().str().c_str(), weights_mb, o.gen_tokens, r.mode.c_str(), r.count, r.tokens_per_s);
  }
  return 0;
}

}  // namespace

const char* llm_usage() {
  return "  kiln generate [MODEL] [--prompt TEXT] [-n N] [--temp T] [--top-k K] [--top-p P] [--min-p P]\n"
         "               [--repeat-penalty R] [--seed S] [--system TEXT] [--raw] [--device cpu|cuda[:N]]\n"
         "               [--dtype float32|float16|bfloat16] [--activations exact|int8|int16] [--tp N]\n"
         "      streams the model's answer to TEXT (through the file's chat template unless --raw), then\n"
         "      prompt and generation tokens/s; MODEL defaults to the model scripts/setup fetches;\n"
         "      --tp N splits the model over N GPUs from --device (default cuda:0) on (tensor parallelism);\n"
         "      --dtype is that of activations and caches (default float32 on the CPU, bfloat16 on a GPU)\n"
         "  kiln chat [MODEL] [same options]   one turn per line of standard input\n"
         "  kiln bench-llm [MODEL] [--pp N] [--tg N] [-r N] [--device ...] [--activations ...] [--json]\n"
         "               [--batch B,B,...] [--threads T,T,...]\n"
         "      prefill of N random tokens and decode of N tokens (llama-bench's pp512 and tg128); then\n"
         "      decode of B sessions in one step each, and of T sessions on T threads (all tokens/s)\n";
}

int cmd_llm(const std::string& cmd, int argc, char** argv) {
  LlmOptions o = parse(argc, argv);
  if (cmd == "generate") return cmd_generate(o);
  if (cmd == "chat") return cmd_chat(o);
  return cmd_bench(o);
}
