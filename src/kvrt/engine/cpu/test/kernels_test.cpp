// Each kernel against math done by hand or by a plain independent loop in the test.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <vector>

#include "kvrt/engine/cpu/kernels.h"

namespace kvrt::engine::cpu::kernels {
namespace {

TEST(Kernels, HalfToFloatAgreesWithTheReferenceConversionForEveryBitPattern) {
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    const float fast = half_to_float(static_cast<uint16_t>(bits));
    const float slow = f16_to_f32(static_cast<uint16_t>(bits));
    if (std::isnan(slow)) {
      EXPECT_TRUE(std::isnan(fast)) << bits;
    } else {
      EXPECT_EQ(fast, slow) << bits;
    }
  }
}

TEST(Kernels, WidenF16AgreesWithTheReferenceConversionForEveryBitPattern) {
  std::vector<uint16_t> all(65536);
  for (uint32_t bits = 0; bits < 65536; ++bits) all[bits] = static_cast<uint16_t>(bits);
  std::vector<float> out(all.size());
  widen(all.data(), DType::kF16, 0, static_cast<int64_t>(all.size()), out.data());
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    const float slow = f16_to_f32(static_cast<uint16_t>(bits));
    if (std::isnan(slow)) {
      EXPECT_TRUE(std::isnan(out[bits])) << bits;
    } else {
      EXPECT_EQ(out[bits], slow) << bits;
    }
  }
}

TEST(Kernels, WidenAndNarrowRoundTripHalfTypes) {
  const std::vector<float> values = {1.0f, -2.5f, 0.099609375f, 65504.0f};
  for (DType dtype : {DType::kF16, DType::kBF16, DType::kF32}) {
    std::vector<uint8_t> storage(values.size() * dtype_size(dtype) + 2 * dtype_size(dtype));
    narrow(values.data(), 4, storage.data(), dtype, 2);
    std::vector<float> back(4);
    widen(storage.data(), dtype, 2, 4, back.data());
    for (size_t i = 0; i < values.size(); ++i) {
      const float expected =
          dtype == DType::kBF16 ? bf16_to_f32(f32_to_bf16(values[i])) : values[i];
      EXPECT_EQ(back[i], expected) << dtype_name(dtype) << " " << i;
    }
  }
}

TEST(Kernels, DotMatchesADoubleLoopForEveryLengthAroundTheLaneWidth) {
  for (int64_t n = 0; n < 40; ++n) {
    std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
    double expected = 0;
    for (int64_t i = 0; i < n; ++i) {
      a[i] = 0.25f * static_cast<float>(i % 7) - 0.5f;
      b[i] = 0.125f * static_cast<float>(i % 5) + 0.25f;
      expected += static_cast<double>(a[i]) * b[i];
    }
    EXPECT_NEAR(dot(a.data(), b.data(), n), expected, 1e-5) << n;
  }
}

TEST(Kernels, EmbeddingCopiesTheTokenRows) {
  const std::vector<float> table = {0, 1, 10, 11, 20, 21};  // [3, 2]
  const int32_t tokens[] = {2, 0};
  std::vector<float> out(4);
  embedding(tokens, 2, table.data(), DType::kF32, 2, out.data());
  EXPECT_EQ(out, (std::vector<float>{20, 21, 0, 1}));
}

TEST(Kernels, RmsNormByHand) {
  // mean(x^2) = (1 + 4 + 9 + 16) / 4 = 7.5; eps 0.5 -> divide by sqrt(8) = 2*sqrt(2).
  const std::vector<float> x = {1, 2, 3, 4};
  const std::vector<float> w = {1, 0.5f, 2, 1};
  std::vector<float> out(4);
  rms_norm(x.data(), 1, 4, w.data(), DType::kF32, 0.5f, out.data());
  const float s = 1.0f / std::sqrt(8.0f);
  EXPECT_FLOAT_EQ(out[0], 1 * s);
  EXPECT_FLOAT_EQ(out[1], 2 * s * 0.5f);
  EXPECT_FLOAT_EQ(out[2], 3 * s * 2);
  EXPECT_FLOAT_EQ(out[3], 4 * s);
}

