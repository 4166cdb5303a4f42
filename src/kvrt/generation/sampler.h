// Token sampling as a chain of small samplers, after llama.cpp: each one narrows or
// reshapes the candidate list (repetition penalty, temperature, top-k, top-p, min-p),
// then a seeded draw picks a token. Temperature 0 is greedy: argmax, ties to the
// lowest id. The same seed and the same logits give the same tokens on every run.
//
//   logits ─► repetition penalty ─► temperature ─► top-k ─► top-p ─► min-p ─► draw
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "kvrt/core/result.h"

namespace kvrt {

struct TokenCandidate {
  int32_t id;
  float logit;
};

// The tokens still in the running for one step.
struct Candidates {
  std::vector<TokenCandidate> items;
  bool sorted = false;  // by logit descending, ties by lower id

  static Candidates from_logits(std::span<const float> logits);
  void sort();
  // Softmax of the logits, in items order (computed in double).
  std::vector<double> probabilities() const;
};

class Sampler {
 public:
  virtual ~Sampler() = default;
  virtual std::string_view name() const = 0;
  virtual void apply(Candidates& candidates) = 0;
  // Records a token of the sequence (prompt or generated).
  virtual void accept(int32_t /*token*/) {}
  virtual void reset() {}
};

// Hugging Face semantics: for every distinct token already in the sequence, a positive
// logit is divided by penalty and a negative one multiplied by it.
std::unique_ptr<Sampler> make_repetition_penalty(float penalty);
std::unique_ptr<Sampler> make_temperature(float temperature);  // temperature > 0
std::unique_ptr<Sampler> make_top_k(int32_t k);                // k <= 0: keep all
// Keeps the most likely tokens whose probabilities sum to at least p (>= min_keep).
std::unique_ptr<Sampler> make_top_p(float p, size_t min_keep = 1);
// Keeps tokens whose probability is at least p times the largest one.
std::unique_ptr<Sampler> make_min_p(float p, size_t min_keep = 1);

struct SamplingParams {
  float temperature = 1.0f;         // 0: greedy
  int32_t top_k = 0;                // 0: off
  float top_p = 1.0f;               // 1: off
  float min_p = 0.0f;               // 0: off
  float repetition_penalty = 1.0f;  // 1: off
  uint64_t seed = 0;
};

class SamplerChain {
 public:
  // The chain for params; InvalidArgument names any parameter out of range.
  static Result<SamplerChain> create(const SamplingParams& params);
  // An empty chain that draws with the given seed (or takes the argmax when greedy).
  SamplerChain(uint64_t seed, bool greedy) : rng_(seed), seed_(seed), greedy_(greedy) {}

  void add(std::unique_ptr<Sampler> sampler) { samplers_.push_back(std::move(sampler)); }

  // Records prompt tokens (for the repetition penalty).
  void accept(std::span<const int32_t> tokens);
  // Picks the next token from logits (one per vocabulary entry) and records it.
  // InvalidArgument for empty logits or a NaN.
  Result<int32_t> sample(std::span<const float> logits);
  // Forgets recorded tokens and restarts the random sequence from the seed.
  void reset();

 private:
  int32_t draw(const Candidates& candidates);

  std::vector<std::unique_ptr<Sampler>> samplers_;
  std::mt19937_64 rng_;
  uint64_t seed_;
  bool greedy_;
};

}  // namespace kvrt
