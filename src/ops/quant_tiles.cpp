// Permutes quantized weights between row order and tile order (ops/quant_tiles.h).
#include "ops/quant_tiles.h"

#include <cstring>

#include "core/tensor.h"
#include "core/thread_pool.h"
#include "kiln/eval.h"
#include "kiln/ops.h"

namespace kiln::quant_tiles {

using detail::Tensor;

namespace {

/* Moves `size`-byte elements of rows [r0, r1) between row order (index r * cols + c) and the
   tile order that `at(r, c)` gives. */
template <class At>
void move_rows(const char* src, char* dst, int64_t r0, int64_t r1, int64_t cols, size_t size, bool into_tiles, At at) {
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t row_at = r * cols + c, tile_at = at(r, c);
      std::memcpy(dst + (into_tiles ? tile_at : row_at) * size, src + (into_tiles ? row_at : tile_at) * size, size);
    }
}

}  // namespace

void permute(const char* op, const Tensor& packed, const Tensor& scales, const Tensor& biases, int group_size,
             bool into_tiles, Tensor& packed_out, Tensor& scales_out, Tensor& biases_out) {
  if (packed.ndim() != 2 || scales.ndim() != 2 || scales.shape != biases.shape || packed.dtype != uint32 ||
      scales.dtype != biases.dtype)
    fail(op, "tile order needs packed uint32 weights [n, k / 8] with scales and biases [n, k / group] of one dtype");
  const int64_t n = packed.shape[0], k = packed.shape[1] * 8;
  if (!fits(n, k, 4) || scales.shape[0] != n || scales.shape[1] * group_size != k)
    fail(op, "tile order needs 4-bit weights of whole tiles: rows a multiple of ", kRows, " and values of ", kChunk,
         ", got packed ", detail::shape_str(packed.shape), " with scales ", detail::shape_str(scales.shape),
         " in groups of ", group_size);
  if (!packed.row_contiguous() || !scales.row_contiguous() || !biases.row_contiguous())
    fail(op, "tile order is permuted from row-major arrays");
  packed_out = Tensor(packed.shape, packed.dtype);
  scales_out = Tensor(scales.shape, scales.dtype);
  biases_out = Tensor(biases.shape, biases.dtype);
  for (Tensor* t : {&packed_out, &scales_out, &biases_out}) t->allocate();
  const int64_t words = k / 32, groups = k / group_size;
  detail::parallel_for(n / kRows, 1, [&](int64_t t0, int64_t t1) {
    const int64_t r0 = t0 * kRows, r1 = t1 * kRows;
    move_rows(static_cast<const char*>(packed.raw()), static_cast<char*>(packed_out.raw()), r0, r1, words, 16,
              into_tiles, [&](int64_t r, int64_t w) { return tile_order::word_at(r, w, k); });
    const int bits = tile_order::group_bits_of(group_size);
    auto group = [&](int64_t r, int64_t j) { return tile_order::group_at(r, j, k, bits); };
    move_rows(static_cast<const char*>(scales.raw()), static_cast<char*>(scales_out.raw()), r0, r1, groups,
              scales.itemsize(), into_tiles, group);
    move_rows(static_cast<const char*>(biases.raw()), static_cast<char*>(biases_out.raw()), r0, r1, groups,
              biases.itemsize(), into_tiles, group);
  });
}

std::tuple<Array, Array, Array> tiled(const Array& packed, const Array& scales, const Array& biases, int group_size) {
  auto host = [](const Array& a) {
    Array c = a.device().type == Device::Type::cpu ? a : to(a, Device::cpu());
    c.eval();
    if (!c.tensor().row_contiguous()) {
      c = copy(c);
      c.eval();
    }
    return c;
  };
  const Array p = host(packed), s = host(scales), b = host(biases);
  auto out = std::make_shared<std::array<Tensor, 3>>();
  permute("quant_tiles", p.tensor(), s.tensor(), b.tensor(), group_size, true, (*out)[0], (*out)[1], (*out)[2]);
  auto wrap = [&](const Tensor& t) {
    return external_array(t.raw(), t.shape, t.dtype, std::shared_ptr<const void>(out, out.get()));
  };
  return {wrap((*out)[0]), wrap((*out)[1]), wrap((*out)[2])};
}

}  // namespace kiln::quant_tiles