TEST(Kernels, LinearWithBiasByHand) {
  const std::vector<float> x = {1, 2, 3, -1, 0, 1};  // [2, 3]
  const std::vector<float> w = {1, 0, 0, 1, 1, 1};   // [2, 3]
  const std::vector<float> bias = {0.5f, -1};
  std::vector<float> out(4);
  linear(x.data(), 2, 3, w.data(), DType::kF32, 2, bias.data(), DType::kF32, out.data(), nullptr);
  EXPECT_EQ(out, (std::vector<float>{1.5f, 5, -0.5f, -1}));
}

TEST(Kernels, LinearRowsDoNotDependOnTokenCountThreadsOrWeightDtype) {
  const int64_t T = 5, K = 301, N = 403;  // odd sizes, enough work for the pool
  std::vector<float> x(T * K), w(N * K);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i));
  for (size_t i = 0; i < w.size(); ++i) w[i] = bf16_to_f32(f32_to_bf16(std::cos(0.11f * i)));
  std::vector<uint16_t> w_bf16(w.size());
  for (size_t i = 0; i < w.size(); ++i) w_bf16[i] = f32_to_bf16(w[i]);
  std::vector<float> all(T * N), one(N), threaded(T * N), from_bf16(T * N);
  linear(x.data(), T, K, w.data(), DType::kF32, N, nullptr, DType::kF32, all.data(), nullptr);
  ThreadPool pool(3);
  linear(x.data(), T, K, w.data(), DType::kF32, N, nullptr, DType::kF32, threaded.data(), &pool);
  linear(x.data(), T, K, w_bf16.data(), DType::kBF16, N, nullptr, DType::kF32, from_bf16.data(),
         nullptr);
  EXPECT_EQ(all, threaded);
  EXPECT_EQ(all, from_bf16);
  for (int64_t t = 0; t < T; ++t) {
    linear(x.data() + t * K, 1, K, w.data(), DType::kF32, N, nullptr, DType::kF32, one.data(),
           nullptr);
    EXPECT_TRUE(std::equal(one.begin(), one.end(), all.begin() + t * N)) << t;
    // T = 1 with bf16 weights streams them through dot_bf16: still the same bits.
    linear(x.data() + t * K, 1, K, w_bf16.data(), DType::kBF16, N, nullptr, DType::kF32, one.data(),
           nullptr);
    EXPECT_TRUE(std::equal(one.begin(), one.end(), all.begin() + t * N)) << t;
  }
}

TEST(Kernels, LinearLargeEnoughToUseThePoolMatchesADoubleLoop) {
  const int64_t K = 1024, N = 600;  // above the pool's work threshold
  std::vector<float> x(K), w(N * K), out(N);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.01f * static_cast<float>(i % 13);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.02f * static_cast<float>(i % 17) - 0.1f;
  ThreadPool pool(2);
  linear(x.data(), 1, K, w.data(), DType::kF32, N, nullptr, DType::kF32, out.data(), &pool);
  for (int64_t n = 0; n < N; ++n) {
    double expected = 0;
    for (int64_t k = 0; k < K; ++k) expected += static_cast<double>(x[k]) * w[n * K + k];
    EXPECT_NEAR(out[n], expected, 1e-4) << n;
  }
}

TEST(Kernels, RopeInverseFrequenciesAreThetaPowers) {
  std::vector<float> f = rope_inv_freq(4, 10000.0, {});
  ASSERT_EQ(f.size(), 2u);
  EXPECT_FLOAT_EQ(f[0], 1.0f);
  EXPECT_FLOAT_EQ(f[1], 0.01f);
}

