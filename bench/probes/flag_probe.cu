// Does a launch learn sooner that its predecessor is done from a counter in memory than
// from the grid's completion? A chain of one-token-GEMV-shaped launches (a block per 8
// rows of 2048 keys, W loaded before the dependency, then 4 KB of x, 8 dot products and 8
// stores), each letting the next one launch at entry. "wait": griddepcontrol.wait, as the
// library does. "flag": no wait; the block's thread 0 polls the previous launch's done
// counter (ld.acquire.gpu) until every block of it has counted, and each block counts
// itself done (red.release.gpu) after a barrier that follows its stores; the last block
// to see the counter zeroes it for the next replay. Timed per launch (graphs of N and 2N
// launches, the difference over N, as kernels_bench does), with W streamed from a 512 MB
// pool or not at all. A chain of known values checks that no launch read stale x.
// A one-off measurement, not built by CMake:
//   nvcc -O3 -arch=sm_90a -std=c++17 -o flag_probe bench/probes/flag_probe.cu
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

constexpr int kThreads = 256, kRows = 8, kChunksPerRow = 256;  // 2048 bf16 keys a row
constexpr size_t kPoolBytes = size_t{512} << 20;

struct Params {
  const uint4* w;  // this launch's W, [blocks * 8, 2048] bf16 (zeros); null: no W
  const float* x;  // 4 KB
  float* y;        // blocks * 8 outputs
  unsigned* wait_count;  // flag: the previous launch's done counter (null: none)
  unsigned wait_target;  // flag: the previous launch's block count
  unsigned* seen;        // flag: this launch's blocks that saw wait_count
  unsigned* done;        // flag: this launch's done counter (null: last launch)
};

__device__ float dot8(uint4 w, uint4 x) {
  const auto* wh = reinterpret_cast<const __nv_bfloat162*>(&w);
  const auto* xh = reinterpret_cast<const __nv_bfloat162*>(&x);
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 a = __bfloat1622float2(wh[i]), b = __bfloat1622float2(xh[i]);
    s = fmaf(a.x, b.x, fmaf(a.y, b.y, s));
  }
  return s;
}

// kFlag: 0 wait, 1 polls with ld.acquire, 2 polls relaxed and fences once after.
template <int kFlag>
__global__ void __launch_bounds__(kThreads) chain_kernel(const Params p) {
  __shared__ float partial[kThreads / 32][kRows];
  __shared__ float x0;
  __shared__ unsigned pin;
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  const int t = threadIdx.x;
  uint4 w[kRows] = {};
  if (p.w != nullptr) {
    unsigned folded = 0;
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      w[r] = __ldcs(p.w + (size_t(blockIdx.x) * kRows + r) * kChunksPerRow + t);
      folded ^= w[r].x ^ w[r].w;
    }
    if (folded == 0x7fffffffu) pin = folded;  // keeps the loads ahead of the dependency
  }
  if constexpr (kFlag) {
    if (p.wait_count != nullptr && t == 0) {
      unsigned count = 0;
      if constexpr (kFlag == 1) {
        do {
          asm volatile("ld.acquire.gpu.global.u32 %0, [%1];"
                       : "=r"(count)
                       : "l"(p.wait_count)
                       : "memory");
        } while (count < p.wait_target);
      } else {
        do {
          asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];"
                       : "=r"(count)
                       : "l"(p.wait_count)
                       : "memory");
        } while (count < p.wait_target);
        asm volatile("fence.acq_rel.gpu;" ::: "memory");
      }
    }
    __syncthreads();
  } else {
    asm volatile("griddepcontrol.wait;" ::: "memory");
  }
  const uint4 x = __ldcg(reinterpret_cast<const uint4*>(p.x) + t);
  if (t == 0) x0 = __uint_as_float(x.x);
  float s[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) s[r] = dot8(w[r], x);
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s[r] += __shfl_xor_sync(0xffffffffu, s[r], o);
  if (t % 32 == 0)
#pragma unroll
    for (int r = 0; r < kRows; ++r) partial[t / 32][r] = s[r];
  __syncthreads();
  if (t < kRows) {
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < kThreads / 32; ++k) sum += partial[k][t];
    p.y[blockIdx.x * kRows + t] = sum + x0 + 1.0f;
  }
  if constexpr (kFlag) {
    __syncthreads();
    if (t == 0) {
      // Signal first: the reset below is for the next replay, which starts after the graph.
      if (p.done != nullptr)
        asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(p.done) : "memory");
      if (p.wait_count != nullptr && atomicAdd(p.seen, 1u) == gridDim.x - 1) {
        *p.seen = 0;
        *p.wait_count = 0;
      }
    }
  }
}

struct Chain {
  int blocks;
  bool stream_w;
  const uint4* pool;
  float* buf[2];
  unsigned* counters;  // done[launches], then seen[launches]
};

