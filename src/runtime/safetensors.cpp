#include "runtime/safetensors.h"

#include "core/tensor.h"
#include "runtime/json.h"

namespace kiln::runtime {

namespace {

struct DtypeCode {
  const char* code;
  Dtype dtype;
};
constexpr DtypeCode kCodes[] = {{"BOOL", bool_}, {"U8", uint8},    {"I8", int8},       {"U16", uint16},
                                {"I16", int16},  {"U32", uint32},  {"I32", int32},     {"U64", uint64},
                                {"I64", int64},  {"F16", float16}, {"BF16", bfloat16}, {"F32", float32},
                                {"F64", float64}};

}  // namespace

const char* safetensors_code(Dtype d) {
  for (const auto& c : kCodes)
    if (c.dtype == d) return c.code;
  return "?";
}

SafetensorsHeader parse_safetensors(const detail::MappedFile& file, const char* tag) {
  const std::string& path = file.path();
  const uint8_t* base = file.data();
  const size_t size = file.size();
  if (size < 8) fail(tag, path, ": truncated: ", size, " bytes, the header size alone takes 8");
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; --i) hlen = (hlen << 8) | base[i];
  if (hlen > size - 8)
    fail(tag, path, ": truncated: header claims ", hlen, " bytes, file has ", size - 8, " after the size");
  Json root =
      parse_json(std::string(reinterpret_cast<const char*>(base + 8), static_cast<size_t>(hlen)), path + " (header)");
  if (root.kind != Json::Kind::object) fail(tag, path, ": header is not a JSON object");
  const size_t data_start = 8 + static_cast<size_t>(hlen);
  const uint64_t data_size = size - data_start;

  SafetensorsHeader out;
  for (const auto& entry : root.object) {
    const std::string& name = entry.first;  // not a structured binding: clang 14 cannot capture those
    const Json& info = entry.second;
    if (name == "__metadata__") {
      if (info.kind != Json::Kind::object) fail(tag, path, ": '__metadata__' is not an object");
      for (const auto& [k, v] : info.object) {
        if (v.kind != Json::Kind::string) fail(tag, path, ": '__metadata__' entry '", k, "' is not a string");
        out.metadata[k] = v.str;
      }
      continue;
    }
    auto bad = [&](const auto&... msg) { fail(tag, path, ": tensor '", name, "': ", msg...); };
    if (info.kind != Json::Kind::object) bad("entry is not an object");
    const Json* dt = info.get("dtype");
    const Json* shp = info.get("shape");
    const Json* off = info.get("data_offsets");
    if (!dt || dt->kind != Json::Kind::string) bad("missing string 'dtype'");
    if (!shp || shp->kind != Json::Kind::array) bad("missing list 'shape'");
    if (!off || off->kind != Json::Kind::array || off->array.size() != 2) bad("missing 'data_offsets' pair");
    SafetensorsTensor t;
    t.name = name;
    t.code = dt->str;
    const DtypeCode* known = nullptr;
    for (const auto& c : kCodes)
      if (dt->str == c.code) known = &c;
    if (!known) bad("unknown dtype '", dt->str, "'");
    t.dtype = known->dtype;
    uint64_t count = 1;
    for (const auto& d : shp->array) {
      if (d.kind != Json::Kind::integer || d.integer < 0) bad("shape entries must be non-negative integers");
      if (d.integer > (int64_t{1} << 48) ||
          (d.integer > 0 && count > (uint64_t{1} << 48) / static_cast<uint64_t>(d.integer)))
        bad("shape is too large");  // each dimension too, as a 0 elsewhere keeps the count at 0
      t.shape.push_back(d.integer);
      count *= static_cast<uint64_t>(d.integer);
    }
    for (const auto& o : off->array)
      if (o.kind != Json::Kind::integer || o.integer < 0) bad("data_offsets must be non-negative integers");
    uint64_t b = static_cast<uint64_t>(off->array[0].integer), e = static_cast<uint64_t>(off->array[1].integer);
    if (b > e || e > data_size)
      bad("data_offsets [", b, ", ", e, "] exceed the ", data_size, " data bytes (truncated file?)");
    const uint64_t need = count * static_cast<uint64_t>(size_of(t.dtype));
    if (e - b != need) bad("holds ", e - b, " bytes; ", dt->str, " ", detail::shape_str(t.shape), " needs ", need);
    t.offset = data_start + static_cast<size_t>(b);
    t.bytes = static_cast<size_t>(need);
    out.tensors.push_back(std::move(t));
  }
  // Tensors may not share bytes: each one's data is its own.
  std::vector<detail::ByteRange> ranges;
  for (const auto& t : out.tensors) ranges.push_back({&t.name, t.offset, t.bytes});
  if (auto clash = detail::first_overlap(std::move(ranges)))
    fail(tag, path, ": tensor '", clash->first, "': data overlaps tensor '", clash->second, "'");
  return out;
}

Array safetensors_array(const std::shared_ptr<const detail::MappedFile>& file, const SafetensorsTensor& t) {
  return detail::mapped_array(file, t.offset, t.shape, t.dtype);
}

}  // namespace kiln::runtime
