// kernels_bench --trace: where a launch's time goes. A chain of launches (the
// benchmark's decode_linear chains, weights rotating through HBM or one copy staying in
// L2, and whole decode steps) records every block's timeline (trace.h); the tables give,
// per point, the first block, the 10th percentile, the median, the 90th percentile and
// the last block, in µs after the previous traced launch's last block ended — each the
// median over the launches summarized. Needs a build configured with
// -DKVRT_KERNEL_TRACE=ON.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "bench_common.h"
#include "kvrt/engine/cuda/kernels.h"
#include "kvrt/engine/cuda/trace.h"

namespace kvrt::engine::cuda::bench {
namespace {

constexpr int kMaxBlocks = 1024;

double quantile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  return values[static_cast<size_t>(q * static_cast<double>(values.size() - 1) + 0.5)];
}

const char* point_label(int point, bool attention) {
  switch (point) {
    case kTraceEntry:
      return "entered";
    case kTraceProducerDone:
      return attention ? "history copies issued" : "producer issued every copy";
    case kTraceWaitReturned:
      return "past the PDL wait";
    case kTraceInputReady:
      return attention ? "q and the new row ready" : "x ready";
    case kTraceFirstSlotFull:
      return attention ? "first cache tile landed" : "first W slot landed";
    case kTraceLastSlotFull:
      return attention ? "last tile scored" : "last W slot landed";
    case kTracePartialsWritten:
      return "partials stored";
    case kTraceCounterTaken:
      return "counter taken";
    case kTraceMergeStart:
      return "last block: merge starts";
    case kTraceMergeLoaded:
      return "last block: partials loaded";
    case kTraceEnd:
      return "last output stored";
  }
  return "?";
}

struct Shape {
  std::string name;
  int rows, in;
  bool norm, swiglu, residual;
  int tokens = 1;
  DecodeLinearTuning tuning = {};  // default: the library's choice
};

TraceChain linear_chain(const Shape& s, bool resident) {
  const int mats = s.swiglu ? 2 : 1;
  const size_t w_bytes = static_cast<size_t>(mats) * s.rows * s.in * 2;
  const int copies = resident ? 1 : copies_for(w_bytes);
  auto weights =
      std::make_shared<std::vector<std::unique_ptr<Buffer>>>(rotation(w_bytes, copies, 1.0f / 64));
  auto x = std::make_shared<Buffer>(static_cast<size_t>(s.tokens) * s.in * 2);
  auto gamma = std::make_shared<Buffer>(static_cast<size_t>(s.in) * 2);
  auto y = std::make_shared<Buffer>(static_cast<size_t>(s.tokens) * mats * s.rows * 2);
  auto res = std::make_shared<Buffer>(static_cast<size_t>(s.tokens) * s.rows * 2);
  x->random(1.0f, 7);
  gamma->random(1.0f, 8);
  res->random(1.0f, 9);
  TraceChain chain;
  chain.title = s.name + (resident ? ", W resident in L2" : "");
  chain.launches = 48;
  chain.slots = 48;
  chain.skip = 8;
  chain.kinds = {s.name};
  chain.launch = [=](int i, cudaStream_t stream) {
    DecodeLinear op;
    op.weight = (*weights)[static_cast<size_t>(i % copies)]->bf();
    op.input = x->bf();
    op.tokens = s.tokens;
    op.rows = s.rows;
    op.in = s.in;
    op.norm_weight = s.norm ? gamma->bf() : nullptr;
    op.swiglu = s.swiglu;
    op.residual = s.residual ? res->bf() : nullptr;
    op.output = s.residual ? res->bf() : y->bf();
    op.tuning = s.tuning;
    return decode_linear(op, stream);
  };
  return chain;
}

// Decode attention over a `length`-key cache, the caches rotating through HBM as in the
// benchmark's attention rows; `fused_rope` as in its rope-fused row.
TraceChain attention_chain(const Model& m, int length, bool fused_rope) {
  auto operands = std::make_shared<DecodeAttentionOperands>(m, length, fused_rope);
  auto splits = decode_attention_splits(m.q_heads, m.kv_heads, length);
  check(splits.status());
  auto workspace =
      std::make_shared<Buffer>(decode_attention_workspace_bytes(m.q_heads, m.head_dim, *splits));
  workspace->zero();
  TraceChain chain;
  chain.title = std::string(m.name) + " decode attention" + (fused_rope ? " (rope fused)" : "") +
                ", cache " + std::to_string(length) + ", " + std::to_string(*splits) + " splits";
  chain.launches = 48;
  chain.slots = 48;
  chain.skip = 8;
  chain.kinds = {chain.title};
  chain.grid_x = *splits;
  const int split_count = *splits;
  chain.launch = [=](int i, cudaStream_t stream) {
    return decode_attention(operands->op(i, split_count, *workspace), stream);
  };
  return chain;
}

}  // namespace

