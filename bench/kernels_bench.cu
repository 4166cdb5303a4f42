// kernels_bench: times every kernel of src/kvrt/engine/cuda at the shapes of
// TinyLlama-1.1B and Llama-3.2-1B (--models: others too), next to a device-to-device copy measured
// in the same run and, where one exists, the cuBLASLt equivalent. Prints a markdown table and
// writes it to --out.
//
// Method: each case is captured in a CUDA graph of many launches that rotate through
// enough copies of the weights (or caches) to exceed L2 several times, so every launch
// reads from HBM; replays are timed with CUDA events, and a graph of N launches is set
// against one of 2N, so what a graph pays once (its start, the first launch's cold start,
// the last one's drain) cancels (Timer in bench_common.h). Our kernels are timed with
// programmatic dependent launch (as a captured decode step runs them) and without.
//
//   kernels_bench [--out FILE] [--iters N] [--sweep] [--quick] [--models A,B|all]
//                 [--only LABEL,...]
//   (kernels_bench_main.cpp)
//
// The last rows per model time a whole decode step (decode_step_bench.cu). A second table
// sets each memory-bound decode row against its chain floor (lab/chain_floor.cu): the least
// kernel of a PDL chain that reads the same bytes, and for the small one-token rows the
// ladder of a GEMV's steps added to it. --quick runs only the decode attention
// and decode step rows, without that table; --only picks rows by label.
// --sweep also times every launch geometry of decode_linear and several split counts of
// decode_attention at each shape, and appends that table (lab/sweep.cu).
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "bench_common.h"
#include "kernels_bench.h"
#include "kvrt/engine/cuda/device_common.cuh"
#include "kvrt/engine/cuda/kernels.h"
#include "lab/lab.h"

namespace kvrt::engine::cuda {
namespace {

using namespace bench;

Sweep g_sweep;

FloorTable g_floor;

// A plain SM copy (16-byte loads and stores, grid-stride), the other copy peer.
__global__ void copy_kernel(const uint4* __restrict__ in, uint4* __restrict__ out, size_t count) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    out[i] = in[i];
  }
}

// Copy bandwidth counting bytes read plus bytes written, three ways: cudaMemcpyAsync
// launched eagerly, the same inside a graph (a graph memcpy node), and an SM copy kernel.
struct CopyBandwidth {
  double eager = 0, graph = 0, kernel = 0;
  double best() const { return std::max(eager, std::max(graph, kernel)); }
};

CopyBandwidth copy_bandwidth(Timer& timer) {
  const size_t bytes = 1ull << 30;
  Buffer a(bytes), b(bytes);
  a.random(1.0f, 1);
  CopyBandwidth out;
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "event");
  check(cudaEventCreate(&stop), "event");
  std::vector<double> times;
  for (int i = 0; i < timer.iters + 3; ++i) {
    check(cudaEventRecord(start, timer.stream), "record");
    check(cudaMemcpyAsync(b.ptr, a.ptr, bytes, cudaMemcpyDeviceToDevice, timer.stream), "copy");
    check(cudaEventRecord(stop, timer.stream), "record");
    check(cudaEventSynchronize(stop), "sync");
    float ms = 0.0f;
    check(cudaEventElapsedTime(&ms, start, stop), "elapsed");
    if (i >= 3) times.push_back(1000.0 * ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(times.begin(), times.end());
  out.eager = 2.0 * bytes / (times[times.size() / 2] * 1e3);
  out.graph = 2.0 * bytes /
              (timer.per_launch_us(
                   [&](int, cudaStream_t s) {
                     return cuda_check(
                         cudaMemcpyAsync(b.ptr, a.ptr, bytes, cudaMemcpyDeviceToDevice, s), "copy");
                   },
                   4) *
               1e3);
  int sms = 0;
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "sms");
  out.kernel =
      2.0 * bytes /
      (timer.per_launch_us(
           [&](int, cudaStream_t s) {
             copy_kernel<<<sms * 8, 256, 0, s>>>(static_cast<const uint4*>(a.ptr),
                                                 static_cast<uint4*>(b.ptr), bytes / sizeof(uint4));
             return cuda_check(cudaGetLastError(), "copy kernel");
           },
           4) *
       1e3);
  return out;
}

