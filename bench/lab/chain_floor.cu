// The chain floor: what the least kernel of a PDL chain costs per launch to read a row's
// bytes. Each thread issues its 16-byte loads of the bytes (constant data, as W and the
// cache history are) before the wait, like the library's kernels, then waits for the
// predecessor, reads one value it wrote and writes one for the successor; no shared
// memory, no arithmetic beyond folding what it loaded. Reads past what the registers hold
// go on in batches after the wait. The best of several geometries is the row's floor:
// what the chain costs for the bytes alone, before any x, compute, reduction or store.
//
// The best geometry is also timed with the predecessor signalled through a counter in
// global memory (each block adds one with release semantics as it finishes; the next
// launch's blocks spin on it with acquire loads) instead of griddepcontrol.wait, to see
// whether waiting for the grid's completion is what a chain link costs; and with each
// block reading a contiguous share of the bytes, as a GEMV's blocks read their tiles,
// instead of every load of the grid reading one contiguous run. For one-token rows of
// <= 2048 keys, the ladder then adds a GEMV's steps after the wait one at a time (x,
// its staging, the dot products and reduction), to show which of them cost what.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "kvrt/engine/cuda/device_common.cuh"
#include "lab/lab.h"

namespace kvrt::engine::cuda::bench {
namespace {

constexpr int kThreads = 256;
constexpr int kCounterSlots = 1 << 14;  // one per launch made by a Timer::time

struct FloorParams {
  const uint4* a;
  size_t a_chunks;  // 16-byte chunks
  const uint4* b;   // optional second span (the V cache)
  size_t b_chunks;
  size_t block_share;  // 0: loads interleaved over the grid; else chunks per block
  const float* in;     // one value per block, written by the predecessor
  float* out;
  // The ladder (kWork > 0): a GEMV's steps after the wait, one at a time.
  const uint4* x;  // x_chunks 16-byte chunks, the same for every block
  int x_chunks;    // <= kThreads
  float* sums;     // 8 per block
  // Counter chaining: the predecessor's counter (null: griddepcontrol.wait) and ours.
  const unsigned long long* wait_on;
  unsigned long long* signal;
};

__device__ __forceinline__ unsigned long long load_acquire(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ unsigned long long load_relaxed(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void add_release(unsigned long long* p) {
  asm volatile("red.release.gpu.global.add.u64 [%0], 1;" ::"l"(p) : "memory");
}

// kWork: 0 the floor; 1 + x loaded after the wait (a chunk per thread, the same x in every
// block); 2 + x staged in shared memory, a barrier, each lane reading the chunks that
// match its loads; 3 + dot products of those with its loads on CUDA cores, a warp
// reduction, a barrier and 8 stores per block. 1-3 need every load in one batch.
template <int kLoads, int kWork>
__device__ __forceinline__ uint32_t ladder(const FloorParams& p, const uint4 (&v)[kLoads]) {
  __shared__ uint4 xs[kThreads];
  __shared__ float warp_sums[kThreads / 32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const uint4 zero = make_uint4(0, 0, 0, 0);
  const uint4 xv = threadIdx.x < p.x_chunks ? p.x[threadIdx.x] : zero;
  uint32_t fold = 0;
#pragma unroll
  for (int i = 0; i < kLoads; ++i) fold ^= v[i].x ^ v[i].y ^ v[i].z ^ v[i].w;
  if constexpr (kWork == 1) return fold ^ xv.x ^ xv.y ^ xv.z ^ xv.w;
  xs[threadIdx.x] = xv;
  __syncthreads();
  if constexpr (kWork == 2) {
#pragma unroll
    for (int i = 0; i < kLoads; ++i) {
      const uint4 x = xs[(lane + 32 * i) % kThreads];
      fold ^= x.x ^ x.y ^ x.z ^ x.w;
    }
    return fold;
  }
  float acc = 0.0f, acc2 = 0.0f;
#pragma unroll
  for (int i = 0; i < kLoads; ++i) {
    const uint4 x = xs[(lane + 32 * i) % kThreads];
    const uint32_t wp[4] = {v[i].x, v[i].y, v[i].z, v[i].w}, xp[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      acc = fmaf(detail::bf16_lo(wp[j]), detail::bf16_lo(xp[j]), acc);
      acc2 = fmaf(detail::bf16_hi(wp[j]), detail::bf16_hi(xp[j]), acc2);
    }
  }
  const float sum = detail::warp_sum(acc + acc2);
  if (lane == 0) warp_sums[warp] = sum;
  __syncthreads();
  if (threadIdx.x < kThreads / 32) p.sums[blockIdx.x * 8 + threadIdx.x] = warp_sums[threadIdx.x];
  return fold ^ __float_as_uint(sum);
}

// Sixteen loads: three blocks per SM (ptxas spills a few bytes of addressing there);
// eight: room for two launches' blocks of two, as the one-token GEMVs are built to.
template <int kLoads, int kWork>
__global__ void __launch_bounds__(kThreads, kLoads > 8 ? 3 : 4) floor_kernel(const FloorParams p) {
  detail::pdl_launch_dependents();
  // Counter chaining: every launch uses fresh counters, so a block's round is how many
  // whole grids of this launch have already signalled (graph replays).
  unsigned long long round = 0;
  if (p.signal != nullptr && threadIdx.x == 0) round = load_relaxed(p.signal) / gridDim.x;
  // Load i of every thread of the grid reads one contiguous run of the bytes, or, with
  // block_share, load i of every thread of a block reads one run of that block's share.
  const size_t total = p.a_chunks + p.b_chunks;
  const size_t share = p.block_share;
  const size_t stride = share > 0 ? kThreads : static_cast<size_t>(gridDim.x) * kThreads;
  const size_t end = share > 0 ? min(total, (blockIdx.x + 1) * share) : total;
  size_t c =
      (share > 0 ? blockIdx.x * share : blockIdx.x * static_cast<size_t>(kThreads)) + threadIdx.x;
  float carried = 0.0f;
  uint32_t fold = 0;
  bool waited = false;
  for (; c < end || !waited; c += kLoads * stride) {
    uint4 v[kLoads];
#pragma unroll
    for (int i = 0; i < kLoads; ++i) {
      const size_t chunk = c + i * stride;
      const uint4* src = chunk < p.a_chunks ? p.a + chunk : p.b + (chunk - p.a_chunks);
      v[i] = detail::load_stream(src, chunk < end);
    }
    if (!waited) {
      if (p.wait_on != nullptr) {
        if (threadIdx.x == 0) {
          // Seconds of spinning mean a broken chain: fail loudly rather than hang.
          for (int spins = 0; load_acquire(p.wait_on) < (round + 1) * gridDim.x; ++spins) {
            if (spins == 1 << 22) __trap();
          }
        }
        __syncthreads();
      } else {
        detail::pdl_wait();
      }
      waited = true;
    }
    if constexpr (kWork == 0) {
#pragma unroll
      for (int i = 0; i < kLoads; ++i) fold ^= v[i].x ^ v[i].y ^ v[i].z ^ v[i].w;
    } else {
      // The predecessor's value travels with x, as a GEMV's residual does.
      if (threadIdx.x == 0) carried = p.in[blockIdx.x];
      fold ^= ladder<kLoads, kWork>(p, v) ^ __float_as_uint(carried);
    }
  }
  // Every thread's loads have landed before the block writes and signals.
  const int odd = __syncthreads_or(fold == 0x9e3779b9u);
  if (threadIdx.x == 0) {
    p.out[blockIdx.x] = (kWork > 0 ? carried : p.in[blockIdx.x]) + (odd ? 2.0f : 1.0f);
    if (p.signal != nullptr) add_release(p.signal);
  }
}

template <int kLoads, int kWork = 0>
Status launch_floor(int grid, const FloorParams& p, cudaStream_t stream) {
  return detail::launch(floor_kernel<kLoads, kWork>, dim3(grid), dim3(kThreads), 0, stream,
                        "chain floor", p);
}

Status launch_floor(int loads, int work, int grid, const FloorParams& p, cudaStream_t stream) {
  if (work > 0) {  // the ladder: eight loads only
    return work == 1   ? launch_floor<8, 1>(grid, p, stream)
           : work == 2 ? launch_floor<8, 2>(grid, p, stream)
                       : launch_floor<8, 3>(grid, p, stream);
  }
  switch (loads) {
    case 4:
      return launch_floor<4>(grid, p, stream);
    case 8:
      return launch_floor<8>(grid, p, stream);
    default:
      return launch_floor<16>(grid, p, stream);
  }
}

}  // namespace

ChainFloor chain_floor(Timer& timer, const FloorSpans& spans, int launches, int x_chunks) {
  int sms = 0;
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "sms");
  Buffer values(2 * static_cast<size_t>(8 * sms) * sizeof(float));
  values.zero();
  Buffer counters(kCounterSlots * sizeof(unsigned long long));
  float* value = static_cast<float*>(values.ptr);
  Buffer x(kThreads * sizeof(uint4)), sums(static_cast<size_t>(8 * sms) * 8 * sizeof(float));
  x.random(1.0f, 77);
  const size_t chunks = (spans(0)[0].bytes + spans(0)[1].bytes) / 16;

  auto time_with = [&](int per_sm, int loads, bool by_counter, bool block_shares = false,
                       int work = 0) {
    const int grid = per_sm * sms;
    int slot = 0;  // counters: one per launch made, so each graph's launches have their own
    counters.zero();
    auto* counter = static_cast<unsigned long long*>(counters.ptr);
    return timer.time(
        [&](int i, cudaStream_t s) {
          const auto span = spans(i);
          FloorParams p{static_cast<const uint4*>(span[0].ptr),
                        span[0].bytes / 16,
                        static_cast<const uint4*>(span[1].ptr),
                        span[1].bytes / 16,
                        block_shares ? (chunks + grid - 1) / grid : 0,
                        value + (i % 2) * 8 * sms,
                        value + ((i + 1) % 2) * 8 * sms,
                        static_cast<const uint4*>(x.ptr),
                        x_chunks,
                        static_cast<float*>(sums.ptr),
                        nullptr,
                        nullptr};
          if (by_counter) {
            if (slot == kCounterSlots) die("chain floor: out of counters");
            // The first launch of a graph (or of the warm-up) follows no counter.
            p.wait_on = i > 0 ? counter + slot - 1 : nullptr;
            p.signal = counter + slot++;
          }
          return launch_floor(loads, work, grid, p, s);
        },
        launches);
  };

  ChainFloor best;
  for (int per_sm : {1, 2, 3, 4, 6, 8}) {
    const size_t threads = static_cast<size_t>(per_sm) * sms * kThreads;
    const size_t needed = (chunks + threads - 1) / threads;
    const int loads = needed <= 4 ? 4 : needed <= 8 ? 8 : 16;
    // 16 loads in flight need ~80 registers: three blocks per SM at most.
    if (loads == 16 && per_sm > 3) continue;
    const double us = time_with(per_sm, loads, false).chain;
    if (best.us == 0 || us < best.us) {
      best.us = us;
      best.per_sm = per_sm;
      best.loads = loads;
    }
  }
  check(cudaStreamSynchronize(timer.stream), "floor");
  best.counter_us = time_with(best.per_sm, best.loads, true).chain;
  best.block_share_us = time_with(best.per_sm, best.loads, false, true).chain;
  // The ladder, where the best geometry holds every load in one batch of eight.
  const size_t best_threads = static_cast<size_t>(best.per_sm) * sms * kThreads;
  if (x_chunks > 0 && x_chunks <= kThreads && best.loads == 8 && chunks <= 8 * best_threads) {
    for (int work = 1; work <= 3; ++work) {
      best.ladder[work - 1] = time_with(best.per_sm, best.loads, false, false, work).chain;
    }
  }
  check(cudaStreamSynchronize(timer.stream), "floor");
  return best;
}

}  // namespace kvrt::engine::cuda::bench
