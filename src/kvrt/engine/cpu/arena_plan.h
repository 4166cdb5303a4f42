// Lifetime-based placement of the CPU engine's intermediates in one scratch arena:
// tensors whose lifetimes overlap never share bytes, others may.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace kvrt::engine::cpu {

struct ArenaRequest {
  int64_t first_use = 0;  // node index that produces the tensor
  int64_t last_use = 0;   // last node index that reads it (>= first_use)
  int64_t bytes = 0;
};

struct ArenaPlan {
  std::vector<int64_t> offsets;  // parallel to the requests, multiples of kArenaAlignment
  int64_t total_bytes = 0;
};

inline constexpr int64_t kArenaAlignment = 64;

// Greedy first fit, largest tensors first: O(n^2), fine for a few thousand tensors.
ArenaPlan plan_arena(std::span<const ArenaRequest> requests);

}  // namespace kvrt::engine::cpu