std::string trace_chain(Timer& timer, const TraceChain& chain, double clock_ghz) {
  Buffer stamps(static_cast<size_t>(chain.slots) * kMaxBlocks * kTracePoints * sizeof(uint64_t));
  stamps.zero();
  // Timer captures its graph after one eager warm-up chain: the slots are each taken once
  // more by the capture, in chain order.
  check(set_kernel_trace({static_cast<uint64_t*>(stamps.ptr), chain.slots, kMaxBlocks}));
  const double us = timer.graph_us(chain.launch, chain.launches);
  check(set_kernel_trace({}));
  std::vector<uint64_t> raw(stamps.bytes / sizeof(uint64_t));
  check(cudaMemcpy(raw.data(), stamps.ptr, stamps.bytes, cudaMemcpyDeviceToHost), "stamps");

  auto row = [&](int n, int b) {
    return raw.data() + (static_cast<size_t>(n) * kMaxBlocks + b) * kTracePoints;
  };
  // The earliest entry: times count from it in integers first, since a double holding the
  // globaltimer's ~1.7e18 ns keeps only 256 ns steps.
  uint64_t origin = ~uint64_t{0};
  for (int n = 0; n < chain.slots; ++n) {
    for (int b = 0; b < kMaxBlocks && row(n, b)[kTraceEntry] != 0; ++b) {
      origin = std::min(origin, row(n, b)[kTraceEntry]);
    }
  }
  // ns of point k of block b in launch n after `origin`, or -1 if not passed.
  auto at = [&](int n, int b, int k) {
    const uint64_t* r = row(n, b);
    const double entry = static_cast<double>(r[kTraceEntry] - origin);
    if (k == kTraceEntry) return entry;
    if (r[k] == 0) return -1.0;
    const double ticks = static_cast<double>(static_cast<int64_t>(r[k] - r[kTraceEntryClock]));
    return entry + ticks / clock_ghz;
  };
  std::vector<int> blocks(static_cast<size_t>(chain.slots), 0);
  std::vector<double> last_end(static_cast<size_t>(chain.slots), 0.0);
  for (int n = 0; n < chain.slots; ++n) {
    int& count = blocks[static_cast<size_t>(n)];
    while (count < kMaxBlocks && row(n, count)[kTraceEntry] != 0) ++count;
    for (int b = 0; b < count; ++b) {
      last_end[static_cast<size_t>(n)] =
          std::max(last_end[static_cast<size_t>(n)], at(n, b, kTraceEnd));
    }
  }
  char line[512];
  std::snprintf(line, sizeof(line), "\n### %s\n\n%.2f µs per graph launch / %d\n",
                chain.title.c_str(), us, chain.launches);
  std::string out = line;
  const int period = static_cast<int>(chain.kinds.size());
  // Kinds in order of first appearance; each summarized over its launches in the window.
  std::vector<std::string> order;
  for (const auto& kind : chain.kinds) {
    if (std::find(order.begin(), order.end(), kind) == order.end()) order.push_back(kind);
  }
  const double qs[] = {0.0, 0.1, 0.5, 0.9, 1.0};
  for (const std::string& kind : order) {
    std::vector<int> launches;
    for (int n = std::max(1, chain.skip); n < chain.slots - chain.skip; ++n) {
      if (chain.kinds[static_cast<size_t>(n % period)] == kind &&
          blocks[static_cast<size_t>(n)] > 0) {
        launches.push_back(n);
      }
    }
    if (launches.empty()) continue;
    std::vector<double> durations;
    for (int n : launches) {
      durations.push_back(
          (last_end[static_cast<size_t>(n)] - last_end[static_cast<size_t>(n - 1)]) / 1e3);
    }
    const bool attention = at(launches[0], 0, kTraceCounterTaken) >= 0 ||
                           at(launches[0], 0, kTracePartialsWritten) >= 0;
    std::snprintf(line, sizeof(line),
                  "\n%s: %d blocks; %.2f µs from the previous launch's last block end to this "
                  "one's (median of %zu launches)\n\n",
                  kind.c_str(), blocks[static_cast<size_t>(launches[0])], quantile(durations, 0.5),
                  launches.size());
    out += line;
    const bool by_x = chain.grid_x > 0;
    out +=
        "| point | first block | 10% | median | 90% | last block | a block's time since its "
        "previous point (median) |";
    out +=
        by_x ? " last block's blockIdx.x (share of launches) |\n|---|---|---|---|---|---|---|---|\n"
             : "\n|---|---|---|---|---|---|---|\n";
    const int points[] = {kTraceEntry,
                          kTraceProducerDone,
                          kTraceWaitReturned,
                          kTraceInputReady,
                          kTraceFirstSlotFull,
                          kTraceLastSlotFull,
                          kTracePartialsWritten,
                          kTraceCounterTaken,
                          kTraceMergeStart,
                          kTraceMergeLoaded,
                          kTraceEnd};
    // Per block, the time from the last point it passed before this one: phases in one
    // block's clock (the quantile columns mix blocks, and the entry's globaltimer).
    auto since_previous = [&](int n, int b, int point) {
      const double t = at(n, b, point);
      for (const int* p = std::find(std::begin(points), std::end(points), point);
           t >= 0 && p != std::begin(points);) {
        const double before = at(n, b, *--p);
        if (before >= 0) return (t - before) / 1e3;
      }
      return -1.0;
    };
    for (int point : points) {
      std::vector<double> per_quantile[5], gaps;
      std::vector<int> last_x(static_cast<size_t>(std::max(chain.grid_x, 1)), 0);
      for (int n : launches) {
        std::vector<double> v, gap;
        double latest = -1.0;
        int latest_b = -1;
        for (int b = 0; b < blocks[static_cast<size_t>(n)]; ++b) {
          const double t = at(n, b, point);
          if (t > latest) {
            latest = t;
            latest_b = b;
          }
          if (t >= 0) v.push_back((t - last_end[static_cast<size_t>(n - 1)]) / 1e3);
          const double d = since_previous(n, b, point);
          if (d >= 0) gap.push_back(d);
        }
        if (v.empty()) continue;
        if (by_x) ++last_x[static_cast<size_t>(latest_b % chain.grid_x)];
        for (int q = 0; q < 5; ++q) per_quantile[q].push_back(quantile(v, qs[q]));
        if (!gap.empty()) gaps.push_back(quantile(gap, 0.5));
      }
      if (per_quantile[0].empty()) continue;
      char gap_cell[32] = "-";
      if (!gaps.empty()) std::snprintf(gap_cell, sizeof(gap_cell), "%.2f", quantile(gaps, 0.5));
      std::snprintf(line, sizeof(line), "| %s | %.2f | %.2f | %.2f | %.2f | %.2f | %s |",
                    point_label(point, attention), quantile(per_quantile[0], 0.5),
                    quantile(per_quantile[1], 0.5), quantile(per_quantile[2], 0.5),
                    quantile(per_quantile[3], 0.5), quantile(per_quantile[4], 0.5), gap_cell);
      out += line;
      if (by_x) {
        const auto most = std::max_element(last_x.begin(), last_x.end());
        std::snprintf(line, sizeof(line), " %d (%.0f%%) |", static_cast<int>(most - last_x.begin()),
                      100.0 * *most / static_cast<double>(per_quantile[0].size()));
        out += line;
      }
      out += "\n";
    }
  }
  std::printf("%s", out.c_str());
  std::fflush(stdout);
  return out;
}