TEST(Kernels, Llama3RopeScalingSlowsLowFrequenciesAndBlendsTheBand) {
  RopeScaling scaling;
  scaling.type = RopeScaling::Type::kLlama3;
  scaling.factor = 8;
  scaling.low_freq_factor = 1;
  scaling.high_freq_factor = 4;
  scaling.original_max_position_embeddings = 32;  // wavelengths: > 32 slowed, < 8 kept
  const std::vector<float> base = rope_inv_freq(16, 500000.0, {});
  const std::vector<float> scaled = rope_inv_freq(16, 500000.0, scaling);
  for (size_t i = 0; i < base.size(); ++i) {
    const double wavelen = 2 * std::numbers::pi / base[i];
    double expected = base[i];
    if (wavelen > 32) {
      expected = base[i] / 8.0;
    } else if (wavelen >= 8) {
      const double smooth = (32 / wavelen - 1) / 3;
      expected = (1 - smooth) * base[i] / 8 + smooth * base[i];
    }
    EXPECT_NEAR(scaled[i], expected, 1e-6 * expected) << i;
  }
}

TEST(Kernels, RopeRotatesEachHalfPairByPositionTimesFrequency) {
  // D = 4: pairs (x0, x2) at frequency 1 and (x1, x3) at 0.01; P = 3, second row P + 1.
  const std::vector<float> inv_freq = {1.0f, 0.01f};
  const std::vector<float> x = {1, 2, 3, 4, 1, 2, 3, 4};  // [T=2, 1 head * 4]
  std::vector<float> out(8);
  rope(x.data(), 2, 1, 4, 3, inv_freq.data(), out.data(), 4);
  for (int t = 0; t < 2; ++t) {
    const double p = 3 + t;
    const double c0 = std::cos(p), s0 = std::sin(p), c1 = std::cos(0.01 * p),
                 s1 = std::sin(0.01 * p);
    EXPECT_NEAR(out[t * 4 + 0], 1 * c0 - 3 * s0, 1e-5);
    EXPECT_NEAR(out[t * 4 + 2], 3 * c0 + 1 * s0, 1e-5);
    EXPECT_NEAR(out[t * 4 + 1], 2 * c1 - 4 * s1, 1e-5);
    EXPECT_NEAR(out[t * 4 + 3], 4 * c1 + 2 * s1, 1e-5);
  }
}

TEST(Kernels, KvCacheWriteTouchesOnlyTheNewRows) {
  // cache [KVH=2, S=4, D=2] filled with -1; write T=2 rows at P=1.
  std::vector<float> cache(16, -1.0f);
  const std::vector<float> rows = {1, 2, 3, 4, 5, 6, 7, 8};  // [T=2, 2*2]
  kv_cache_write(rows.data(), 2, 2, 4, 2, 1, cache.data(), DType::kF32);
  const std::vector<float> expected = {-1, -1, 1, 2, 5, 6, -1, -1,   // head 0
                                       -1, -1, 3, 4, 7, 8, -1, -1};  // head 1
  EXPECT_EQ(cache, expected);
}

TEST(Kernels, KvCacheWriteNarrowsIntoHalfCaches) {
  std::vector<uint16_t> cache(4, 0xffff);
  const std::vector<float> rows = {1.5f, -2.0f};
  kv_cache_write(rows.data(), 1, 1, 2, 2, 1, cache.data(), DType::kF16);
  EXPECT_EQ(cache[0], 0xffff);
  EXPECT_EQ(cache[2], f32_to_f16(1.5f));
  EXPECT_EQ(cache[3], f32_to_f16(-2.0f));
}

