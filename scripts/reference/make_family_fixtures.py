#!/usr/bin/env python3
"""Tiny random-weight checkpoints of the model families beyond Llama/Qwen2, with references.

Run at the repository root on a machine with python3, torch, transformers (5.x; 4.5x
should also work) and safetensors; a GPU is only used for reference_bf16.json:

    python3 scripts/reference/make_family_fixtures.py --out tests/fixtures
    python3 scripts/reference/make_family_fixtures.py --out tests/fixtures --only gemma3_local
    python3 scripts/reference/make_family_fixtures.py --out /tmp/wide --wide

--wide makes <name>_wide variants with head dims 64 and 128 (not committed: over the
fixture size limit), so that the CUDA engine's fast attention kernels run under each
family's layers (the fixtures' head dims 16 and 32 take its generic kernel).

For each fixture below it writes OUT/<name>/ as a normal HF checkpoint (config.json,
model.safetensors, generation_config.json) and, computed by HF transformers from the
checkpoint as saved (reloaded in float32 on the CPU, eager attention):

    reference.json       same schema as make_fixtures.py's: prompt_ids (7 seeded ids),
                         greedy_ids (20 greedy tokens, KV cache, EOS ignored) and
                         step_logits (the teacher-forced float32 logits of one no-cache
                         forward pass over prompt + greedy_ids[:-1], at each greedy step;
                         checked against the cached loop's logits and argmax)
    reference_bf16.json  HF's own bf16 error on those tokens, made by make_bf16_refs.py's
                         process() (on CUDA when available, else --bf16-device; skipped
                         with --no-bf16)

and prints every config.json it wrote (the C++ loader must read what transformers
really writes). The fixture README table is not rewritten: add the rows printed at the
end to tests/fixtures/README.md by hand. Weights: matrices std 0.15; RMSNorm scales
1 + 0.1*randn (Gemma's (1 + w) norms store w = 0.1*randn, so no norm is all ones).

The C++ side: src/kvrt/runtime/test/fixture_test.cpp checks these fixtures at 1e-4
(skipping while reference.json is absent); src/kvrt/runtime/test/family_test.cpp runs
the same configs with random weights and no reference.
"""

import argparse
import json
import os
import platform
import shutil
import sys

import torch
import transformers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures as base  # noqa: E402  (shared save/check helpers)

VOCAB, BOS_ID, EOS_ID, PAD_ID = base.VOCAB, base.BOS_ID, base.EOS_ID, base.PAD_ID
PROMPT_LEN, NEW_TOKENS, MIN_GAP = base.PROMPT_LEN, base.NEW_TOKENS, base.MIN_GAP
FIXTURE_LIMIT = 1024 * 1024  # bytes per fixture directory

