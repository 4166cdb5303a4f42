// Does a kernel parameter first read after the PDL wait put a constant-cache miss on the
// critical path? A chain of PDL launches, each waiting, then loading x through a pointer
// parameter and storing y; one variant reads the pointers only after the wait, the other
// moves them into registers before it. Timed per launch (graphs of N and 2N launches,
// as kernels_bench does) and inside the kernel (clock64 after the wait).
// A one-off measurement, not built by CMake:
//   nvcc -O3 -arch=sm_90a -std=c++17 -o const_probe bench/probes/const_probe.cu
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

constexpr int kBlocks = 132, kThreads = 128;

struct Params {
  long long pad[12];  // puts the pointers on later constant-bank lines
  const float* x;
  float* y;
  long long* cycles;
};

template <bool kEarly>
__global__ void __launch_bounds__(kThreads) chain_kernel(const Params p) {
  const float* x = p.x;
  float* y = p.y;
  long long* cycles = p.cycles;
  if (kEarly) asm volatile("" : "+l"(x), "+l"(y), "+l"(cycles));  // in registers now
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
  const long long t0 = clock64();
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  y[i] = x[i] * 1.0001f + 1.0f;
  const long long t1 = clock64();
  if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
}

template <bool kEarly>
float graph_us(Params p, int launches, cudaStream_t s) {
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(kBlocks);
  config.blockDim = dim3(kThreads);
  config.stream = s;
  config.attrs = &attr;
  config.numAttrs = 1;
  cudaGraph_t graph;
  check(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), "capture");
  for (int k = 0; k < launches; ++k) {
    Params q = p;
    if (k & 1) {  // each launch reads what the one before wrote
      q.x = p.y;
      q.y = const_cast<float*>(p.x);
    }
    check(cudaLaunchKernelEx(&config, chain_kernel<kEarly>, q), "launch");
  }
  check(cudaStreamEndCapture(s, &graph), "end capture");
  cudaGraphExec_t exec;
  check(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "event");
  check(cudaEventCreate(&stop), "event");
  std::vector<float> times;
  for (int r = 0; r < 30; ++r) {
    check(cudaEventRecord(start, s), "record");
    check(cudaGraphLaunch(exec, s), "graph launch");
    check(cudaEventRecord(stop, s), "record");
    check(cudaEventSynchronize(stop), "sync");
    float ms = 0.0f;
    check(cudaEventElapsedTime(&ms, start, stop), "elapsed");
    times.push_back(ms * 1000.0f);
  }
  std::sort(times.begin(), times.end());
  check(cudaEventDestroy(start), "event");
  check(cudaEventDestroy(stop), "event");
  check(cudaGraphExecDestroy(exec), "destroy");
  check(cudaGraphDestroy(graph), "destroy");
  return times[times.size() / 2];
}

template <bool kEarly>
void report(const char* label, const Params& p, cudaStream_t s) {
  const float n = graph_us<kEarly>(p, 64, s), n2 = graph_us<kEarly>(p, 128, s);
  std::vector<long long> cycles(kBlocks);
  check(cudaMemcpy(cycles.data(), p.cycles, kBlocks * sizeof(long long), cudaMemcpyDeviceToHost),
        "copy");
  std::sort(cycles.begin(), cycles.end());
  std::printf("| %-38s | %6.3f | %6lld | %6lld |\n", label, (n2 - n) / 64.0f, cycles[kBlocks / 2],
              cycles[kBlocks * 9 / 10]);
}

}  // namespace

int main() {
  Params p{};
  float* x = nullptr;
  check(cudaMalloc(&x, kBlocks * kThreads * sizeof(float)), "malloc");
  check(cudaMemset(x, 0, kBlocks * kThreads * sizeof(float)), "memset");
  p.x = x;
  check(cudaMalloc(&p.y, kBlocks * kThreads * sizeof(float)), "malloc");
  check(cudaMalloc(&p.cycles, kBlocks * sizeof(long long)), "malloc");
  cudaStream_t s;
  check(cudaStreamCreate(&s), "stream");
  std::printf(
      "| variant | us per launch (2N - N) / N | cycles after the wait (median) | (p90) |\n");
  std::printf("|---|---|---|---|\n");
  for (int round = 0; round < 3; ++round) {
    report<false>("pointers read after the wait", p, s);
    report<true>("pointers in registers before the wait", p, s);
  }
  return 0;
}
