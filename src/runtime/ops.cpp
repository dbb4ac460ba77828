// One table from op names to front-end functions; each entry reads its attributes
// through AttrReader, so unknown or mistyped attributes are errors, not silence.
#include "runtime/ops.h"

#include <algorithm>
#include <functional>
#include <iterator>
#include <unordered_map>

#include "kiln/distributed.h"
#include "kiln/nn.h"
#include "kiln/ops.h"
#include "kiln/random.h"
#include "runtime/attrs.h"

namespace kiln::runtime {

namespace {

struct Call {
  const std::vector<Array>& in;
  AttrReader& attr;
  size_t n_out;
};
using Fn = std::function<std::vector<Array>(Call&)>;

struct Entry {
  int min_in;
  int max_in;  // -1: any number
  Fn fn;
};

Shape shape_attr(AttrReader& a, const char* key) { return a.ints(key); }

std::vector<std::pair<int64_t, int64_t>> pad_widths(const std::string& op, const std::vector<int64_t>& flat) {
  if (flat.size() % 2) fail(op.c_str(), "attribute 'widths' needs (before, after) pairs; got ", flat.size(), " values");
  std::vector<std::pair<int64_t, int64_t>> w;
  for (size_t i = 0; i < flat.size(); i += 2) w.emplace_back(flat[i], flat[i + 1]);
  return w;
}

// slice{axes, start, stop, step}: Python-style bounds on the listed axes, others whole.
Array slice_op(const Array& a, AttrReader& at) {
  int rank = a.ndim();
  std::vector<int64_t> axes = at.ints_opt("axes").value_or(std::vector<int64_t>{});
  auto start = at.ints_opt("start");
  auto stop = at.ints_opt("stop");
  auto step = at.ints_opt("step");
  size_t n = axes.empty() ? std::max({start ? start->size() : 0, stop ? stop->size() : 0, step ? step->size() : 0})
                          : axes.size();
  if (axes.empty())
    for (size_t i = 0; i < n; ++i) axes.push_back(static_cast<int64_t>(i));
  auto check = [&](const std::optional<std::vector<int64_t>>& v, const char* key) {
    if (v && v->size() != n) fail("slice", "attribute '", key, "' has ", v->size(), " values for ", n, " axes");
  };
  check(start, "start");
  check(stop, "stop");
  check(step, "step");
  std::vector<SliceArg> args(static_cast<size_t>(rank));
  for (size_t i = 0; i < n; ++i) {
    int64_t ax = axes[i] < 0 ? axes[i] + rank : axes[i];
    if (ax < 0 || ax >= rank) fail("slice", "axis ", axes[i], " is out of range for rank ", rank);
    SliceArg& s = args[static_cast<size_t>(ax)];
    if (start) s.start = (*start)[i];
    if (stop) s.stop = (*stop)[i];
    if (step) s.step = (*step)[i];
  }
  return slice(a, args);
}

std::vector<Array> one(Array a) { return {std::move(a)}; }

const std::unordered_map<std::string, Entry>& table() {
  static const std::unordered_map<std::string, Entry> t = [] {
    std::unordered_map<std::string, Entry> m;
    // Every unary, binary and reduce row of the op registry; the other ops read their own attributes.
#define KILN_UNARY(F, name, ...) m[#name] = {1, 1, [](Call& c) { return one(kiln::name(c.in[0])); }};
#define KILN_BINARY(F, name, ...) m[#name] = {2, 2, [](Call& c) { return one(kiln::name(c.in[0], c.in[1])); }};
#define KILN_REDUCE(F, name)                                                                                      \
  m[#name] = {1, 1, [](Call& c) {                                                                                 \
                return one(kiln::name(c.in[0], c.attr.ints32_or("axes", {}), c.attr.bool_or("keepdims", false))); \
              }};
#define KILN_REDUCE_COMPOSITE(name) KILN_REDUCE(, name)
#include "ops/op_table.def"
    m["flatten"] = {1, 1, [](Call& c) { return one(flatten(c.in[0])); }};
    m["copy"] = {1, 1, [](Call& c) { return one(copy(c.in[0])); }};
    m["matmul"] = {2, 2, [](Call& c) { return one(matmul(c.in[0], c.in[1])); }};
#define ARGREDUCE(name)                                                                   \
  m[#name] = {1, 1, [](Call& c) {                                                         \
                std::optional<int> axis = c.attr.int32_opt("axis");                       \
                return one(kiln::name(c.in[0], axis, c.attr.bool_or("keepdims", false))); \
              }};
    ARGREDUCE(argmax)
    ARGREDUCE(argmin)
#undef ARGREDUCE
    m["var"] = {1, 1, [](Call& c) {
                  return one(var(c.in[0], c.attr.ints32_or("axes", {}), c.attr.bool_or("keepdims", false),
                                 c.attr.int32_or("ddof", 0)));
                }};
    m["softmax"] = {1, 1, [](Call& c) { return one(softmax(c.in[0], c.attr.ints32_or("axes", {-1}))); }};
    m["cumsum"] = {1, 1, [](Call& c) {
                     return one(cumsum(c.in[0], c.attr.int32("axis"), c.attr.bool_or("reverse", false),
                                       c.attr.bool_or("inclusive", true)));
                   }};
    // sorting and selection
    auto axis_of = [](Call& c) { return c.attr.int32_or("axis", -1); };
    m["sort"] = {1, 1, [=](Call& c) { return one(sort(c.in[0], axis_of(c))); }};
    m["argsort"] = {1, 1, [=](Call& c) { return one(argsort(c.in[0], axis_of(c))); }};
    m["partition"] = {1, 1, [=](Call& c) { return one(partition(c.in[0], c.attr.int32("kth"), axis_of(c))); }};
    m["argpartition"] = {1, 1, [=](Call& c) { return one(argpartition(c.in[0], c.attr.int32("kth"), axis_of(c))); }};
    m["topk"] = {1, 1, [=](Call& c) {
                   auto [values, indices] = topk(c.in[0], c.attr.int32("k"), axis_of(c));
                   return std::vector<Array>{values, indices};
                 }};
    // random numbers: the key is the last input
    m["random_split"] = {1, 1, [](Call& c) { return one(random::split(c.in[0], c.attr.int32_or("num", 2))); }};
    m["random_bits"] = {1, 1, [](Call& c) { return one(random::bits(shape_attr(c.attr, "shape"), c.in[0])); }};
    m["random_uniform"] = {
        1, 1, [](Call& c) {
          return one(random::uniform(shape_attr(c.attr, "shape"), c.in[0], c.attr.dtype_or("dtype", float32),
                                     c.attr.float_or("low", 0), c.attr.float_or("high", 1)));
        }};
    m["random_normal"] = {
        1, 1, [](Call& c) {
          return one(random::normal(shape_attr(c.attr, "shape"), c.in[0], c.attr.dtype_or("dtype", float32),
                                    c.attr.float_or("loc", 0), c.attr.float_or("scale", 1)));
        }};
    m["random_bernoulli"] = {2, 2, [](Call& c) { return one(random::bernoulli(c.in[0], c.in[1])); }};
    m["random_categorical"] = {2, 2, [=](Call& c) { return one(random::categorical(c.in[0], c.in[1], axis_of(c))); }};
    // collectives: `group` is a live group's id in this process (Group::id); 0, the default, the group of one rank
    auto group_of = [](Call& c) {
      const int64_t id = c.attr.int_or("group", 0);
      if (id < 0) fail("distributed", "attribute 'group' is a group's id, not ", id);
      return distributed::Group::find(static_cast<uint64_t>(id));
    };
    m["all_sum"] = {1, 1, [=](Call& c) { return one(all_sum(c.in[0], group_of(c))); }};
    m["all_gather"] = {1, 1,
                       [=](Call& c) { return one(all_gather(c.in[0], group_of(c), c.attr.int32_or("axis", 0))); }};
    m["reduce_scatter"] = {1, 1, [=](Call& c) { return one(reduce_scatter(c.in[0], group_of(c))); }};
    m["where"] = {3, 3, [](Call& c) { return one(where(c.in[0], c.in[1], c.in[2])); }};
    m["clip"] = {3, 3, [](Call& c) { return one(clip(c.in[0], c.in[1], c.in[2])); }};
    m["astype"] = {1, 1, [](Call& c) {
                     if (!c.attr.has("dtype")) fail("astype", "missing attribute 'dtype'");
                     return one(astype(c.in[0], c.attr.dtype_or("dtype", float32)));
                   }};
    // creation (no inputs)
    m["zeros"] = {0, 0,
                  [](Call& c) { return one(zeros(shape_attr(c.attr, "shape"), c.attr.dtype_or("dtype", float32))); }};
    m["ones"] = {0, 0,
                 [](Call& c) { return one(ones(shape_attr(c.attr, "shape"), c.attr.dtype_or("dtype", float32))); }};
    m["full"] = {
        0, 0, [](Call& c) {
          return one(full(shape_attr(c.attr, "shape"), c.attr.float_("value"), c.attr.dtype_or("dtype", float32)));
        }};
    m["arange"] = {0, 0, [](Call& c) {
                     return one(arange(c.attr.float_or("start", 0), c.attr.float_("stop"), c.attr.float_or("step", 1),
                                       c.attr.dtype_or("dtype", float32)));
                   }};
    m["linspace"] = {0, 0, [](Call& c) {
                       return one(linspace(c.attr.float_("start"), c.attr.float_("stop"), c.attr.int_("num"),
                                           c.attr.dtype_or("dtype", float32)));
                     }};
    m["eye"] = {0, 0, [](Call& c) {
                  return one(eye(c.attr.int_("n"), c.attr.int_opt("m"), c.attr.int_or("k", 0),
                                 c.attr.dtype_or("dtype", float32)));
                }};
    // layout
    m["reshape"] = {1, 1, [](Call& c) { return one(reshape(c.in[0], shape_attr(c.attr, "shape"))); }};
    m["transpose"] = {1, 1, [](Call& c) { return one(transpose(c.in[0], c.attr.ints32_or("perm", {}))); }};
    m["swapaxes"] = {1, 1,
                     [](Call& c) { return one(swapaxes(c.in[0], c.attr.int32("axis1"), c.attr.int32("axis2"))); }};
    m["broadcast_to"] = {1, 1, [](Call& c) { return one(broadcast_to(c.in[0], shape_attr(c.attr, "shape"))); }};
    m["expand_dims"] = {1, 1, [](Call& c) { return one(expand_dims(c.in[0], c.attr.int32("axis"))); }};
    m["squeeze"] = {1, 1, [](Call& c) { return one(squeeze(c.in[0], c.attr.ints32_or("axes", {}))); }};
    m["slice"] = {1, 1, [](Call& c) { return one(slice_op(c.in[0], c.attr)); }};
    m["concatenate"] = {1, -1, [](Call& c) { return one(concatenate(c.in, c.attr.int32_or("axis", 0))); }};
    m["stack"] = {1, -1, [](Call& c) { return one(stack(c.in, c.attr.int32_or("axis", 0))); }};
    m["split"] = {1, 1, [](Call& c) {
                    int axis = c.attr.int32_or("axis", 0);
                    auto idx = c.attr.ints_opt("indices");
                    auto sections = c.attr.int32_opt("sections");
                    if (idx && sections) fail("split", "give either 'sections' or 'indices', not both");
                    // Checked before splitting: an empty axis splits into any number of parts.
                    if (sections && static_cast<size_t>(*sections) != c.n_out)
                      fail("split", "'sections' is ", *sections, " but the node names ", c.n_out, " outputs");
                    std::vector<Array> parts;
                    if (idx)
                      parts = split(c.in[0], *idx, axis);
                    else
                      parts = split(c.in[0], sections.value_or(static_cast<int>(c.n_out)), axis);
                    return parts;
                  }};
    m["pad"] = {1, 1, [](Call& c) {
                  return one(pad(c.in[0], pad_widths("pad", c.attr.ints("widths")), c.attr.float_or("value", 0.0)));
                }};
    m["take"] = {2, 2, [](Call& c) { return one(take(c.in[0], c.in[1], c.attr.int32("axis"))); }};
    m["take_along_axis"] = {2, 2, [](Call& c) { return one(take_along_axis(c.in[0], c.in[1], c.attr.int32("axis"))); }};
    // Language-model ops (kiln/nn.h); optional operands follow the required ones.
    m["quantize"] = {1, 1, [](Call& c) {
                       auto [w, s, b] =
                           quantize(c.in[0], c.attr.int32_or("group_size", 64), c.attr.int32_or("bits", 4));
                       return std::vector<Array>{w, s, b};
                     }};
    m["dequantize"] = {3, 3, [](Call& c) {
                         return one(dequantize(c.in[0], c.in[1], c.in[2], c.attr.int32_or("group_size", 64),
                                               c.attr.int32_or("bits", 4)));
                       }};
    m["quantized_matmul"] = {
        4, 4, [](Call& c) {
          return one(quantized_matmul(
              c.in[0], c.in[1], c.in[2], c.in[3], c.attr.bool_or("transpose", true), c.attr.int32_or("group_size", 64),
              c.attr.int32_or("bits", 4),
              static_cast<QmmActivations>(c.attr.choice_or(
                  "activations", {std::begin(kQmmActivationNames), std::end(kQmmActivationNames)}, 0))));
        }};
    m["rms_norm"] = {1, 2, [](Call& c) {
                       auto w = c.in.size() > 1 ? std::optional<Array>(c.in[1]) : std::nullopt;
                       return one(rms_norm(c.in[0], w, static_cast<float>(c.attr.float_or("eps", 1e-5))));
                     }};
    m["layer_norm"] = {1, 3, [](Call& c) {
                         auto w = c.in.size() > 1 ? std::optional<Array>(c.in[1]) : std::nullopt;
                         auto b = c.in.size() > 2 ? std::optional<Array>(c.in[2]) : std::nullopt;
                         return one(layer_norm(c.in[0], w, b, static_cast<float>(c.attr.float_or("eps", 1e-5))));
                       }};
    m["rope"] = {2, 3, [](Call& c) {  // inputs x, offset (int32), optional freqs
                   auto freqs = c.in.size() > 2 ? std::optional<Array>(c.in[2]) : std::nullopt;
                   auto base = freqs ? std::nullopt
                                     : std::optional<float>(static_cast<float>(c.attr.float_or("base", 10000.0)));
                   return one(rope(c.in[0], c.attr.int32("dims"), c.attr.bool_or("traditional", false), base,
                                   static_cast<float>(c.attr.float_or("scale", 1.0)), c.in[1], freqs));
                 }};
    m["scaled_dot_product_attention"] = {
        3, 4, [](Call& c) {  // q, k, v, optional mask
          auto mask = c.in.size() > 3 ? std::optional<Array>(c.in[3]) : std::nullopt;
          return one(scaled_dot_product_attention(c.in[0], c.in[1], c.in[2], static_cast<float>(c.attr.float_("scale")),
                                                  mask, c.attr.bool_or("causal", false)));
        }};
    m["slice_update"] = {2, 2, [](Call& c) {
                           return one(slice_update(c.in[0], c.in[1], c.attr.ints("start"), c.attr.ints("stop"),
                                                   c.attr.ints_opt("step").value_or(Shape{})));
                         }};
    return m;
  }();
  return t;
}

}  // namespace

bool is_control_flow(const std::string& op) { return op == "if" || op == "while"; }

bool is_known_op(const std::string& op) { return is_control_flow(op) || table().count(op) > 0; }

std::vector<std::string> op_names() {
  std::vector<std::string> names{"if", "while"};
  for (const auto& [k, v] : table()) names.push_back(k);
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<Array> apply_op(const std::string& op, const std::vector<Array>& in, const Attrs& attrs, size_t n_outputs) {
  auto it = table().find(op);
  if (it == table().end()) fail("graph", "unknown op '", op, "'");
  const Entry& e = it->second;
  int n = static_cast<int>(in.size());
  if (n < e.min_in || (e.max_in >= 0 && n > e.max_in)) {
    if (e.min_in == e.max_in) fail(op.c_str(), "takes ", e.min_in, " input(s), got ", n);
    fail(op.c_str(), "takes at least ", e.min_in, " input(s), got ", n);
  }
  AttrReader reader(op, attrs);
  Call call{in, reader, n_outputs};
  std::vector<Array> out = e.fn(call);
  reader.done();
  if (out.size() != n_outputs) fail(op.c_str(), "produces ", out.size(), " value(s) but the node names ", n_outputs);
  return out;
}

}  // namespace kiln::runtime
