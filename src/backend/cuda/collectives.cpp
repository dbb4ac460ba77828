#include "backend/cuda/collectives.h"

#include <cstring>

#include "backend/cuda/allocator.h"
#include "backend/cuda/driver.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/nccl.h"
#include "backend/cuda/recording.h"
#include "backend/cuda/streams.h"
#include "distributed/comm.h"
#include "kiln/error.h"
#include "ops/distributed.h"

namespace kiln::cuda {

using detail::Tensor;

#ifdef KILN_WITH_NCCL

namespace {

// A group's NCCL communicators, one per rank of this process (null for ranks elsewhere).
class NcclGroup final : public distributed::detail::Comm {
 public:
  NcclGroup(std::vector<std::optional<Device>> devices, std::vector<ncclComm_t> comms)
      : Comm(std::move(devices)), comms_(std::move(comms)) {}
  ~NcclGroup() override {
    // Waits for the communicator's work; NCCL may leave another device's context current.
    if (!is_aborted())
      for (ncclComm_t c : comms_)
        if (c) nccl().ncclCommDestroy(c);
    forget_bound();
  }
  ncclComm_t comm(int rank) const { return comms_[static_cast<size_t>(rank)]; }

 private:
  // Ends the communicators' work, also the kernels waiting for a rank that never comes; a thread
  // in a collective's call returns with an error. The handles are never used again.
  void abort_transport() override {
    for (ncclComm_t c : comms_)
      if (c) nccl().ncclCommAbort(c);
    forget_bound();
  }

  std::vector<ncclComm_t> comms_;
};

ncclDataType_t nccl_type(Dtype d) {
  switch (d) {
    case float16: return ncclFloat16;
    case bfloat16: return ncclBfloat16;
    case float32: return ncclFloat32;
    case float64: return ncclFloat64;
    case int32: return ncclInt32;
    case int64: return ncclInt64;
    default: fail("distributed", "NCCL has no sum for ", dtype_name(d));
  }
}

// One NCCL call with the pointers in words (send, receive). A compiled call's recording keeps it
// as a host step: the graph captures it from the stream (NCCL calls can be captured), and it runs
// from the host between graph launches where a pointer of it moves from call to call.
class NcclStep final : public HostStep {
 public:
  NcclStep(std::shared_ptr<const distributed::detail::Comm> group, ncclComm_t comm, OpKind kind, size_t count,
           ncclDataType_t type)
      : group_(std::move(group)), comm_(comm), kind_(kind), count_(count), type_(type) {}

  void run(int device, const std::vector<long>& words) override {
    group_->check_open(kind_);
    const ncclResult_t r = issue(stream(device), words);
    forget_bound();
    group_->check_open(kind_);  // aborted while in the call: its error says why
    nccl_check(r, op_name(kind_), "call", comm_);
  }

  CUgraph capture(int device, const std::vector<long>& words, std::vector<std::shared_ptr<detail::Buffer>>&) override {
    const Driver& d = drv();
    CUstream st = stream(device);
    // Thread-local mode: other ranks' threads capture and launch at the same time (as nccl-tests does).
    if (d.cuStreamBeginCapture(st, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) != CUDA_SUCCESS) return nullptr;
    const ncclResult_t issued = issue(st, words);
    CUgraph g = nullptr;
    const CUresult ended = d.cuStreamEndCapture(st, &g);  // always: the stream must leave capture
    forget_bound();
    if (issued != ncclSuccess || ended != CUDA_SUCCESS || !g || !fits_a_child_node(g)) {
      if (g) d.cuGraphDestroy(g);
      return nullptr;  // then it runs from the host between the graph's launches
    }
    return g;
  }

  bool recapturable() const override { return false; }

 private:
  ncclResult_t issue(CUstream st, const std::vector<long>& words) const {
    const Nccl& n = nccl();
    const void* send = reinterpret_cast<const void*>(words[0]);
    void* recv = reinterpret_cast<void*>(words[1]);
    switch (kind_) {
      case OpKind::AllSum: return n.ncclAllReduce(send, recv, count_, type_, ncclSum, comm_, st);
      case OpKind::AllGather: return n.ncclAllGather(send, recv, count_, type_, comm_, st);
      default: return n.ncclReduceScatter(send, recv, count_, type_, ncclSum, comm_, st);
    }
  }

  // Whether the captured graph can be a child node of an instantiated graph, as the compiled call's
  // graph will make it (some node kinds cannot): tried on a graph of its own first.
  static bool fits_a_child_node(CUgraph g) {
    const Driver& d = drv();
    CUgraph scratch = nullptr;
    CUgraphNode node = nullptr;
    CUgraphExec exec = nullptr;
    const bool ok = d.cuGraphCreate(&scratch, 0) == CUDA_SUCCESS &&
                    d.cuGraphAddChildGraphNode(&node, scratch, nullptr, 0, g) == CUDA_SUCCESS &&
                    d.cuGraphInstantiateWithFlags(&exec, scratch, 0) == CUDA_SUCCESS;
    if (exec) d.cuGraphExecDestroy(exec);
    if (scratch) d.cuGraphDestroy(scratch);
    return ok;
  }