// Independent causal GQA attention in double.
std::vector<double> naive_attention(const std::vector<float>& q, int64_t T,
                                    const std::vector<float>& k, const std::vector<float>& v,
                                    int64_t S, int64_t NH, int64_t KVH, int64_t D, double scale,
                                    int64_t P) {
  std::vector<double> out(T * NH * D, 0.0);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t h = 0; h < NH; ++h) {
      const int64_t g = h / (NH / KVH);
      std::vector<double> w;
      double total = 0;
      for (int64_t j = 0; j <= P + t; ++j) {
        double s = 0;
        for (int64_t d = 0; d < D; ++d) s += q[(t * NH + h) * D + d] * k[(g * S + j) * D + d];
        w.push_back(std::exp(s * scale));
        total += w.back();
      }
      for (int64_t j = 0; j <= P + t; ++j) {
        for (int64_t d = 0; d < D; ++d)
          out[(t * NH + h) * D + d] += w[j] / total * v[(g * S + j) * D + d];
      }
    }
  }
  return out;
}

TEST(Kernels, AttentionIsCausalGroupedAndScaled) {
  const int64_t T = 3, NH = 4, KVH = 2, D = 4, S = 8, P = 2;
  std::vector<float> q(T * NH * D), k(KVH * S * D), v(KVH * S * D);
  for (size_t i = 0; i < q.size(); ++i) q[i] = std::sin(0.3 * i);
  for (size_t i = 0; i < k.size(); ++i) k[i] = std::cos(0.7 * i);
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.1f * static_cast<float>(i % 11);
  // Rows beyond P + T - 1 hold garbage that must never be read.
  for (int64_t g = 0; g < KVH; ++g) {
    for (int64_t j = P + T; j < S; ++j) {
      for (int64_t d = 0; d < D; ++d) k[(g * S + j) * D + d] = v[(g * S + j) * D + d] = NAN;
    }
  }
  std::vector<float> out(T * NH * D);
  ThreadPool pool(2);
  attention(q.data(), T, k.data(), v.data(), DType::kF32, S, NH, KVH, D, 0.5f, P, out.data(),
            &pool);
  const std::vector<double> expected = naive_attention(q, T, k, v, S, NH, KVH, D, 0.5, P);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(out[i], expected[i], 1e-5) << i;
}

TEST(Kernels, ThreadedAttentionOverALongContextMatchesTheNaiveLoop) {
  const int64_t T = 4, NH = 8, KVH = 2, D = 64, S = 600, P = 500;
  std::vector<float> q(T * NH * D), k(KVH * S * D), v(KVH * S * D);
  for (size_t i = 0; i < q.size(); ++i) q[i] = 0.1f * std::sin(0.3f * static_cast<float>(i));
  for (size_t i = 0; i < k.size(); ++i) k[i] = 0.1f * std::cos(0.7f * static_cast<float>(i));
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.01f * static_cast<float>(i % 101);
  std::vector<float> threaded(T * NH * D), inline_out(T * NH * D);
  ThreadPool pool(3);
  attention(q.data(), T, k.data(), v.data(), DType::kF32, S, NH, KVH, D, 0.125f, P, threaded.data(),
            &pool);
  attention(q.data(), T, k.data(), v.data(), DType::kF32, S, NH, KVH, D, 0.125f, P,
            inline_out.data(), nullptr);
  EXPECT_EQ(threaded, inline_out);
  const std::vector<double> expected = naive_attention(q, T, k, v, S, NH, KVH, D, 0.125, P);
  for (size_t i = 0; i < threaded.size(); ++i) EXPECT_NEAR(threaded[i], expected[i], 1e-5) << i;
}

TEST(Kernels, SiluMulAndAddByHand) {
  const std::vector<float> g = {0.0f, 1.0f, -2.0f}, u = {3.0f, 2.0f, 1.0f};
  std::vector<float> out(3);
  silu_mul(g.data(), u.data(), 3, out.data());
  EXPECT_FLOAT_EQ(out[0], 0.0f);
  EXPECT_FLOAT_EQ(out[1], 2.0f / (1.0f + std::exp(-1.0f)));
  EXPECT_FLOAT_EQ(out[2], -2.0f / (1.0f + std::exp(2.0f)));
  add(g.data(), u.data(), 3, out.data());
  EXPECT_EQ(out, (std::vector<float>{3, 3, -1}));
}

}  // namespace
}  // namespace kvrt::engine::cpu::kernels
