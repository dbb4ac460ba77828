// kiln arrays read from Python as host memory (numpy.cpp).
#pragma once

#include "common.h"

namespace kpy {

/* The buffer protocol's slots for the Array type (memoryview, NumPy's buffer import). */
extern PyType_Slot buffer_slots[];
/* A read-only NumPy view of the evaluated data (a host copy first for a device array). */
nb::object to_numpy(const kiln::Array& a, bool bfloat16_bits);
/* The single element as a Python scalar. */
nb::object item(const kiln::Array& a);

}  // namespace kpy
