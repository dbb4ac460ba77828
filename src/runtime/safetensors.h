// The safetensors layout: an 8-byte little-endian header size, a JSON header
// {"name": {"dtype", "shape", "data_offsets"}, "__metadata__": {...}}, then the data.
// One checked reader for parameter files and model checkpoints.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "kiln/array.h"

namespace kiln::runtime {

struct SafetensorsTensor {
  std::string name;
  std::string code;  // the file's dtype code: "F32", "BF16", "U32", ...
  Dtype dtype = float32;
  Shape shape;
  size_t offset = 0;  // of the first byte, from the start of the file
  size_t bytes = 0;
};

struct SafetensorsHeader {
  std::vector<SafetensorsTensor> tensors;  // in file order
  std::map<std::string, std::string> metadata;  // "__metadata__" (string values)
};

/* Parses and checks the header of `file`: known dtypes, shapes whose byte size matches the
   offsets, data inside the file, no overlapping tensors. Errors are kiln::Error tagged `tag`,
   naming the file and the tensor. */
SafetensorsHeader parse_safetensors(const detail::MappedFile& file, const char* tag);

/* The tensor's values viewing the file in place (a copy when the data is not aligned to the
   dtype's size); the arrays keep the file mapped. */
Array safetensors_array(const std::shared_ptr<const detail::MappedFile>& file, const SafetensorsTensor& t);

/* The file's dtype code for `d` ("F32", ...). */
const char* safetensors_code(Dtype d);

}  // namespace kiln::runtime
