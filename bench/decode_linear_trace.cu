// kernels_bench --trace: where a decode_linear launch's time goes. For each decode shape,
// the benchmark's chain of launches (weights rotating through HBM, then one copy that
// stays in L2) records every block's timeline (trace.h); the table gives, per point, the
// first block, the 10th percentile, the median, the 90th percentile and the last block,
// in µs after the previous launch's last block ended — each the median over the chain's
// steady-state launches. Needs a build configured with -DKVRT_KERNEL_TRACE=ON.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_common.h"
#include "kvrt/engine/cuda/kernels.h"
#include "kvrt/engine/cuda/trace.h"

namespace kvrt::engine::cuda::bench {
namespace {

constexpr int kLaunches = 48;  // of which [kSkip, kLaunches - kSkip) are summarized
constexpr int kSkip = 8;
constexpr int kMaxBlocks = 1024;

double quantile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  return values[static_cast<size_t>(q * static_cast<double>(values.size() - 1) + 0.5)];
}

struct Shape {
  std::string name;
  int rows, in;
  bool norm, swiglu, residual;
};

std::string trace_shape(Timer& timer, const Shape& s, bool resident, double clock_ghz) {
  const int mats = s.swiglu ? 2 : 1;
  const size_t w_bytes = static_cast<size_t>(mats) * s.rows * s.in * 2;
  const int copies = resident ? 1 : copies_for(w_bytes);
  auto weights = rotation(w_bytes, copies, 1.0f / 64);
  Buffer x(static_cast<size_t>(s.in) * 2), gamma(static_cast<size_t>(s.in) * 2);
  Buffer y(static_cast<size_t>(mats) * s.rows * 2), res(static_cast<size_t>(s.rows) * 2);
  x.random(1.0f, 7);
  gamma.random(1.0f, 8);
  res.random(1.0f, 9);
  auto launch = [&](int i, cudaStream_t stream) {
    DecodeLinear op;
    op.weight = weights[static_cast<size_t>(i % copies)]->bf();
    op.input = x.bf();
    op.tokens = 1;
    op.rows = s.rows;
    op.in = s.in;
    op.norm_weight = s.norm ? gamma.bf() : nullptr;
    op.swiglu = s.swiglu;
    op.residual = s.residual ? res.bf() : nullptr;
    op.output = s.residual ? res.bf() : y.bf();
    return decode_linear(op, stream);
  };
  Buffer stamps(static_cast<size_t>(kLaunches) * kMaxBlocks * kTracePoints * sizeof(uint64_t));
  check(cudaMemset(stamps.ptr, 0, stamps.bytes), "clear stamps");
  // Timer captures its graph after one eager warm-up chain: kLaunches slots are each
  // taken once more by the capture, in chain order.
  check(set_kernel_trace({static_cast<uint64_t*>(stamps.ptr), kLaunches, kMaxBlocks}));
  const double us = timer.per_launch_us(launch, kLaunches);
  check(set_kernel_trace({}));
  std::vector<uint64_t> raw(stamps.bytes / sizeof(uint64_t));
  check(cudaMemcpy(raw.data(), stamps.ptr, stamps.bytes, cudaMemcpyDeviceToHost), "stamps");

  // ns of point k of block b in launch n, on the globaltimer's scale.
  auto at = [&](int n, int b, int k) {
    const uint64_t* row = raw.data() + (static_cast<size_t>(n) * kMaxBlocks + b) * kTracePoints;
    if (k == kTraceEntry) return static_cast<double>(row[kTraceEntry]);
    const double ticks = static_cast<double>(static_cast<int64_t>(row[k] - row[kTraceEntryClock]));
    return static_cast<double>(row[kTraceEntry]) + ticks / clock_ghz;
  };
  int blocks = 0;
  while (blocks < kMaxBlocks && raw[static_cast<size_t>(blocks) * kTracePoints] != 0) ++blocks;
  std::vector<double> last_end(kLaunches, 0.0);
  for (int n = 0; n < kLaunches; ++n) {
    for (int b = 0; b < blocks; ++b) last_end[n] = std::max(last_end[n], at(n, b, kTraceEnd));
  }
  char line[512];
  std::snprintf(line, sizeof(line),
                "\n%s%s: %d blocks; %.2f µs per launch (graph replay), %.2f µs between the "
                "last block ends of consecutive launches\n\n",
                s.name.c_str(), resident ? ", W resident in L2" : "", blocks, us,
                (last_end[kLaunches - kSkip] - last_end[kSkip]) / (1e3 * (kLaunches - 2 * kSkip)));
  std::string out = line;
  out += "| point | first block | 10% | median | 90% | last block |\n|---|---|---|---|---|---|\n";
  const std::pair<int, const char*> points[] = {{kTraceEntry, "entered"},
                                                {kTraceProducerDone, "producer issued every copy"},
                                                {kTraceWaitReturned, "past the PDL wait"},
                                                {kTraceInputReady, "x ready"},
                                                {kTraceFirstSlotFull, "first W slot landed"},
                                                {kTraceLastSlotFull, "last W slot landed"},
                                                {kTraceEnd, "last output stored"}};
  const double qs[] = {0.0, 0.1, 0.5, 0.9, 1.0};
  for (const auto& [point, label] : points) {
    std::vector<double> per_quantile[5];
    for (int n = kSkip; n < kLaunches - kSkip; ++n) {
      std::vector<double> v;
      for (int b = 0; b < blocks; ++b) v.push_back((at(n, b, point) - last_end[n - 1]) / 1e3);
      for (int q = 0; q < 5; ++q) per_quantile[q].push_back(quantile(v, qs[q]));
    }
    std::snprintf(line, sizeof(line), "| %s | %.2f | %.2f | %.2f | %.2f | %.2f |\n", label,
                  quantile(per_quantile[0], 0.5), quantile(per_quantile[1], 0.5),
                  quantile(per_quantile[2], 0.5), quantile(per_quantile[3], 0.5),
                  quantile(per_quantile[4], 0.5));
    out += line;
  }
  std::printf("%s", out.c_str());
  std::fflush(stdout);
  return out;
}

}  // namespace

std::string trace_decode_linear(Timer& timer, const std::vector<Model>& models) {
  if (!kernel_trace_compiled()) {
    die("--trace needs a build configured with -DKVRT_KERNEL_TRACE=ON");
  }
  auto clock_ghz = trace_clock_ghz();
  check(clock_ghz.status());
  char header[256];
  std::snprintf(header, sizeof(header),
                "SM clock %.3f GHz. Times in µs after the previous launch's last block "
                "ended; each the median over launches %d-%d of a chain of %d.\n",
                *clock_ghz, kSkip, kLaunches - kSkip - 1, kLaunches);
  std::string out = header;
  std::printf("%s", header);
  std::vector<Shape> shapes;
  for (const Model& m : models) {
    const std::string name = m.name;
    shapes.push_back({name + " decode qkv (norm fused)", (m.q_heads + 2 * m.kv_heads) * m.head_dim,
                      m.hidden, true, false, false});
    shapes.push_back({name + " decode o_proj (+residual)", m.hidden, m.q_heads * m.head_dim, false,
                      false, true});
    shapes.push_back(
        {name + " decode gate/up (norm+SwiGLU)", m.inter, m.hidden, true, true, false});
    shapes.push_back({name + " decode down (+residual)", m.hidden, m.inter, false, false, true});
  }
  for (const Shape& shape : shapes) {
    for (bool resident : {false, true}) out += trace_shape(timer, shape, resident, *clock_ghz);
  }
  return out;
}

}  // namespace kvrt::engine::cuda::bench
