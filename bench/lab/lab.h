// The lab: the experiments behind the library's launch choices, kept apart from the
// benchmark's table. kernels_bench runs them on request: --sweep times every
// decode_linear geometry, decode_attention split counts and launch points, and variants
// of the decode step (sweep.cu); without --quick it sets each memory-bound decode row
// against its chain floor (chain_floor.cu). What they showed is in docs/kernels-notes.md
// and docs/kernels-sweep.md. pdl_order.awk reads the kernels' SASS (bench/run_on_gpu.sh).
#pragma once

#include <array>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "bench_common.h"

namespace kvrt::engine::cuda::bench {

// The chain floor (chain_floor.cu): the best per-launch time, over a few geometries, of a
// kernel that only loads a row's bytes before the PDL wait and passes one value down the
// chain; at that geometry, the same chained through a counter in global memory instead of
// griddepcontrol.wait, with each block loading a contiguous share, and (x_chunks > 0: the
// chunks of a one-token row's x) the ladder of a GEMV's steps. `spans(i)`: what launch i
// reads (up to two spans, 16-byte multiples), rotated like the row's own launches.
struct Span {
  const void* ptr = nullptr;
  size_t bytes = 0;
};
using FloorSpans = std::function<std::array<Span, 2>(int)>;
struct ChainFloor {
  double us = 0, counter_us = 0, block_share_us = 0;
  // The ladder at the same geometry (one-token rows of <= 2048 keys): + x loaded after the
  // wait, + x staged in shared memory, + dot products, a reduction and stores (0: not run).
  double ladder[3] = {};
  int per_sm = 0, loads = 0;  // blocks of 256 threads per SM, 16-byte loads per batch
};
ChainFloor chain_floor(Timer& timer, const FloorSpans& spans, int launches, int x_chunks = 0);

// The chain floor of each memory-bound decode row, set against ours.
struct FloorTable {
  bool enabled = false;
  double copy_gbs = 0;
  std::vector<std::string> rows, ladder;
  void add(const std::string& model, const std::string& kernel, const std::string& shape,
           double bytes, double ours_us, const ChainFloor& floor);
  std::string table() const;
};

// decode_linear geometries as a matrix: a row per shape, a column per geometry.
struct GeometryMatrix {
  std::vector<std::string> columns;
  std::vector<std::pair<std::string, std::vector<std::string>>> rows;
  void add(const std::string& shape, const std::string& column, const std::string& cell) {
    size_t c = 0;
    while (c < columns.size() && columns[c] != column) ++c;
    if (c == columns.size()) columns.push_back(column);
    if (rows.empty() || rows.back().first != shape) rows.push_back({shape, {}});
    auto& cells = rows.back().second;
    if (cells.size() <= c) cells.resize(c + 1);
    cells[c] = cell;
  }
  std::string table() const {
    std::string out = "| shape |";
    for (const auto& column : columns) out += " " + column + " |";
    out += "\n|---|";
    for (size_t c = 0; c < columns.size(); ++c) out += "---|";
    out += "\n";
    for (const auto& [shape, cells] : rows) {
      out += "| " + shape + " |";
      for (size_t c = 0; c < columns.size(); ++c) {
        out += " " + (c < cells.size() ? cells[c] : std::string("-")) + " |";
      }
      out += "\n";
    }
    return out;
  }
};

// Rows of the optional geometry sweep (--sweep): one line per shape and choice, and the
// decode_linear matrix.
struct Sweep {
  bool enabled = false;
  double copy_gbs = 0;
  std::vector<std::string> rows;
  GeometryMatrix linear;  // decode_linear: µs per launch, "balanced grid / every slot filled"
  void add(const std::string& shape, const std::string& choice, double bytes, double us) {
    char line[512];
    const double gbs = bytes / (us * 1e3);
    std::snprintf(line, sizeof(line), "| %s | %s | %.2f | %.0f | %.0f%% |", shape.c_str(),
                  choice.c_str(), us, gbs, 100.0 * gbs / copy_gbs);
    rows.push_back(line);
    std::printf("sweep %s\n", line);
    std::fflush(stdout);
  }
  std::string table() const {
    std::string out = "| shape | choice | µs (PDL) | GB/s | % of copy |\n|---|---|---|---|---|\n";
    for (const auto& row : rows) out += row + "\n";
    if (!linear.rows.empty()) {
      out +=
          "\ndecode_linear, µs per launch (PDL): library's choice, then each geometry with "
          "a balanced grid / every block slot filled\n\n" +
          linear.table();
    }
    return out;
  }
};

// One decode_linear row (`row` names model, kernel and shape) under the library's choice,
// with W resident in L2 (`resident`, or none when empty), with one token's x in token 0's
// lanes, then under every geometry of both kernels, balanced and filled. `launch(t)`:
// the row's launches under tuning t.
using TunedLaunch = std::function<LaunchFn(const DecodeLinearTuning&)>;
void sweep_decode_linear(Timer& timer, Sweep& sweep, const std::string& row, int tokens,
                         const TunedLaunch& launch, const LaunchFn& resident, int launches);

// decode_attention at one shape: split counts around the library's `splits` with the
// next launch early and late, and (resident_fits) the cache resident in L2. `measure(
// splits, rotate, next)`: µs per launch (rotate false: the first cache copy only).
using AttentionMeasure = std::function<double(int, bool, DependentLaunch)>;
void sweep_decode_attention(Sweep& sweep, const std::string& shape, double bytes, int splits,
                            bool resident_fits, const AttentionMeasure& measure);

// The decode step's variants: attention's launch point and split counts, geometries
// that leave room for the next launch, ones the per-kernel sweep found faster alone, and
// the step without rope and attention. `time(v)`: µs per step under v.
void sweep_decode_step(Sweep& sweep, const std::string& name, double bytes, int splits,
                       const std::function<double(const StepVariant&)>& time);

}  // namespace kvrt::engine::cuda::bench
