// Groups of threads of one process on the CPU: a collective is two meetings, one to post every
// rank's input and one to know that every rank has read them.
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <type_traits>

#include "backend/common/dispatch.h"
#include "backend/cpu/copy.h"
#include "distributed/comm.h"
#include "kiln/error.h"

namespace kiln::distributed::detail {

using kiln::detail::Tensor;

namespace {

// Row-major host data of t (a copy only when t is strided).
Tensor packed(const Tensor& t) {
  if (t.row_contiguous()) return t;
  Tensor c(t.shape, t.dtype);
  c.allocate();
  kiln::detail::copy_convert(t, c);
  return c;
}

// What the ranks' values are summed in: float for 16-bit floats and float, double for double,
// integers wrapping through their unsigned type.
template <class T, class = void>
struct SumType {
  using type = std::conditional_t<std::is_same_v<T, double>, double, float>;
};
template <class T>
struct SumType<T, std::enable_if_t<std::is_integral_v<T>>> {
  using type = std::make_unsigned_t<T>;
};

// out[i] = the sum over ranks of in[r][first + i], in rank order.
template <class T>
void sum_ranks(const std::vector<const Tensor*>& in, int64_t first, int64_t n, T* out) {
  using Acc = typename SumType<T>::type;
  for (int64_t i = 0; i < n; ++i) {
    Acc acc = static_cast<Acc>(static_cast<const T*>(in[0]->raw())[first + i]);
    for (size_t r = 1; r < in.size(); ++r) acc += static_cast<Acc>(static_cast<const T*>(in[r]->raw())[first + i]);
    out[i] = static_cast<T>(acc);
  }
}

class CpuGroup final : public Comm {
 public:
  explicit CpuGroup(int size)
      : Comm(std::vector<std::optional<Device>>(static_cast<size_t>(size), Device::cpu())),
        posts_(static_cast<size_t>(size)) {}

  void run_host(OpKind kind, int rank, const Tensor& in, Tensor& out) override {
    check_open(kind);
    const Tensor x = packed(in);
    out.allocate();
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !reading_ || is_aborted(); });  // the previous collective is over
    check_open(kind);  // aborted before this rank posted: nothing of it is read
    posts_[static_cast<size_t>(rank)] = {kind, &x};
    if (++arrived_ == size()) {
      reading_ = true;
      disagreement_ = disagreement();
      cv_.notify_all();
    } else {
      const uint64_t round = round_;
      cv_.wait(lock, [&] { return reading_ || round_ != round || is_aborted(); });
      if (!reading_ && round_ == round && is_aborted()) {  // no rank reads the posts: take this one back
        --arrived_;
        posts_[static_cast<size_t>(rank)] = {};
        check_open(kind);
      }
    }
    const std::string problem = disagreement_;
    lock.unlock();
    if (problem.empty()) compute(kind, rank, out);
    lock.lock();
    if (++finished_ == size()) {  // every rank has read every input: the next collective may post
      arrived_ = finished_ = 0;
      reading_ = false;
      ++round_;
      cv_.notify_all();
    } else {
      const uint64_t round = round_;
      cv_.wait(lock, [&] { return round_ != round; });
    }
    if (!problem.empty()) fail(op_name(kind), problem);
  }

 private:
  struct Post {
    OpKind kind{};
    const Tensor* in = nullptr;
  };

  // Why the ranks' posts cannot make one collective ("" when they can); under mu_.
  std::string disagreement() const {
    const Post& p0 = posts_[0];
    for (size_t r = 1; r < posts_.size(); ++r) {
      const Post& p = posts_[r];
      if (p.kind != p0.kind || p.in->shape != p0.in->shape || p.in->dtype != p0.in->dtype)
        return kiln::detail::concat("the ranks of a group called different collectives: rank 0 ", op_name(p0.kind),
                                    " of ", kiln::detail::shape_str(p0.in->shape), " ", dtype_name(p0.in->dtype),
                                    ", rank ", r, " ", op_name(p.kind), " of ", kiln::detail::shape_str(p.in->shape),
                                    " ", dtype_name(p.in->dtype));
    }
    return "";
  }

  // This rank's output from every rank's input; the inputs stay posted until all ranks finish.
  void compute(OpKind kind, int rank, Tensor& out) const {
    std::vector<const Tensor*> in;
    for (const Post& p : posts_) in.push_back(p.in);
    const int64_t n = out.size();
    if (kind == OpKind::AllGather) {
      const size_t bytes = static_cast<size_t>(in[0]->size()) * in[0]->itemsize();
      char* y = static_cast<char*>(out.raw());
      for (size_t r = 0; r < in.size(); ++r) std::memcpy(y + r * bytes, in[r]->raw(), bytes);
      return;
    }
    const int64_t first = kind == OpKind::ReduceScatter ? n * rank : 0;
    kiln::detail::dispatch_dtype(out.dtype, [&](auto v) {
      using T = decltype(v);
      if constexpr (std::is_same_v<T, bool>) {
        fail(op_name(kind), "bool cannot be summed");
      } else {
        sum_ranks<T>(in, first, n, out.data<T>());
      }
    });
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Post> posts_;  // guarded by mu_; read without it while reading_
  int arrived_ = 0, finished_ = 0;  // guarded by mu_
  bool reading_ = false;  // guarded by mu_: every rank has posted, outputs are being computed
  uint64_t round_ = 0;  // guarded by mu_: collectives completed
  std::string disagreement_;  // guarded by mu_

  // Once every rank has posted, each reads them all and finishes without waiting on another,
  // so only the waits before that end at an abort.
  void abort_transport() override {
    std::lock_guard<std::mutex> lock(mu_);
    cv_.notify_all();
  }
};

}  // namespace

std::shared_ptr<Comm> cpu_group(int size) { return std::make_shared<CpuGroup>(size); }

}  // namespace kiln::distributed::detail
