// kernels_bench's entry point, called by kernels_bench_main.cpp after parsing the command
// line (plain C++, so the parser needs no CUDA compiler).
#pragma once

#include <string>
#include <vector>

namespace kvrt::engine::cuda {

struct KernelsBenchOptions {
  std::string out_path;  // also write the tables here
  int iters = 50;        // timed graph replays per case (the median is reported)
  bool sweep = false;    // also every decode_linear geometry and attention/step variant
  bool quick = false;    // no chain floor; rows as `only`, else attention and the step
  // Model shapes to time, by name (kernels_bench_model_names()), or "all"; empty: the
  // two the kernel targets are stated for (TinyLlama-1.1B, Llama-3.2-1B).
  std::vector<std::string> models;
  // Only the benchmarks whose row label contains one of these (e.g. "decode qkv",
  // "decode step"); empty: every row (with quick: decode attention and the decode step).
  std::vector<std::string> only;
};

// The model shapes --models accepts.
std::vector<std::string> kernels_bench_model_names();

// Runs the benchmark and prints its tables; 0 on success. Exits with a message when no
// CUDA device is usable or a CUDA call fails.
int run_kernels_bench(const KernelsBenchOptions& options);

}  // namespace kvrt::engine::cuda