// One decode linear layer: ours (with its fusions) against a cuBLASLt GEMM of the same
// matrix (tokens = N), which has no norm or SwiGLU fusion. `in_table` false: only the
// sweep's rows (shapes the table leaves out).
void bench_linear(Timer& timer, Report& report, PrefillLinear& lt, const Model& m,
                  const char* kernel, int tokens, int rows, int in, bool norm, bool swiglu,
                  bool residual, bool f32_out, bool bias = false, bool in_table = true) {
  const int mats = swiglu ? 2 : 1;
  const size_t w_bytes = static_cast<size_t>(mats) * rows * in * 2;
  const int copies = copies_for(w_bytes);
  auto weights = rotation(w_bytes, copies, 1.0f / 64);
  Buffer x(static_cast<size_t>(tokens) * in * 2), gamma(static_cast<size_t>(in) * 2);
  Buffer y(static_cast<size_t>(tokens) * mats * rows * 4),
      res(static_cast<size_t>(tokens) * rows * 2);
  x.random(1.0f, 7);
  gamma.random(1.0f, 8);
  res.random(1.0f, 9);
  Buffer bias_values(static_cast<size_t>(mats) * rows * 2);
  bias_values.random(1.0f, 17);
  const int launches = std::max(copies, 32);
  auto launch_with = [&](const bf16* weight, cudaStream_t s, const DecodeLinearTuning& tuning) {
    DecodeLinear op;
    op.weight = weight;
    op.input = x.bf();
    op.tokens = tokens;
    op.rows = rows;
    op.in = in;
    op.norm_weight = norm ? gamma.bf() : nullptr;
    op.swiglu = swiglu;
    op.bias = bias ? bias_values.bf() : nullptr;
    op.residual = residual ? res.bf() : nullptr;
    if (f32_out) {
      op.output_f32 = static_cast<float*>(y.ptr);
    } else {
      op.output = residual ? res.bf() : y.bf();
    }
    op.tuning = tuning;
    return decode_linear(op, s);
  };
  // Launch i under `tuning` (default: the library's choice).
  auto launch_tuned = [&](const DecodeLinearTuning& tuning) {
    return [&, tuning](int i, cudaStream_t s) {
      return launch_with(weights[static_cast<size_t>(i % copies)]->bf(), s, tuning);
    };
  };
  const auto launch_ours = launch_tuned({});
  const double out_bytes = static_cast<double>(tokens) * rows * (f32_out ? 4 : 2);
  const double bytes = static_cast<double>(w_bytes) + tokens * in * 2.0 + out_bytes +
                       (residual ? tokens * rows * 2.0 : 0.0) + (norm ? in * 2.0 : 0.0) +
                       (bias ? mats * rows * 2.0 : 0.0);
  char shape[128];
  std::snprintf(shape, sizeof(shape), "T=%d, W %dx%d%s%s", tokens, mats * rows, in,
                norm ? " +norm" : "", bias ? " +bias" : "");
  if (g_sweep.enabled) {
    // The same launches reading one copy of W that stays in L2 (where it fits).
    std::vector<std::unique_ptr<Buffer>> resident;
    LaunchFn launch_resident;
    if (w_bytes <= 40u << 20) {
      resident = rotation(w_bytes, 1, 1.0f / 64);
      launch_resident = [&](int, cudaStream_t s) { return launch_with(resident[0]->bf(), s, {}); };
    }
    sweep_decode_linear(timer, g_sweep, std::string(m.name) + " " + kernel + " " + shape, tokens,
                        launch_tuned, launch_resident, launches);
  }
  if (!in_table) return;
  const auto ours = timer.ours(launch_ours, launches);
  set_programmatic_launch(false);
  const double lt_us = timer.per_launch_us(
      [&](int i, cudaStream_t s) {
        return lt.run(weights[static_cast<size_t>(i % copies)]->bf(), x.bf(), tokens, mats * rows,
                      in, residual ? res.bf() : nullptr, residual ? res.bf() : y.bf(), s,
                      bias ? bias_values.bf() : nullptr);
      },
      launches);
  set_programmatic_launch(true);
  report.bandwidth(m.name, kernel, shape, bytes, ours, lt_us);
  if (g_floor.enabled && tokens == 1) {
    const auto floor = chain_floor(
        timer,
        [&](int i) {
          return std::array<Span, 2>{Span{weights[static_cast<size_t>(i % copies)]->ptr, w_bytes},
                                     Span{}};
        },
        launches, in / 8);
    g_floor.add(m.name, kernel, shape, bytes, ours.pdl.chain, floor);
  }
}

