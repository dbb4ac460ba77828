// C API: groups of ranks and their collectives (include/kiln/c/kiln.h, kiln/distributed.h).
#include <vector>

#include "capi/capi.h"
#include "kiln/distributed.h"

using namespace kiln;
using namespace kiln::capi;
using kiln::distributed::Group;

struct kiln_group_s {
  Group group;
};

namespace {

const Group& get_group(const char* fn, const kiln_group g) {
  if (!g) fail(fn, "null group handle");
  return g->group;
}
// A collective's group: NULL is the group of one rank.
Group group_or_single(const kiln_group g) { return g ? g->group : Group(); }

}  // namespace

extern "C" {

int kiln_group_local(const kiln_device* devices, size_t n, kiln_group* out) {
  return guard([&] {
    const char* fn = "kiln_group_local";
    if (!out) fail(fn, "null output pointer");
    if (n && !devices) fail(fn, "null device pointer with ", n, " devices");
    std::vector<Device> d;
    for (size_t i = 0; i < n; ++i) d.push_back(to_device(fn, devices[i]));
    std::vector<Group> ranks = Group::local(d);
    for (size_t i = 0; i < n; ++i) out[i] = new kiln_group_s{std::move(ranks[i])};
  });
}

int kiln_group_free(kiln_group g) {
  delete g;
  return 0;
}

int kiln_group_rank(int* out, const kiln_group g) {
  return guard([&] {
    check_out("kiln_group_rank", out);
    *out = get_group("kiln_group_rank", g).rank();
  });
}

int kiln_group_size(int* out, const kiln_group g) {
  return guard([&] {
    check_out("kiln_group_size", out);
    *out = get_group("kiln_group_size", g).size();
  });
}

int kiln_group_abort(const kiln_group g, const char* why) {
  return guard([&] { get_group("kiln_group_abort", g).abort(why ? why : ""); });
}

int kiln_all_sum(kiln_array* out, const kiln_array x, const kiln_group g) {
  return guard([&] {
    check_out("kiln_all_sum", out);
    put(out, all_sum(get("kiln_all_sum", x), group_or_single(g)));
  });
}

int kiln_all_gather(kiln_array* out, const kiln_array x, const kiln_group g, int axis) {
  return guard([&] {
    check_out("kiln_all_gather", out);
    put(out, all_gather(get("kiln_all_gather", x), group_or_single(g), axis));
  });
}

int kiln_reduce_scatter(kiln_array* out, const kiln_array x, const kiln_group g) {
  return guard([&] {
    check_out("kiln_reduce_scatter", out);
    put(out, reduce_scatter(get("kiln_reduce_scatter", x), group_or_single(g)));
  });
}

}  // extern "C"
