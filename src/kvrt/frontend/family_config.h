// The config.json fields that only some architectures read: Gemma's activation, Phi-3's
// rotary width, the sliding windows of Mistral, Phi-3 and Gemma 3, and Gemma 3's
// attention scale and logit soft-capping. Internal to the frontend.
#pragma once

#include "kvrt/frontend/json_fields.h"
#include "kvrt/frontend/model_config.h"

namespace kvrt::frontend {

// Needs the shapes and RoPE of `config` already read. Sets activation, rotary_dim,
// sliding_window / sliding_layers, query_pre_attn_scalar and final_logit_softcapping.
// Errors name the field: NotSupported for values kvrt does not implement
// (hidden_activation, use_bidirectional_attention), InvalidArgument for bad ones.
Status read_family_fields(const JsonFields& fields, ModelConfig& config);

}  // namespace kvrt::frontend
