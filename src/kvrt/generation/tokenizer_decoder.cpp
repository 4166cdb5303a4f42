#include "kvrt/generation/tokenizer_decoder.h"

#include "kvrt/generation/tokenizer_byte_level.h"
#include "kvrt/generation/tokenizer_regex.h"
#include "kvrt/generation/utf8.h"

namespace kvrt::tok {
namespace {

using Ptr = std::unique_ptr<Decoder>;

class SequenceDecoder final : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<Ptr> steps) : steps_(std::move(steps)) {}
  Status decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& step : steps_) KVRT_RETURN_IF_ERROR(step->decode_chain(tokens));
    return Status();
  }

 private:
  std::vector<Ptr> steps_;
};

// Concatenates the bytes of all tokens, then makes them UTF-8 the lossy way: a
// sequence cut between tokens only decodes once both halves are present.
class ByteLevelDecoder final : public Decoder {
 public:
  Status decode_chain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const std::string& token : tokens) {
      if (auto decoded = byte_level_decode(token)) {
        bytes += *decoded;
      } else {
        bytes += token;
      }
    }
    tokens.assign(1, utf8::to_valid_lossy(bytes));
    return Status();
  }
};

class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(Pattern pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  Status decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& token : tokens) {
      KVRT_ASSIGN_OR_RETURN(token, replace_all(pattern_, token, content_));
    }
    return Status();
  }

 private:
  Pattern pattern_;
  std::string content_;
};

// Runs of <0xNN> tokens become their bytes when those form valid UTF-8, else one
// U+FFFD per byte (HF's rule, not the lossy one).
class ByteFallbackDecoder final : public Decoder {
 public:
  Status decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string pending;
    auto flush = [&] {
      if (pending.empty()) return;
      if (utf8::is_valid(pending)) {
        out.push_back(pending);
      } else {
        for (size_t i = 0; i < pending.size(); ++i) out.emplace_back(utf8::kReplacement);
      }
      pending.clear();
    };
    for (std::string& token : tokens) {
      if (auto byte = parse_byte(token)) {
        pending += static_cast<char>(*byte);
        continue;
      }
      flush();
      out.push_back(std::move(token));
    }
    flush();
    tokens = std::move(out);
    return Status();
  }

 private:
  static std::optional<unsigned char> parse_byte(const std::string& token) {
    if (token.size() != 6 || !token.starts_with("<0x") || token.back() != '>') return std::nullopt;
    unsigned value = 0;
    for (size_t i = 3; i < 5; ++i) {
      const char c = token[i];
      unsigned digit = 0;
      if (c >= '0' && c <= '9') {
        digit = static_cast<unsigned>(c - '0');
      } else if (c >= 'A' && c <= 'F') {
        digit = static_cast<unsigned>(c - 'A' + 10);
      } else if (c >= 'a' && c <= 'f') {
        digit = static_cast<unsigned>(c - 'a' + 10);
      } else {
        return std::nullopt;
      }
      value = value * 16 + digit;
    }
    return static_cast<unsigned char>(value);
  }
};

class FuseDecoder final : public Decoder {
 public:
  Status decode_chain(std::vector<std::string>& tokens) const override {
    std::string joined;
    for (const std::string& token : tokens) joined += token;
    tokens.assign(1, std::move(joined));
    return Status();
  }
};

// Removes up to `start` leading and `stop` trailing copies of one character from each
// token.
class StripDecoder final : public Decoder {
 public:
  StripDecoder(std::string content, size_t start, size_t stop)
      : content_(std::move(content)), start_(start), stop_(stop) {}
  Status decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& token : tokens) {
      size_t begin = 0;
      for (size_t i = 0; i < start_ && token.compare(begin, content_.size(), content_) == 0; ++i) {
        begin += content_.size();
      }
      size_t end = token.size();
      for (size_t i = 0; i < stop_ && end >= begin + content_.size() &&
                         token.compare(end - content_.size(), content_.size(), content_) == 0;
           ++i) {
        end -= content_.size();
      }
      token = token.substr(begin, end - begin);
    }
    return Status();
  }

 private:
  std::string content_;
  size_t start_;
  size_t stop_;
};

// Every replacement character becomes a space, except in the first token, where HF
// drops them (the prefix the pre-tokenizer added) unless prepend_scheme is "never".
class MetaspaceDecoder final : public Decoder {
 public:
  MetaspaceDecoder(std::string replacement, bool drop_in_first)
      : replacement_(std::move(replacement)), drop_in_first_(drop_in_first) {}
  Status decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string out;
      const std::string& token = tokens[i];
      for (size_t pos = 0; pos < token.size();) {
        if (token.compare(pos, replacement_.size(), replacement_) == 0) {
          if (i != 0 || !drop_in_first_) out += ' ';
          pos += replacement_.size();
        } else {
          out += token[pos++];
        }
      }
      tokens[i] = std::move(out);
    }
    return Status();
  }

 private:
  std::string replacement_;
  bool drop_in_first_;
};

std::string replace_every(std::string text, std::string_view from, std::string_view to) {
  if (from.empty()) return text;
  std::string out;
  size_t last = 0;
  for (size_t pos = text.find(from); pos != std::string::npos; pos = text.find(from, last)) {
    out.append(text, last, pos - last);
    out += to;
    last = pos + from.size();
  }
  out.append(text, last);
  return out;
}

