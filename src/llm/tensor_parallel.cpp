// Tensor parallelism for the Llama family: each rank holds its shards of the weights (model.cpp
// loads them through shard_weight) and runs its own compiled step on its own thread; the ranks'
// steps meet in the all_sum after the row-parallel products and the all_gather of the logits.
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

#include "core/thread_device.h"
#include "llm/model_impl.h"

namespace kiln::llm {

namespace {

// One thread per rank, each running its rank's part of every job: collectives block until every
// rank has reached them, so each rank needs a thread of its own.
class RankThreads {
 public:
  explicit RankThreads(int n) {
    for (int r = 0; r < n; ++r) threads_.emplace_back([this, r] { loop(r); });
  }
  ~RankThreads() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    start_.notify_all();
    for (auto& t : threads_) t.join();
  }

  /* Runs job(r) on thread r for every rank at once; returns when all are done, rethrowing the
     first error thrown (the others may follow from it). */
  void run(const std::function<void(int)>& job) {
    std::unique_lock<std::mutex> lock(mu_);
    job_ = &job;
    running_ = static_cast<int>(threads_.size());
    first_error_ = nullptr;
    ++generation_;
    start_.notify_all();
    done_.wait(lock, [&] { return running_ == 0; });
    job_ = nullptr;
    if (first_error_) std::rethrow_exception(std::exchange(first_error_, nullptr));
  }

 private:
  void loop(int r) {
    uint64_t seen = 0;
    while (true) {
      std::unique_lock<std::mutex> lock(mu_);
      start_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      const std::function<void(int)>* job = job_;
      lock.unlock();
      std::exception_ptr error;
      try {
        (*job)(r);
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      if (error && !first_error_) first_error_ = error;
      if (--running_ == 0) done_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable start_, done_;
  const std::function<void(int)>* job_ = nullptr;  // guarded by mu_
  int running_ = 0;  // guarded by mu_
  uint64_t generation_ = 0;  // guarded by mu_: jobs started
  bool stop_ = false;  // guarded by mu_
  std::exception_ptr first_error_;  // guarded by mu_
  std::vector<std::thread> threads_;
};

// Runs a rank's part; when it throws, the group is aborted first, so that the other ranks do not
// wait for it in a collective for ever.
void as_rank(const distributed::Group& group, const std::function<void()>& part) {
  try {
    part();
  } catch (const std::exception& e) {
    group.abort(kiln::detail::concat("rank ", group.rank(), " failed: ", e.what()));
    throw;
  }
}

void check_divides(const ModelConfig& c, const ModelFile& f, int ranks) {
  const std::string a = c.arch + ".";
  auto check = [&](const char* field, const std::string& key, int value) {
    if (value % ranks != 0)
      fail("llm", f.path(), ": tensor parallelism over ", ranks, " ranks: ", field, " (", key, ") = ", value,
           " does not divide over ", ranks, " ranks");
  };
  check("n_heads", a + "attention.head_count", c.n_heads);
  check("n_kv_heads", a + "attention.head_count_kv", c.n_kv_heads);
  check("ffn_dim", a + "feed_forward_length", c.ffn_dim);
}

}  // namespace

struct TensorParallel {
  std::vector<std::unique_ptr<Model::Impl>> others;  // ranks 1..n-1 (rank 0 holds this)
  std::mutex step_mu;  // one step at a time: every rank must issue the same collectives in the same order
  std::unique_ptr<RankThreads> threads;  // last: its threads stop before the ranks they run go
};

Weight shard_weight(Weight w, const distributed::Group& group, int axis, const std::string& name) {
  if (group.size() == 1) return w;
  if (w.quantized() && axis == 1 && w.scales->shape(1) % group.size() != 0)
    fail("llm", "tensor '", name, "': its ", w.scales->shape(1), " quantization groups of ", w.group_size,
         " input features do not divide over ", group.size(), " ranks");
  // Contiguous copies: each rank keeps its part alone, and the kernels read plain rows.
  auto part = [&](const Array& a) { return copy(distributed::shard(a, group, axis)); };
  w.w = part(w.w);
  if (w.quantized()) {
    w.scales = part(*w.scales);
    w.biases = part(*w.biases);
  }
  return w;
}

std::unique_ptr<Model::Impl> load_tensor_parallel(std::shared_ptr<ModelFile> file, const LoadOptions& options) {
  const int n = options.tensor_parallel;
  if (n < 1) fail("llm", "tensor parallelism needs 1 rank or more, not ", n);
  if (options.device.type == Device::Type::cuda && options.device.index + n > cuda_device_count())
    fail("llm", "tensor parallelism over ", n, " ranks from ", options.device.str(),
         " needs CUDA devices cuda:", options.device.index, " to cuda:", options.device.index + n - 1, "; ",
         cuda_device_count(), " are present");
  check_divides(read_config(*file), *file, n);
  std::vector<Device> devices;
  for (int r = 0; r < n; ++r)
    devices.push_back(options.device.type == Device::Type::cpu ? Device::cpu()
                                                               : Device::cuda(options.device.index + r));
  const std::vector<distributed::Group> groups = distributed::Group::local(devices);

  auto tp = std::make_shared<TensorParallel>();
  tp->threads = std::make_unique<RankThreads>(n);
  std::vector<std::unique_ptr<Model::Impl>> ranks(static_cast<size_t>(n));
  tp->threads->run([&](int r) {  // each rank loads (and uploads) its shards on its own thread
    const distributed::Group& group = groups[static_cast<size_t>(r)];
    as_rank(group, [&] {
      const detail::ThreadDefaultDevice here(devices[static_cast<size_t>(r)]);
      LoadOptions o = options;
      o.device = devices[static_cast<size_t>(r)];
      ranks[static_cast<size_t>(r)] = Model::Impl::load(file, o, group);
    });
  });
  std::unique_ptr<Model::Impl> first = std::move(ranks[0]);
  for (int r = 1; r < n; ++r) {
    first->weight_bytes += ranks[static_cast<size_t>(r)]->weight_bytes;  // what one step reads, all ranks together
    tp->others.push_back(std::move(ranks[static_cast<size_t>(r)]));
  }
  first->tp = std::move(tp);
  return first;
}

void tensor_parallel_ranks(const TensorParallel& tp, std::vector<const Model::Impl*>& all) {
  for (const auto& r : tp.others) all.push_back(r.get());
}

Array tensor_parallel_step(const Model::Impl& rank0, const std::vector<Session*>& sessions,
                           const std::vector<int32_t>& tokens, const std::vector<int32_t>& positions,
                           bool all_positions) {
  TensorParallel& tp = *rank0.tp;
  const std::vector<const Model::Impl*> ranks = rank0.ranks();
  std::lock_guard<std::mutex> lock(tp.step_mu);
  // An aborted group's collectives are gone (its graphs must not replay them): steps fail at once.
  if (const std::string why = rank0.group.aborted(); !why.empty())
    fail("llm", rank0.file->path(), ": the model's tensor-parallel group was aborted (", why,
         "); load the model again");
  Array logits;  // every rank computes all of them; rank 0's are returned
  tp.threads->run([&](int r) {
    const Model::Impl& rank = *ranks[static_cast<size_t>(r)];
    as_rank(rank.group, [&] {
      const detail::ThreadDefaultDevice here(rank.device);
      Array mine = rank.run_step(sessions, tokens, positions, all_positions);
      if (r == 0) logits = std::move(mine);
    });
  });
  return logits;
}

}  // namespace kiln::llm
