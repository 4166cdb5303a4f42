#include "kvrt/generation/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kvrt {
namespace {

bool before(const TokenCandidate& a, const TokenCandidate& b) {
  return a.logit != b.logit ? a.logit > b.logit : a.id < b.id;
}

// A probability within this of the threshold counts as reaching it, so that a table
// like [0.5, 0.3, 0.2] given as float log-probabilities keeps one token at p = 0.5
// despite rounding (float logits carry about 7 significant digits).
constexpr double kProbabilityTolerance = 1e-6;

class RepetitionPenalty final : public Sampler {
 public:
  explicit RepetitionPenalty(float penalty) : penalty_(penalty) {}
  std::string_view name() const override { return "repetition_penalty"; }
  void apply(Candidates& candidates) override {
    if (penalty_ == 1.0f || seen_.empty()) return;
    auto penalize = [&](TokenCandidate& c) {
      c.logit = c.logit < 0 ? c.logit * penalty_ : c.logit / penalty_;
    };
    auto& items = candidates.items;
    for (int32_t id : seen_) {
      // Before any reordering, items[id] is token id.
      if (static_cast<size_t>(id) < items.size() && items[id].id == id) {
        penalize(items[id]);
        continue;
      }
      auto it = std::find_if(items.begin(), items.end(),
                             [id](const TokenCandidate& c) { return c.id == id; });
      if (it != items.end()) penalize(*it);
    }
    candidates.sorted = false;
  }
  void accept(int32_t token) override { seen_.insert(token); }
  void reset() override { seen_.clear(); }

 private:
  float penalty_;
  std::unordered_set<int32_t> seen_;
};

class Temperature final : public Sampler {
 public:
  explicit Temperature(float temperature) : temperature_(temperature) {}
  std::string_view name() const override { return "temperature"; }
  void apply(Candidates& candidates) override {
    if (temperature_ == 1.0f) return;
    double top = -INFINITY;
    for (const TokenCandidate& c : candidates.items) top = std::max<double>(top, c.logit);
    // A tiny temperature overflows logit / T to infinity (and inf - inf is NaN): then
    // divide the differences from the largest logit instead, which softmax and every
    // later sampler see as the same distribution.
    const double t = temperature_;
    const bool shift = std::isfinite(top) && std::abs(top) / t > 1e37;
    for (TokenCandidate& c : candidates.items) {
      const double scaled = shift ? (c.logit - top) / t : c.logit / t;
      // Far below the top a logit is -inf (probability 0); the cast must not overflow.
      c.logit =
          scaled < -std::numeric_limits<float>::max() ? -INFINITY : static_cast<float>(scaled);
    }
  }

 private:
  float temperature_;
};

class TopK final : public Sampler {
 public:
  explicit TopK(int32_t k) : k_(k) {}
  std::string_view name() const override { return "top_k"; }
  void apply(Candidates& candidates) override {
    auto& items = candidates.items;
    if (k_ <= 0 || static_cast<size_t>(k_) >= items.size()) return;
    std::partial_sort(items.begin(), items.begin() + k_, items.end(), before);
    items.resize(static_cast<size_t>(k_));
    candidates.sorted = true;
  }

 private:
  int32_t k_;
};

class TopP final : public Sampler {
 public:
  TopP(float p, size_t min_keep) : p_(p), min_keep_(std::max<size_t>(min_keep, 1)) {}
  std::string_view name() const override { return "top_p"; }
  void apply(Candidates& candidates) override {
    if (p_ >= 1.0f || candidates.items.empty()) return;
    candidates.sort();
    const std::vector<double> probs = candidates.probabilities();
    double cumulative = 0;
    size_t keep = probs.size();
    for (size_t i = 0; i < probs.size(); ++i) {
      cumulative += probs[i];
      if (cumulative + kProbabilityTolerance >= p_ && i + 1 >= min_keep_) {
        keep = i + 1;
        break;
      }
    }
    candidates.items.resize(keep);
  }

 private:
  float p_;
  size_t min_keep_;
};

class MinP final : public Sampler {
 public:
  MinP(float p, size_t min_keep) : p_(p), min_keep_(std::max<size_t>(min_keep, 1)) {}
  std::string_view name() const override { return "min_p"; }
  void apply(Candidates& candidates) override {
    if (p_ <= 0.0f || candidates.items.empty()) return;
    candidates.sort();
    const double max_logit = candidates.items.front().logit;
    size_t keep = 0;
    // p_i / p_max = exp(logit_i - logit_max); the list is sorted, so stop at the first
    // token below the threshold.
    while (keep < candidates.items.size() &&
           (keep < min_keep_ ||
            std::exp(static_cast<double>(candidates.items[keep].logit) - max_logit) +
                    kProbabilityTolerance >=
                p_)) {
      ++keep;
    }
    candidates.items.resize(keep);
  }

