#include "kvrt/generation/tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "kvrt/generation/tokenizer_added_tokens.h"
#include "kvrt/generation/tokenizer_decoder.h"
#include "kvrt/generation/tokenizer_json.h"
#include "kvrt/generation/tokenizer_model.h"
#include "kvrt/generation/tokenizer_normalizer.h"
#include "kvrt/generation/tokenizer_post_processor.h"
#include "kvrt/generation/tokenizer_pre_tokenizer.h"
#include "kvrt/generation/utf8.h"

namespace kvrt {

struct Tokenizer::Impl {
  std::unique_ptr<tok::Model> model;
  tok::AddedTokens added;
  std::unique_ptr<tok::Normalizer> normalizer;
  std::unique_ptr<tok::PreTokenizer> pre_tokenizer;
  std::unique_ptr<tok::Decoder> decoder;
  tok::PostProcessor post_processor;
  std::optional<int32_t> bos;
  std::optional<int32_t> eos;
  bool byte_fallback_decoder = false;
  std::string source;  // the file, for errors found while encoding
};

namespace {

Result<std::string> read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found(path.string(), ": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return internal_error(path.string(), ": read failed");
  return text.str();
}

// A tokenizer_config.json token entry: "<s>" or {"content": "<s>", ...}.
std::optional<std::string> config_token(const tok::Json& config, std::string_view key) {
  const tok::Json* entry = tok::optional_field(config, key);
  if (entry == nullptr) return std::nullopt;
  if (entry->is_string()) return entry->get<std::string>();
  if (const tok::Json* content = tok::optional_field(*entry, "content")) {
    if (content->is_string()) return content->get<std::string>();
  }
  return std::nullopt;
}

bool has_byte_fallback(const tok::Json& decoder) {
  if (!decoder.is_object()) return false;
  if (decoder.value("type", "") == "ByteFallback") return true;
  const tok::Json* steps = tok::optional_field(decoder, "decoders");
  if (steps == nullptr || !steps->is_array()) return false;
  for (const tok::Json& step : *steps) {
    if (has_byte_fallback(step)) return true;
  }
  return false;
}

// Errors name the JSON field; from_json puts the source in front.
Result<std::shared_ptr<Tokenizer::Impl>> build(const tok::Json& root, const tok::Json& config) {
  if (!root.is_object()) return invalid_argument("expected a JSON object");
  auto impl = std::make_shared<Tokenizer::Impl>();
  static const tok::Json kNull;
  auto member = [&](std::string_view key) -> const tok::Json& {
    const tok::Json* value = tok::optional_field(root, key);
    return value == nullptr ? kNull : *value;
  };

  KVRT_ASSIGN_OR_RETURN(const tok::Json* model, tok::required_field(root, "model", ""));
  KVRT_ASSIGN_OR_RETURN(impl->model, tok::parse_model(*model, "model"));
  KVRT_ASSIGN_OR_RETURN(impl->normalizer,
                        tok::parse_normalizer(member("normalizer"), "normalizer"));
  KVRT_ASSIGN_OR_RETURN(impl->pre_tokenizer,
                        tok::parse_pre_tokenizer(member("pre_tokenizer"), "pre_tokenizer"));
  KVRT_ASSIGN_OR_RETURN(impl->decoder, tok::parse_decoder(member("decoder"), "decoder"));
  impl->byte_fallback_decoder = has_byte_fallback(member("decoder"));
  KVRT_ASSIGN_OR_RETURN(impl->post_processor,
                        tok::parse_post_processor(member("post_processor"), "post_processor"));
  KVRT_ASSIGN_OR_RETURN(impl->added,
                        tok::AddedTokens::parse(member("added_tokens"), impl->normalizer.get(),
                                                *impl->model, "added_tokens"));
  // truncation and padding are ignored, as transformers' tokenizers ignore them unless a
  // call asks for them; kvrt never pads, and the context limit is checked by the caller.

  // Every id the post-processor adds must decode.
  for (const auto* ids : {&impl->post_processor.prefix, &impl->post_processor.suffix}) {
    for (int32_t id : *ids) {
      if (impl->added.find(id) == nullptr && impl->model->id_to_token(id) == nullptr) {
        return invalid_argument("post_processor: token id ", id, " is not in the vocabulary");
      }
    }
  }
  auto lookup = [&](const std::optional<std::string>& name) -> std::optional<int32_t> {
    if (!name) return std::nullopt;
    if (auto id = impl->added.token_to_id(*name)) return id;
    return impl->model->token_to_id(*name);
  };
  if (impl->post_processor.prefix.size() == 1) {
    impl->bos = impl->post_processor.prefix[0];
  } else {
    impl->bos = lookup(config_token(config, "bos_token"));
  }
  impl->eos = lookup(config_token(config, "eos_token"));
  return impl;
}

}  // namespace

Result<Tokenizer> Tokenizer::from_json(std::string_view json_text, std::string_view source,
                                       std::string_view config_json) {
  // nlohmann reports malformed input and type mismatches with exceptions; none may
  // leave the library.
  try {
    tok::Json root = tok::Json::parse(json_text);
    tok::Json config;
    if (!config_json.empty()) {
      config = tok::Json::parse(config_json, nullptr, /*allow_exceptions=*/false);
      if (config.is_discarded()) {
        return invalid_argument(source, ": tokenizer_config.json is not valid JSON");
      }
    }
    auto impl = build(root, config);
    if (!impl.ok()) return impl.status().with_context(source);
    (*impl)->source = std::string(source);
    return Tokenizer(std::move(impl).value());
  } catch (const tok::Json::exception& error) {
    return invalid_argument(source, ": ", error.what());
  } catch (const std::bad_alloc&) {
    return allocation_failed(source, ": out of memory while loading the tokenizer");
  }
}

Result<Tokenizer> Tokenizer::load(const std::string& path) {
  std::error_code error;
  std::filesystem::path file(path);
  if (std::filesystem::is_directory(file, error)) file /= "tokenizer.json";
  if (!std::filesystem::exists(file, error)) return not_found(file.string(), ": no such file");
  KVRT_ASSIGN_OR_RETURN(std::string text, read_file(file));
  std::string config;
  const auto config_path = file.parent_path() / "tokenizer_config.json";
  if (std::filesystem::exists(config_path, error)) {
    KVRT_ASSIGN_OR_RETURN(config, read_file(config_path));
  }
  return from_json(text, file.string(), config);
}

Result<std::vector<int32_t>> Tokenizer::encode(std::string_view text,
                                               bool add_special_tokens) const {
  if (size_t bad = utf8::first_invalid(text); bad != text.size()) {
    return invalid_argument("encode: text is not UTF-8 (byte ", bad, ")");
  }
  const Impl& impl = *impl_;
  std::vector<int32_t> ids;
  if (add_special_tokens) ids = impl.post_processor.prefix;
  KVRT_ASSIGN_OR_RETURN(std::vector<tok::Segment> segments,
                        impl.added.split(text, impl.normalizer.get()));
  std::vector<tok::Piece> pieces;
  for (tok::Segment& segment : segments) {
    if (segment.token_id >= 0) {
      ids.push_back(segment.token_id);
      continue;
    }
    pieces.assign(1, {std::move(segment.text), segment.at_origin});
    if (impl.pre_tokenizer) {
      Status split = impl.pre_tokenizer->pre_tokenize(pieces);
      if (!split.ok()) return split.with_context(impl.source);
    }
    for (const tok::Piece& piece : pieces) {
      KVRT_RETURN_IF_ERROR(impl.model->tokenize(piece.text, ids));
    }
  }
  if (add_special_tokens) {
    ids.insert(ids.end(), impl.post_processor.suffix.begin(), impl.post_processor.suffix.end());
  }
  return ids;
}

Result<std::string> Tokenizer::decode(std::span<const int32_t> ids,
                                      bool skip_special_tokens) const {
  const Impl& impl = *impl_;
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    if (const tok::AddedToken* added = impl.added.find(id)) {
      if (!(skip_special_tokens && added->special)) tokens.push_back(added->content);
      continue;
    }
    const std::string* token = impl.model->id_to_token(id);
    if (token == nullptr)
      return invalid_argument("decode: token id ", id, " is not in the vocabulary");
    tokens.push_back(*token);
  }
  return tok::run_decoder(impl.decoder.get(), std::move(tokens));
}

std::optional<int32_t> Tokenizer::token_id(std::string_view token) const {
  if (auto id = impl_->added.token_to_id(token)) return id;
  return impl_->model->token_to_id(token);
}

std::optional<std::string> Tokenizer::token_text(int32_t id) const {
  if (const tok::AddedToken* added = impl_->added.find(id)) return added->content;
  if (const std::string* token = impl_->model->id_to_token(id)) return *token;
  return std::nullopt;
}

int32_t Tokenizer::vocab_size() const {
  return std::max(impl_->model->max_id(), impl_->added.max_id()) + 1;
}

bool Tokenizer::is_fallback_byte(int32_t id) const {
  if (!impl_->byte_fallback_decoder) return false;
  const std::optional<std::string> text = token_text(id);
  return text && text->size() == 6 && text->starts_with("<0x") && text->back() == '>';
}

bool Tokenizer::is_special(int32_t id) const {
  const tok::AddedToken* added = impl_->added.find(id);
  return added != nullptr && added->special;
}

std::optional<int32_t> Tokenizer::bos_id() const {
  return impl_->bos;
}
std::optional<int32_t> Tokenizer::eos_id() const {
  return impl_->eos;
}

}  // namespace kvrt