// `fused_rope`: as the decode step runs it (DecodeAttentionOperands); its row has no
// sweep or floor of its own.
void bench_decode_attention(Timer& timer, Report& report, const Model& m, int length,
                            bool fused_rope = false) {
  const int dim = m.head_dim;
  const DecodeAttentionOperands operands(m, length, fused_rope);
  auto splits = decode_attention_splits(m.q_heads, m.kv_heads, length);
  check(splits.status());
  // The caches, q in and the output out; fused, the new K/V row in and into the cache.
  const double bytes = 2.0 * operands.cache_bytes + 4.0 * m.q_heads * dim +
                       (fused_rope ? 8.0 * m.kv_heads * dim : 0);
  // `rotate` false: every launch reads the first copy, which then stays in L2.
  auto measure = [&](int split_count, bool rotate = true,
                     DependentLaunch next = DependentLaunch::kDefault) {
    Buffer workspace(decode_attention_workspace_bytes(m.q_heads, dim, split_count));
    workspace.zero();
    return timer.ours(
        [&](int i, cudaStream_t s) {
          return decode_attention(operands.op(i, split_count, workspace, rotate, next), s);
        },
        std::max(operands.copies, 32));
  };
  if (g_sweep.enabled && !fused_rope) {
    char shape[128];
    std::snprintf(shape, sizeof(shape), "%s decode attention, cache %d", m.name, length);
    sweep_decode_attention(g_sweep, shape, bytes, *splits, 2 * operands.cache_bytes <= 40u << 20,
                           [&](int split_count, bool rotate, DependentLaunch next) {
                             return measure(split_count, rotate, next).pdl.chain;
                           });
  }
  const auto us = measure(*splits);
  char shape[128];
  std::snprintf(shape, sizeof(shape), "cache %d, %dq/%dkv heads, d%d, %d splits", length, m.q_heads,
                m.kv_heads, dim, *splits);
  report.bandwidth(m.name, fused_rope ? "decode attention (rope fused)" : "decode attention", shape,
                   bytes, us, 0.0);
  if (g_floor.enabled && !fused_rope) {
    const auto floor = chain_floor(
        timer,
        [&](int i) {
          const size_t copy = static_cast<size_t>(i % operands.copies);
          return std::array<Span, 2>{Span{operands.k[copy]->ptr, operands.cache_bytes},
                                     Span{operands.v[copy]->ptr, operands.cache_bytes}};
        },
        std::max(operands.copies, 32));
    g_floor.add(m.name, "decode attention", shape, bytes, us.pdl.chain, floor);
  }
}

// A kernel that does nothing but the PDL handshake every kernel of the library does: the
// per-launch floor of a chain of dependent kernels, against which the short rows read.
__global__ void empty_kernel() {
  detail::pdl_launch_dependents();
  detail::pdl_wait();
}

void bench_floor(Timer& timer, Report& report) {
  int sms = 0;
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "sms");
  const auto us = timer.ours(
      [&](int, cudaStream_t s) {
        return detail::launch(empty_kernel, dim3(sms), dim3(256), 0, s, "empty kernel");
      },
      32);
  report.latency("-", "empty kernel (dependent-launch floor)", "1 block per SM", us);
}

