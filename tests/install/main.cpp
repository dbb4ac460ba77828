// Consumer of an installed or embedded kiln: builds a small lazy graph and checks it.
#include <cstdio>
#include <vector>

#include <kiln/kiln.h>

int main() {
  kiln::Array x = kiln::array(std::vector<float>{0, 1, 2, 3}, {2, 2});
  kiln::Array y = kiln::exp(x * 0.0f) + x;  // 1 + x
  std::vector<float> v = y.to_vector<float>();
  const std::vector<float> want{1, 2, 3, 4};
  if (v != want) {
    std::fprintf(stderr, "consumer: wrong result %g %g %g %g\n", v[0], v[1], v[2], v[3]);
    return 1;
  }
  std::printf("consumer ok: kiln linked, y = [%g %g %g %g]\n", v[0], v[1], v[2], v[3]);
  return 0;
}