# `rope` is the global RoPE; `local_rope` Gemma 3's sliding layers' (rope_local_base_freq).
FIXTURES = [
    {
        "name": "qwen3_norms",
        "about": "Qwen3: per-head q_norm/k_norm before rotary, head_dim 32 with hidden 64 and "
                 "4 heads (q_proj 64->128), GQA 4/2, rope_theta 1e6, tied, float32",
        "classes": ("Qwen3Config", "Qwen3ForCausalLM"), "seed": 5005, "storage": torch.float32,
        "config": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                       tie_word_embeddings=True, rms_norm_eps=1e-6, max_position_embeddings=256,
                       attention_bias=False, use_sliding_window=False, hidden_act="silu"),
        "rope": {"rope_type": "default", "rope_theta": 1000000.0},
    },
    {
        "name": "mistral_window",
        "about": "Mistral: sliding_window 4 (shorter than the 27 positions used), GQA 4/2, "
                 "untied, float32",
        "classes": ("MistralConfig", "MistralForCausalLM"), "seed": 6006,
        "storage": torch.float32,
        "config": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, sliding_window=4,
                       tie_word_embeddings=False, rms_norm_eps=1e-5,
                       max_position_embeddings=256, hidden_act="silu"),
        "rope": {"rope_type": "default", "rope_theta": 10000.0},
    },
    {
        "name": "phi3_partial",
        "about": "Phi-3: fused qkv_proj and gate_up_proj, partial_rotary_factor 0.5 (8 of 16 "
                 "dims rotate), GQA 4/2, intermediate 96, untied, bfloat16 storage",
        "classes": ("Phi3Config", "Phi3ForCausalLM"), "seed": 7007, "storage": torch.bfloat16,
        "config": dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, partial_rotary_factor=0.5,
                       tie_word_embeddings=False, rms_norm_eps=1e-5,
                       max_position_embeddings=256, original_max_position_embeddings=256,
                       sliding_window=None, hidden_act="silu"),
        "rope": {"rope_type": "default", "rope_theta": 10000.0},
    },
    {
        "name": "gemma_geglu",
        "about": "Gemma: embeddings * sqrt(64), (1 + w) RMSNorm, GeGLU (gelu_pytorch_tanh), "
                 "head_dim 16, MQA (1 KV head), tied, float32",
        "classes": ("GemmaConfig", "GemmaForCausalLM"), "seed": 8008, "storage": torch.float32,
        "config": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=1, head_dim=16,
                       tie_word_embeddings=True, rms_norm_eps=1e-6, max_position_embeddings=256,
                       hidden_activation="gelu_pytorch_tanh"),
        "rope": {"rope_type": "default", "rope_theta": 10000.0},
    },
    {
        "name": "gemma3_local",
        "about": "Gemma 3 text: layers sliding, sliding, full (sliding_window 4, local rope "
                 "base 1e4; global rope_theta 1e6 with linear scaling 2), q/k norms, pre/post "
                 "feed-forward norms, query_pre_attn_scalar 24, final_logit_softcapping 5, "
                 "GQA 4/2, head_dim 16, tied, float32",
        "classes": ("Gemma3TextConfig", "Gemma3ForCausalLM"), "seed": 9009,
        "storage": torch.float32,
        "config": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=3,
                       num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                       tie_word_embeddings=True, rms_norm_eps=1e-6, max_position_embeddings=256,
                       sliding_window=4,
                       layer_types=["sliding_attention", "sliding_attention", "full_attention"],
                       query_pre_attn_scalar=24, final_logit_softcapping=5.0,
                       attn_logit_softcapping=None, hidden_activation="gelu_pytorch_tanh"),
        "rope": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1000000.0},
        "local_rope": {"rope_type": "default", "rope_theta": 10000.0},
    },
]


# --wide: hidden and head sizes the CUDA engine's fast attention kernels are built for.
WIDE = {
    "qwen3_norms": dict(hidden_size=128, head_dim=128, intermediate_size=256),
    "mistral_window": dict(hidden_size=256, head_dim=64, intermediate_size=256),
    "phi3_partial": dict(hidden_size=256, intermediate_size=192),  # head_dim 256 / 4
    "gemma_geglu": dict(hidden_size=128, head_dim=64, intermediate_size=256),
    "gemma3_local": dict(hidden_size=128, head_dim=128, intermediate_size=256),
}


def widen(spec):
    wide = dict(spec, name=spec["name"] + "_wide", config=dict(spec["config"]))
    wide["config"].update(WIDE[spec["name"]])
    wide["about"] = spec["about"] + "; wide: " + json.dumps(WIDE[spec["name"]])
    return wide


def classes(spec):
    config_class, model_class = (getattr(transformers, n) for n in spec["classes"])
    return config_class, model_class


def is_gemma(spec):
    return spec["classes"][1] in ("GemmaForCausalLM", "Gemma3ForCausalLM")


def rope_kwargs(spec, config_class):
    """RoPE kwargs in this transformers version's spelling (see make_fixtures.rope_config).
    Gemma 3 in 5.x keys rope_parameters by layer type; 4.x has rope_local_base_freq."""
    if "local_rope" not in spec:
        return base.rope_config(config_class, spec["rope"])
    default = getattr(config_class(), "rope_parameters", None)
    if isinstance(default, dict) and "sliding_attention" in default:
        return {"rope_parameters": {"full_attention": dict(spec["rope"]),
                                    "sliding_attention": dict(spec["local_rope"])}}
    kwargs = base.rope_config(config_class, spec["rope"])
    kwargs["rope_local_base_freq"] = spec["local_rope"]["rope_theta"]
    return kwargs


def config_value(config, key):
    """A config attribute, or (5.x) the same key inside rope_parameters."""
    if hasattr(config, key):
        return getattr(config, key)
    params = getattr(config, "rope_parameters", None) or {}
    return params.get(key)


