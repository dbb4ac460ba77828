// The fused-kernel policy (KILN_FUSED_KERNELS), per-call tier records and their counters.
#include "compile/tier.h"

#include <algorithm>
#include <atomic>
#include <chrono>

#include "backend/cpu/compile_pool.h"
#include "compile/plan.h"
#include "core/config.h"
#include "core/stats.h"

namespace kiln {

namespace {

std::atomic<int> g_policy{-1};  // -1: not yet read from KILN_FUSED_KERNELS

FusedKernels policy_from_env() {
  const std::string p = config::choice(config::Knob::fused_kernels);
  if (p == "wait") return FusedKernels::wait;
  if (p == "off") return FusedKernels::off;
  return FusedKernels::background;
}

}  // namespace

void set_fused_kernels(FusedKernels policy) { g_policy.store(static_cast<int>(policy)); }

FusedKernels fused_kernels() {
  int p = g_policy.load(std::memory_order_relaxed);
  if (p < 0) {
    int expected = -1;
    g_policy.compare_exchange_strong(expected, static_cast<int>(policy_from_env()));
    p = g_policy.load();
  }
  return static_cast<FusedKernels>(p);
}

size_t kernels_compiling() {
  size_t n = 0;
  for (cpu::CompilePool* p : cpu::process_pools()) n += p->pending();
  return n;
}

void wait_for_kernels() {
  for (cpu::CompilePool* p : cpu::process_pools()) p->drain();
}

namespace compiler {

TierRecord*& current_tier_record() {
  thread_local TierRecord* record = nullptr;
  return record;
}

void note_region(bool compiled, int64_t ready_ns) {
  TierRecord* r = current_tier_record();
  if (!r) return;
  if (!compiled)
    ++r->interim;
  else
    r->latest_ready_ns = std::max(r->latest_ready_ns, ready_ns);
}

void count_call(const Plan& plan, const TierRecord& record) {
  auto& c = detail::counters();
  if (record.interim > 0) return detail::count(c.interim_calls);
  detail::count(c.fused_calls);
  if (plan.fused_arrived.exchange(true, std::memory_order_relaxed)) return;
  detail::count(c.fused_arrivals);
  // Kernels already in memory or on disk at the miss arrived with it: no wait.
  detail::count(c.fused_arrival_ns, static_cast<uint64_t>(std::max<int64_t>(0, record.latest_ready_ns - plan.miss_ns)));
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace compiler
}  // namespace kiln