template <int kFlag>
cudaGraphExec_t capture(const Chain& c, int launches, cudaStream_t s) {
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(c.blocks);
  config.blockDim = dim3(kThreads);
  config.stream = s;
  config.attrs = &attr;
  config.numAttrs = 1;
  const size_t w_chunks = size_t(c.blocks) * kRows * kChunksPerRow;
  const size_t copies = kPoolBytes / (w_chunks * sizeof(uint4));
  cudaGraph_t graph;
  check(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), "capture");
  for (int k = 0; k < launches; ++k) {
    Params p{};
    p.w = c.stream_w ? c.pool + (k % copies) * w_chunks : nullptr;
    p.x = c.buf[k & 1];
    p.y = c.buf[(k + 1) & 1];
    if (kFlag) {
      p.wait_count = k > 0 ? c.counters + (k - 1) : nullptr;
      p.wait_target = unsigned(c.blocks);
      p.seen = c.counters + launches + k;
      p.done = k + 1 < launches ? c.counters + k : nullptr;
    }
    check(cudaLaunchKernelEx(&config, chain_kernel<kFlag>, p), "launch");
  }
  check(cudaStreamEndCapture(s, &graph), "end capture");
  cudaGraphExec_t exec;
  check(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
  check(cudaGraphDestroy(graph), "destroy");
  return exec;
}

// Every launch adds one to the first value of its x, so after a fresh start the last
// launch's outputs all equal the launch count unless some launch read stale x.
template <int kFlag>
bool chain_correct(const Chain& c, cudaGraphExec_t exec, int launches, cudaStream_t s) {
  for (int replay = 0; replay < 3; ++replay) {
    check(cudaMemsetAsync(c.buf[0], 0, 4096, s), "memset");
    check(cudaGraphLaunch(exec, s), "graph launch");
    std::vector<float> y(size_t(c.blocks) * kRows);
    check(cudaMemcpyAsync(y.data(), c.buf[launches & 1], y.size() * sizeof(float),
                          cudaMemcpyDeviceToHost, s),
          "copy");
    check(cudaStreamSynchronize(s), "sync");
    for (float v : y)
      if (v != float(launches)) {
        std::printf("  %s chain of %d, %d blocks: read %g, expected %d\n",
                    kFlag ? "flag" : "wait", launches, c.blocks, v, launches);
        return false;
      }
  }
  return true;
}

float replay_us(cudaGraphExec_t exec, cudaStream_t s, cudaEvent_t start, cudaEvent_t stop) {
  check(cudaEventRecord(start, s), "record");
  check(cudaGraphLaunch(exec, s), "graph launch");
  check(cudaEventRecord(stop, s), "record");
  check(cudaEventSynchronize(stop), "sync");
  float ms = 0.0f;
  check(cudaEventElapsedTime(&ms, start, stop), "elapsed");
  return ms * 1000.0f;
}

float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <int kFlag>
float per_launch_us(const Chain& c, cudaStream_t s, bool* correct) {
  constexpr int kN = 64;
  cudaGraphExec_t one = capture<kFlag>(c, kN, s), two = capture<kFlag>(c, 2 * kN, s);
  *correct = chain_correct<kFlag>(c, one, kN, s) && chain_correct<kFlag>(c, two, 2 * kN, s);
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "event");
  check(cudaEventCreate(&stop), "event");
  std::vector<float> t1, t2;
  for (int r = 0; r < 50; ++r) {
    t1.push_back(replay_us(one, s, start, stop));
    t2.push_back(replay_us(two, s, start, stop));
  }
  check(cudaEventDestroy(start), "event");
  check(cudaEventDestroy(stop), "event");
  check(cudaGraphExecDestroy(one), "destroy");
  check(cudaGraphExecDestroy(two), "destroy");
  return (median(t2) - median(t1)) / kN;
}

}  // namespace

int main() {
  uint4* pool = nullptr;
  check(cudaMalloc(&pool, kPoolBytes), "malloc");
  check(cudaMemset(pool, 0, kPoolBytes), "memset");
  Chain c{};
  c.pool = pool;
  for (float*& b : c.buf) {
    check(cudaMalloc(&b, 64 * 1024), "malloc");
    check(cudaMemset(b, 0, 64 * 1024), "memset");
  }
  check(cudaMalloc(&c.counters, 1024 * sizeof(unsigned)), "malloc");
  check(cudaMemset(c.counters, 0, 1024 * sizeof(unsigned)), "memset");
  cudaStream_t s;
  check(cudaStreamCreate(&s), "stream");
  std::printf(
      "| blocks | W streamed | wait: us per launch | flag, acquire polls | flag, relaxed polls "
      "+ fence |\n");
  std::printf("|---|---|---|---|---|\n");
  bool all_correct = true;
  for (int round = 0; round < 3; ++round)
    for (int blocks : {132, 256, 320, 396})
      for (bool stream_w : {false, true}) {
        c.blocks = blocks;
        c.stream_w = stream_w;
        bool ok_wait = false, ok_acquire = false, ok_relaxed = false;
        const float wait = per_launch_us<0>(c, s, &ok_wait);
        const float acquire = per_launch_us<1>(c, s, &ok_acquire);
        const float relaxed = per_launch_us<2>(c, s, &ok_relaxed);
        const bool ok = ok_wait && ok_acquire && ok_relaxed;
        all_correct = all_correct && ok;
        std::printf("| %d | %s | %.3f | %.3f | %.3f |%s\n", blocks, stream_w ? "yes" : "no", wait,
                    acquire, relaxed, ok ? "" : " WRONG VALUES");
      }
  std::printf("values %s\n", all_correct ? "correct in every chain" : "WRONG in some chain");
  return all_correct ? 0 : 1;
}
