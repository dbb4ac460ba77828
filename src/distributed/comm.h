// What a group's collectives run on: one Comm per group in this process, shared by the handles
// of its ranks. The base class is the group of one rank; the CPU's thread groups and the CUDA
// backend's NCCL communicators (backend/cuda/collectives.cpp) derive from it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "kiln/device.h"
#include "ops/primitive.h"

namespace kiln::distributed::detail {

class Comm {
 public:
  /* devices[r]: rank r's device when it is in this process; nullopt for a rank of another
     process, and for the one rank of Group() (any device). */
  explicit Comm(std::vector<std::optional<Device>> devices) : devices_(std::move(devices)) {}
  virtual ~Comm();
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  int size() const { return static_cast<int>(devices_.size()); }
  const std::optional<Device>& device(int rank) const { return devices_[static_cast<size_t>(rank)]; }
  /* The rank's id (Group::id), given by enter(). */
  uint64_t id(int rank) const { return ids_.empty() ? 0 : ids_[static_cast<size_t>(rank)]; }

  /* Rank `rank`'s part of collective `kind` on host tensors: in as it is, out with its shape
     and dtype set (the callee allocates it). The group of one rank copies; others override. */
  virtual void run_host(OpKind kind, int rank, const kiln::detail::Tensor& in, kiln::detail::Tensor& out);

  /* Group::abort: keeps the first reason, then wakes the ranks waiting in a collective. */
  void abort(const std::string& why);
  bool is_aborted() const { return aborted_flag_.load(std::memory_order_acquire); }
  std::string aborted() const;
  /* Throws `[op] the group was aborted: why` once it is. */
  void check_open(OpKind kind) const;

 protected:
  /* What ends the waits of this transport; called once, after the reason is set. */
  virtual void abort_transport() {}

 private:
  friend void enter(const std::shared_ptr<Comm>& comm);
  std::vector<std::optional<Device>> devices_;
  std::vector<uint64_t> ids_;  // per rank: written once by enter(), before the comm is shared
  mutable std::mutex abort_mu_;  // guards aborted_
  std::string aborted_;
  std::atomic<bool> aborted_flag_{false};  // set after aborted_
};

/* Gives each rank of `comm` in this process an id and enters it in the registry Group::find reads. */
void enter(const std::shared_ptr<Comm>& comm);

/* Ranks of one process that meet in shared memory: each collective waits for every rank to post
   its input, then each rank computes its own output from all of them, summing in rank order so
   that every rank gets the same values. */
std::shared_ptr<Comm> cpu_group(int size);

}  // namespace kiln::distributed::detail
