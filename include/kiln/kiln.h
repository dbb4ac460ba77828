// kiln: trace array programs, fuse them into kernels, replay them from any thread.
#pragma once

#include "kiln/array.h"
#include "kiln/cache.h"
#include "kiln/config.h"
#include "kiln/device.h"
#include "kiln/dtype.h"
#include "kiln/error.h"
#include "kiln/eval.h"
#include "kiln/half.h"
#include "kiln/ops.h"
#include "kiln/nn.h"
#include "kiln/random.h"
#include "kiln/compile.h"
#include "kiln/graph.h"
#include "kiln/executable.h"
#include "kiln/llm.h"
#include "kiln/distributed.h"
