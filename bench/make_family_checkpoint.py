#!/usr/bin/env python3
"""Random-weight bf16 checkpoints in the shapes of small open models, for `kvrt bench`.

    python3 bench/make_family_checkpoint.py qwen3-0.6b OUT_DIR
    python3 bench/make_family_checkpoint.py gemma3-1b OUT_DIR

Made by HF transformers itself (its config class, its own initialization, on CUDA when
available), saved with save_pretrained: the config.json and tensor names are exactly what
the real models ship, only the weights are random. Speed does not depend on the values.
"""

import sys

import torch
import transformers

SHAPES = {
    # Qwen/Qwen3-0.6B config.json
    "qwen3-0.6b": ("Qwen3Config", "Qwen3ForCausalLM", dict(
        vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
        num_attention_heads=16, num_key_value_heads=8, head_dim=128, rms_norm_eps=1e-6,
        max_position_embeddings=40960, rope_theta=1000000.0, tie_word_embeddings=True,
        hidden_act="silu", attention_bias=False)),
    # google/gemma-3-1b-it config.json (text): 5 local layers to 1 global, window 512
    "gemma3-1b": ("Gemma3TextConfig", "Gemma3ForCausalLM", dict(
        vocab_size=262144, hidden_size=1152, intermediate_size=6912, num_hidden_layers=26,
        num_attention_heads=4, num_key_value_heads=1, head_dim=256, rms_norm_eps=1e-6,
        max_position_embeddings=32768, rope_theta=1000000.0, rope_local_base_freq=10000.0,
        sliding_window=512, query_pre_attn_scalar=256, tie_word_embeddings=True,
        hidden_activation="gelu_pytorch_tanh", final_logit_softcapping=None,
        attn_logit_softcapping=None,
        layer_types=["full_attention" if (i + 1) % 6 == 0 else "sliding_attention"
                     for i in range(26)])),
}


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in SHAPES:
        raise SystemExit(f"usage: {sys.argv[0]} {{{','.join(SHAPES)}}} OUT_DIR")
    config_name, model_name, kwargs = SHAPES[sys.argv[1]]
    config = getattr(transformers, config_name)(**kwargs)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    with torch.device(device):
        model = getattr(transformers, model_name)(config).to(torch.bfloat16)
    model.save_pretrained(sys.argv[2], safe_serialization=True)
    params = sum(p.numel() for p in model.parameters())
    print(f"{sys.argv[1]}: {params / 1e9:.2f} B parameters -> {sys.argv[2]}")


if __name__ == "__main__":
    main()
