// The lab's sweeps (lab.h): every launch geometry of decode_linear at a row's shape,
// decode_attention's split counts and launch points, and variants of the whole decode
// step, each passed to the launch it times (DecodeLinear::tuning,
// DecodeAttention::next_launch), and the chain-floor table.
#include <algorithm>
#include <cstdio>
#include <string>
#include <tuple>
#include <vector>

#include "lab/lab.h"

namespace kvrt::engine::cuda::bench {

void FloorTable::add(const std::string& model, const std::string& kernel, const std::string& shape,
                     double bytes, double ours_us, const ChainFloor& floor) {
  char line[512];
  std::snprintf(line, sizeof(line),
                "| %s | %s | %s | %.2f | %.0f%% | %d x 256 threads/SM, %d loads | %.2f | %.2f | "
                "%.2f | %.2f |",
                model.c_str(), kernel.c_str(), shape.c_str(), floor.us,
                100.0 * bytes / (floor.us * 1e3) / copy_gbs, floor.per_sm, floor.loads,
                floor.counter_us, floor.block_share_us, ours_us, ours_us - floor.us);
  rows.push_back(line);
  std::printf("floor %s\n", line);
  if (floor.ladder[0] > 0) {
    std::snprintf(line, sizeof(line), "| %s | %s | %.2f | %.2f | %.2f | %.2f | %.2f |",
                  model.c_str(), kernel.c_str(), floor.us, floor.ladder[0], floor.ladder[1],
                  floor.ladder[2], ours_us);
    ladder.push_back(line);
    std::printf("ladder %s\n", line);
  }
  std::fflush(stdout);
}
std::string FloorTable::table() const {
  std::string out =
      "| model | kernel | shape | floor µs | floor % of copy | floor's geometry | floor "
      "chained by a counter µs | floor, a contiguous share per block µs | ours µs (PDL) | "
      "ours - floor µs |\n"
      "|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& row : rows) out += row + "\n";
  if (ladder.empty()) return out;
  out +=
      "\nThe ladder: the floor's kernel at its geometry, doing after the wait one more of a "
      "one-token GEMV's steps at a time (µs per launch)\n\n"
      "| model | kernel | floor | + x loaded (a chunk per thread) | + x staged in shared "
      "memory, a barrier | + dot products, a warp reduction, a barrier, 8 stores | ours |\n"
      "|---|---|---|---|---|---|---|\n";
  for (const auto& row : ladder) out += row + "\n";
  return out;
}

void sweep_decode_linear(Timer& timer, Sweep& sweep, const std::string& row, int tokens,
                         const TunedLaunch& launch, const LaunchFn& resident, int launches) {
  std::vector<DecodeLinearTuning> choices;
  for (const auto& [keys, stages, per_sm, contiguous, row_pad] :
       std::vector<std::tuple<int, int, int, int, int>>{{2048, 4, 1, 0, 16},
                                                        {2048, 4, 1, 1, 16},
                                                        {2048, 3, 2, 0, 16},
                                                        {2048, 3, 2, 1, 16},
                                                        {2048, 2, 2, 1, 16},
                                                        {2048, 3, 1, 1, 16},
                                                        {2048, 2, 1, 1, 16},
                                                        {1024, 6, 1, 0, 16},
                                                        {1024, 4, 2, 0, 16},
                                                        {1024, 4, 2, 0, 64},
                                                        {1024, 4, 2, 0, 0},
                                                        {1024, 2, 2, 0, 0},
                                                        {1024, 5, 2, 0, 0},
                                                        {2048, 2, 2, 0, 0},
                                                        {1024, 6, 1, 0, 0},
                                                        {2048, 8, 1, 1, 0},
                                                        {2048, 12, 1, 1, 0}}) {
    choices.push_back(ring_tuning(keys, stages, per_sm, contiguous, row_pad));
  }
  for (int split_k : {4, 8}) {
    DecodeLinearTuning t;
    t.kernel = DecodeLinearKernel::kDirect;
    t.split_k = split_k;
    t.blocks_per_sm = 2;
    choices.push_back(t);
  }
  const double library_us = timer.per_launch_us(launch({}), launches);
  char cell[64];
  std::snprintf(cell, sizeof(cell), "%.2f", library_us);
  sweep.linear.add(row, "library's choice", cell);
  // The same launches reading one copy of W that stays in L2: what the launch costs
  // when HBM is not the limit (its latency floor in the chain).
  if (resident) {
    std::snprintf(cell, sizeof(cell), "%.2f", timer.per_launch_us(resident, launches));
  } else {
    std::snprintf(cell, sizeof(cell), "-");
  }
  sweep.linear.add(row, "library's choice, W resident in L2", cell);
  if (tokens == 1) {  // x in registers: in token 0's lanes rather than over all lanes
    DecodeLinearTuning t;
    t.one_token_x = 0;
    std::snprintf(cell, sizeof(cell), "%.2f", timer.per_launch_us(launch(t), launches));
  } else {
    std::snprintf(cell, sizeof(cell), "-");
  }
  sweep.linear.add(row, "library's choice, one token's x in token 0's lanes", cell);
  for (DecodeLinearTuning choice : choices) {
    double us[2];
    for (int balanced : {1, 0}) {
      choice.balanced_grid = balanced;
      us[1 - balanced] = timer.per_launch_us(launch(choice), launches);
    }
    char name[128];
    if (choice.kernel == DecodeLinearKernel::kRing) {
      std::snprintf(name, sizeof(name), "ring %d keys, %d deep, %d/SM%s", choice.stage_keys,
                    choice.stages, choice.blocks_per_sm,
                    choice.contiguous > 0  ? ", contiguous"
                    : choice.row_pad == 64 ? ", rows padded 64 B"
                    : choice.row_pad == 16 ? ", rows padded 16 B"
                                           : "");
    } else {
      std::snprintf(name, sizeof(name), "direct split_k %d, %d/SM", choice.split_k,
                    choice.blocks_per_sm);
    }
    std::snprintf(cell, sizeof(cell), "%.2f / %.2f", us[0], us[1]);
    sweep.linear.add(row, name, cell);
    std::printf("sweep | %s | %s | %s |\n", row.c_str(), name, cell);
  }
}

void sweep_decode_attention(Sweep& sweep, const std::string& shape, double bytes, int splits,
                            bool resident_fits, const AttentionMeasure& measure) {
  for (DependentLaunch next : {DependentLaunch::kLate, DependentLaunch::kEarly}) {
    for (int factor : {1, 2, 4, 8}) {
      const int split_count = std::max(1, splits * factor / 2);
      char name[96];
      std::snprintf(name, sizeof(name), "%d splits, next launch %s", split_count,
                    next == DependentLaunch::kEarly ? "early" : "late");
      sweep.add(shape, name, bytes, measure(split_count, true, next));
    }
  }
  if (resident_fits) {  // what a launch costs when HBM is not the limit
    char name[96];
    std::snprintf(name, sizeof(name), "%d splits, cache resident in L2", splits);
    sweep.add(shape, name, bytes, measure(splits, false, DependentLaunch::kDefault));
  }
}

void sweep_decode_step(Sweep& sweep, const std::string& name, double bytes, int splits,
                       const std::function<double(const StepVariant&)>& time) {
  for (DependentLaunch next : {DependentLaunch::kLate, DependentLaunch::kEarly}) {
    StepVariant v;
    v.next_launch = next;
    sweep.add(name,
              next == DependentLaunch::kEarly ? "attention: next launch early"
                                              : "attention: next launch late",
              bytes, time(v));
  }
  for (int factor : {1, 4}) {
    StepVariant v;
    v.splits = std::max(1, splits * factor / 2);
    char choice[64];
    std::snprintf(choice, sizeof(choice), "attention: %d splits", v.splits);
    sweep.add(name, choice, bytes, time(v));
  }
  // Geometries that leave room on each multiprocessor for a block of the next launch
  // (shared memory and registers), so that it streams its W while these finish, and
  // o_proj's previous 4-deep ring, which leaves none for a gate/up block: down's ring 3
  // or 2 deep (a q/k/v block fits: TinyLlama at 3, Llama-3.2-1B at 2), gate/up on one
  // block per SM (a down block fits).
  struct Room {
    const char* name;
    DecodeLinearTuning o_proj, gate_up, down;
  };
  const Room rooms[] = {
      {"no room after o_proj: its ring 4 deep", ring_tuning(1024, 4, 2, 0), {}, {}},
      {"down ring 3 deep", {}, {}, ring_tuning(1024, 3, 2, 0)},
      {"down ring 2 deep", {}, {}, ring_tuning(1024, 2, 2, 0)},
      {"gate/up one block per SM, 4 deep", {}, ring_tuning(2048, 4, 1, 1), {}}};
  for (const Room& room : rooms) {
    StepVariant v;
    v.o_proj = room.o_proj;
    v.gate_up = room.gate_up;
    v.down = room.down;
    sweep.add(name, std::string("next launch's room: ") + room.name, bytes, time(v));
  }
  // Geometries the per-kernel sweep found faster alone, timed where it counts: one
  // token's q/k/v on a ring (TinyLlama, Llama-3.2-1B), Llama-3.2-3B's q/k/v,
  // Qwen2.5-0.5B's one-token gate/up.
  auto with_grid = [](DecodeLinearTuning t, int balanced) {
    t.balanced_grid = balanced;
    return t;
  };
  auto balanced = [&](DecodeLinearTuning t) { return with_grid(t, 1); };
  struct Alternative {
    const char* name;
    DecodeLinearTuning qkv, gate_up;
  };
  const Alternative alternatives[] = {{"q/k/v on a ring of 2048-key slots, 3 deep, 1/SM, filled",
                                       with_grid(ring_tuning(2048, 3, 1, 1, 0), 0),
                                       {}},
                                      {"q/k/v on a ring of 1024-key slots, 4 deep, 2/SM, balanced",
                                       balanced(ring_tuning(1024, 4, 2, 0, 0)),
                                       {}},
                                      {"gate/up on 2048-key slots, 3 deep, 2/SM, balanced",
                                       {},
                                       balanced(ring_tuning(2048, 3, 2, 1, 0))}};
  for (const Alternative& alternative : alternatives) {
    StepVariant v;
    v.qkv = alternative.qkv;
    v.gate_up = alternative.gate_up;
    sweep.add(name, alternative.name, bytes, time(v));
  }
  StepVariant none;
  none.attention = false;
  sweep.add(name, "without rope and attention (bytes as with)", bytes, time(none));
}

}  // namespace kvrt::engine::cuda::bench
