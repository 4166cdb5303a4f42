// Weight dtype conversion while writing: f32, f16 and bf16 in any direction, through
// f32 (bf16 rounds to nearest even, core/dtype.h). Same dtype is a plain copy.
#pragma once

#include <cstddef>
#include <span>

#include "kvrt/core/dtype.h"
#include "kvrt/core/result.h"

namespace kvrt::exporter {

// Converts `src` (elements of `from`) into `dst` (elements of `to`). Both spans must
// hold the same element count. Large tensors are split across threads.
Status convert_weight(std::span<const std::byte> src, DType from, std::span<std::byte> dst,
                      DType to);

}  // namespace kvrt::exporter
