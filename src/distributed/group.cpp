// Groups: making them (one process, or a process each through NCCL's unique id), the registry
// of live ranks that .kgraph files name by id, and the rendezvous file.
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "distributed/comm.h"
#include "kiln/distributed.h"
#include "kiln/error.h"
#include "backend/cpu/copy.h"
#ifdef KILN_WITH_CUDA
#include "backend/cuda/collectives.h"
#include "backend/cuda/nccl.h"
#endif

namespace kiln::distributed {

namespace detail {

namespace {

struct Registry {
  std::mutex mu;  // guards ranks and next
  std::unordered_map<uint64_t, std::pair<std::weak_ptr<Comm>, int>> ranks;
  uint64_t next = 1;  // 0 is the group of Group()
};

Registry& registry() {
  static auto* r = new Registry;  // never destroyed: groups may be released during static teardown
  return *r;
}

}  // namespace

Comm::~Comm() {
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  for (uint64_t id : ids_)
    if (id) reg.ranks.erase(id);
}

void Comm::run_host(OpKind kind, int rank, const kiln::detail::Tensor& in, kiln::detail::Tensor& out) {
  if (size() != 1) fail(op_name(kind), "this group of ", size(), " ranks cannot run on the CPU");
  out.allocate();
  kiln::detail::copy_convert(in, out);  // one rank: every collective is its input
}

void Comm::abort(const std::string& why) {
  if (size() == 1) return;  // no rank to wait for
  {
    std::lock_guard<std::mutex> lock(abort_mu_);
    if (aborted_flag_.load()) return;
    aborted_ = why.empty() ? "no reason given" : why;
    aborted_flag_.store(true, std::memory_order_release);
  }
  abort_transport();
}

std::string Comm::aborted() const {
  std::lock_guard<std::mutex> lock(abort_mu_);
  return aborted_;
}

void Comm::check_open(OpKind kind) const {
  if (is_aborted()) fail(op_name(kind), "the group was aborted: ", aborted());
}

void enter(const std::shared_ptr<Comm>& comm) {
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  comm->ids_.assign(static_cast<size_t>(comm->size()), 0);
  for (int r = 0; r < comm->size(); ++r) {
    if (!comm->device(r)) continue;  // a rank of another process
    const uint64_t id = reg.next++;
    comm->ids_[static_cast<size_t>(r)] = id;
    reg.ranks[id] = {comm, r};
  }
}

}  // namespace detail

namespace {

const std::shared_ptr<detail::Comm>& single() {
  static auto* c = new std::shared_ptr<detail::Comm>(std::make_shared<detail::Comm>(
      std::vector<std::optional<Device>>{std::nullopt}));  // never destroyed, like the registry
  return *c;
}

std::vector<Group> handles(const std::shared_ptr<detail::Comm>& comm) {
  detail::enter(comm);
  std::vector<Group> g;
  for (int r = 0; r < comm->size(); ++r) g.emplace_back(comm, r);
  return g;
}

void check_cuda_device(const Device& d) {
  if (d.index < 0 || d.index >= cuda_device_count())
    fail("distributed", "no CUDA device ", d.index, " (", cuda_device_count(), " present)");
}

}  // namespace

Group::Group() : comm_(single()) {}
Group::Group(std::shared_ptr<detail::Comm> comm, int rank) : comm_(std::move(comm)), rank_(rank) {}

int Group::size() const { return comm_->size(); }
std::optional<Device> Group::device() const { return comm_->device(rank_); }
uint64_t Group::id() const { return comm_->id(rank_); }
void Group::abort(const std::string& why) const { comm_->abort(why); }
std::string Group::aborted() const { return comm_->aborted(); }

std::vector<Group> Group::local(const std::vector<Device>& devices) {
  if (devices.empty()) fail("distributed", "a group needs at least one device");
  const Device::Type type = devices[0].type;
  for (size_t i = 0; i < devices.size(); ++i) {
    if (devices[i].type != type)
      fail("distributed", "the ranks of a group are all on the CPU or all on CUDA devices, not ", devices[0].str(),
           " and ", devices[i].str());
    for (size_t j = 0; j < i && type == Device::Type::cuda; ++j) {
      if (devices[j] == devices[i])
        fail("distributed", "ranks ", j, " and ", i, " are both on ", devices[i].str(), " (one rank per GPU)");
    }
  }
  const int n = static_cast<int>(devices.size());
  if (type == Device::Type::cpu) {
    return handles(n == 1 ? std::make_shared<detail::Comm>(std::vector<std::optional<Device>>{Device::cpu()})
                          : detail::cpu_group(n));
  }
#ifdef KILN_WITH_CUDA
  if (n == 1) {  // no NCCL needed
    check_cuda_device(devices[0]);
    return handles(std::make_shared<detail::Comm>(std::vector<std::optional<Device>>{devices[0]}));
  }
  std::vector<int> indices;
  for (const Device& d : devices) indices.push_back(d.index);
  return handles(cuda::nccl_local_group(indices));  // says first when NCCL is missing, then checks the devices
#else
  fail("distributed", "kiln was built without the CUDA backend: a group on ", devices[0].str(), " cannot be made");
#endif
}

Group Group::join(const UniqueId& id, int rank, int size, Device device) {
  if (size < 1 || rank < 0 || rank >= size) fail("distributed", "rank ", rank, " is not a rank of a group of ", size);
  if (device.type != Device::Type::cuda)
    fail("distributed", "groups over processes run on CUDA devices (NCCL), not ", device.str(),
         "; threads of one process on the CPU use Group::local");
#ifdef KILN_WITH_CUDA
  if (size == 1) {
    check_cuda_device(device);
    return handles(std::make_shared<detail::Comm>(std::vector<std::optional<Device>>{device}))[0];
  }
  auto comm = cuda::nccl_join(id.bytes, rank, size, device.index);
  detail::enter(comm);
  return Group(comm, rank);
#else
  fail("distributed", "kiln was built without the CUDA backend: a group on ", device.str(), " cannot be made");
#endif
}

UniqueId Group::unique_id() {
#ifdef KILN_WITH_CUDA
  return {cuda::nccl_unique_id()};
#else
  fail("distributed", "kiln was built without the CUDA backend, so without NCCL");
#endif
}

Group Group::find(uint64_t id) {
  if (id == 0) return Group();
  detail::Registry& reg = detail::registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  auto it = reg.ranks.find(id);
  std::shared_ptr<detail::Comm> comm = it == reg.ranks.end() ? nullptr : it->second.first.lock();
  if (!comm) fail("distributed", "no group has id ", id, " in this process (0 is the group of one rank)");
  return Group(std::move(comm), it->second.second);
}

std::string nccl_unavailable_reason() {
#ifdef KILN_WITH_CUDA
  return cuda::nccl_unavailable_reason();
#else
  return "kiln was built without the CUDA backend";
#endif
}

UniqueId rendezvous(const std::string& path, int rank, double timeout_s) {
  namespace fs = std::filesystem;
  if (rank == 0) {
    UniqueId id = Group::unique_id();
    const std::string tmp = path + ".tmp." + std::to_string(::getpid());
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out.write(id.bytes.data(), static_cast<std::streamsize>(id.bytes.size()));
      if (!out) fail("distributed", "rendezvous: cannot write ", tmp);
    }
    std::error_code ec;
    fs::rename(tmp, path, ec);  // the others see the whole file or none
    if (ec) fail("distributed", "rendezvous: cannot rename ", tmp, " to ", path, ": ", ec.message());
    return id;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (true) {
    std::ifstream in(path, std::ios::binary);
    if (in) {
      std::ostringstream s;
      s << in.rdbuf();
      return {s.str()};
    }
    if (std::chrono::steady_clock::now() > deadline)
      fail("distributed", "rendezvous: ", path, " did not appear within ", timeout_s, " s (rank 0 writes it)");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace kiln::distributed
