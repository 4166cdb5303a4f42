// Pieces shared by the benchmark's translation units: error exits, device buffers with
// random contents, the graph-replay timer, the model shapes and the result table.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kvrt/engine/cuda/kernels.h"

namespace kvrt::engine::cuda::bench {

constexpr size_t kRotateBytes = 512ull << 20;  // > 8x the H200's 60 MB L2

[[noreturn]] inline void die(const std::string& what) {
  std::fprintf(stderr, "kernels_bench: %s\n", what.c_str());
  std::exit(1);
}
inline void check(cudaError_t error, const char* what) {
  if (error != cudaSuccess) die(std::string(what) + ": " + cudaGetErrorString(error));
}
inline void check(const Status& status) {
  if (!status.ok()) die(status.to_string());
}

// A device allocation freed at scope exit.
struct Buffer {
  explicit Buffer(size_t bytes) : bytes(bytes) { check(cudaMalloc(&ptr, bytes), "cudaMalloc"); }
  ~Buffer() { cudaFree(ptr); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  bf16* bf() const { return static_cast<bf16*>(ptr); }
  // Uniform values in [-scale, scale) as bf16, from a hash of the index: never zeros.
  void random(float scale, uint32_t seed);
  // All zero bytes, done before any later launch on any stream.
  void zero();
  void* ptr = nullptr;
  size_t bytes = 0;
};

// `copies` buffers of `bytes` each, random bf16.
std::vector<std::unique_ptr<Buffer>> rotation(size_t bytes, int copies, float scale);
// A ring-kernel geometry for DecodeLinear::tuning (-1: the library's choice).
inline DecodeLinearTuning ring_tuning(int stage_keys, int stages, int blocks_per_sm, int contiguous,
                                      int row_pad = -1) {
  DecodeLinearTuning t;
  t.kernel = DecodeLinearKernel::kRing;
  t.stage_keys = stage_keys;
  t.stages = stages;
  t.blocks_per_sm = blocks_per_sm;
  t.contiguous = contiguous;
  t.row_pad = row_pad;
  return t;
}

inline int copies_for(size_t bytes) {
  return static_cast<int>(std::max<size_t>(2, (kRotateBytes + bytes - 1) / bytes));
}

// What a launch costs, from CUDA-event-timed replays of captured graphs. `chain`: the
// replay time of a graph of 2N launches minus that of a graph of N, over N — a launch deep
// in a long chain, as in a captured decode step, with the costs a graph pays once
// cancelled (its start, the first launch's cold start with nothing ahead of it to overlap,
// the last one's drain); the 1 GiB copy that the table compares against pays them once per
// gibibyte. `graph`: the graph of N's replay over N, those costs included. Medians over
// the replays, the two graphs' replays interleaved.
struct LaunchTime {
  double chain = 0, graph = 0;
  int launches = 0;
};

// Ours with PDL (both figures) and without (chain).
struct OursTime {
  LaunchTime pdl;
  double plain = 0;
};

using LaunchFn = std::function<Status(int, cudaStream_t)>;

struct Timer {
  cudaStream_t stream = nullptr;
  int iters = 50;

  // Graphs of `launch(i)` for i in [0, launches) and for i in [0, 2 launches).
  LaunchTime time(const LaunchFn& launch, int launches);
  double per_launch_us(const LaunchFn& launch, int launches) {
    return time(launch, launches).chain;
  }