void bench_small_ops(Timer& timer, Report& report, const Model& m) {
  const int dim = m.head_dim, width = (m.q_heads + 2 * m.kv_heads) * dim, max_seq = 4096;
  Buffer qkv(static_cast<size_t>(width) * 2),
      k(static_cast<size_t>(m.kv_heads) * max_seq * dim * 2),
      v(static_cast<size_t>(m.kv_heads) * max_seq * dim * 2);
  qkv.random(1.0f, 4);
  auto table = rope_inv_freq(dim, 500000.0f, RopeScaling{});
  check(table.status());
  float* inv_freq = nullptr;
  int32_t* ids = nullptr;
  check(cudaMalloc(&inv_freq, table->size() * 4), "inv_freq");
  check(cudaMemcpy(inv_freq, table->data(), table->size() * 4, cudaMemcpyHostToDevice), "copy");
  check(cudaMalloc(&ids, 4), "ids");
  const int32_t id = 1000;
  check(cudaMemcpy(ids, &id, 4, cudaMemcpyHostToDevice), "copy");
  const auto rope_us = timer.ours(
      [&](int, cudaStream_t s) {
        RopeKvWrite op;
        op.qkv = qkv.bf();
        op.positions = ids;  // position 1000
        op.inv_freq = inv_freq;
        op.q_heads = m.q_heads;
        op.kv_heads = m.kv_heads;
        op.head_dim = dim;
        op.k_cache = k.bf();
        op.v_cache = v.bf();
        op.max_seq = max_seq;
        return rope_kv_write(op, s);
      },
      32);
  report.latency(m.name, "rope + kv write", "T=1, position 1000", rope_us);

  Buffer embed(static_cast<size_t>(m.vocab) * m.hidden * 2), h(static_cast<size_t>(m.hidden) * 2);
  embed.random(1.0f, 5);
  const auto embed_us = timer.ours(
      [&](int, cudaStream_t s) {
        return embedding_gather(embed.bf(), m.vocab, m.hidden, ids, 1, h.bf(), s);
      },
      32);
  report.latency(m.name, "embedding gather", "T=1", embed_us);

  // The LM head with greedy decoding fused in (the engine's launch when the method picks
  // the token), beside the same launch without it: what the argmax costs.
  Buffer lm_w(static_cast<size_t>(m.vocab) * m.hidden * 2),
      lm_norm(static_cast<size_t>(m.hidden) * 2);
  Buffer logits(static_cast<size_t>(m.vocab) * 4), argmax_ws(kDecodeLinearArgmaxWorkspaceBytes);
  lm_w.random(1.0f / 64, 6);
  lm_norm.random(1.0f, 7);
  argmax_ws.zero();
  auto lm_head_us = [&](bool greedy) {
    DecodeLinear op;
    op.weight = lm_w.bf();
    op.input = h.bf();
    op.rows = m.vocab;
    op.in = m.hidden;
    op.norm_weight = lm_norm.bf();
    op.output_f32 = static_cast<float*>(logits.ptr);
    if (greedy) {
      op.argmax_out = ids;
      op.argmax_workspace = argmax_ws.ptr;
    }
    return timer.ours([&](int, cudaStream_t s) { return decode_linear(op, s); }, 32);
  };
  const auto plain_us = lm_head_us(false);
  const auto greedy_us = lm_head_us(true);
  check(cudaMemcpy(ids, &id, 4, cudaMemcpyHostToDevice), "copy");
  char shape[64];
  std::snprintf(shape, sizeof(shape), "vocab %d, f32", m.vocab);
  report.latency(m.name, "LM head (norm, f32 out)", shape, plain_us);
  report.latency(m.name, "LM head + argmax (fused)", shape, greedy_us);
  cudaFree(inv_freq);
  cudaFree(ids);
}

