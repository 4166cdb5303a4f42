// The device copy of a program's weights: one store per program and device, shared by
// every CUDA engine built from that program (prefill and decode never hold two copies,
// F5). Weights are uploaded on first use, in bf16 whatever their stored dtype, in the
// layouts the kernels want: a list of parameters becomes one matrix with their rows
// concatenated (q/k/v, gate/up). The host side reads the mapped file through pinned
// staging chunks; nothing is copied whole on the host.
#pragma once

#include <cuda_bf16.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kvrt/core/result.h"
#include "kvrt/engine/common/engine.h"

namespace kvrt::engine::cuda {

class WeightStore final : public SharedState {
 public:
  // The store of `weights` on cuda:`device`, made on first use.
  static Result<std::shared_ptr<WeightStore>> of(const WeightProvider& weights, int device);
  ~WeightStore() override;
  WeightStore(const WeightStore&) = delete;
  WeightStore& operator=(const WeightStore&) = delete;

  // The rows of `parts` (each a weight name; every part 1-D, or 2-D with equal column
  // counts) concatenated into one bf16 tensor on the device; uploaded once per list.
  // Errors name the weight (missing, or columns that differ).
  Result<const __nv_bfloat16*> get(const std::vector<std::string>& parts);
  // f32 weights as given (rope tables and the like are the engine's own, not here).

  size_t device_bytes() const;
  size_t uploads() const;

  WeightStore(const WeightProvider& weights, int device) : weights_(weights), device_(device) {}

 private:
  Status upload(const std::vector<TensorView>& views, __nv_bfloat16* dst);

  const WeightProvider& weights_;
  int device_;
  mutable std::mutex mutex_;
  std::map<std::string, void*> tensors_;  // joined part names -> device storage
  size_t bytes_ = 0;
  void* staging_[2] = {nullptr, nullptr};  // pinned chunks, alive while uploading
};

}  // namespace kvrt::engine::cuda
