#include <gtest/gtest.h>

#include <vector>

#include "kvrt/engine/cpu/arena_plan.h"

namespace kvrt::engine::cpu {
namespace {

bool overlap(int64_t a, int64_t a_bytes, int64_t b, int64_t b_bytes) {
  return a < b + b_bytes && b < a + a_bytes;
}

TEST(ArenaPlan, TensorsAliveTogetherNeverShareBytes) {
  const std::vector<ArenaRequest> requests = {{0, 2, 100}, {1, 3, 200}, {2, 2, 64},
                                              {3, 5, 300}, {4, 4, 10},  {5, 6, 1000}};
  const ArenaPlan plan = plan_arena(requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(plan.offsets[i] % kArenaAlignment, 0);
    EXPECT_LE(plan.offsets[i] + requests[i].bytes, plan.total_bytes);
    for (size_t j = i + 1; j < requests.size(); ++j) {
      const bool alive_together = requests[i].first_use <= requests[j].last_use &&
                                  requests[j].first_use <= requests[i].last_use;
      if (alive_together) {
        EXPECT_FALSE(
            overlap(plan.offsets[i], requests[i].bytes, plan.offsets[j], requests[j].bytes))
            << i << " " << j;
      }
    }
  }
}

TEST(ArenaPlan, TensorsWithDisjointLifetimesReuseBytes) {
  const std::vector<ArenaRequest> chain = {{0, 1, 256}, {1, 2, 256}, {2, 3, 256}, {3, 4, 256}};
  EXPECT_EQ(plan_arena(chain).total_bytes, 512);
}

}  // namespace
}  // namespace kvrt::engine::cpu
