// The memory plan of one method: every planned value gets an offset in its arena
// (device or host) such that two values live at the same time never share a byte,
// while values with disjoint lifetimes reuse memory. Buffers, inputs and weights are
// not planned: buffers persist across calls and methods, so they live outside arenas.
#pragma once

#include "kvrt/core/result.h"
#include "kvrt/format/program.h"

namespace kvrt::lowering {

// Lifetimes are instruction ranges: from the instruction that writes a value to the
// last one that reads it; method outputs live to the end of the method. Offsets are
// multiples of kPlanAlignment. Sets storage offset/nbytes of every planned value and
// the method's arena sizes. Placement is greedy, largest value first, lowest offset
// that fits.
Status plan_memory(format::MethodSpec& method);

}  // namespace kvrt::lowering
