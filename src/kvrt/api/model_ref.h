// What a user may type to name a model, resolved to a file or directory on disk with
// no network access:
//   a checkpoint directory            models/fortune-llama, ./m/, /abs/path
//   a program file                    model.kvrt, ./model.kvrt, /abs/model.kvrt
//   a Hugging Face hub cache folder   ~/.cache/huggingface/hub/models--org--name
//   a hub reference                   org/name, org/name@main, org/name@<commit sha>
// A path that exists always wins over a hub reference of the same spelling. Hub
// references are looked up as huggingface_hub lays out its cache: refs/<revision>
// holds a commit sha, snapshots/<sha>/ the files.
#pragma once

#include <string>

#include "kvrt/core/result.h"

namespace kvrt {

struct ModelLocation {
  std::string path;         // checkpoint directory or program file
  bool is_program = false;  // a file (program), not a directory
  std::string hub_id;       // "org/name@sha" when it came from the hub cache, else empty
};

// huggingface_hub's cache directory: $HF_HUB_CACHE, else $HUGGINGFACE_HUB_CACHE, else
// $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub.
std::string hub_cache_dir();

// NotFound names the reference and every place it looked; InvalidArgument for a
// revision that names no snapshot or a malformed reference.
Result<ModelLocation> resolve_model(const std::string& reference);

}  // namespace kvrt
