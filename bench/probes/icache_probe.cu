// Does a launch pay to fetch its code? A body of straight-line FMAs runs twice in each
// warp (pass 0 fetches it, pass 1 finds it cached), one warp per scheduler; clock64
// times each pass, across launches of the same kernel and after a different kernel.
// A one-off measurement, not built by CMake:
//   nvcc -O3 -arch=sm_90a -std=c++17 -o icache_probe bench/probes/icache_probe.cu
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

constexpr int kBlocks = 132, kWarps = kBlocks * 4;

template <int kVariant, int kBody>
__global__ void __launch_bounds__(128) straight_kernel(float* sink, long long* cycles) {
  float a[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) a[j] = threadIdx.x * 0.001f + j;
  long long t[3];
  t[0] = clock64();
#pragma unroll 1
  for (int pass = 0; pass < 2; ++pass) {
#pragma unroll
    for (int i = 0; i < kBody; ++i) {  // 8 independent chains: issue-bound when cached
      asm volatile("fma.rn.f32 %0, %0, %1, %2;"
                   : "+f"(a[i & 7])
                   : "f"(1.0001f), "f"(static_cast<float>(kVariant + 1) * 0.5f));
    }
    t[pass + 1] = clock64();
  }
  float s = 0.0f;
#pragma unroll
  for (int j = 0; j < 8; ++j) s += a[j];
  if (s == 12345.0f) sink[threadIdx.x] = s;  // keeps the arithmetic
  if ((threadIdx.x & 31) == 0) {
    const int w = blockIdx.x * 4 + threadIdx.x / 32;
    cycles[2 * w] = t[1] - t[0];
    cycles[2 * w + 1] = t[2] - t[1];
  }
}

// The same instruction count as a loop of 8 FMAs (cached after its first trip).
template <int kBody>
__global__ void __launch_bounds__(128) loop_kernel(float* sink, long long* cycles) {
  float a[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) a[j] = threadIdx.x * 0.001f + j;
  long long t[3];
  t[0] = clock64();
#pragma unroll 1
  for (int pass = 0; pass < 2; ++pass) {
#pragma unroll 1
    for (int i = 0; i < kBody / 8; ++i) {
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        asm volatile("fma.rn.f32 %0, %0, %1, %2;" : "+f"(a[j]) : "f"(1.0001f), "f"(0.25f));
      }
    }
    t[pass + 1] = clock64();
  }
  float s = 0.0f;
#pragma unroll
  for (int j = 0; j < 8; ++j) s += a[j];
  if (s == 12345.0f) sink[threadIdx.x] = s;
  if ((threadIdx.x & 31) == 0) {
    const int w = blockIdx.x * 4 + threadIdx.x / 32;
    cycles[2 * w] = t[1] - t[0];
    cycles[2 * w + 1] = t[2] - t[1];
  }
}

struct Probe {
  float* sink = nullptr;
  long long* cycles = nullptr;
  double ghz = 0.0;

  template <typename Kernel>
  void run(const char* label, Kernel kernel, bool print = true) {
    check(cudaMemset(cycles, 0, sizeof(long long) * 2 * kWarps), "memset");
    kernel<<<kBlocks, 128>>>(sink, cycles);
    check(cudaGetLastError(), "launch");
    check(cudaDeviceSynchronize(), "sync");
    std::vector<long long> h(2 * kWarps);
    check(cudaMemcpy(h.data(), cycles, h.size() * sizeof(long long), cudaMemcpyDeviceToHost),
          "copy");
    std::vector<long long> pass0, pass1;
    for (int w = 0; w < kWarps; ++w) {
      pass0.push_back(h[2 * w]);
      pass1.push_back(h[2 * w + 1]);
    }
    std::sort(pass0.begin(), pass0.end());
    std::sort(pass1.begin(), pass1.end());
    if (!print) return;
    const long long m0 = pass0[kWarps / 2], m1 = pass1[kWarps / 2];
    std::printf("| %-44s | %8lld | %8lld | %8lld | %7.3f |\n", label, m0, pass0[kWarps * 9 / 10],
                m1, (m0 - m1) / ghz / 1000.0);
  }
};

template <int kBody>
void scenario(Probe& probe) {
  std::printf("\nbody of %d FMAs (%d KB of SASS)\n\n", kBody, kBody * 16 / 1024);
  std::printf(
      "| launch | pass 0 cycles (median) | pass 0 (p90) | pass 1 cycles | pass 0 extra us |\n");
  std::printf("|---|---|---|---|---|\n");
  char label[96];
  for (int i = 0; i < 3; ++i) {
    std::snprintf(label, sizeof label, "straight, launch %d of the same kernel", i);
    probe.run(label, straight_kernel<0, kBody>);
  }
  probe.run("", straight_kernel<1, 8192>, false);  // 128 KB of other code
  probe.run("straight, after a different 128 KB kernel", straight_kernel<0, kBody>);
  probe.run("", straight_kernel<2, 2048>, false);  // 32 KB of other code
  probe.run("straight, after a different 32 KB kernel", straight_kernel<0, kBody>);
  probe.run("loop of the same count", loop_kernel<kBody>);
}

}  // namespace

int main() {
  Probe probe;
  int khz = 0;
  check(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0), "clock rate");
  probe.ghz = khz / 1e6;
  std::printf("SM clock attribute %.3f GHz (the us column uses it)\n", probe.ghz);
  check(cudaMalloc(&probe.sink, 4096), "malloc");
  check(cudaMalloc(&probe.cycles, sizeof(long long) * 2 * kWarps), "malloc");
  scenario<256>(probe);
  scenario<1024>(probe);
  scenario<4096>(probe);
  scenario<8192>(probe);
  return 0;
}
