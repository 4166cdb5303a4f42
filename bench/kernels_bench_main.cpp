// kernels_bench's command line; the benchmark itself is kernels_bench.cu.
#include <CLI/CLI.hpp>

#include <string>

#include "kernels_bench.h"

int main(int argc, char** argv) {
  kvrt::engine::cuda::KernelsBenchOptions options;
  CLI::App app{
      "Times the CUDA kernels at TinyLlama-1.1B and Llama-3.2-1B shapes (or others: "
      "--models) against a device copy and cuBLASLt measured in the same run."};
  app.add_option("--out", options.out_path, "also write the tables to this file");
  app.add_option("--iters", options.iters, "timed replays of each graph per case (medians used)")
      ->check(CLI::Range(1, 100000));
  app.add_flag("--sweep", options.sweep,
               "also time every decode_linear geometry and the attention and step variants");
  app.add_flag("--quick", options.quick,
               "no chain floor table, and unless --only says otherwise only the decode "
               "attention and decode step rows");
  app.add_option("--only", options.only,
                 "only the rows whose label contains one of these, comma-separated (e.g. "
                 "\"decode qkv,decode o_proj\"); prefill linear brings the 512-token prefill "
                 "attention, rmsnorm and swiglu, rope brings embedding gather and argmax")
      ->delimiter(',');
  std::string known;
  for (const std::string& name : kvrt::engine::cuda::kernels_bench_model_names()) {
    known += (known.empty() ? "" : ", ") + name;
  }
  app.add_option("--models", options.models,
                 "model shapes to time, comma-separated, or all (default: the first two); "
                 "known: " +
                     known)
      ->delimiter(',');
  CLI11_PARSE(app, argc, argv);
  return kvrt::engine::cuda::run_kernels_bench(options);
}
