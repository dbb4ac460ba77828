// kiln.distributed.Group and the collectives over it (include/kiln/distributed.h): kiln.all_sum,
// kiln.all_gather, kiln.reduce_scatter, with group=None for the group of one rank.
#include "ops_registry.h"

namespace kpy {

namespace {

using kiln::distributed::Group;

nb::module_ distributed_module(nb::module_& m) {
  if (nb::hasattr(m, "distributed")) return nb::borrow<nb::module_>(m.attr("distributed"));
  nb::module_ d = m.def_submodule("distributed", "Groups of ranks (one per GPU, or threads on the CPU).");
  nb::class_<Group>(d, "Group", "One rank of a group; kiln.distributed.Group() is the group of one rank.")
      .def(nb::init<>())
      .def_prop_ro("rank", &Group::rank)
      .def_prop_ro("size", &Group::size)
      .def_prop_ro("device", &Group::device)
      .def_prop_ro("id", &Group::id, "Process-unique id: the `group` attribute in .kgraph files.")
      .def("__eq__", [](const Group& a, const Group& b) { return a == b; })
      .def("abort", &Group::abort, "why"_a,
           "Ends the group for all its ranks: each rank waiting in a collective, and each later one, raises "
           "`why` (for a rank that failed before a collective). A group of one rank is left as it is.")
      .def_prop_ro("aborted", &Group::aborted, "Why the group was aborted; '' while it works.")
      .def_static(
          "local",
          [](const std::vector<kiln::Device>& devices) {
            nb::gil_scoped_release nogil;
            return Group::local(devices);
          },
          "devices"_a, "One rank per device of this process (rank i on devices[i]), each for its own thread.")
      .def_static("find", &Group::find, "id"_a, "The live group rank with this id.");
  return d;
}

Group group_or_single(const std::optional<Group>& g) { return g ? *g : Group(); }

}  // namespace

void bind_all_sum(nb::module_& m) {
  distributed_module(m);
  m.def(
      "all_sum",
      [](const ArrayLike& x, const std::optional<Group>& group) {
        return kiln::all_sum(x.get(), group_or_single(group));
      },
      "x"_a, "group"_a = nb::none(), op_doc("all_sum"));
}

void bind_all_gather(nb::module_& m) {
  m.def(
      "all_gather",
      [](const ArrayLike& x, const std::optional<Group>& group, int axis) {
        return kiln::all_gather(x.get(), group_or_single(group), axis);
      },
      "x"_a, "group"_a = nb::none(), "axis"_a = 0, op_doc("all_gather"));
}

void bind_reduce_scatter(nb::module_& m) {
  m.def(
      "reduce_scatter",
      [](const ArrayLike& x, const std::optional<Group>& group) {
        return kiln::reduce_scatter(x.get(), group_or_single(group));
      },
      "x"_a, "group"_a = nb::none(), op_doc("reduce_scatter"));
}

}  // namespace kpy
