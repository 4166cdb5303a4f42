// Shape inference, pre-write checks and dispatch of the ops (see ops.h).
#include <algorithm>

#include "kvrt/engine/cpu/kernels.h"
#include "kvrt/engine/cpu/ops.h"

namespace kvrt::engine::cpu {
namespace {

bool is_float_storage(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16;
}

// "node 'layers.0.attn': input 1 (k_cache) must be ..." style messages.
template <typename... Parts>
Status shape_error(const PreparedOp& op, const Parts&... parts) {
  return invalid_argument(op_kind_name(op.kind), " node '", op.node, "': ", parts...);
}

Status expect(const PreparedOp& op, const TensorType& t, const char* what, bool dtype_ok,
              const char* dtype_text, int rank) {
  if (!dtype_ok) {
    return shape_error(op, what, " must be ", dtype_text, ", got ", dtype_name(t.dtype));
  }
  if (t.shape.rank() != rank) {
    return shape_error(op, what, " must have rank ", rank, ", got shape ", t.shape.to_string());
  }
  return Status();
}

Status expect_position(const PreparedOp& op, const TensorType& t) {
  if (t.dtype != DType::kI32 || !(t.shape == Shape{1})) {
    return shape_error(op, "position must be i32 [1], got ", dtype_name(t.dtype), " ",
                       t.shape.to_string());
  }
  return Status();
}

int64_t read_position(const TensorView& view) {
  return static_cast<int64_t>(*view.data_as<const int32_t>());
}

}  // namespace

Result<TensorType> infer_output(const PreparedOp& op, std::span<const TensorType> in) {
  if (!op_arity_ok(op.kind, in.size(), 1)) {
    return shape_error(op, "wrong number of inputs (", in.size(), ")");
  }
  const bool f32_0 = in[0].dtype == DType::kF32;
  switch (op.kind) {
    case OpKind::kEmbedding: {
      KVRT_RETURN_IF_ERROR(expect(op, in[0], "tokens", in[0].dtype == DType::kI32, "i32", 2));
      KVRT_RETURN_IF_ERROR(
          expect(op, in[1], "table", is_float_storage(in[1].dtype), "f32/f16/bf16", 2));
      if (in[0].shape[0] != 1) return shape_error(op, "tokens must be [1, T]");
      return TensorType{DType::kF32, Shape{in[0].shape[1], in[1].shape[1]}};
    }
    case OpKind::kRmsNorm: {
      KVRT_RETURN_IF_ERROR(expect(op, in[0], "x", f32_0, "f32", 2));
      KVRT_RETURN_IF_ERROR(
          expect(op, in[1], "weight", is_float_storage(in[1].dtype), "f32/f16/bf16", 1));
      const int64_t width = op.norm_width > 0 ? op.norm_width : in[0].shape[1];
      if (in[1].shape[0] != width || (op.norm_width > 0 && in[0].shape[1] % width != 0)) {
        return shape_error(op, "weight ", in[1].shape.to_string(), " does not match x ",
                           in[0].shape.to_string(),
                           op.norm_width > 0 ? " normalized per head" : "");
      }
      return in[0];
    }
    case OpKind::kLinear: {
      KVRT_RETURN_IF_ERROR(expect(op, in[0], "x", f32_0, "f32", 2));
      KVRT_RETURN_IF_ERROR(
          expect(op, in[1], "weight", is_float_storage(in[1].dtype), "f32/f16/bf16", 2));
      if (in[1].shape[1] != in[0].shape[1]) {
        return shape_error(op, "weight ", in[1].shape.to_string(), " does not match x ",
                           in[0].shape.to_string());
      }
      if (in.size() == 3) {
        KVRT_RETURN_IF_ERROR(
            expect(op, in[2], "bias", is_float_storage(in[2].dtype), "f32/f16/bf16", 1));
        if (in[2].shape[0] != in[1].shape[0]) {
          return shape_error(op, "bias ", in[2].shape.to_string(), " does not match weight ",
                             in[1].shape.to_string());
        }
      }
      return TensorType{DType::kF32, Shape{in[0].shape[0], in[1].shape[0]}};
    }
    case OpKind::kRope: {
      KVRT_RETURN_IF_ERROR(expect(op, in[0], "x", f32_0, "f32", 2));
      KVRT_RETURN_IF_ERROR(expect_position(op, in[1]));
      if (in[0].shape[1] != op.num_heads * op.head_dim) {
        return shape_error(op, "x ", in[0].shape.to_string(), " is not [T, ", op.num_heads, " * ",
                           op.head_dim, "]");
      }
      return in[0];
    }
    case OpKind::kKvCacheWrite: {
      KVRT_RETURN_IF_ERROR(
          expect(op, in[0], "cache", is_float_storage(in[0].dtype), "f32/f16/bf16", 3));
      KVRT_RETURN_IF_ERROR(expect(op, in[1], "new rows", in[1].dtype == DType::kF32, "f32", 2));
      KVRT_RETURN_IF_ERROR(expect_position(op, in[2]));
      if (in[1].shape[1] != in[0].shape[0] * in[0].shape[2]) {
        return shape_error(op, "new rows ", in[1].shape.to_string(), " do not match cache ",
                           in[0].shape.to_string());
      }
      return in[0];
    }
    case OpKind::kAttention: {
      KVRT_RETURN_IF_ERROR(expect(op, in[0], "q", f32_0, "f32", 2));
      KVRT_RETURN_IF_ERROR(
          expect(op, in[1], "k_cache", is_float_storage(in[1].dtype), "f32/f16/bf16", 3));
      KVRT_RETURN_IF_ERROR(
          expect(op, in[2], "v_cache", in[2].dtype == in[1].dtype, "the k_cache dtype", 3));
      KVRT_RETURN_IF_ERROR(expect_position(op, in[3]));
      const Shape& k = in[1].shape;
      if (!(k == in[2].shape) || k[0] != op.num_kv_heads || k[2] != op.head_dim) {
        return shape_error(op, "caches ", k.to_string(), " and ", in[2].shape.to_string(),
                           " are not [", op.num_kv_heads, ", S, ", op.head_dim, "]");
      }
      if (in[0].shape[1] != op.num_heads * op.head_dim) {
        return shape_error(op, "q ", in[0].shape.to_string(), " is not [T, ", op.num_heads, " * ",
                           op.head_dim, "]");
      }
      return in[0];
    }
    case OpKind::kSiluMul:
    case OpKind::kAdd:
    case OpKind::kGeluTanhMul: {
      if (!f32_0 || in[1].dtype != DType::kF32 || !(in[0].shape == in[1].shape)) {
        return shape_error(op, "inputs must be f32 of one shape, got ", in[0].shape.to_string(),
                           " and ", in[1].shape.to_string());
      }
      return in[0];
    }
    case OpKind::kTakeLast: {
      KVRT_RETURN_IF_ERROR(expect(op, in[0], "x", f32_0, "f32", 2));
      return TensorType{DType::kF32, Shape{1, in[0].shape[1]}};
    }
    case OpKind::kArgmax: {
      KVRT_RETURN_IF_ERROR(expect(op, in[0], "logits", f32_0, "f32", 2));
      return TensorType{DType::kI32, Shape{in[0].shape[0], 1}};
    }
    case OpKind::kScale:
    case OpKind::kSoftcap: {
      if (!f32_0) return shape_error(op, "x must be f32, got ", dtype_name(in[0].dtype));
      return in[0];
    }
    case OpKind::kSlice: {
      KVRT_RETURN_IF_ERROR(expect(op, in[0], "x", f32_0, "f32", 2));
      if (op.begin + op.size > in[0].shape[1]) {
        return shape_error(op, "columns ", op.begin, "..", op.begin + op.size - 1,
                           " are outside x ", in[0].shape.to_string());
      }
      return TensorType{DType::kF32, Shape{in[0].shape[0], op.size}};
    }
  }
  return shape_error(op, "unhandled op");
}

Status check_op(const PreparedOp& op, std::span<const TensorView> inputs,
                std::span<const TensorView> outputs) {
  if (!op_arity_ok(op.kind, inputs.size(), outputs.size())) {
    return shape_error(op, "wrong number of inputs or outputs");
  }
  TensorType types[4];
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorView& view = inputs[i];
    if (!view.is_contiguous() || (view.data() == nullptr && !view.empty())) {
      return shape_error(op, "input ", i, " must be contiguous, non-null storage");
    }
    types[i] = {view.dtype(), view.shape()};
  }
  KVRT_ASSIGN_OR_RETURN(TensorType expected, infer_output(op, {types, inputs.size()}));
  const TensorView& out = outputs[0];
  if (out.dtype() != expected.dtype || !(out.shape() == expected.shape) || !out.is_contiguous() ||
      (out.data() == nullptr && !out.empty())) {
    return shape_error(op, "output must be contiguous ", dtype_name(expected.dtype), " ",
                       expected.shape.to_string(), ", got ", dtype_name(out.dtype()), " ",
                       out.shape().to_string());
  }
  switch (op.kind) {
    case OpKind::kEmbedding: {
      const int64_t vocab = inputs[1].dim(0);
      const int32_t* tokens = inputs[0].data_as<const int32_t>();
      for (int64_t t = 0; t < inputs[0].dim(1); ++t) {
        if (tokens[t] < 0 || tokens[t] >= vocab) {
          return shape_error(op, "token id ", tokens[t], " at index ", t,
                             " is outside the vocabulary [0, ", vocab, ")");
        }
      }
      return Status();
    }
    case OpKind::kRope:
    case OpKind::kKvCacheWrite:
    case OpKind::kAttention: {
      const TensorView& position = inputs[op.kind == OpKind::kRope ? 1 : (inputs.size() - 1)];
      const int64_t p = read_position(position);
      const int64_t t = op.kind == OpKind::kKvCacheWrite ? inputs[1].dim(0) : inputs[0].dim(0);
      if (p < 0) return shape_error(op, "position ", p, " is negative");
      if (op.kind == OpKind::kRope) return Status();
      const int64_t capacity = inputs[op.kind == OpKind::kKvCacheWrite ? 0 : 1].dim(1);
      if (p + t > capacity) {
        return shape_error(op, "position ", p, " + ", t, " tokens exceeds the cache capacity ",
                           capacity);
      }
      if (op.kind == OpKind::kKvCacheWrite && out.data() != inputs[0].data()) {
        return shape_error(op, "output must be the cache's own storage (in-place update)");
      }
      return Status();
    }
    case OpKind::kTakeLast:
      if (inputs[0].dim(0) < 1) return shape_error(op, "x has no rows");
      return Status();
    case OpKind::kArgmax:
      if (inputs[0].dim(1) < 1) return shape_error(op, "logits have no columns");
      return Status();
    default:
      return Status();
  }
}