// WordPiece: a token with the prefix joins the previous one, any other is preceded by
// a space; cleanup undoes BERT's spacing around punctuation and contractions.
class WordPieceDecoder final : public Decoder {
 public:
  WordPieceDecoder(std::string prefix, bool cleanup)
      : prefix_(std::move(prefix)), cleanup_(cleanup) {}
  Status decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string& token = tokens[i];
      if (i != 0) {
        if (token.starts_with(prefix_)) {
          token.erase(0, prefix_.size());
        } else {
          token = " " + token;
        }
      }
      if (cleanup_) {
        static constexpr std::pair<std::string_view, std::string_view> kRules[] = {
            {" .", "."},   {" ?", "?"},     {" !", "!"},    {" ,", ","},
            {" ' ", "'"},  {" n't", "n't"}, {" 'm", "'m"},  {" do not", " don't"},
            {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
        for (const auto& [from, to] : kRules) token = replace_every(std::move(token), from, to);
      }
    }
    return Status();
  }

 private:
  std::string prefix_;
  bool cleanup_;
};

// BPEDecoder: the end-of-word suffix becomes a space, except in the last token.
class BpeDecoder final : public Decoder {
 public:
  explicit BpeDecoder(std::string suffix) : suffix_(std::move(suffix)) {}
  Status decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      tokens[i] = replace_every(std::move(tokens[i]), suffix_, i + 1 == tokens.size() ? "" : " ");
    }
    return Status();
  }

 private:
  std::string suffix_;
};

Result<size_t> count_field(const Json& json, std::string_view key, const std::string& where) {
  KVRT_ASSIGN_OR_RETURN(int64_t value, int_field(json, key, where));
  if (value < 0) return invalid_argument(field_path(where, key), ": must not be negative");
  return static_cast<size_t>(value);
}

}  // namespace

Result<std::unique_ptr<Decoder>> parse_decoder(const Json& json, const std::string& where) {
  if (json.is_null()) return Ptr();
  KVRT_ASSIGN_OR_RETURN(std::string type, type_field(json, where));
  if (type == "Sequence") {
    KVRT_ASSIGN_OR_RETURN(const Json* list, array_field(json, "decoders", where));
    std::vector<Ptr> steps;
    for (size_t i = 0; i < list->size(); ++i) {
      const std::string path = index_path(field_path(where, "decoders"), i);
      if ((*list)[i].is_null()) return invalid_argument(path, ": null decoder");
      KVRT_ASSIGN_OR_RETURN(Ptr step, parse_decoder((*list)[i], path));
      steps.push_back(std::move(step));
    }
    return Ptr(new SequenceDecoder(std::move(steps)));
  }
  if (type == "ByteLevel") return Ptr(new ByteLevelDecoder());
  if (type == "Replace") {
    KVRT_ASSIGN_OR_RETURN(Pattern pattern, parse_pattern(json, where));
    KVRT_ASSIGN_OR_RETURN(std::string content, string_field(json, "content", where));
    return Ptr(new ReplaceDecoder(std::move(pattern), std::move(content)));
  }
  if (type == "ByteFallback") return Ptr(new ByteFallbackDecoder());
  if (type == "Fuse") return Ptr(new FuseDecoder());
  if (type == "Strip") {
    KVRT_ASSIGN_OR_RETURN(std::string content, char_field(json, "content", where));
    KVRT_ASSIGN_OR_RETURN(size_t start, count_field(json, "start", where));
    KVRT_ASSIGN_OR_RETURN(size_t stop, count_field(json, "stop", where));
    return Ptr(new StripDecoder(std::move(content), start, stop));
  }
  if (type == "Metaspace") {
    KVRT_ASSIGN_OR_RETURN(std::string replacement, char_field(json, "replacement", where));
    KVRT_ASSIGN_OR_RETURN(bool add_prefix_space, bool_field(json, "add_prefix_space", true, where));
    KVRT_ASSIGN_OR_RETURN(std::optional<std::string> scheme,
                          optional_string_field(json, "prepend_scheme", where));
    const bool never = !add_prefix_space || (scheme && *scheme == "never");
    return Ptr(new MetaspaceDecoder(std::move(replacement), !never));
  }
  if (type == "WordPiece") {
    KVRT_ASSIGN_OR_RETURN(auto prefix, optional_string_field(json, "prefix", where));
    KVRT_ASSIGN_OR_RETURN(bool cleanup, bool_field(json, "cleanup", true, where));
    return Ptr(new WordPieceDecoder(prefix.value_or("##"), cleanup));
  }
  if (type == "BPEDecoder") {
    KVRT_ASSIGN_OR_RETURN(auto suffix, optional_string_field(json, "suffix", where));
    return Ptr(new BpeDecoder(suffix.value_or("</w>")));
  }
  return not_supported(field_path(where, "type"), ": decoder '", type,
                       "' is not supported (supported: Sequence, ByteLevel, Replace, "
                       "ByteFallback, Fuse, Strip, Metaspace, WordPiece, BPEDecoder)");
}

Result<std::string> run_decoder(const Decoder* decoder, std::vector<std::string> tokens) {
  std::string text;
  if (decoder == nullptr) {
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0) text += ' ';
      text += tokens[i];
    }
    return text;
  }
  KVRT_RETURN_IF_ERROR(decoder->decode_chain(tokens));
  for (const std::string& token : tokens) text += token;
  return text;
}

}  // namespace kvrt::tok
