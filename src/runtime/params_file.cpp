// Parameter files in the safetensors layout (runtime/safetensors.h). Loading maps the
// file read-only; arrays view the mapping and keep it alive.
#include <fstream>
#include <sstream>

#include "kiln/graph.h"
#include "runtime/json.h"
#include "runtime/safetensors.h"

namespace kiln {

std::map<std::string, Array> load_params(const std::string& path) {
  auto file = detail::MappedFile::open(path, "load_params");
  std::map<std::string, Array> out;
  for (const auto& t : runtime::parse_safetensors(*file, "load_params").tensors)
    out[t.name] = runtime::safetensors_array(file, t);
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
    // Streamed, not joined with operator+ (which GCC 12 misreads as an overlapping copy, -Wrestrict).
    std::ostringstream entry;
    entry << runtime::json_quote(name) << ":{\"dtype\":\"" << runtime::safetensors_code(a.dtype()) << "\",\"shape\":[";
    for (int i = 0; i < a.ndim(); ++i) entry << (i ? "," : "") << a.shape(i);
    entry << "],\"data_offsets\":[" << offset << "," << offset + bytes << "]}";
    header += entry.str();
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