  OursTime ours(const LaunchFn& launch, int launches) {
    set_programmatic_launch(true);
    OursTime out;
    out.pdl = time(launch, launches);
    set_programmatic_launch(false);
    out.plain = time(launch, launches).chain;
    set_programmatic_launch(true);
    return out;
  }
};

struct Model {
  const char* name;
  int hidden, inter, vocab, q_heads, kv_heads, head_dim, layers;
  bool qkv_bias = false;  // Qwen2: q, k and v have a bias
};

// Decode attention's operands over a `length`-key cache, as the attention rows use them: K and V
// caches rotating through enough copies that every launch reads HBM, q, out and the position length
// - 1. `fused_rope`: as in the decode step, q and the new K/V row come unrotated in a qkv row
// (which stays in L2, as the previous kernel's output would) and the launch rotates them and writes
// the row into the cache. Without it q is in place and the new row is read from the cache copy,
// from HBM.
struct DecodeAttentionOperands {
  DecodeAttentionOperands(const Model& m, int length, bool fused_rope);
  // Launch i's op over `splits` splits and `workspace`, which holds
  // decode_attention_workspace_bytes(); `rotate` false: always the first copy, which then
  // stays in L2.
  DecodeAttention op(int i, int splits, const Buffer& workspace, bool rotate = true,
                     DependentLaunch next_launch = DependentLaunch::kDefault) const;
  int q_heads, kv_heads, head_dim, length;
  bool fused_rope;
  size_t cache_bytes;  // one of K or V, one copy
  int copies;
  std::vector<std::unique_ptr<Buffer>> k, v;
  Buffer q, out, position;
  std::unique_ptr<Buffer> inv_freq;  // fused_rope: [head_dim / 2]
};

class Report {
 public:
  explicit Report(double copy_gbs) : copy_gbs_(copy_gbs) {}
  // A memory-bound row: bytes moved, our times, the cuBLASLt time (chain) or 0.
  void bandwidth(const std::string& model, const std::string& kernel, const std::string& shape,
                 double bytes, const OursTime& us, double lt_us) {
    const double gbs = bytes / (us.pdl.chain * 1e3);
    add(row(model, kernel, shape, us, fmt("%.0f", gbs), fmt("%.0f%%", 100.0 * gbs / copy_gbs_),
            lt_us > 0 ? fmt("%.2f", lt_us) : "-",
            lt_us > 0 ? fmt("%.2fx", lt_us / us.pdl.chain) : "-"));
  }
  // A latency-bound row (a few KB moved): time only.
  void latency(const std::string& model, const std::string& kernel, const std::string& shape,
               const OursTime& us) {
    add(row(model, kernel, shape, us, "-", "-", "-", "-"));
  }
  // A compute-bound row: TFLOP/s instead of bandwidth.
  void compute(const std::string& model, const std::string& kernel, const std::string& shape,
               double flops, const OursTime& us, const char* note) {
    add(row(model, kernel, shape, us, fmt("%.0f TFLOP/s", flops / (us.pdl.chain * 1e6)), note, "-",
            "-"));
  }
  void add(const std::string& line) {
    rows_.push_back(line);
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  }
  std::string table() const {
    std::string out =
        "| model | kernel | shape | ours µs (PDL) | ours µs (no PDL) | GB/s | % of copy | "
        "cuBLASLt µs | cuBLASLt / ours | ours µs (PDL), graph of N / N (N) |\n"
        "|---|---|---|---|---|---|---|---|---|---|\n";
    for (const auto& row : rows_) out += row + "\n";
    return out;
  }

 private:
  static std::string fmt(const char* format, double value) {
    char buffer[64];
    std::snprintf(buffer, sizeof(buffer), format, value);
    return buffer;
  }
  static std::string row(const std::string& model, const std::string& kernel,
                         const std::string& shape, const OursTime& us, const std::string& rate,
                         const std::string& share, const std::string& lt,
                         const std::string& lt_ratio) {
    return "| " + model + " | " + kernel + " | " + shape + " | " + fmt("%.2f", us.pdl.chain) +
           " | " + fmt("%.2f", us.plain) + " | " + rate + " | " + share + " | " + lt + " | " +
           lt_ratio + " | " + fmt("%.2f", us.pdl.graph) + " (" + std::to_string(us.pdl.launches) +
           ") |";
  }
  double copy_gbs_;
  std::vector<std::string> rows_;
};

// How a decode step runs (decode_step_bench.cu; the lab's step sweep varies it).
struct StepVariant {
  bool fused_rope = true;        // rope and the cache write inside decode_attention
  bool prefetch_history = true;  // DecodeAttention::prefetch_history
  bool attention = true;         // false: no rope, no attention (their share)
  int splits = 0;                // 0: decode_attention_splits()
  DependentLaunch next_launch = DependentLaunch::kDefault;  // decode_attention's
  // Launch geometries of the linear layers (default: the library's choice).
  DecodeLinearTuning qkv, o_proj, gate_up, down;
};

struct Sweep;  // lab/lab.h

// A whole decode step (every layer, then the final norm and LM head) at `context` cached
// tokens, ours against the same step with cuBLASLt linear layers; decode_step_bench.cu.
// With the sweep on, also the lab's step variants (sweep_decode_step).
void bench_decode_step(Timer& timer, Report& report, Sweep& sweep, PrefillLinear& lt,
                       const Model& m, int context);

}  // namespace kvrt::engine::cuda::bench
