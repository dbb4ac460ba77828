// The exception kiln throws for bad input; what() starts with the op's tag.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace kiln {

class Error : public std::invalid_argument {
 public:
  explicit Error(const std::string& msg) : std::invalid_argument(msg) {}
};

namespace detail {
template <class... Parts>
std::string concat(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  return os.str();
}
}  // namespace detail

/* Throws kiln::Error with "[op] " followed by the parts streamed together. */
template <class... Parts>
[[noreturn]] void fail(const char* op, const Parts&... parts) {
  throw Error(detail::concat("[", op, "] ", parts...));
}

}  // namespace kiln
