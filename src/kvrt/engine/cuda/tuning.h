// Launch geometry of the bandwidth-bound decode kernels. The library picks it per shape
// (`decode_linear_tuning`, a pure function of the shape); a launch may name its own
// choice (DecodeLinear::tuning, DecodeAttention::next_launch), which the benchmark and
// the tests do to compare choices on the device and to prove every choice computes the
// same thing. There is no process-wide setting: what a launch does depends only on its
// own arguments.
#pragma once

namespace kvrt::engine::cuda {

enum class DecodeLinearKernel { kDefault, kRing, kDirect };

// Every field has an "unset" value (kDefault, 0 or -1, the default-constructed value):
// unset fields take the library's choice for the shape, set ones override it.
struct DecodeLinearTuning {
  DecodeLinearKernel kernel = DecodeLinearKernel::kDefault;
  int blocks_per_sm = 0;  // blocks of one launch per multiprocessor (>= 1)
  // 1: of those slots, use the fewest blocks that still give each block the same largest
  // share of tiles, so the blocks finish together; 0: fill every slot.
  int balanced_grid = -1;
  // kRing: W through the copy engine into a shared-memory ring.
  int stage_keys = 0;   // k elements per W row in one ring slot (multiple of 16)
  int stages = 0;       // ring slots per block (2..16)
  int contiguous = -1;  // 1: one bulk copy per tile (or per SwiGLU half) when a slot
                        // holds whole rows, unpadded; 0: one copy per row, padded
  // Bytes after each W row of a slot copied row by row: 16 (row starts step through
  // every 16-byte bank group: reads conflict-free, copies land 16-byte aligned), 64
  // (conflict-free, even rows 128-byte aligned) or 0 (every row 128-byte aligned, 2-way
  // read conflicts). With 64 or 0 slots hold a multiple of 64 keys, so every copy's
  // source is 128-byte aligned as well. The library pads none: aligned copies stream
  // faster than conflict-free reads save (docs/kernels-sweep.md).
  int row_pad = -1;
  // One token with x in registers: 1 loads it over all lanes of each warp and normalizes
  // it there (load_x_registers_one_token; the library's choice), 0 in token 0's lanes.
  int one_token_x = -1;
  // kDirect: W straight into registers.
  int split_k = 0;  // warps per 8-row tile: 1, 2, 4 or 8
};

// The library's geometry for W [w_rows, in] (w_rows = 2 x outputs with SwiGLU) and
// `tokens` vectors, every field set. decode_linear launches it where DecodeLinear::tuning
// is unset; where the ring's depth and blocks per SM are unset it also fits them to the
// multiprocessor's shared memory.
DecodeLinearTuning decode_linear_tuning(int tokens, int w_rows, int in);

// decode_attention's choice of where the next kernel of the stream may launch: kEarly
// once its blocks have issued their cache prefetch, kLate once they have streamed their
// slice; kDefault (the library's choice) is early when the grid runs in one wave, late
// otherwise.
enum class DependentLaunch { kDefault, kEarly, kLate };

}  // namespace kvrt::engine::cuda
