// Checks that run before an export, which can take minutes: everything that would
// make the exported program unusable and can be seen from the checkpoint's small files.
//   config.json    readable, an architecture kvrt supports, every field it reads valid
//   tokenizer      present when required; no token id beyond config.json's vocab_size
//                  (a tokenizer of another model would index past the embedding table)
// Free disk space for the output is checked by the exporter, which knows its size.
#pragma once

#include <optional>
#include <string>

#include "kvrt/core/result.h"
#include "kvrt/generation/tokenizer.h"

namespace kvrt {

// The tokenizer.json a model uses: `explicit_path` (a file or a directory holding
// one) when given, else one in each of `dirs` in turn. nullopt when none exists.
std::optional<std::string> find_tokenizer_file(const std::string& explicit_path,
                                               const std::vector<std::string>& dirs);

// InvalidArgument naming both files when the tokenizer has ids past vocab_size.
Status check_tokenizer_fits(const Tokenizer& tokenizer, const std::string& tokenizer_path,
                            int64_t vocab_size, const std::string& vocab_source);

// The checks above on checkpoint_dir. Returns the tokenizer it loaded (nullopt when
// there is none and none is required). Errors name the file at fault; NotFound for a
// missing required tokenizer names the directory and the flag that gives one.
Result<std::optional<Tokenizer>> preflight_checkpoint(const std::string& checkpoint_dir,
                                                      const std::string& tokenizer_path,
                                                      bool require_tokenizer);

}  // namespace kvrt
