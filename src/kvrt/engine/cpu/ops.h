// The op layer over kernels.h: parses an op's attributes once (prepare_op), infers
// output shapes, checks real tensors before anything is written (check_op: dtypes,
// shapes, token ids, positions), then runs (run_op). The CPU engine runs every node
// of its subgraph through here, and so do the runtime's host kernels, so the two can
// never disagree about an op's meaning.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvrt/core/result.h"
#include "kvrt/core/tensor.h"
#include "kvrt/engine/cpu/thread_pool.h"

namespace kvrt::engine::cpu {

enum class OpKind : uint8_t {
  kEmbedding,
  kRmsNorm,
  kLinear,
  kRope,
  kKvCacheWrite,
  kAttention,
  kSiluMul,
  kAdd,
  kTakeLast,
  kArgmax,
  // Used by some model families only (docs/graph.md).
  kScale,
  kGeluTanhMul,
  kSoftcap,
  kSlice,
};

Result<OpKind> parse_op_kind(std::string_view op);
std::string_view op_kind_name(OpKind kind);

struct PreparedOp {
  OpKind kind = OpKind::kAdd;
  std::string node;                                       // node name, for messages
  float eps = 0.0f;                                       // rms_norm
  int64_t num_heads = 0, num_kv_heads = 0, head_dim = 0;  // rope, attention
  float scale = 0.0f;                                     // attention
  std::vector<float> inv_freq;                            // rope, [rotary_dim / 2]
  bool unit_offset = false;                               // rms_norm: scale by (1 + weight)
  int64_t norm_width = 0;       // rms_norm: normalize groups of this width (0: whole rows)
  int64_t rotary_dim = 0;       // rope: rotated dims per head (head_dim unless partial)
  int64_t window = 0;           // attention: sliding window in positions (0: none)
  float factor = 0.0f;          // scale: the multiplier; softcap: the cap
  int64_t begin = 0, size = 0;  // slice: columns begin..begin+size-1
};

// Parses the attributes `kind` needs; errors (InvalidProgram) name the node and field.
Result<PreparedOp> prepare_op(std::string_view op, std::string_view node,
                              const nlohmann::json& attributes);

// Whether the op takes this many inputs and outputs (linear: 2 or 3 inputs).
bool op_arity_ok(OpKind kind, size_t num_inputs, size_t num_outputs);

struct TensorType {
  DType dtype = DType::kF32;
  Shape shape;
};

// Output dtype and shape from the inputs'; InvalidArgument naming the node when they
// do not fit the op (docs/graph.md).
Result<TensorType> infer_output(const PreparedOp& op, std::span<const TensorType> inputs);

// Everything run_op relies on, on the real tensors: dtypes, shapes, contiguity, token
// ids in range, 0 <= P and P + T <= S, kv_cache_write's output being its cache's
// storage. Reads only i32 inputs (tokens, position); writes nothing.
Status check_op(const PreparedOp& op, std::span<const TensorView> inputs,
                std::span<const TensorView> outputs);

// Runs the op. Precondition: check_op returned Ok for the same tensors.
void run_op(const PreparedOp& op, std::span<const TensorView> inputs,
            std::span<const TensorView> outputs, ThreadPool* pool);

}  // namespace kvrt::engine::cpu