def build_config(spec):
    config_class, _ = classes(spec)
    kwargs = dict(spec["config"])
    kwargs.update(vocab_size=VOCAB, bos_token_id=BOS_ID, eos_token_id=EOS_ID,
                  pad_token_id=PAD_ID, initializer_range=base.WEIGHT_STD)
    kwargs.update(rope_kwargs(spec, config_class))
    config = config_class(**kwargs)
    for key, value in spec["config"].items():
        got = config_value(config, key)
        if got != value:
            raise SystemExit(f"{spec['name']}: config.{key} is {got!r}, wanted {value!r}")
    print(f"  rope: {getattr(config, 'rope_parameters', None) or getattr(config, 'rope_scaling', None)}"
          f", theta {getattr(config, 'rope_theta', None)}, "
          f"local {getattr(config, 'rope_local_base_freq', None)}")
    return config


def randomize_(model, spec):
    """Every parameter from a seeded generator; Gemma's norms store w of (1 + w)."""
    gen = torch.Generator().manual_seed(spec["seed"])
    counts = {"norm": 0, "bias": 0, "matrix": 0}
    with torch.no_grad():
        for name, param in model.named_parameters():
            noise = torch.randn(param.shape, generator=gen, dtype=torch.float32)
            if name.endswith("norm.weight"):
                value = base.NORM_STD * noise + (0.0 if is_gemma(spec) else 1.0)
                kind = "norm"
            elif name.endswith(".bias"):
                value, kind = base.BIAS_STD * noise, "bias"
            else:
                value, kind = base.WEIGHT_STD * noise, "matrix"
            param.copy_(value.to(param.dtype))
            counts[kind] += 1
    return counts


def forward_logits(model, ids, **kwargs):
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids], dtype=torch.long), **kwargs)
    return out, out.logits[0].to(torch.float32)


def greedy_cached(model, prompt):
    """Greedy with the KV cache (prefill, then one token per call), EOS ignored."""
    out, logits = forward_logits(model, prompt, use_cache=True)
    past, rows, tokens = out.past_key_values, [logits[-1]], []
    for step in range(NEW_TOKENS):
        tokens.append(int(torch.argmax(rows[-1])))
        if step + 1 == NEW_TOKENS:
            break
        out, logits = forward_logits(model, [tokens[-1]], past_key_values=past, use_cache=True)
        past = out.past_key_values
        rows.append(logits[-1])
    return tokens, torch.stack(rows)


def make_reference(model, spec):
    for attempt in range(base.MAX_PROMPT_TRIES):
        gen = torch.Generator().manual_seed(spec["seed"] * 1000 + attempt)
        prompt = torch.randint(3, VOCAB, (PROMPT_LEN,), generator=gen).tolist()
        tokens, cached = greedy_cached(model, prompt)
        # The reference logits: teacher-forced, one forward pass without a cache.
        _, full = forward_logits(model, prompt + tokens[:-1], use_cache=False)
        logits = full[len(prompt) - 1:]
        if logits.argmax(dim=-1).tolist() != tokens:
            raise SystemExit(f"{spec['name']}: teacher-forced argmax differs from greedy tokens")
        top2 = logits.topk(2, dim=-1).values
        gaps = top2[:, 0] - top2[:, 1]
        if gaps.min().item() <= MIN_GAP:
            print(f"  prompt attempt {attempt}: min top-2 gap {gaps.min().item():.2e}, retrying")
            continue
        diff = (cached - logits).abs().max().item()
        if diff > 1e-3:
            raise SystemExit(f"{spec['name']}: KV-cache and no-cache logits differ by {diff}")
        step_logits = [[base.round7(v) for v in row] for row in logits.tolist()]
        if torch.tensor(step_logits).argmax(dim=-1).tolist() != tokens:
            raise SystemExit(f"{spec['name']}: rounding changed an argmax")
        stats = {"attempt": attempt, "min_gap": gaps.min().item(), "cache_diff": diff,
                 "logit_std": logits.std().item()}
        return {"prompt_ids": prompt, "greedy_ids": tokens, "step_logits": step_logits}, stats
    raise SystemExit(f"{spec['name']}: no prompt with all top-2 gaps > {MIN_GAP}")


