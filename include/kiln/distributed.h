// Groups of ranks and the collectives over them (docs/distributed.md): one rank per GPU, in one
// process (a thread per rank) or in a process each, on NCCL; on the CPU, ranks are threads of one
// process. all_sum, all_gather and reduce_scatter are ops like any other: lazy, usable inside
// compiled functions, and on a GPU captured in the CUDA graph of a compiled call.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/array.h"
#include "kiln/device.h"
#include "kiln/nn.h"

namespace kiln::distributed {

namespace detail {
class Comm;
}

/* What every process of a new group passes to Group::join: NCCL's unique id, 128 bytes. */
struct UniqueId {
  std::string bytes;
};

/* One rank of a group: which rank, of how many, on which device. A handle: copies share the
   group, which lives while any handle (or any op built over it) does. Each rank's collectives
   must be called by its own thread, in the same order on every rank. */
class Group {
 public:
  /* The group of one rank (rank 0 of 1, id 0): its collectives copy their input, on any device. */
  Group();

  int rank() const { return rank_; }
  int size() const;
  /* This rank's device; nullopt for the group of Group(), which takes any. */
  std::optional<Device> device() const;
  /* Process-unique while the group lives, one per rank of this process: the `group` attribute of
     the collectives in .kgraph files. 0 is the group of Group(). */
  uint64_t id() const;
  /* The same group and rank. */
  bool operator==(const Group& o) const { return comm_ == o.comm_ && rank_ == o.rank_; }

  /* Ends the group for all its ranks, from any thread: each rank waiting in a collective, and each
     later collective, throws kiln::Error with `why`. A rank that fails before a collective would
     otherwise leave the others waiting in it for ever. A group of several GPUs aborts its NCCL
     communicators (ncclCommAbort), so compiled functions holding its collectives must not be
     called again. A group of one rank has no one to wait for: nothing happens. */
  void abort(const std::string& why) const;
  /* Why the group was aborted; "" while it works. */
  std::string aborted() const;

  /* One rank per device of this process, rank i on devices[i], each for its own thread. CUDA
     devices (distinct): one NCCL communicator each (ncclCommInitAll); one device needs no NCCL.
     CPU devices: ranks that meet in shared memory. Throws kiln::Error naming what is missing
     (NCCL, a device) or wrong. */
  static std::vector<Group> local(const std::vector<Device>& devices);
  /* Rank `rank` of a group of `size` ranks over processes (or threads, each joining with its own
     rank) on CUDA devices: every rank passes the same id, made once by unique_id(). Blocks until
     all ranks have joined (ncclCommInitRank). */
  static Group join(const UniqueId& id, int rank, int size, Device device);
  /* A new id for join (ncclGetUniqueId). */
  static UniqueId unique_id();
  /* The live group rank whose id() is `id`; throws kiln::Error naming the id when there is none. */
  static Group find(uint64_t id);

  // Internal: what the collectives run on.
  const std::shared_ptr<detail::Comm>& comm() const { return comm_; }
  Group(std::shared_ptr<detail::Comm> comm, int rank);

 private:
  std::shared_ptr<detail::Comm> comm_;
  int rank_ = 0;
};

/* Why groups of several GPUs cannot be made in this process ("" when NCCL is found), for
   messages and for tests that skip without it. Opens NCCL the first time. */
std::string nccl_unavailable_reason();

/* join's id through a file: rank 0 makes one and writes `path` (atomically, by renaming); the
   other ranks wait up to timeout_s for it and read it. For processes sharing a file system. */
UniqueId rendezvous(const std::string& path, int rank, double timeout_s = 60);

/* Rank's part of x along `axis`: the rank-th of group.size() equal slices. Throws kiln::Error
   naming the axis when its length does not divide. */
Array shard(const Array& x, const Group& group, int axis);

/* A linear layer y = x W^T + b: W dense [out, in], or in kiln's affine format (kiln/nn.h) when
   `bits` is set: w uint32 [out, in*bits/32], scales and biases [out, in/group_size]. */
struct Linear {
  Array w;
  std::optional<Array> scales, biases;
  int group_size = 0, bits = 0;
  std::optional<Array> bias;  // [out]
  QmmActivations activations = QmmActivations::exact;

  bool quantized() const { return bits != 0; }
  /* x W^T + b. */
  Array operator()(const Array& x) const;
  /* x W^T, without the bias. */
  Array product(const Array& x) const;
};

/* Column-parallel (MLX's AllToShardedLinear): each rank holds out/size rows of W (and of b), x is
   the whole input on every rank, and the result is this rank's out/size output features. */
class AllToShardedLinear {
 public:
  /* This rank's rows of the whole layer; out must divide over the group. */
  AllToShardedLinear(const Linear& whole, const Group& group);
  Array operator()(const Array& x) const { return local_(x); }
  const Linear& local() const { return local_; }

 private:
  Linear local_;
};

/* Row-parallel (MLX's ShardedToAllLinear): each rank holds in/size columns of W (whole
   quantization groups), x holds this rank's in/size input features, and the result is the whole
   output on every rank: all_sum of the ranks' partial products, then b. */
class ShardedToAllLinear {
 public:
  /* This rank's columns of the whole layer; in (in groups, when quantized) must divide. */
  ShardedToAllLinear(const Linear& whole, const Group& group);
  Array operator()(const Array& x) const;
  const Linear& local() const { return local_; }

 private:
  Linear local_;
  Group group_;
};

}  // namespace kiln::distributed

namespace kiln {

/* Sum of x over the ranks of the group, on every rank (NCCL's all-reduce). x must be on the
   rank's device; float16, bfloat16, float32, float64, int32 or int64. */
Array all_sum(const Array& x, const distributed::Group& group = {});
/* The ranks' x joined along `axis` in rank order, on every rank: shape[axis] * size. */
Array all_gather(const Array& x, const distributed::Group& group = {}, int axis = 0);
/* Sum over the ranks, then this rank's part of axis 0: the rank-th of size equal slices (axis 0
   must divide). */
Array reduce_scatter(const Array& x, const distributed::Group& group = {});

}  // namespace kiln