// Causal prefill attention over `tokens` queries at positions 0..tokens-1.
void bench_prefill_attention(Timer& timer, Report& report, const Model& m, int tokens) {
  const int dim = m.head_dim, width = (m.q_heads + 2 * m.kv_heads) * dim;
  const int max_seq = tokens;
  Buffer k(static_cast<size_t>(m.kv_heads) * max_seq * dim * 2),
      v(static_cast<size_t>(m.kv_heads) * max_seq * dim * 2),
      qkv(static_cast<size_t>(tokens) * width * 2),
      out(static_cast<size_t>(tokens) * m.q_heads * dim * 2);
  k.random(1.0f, 12);
  v.random(1.0f, 13);
  qkv.random(1.0f, 14);
  std::vector<int32_t> host_positions(static_cast<size_t>(tokens));
  for (int t = 0; t < tokens; ++t) host_positions[static_cast<size_t>(t)] = t;
  int32_t* positions = nullptr;
  check(cudaMalloc(&positions, host_positions.size() * 4), "positions");
  check(cudaMemcpy(positions, host_positions.data(), host_positions.size() * 4,
                   cudaMemcpyHostToDevice),
        "positions");
  const auto us = timer.ours(
      [&](int, cudaStream_t s) {
        PrefillAttention op;
        op.q = qkv.bf();
        op.q_token_stride = width;
        op.k_cache = k.bf();
        op.v_cache = v.bf();
        op.positions = positions;
        op.out = out.bf();
        op.tokens = tokens;
        op.q_heads = m.q_heads;
        op.kv_heads = m.kv_heads;
        op.head_dim = dim;
        op.max_seq = max_seq;
        return prefill_attention(op, s);
      },
      8);
  cudaFree(positions);
  // Causal: query t does 2 * (t + 1) * dim FLOPs for scores and as many for P·V per head.
  const double flops = 4.0 * m.q_heads * dim * (static_cast<double>(tokens) * (tokens + 1) / 2);
  char shape[128];
  std::snprintf(shape, sizeof(shape), "T=%d causal, %dq/%dkv heads, d%d", tokens, m.q_heads,
                m.kv_heads, dim);
  report.compute(m.name, "prefill attention", shape, flops, us, "mma.sync bf16");
}

void bench_prefill(Timer& timer, Report& report, PrefillLinear& lt, const Model& m, int tokens) {
  const int dim = m.head_dim, width = (m.q_heads + 2 * m.kv_heads) * dim;
  Buffer x(static_cast<size_t>(tokens) * std::max(m.hidden, m.inter) * 2);
  Buffer w(static_cast<size_t>(2) * m.inter * m.hidden * 2);
  Buffer y(static_cast<size_t>(tokens) * 2 * m.inter * 2);
  x.random(1.0f, 10);
  w.random(1.0f / 64, 11);
  Buffer bias(static_cast<size_t>(width) * 2);
  bias.random(1.0f, 18);
  struct Gemm {
    const char* name;
    int rows, in;
    bool bias;
  };
  const Gemm gemms[] = {{"prefill linear qkv", width, m.hidden, m.qkv_bias},
                        {"prefill linear gate/up", 2 * m.inter, m.hidden, false},
                        {"prefill linear down", m.hidden, m.inter, false}};
  for (const Gemm& g : gemms) {
    const auto us = timer.ours(
        [&](int, cudaStream_t s) {
          return lt.run(w.bf(), x.bf(), tokens, g.rows, g.in, nullptr, y.bf(), s,
                        g.bias ? bias.bf() : nullptr);
        },
        8);
    char shape[128];
    std::snprintf(shape, sizeof(shape), "T=%d, W %dx%d%s", tokens, g.rows, g.in,
                  g.bias ? " +bias" : "");
    report.compute(m.name, g.name, shape, 2.0 * tokens * g.rows * g.in, us, "cuBLASLt itself");
  }

  bench_prefill_attention(timer, report, m, tokens);

  Buffer hidden(static_cast<size_t>(tokens) * m.hidden * 2),
      gamma(static_cast<size_t>(m.hidden) * 2);
  hidden.random(1.0f, 15);
  gamma.random(1.0f, 16);
  const auto norm_us = timer.ours(
      [&](int, cudaStream_t s) {
        return rmsnorm(hidden.bf(), gamma.bf(), hidden.bf(), tokens, m.hidden, 1e-5f, s);
      },
      8);
  char norm_shape[64];
  std::snprintf(norm_shape, sizeof(norm_shape), "T=%d, hidden %d", tokens, m.hidden);
  report.bandwidth(m.name, "rmsnorm (in place)", norm_shape, 4.0 * tokens * m.hidden, norm_us, 0.0);
  const auto swiglu_us = timer.ours(
      [&](int, cudaStream_t s) { return swiglu(y.bf(), x.bf(), tokens, m.inter, s); }, 8);
  char swiglu_shape[64];
  std::snprintf(swiglu_shape, sizeof(swiglu_shape), "T=%d, intermediate %d", tokens, m.inter);
  report.bandwidth(m.name, "swiglu", swiglu_shape, 6.0 * tokens * m.inter, swiglu_us, 0.0);
}

