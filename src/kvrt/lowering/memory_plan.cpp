#include "kvrt/lowering/memory_plan.h"

#include <algorithm>
#include <limits>
#include <variant>

namespace kvrt::lowering {
namespace {

using format::ValueIndex;

struct Interval {
  size_t value = 0;
  uint64_t size = 0;  // reserved bytes (aligned)
  int start = std::numeric_limits<int>::max();
  int end = -1;
  uint64_t offset = 0;
};

uint64_t align(uint64_t bytes) {
  return (bytes + format::kPlanAlignment - 1) / format::kPlanAlignment * format::kPlanAlignment;
}

void touch(std::vector<Interval>& lives, ValueIndex v, int step) {
  Interval& life = lives[static_cast<size_t>(v)];
  life.start = std::min(life.start, step);
  life.end = std::max(life.end, step);
}

}  // namespace

Status plan_memory(format::MethodSpec& method) {
  std::vector<Interval> lives(method.values.size());
  for (size_t i = 0; i < method.instructions.size(); ++i) {
    const int step = static_cast<int>(i);
    std::visit(
        [&](const auto& instruction) {
          using T = std::decay_t<decltype(instruction)>;
          if constexpr (std::is_same_v<T, format::DelegateCall>) {
            for (ValueIndex v : instruction.args) touch(lives, v, step);
          } else if constexpr (std::is_same_v<T, format::HostKernel>) {
            for (ValueIndex v : instruction.inputs) touch(lives, v, step);
            for (ValueIndex v : instruction.outputs) touch(lives, v, step);
          } else {
            touch(lives, instruction.src, step);
            touch(lives, instruction.dst, step);
          }
        },
        method.instructions[i]);
  }
  const int end = static_cast<int>(method.instructions.size());
  for (ValueIndex v : method.outputs) touch(lives, v, end);

  std::vector<Interval> planned[2];  // by arena
  for (size_t v = 0; v < method.values.size(); ++v) {
    const format::ValueSpec& value = method.values[v];
    if (value.storage.kind != format::StorageKind::kPlanned) continue;
    KVRT_ASSIGN_OR_RETURN(uint64_t bytes, format::max_nbytes(value.dtype, value.shape));
    Interval life = lives[v];
    life.value = v;
    life.size = align(bytes);
    if (life.end < 0) life.start = life.end = 0;
    method.values[v].storage.nbytes = bytes;
    planned[static_cast<int>(value.storage.arena)].push_back(life);
  }
  uint64_t arena_bytes[2] = {0, 0};
  for (int arena = 0; arena < 2; ++arena) {
    std::vector<Interval>& items = planned[arena];
    std::stable_sort(items.begin(), items.end(),
                     [](const Interval& a, const Interval& b) { return a.size > b.size; });
    std::vector<const Interval*> placed;
    for (Interval& item : items) {
      std::vector<std::pair<uint64_t, uint64_t>> busy;
      for (const Interval* other : placed) {
        if (other->start <= item.end && item.start <= other->end) {
          busy.emplace_back(other->offset, other->offset + other->size);
        }
      }
      std::sort(busy.begin(), busy.end());
      uint64_t offset = 0;
      for (const auto& [lo, hi] : busy) {
        if (offset + item.size <= lo) break;
        offset = std::max(offset, hi);
      }
      item.offset = offset;
      placed.push_back(&item);
      arena_bytes[arena] = std::max(arena_bytes[arena], offset + item.size);
      method.values[item.value].storage.offset = offset;
    }
  }
  method.device_arena_bytes = arena_bytes[static_cast<int>(format::Arena::kDevice)];
  method.host_arena_bytes = arena_bytes[static_cast<int>(format::Arena::kHost)];
  return Status();
}

}  // namespace kvrt::lowering
