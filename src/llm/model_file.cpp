// ModelFile: opens the right reader, answers metadata queries with checked conversions, and
// hands out weights (converted ones made once and kept).
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/config.h"
#include "llm/model_file_impl.h"

namespace kiln::llm {

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

using Kind = MetaValue::Kind;

// Looks `key` up and converts its value with `convert`, which throws on the wrong kind.
template <class F>
auto find_as(const ModelFile::Impl& m, const std::string& key, F convert)
    -> std::optional<decltype(convert(m.meta.begin()->second))> {
  auto it = m.meta.find(key);
  if (it == m.meta.end()) return std::nullopt;
  return convert(it->second);
}

template <class F>
auto get_as(const ModelFile::Impl& m, const std::string& key, F convert) {
  auto v = find_as(m, key, convert);
  if (!v) fail(m.format.c_str(), m.path, ": metadata '", key, "' is missing");
  return std::move(*v);
}

// The converters, one per getter: each names the file and key when the value is of another kind.
struct Convert {
  const ModelFile::Impl& m;
  const std::string& key;

  [[noreturn]] void wrong(const MetaValue& v, const char* want) const {
    fail(m.format.c_str(), m.path, ": metadata '", key, "' is ", v.type, ", not ", want);
  }
  void check_range(const MetaValue& v) const {
    if (v.out_of_range) fail(m.format.c_str(), m.path, ": metadata '", key, "' holds a value past the int64 range");
  }
  int64_t to_int(const MetaValue& v) const {
    if (v.kind == Kind::boolean) return v.boolean ? 1 : 0;
    if (v.kind != Kind::integer) wrong(v, "an integer");
    check_range(v);
    return v.integer;
  }
  double to_float(const MetaValue& v) const {
    if (v.kind == Kind::real) return v.real;
    if (v.kind != Kind::integer) wrong(v, "a number");
    check_range(v);
    return static_cast<double>(v.integer);
  }
  bool to_bool(const MetaValue& v) const {
    if (v.kind != Kind::boolean) wrong(v, "a bool");
    return v.boolean;
  }
  std::string to_string(const MetaValue& v) const {
    if (v.kind != Kind::string) wrong(v, "a string");
    return v.str;
  }
  std::vector<std::string> to_strings(const MetaValue& v) const {
    if (v.kind != Kind::array || v.elem != Kind::string) wrong(v, "an array of strings");
    return v.strings;
  }
  std::vector<float> to_floats(const MetaValue& v) const {
    if (v.kind == Kind::array && v.elem == Kind::real) return {v.reals.begin(), v.reals.end()};
    if (v.kind != Kind::array || v.elem != Kind::integer) wrong(v, "an array of numbers");
    check_range(v);
    return {v.ints.begin(), v.ints.end()};
  }
  std::vector<int64_t> to_ints(const MetaValue& v) const {
    if (v.kind != Kind::array || (v.elem != Kind::integer && v.elem != Kind::boolean)) wrong(v, "an array of integers");
    check_range(v);
    return v.ints;
  }
};

#define KILN_META_GETTERS(Type, Name, method)                                                        \
  Type ModelFile::get_##Name(const std::string& key) const {                                         \
    return get_as(*impl_, key, [&](const MetaValue& v) { return Convert{*impl_, key}.method(v); });  \
  }                                                                                                  \
  std::optional<Type> ModelFile::find_##Name(const std::string& key) const {                         \
    return find_as(*impl_, key, [&](const MetaValue& v) { return Convert{*impl_, key}.method(v); }); \
  }

}  // namespace

KILN_META_GETTERS(int64_t, int, to_int)
KILN_META_GETTERS(double, float, to_float)
KILN_META_GETTERS(bool, bool, to_bool)
KILN_META_GETTERS(std::string, string, to_string)
KILN_META_GETTERS(std::vector<std::string>, strings, to_strings)
KILN_META_GETTERS(std::vector<float>, floats, to_floats)
KILN_META_GETTERS(std::vector<int64_t>, ints, to_ints)
#undef KILN_META_GETTERS

std::shared_ptr<ModelFile> ModelFile::open(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return std::make_shared<ModelFile>(open_safetensors(path));
  auto file = detail::MappedFile::open(path, "model_file");
  if (file->size() >= 4 && std::memcmp(file->data(), "GGUF", 4) == 0)
    return std::make_shared<ModelFile>(read_gguf(file));
  if (ends_with(path, ".safetensors")) return std::make_shared<ModelFile>(open_safetensors(path));
  fail("model_file", path, ": neither a GGUF file (no 'GGUF' magic) nor a .safetensors file or directory");
}

ModelFile::ModelFile(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ModelFile::~ModelFile() = default;

const std::string& ModelFile::path() const { return impl_->path; }
std::string ModelFile::format() const { return impl_->format; }
bool ModelFile::has(const std::string& key) const { return impl_->meta.count(key) != 0; }

std::vector<std::string> ModelFile::metadata_keys() const {
  std::vector<std::string> keys;
  for (const auto& [k, v] : impl_->meta) keys.push_back(k);
  return keys;
}

std::vector<std::string> ModelFile::tensor_names() const {
  std::vector<std::string> names;
  for (const auto& [k, v] : impl_->tensors) names.push_back(k);
  return names;
}

bool ModelFile::has_tensor(const std::string& name) const { return impl_->tensors.count(name) != 0; }

const TensorInfo& ModelFile::tensor_info(const std::string& name) const {
  auto it = impl_->tensors.find(name);
  if (it == impl_->tensors.end()) fail(impl_->format.c_str(), impl_->path, ": no tensor '", name, "'");
  return it->second.info;
}

Weight ModelFile::weight(const std::string& name) const {
  tensor_info(name);  // names the file when there is no such tensor
  const TensorEntry& e = impl_->tensors.at(name);
  if (!e.converts) return e.load();
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (auto it = impl_->converted.find(name); it != impl_->converted.end()) return it->second;
  if (e.dequantizes)
    std::call_once(impl_->note_once, [&] { std::fprintf(stderr, "%s\n", impl_->dequantize_note.c_str()); });
  Weight w = e.load();
  impl_->converted.emplace(name, w);
  return w;
}

std::string models_dir() {
  if (std::string d = config::text(config::Knob::models_dir); !d.empty()) return d;
  if (std::string x = config::system_variable("XDG_CACHE_HOME"); !x.empty()) return x + "/kiln-models";
  if (std::string h = config::system_variable("HOME"); !h.empty()) return h + "/.cache/kiln-models";
  fail("llm", "no models folder: set KILN_MODELS_DIR (or HOME)");
}

std::string default_model_path() { return models_dir() + "/SmolLM2-135M-Instruct.Q4_1.gguf"; }

}  // namespace kiln::llm
