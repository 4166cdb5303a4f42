// Reads the RoPE settings of a config.json in either spelling: transformers 4.x's
// top-level `rope_theta` plus optional `rope_scaling`, or 5.x's `rope_parameters`
// (which holds rope_theta too). Internal to the frontend.
#pragma once

#include "kvrt/frontend/json_fields.h"
#include "kvrt/frontend/model_config.h"

namespace kvrt::frontend {

// Sets config.rope_theta and config.rope_scaling. Refuses (NotSupported, naming the
// field) rope types other than default and llama3, partial rotary factors, unknown
// keys inside the RoPE object, and the two spellings disagreeing.
Status read_rope(const JsonFields& fields, ModelConfig& config);

}  // namespace kvrt::frontend