void run_op(const PreparedOp& op, std::span<const TensorView> in,
            std::span<const TensorView> outputs, ThreadPool* pool) {
  const TensorView& out = outputs[0];
  float* y = out.data_as<float>();
  auto f32 = [&](size_t i) { return in[i].data_as<const float>(); };
  switch (op.kind) {
    case OpKind::kEmbedding:
      kernels::embedding(in[0].data_as<const int32_t>(), in[0].dim(1), in[1].data(), in[1].dtype(),
                         in[1].dim(1), y);
      return;
    case OpKind::kRmsNorm: {
      // Per-head norms: [T, n*D] is [T*n, D] in memory.
      const int64_t width = op.norm_width > 0 ? op.norm_width : in[0].dim(1);
      const int64_t rows = in[0].dim(0) * (in[0].dim(1) / width);
      kernels::rms_norm(f32(0), rows, width, in[1].data(), in[1].dtype(), op.eps, y,
                        op.unit_offset);
      return;
    }
    case OpKind::kLinear: {
      const bool has_bias = in.size() == 3;
      kernels::linear(f32(0), in[0].dim(0), in[0].dim(1), in[1].data(), in[1].dtype(), in[1].dim(0),
                      has_bias ? in[2].data() : nullptr, has_bias ? in[2].dtype() : DType::kF32, y,
                      pool);
      return;
    }
    case OpKind::kRope:
      kernels::rope(f32(0), in[0].dim(0), op.num_heads, op.head_dim, read_position(in[1]),
                    op.inv_freq.data(), y, op.rotary_dim);
      return;
    case OpKind::kKvCacheWrite:
      kernels::kv_cache_write(f32(1), in[1].dim(0), in[0].dim(0), in[0].dim(1), in[0].dim(2),
                              read_position(in[2]), out.data(), in[0].dtype());
      return;
    case OpKind::kAttention:
      kernels::attention(f32(0), in[0].dim(0), in[1].data(), in[2].data(), in[1].dtype(),
                         in[1].dim(1), op.num_heads, op.num_kv_heads, op.head_dim, op.scale,
                         read_position(in[3]), y, pool, op.window);
      return;
    case OpKind::kSiluMul:
    case OpKind::kAdd:
    case OpKind::kGeluTanhMul:
    case OpKind::kScale:
    case OpKind::kSoftcap: {
      const Result<int64_t> count = in[0].numel();
      const int64_t n = count.ok() ? *count : 0;
      if (op.kind == OpKind::kAdd) {
        kernels::add(f32(0), f32(1), n, y);
      } else if (op.kind == OpKind::kSiluMul) {
        kernels::silu_mul(f32(0), f32(1), n, y);
      } else if (op.kind == OpKind::kGeluTanhMul) {
        kernels::gelu_tanh_mul(f32(0), f32(1), n, y);
      } else if (op.kind == OpKind::kScale) {
        kernels::scale(f32(0), n, op.factor, y);
      } else {
        kernels::softcap(f32(0), n, op.factor, y);
      }
      return;
    }
    case OpKind::kSlice:
      kernels::slice_columns(f32(0), in[0].dim(0), in[0].dim(1), op.begin, op.size, y);
      return;
    case OpKind::kTakeLast: {
      const int64_t rows = in[0].dim(0), width = in[0].dim(1);
      const float* src = f32(0) + (rows - 1) * width;
      std::copy(src, src + width, y);
      return;
    }
    case OpKind::kArgmax:
      kernels::argmax_rows(f32(0), in[0].dim(0), in[0].dim(1), out.data_as<int32_t>());
      return;
  }
}

}  // namespace kvrt::engine::cpu
