// Groups of CUDA devices on NCCL (backend/cuda/nccl.h), and the collectives' CUDA case.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace kiln {
class Primitive;
}
namespace kiln::distributed::detail {
class Comm;
}

namespace kiln::cuda {

/* One rank per device of this process, each with its NCCL communicator (ncclCommInitAll). */
std::shared_ptr<distributed::detail::Comm> nccl_local_group(const std::vector<int>& devices);
/* Rank `rank` of a group of `size` over processes or threads (ncclCommInitRank); blocks until all
   ranks have joined. */
std::shared_ptr<distributed::detail::Comm> nccl_join(const std::string& unique_id, int rank, int size, int device);
/* A new NCCL unique id, as its bytes. */
std::string nccl_unique_id();

/* A collective on the device (eval.cpp): its input made contiguous, its output allocated, the NCCL
   call issued on this thread's stream and kept in a compiled call's recording, so the call's CUDA
   graph captures it with the rest. The group of one rank copies. */
void run_collective(int device, const Primitive& prim, std::vector<detail::Tensor>& in,
                    std::vector<detail::Tensor>& out);

}  // namespace kiln::cuda
