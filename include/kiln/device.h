// Where an array lives.
#pragma once

#include <string>

namespace kiln {

struct Device {
  enum class Type { cpu, cuda };
  Type type = Type::cpu;
  int index = 0;

  static Device cpu() { return {Type::cpu, 0}; }
  static Device cuda(int i = 0) { return {Type::cuda, i}; }
  bool operator==(const Device&) const = default;
  std::string str() const;
};

/* The device new arrays are placed on (per process; CPU unless changed). */
Device default_device();
void set_default_device(Device d);

}  // namespace kiln