def make_fixture(spec, out_root):
    name = spec["name"]
    out_dir = os.path.join(out_root, name)
    shutil.rmtree(out_dir, ignore_errors=True)
    print(f"== {name}")
    torch.manual_seed(spec["seed"])
    _, model_class = classes(spec)
    model = model_class(build_config(spec)).to(torch.float32).eval()
    counts = randomize_(model, spec)
    base.check_tying(model, spec["config"]["tie_word_embeddings"], name)
    print(f"  parameters randomized: {counts}")
    files = base.save_checkpoint(model, dict(spec, shards=1), out_dir)
    del model

    model = model_class.from_pretrained(out_dir, dtype=torch.float32,
                                        attn_implementation="eager").eval()
    base.check_tying(model, spec["config"]["tie_word_embeddings"], name + " (reloaded)")
    tensors = base.stored_tensors(out_dir, files)
    base.check_loaded_matches_files(model, tensors, spec)
    reference, stats = make_reference(model, spec)
    with open(os.path.join(out_dir, "reference.json"), "w") as f:
        json.dump(reference, f, separators=(",", ":"))
        f.write("\n")
    print(f"  greedy {reference['greedy_ids']}")
    print(f"  prompt attempt {stats['attempt']}, min top-2 gap {stats['min_gap']:.4f}, "
          f"logit std {stats['logit_std']:.3f}, max |cache - no cache| {stats['cache_diff']:.2e}")
    stats.update(files=files, params=sum(t.numel() for t in tensors.values()))
    return stats


def make_bf16_reference(out_dir, device):
    import make_bf16_refs  # noqa: E402  (same directory)
    make_bf16_refs.quiet_transformers()
    out_path, worst, n, mismatches, margin = make_bf16_refs.process(
        out_dir, make_bf16_refs.DEFAULT_OUT_NAME, device)
    print(f"  {out_path}: HF bf16 max |logit error| {worst:.4g} over {n} steps, "
          f"argmax mismatches {mismatches}, min top-2 margin {margin:.4g}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="output directory (tests/fixtures)")
    parser.add_argument("--only", nargs="*", help="fixture names to build (default all)")
    parser.add_argument("--no-bf16", action="store_true", help="skip reference_bf16.json")
    parser.add_argument("--wide", action="store_true",
                        help="the <name>_wide variants (head dims 64 and 128)")
    parser.add_argument("--bf16-device", default=None,
                        help="torch device for reference_bf16.json (default cuda if available)")
    args = parser.parse_args()
    print(f"python {platform.python_version()}, torch {torch.__version__}, "
          f"transformers {transformers.__version__}")
    torch.set_num_threads(max(1, min(8, os.cpu_count() or 1)))
    os.makedirs(args.out, exist_ok=True)
    bf16_device = args.bf16_device or ("cuda" if torch.cuda.is_available() else None)

    specs = [s for s in FIXTURES if not args.only or s["name"] in args.only]
    if args.only and len(specs) != len(args.only):
        raise SystemExit(f"unknown fixture in {args.only} (have {[s['name'] for s in FIXTURES]})")
    if args.wide:
        specs = [widen(s) for s in specs]
    rows = []
    for spec in specs:
        stats = make_fixture(spec, args.out)
        out_dir = os.path.join(args.out, spec["name"])
        if args.no_bf16:
            pass
        elif bf16_device is None:
            print("  no CUDA device: reference_bf16.json skipped (use --bf16-device cpu)")
        else:
            make_bf16_reference(out_dir, bf16_device)
        size = base.dir_size(out_dir)
        if size > FIXTURE_LIMIT and not args.wide:
            raise SystemExit(f"{spec['name']}: {size} bytes, over {FIXTURE_LIMIT}")
        rows.append(f"| `{spec['name']}` | {spec['about']} | {', '.join(stats['files'])} | "
                    f"{stats['params']} | {stats['min_gap']:.4f} | {stats['cache_diff']:.1e} |")
    for spec in specs:
        with open(os.path.join(args.out, spec["name"], "config.json")) as f:
            print(f"\n--- {spec['name']}/config.json\n{f.read().rstrip()}")
    print("\nREADME rows (tests/fixtures/README.md):")
    print("\n".join(rows))
    print("\nall family fixtures OK")


if __name__ == "__main__":
    sys.exit(main())
