#include "kvrt/engine/cpu/arena_plan.h"

#include <algorithm>
#include <numeric>

namespace kvrt::engine::cpu {
namespace {

int64_t align_up(int64_t value) {
  return (value + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
}

bool lifetimes_overlap(const ArenaRequest& a, const ArenaRequest& b) {
  return a.first_use <= b.last_use && b.first_use <= a.last_use;
}

}  // namespace

ArenaPlan plan_arena(std::span<const ArenaRequest> requests) {
  ArenaPlan plan;
  plan.offsets.assign(requests.size(), 0);
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return requests[a].bytes > requests[b].bytes; });

  struct Placed {
    size_t index;
    int64_t begin, end;
  };
  std::vector<Placed> placed;  // sorted by begin
  for (size_t index : order) {
    const ArenaRequest& request = requests[index];
    const int64_t size = align_up(std::max<int64_t>(request.bytes, 1));
    // Lowest offset that fits between the placed tensors alive at the same time.
    int64_t offset = 0;
    for (const Placed& other : placed) {
      if (!lifetimes_overlap(request, requests[other.index])) continue;
      if (offset + size <= other.begin) break;
      offset = std::max(offset, other.end);
    }
    plan.offsets[index] = offset;
    plan.total_bytes = std::max(plan.total_bytes, offset + size);
    Placed entry{index, offset, offset + size};
    placed.insert(
        std::upper_bound(placed.begin(), placed.end(), entry,
                         [](const Placed& a, const Placed& b) { return a.begin < b.begin; }),
        entry);
  }
  return plan;
}

}  // namespace kvrt::engine::cpu
