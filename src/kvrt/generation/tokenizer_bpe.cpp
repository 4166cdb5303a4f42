#include "kvrt/generation/tokenizer_bpe.h"

#include <cstdio>
#include <queue>

#include "kvrt/generation/utf8.h"

namespace kvrt::tok {
namespace {

// "a b" (older files) or ["a", "b"] (tokenizers >= 0.20).
Result<std::pair<std::string, std::string>> parse_merge(const Json& merge,
                                                        const std::string& where) {
  if (merge.is_string()) {
    const std::string& line = merge.get_ref<const std::string&>();
    const size_t space = line.find(' ');
    if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
      return invalid_argument(where, ": merge '", line, "' is not two tokens separated by a space");
    }
    return std::make_pair(line.substr(0, space), line.substr(space + 1));
  }
  if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
    return std::make_pair(merge[0].get<std::string>(), merge[1].get<std::string>());
  }
  return invalid_argument(where, ": expected \"a b\" or [\"a\", \"b\"]");
}

}  // namespace

Result<BpeModel> BpeModel::parse(const Json& model, const std::string& where) {
  BpeModel bpe;
  if (const Json* dropout = optional_field(model, "dropout")) {
    if (!dropout->is_number() || dropout->get<double>() != 0.0) {
      return not_supported(field_path(where, "dropout"),
                           ": BPE dropout makes encoding random and is not supported");
    }
  }
  KVRT_ASSIGN_OR_RETURN(auto prefix,
                        optional_string_field(model, "continuing_subword_prefix", where));
  KVRT_ASSIGN_OR_RETURN(auto suffix, optional_string_field(model, "end_of_word_suffix", where));
  bpe.prefix_ = prefix.value_or("");
  bpe.suffix_ = suffix.value_or("");
  KVRT_ASSIGN_OR_RETURN(bpe.unk_token_, optional_string_field(model, "unk_token", where));
  KVRT_ASSIGN_OR_RETURN(bpe.fuse_unk_, bool_field(model, "fuse_unk", false, where));
  KVRT_ASSIGN_OR_RETURN(bpe.byte_fallback_, bool_field(model, "byte_fallback", false, where));
  KVRT_ASSIGN_OR_RETURN(bpe.ignore_merges_, bool_field(model, "ignore_merges", false, where));

  KVRT_ASSIGN_OR_RETURN(const Json* vocab, required_field(model, "vocab", where));
  const std::string vocab_path = field_path(where, "vocab");
  if (!vocab->is_object()) return invalid_argument(vocab_path, ": expected an object");
  if (vocab->empty()) return invalid_argument(vocab_path, ": empty (no token could be encoded)");
  bpe.vocab_.reserve(vocab->size());
  for (const auto& [token, id_json] : vocab->items()) {
    if (!id_json.is_number_integer() || id_json.get<int64_t>() < 0 ||
        id_json.get<int64_t>() > INT32_MAX - 1) {
      return invalid_argument(vocab_path, "['", token, "']: expected a non-negative id");
    }
    const auto id = static_cast<int32_t>(id_json.get<int64_t>());
    bpe.vocab_.emplace(token, id);
    if (static_cast<size_t>(id) >= bpe.tokens_.size()) {
      bpe.tokens_.resize(static_cast<size_t>(id) + 1);
      bpe.has_token_.resize(static_cast<size_t>(id) + 1, false);
    }
    if (!bpe.has_token_[id]) {
      bpe.tokens_[id] = token;
      bpe.has_token_[id] = true;
    }
  }

  KVRT_ASSIGN_OR_RETURN(const Json* merges, array_field(model, "merges", where));
  const std::string merges_path = field_path(where, "merges");
  bpe.merges_.reserve(merges->size());
  for (size_t rank = 0; rank < merges->size(); ++rank) {
    const std::string path = index_path(merges_path, rank);
    KVRT_ASSIGN_OR_RETURN(auto pair, parse_merge((*merges)[rank], path));
    auto left = bpe.token_to_id(pair.first);
    auto right = bpe.token_to_id(pair.second);
    // The merged token drops the right side's prefix ("a" + "##b" -> "ab"); HF cuts
    // prefix-length bytes whether or not they are the prefix.
    if (pair.second.size() < bpe.prefix_.size()) {
      return invalid_argument(path, ": merge '", pair.first, " ", pair.second,
                              "' has a right side shorter than continuing_subword_prefix");
    }
    auto merged = bpe.token_to_id(pair.first + pair.second.substr(bpe.prefix_.size()));
    if (!left || !right || !merged) {
      return invalid_argument(path, ": merge '", pair.first, " ", pair.second,
                              "' uses a token that is not in the vocabulary");
    }
    // A repeated pair keeps its last rank, as in Hugging Face's HashMap insert.
    bpe.merges_[pair_key(*left, *right)] = {static_cast<int32_t>(rank), *merged};
  }

  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    bpe.byte_ids_[b] = bpe.token_to_id(name).value_or(-1);
  }
  return bpe;
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= tokens_.size() || !has_token_[id]) return nullptr;
  return &tokens_[id];
}

