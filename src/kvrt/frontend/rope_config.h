// Reads the RoPE settings of a config.json in either spelling: transformers 4.x's
// top-level `rope_theta` plus optional `rope_scaling`, or 5.x's `rope_parameters`
// (which holds rope_theta too). Internal to the frontend.
#pragma once

#include "kvrt/frontend/json_fields.h"
#include "kvrt/frontend/model_config.h"

namespace kvrt::frontend {

// Sets config.rope_theta, config.rope_scaling and config.partial_rotary_factor, and for
// Gemma 3 config.local_rope_theta / local_rope_scaling (rope_local_base_freq, or 5.x's
// rope_parameters keyed by layer type). Needs config.architecture. Refuses
// (NotSupported, naming the field) rope types other than default, linear and llama3,
// partial rotary factors outside Phi-3, unknown keys inside the RoPE object, and the
// spellings disagreeing.
Status read_rope(const JsonFields& fields, ModelConfig& config);

}  // namespace kvrt::frontend