  std::shared_ptr<const distributed::detail::Comm> group_;  // keeps comm_ alive
  ncclComm_t comm_;
  OpKind kind_;
  size_t count_;  // elements sent (all_sum, all_gather) or received (reduce_scatter) by each rank
  ncclDataType_t type_;
};

void check_devices(const std::vector<int>& devices) {
  if (device_count() == 0) fail("distributed", "CUDA is not available: ", unavailable_reason());
  for (int d : devices)
    if (d < 0 || d >= device_count()) fail("distributed", "no CUDA device ", d, " (", device_count(), " present)");
}

}  // namespace

std::shared_ptr<distributed::detail::Comm> nccl_local_group(const std::vector<int>& devices) {
  const Nccl& n = nccl();  // first: a missing NCCL is what a machine without it hears
  check_devices(devices);
  std::vector<ncclComm_t> comms(devices.size(), nullptr);
  const ncclResult_t r = n.ncclCommInitAll(comms.data(), static_cast<int>(devices.size()), devices.data());
  forget_bound();
  nccl_check(r, "distributed", "ncclCommInitAll");
  std::vector<std::optional<Device>> where;
  for (int d : devices) where.push_back(Device::cuda(d));
  return std::make_shared<NcclGroup>(std::move(where), std::move(comms));
}

std::shared_ptr<distributed::detail::Comm> nccl_join(const std::string& unique_id, int rank, int size, int device) {
  const Nccl& n = nccl();
  check_devices({device});
  ncclUniqueId id;
  if (unique_id.size() != sizeof id.internal)
    fail("distributed", "a unique id is ", sizeof id.internal, " bytes, not ", unique_id.size());
  std::memcpy(id.internal, unique_id.data(), sizeof id.internal);
  bind(device);  // NCCL takes the calling thread's current device
  ncclComm_t comm = nullptr;
  const ncclResult_t r = n.ncclCommInitRank(&comm, size, id, rank);
  forget_bound();
  nccl_check(r, "distributed", "ncclCommInitRank");
  std::vector<std::optional<Device>> where(static_cast<size_t>(size));
  std::vector<ncclComm_t> comms(static_cast<size_t>(size), nullptr);
  where[static_cast<size_t>(rank)] = Device::cuda(device);
  comms[static_cast<size_t>(rank)] = comm;
  return std::make_shared<NcclGroup>(std::move(where), std::move(comms));
}

std::string nccl_unique_id() {
  const Nccl& n = nccl();
  ncclUniqueId id;
  nccl_check(n.ncclGetUniqueId(&id), "distributed", "ncclGetUniqueId");
  return std::string(id.internal, sizeof id.internal);
}

#else

std::shared_ptr<distributed::detail::Comm> nccl_local_group(const std::vector<int>&) {
  fail("distributed", "NCCL is not available: ", nccl_unavailable_reason());
}
std::shared_ptr<distributed::detail::Comm> nccl_join(const std::string&, int, int, int) {
  fail("distributed", "NCCL is not available: ", nccl_unavailable_reason());
}
std::string nccl_unique_id() { fail("distributed", "NCCL is not available: ", nccl_unavailable_reason()); }

#endif

void run_collective(int device, const Primitive& prim, std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const distributed::Group& g = static_cast<const Collective&>(prim).group();
  g.comm()->check_open(prim.kind());
  Tensor& y = out[0];
  allocate_output(device, y);
  if (g.size() == 1) {  // one rank: every collective is its input
    copy_into(device, in[0], y);
    return;
  }
  if (g.device() != Device::cuda(device))
    fail(prim.name(), "rank ", g.rank(), " of the group is on ", g.device() ? g.device()->str() : "another process",
         ", but its input is on cuda:", device);
#ifdef KILN_WITH_NCCL
  const auto* group = dynamic_cast<const NcclGroup*>(g.comm().get());
  if (!group) fail(prim.name(), "the group's ranks are not NCCL ranks");
  Tensor x = in[0];
  if (!x.row_contiguous()) {  // NCCL reads one dense run
    Tensor packed(x.shape, x.dtype);
    allocate_output(device, packed);
    copy_into(device, x, packed);
    x = packed;
  }
  const size_t count = static_cast<size_t>(prim.kind() == OpKind::ReduceScatter ? y.size() : x.size());
  if (count == 0) return;
  auto step = std::make_shared<NcclStep>(g.comm(), group->comm(g.rank()), prim.kind(), count, nccl_type(x.dtype));
  const std::vector<long> words = {ptr_bits(x), ptr_bits(y)};
  if (Recording* r = recording()) r->launches.push_back({Kernel{}, 0, 0, 0, words, step});
  step->run(device, words);
#else
  fail(prim.name(), "NCCL is not available: ", nccl_unavailable_reason());
#endif
}

}  // namespace kiln::cuda