Status BpeModel::add_unknown(std::optional<int32_t>& pending, std::vector<int32_t>& symbols) const {
  if (!unk_token_) return Status();  // no unk_token: the character is dropped
  auto unk = token_to_id(*unk_token_);
  if (!unk) {
    return invalid_argument("model.unk_token '", *unk_token_, "' is not in the vocabulary");
  }
  if (pending && !fuse_unk_) symbols.push_back(*pending);
  pending = *unk;
  return Status();
}

Status BpeModel::tokenize(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return Status();
  if (ignore_merges_) {
    if (auto id = token_to_id(word)) {
      out.push_back(*id);
      return Status();
    }
  }
  std::vector<int32_t> symbols;
  symbols.reserve(word.size());
  std::optional<int32_t> pending_unk;  // a run of unknown characters not yet emitted
  std::string marked;
  for (size_t pos = 0; pos < word.size();) {
    const size_t begin = pos;
    utf8::decode(word, pos);
    std::string_view ch = word.substr(begin, pos - begin);
    if ((begin > 0 && !prefix_.empty()) || (pos == word.size() && !suffix_.empty())) {
      marked.assign(begin > 0 ? prefix_ : "");
      marked += ch;
      if (pos == word.size()) marked += suffix_;
      ch = marked;
    }
    if (auto id = token_to_id(ch)) {
      if (pending_unk) symbols.push_back(*pending_unk);
      pending_unk.reset();
      symbols.push_back(*id);
      continue;
    }
    if (byte_fallback_) {
      bool all_bytes = true;
      for (unsigned char byte : ch) all_bytes = all_bytes && byte_ids_[byte] >= 0;
      if (all_bytes) {
        for (unsigned char byte : ch) symbols.push_back(byte_ids_[byte]);
        continue;
      }
    }
    KVRT_RETURN_IF_ERROR(add_unknown(pending_unk, symbols));
  }
  if (pending_unk) symbols.push_back(*pending_unk);
  merge_all(symbols);
  out.insert(out.end(), symbols.begin(), symbols.end());
  return Status();
}

// Repeatedly merges the adjacent pair of lowest rank (leftmost on ties) until no pair
// has a merge: O(n log n) with a heap over a linked list of symbols.
void BpeModel::merge_all(std::vector<int32_t>& symbols) const {
  const auto n = static_cast<int32_t>(symbols.size());
  if (n < 2 || merges_.empty()) return;
  std::vector<int32_t> prev(n), next(n);
  std::vector<bool> alive(n, true);
  for (int32_t i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  struct Candidate {
    int32_t rank;
    int32_t pos;
    int32_t new_id;
    bool operator>(const Candidate& other) const {
      return rank != other.rank ? rank > other.rank : pos > other.pos;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  auto push_pair = [&](int32_t left) {
    const int32_t right = next[left];
    if (right < 0) return;
    auto it = merges_.find(pair_key(symbols[left], symbols[right]));
    if (it != merges_.end()) queue.push({it->second.rank, left, it->second.new_id});
  };
  for (int32_t i = 0; i + 1 < n; ++i) push_pair(i);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    const int32_t right = next[top.pos];
    if (!alive[top.pos] || right < 0) continue;
    auto it = merges_.find(pair_key(symbols[top.pos], symbols[right]));
    if (it == merges_.end() || it->second.new_id != top.new_id) continue;  // stale entry
    symbols[top.pos] = top.new_id;
    alive[right] = false;
    next[top.pos] = next[right];
    if (next[right] >= 0) prev[next[right]] = top.pos;
    if (prev[top.pos] >= 0) push_pair(prev[top.pos]);
    push_pair(top.pos);
  }
  std::vector<int32_t> merged;
  for (int32_t i = 0; i >= 0; i = next[i]) merged.push_back(symbols[i]);
  symbols = std::move(merged);
}

}  // namespace kvrt::tok