// The shapes the targets are stated for come first; the others (Hugging Face configs of
// larger Llamas and of Qwen2.5, with its q/k/v biases) show how the library's
// per-shape-class choices carry to models they were not tuned on.
const std::vector<Model>& known_models() {
  static const std::vector<Model> models = {
      // name, hidden, intermediate, vocab, q heads, kv heads, head_dim, layers, q/k/v bias
      {"TinyLlama-1.1B", 2048, 5632, 32000, 32, 4, 64, 22},
      {"Llama-3.2-1B", 2048, 8192, 128256, 32, 8, 64, 16},
      {"Llama-3.2-3B", 3072, 8192, 128256, 24, 8, 128, 28},
      {"Llama-3.1-8B", 4096, 14336, 128256, 32, 8, 128, 32},
      {"Qwen2.5-0.5B", 896, 4864, 151936, 14, 2, 64, 24, true},
      {"Qwen2.5-1.5B", 1536, 8960, 151936, 12, 2, 128, 28, true}};
  return models;
}
constexpr int kTargetModels = 2;

std::vector<Model> select_models(const std::vector<std::string>& names) {
  const std::vector<Model>& known = known_models();
  if (names.empty()) return {known.begin(), known.begin() + kTargetModels};
  std::vector<Model> chosen;
  for (const std::string& name : names) {
    if (name == "all") return known;
    auto it =
        std::find_if(known.begin(), known.end(), [&](const Model& m) { return name == m.name; });
    if (it == known.end()) {
      std::string list;
      for (const Model& m : known) list += std::string(list.empty() ? "" : ", ") + m.name;
      die("--models: unknown model '" + name + "' (known: " + list + ", all)");
    }
    chosen.push_back(*it);
  }
  return chosen;
}

}  // namespace

std::vector<std::string> kernels_bench_model_names() {
  std::vector<std::string> names;
  for (const Model& m : known_models()) names.emplace_back(m.name);
  return names;
}

