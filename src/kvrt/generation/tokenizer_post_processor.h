// tokenizer.json "post_processor", reduced to what single-sequence encoding with
// add_special_tokens needs: the ids placed before and after the sequence.
// Supported: TemplateProcessing, ByteLevel (adds nothing), RobertaProcessing,
// BertProcessing, and Sequence of these.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kvrt/core/result.h"
#include "kvrt/generation/tokenizer_json.h"

namespace kvrt::tok {

struct PostProcessor {
  std::vector<int32_t> prefix;  // e.g. {bos}
  std::vector<int32_t> suffix;
};

Result<PostProcessor> parse_post_processor(const Json& json, const std::string& where);

}  // namespace kvrt::tok
