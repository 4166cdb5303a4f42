// Conversions, dot, and the element-wise and row-wise ops: embedding, rms_norm,
// kv_cache_write, silu_mul, add.
#include <cmath>
#include <cstring>
#include <vector>

#include "kvrt/engine/cpu/kernels.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace kvrt::engine::cpu::kernels {
namespace {

#if defined(__x86_64__)
// F16C converts 8 halves per instruction; chosen at run time so the binary still runs
// on x86-64 machines without it. Exact, like half_to_float.
__attribute__((target("avx,f16c"))) void widen_f16_f16c(const uint16_t* in, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i halves = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(halves));
  }
  for (; i < n; ++i) out[i] = half_to_float(in[i]);
}

// Read from CPUID directly: clang 14's __builtin_cpu_supports does not know "f16c",
// and the engine must build with the clang that links the fuzzers. AVX also needs the
// OS to save the YMM registers (OSXSAVE, and XCR0 bits 1 and 2).
bool has_f16c() {
  static const bool supported = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return false;
    const bool f16c = (ecx & bit_F16C) != 0, avx = (ecx & bit_AVX) != 0;
    const bool osxsave = (ecx & bit_OSXSAVE) != 0;
    if (!f16c || !avx || !osxsave) return false;
    unsigned xcr0_low = 0, xcr0_high = 0;
    __asm__("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
    return (xcr0_low & 0x6u) == 0x6u;
  }();
  return supported;
}
#endif

}  // namespace

float half_to_float(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  uint32_t magnitude = static_cast<uint32_t>(bits & 0x7fffu) << 13;
  if (magnitude >= (0x7c00u << 13)) {
    magnitude |= 0x7f800000u;  // inf / NaN: all exponent bits, mantissa kept
  } else {
    // Reinterpreting the shifted bits as f32 gives the value times 2^-112 (normal and
    // subnormal alike); one exact multiply rebiases it.
    float scaled;
    std::memcpy(&scaled, &magnitude, sizeof(scaled));
    scaled *= 0x1p112f;
    std::memcpy(&magnitude, &scaled, sizeof(scaled));
  }
  const uint32_t out_bits = magnitude | sign;
  float out;
  std::memcpy(&out, &out_bits, sizeof(out));
  return out;
}

void widen(const void* src, DType dtype, int64_t offset, int64_t n, float* dst) {
  switch (dtype) {
    case DType::kF32:
      std::memcpy(dst, static_cast<const float*>(src) + offset, sizeof(float) * n);
      return;
    case DType::kBF16: {
      const uint16_t* in = static_cast<const uint16_t*>(src) + offset;
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(in[i]);
      return;
    }
    case DType::kF16: {
      const uint16_t* in = static_cast<const uint16_t*>(src) + offset;
#if defined(__x86_64__)
      if (has_f16c()) {
        widen_f16_f16c(in, n, dst);
        return;
      }
#endif
      for (int64_t i = 0; i < n; ++i) dst[i] = half_to_float(in[i]);
      return;
    }
    default:
      return;  // callers check dtypes at build time
  }
}

void narrow(const float* src, int64_t n, void* dst, DType dtype, int64_t offset) {
  switch (dtype) {
    case DType::kF32:
      std::memcpy(static_cast<float*>(dst) + offset, src, sizeof(float) * n);
      return;
    case DType::kBF16: {
      uint16_t* out = static_cast<uint16_t*>(dst) + offset;
      for (int64_t i = 0; i < n; ++i) out[i] = f32_to_bf16(src[i]);
      return;
    }
    case DType::kF16: {
      uint16_t* out = static_cast<uint16_t*>(dst) + offset;
      for (int64_t i = 0; i < n; ++i) out[i] = f32_to_f16(src[i]);
      return;
    }
    default:
      return;
  }
}

