// Decode-shaped linear layers: y[t, r] = sum_k W[r, k] * x[t, k] for 1..8 token vectors,
// W [rows, in] streamed from HBM exactly once, as a tensor-core GEMV with the RMSNorm,
// SwiGLU, bias, residual and f32-output fusions (decode_linear_common.cuh).
//
// Two kernels: the ring kernel (decode_linear_ring.cu) moves W with the copy engine into
// shared memory and is the library's choice wherever a launch's W is more than its blocks
// can hold at once or several tokens share it; the direct kernel (decode_linear_direct.cu)
// has each thread fetch its own part of W into registers (or, on its one-token path, into
// its own shared-memory slots), and that one-token path runs one token's q/k/v, o_proj and down
// (the sweep in docs/kernels-sweep.md compares geometries). This file checks arguments,
// picks the geometry and dispatches.
#include <algorithm>

#include "kvrt/engine/cuda/decode_linear_common.cuh"
#include "kvrt/engine/cuda/launch.h"
#include "kvrt/engine/cuda/tuning.h"

namespace kvrt::engine::cuda {
namespace {

using namespace detail;
using namespace detail::decode_linear;

constexpr size_t kMaxStagedBytes = 144 * 1024;
constexpr size_t kMaxBlockSmem = 227 * 1024;  // Hopper's per-block opt-in limit
constexpr size_t kSmemPerSm = 228 * 1024;     // Hopper's shared memory per multiprocessor
constexpr size_t kReservedSmemPerBlock = 1024;

// The slot width in keys of rows of `in` keys when slots of 2048 are asked for (near-equal
// slots of a multiple of 64 keys, as decode_linear sets them).
int slot_keys_for(int in) {
  return ceil_div(ceil_div(in, ceil_div(in, 2048)), 64) * 64;
}

bool blocks_fit(int blocks_per_sm, size_t block_smem) {
  return static_cast<size_t>(blocks_per_sm) * (block_smem + kReservedSmemPerBlock) <= kSmemPerSm;
}

Status validate(const DecodeLinear& op) {
  if (op.weight == nullptr) return invalid_argument("decode_linear: weight is null");
  if (op.input == nullptr) return invalid_argument("decode_linear: input is null");
  if ((op.output == nullptr) == (op.output_f32 == nullptr)) {
    return invalid_argument("decode_linear: set exactly one of output and output_f32");
  }
  if (op.tokens < 1 || op.tokens > kMaxTokens) {
    return invalid_argument("decode_linear: tokens must be in [1, 8], got ", op.tokens);
  }
  if (op.rows < 1) return invalid_argument("decode_linear: rows must be positive, got ", op.rows);
  if (op.in < 8 || op.in % 8 != 0) {
    return invalid_argument("decode_linear: in must be a positive multiple of 8, got ", op.in);
  }
  if (!is_aligned(op.weight, 16) || !is_aligned(op.input, 16) || !is_aligned(op.norm_weight, 16)) {
    return invalid_argument("decode_linear: weight, input and norm_weight must be 16-byte aligned");
  }
  if (op.output_f32 != nullptr && (op.residual != nullptr || op.swiglu)) {
    return invalid_argument("decode_linear: output_f32 takes no residual and no swiglu");
  }
  if ((op.argmax_out == nullptr) != (op.argmax_workspace == nullptr)) {
    return invalid_argument("decode_linear: set both argmax_out and argmax_workspace, or neither");
  }
  if (op.argmax_out != nullptr) {
    if (op.output_f32 == nullptr || op.tokens != 1) {
      return invalid_argument("decode_linear: argmax takes output_f32 and one token, got ",
                              op.tokens,
                              op.output_f32 == nullptr ? " tokens and a bf16 output" : " tokens");
    }
    if (!is_aligned(op.argmax_workspace, 8) || !is_aligned(op.argmax_out, alignof(int32_t))) {
      return invalid_argument("decode_linear: argmax_workspace must be 8-byte aligned");
    }
  }
  if (op.swiglu && op.residual != nullptr) {
    return invalid_argument("decode_linear: swiglu takes no residual");
  }
  if (op.bias != nullptr && !is_aligned(op.bias, alignof(bf16))) {
    return invalid_argument("decode_linear: bias must be 2-byte aligned (bf16)");
  }
  const size_t out_bytes = static_cast<size_t>(op.tokens) * op.rows *
                           (op.output_f32 != nullptr ? sizeof(float) : sizeof(bf16));
  const void* out = op.output_f32 != nullptr ? static_cast<const void*>(op.output_f32)
                                             : static_cast<const void*>(op.output);
  const size_t in_bytes = static_cast<size_t>(op.tokens) * op.in * sizeof(bf16);
  if (overlaps(out, out_bytes, op.input, in_bytes)) {
    return invalid_argument("decode_linear: output must not overlap input");
  }
  if (in_bytes > kMaxStagedBytes) {
    return not_supported("decode_linear: tokens * in * 2 = ", in_bytes,
                         " bytes exceeds the shared-memory staging limit of ", kMaxStagedBytes);
  }
  return Status();
}

// The library's geometry, per shape class, from the sweep on the H200
// (docs/kernels-sweep.md): wide rows stream best as two blocks per multiprocessor with
// 1024-key slots; matrices of 2048-key rows as whole-row slots copied in one run per
// tile (x then in registers). q/k/v-sized matrices run one block per SM with a ring
// that holds the block's whole share, so the next launch's blocks are resident beside
// them and stream their W while these finish; o_proj's 2-deep ring (its blocks' whole
// tile) likewise leaves room for a block of the gate/up launch that follows it. One
// token's o_proj and q/k/v run on the direct kernel's one-token path (each thread a chunk
// of 8 rows; o_proj's copied into shared memory, q/k/v's in registers). Alone q/k/v is
// slower there than on the ring (3.1 and 3.9 us against 2.9 and 3.5) and o_proj slower
// than with its W in registers (2.90-3.14 against 2.85), but in the decode step, where
// what fits beside the launches around them decides, o_proj's choice made both steps
// 3-4% faster and q/k/v's (with down's fourth chunk copied) 3.4% and 2.8%
// (docs/kernels-notes.md). Grids
// are balanced (decode_linear_grid) where a block streams several tiles, except for one
// token's gate/up, whose x arrives over all lanes; where a block's whole share fits its
// ring at once, more blocks won. down takes a fifth slot where two blocks per SM still
// fit beside their staged x; one token's down of <= 8192 keys over <= 2048 rows runs on
// the one-token path, its whole matrix in flight before the PDL wait (TinyLlama 5.72-5.82
// against 6.78-6.81 us, Llama-3.2-1B 7.88-7.91 against 9.10-9.15). gate/up at 8 tokens
// streams faster as one block per SM.
DecodeLinearTuning default_tuning(int tokens, int w_rows, int in) {
  constexpr double kMiB = 1024.0 * 1024.0;
  const double bytes = 2.0 * w_rows * in;
  DecodeLinearTuning t;
  t.kernel = DecodeLinearKernel::kRing;
  t.contiguous = 0;
  t.split_k = 8;
  t.balanced_grid = 1;
  t.row_pad = 0;  // every copy 128-byte aligned: faster than conflict-free reads
  t.one_token_x = 1;
  if (bytes <= 9 * kMiB && in <= 2048) {  // o_proj: a 2-deep ring holds a block's tile
    t.stage_keys = 1024;                  // and leaves room for a gate/up block
    t.stages = 2;
    t.blocks_per_sm = 2;
    t.balanced_grid = 0;
    if (tokens == 1) t.kernel = DecodeLinearKernel::kDirect;
  } else if (bytes <= 16 * kMiB) {  // q/k/v: the next launch's blocks fit beside these
    // (one token: the direct kernel, for the decode step's sake; see above)
    t.stage_keys = 2048;
    t.stages = 3;
    t.blocks_per_sm = 1;
    t.contiguous = 1;
    t.balanced_grid = 0;
    if (tokens == 1 && in <= 2048) t.kernel = DecodeLinearKernel::kDirect;
  } else if (in >= 4096 || (tokens == 1 && in >= 3072)) {  // down; one token's wide rows
    // One token's rows of 3072 keys stream faster here than in the classes below
    // (Llama-3.2-3B's q/k/v, o_proj, gate/up and LM head 1-7% alone, its step 1.2%).
    t.stage_keys = 1024;
    // Five slots where two blocks per SM still fit (<= 110 KiB each with the staged x,
    // the reduction buffers and barriers), else four.
    const double block_bytes = 5.0 * kTileCols * t.stage_keys * 2 + 2.0 * tokens * in + 8 * 1024;
    t.stages = block_bytes <= 110 * 1024 ? 5 : 4;
    t.blocks_per_sm = 2;
    t.balanced_grid = 0;
  } else if (bytes >= 100 * kMiB) {  // LM head
    // As many bytes in flight as four 2048-key slots, whatever the row width: narrower
    // slots, a deeper ring. Four of Qwen2.5-0.5B's 896-key slots (57 KB a block) left
    // room on every SM for the launches after it, and inside the decode step its blocks
    // ended 62.8-95.4 us after the previous launch; 9 deep (133 KB), 62.1-63.7 (the
    // step 511.6 -> 474.4 us). Six 2048-key slots gained nothing over four.
    t.stage_keys = 2048;
    t.stages = std::clamp(4 * 2048 / slot_keys_for(in), 4, kMaxStages);
    t.blocks_per_sm = 1;
    t.contiguous = 1;
  } else {  // gate/up: two blocks per SM below 8 tokens (ahead at 1-6, a tie at 7), one at 8
    t.stage_keys = 2048;
    t.stages = tokens >= 8 ? 4 : 3;
    t.blocks_per_sm = tokens >= 8 ? 1 : 2;
    t.contiguous = 1;
    t.balanced_grid = tokens == 1 ? 0 : 1;
    // One block per SM on slots narrower than the 2048 keys its depth was tuned at: a
    // deeper ring keeps as many bytes in flight (Qwen2.5-0.5B's 896-key slots, 10 deep:
    // 8.9 -> 7.4 us; Qwen2.5-1.5B's 1536-key slots, 6 deep, -1.5%; Llama-3.2-3B a tie).
    // Not at two blocks per SM: Qwen2.5-0.5B's 2 and 4 tokens were 1-2% slower 7 deep
    // (Qwen2.5-1.5B's 3% faster 4 deep), and one token's step 1.1% slower for
    // Llama-3.2-3B (docs/kernels-notes.md).
    if (t.blocks_per_sm == 1) {
      t.stages = std::min(kMaxStages, ceil_div(t.stages * 2048, slot_keys_for(in)));
    }
  }
  // One token's rows of <= 4 chunks per thread (in <= 8192) over <= 256 tiles (<= 2048
  // rows: one wave at two blocks per SM) run on the one-token path, the whole matrix in
  // flight before the PDL wait, whatever the class: the down matrices (5632, 8192) and,
  // past the classes tuned at hidden 2048, Qwen2.5-0.5B's down (896 x 4864: 3.87 -> 2.84
  // us, its decode step 6.8% faster). Not at 3072 rows: Llama-3.2-3B's o_proj and down
  // were 20% and 7% faster alone there but its step 1.4% slower (docs/kernels-notes.md,
  // *Other models*).
  if (tokens == 1 && w_rows <= 2048 && in <= 8192) t.kernel = DecodeLinearKernel::kDirect;
  return t;
}

// The geometry of a launch: the library's choice with the set fields of `o` (the
// launch's own choice) over it. *fit_to_sm tells whether the ring's depth and blocks per
// SM are the library's own, which decode_linear then fits to the multiprocessor.
DecodeLinearTuning resolve_tuning(int tokens, int w_rows, int in, const DecodeLinearTuning& o,
                                  bool* fit_to_sm) {
  DecodeLinearTuning t = default_tuning(tokens, w_rows, in);
  *fit_to_sm = o.stages <= 0 && o.blocks_per_sm <= 0;
  if (o.kernel != DecodeLinearKernel::kDefault) t.kernel = o.kernel;
  if (o.blocks_per_sm > 0) t.blocks_per_sm = o.blocks_per_sm;
  if (o.stage_keys > 0) t.stage_keys = o.stage_keys;
  if (o.stages > 0) t.stages = o.stages;
  if (o.contiguous >= 0) t.contiguous = o.contiguous;
  if (o.balanced_grid >= 0) t.balanced_grid = o.balanced_grid;
  if (o.split_k > 0) t.split_k = o.split_k;
  if (o.row_pad >= 0) t.row_pad = o.row_pad;
  if (o.one_token_x >= 0) t.one_token_x = o.one_token_x;
  return t;
}

}  // namespace

DecodeLinearTuning decode_linear_tuning(int tokens, int w_rows, int in) {
  return default_tuning(tokens, w_rows, in);
}

Status decode_linear(const DecodeLinear& op, cudaStream_t stream) {
  KVRT_RETURN_IF_ERROR(validate(op));
  bool fit_to_sm = false;
  DecodeLinearTuning tuning =
      resolve_tuning(op.tokens, op.swiglu ? 2 * op.rows : op.rows, op.in, op.tuning, &fit_to_sm);
  Params p{};
  p.w = op.weight;
  p.x = op.input;
  p.norm_w = op.norm_weight;
  p.residual = op.residual;
  p.bias = op.bias;
  p.y = op.output;
  p.y_f32 = op.output_f32;
  p.tokens = op.tokens;
  p.rows = op.rows;
  p.in = op.in;
  p.chunks = op.in / 8;
  p.x_stride = p.chunks + (12 - p.chunks % 8) % 8;  // = 4 (mod 8): tokens g, g+1 hit other banks
  p.tiles = ceil_div(op.rows, op.swiglu ? kTileCols / 2 : kTileCols);
  p.eps = op.norm_eps;
  const int epilogue = (op.swiglu                  ? kSwiglu
                        : op.output_f32 != nullptr ? kStoreF32
                        : op.residual != nullptr   ? kResidual
                                                   : kStore) |
                       (op.bias != nullptr ? kBias : 0) | (op.argmax_out != nullptr ? kArgmax : 0);
  const bool norm = op.norm_weight != nullptr;
  if (op.argmax_out != nullptr) {
    set_argmax_pointers(p, op.argmax_out, op.argmax_workspace);
    tuning.kernel = DecodeLinearKernel::kRing;  // the one kernel with the argmax epilogue
  }

  if (tuning.kernel == DecodeLinearKernel::kDirect) {
    p.split_k = tuning.split_k >= 8 ? 8 : tuning.split_k >= 4 ? 4 : tuning.split_k >= 2 ? 2 : 1;
    return launch_decode_linear_direct(p, epilogue, norm, tuning.blocks_per_sm,
                                       tuning.balanced_grid > 0, stream);
  }
  // Near-equal slots of a multiple of 16 keys (row stride an odd number of 16-byte units
  // with the 16-byte pad, so the 8 rows a warp reads sit in different bank groups), or
  // of 64 keys when the rows are to start 128-byte aligned (DecodeLinearTuning::row_pad).
  const int row_pad = tuning.row_pad == 16 || tuning.row_pad == 64 ? tuning.row_pad : 0;
  const int granule = row_pad == 16 ? 16 : 64;
  auto set_slots = [&](int target_keys) {
    const int wanted = ceil_div(op.in, std::max(granule, target_keys / granule * granule));
    p.stage_keys = ceil_div(ceil_div(op.in, wanted), granule) * granule;
    p.parts = ceil_div(op.in, p.stage_keys);
    p.row_stride = p.stage_keys * 2 + row_pad;
  };
  set_slots(tuning.stage_keys);
  p.stages = std::clamp(tuning.stages, 2, kMaxStages);
  while (p.stages > 2 && decode_linear_ring_smem(p) > kMaxBlockSmem) --p.stages;
  while (p.stage_keys > granule && decode_linear_ring_smem(p) > kMaxBlockSmem) {  // wide x
    set_slots(p.stage_keys / 2);
  }
  if (tuning.contiguous > 0 && p.parts == 1) {  // whole rows: one unpadded run per tile
    p.contiguous = 1;
    p.row_stride = op.in * 2;
  }
  // The library's blocks of an SM must fit side by side, or every SM's last block runs as
  // a second wave: a shallower ring costs far less. Several tokens' staged x is what
  // outgrows them (Llama-3.1-8B's gate/up at 6-8 tokens: 71.9-73.8 us on a 4-deep ring,
  // 60.0-61.5 on a 2-deep one; Llama-3.2-3B's at 7 tokens: 35.0 against 30.2).
  if (fit_to_sm) {
    tuning.blocks_per_sm = std::max(1, tuning.blocks_per_sm);
    while (p.stages > 2 && !blocks_fit(tuning.blocks_per_sm, decode_linear_ring_smem(p))) {
      --p.stages;
    }
    while (tuning.blocks_per_sm > 1 &&
           !blocks_fit(tuning.blocks_per_sm, decode_linear_ring_smem(p))) {
      --tuning.blocks_per_sm;
    }
  }
  return launch_decode_linear_ring(p, epilogue, norm, tuning, stream);
}

}  // namespace kvrt::engine::cuda
