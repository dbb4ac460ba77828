// The calling thread's own default device, over the process's (set_default_device): a
// tensor-parallel rank's thread makes the arrays its ops create (constants, masks, indices) on
// its own GPU whatever device the program chose as its default.
#pragma once

#include "kiln/device.h"

namespace kiln::detail {

class ThreadDefaultDevice {
 public:
  explicit ThreadDefaultDevice(Device d);  // until this is destroyed
  ~ThreadDefaultDevice();
  ThreadDefaultDevice(const ThreadDefaultDevice&) = delete;
  ThreadDefaultDevice& operator=(const ThreadDefaultDevice&) = delete;

 private:
  int saved_;
};

}  // namespace kiln::detail