int run_kernels_bench(const KernelsBenchOptions& options) {
  const std::string& out_path = options.out_path;
  const bool quick = options.quick;
  g_sweep.enabled = options.sweep;
  Timer timer;
  timer.iters = std::max(1, options.iters);
  const std::vector<Model> models = select_models(options.models);
  std::string why;
  if (!cuda_device_available(&why)) die(why);
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "properties");
  check(cudaStreamCreateWithFlags(&timer.stream, cudaStreamNonBlocking), "stream");

  auto write = [&](const std::string& text) {
    if (out_path.empty()) return;
    FILE* file = std::fopen(out_path.c_str(), "w");
    if (file == nullptr) die("cannot write " + out_path);
    std::fputs(text.c_str(), file);
    std::fclose(file);
  };

  const CopyBandwidth copy = copy_bandwidth(timer);
  const double copy_gbs = copy.best();
  char header[1024];
  std::snprintf(header, sizeof(header),
                "Device: %s, %d SMs, %.0f MB L2. Copy bandwidth over 1 GiB (read + write "
                "counted): cudaMemcpyAsync %.0f GB/s eager, %.0f GB/s as a graph node; SM copy "
                "kernel %.0f GB/s. \"%% of copy\" divides by the best of the three, %.0f GB/s. "
                "µs per launch in a chain: graphs of N and of 2N launches replayed %d times "
                "each (interleaved), the difference of their medians over N; the last column "
                "is the graph of N's median over N, its start and drain included.\n",
                prop.name, prop.multiProcessorCount, prop.l2CacheSize / 1e6, copy.eager, copy.graph,
                copy.kernel, copy_gbs, timer.iters);
  std::printf("%s\n", header);

  auto lt = PrefillLinear::create();
  check(lt.status());
  Report report(copy_gbs);
  g_sweep.copy_gbs = copy_gbs;
  g_floor.enabled = !quick;
  g_floor.copy_gbs = copy_gbs;
  bench_floor(timer, report);
  std::vector<std::string> only = options.only;
  if (only.empty() && quick) only = {"decode attention", "decode step"};
  auto wanted = [&](const std::string& label) {
    return only.empty() || std::any_of(only.begin(), only.end(), [&](const std::string& part) {
             // Either way round: "decode step (embedding to logits)" picks the step rows too.
             return label.find(part) != std::string::npos || part.find(label) != std::string::npos;
           });
  };
  for (const Model& m : models) {
    const int qkv_rows = (m.q_heads + 2 * m.kv_heads) * m.head_dim;
    if (wanted("decode qkv (norm fused)")) {
      bench_linear(timer, report, **lt, m, "decode qkv (norm fused)", 1, qkv_rows, m.hidden, true,
                   false, false, false, m.qkv_bias);
    }
    if (wanted("decode o_proj (+residual)")) {
      bench_linear(timer, report, **lt, m, "decode o_proj (+residual)", 1, m.hidden,
                   m.q_heads * m.head_dim, false, false, true, false);
    }
    if (wanted("decode gate/up (norm+SwiGLU)")) {
      bench_linear(timer, report, **lt, m, "decode gate/up (norm+SwiGLU)", 1, m.inter, m.hidden,
                   true, true, false, false);
    }
    if (wanted("decode down (+residual)")) {
      bench_linear(timer, report, **lt, m, "decode down (+residual)", 1, m.hidden, m.inter, false,
                   false, true, false);
    }
    if (wanted("decode LM head (norm, f32 out)")) {
      bench_linear(timer, report, **lt, m, "decode LM head (norm, f32 out)", 1, m.vocab, m.hidden,
                   true, false, false, true);
    }
    // The sweep also times the token counts the table leaves out, for where gate/up's
    // geometry changes hands (decode_linear.cu).
    for (int tokens = 2; tokens <= 8 && wanted("decode gate/up (norm+SwiGLU)"); ++tokens) {
      const bool in_table = tokens == 2 || tokens == 4 || tokens == 8;
      if (!in_table && !g_sweep.enabled) continue;
      bench_linear(timer, report, **lt, m, "decode gate/up (norm+SwiGLU)", tokens, m.inter,
                   m.hidden, true, true, false, false, false, in_table);
    }
    if (wanted("decode attention")) {
      bench_decode_attention(timer, report, m, 4096);
      bench_decode_attention(timer, report, m, 32768);
      bench_decode_attention(timer, report, m, 4096, true);
    }
    if (wanted("rope + kv write")) bench_small_ops(timer, report, m);
    if (wanted("prefill linear")) bench_prefill(timer, report, **lt, m, 512);
    if (wanted("prefill attention")) bench_prefill_attention(timer, report, m, 4096);
    if (wanted("decode step")) bench_decode_step(timer, report, g_sweep, **lt, m, 4096);
  }
  check(cudaStreamSynchronize(timer.stream), "final sync");
  check(cudaGetLastError(), "final check");

  std::string text = std::string(header) + "\n" + report.table();
  if (g_floor.enabled) {
    text +=
        "\nChain floor: the least kernel of a PDL chain reading each row's bytes (loads "
        "issued before the wait, one value passed down the chain; the best of several "
        "geometries), the same chained by a counter instead of griddepcontrol.wait, and with "
        "each block reading a contiguous share of the bytes\n\n" +
        g_floor.table();
  }
  if (g_sweep.enabled) text += "\nGeometry sweep\n\n" + g_sweep.table();
  std::printf("\n%s", text.c_str());
  write(text);
  return 0;
}

}  // namespace kvrt::engine::cuda