 private:
  float p_;
  size_t min_keep_;
};

}  // namespace

Candidates Candidates::from_logits(std::span<const float> logits) {
  Candidates candidates;
  candidates.items.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    candidates.items[i] = {static_cast<int32_t>(i), logits[i]};
  }
  return candidates;
}

void Candidates::sort() {
  if (sorted) return;
  std::sort(items.begin(), items.end(), before);
  sorted = true;
}

std::vector<double> Candidates::probabilities() const {
  std::vector<double> probs(items.size());
  if (items.empty()) return probs;
  double max_logit = -INFINITY;
  for (const TokenCandidate& c : items) max_logit = std::max<double>(max_logit, c.logit);
  double sum = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    probs[i] = std::isinf(max_logit) && max_logit < 0 ? 1.0 : std::exp(items[i].logit - max_logit);
    sum += probs[i];
  }
  for (double& p : probs) p /= sum;
  return probs;
}

std::unique_ptr<Sampler> make_repetition_penalty(float penalty) {
  return std::make_unique<RepetitionPenalty>(penalty);
}
std::unique_ptr<Sampler> make_temperature(float temperature) {
  return std::make_unique<Temperature>(temperature);
}
std::unique_ptr<Sampler> make_top_k(int32_t k) {
  return std::make_unique<TopK>(k);
}
std::unique_ptr<Sampler> make_top_p(float p, size_t min_keep) {
  return std::make_unique<TopP>(p, min_keep);
}
std::unique_ptr<Sampler> make_min_p(float p, size_t min_keep) {
  return std::make_unique<MinP>(p, min_keep);
}

Result<SamplerChain> SamplerChain::create(const SamplingParams& params) {
  // Comparisons are written so that NaN fails them.
  if (!(params.temperature >= 0.0f) || std::isinf(params.temperature)) {
    return invalid_argument("temperature must be finite and >= 0, got ", params.temperature);
  }
  if (params.top_k < 0) return invalid_argument("top_k must be >= 0, got ", params.top_k);
  if (!(params.top_p > 0.0f && params.top_p <= 1.0f)) {
    return invalid_argument("top_p must be in (0, 1], got ", params.top_p);
  }
  if (!(params.min_p >= 0.0f && params.min_p <= 1.0f)) {
    return invalid_argument("min_p must be in [0, 1], got ", params.min_p);
  }
  if (!(params.repetition_penalty > 0.0f) || std::isinf(params.repetition_penalty)) {
    return invalid_argument("repetition_penalty must be finite and > 0, got ",
                            params.repetition_penalty);
  }
  const bool greedy = params.temperature == 0.0f;
  SamplerChain chain(params.seed, greedy);
  if (params.repetition_penalty != 1.0f) {
    chain.add(make_repetition_penalty(params.repetition_penalty));
  }
  if (!greedy) {
    chain.add(make_temperature(params.temperature));
    if (params.top_k > 0) chain.add(make_top_k(params.top_k));
    if (params.top_p < 1.0f) chain.add(make_top_p(params.top_p));
    if (params.min_p > 0.0f) chain.add(make_min_p(params.min_p));
  }
  return chain;
}

void SamplerChain::accept(std::span<const int32_t> tokens) {
  for (int32_t token : tokens) {
    for (auto& sampler : samplers_) sampler->accept(token);
  }
}

Result<int32_t> SamplerChain::sample(std::span<const float> logits) {
  if (logits.empty()) return invalid_argument("sample: empty logits");
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isnan(logits[i])) return invalid_argument("sample: logit ", i, " is NaN");
  }
  Candidates candidates = Candidates::from_logits(logits);
  for (auto& sampler : samplers_) sampler->apply(candidates);
  const int32_t token = draw(candidates);
  for (auto& sampler : samplers_) sampler->accept(token);
  return token;
}

int32_t SamplerChain::draw(const Candidates& candidates) {
  const auto& items = candidates.items;
  if (greedy_) {
    return std::min_element(items.begin(), items.end(), before)->id;
  }
  const std::vector<double> probs = candidates.probabilities();
  // 53 random bits as a double in [0, 1): the same on every platform, unlike
  // std::uniform_real_distribution.
  const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
  double cumulative = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    cumulative += probs[i];
    if (u < cumulative) return items[i].id;
  }
  return items.back().id;
}

void SamplerChain::reset() {
  for (auto& sampler : samplers_) sampler->reset();
  rng_.seed(seed_);
}

}  // namespace kvrt
