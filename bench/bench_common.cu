// Device-side part of the benchmark's shared pieces: random buffer contents and the
// graph-replay timer.
#include "bench_common.h"

namespace kvrt::engine::cuda::bench {
namespace {

// Uniform values in [-scale, scale) as bf16, from a hash of the index: never zeros.
__global__ void fill_bf16(uint16_t* out, size_t count, float scale, uint32_t seed) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 0x9e3779b9u ^ seed ^ static_cast<uint32_t>(i >> 32);
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    const float u = (static_cast<float>(h >> 8) / 16777216.0f) * 2.0f - 1.0f;
    out[i] = __bfloat16_as_ushort(__float2bfloat16(u * scale));
  }
}

// A captured graph of `launch(i)` for i in [0, count), instantiated.
class Graph {
 public:
  Graph(const LaunchFn& launch, int count, cudaStream_t stream) : stream_(stream) {
    cudaGraph_t graph = nullptr;
    check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "capture");
    for (int i = 0; i < count; ++i) check(launch(i, stream));
    check(cudaStreamEndCapture(stream, &graph), "end capture");
    check(cudaGraphInstantiate(&exec_, graph, 0), "instantiate");
    check(cudaGraphDestroy(graph), "graph destroy");
    check(cudaEventCreate(&start_), "event");
    check(cudaEventCreate(&stop_), "event");
    check(cudaGraphLaunch(exec_, stream), "graph warm-up");
  }
  ~Graph() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
    cudaGraphExecDestroy(exec_);
  }
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  // One replay, in microseconds.
  double replay_us() {
    check(cudaEventRecord(start_, stream_), "record");
    check(cudaGraphLaunch(exec_, stream_), "graph launch");
    check(cudaEventRecord(stop_, stream_), "record");
    check(cudaEventSynchronize(stop_), "sync");
    float ms = 0.0f;
    check(cudaEventElapsedTime(&ms, start_, stop_), "elapsed");
    return 1000.0 * ms;
  }

 private:
  cudaStream_t stream_;
  cudaGraphExec_t exec_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

LaunchTime Timer::time(const LaunchFn& launch, int launches) {
  for (int i = 0; i < 2 * launches; ++i) check(launch(i, stream));  // warm-up, plans, caches
  check(cudaStreamSynchronize(stream), "warm-up");
  Graph single(launch, launches, stream), twice(launch, 2 * launches, stream);
  std::vector<double> single_us, twice_us;
  for (int it = 0; it < iters; ++it) {
    single_us.push_back(single.replay_us());
    twice_us.push_back(twice.replay_us());
  }
  const double n = median(single_us), n2 = median(twice_us);
  return {(n2 - n) / launches, n / launches, launches};
}

void Buffer::random(float scale, uint32_t seed) {
  fill_bf16<<<1024, 256>>>(static_cast<uint16_t*>(ptr), bytes / 2, scale, seed);
  check(cudaGetLastError(), "fill");
  check(cudaDeviceSynchronize(), "fill");  // the timed stream does not wait on this one
}

void Buffer::zero() {
  check(cudaMemset(ptr, 0, bytes), "zero");
  check(cudaDeviceSynchronize(), "zero");  // the timed stream is non-blocking: no implicit order
}

// `copies` buffers of `bytes` each, random bf16.
std::vector<std::unique_ptr<Buffer>> rotation(size_t bytes, int copies, float scale) {
  std::vector<std::unique_ptr<Buffer>> out;
  for (int i = 0; i < copies; ++i) {
    out.push_back(std::make_unique<Buffer>(bytes));
    out.back()->random(scale, 1234u + static_cast<uint32_t>(i));
  }
  return out;
}

DecodeAttentionOperands::DecodeAttentionOperands(const Model& m, int length, bool fused_rope)
    : q_heads(m.q_heads),
      kv_heads(m.kv_heads),
      head_dim(m.head_dim),
      length(length),
      fused_rope(fused_rope),
      cache_bytes(static_cast<size_t>(m.kv_heads) * length * m.head_dim * 2),
      copies(copies_for(2 * cache_bytes)),
      k(rotation(cache_bytes, copies, 1.0f)),
      v(rotation(cache_bytes, copies, 1.0f)),
      q(static_cast<size_t>(m.q_heads + (fused_rope ? 2 * m.kv_heads : 0)) * m.head_dim * 2),
      out(static_cast<size_t>(m.q_heads) * m.head_dim * 2),
      position(sizeof(int32_t)) {
  q.random(1.0f, 3);
  const int32_t last = length - 1;
  check(cudaMemcpy(position.ptr, &last, sizeof(last), cudaMemcpyHostToDevice), "position");
  if (fused_rope) {
    auto table = rope_inv_freq(m.head_dim, 500000.0f, RopeScaling{});
    check(table.status());
    inv_freq = std::make_unique<Buffer>(table->size() * sizeof(float));
    check(cudaMemcpy(inv_freq->ptr, table->data(), inv_freq->bytes, cudaMemcpyHostToDevice),
          "inv_freq");
  }
}

DecodeAttention DecodeAttentionOperands::op(int i, int splits, const Buffer& workspace, bool rotate,
                                            DependentLaunch next_launch) const {
  const size_t copy = rotate ? static_cast<size_t>(i % copies) : 0;
  DecodeAttention op;
  op.q = q.bf();
  op.k_cache = k[copy]->bf();
  op.v_cache = v[copy]->bf();
  op.position = static_cast<const int32_t*>(position.ptr);
  op.out = out.bf();
  op.q_heads = q_heads;
  op.kv_heads = kv_heads;
  op.head_dim = head_dim;
  op.max_seq = length;
  op.next_launch = next_launch;
  op.splits = splits;
  op.workspace = static_cast<float*>(workspace.ptr);
  op.workspace_bytes = workspace.bytes;
  if (fused_rope) op.rope_inv_freq = static_cast<const float*>(inv_freq->ptr);
  return op;
}

}  // namespace kvrt::engine::cuda::bench
