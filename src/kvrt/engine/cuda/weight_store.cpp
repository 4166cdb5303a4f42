#include "kvrt/engine/cuda/weight_store.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>

#include "kvrt/core/dtype.h"
#include "kvrt/engine/cuda/kernels.h"

namespace kvrt::engine::cuda {
namespace {

constexpr size_t kChunkElems = size_t{8} << 20;  // 16 MiB of bf16 per staging chunk

// Converts `count` elements of `src` (f32, f16 or bf16) to bf16 bits.
void to_bf16(const std::byte* src, DType dtype, size_t count, uint16_t* dst) {
  switch (dtype) {
    case DType::kBF16:
      std::memcpy(dst, src, count * 2);
      return;
    case DType::kF32: {
      const auto* f = reinterpret_cast<const float*>(src);
      for (size_t i = 0; i < count; ++i) dst[i] = f32_to_bf16(f[i]);
      return;
    }
    default: {
      const auto* h = reinterpret_cast<const uint16_t*>(src);
      for (size_t i = 0; i < count; ++i) dst[i] = f32_to_bf16(f16_to_f32(h[i]));
      return;
    }
  }
}

}  // namespace

Result<std::shared_ptr<WeightStore>> WeightStore::of(const WeightProvider& weights, int device) {
  const std::string key = "cuda:" + std::to_string(device) + "/weights";
  KVRT_ASSIGN_OR_RETURN(
      std::shared_ptr<SharedState> state,
      weights.shared_state(key, [&]() -> Result<std::shared_ptr<SharedState>> {
        return std::shared_ptr<SharedState>(std::make_shared<WeightStore>(weights, device));
      }));
  return std::static_pointer_cast<WeightStore>(state);
}

WeightStore::~WeightStore() {
  int saved = 0;
  const bool have_saved = cudaGetDevice(&saved) == cudaSuccess;
  (void)cudaSetDevice(device_);
  for (auto& [name, ptr] : tensors_) (void)cudaFree(ptr);
  for (void* chunk : staging_) {
    if (chunk != nullptr) (void)cudaFreeHost(chunk);
  }
  if (have_saved) (void)cudaSetDevice(saved);
}

size_t WeightStore::device_bytes() const {
  std::lock_guard lock(mutex_);
  return bytes_;
}

size_t WeightStore::uploads() const {
  std::lock_guard lock(mutex_);
  return tensors_.size();
}

Result<const __nv_bfloat16*> WeightStore::get(const std::vector<std::string>& parts) {
  std::string key;
  for (const std::string& part : parts) key += (key.empty() ? "" : "+") + part;
  std::lock_guard lock(mutex_);
  auto found = tensors_.find(key);
  if (found != tensors_.end()) return static_cast<const __nv_bfloat16*>(found->second);

  std::vector<TensorView> views;
  int64_t columns = -1, elements = 0;
  for (const std::string& part : parts) {
    KVRT_ASSIGN_OR_RETURN(TensorView view, weights_.weight(part));
    const int64_t cols = view.rank() == 2 ? view.dim(1) : 1;
    if (view.rank() < 1 || view.rank() > 2 || !view.is_contiguous() ||
        (columns >= 0 && cols != columns)) {
      return invalid_program("weight '", part, "' (", view.shape().to_string(),
                             ") cannot be concatenated with ", key);
    }
    if (view.dtype() != DType::kF32 && view.dtype() != DType::kF16 &&
        view.dtype() != DType::kBF16) {
      return not_supported("weight '", part, "' is ", dtype_name(view.dtype()));
    }
    columns = cols;
    KVRT_ASSIGN_OR_RETURN(int64_t numel, view.numel());
    elements += numel;
    views.push_back(view);
  }
  void* dst = nullptr;
  const size_t bytes = static_cast<size_t>(elements) * 2;
  const cudaError_t error = cudaMalloc(&dst, std::max<size_t>(bytes, 16));
  if (error != cudaSuccess) {
    (void)cudaGetLastError();
    return allocation_failed("cudaMalloc of ", bytes, " bytes for weight ", key, ": ",
                             cudaGetErrorName(error));
  }
  Status uploaded = upload(views, static_cast<__nv_bfloat16*>(dst));
  if (!uploaded.ok()) {
    (void)cudaFree(dst);
    return uploaded.with_context("uploading weight " + key);
  }
  tensors_.emplace(key, dst);
  bytes_ += bytes;
  return static_cast<const __nv_bfloat16*>(dst);
}

// Converts chunk by chunk into two pinned buffers, alternating, so the host converts
// one chunk while the previous one is copied.
Status WeightStore::upload(const std::vector<TensorView>& views, __nv_bfloat16* dst) {
  for (void*& chunk : staging_) {
    if (chunk == nullptr) {
      KVRT_RETURN_IF_ERROR(cuda_check(cudaMallocHost(&chunk, kChunkElems * 2), "cudaMallocHost"));
    }
  }
  cudaStream_t stream = nullptr;
  KVRT_RETURN_IF_ERROR(cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                                  "cudaStreamCreateWithFlags"));
  cudaEvent_t done[2] = {nullptr, nullptr};
  Status status;
  for (cudaEvent_t& event : done) {
    if (status.ok()) status = cuda_check(cudaEventCreate(&event), "cudaEventCreate");
  }
  size_t offset = 0;
  int slot = 0;
  bool pending[2] = {false, false};
  for (const TensorView& view : views) {
    if (!status.ok()) break;
    const size_t count = static_cast<size_t>(*view.numel());
    const size_t elem = dtype_size(view.dtype());
    for (size_t begin = 0; begin < count && status.ok(); begin += kChunkElems) {
      const size_t n = std::min(kChunkElems, count - begin);
      if (pending[slot]) {
        status = cuda_check(cudaEventSynchronize(done[slot]), "cudaEventSynchronize");
        if (!status.ok()) break;
      }
      auto* staging = static_cast<uint16_t*>(staging_[slot]);
      to_bf16(static_cast<const std::byte*>(view.data()) + begin * elem, view.dtype(), n, staging);
      status =
          cuda_check(cudaMemcpyAsync(dst + offset, staging, n * 2, cudaMemcpyHostToDevice, stream),
                     "cudaMemcpyAsync");
      if (status.ok()) status = cuda_check(cudaEventRecord(done[slot], stream), "cudaEventRecord");
      pending[slot] = true;
      offset += n;
      slot ^= 1;
    }
  }
  const Status drained = cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  for (cudaEvent_t event : done) {
    if (event != nullptr) (void)cudaEventDestroy(event);
  }
  (void)cudaStreamDestroy(stream);
  return status.ok() ? drained : status;
}

}  // namespace kvrt::engine::cuda