std::string trace_kernels(Timer& timer, const std::vector<Model>& models) {
  if (!kernel_trace_compiled()) {
    die("--trace needs a build configured with -DKVRT_KERNEL_TRACE=ON");
  }
  auto clock_ghz = trace_clock_ghz();
  check(clock_ghz.status());
  char header[256];
  std::snprintf(header, sizeof(header),
                "SM clock %.3f GHz. Times in µs after the previous traced launch's last block "
                "ended.\n",
                *clock_ghz);
  std::string out = header;
  std::printf("%s", header);
  for (const Model& m : models) {
    const std::string name = m.name;
    const Shape shapes[] = {
        {name + " decode qkv (norm fused)", (m.q_heads + 2 * m.kv_heads) * m.head_dim, m.hidden,
         true, false, false},
        {name + " decode o_proj (+residual)", m.hidden, m.q_heads * m.head_dim, false, false, true},
        {name + " decode gate/up (norm+SwiGLU)", m.inter, m.hidden, true, true, false},
        {name + " decode down (+residual)", m.hidden, m.inter, false, false, true}};
    for (const Shape& shape : shapes) {
      for (bool resident : {false, true}) {
        out += trace_chain(timer, linear_chain(shape, resident), *clock_ghz);
      }
    }
    // Several tokens' gate/up, whose time grows with the tokens at rows wider than 2048
    // keys (x staged in shared memory).
    const Shape gate_up_8{
        name + " decode gate/up (norm+SwiGLU), 8 tokens", m.inter, m.hidden, true, true, false, 8};
    out += trace_chain(timer, linear_chain(gate_up_8, false), *clock_ghz);
    // down under geometries that leave room for a block of the next launch beside this
    // launch's (measured slower than the library's choice): where their time goes.
    for (const auto& [keys, stages, per_sm] : {std::tuple{1024, 5, 1}, std::tuple{832, 4, 2}}) {
      Shape down = shapes[3];
      down.tuning = ring_tuning(keys, stages, per_sm, -1);
      TraceChain chain = linear_chain(down, false);
      char title[96];
      std::snprintf(title, sizeof(title), ", ring %d keys, %d deep, %d/SM", keys, stages, per_sm);
      chain.title += title;
      chain.kinds = {chain.title};
      out += trace_chain(timer, chain, *clock_ghz);
    }
    // Decode attention alone, where its time at a long cache goes, and with rope fused.
    for (int length : {4096, 32768}) {
      out += trace_chain(timer, attention_chain(m, length, false), *clock_ghz);
    }
    out += trace_chain(timer, attention_chain(m, 4096, true), *clock_ghz);
    out += trace_decode_step(timer, m, 4096, *clock_ghz);
  }
  return out;
}

}  // namespace kvrt::engine::cuda::bench
