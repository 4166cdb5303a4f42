#include "kvrt/generation/tokenizer_unigram.h"

#include <cstdio>
#include <limits>

#include "kvrt/generation/utf8.h"

namespace kvrt::tok {
namespace {

// HF's K_UNK_PENALTY: an unknown character scores this much below the worst piece.
constexpr double kUnkPenalty = 10.0;

}  // namespace

Result<UnigramModel> UnigramModel::parse(const Json& model, const std::string& where) {
  UnigramModel unigram;
  KVRT_ASSIGN_OR_RETURN(const Json* vocab, array_field(model, "vocab", where));
  const std::string vocab_path = field_path(where, "vocab");
  unigram.min_score_ = std::numeric_limits<double>::infinity();
  unigram.trie_.emplace_back();
  for (size_t i = 0; i < vocab->size(); ++i) {
    const Json& entry = (*vocab)[i];
    if (!entry.is_array() || entry.size() != 2 || !entry[0].is_string() || !entry[1].is_number()) {
      return invalid_argument(index_path(vocab_path, i), ": expected [piece, score]");
    }
    std::string piece = entry[0].get<std::string>();
    if (!utf8::is_valid(piece)) {
      return invalid_argument(index_path(vocab_path, i), ": piece is not UTF-8");
    }
    const double score = entry[1].get<double>();
    unigram.min_score_ = std::min(unigram.min_score_, score);
    const auto id = static_cast<int32_t>(i);
    unigram.ids_[piece] = id;  // a repeated piece keeps its last id, as HF's HashMap
    unigram.pieces_.push_back(std::move(piece));
    unigram.scores_.push_back(score);
  }
  for (const auto& [piece, id] : unigram.ids_) {
    int32_t node = 0;
    for (unsigned char byte : piece) {
      auto it = unigram.trie_[node].children.find(byte);
      if (it == unigram.trie_[node].children.end()) {
        const auto child = static_cast<int32_t>(unigram.trie_.size());
        unigram.trie_[node].children.emplace(byte, child);
        unigram.trie_.emplace_back();
        node = child;
      } else {
        node = it->second;
      }
    }
    if (node != 0) unigram.trie_[node].piece = id;  // HF's trie never yields ""
  }
  if (const Json* unk = optional_field(model, "unk_id")) {
    if (!unk->is_number_integer() || unk->get<int64_t>() < 0 ||
        static_cast<uint64_t>(unk->get<int64_t>()) >= unigram.pieces_.size()) {
      return invalid_argument(field_path(where, "unk_id"), ": not an index into the vocabulary");
    }
    unigram.unk_id_ = static_cast<int32_t>(unk->get<int64_t>());
  }
  KVRT_ASSIGN_OR_RETURN(unigram.byte_fallback_, bool_field(model, "byte_fallback", false, where));
  return unigram;
}

Result<std::vector<std::string_view>> UnigramModel::segment(std::string_view word) const {
  // best[e]: the best path over word[0, e): its score, the start of its last piece and
  // that piece's id. Candidates arrive by increasing start; only a strictly better
  // score replaces the first one, as in HF.
  struct Best {
    double score = 0;
    int64_t start = -1;
    int32_t id = 0;
  };
  const double unk_score = min_score_ - kUnkPenalty;
  std::vector<Best> best(word.size() + 1);
  for (size_t start = 0; start < word.size();) {
    const double here = best[start].score;
    size_t next = start;
    utf8::decode(word, next);
    const size_t char_length = next - start;
    bool has_single = false;
    int32_t node = 0;
    for (size_t end = start; end < word.size(); ++end) {
      auto it = trie_[node].children.find(static_cast<unsigned char>(word[end]));
      if (it == trie_[node].children.end()) break;
      node = it->second;
      const int32_t id = trie_[node].piece;
      if (id < 0) continue;
      Best& target = best[end + 1];
      const double candidate = here + scores_[id];
      if (target.start < 0 || candidate > target.score) {
        target = {candidate, static_cast<int64_t>(start), id};
      }
      if (end + 1 - start == char_length) has_single = true;
    }
    if (!has_single) {
      Best& target = best[next];
      const double candidate = here + unk_score;
      if (target.start < 0 || candidate > target.score) {
        if (!unk_id_) {
          return invalid_argument("model.unk_id: '", word.substr(start, char_length),
                                  "' has no piece and the model has no unk_id");
        }
        target = {candidate, static_cast<int64_t>(start), *unk_id_};
      }
    }
    start = next;
  }
  // Walk back; consecutive unknown pieces fuse into one string.
  std::vector<std::string_view> pieces;
  size_t unk_begin = 0;
  size_t unk_end = 0;  // an open unknown run [unk_begin, unk_end) when unk_end > 0
  for (size_t end = word.size(); end > 0;) {
    const Best& node = best[end];
    const auto start = static_cast<size_t>(node.start);
    if (unk_id_ && node.id == *unk_id_) {
      if (unk_end == 0) unk_end = end;
      unk_begin = start;
    } else {
      if (unk_end > 0) pieces.push_back(word.substr(unk_begin, unk_end - unk_begin));
      unk_end = 0;
      pieces.push_back(word.substr(start, end - start));
    }
    end = start;
  }
  if (unk_end > 0) pieces.push_back(word.substr(unk_begin, unk_end - unk_begin));
  return std::vector<std::string_view>(pieces.rbegin(), pieces.rend());
}

Status UnigramModel::tokenize(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return Status();
  KVRT_ASSIGN_OR_RETURN(std::vector<std::string_view> pieces, segment(word));
  for (std::string_view piece : pieces) {
    if (auto id = token_to_id(piece)) {
      out.push_back(*id);
      continue;
    }
    if (byte_fallback_) {
      std::vector<int32_t> bytes;
      for (unsigned char byte : piece) {
        char name[8];
        std::snprintf(name, sizeof(name), "<0x%02X>", byte);
        auto id = token_to_id(name);
        if (!id) break;
        bytes.push_back(*id);
      }
      if (bytes.size() == piece.size()) {
        out.insert(out.end(), bytes.begin(), bytes.end());
        continue;
      }
    }
    if (!unk_id_) {
      return invalid_argument("model.unk_id: '", piece,
                              "' has no piece and the model has no unk_id");
    }
    out.push_back(*unk_id_);
  }
  return Status();
}

std::optional<int32_t> UnigramModel::token_to_id(std::string_view token) const {
  auto it = ids_.find(token);
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

const std::string* UnigramModel::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= pieces_.size()) return nullptr;
  return &pieces_[id];
}

}  // namespace kvrt::tok
