// Parameter files in the safetensors layout: an 8-byte little-endian header size,
// a JSON header {"name": {"dtype", "shape", "data_offsets"}}, then the data.
// Loading maps the file; arrays view the mapping and keep it alive.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "core/tensor.h"
#include "kiln/graph.h"
#include "runtime/json.h"

namespace kiln {

namespace {

struct DtypeCode {
  const char* code;
  Dtype dtype;
};
constexpr DtypeCode kCodes[] = {{"BOOL", bool_},   {"U8", uint8},    {"I8", int8},     {"U16", uint16},
                                {"I16", int16},    {"U32", uint32},  {"I32", int32},   {"U64", uint64},
                                {"I64", int64},    {"F16", float16}, {"BF16", bfloat16}, {"F32", float32},
                                {"F64", float64}};

const char* code_of(Dtype d) {
  for (const auto& c : kCodes)
    if (c.dtype == d) return c.code;
  return "?";
}

// Keeps the mapping (and the fd's file) alive for as long as any array views it.
struct Mapping {
  void* addr = MAP_FAILED;
  size_t size = 0;
  std::shared_ptr<detail::Buffer> buffer;
  ~Mapping() {
    if (addr != MAP_FAILED) munmap(addr, size);
  }
};

}  // namespace

std::map<std::string, Array> load_params(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("load_params", "cannot open '", path, "': ", std::strerror(errno));
  struct stat st{};
  if (fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    fail("load_params", "cannot stat '", path, "': ", std::strerror(e));
  }
  auto map = std::make_shared<Mapping>();
  map->size = static_cast<size_t>(st.st_size);
  if (map->size < 8) {
    ::close(fd);
    fail("load_params", path, ": truncated: ", map->size, " bytes, the header size alone takes 8");
  }
  // Private and writable: copy-on-write, so a kernel that reuses an input buffer never reaches the file.
  map->addr = mmap(nullptr, map->size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  int map_errno = errno;
  ::close(fd);
  if (map->addr == MAP_FAILED) fail("load_params", "cannot map '", path, "': ", std::strerror(map_errno));
  const uint8_t* base = static_cast<const uint8_t*>(map->addr);
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; --i) hlen = (hlen << 8) | base[i];
  if (hlen > map->size - 8)
    fail("load_params", path, ": truncated: header claims ", hlen, " bytes, file has ", map->size - 8, " after the size");
  std::string header(reinterpret_cast<const char*>(base + 8), static_cast<size_t>(hlen));
  runtime::Json root = runtime::parse_json(header, path + " (header)");
  if (root.kind != runtime::Json::Kind::object) fail("load_params", path, ": header is not a JSON object");
  size_t data_start = 8 + static_cast<size_t>(hlen);
  size_t data_size = map->size - data_start;
  map->buffer = detail::Buffer::borrow(map->addr, map->size);
  std::shared_ptr<detail::Buffer> shared(map, map->buffer.get());

  std::map<std::string, Array> out;
  for (const auto& [name, info] : root.object) {
    if (name == "__metadata__") continue;
    auto bad = [&](const std::string& msg) { fail("load_params", path, ": tensor '", name, "': ", msg); };
    if (info.kind != runtime::Json::Kind::object) bad("entry is not an object");
    const runtime::Json* dt = info.get("dtype");
    const runtime::Json* shp = info.get("shape");
    const runtime::Json* off = info.get("data_offsets");
    if (!dt || dt->kind != runtime::Json::Kind::string) bad("missing string 'dtype'");
    if (!shp || shp->kind != runtime::Json::Kind::array) bad("missing list 'shape'");
    if (!off || off->kind != runtime::Json::Kind::array || off->array.size() != 2) bad("missing 'data_offsets' pair");
    Dtype dtype = float32;
    bool known = false;
    for (const auto& c : kCodes)
      if (dt->str == c.code) dtype = c.dtype, known = true;
    if (!known) bad("unknown dtype '" + dt->str + "'");
    Shape shape;
    uint64_t count = 1;
    for (const auto& d : shp->array) {
      if (d.kind != runtime::Json::Kind::integer || d.integer < 0) bad("shape entries must be non-negative integers");
      if (d.integer > 0 && count > (uint64_t{1} << 48) / static_cast<uint64_t>(d.integer)) bad("shape is too large");
      shape.push_back(d.integer);
      count *= static_cast<uint64_t>(d.integer);
    }
    for (const auto& o : off->array)
      if (o.kind != runtime::Json::Kind::integer || o.integer < 0) bad("data_offsets must be non-negative integers");
    uint64_t b = static_cast<uint64_t>(off->array[0].integer), e = static_cast<uint64_t>(off->array[1].integer);
    if (b > e || e > data_size)
      bad(detail::concat("data_offsets [", b, ", ", e, "] exceed the ", data_size, " data bytes (truncated file?)"));
    if (e - b != count * static_cast<uint64_t>(size_of(dtype)))
      bad(detail::concat("holds ", e - b, " bytes; ", dt->str, " ", detail::shape_str(shape), " needs ",
                         count * static_cast<uint64_t>(size_of(dtype))));
    size_t at = data_start + static_cast<size_t>(b);
    if (at % 64 != 0) {  // unaligned data: copy rather than hand kernels an odd address
      out[name] = array(base + at, shape, dtype);
      continue;
    }
    detail::Tensor t(shape, dtype);
    t.buffer = shared;
    t.offset = static_cast<int64_t>(at / static_cast<size_t>(size_of(dtype)));
    out[name] = Array::from_tensor(std::move(t), Device::cpu());
  }
  return out;
}

void save_params(const std::string& path, const std::map<std::string, Array>& params) {
  std::string header = "{";
  uint64_t offset = 0;
  std::vector<std::pair<uint64_t, const Array*>> layout;
  for (const auto& [name, a] : params) {
    if (!a.valid()) fail("save_params", "parameter '", name, "' is empty");
    offset = (offset + 63) / 64 * 64;
    uint64_t bytes = a.nbytes();
    if (header.size() > 1) header += ",";
    header += runtime::json_quote(name) + ":{\"dtype\":\"" + code_of(a.dtype()) + "\",\"shape\":[";
    for (int i = 0; i < a.ndim(); ++i) header += (i ? "," : "") + std::to_string(a.shape(i));
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + bytes) + "]}";
    layout.emplace_back(offset, &a);
    offset += bytes;
  }
  header += "}";
  while ((8 + header.size()) % 64 != 0) header += ' ';  // data starts 64-byte aligned
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) fail("save_params", "cannot write '", path, "'");
  uint64_t hlen = header.size();
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(hlen >> (8 * i));
  f.write(reinterpret_cast<const char*>(len), 8);
  f << header;
  uint64_t written = 0;
  for (const auto& [at, a] : layout) {
    std::string pad(static_cast<size_t>(at - written), '\0');
    f.write(pad.data(), static_cast<std::streamsize>(pad.size()));
    std::vector<char> bytes(a->nbytes());
    a->copy_to(bytes.data(), a->dtype());
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    written = at + bytes.size();
  }
  if (!f) fail("save_params", "write to '", path, "' failed");
}

}  // namespace kiln