namespace {

// The one summation order every dot product uses: 16 interleaved lanes, then a
// pairwise reduction. `load(i)` is element i of b as f32 (exact widening), so a dot
// over bf16 storage equals the dot over its widened copy bit for bit.
template <typename Load>
inline float dot_lanes(const float* a, Load load, int64_t n) {
  constexpr int kLanes = 16;
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) acc[j] += a[i + j] * load(i + j);
  }
  for (int j = 0; i < n; ++i, ++j) acc[j] += a[i] * load(i);
  for (int width = kLanes / 2; width > 0; width /= 2) {
    for (int j = 0; j < width; ++j) acc[j] += acc[j + width];
  }
  return acc[0];
}

}  // namespace

// On x86-64 the dot products also get an AVX2 clone, picked at load time. The lanes
// fix the arithmetic, so both clones return the same bits. Not under ThreadSanitizer:
// the clone's resolver runs while the program is relocated, before the TSan runtime is
// up, and its instrumented entry crashes the program at start.
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
#define KVRT_DOT_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define KVRT_DOT_CLONES
#endif

KVRT_DOT_CLONES float dot(const float* a, const float* b, int64_t n) {
  return dot_lanes(
      a, [b](int64_t i) { return b[i]; }, n);
}

KVRT_DOT_CLONES float dot_bf16(const float* a, const uint16_t* b, int64_t n) {
  return dot_lanes(
      a,
      [b](int64_t i) {
        const uint32_t bits = static_cast<uint32_t>(b[i]) << 16;
        float value;
        std::memcpy(&value, &bits, sizeof(value));
        return value;
      },
      n);
}

void embedding(const int32_t* tokens, int64_t T, const void* table, DType table_dtype, int64_t H,
               float* out) {
  for (int64_t t = 0; t < T; ++t) {
    widen(table, table_dtype, static_cast<int64_t>(tokens[t]) * H, H, out + t * H);
  }
}

void rms_norm(const float* x, int64_t T, int64_t H, const void* weight, DType weight_dtype,
              float eps, float* out, bool unit_offset) {
  thread_local std::vector<float> widened;
  const float* w = static_cast<const float*>(weight);
  if (weight_dtype != DType::kF32 || unit_offset) {
    widened.resize(static_cast<size_t>(H));
    widen(weight, weight_dtype, 0, H, widened.data());
    // Gemma: output * (1.0 + weight.float()), the sum rounded to f32 first.
    if (unit_offset) {
      for (float& value : widened) value = 1.0f + value;
    }
    w = widened.data();
  }
  for (int64_t t = 0; t < T; ++t) {
    const float* row = x + t * H;
    float* dst = out + t * H;
    double sum_sq = 0.0;
    for (int64_t i = 0; i < H; ++i) sum_sq += static_cast<double>(row[i]) * row[i];
    const float mean = static_cast<float>(sum_sq / static_cast<double>(H));
    const float inv_rms = 1.0f / std::sqrt(mean + eps);
    // HF: weight * (x * rsqrt(variance + eps)), in that order.
    for (int64_t i = 0; i < H; ++i) dst[i] = w[i] * (row[i] * inv_rms);
  }
}

void kv_cache_write(const float* new_rows, int64_t T, int64_t kv_heads, int64_t S, int64_t head_dim,
                    int64_t P, void* cache, DType cache_dtype) {
  // new_rows [T, KVH*D] -> cache [KVH, S, D] at rows P + t.
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t g = 0; g < kv_heads; ++g) {
      const float* src = new_rows + (t * kv_heads + g) * head_dim;
      narrow(src, head_dim, cache, cache_dtype, (g * S + P + t) * head_dim);
    }
  }
}

void silu_mul(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void add(const float* a, const float* b, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void argmax_rows(const float* logits, int64_t rows, int64_t width, int32_t* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = logits + r * width;
    int64_t best = 0;
    for (int64_t i = 1; i < width && !std::isnan(row[best]); ++i) {
      if (std::isnan(row[i]) || row[i] > row[best]) best = i;
    }
    out[r] = static_cast<int32_t>(best);
  }
}

}  // namespace kvrt::engine::cpu::kernels
