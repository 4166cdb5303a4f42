#!/usr/bin/env python3
"""Creates tiny random-weight Hugging Face checkpoints with greedy references.

    python3 scripts/reference/make_fixtures.py --out tests/fixtures

Each fixture is written to OUT/<name>/ as a normal HF checkpoint (config.json,
safetensors weights, generation_config.json) plus reference.json, computed by HF
transformers itself (float32, eager attention, CPU) from the checkpoint *as saved*:

    prompt_ids   ~7 random token ids (seeded)
    greedy_ids   20 greedy tokens generated with the KV cache, EOS disabled
    step_logits  the raw logits each greedy token was picked from; entry 0 is the
                 prefill's last position, entry i the decode step that produced
                 greedy_ids[i]

kvrt's loader, frontend and runtime are tested against these files (contract G2).
Weights use a large init std and randomized norm scales and biases, so logits are
well spread and a mistake in any tensor changes them. A prompt is accepted only if
every step's top-2 logit gap exceeds MIN_GAP, so the greedy tokens are robust to
float32 summation-order differences between implementations.

Needs torch, transformers (5.x; 4.4x should also work), safetensors.
"""

import argparse
import glob
import json
import os
import platform
import shutil
import sys

import torch
import transformers
from safetensors.torch import load_file
from transformers import (
    GenerationConfig,
    LlamaConfig,
    LlamaForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
)

VOCAB = 256
BOS_ID, EOS_ID, PAD_ID = 1, 2, 0
PROMPT_LEN = 7
NEW_TOKENS = 20
MIN_GAP = 1e-2            # smallest accepted top-2 logit gap at every step
MAX_PROMPT_TRIES = 200
WEIGHT_STD = 0.15         # init std of every matrix and embedding
NORM_STD = 0.1            # RMSNorm scales are 1 + NORM_STD * randn
BIAS_STD = 0.1
SIZE_LIMIT = 5 * 1024 * 1024  # all fixtures together

# name -> how it is built. `config` holds plain config fields; `rope` is the RoPE
# setup, converted to whatever this transformers version calls it (rope_config()).
FIXTURES = [
    {
        "name": "llama_gqa",
        "about": "baseline Llama: GQA 4 query / 2 KV heads, tied embeddings (no "
                 "lm_head.weight in the file), float32, one model.safetensors",
        "model_class": LlamaForCausalLM, "config_class": LlamaConfig,
        "seed": 1001, "storage": torch.float32, "shards": 1,
        "config": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2,
                       tie_word_embeddings=True, rms_norm_eps=1e-5,
                       max_position_embeddings=256),
        "rope": {"rope_type": "default", "rope_theta": 10000.0},
    },
    {
        "name": "llama_untied",
        "about": "separate lm_head; explicit head_dim 32 with hidden 64 and 4 heads "
                 "(q_proj 64->128, o_proj 128->64); one KV head (ratio 4); llama3 RoPE "
                 "scaling with theta 500000; 3 layers; bfloat16 storage",
        "model_class": LlamaForCausalLM, "config_class": LlamaConfig,
        "seed": 2002, "storage": torch.bfloat16, "shards": 1,
        "config": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=3,
                       num_attention_heads=4, num_key_value_heads=1, head_dim=32,
                       tie_word_embeddings=False, rms_norm_eps=1e-5,
                       max_position_embeddings=256),
        # original_max_position_embeddings (32) is below the 27 positions used plus
        # margin on purpose; llama3 scaling changes the low frequencies in any case.
        "rope": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                 "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                 "original_max_position_embeddings": 32},
    },
    {
        "name": "qwen2_bias",
        "about": "Qwen2: q/k/v projection biases, no sliding window, rope_theta 1e6, "
                 "rms_norm_eps 1e-6, intermediate 160, tied embeddings, float16 storage",
        "model_class": Qwen2ForCausalLM, "config_class": Qwen2Config,
        "seed": 3003, "storage": torch.float16, "shards": 1,
        "config": dict(hidden_size=64, intermediate_size=160, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2,
                       tie_word_embeddings=True, rms_norm_eps=1e-6,
                       max_position_embeddings=256, use_sliding_window=False),
        "rope": {"rope_type": "default", "rope_theta": 1000000.0},
    },
    {
        "name": "llama_sharded",
        "about": "llama_gqa's architecture, untied, float32, saved as two shards "
                 "(model-0000{1,2}-of-00002.safetensors + model.safetensors.index.json)",
        "model_class": LlamaForCausalLM, "config_class": LlamaConfig,
        "seed": 4004, "storage": torch.float32, "shards": 2,
        "config": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2,
                       tie_word_embeddings=False, rms_norm_eps=1e-5,
                       max_position_embeddings=256),
        "rope": {"rope_type": "default", "rope_theta": 10000.0},
    },
]


def rope_config(config_class, rope):
    """Config kwargs for a RoPE setup, in this transformers version's spelling.

    transformers 5 keeps everything (theta included) in one `rope_parameters`
    dict; 4.x used a top-level `rope_theta` plus an optional `rope_scaling` dict.
    """
    if hasattr(config_class(), "rope_parameters"):
        return {"rope_parameters": dict(rope)}
    scaling = {k: v for k, v in rope.items() if k != "rope_theta"}
    kwargs = {"rope_theta": rope["rope_theta"]}
    if scaling.get("rope_type", "default") != "default":
        kwargs["rope_scaling"] = scaling
    return kwargs


def effective_rope(config):
    """The RoPE settings a built config really holds, for checking."""
    params = getattr(config, "rope_parameters", None)
    if params:
        return dict(params)
    params = dict(getattr(config, "rope_scaling", None) or {"rope_type": "default"})
    params["rope_theta"] = config.rope_theta
    return params


def build_config(spec):
    kwargs = dict(spec["config"])
    kwargs.update(vocab_size=VOCAB, bos_token_id=BOS_ID, eos_token_id=EOS_ID,
                  initializer_range=WEIGHT_STD, hidden_act="silu")
    kwargs.update(rope_config(spec["config_class"], spec["rope"]))
    config = spec["config_class"](**kwargs)

    # Check that every requested value survived the constructor under the field
    # name we used: the C++ loader reads what config.json really says.
    for key, value in spec["config"].items():
        got = getattr(config, key, None)
        if got != value:
            raise SystemExit(f"{spec['name']}: config.{key} is {got!r}, wanted {value!r}")
    rope = effective_rope(config)
    rope.setdefault("rope_type", rope.pop("type", "default"))
    for key, value in spec["rope"].items():
        if rope.get(key) != value:
            raise SystemExit(f"{spec['name']}: RoPE {key} is {rope.get(key)!r}, wanted {value!r} (have {rope})")
    if spec["config_class"] is Qwen2Config:
        if getattr(config, "sliding_window", None) not in (None, 0) and config.use_sliding_window:
            raise SystemExit("qwen2_bias: sliding window is on")
        layer_types = getattr(config, "layer_types", None)
        if layer_types and any(t != "full_attention" for t in layer_types):
            raise SystemExit(f"qwen2_bias: layer_types {layer_types} are not all full_attention")
    return config


def randomize_(model, seed):
    """Overwrites every parameter from a seeded generator (HF's own init leaves
    norms at 1 and biases at 0, which would hide bugs that drop them)."""
    gen = torch.Generator().manual_seed(seed)
    counts = {"norm": 0, "bias": 0, "matrix": 0}
    with torch.no_grad():
        # named_parameters() lists a tied embedding once.
        for name, param in model.named_parameters():
            noise = torch.randn(param.shape, generator=gen, dtype=torch.float32)
            if name.endswith("norm.weight"):
                value, kind = 1.0 + NORM_STD * noise, "norm"
            elif name.endswith(".bias"):
                value, kind = BIAS_STD * noise, "bias"
            else:
                value, kind = WEIGHT_STD * noise, "matrix"
            param.copy_(value.to(param.dtype))
            counts[kind] += 1
    return counts


def check_tying(model, tied, where):
    lm_head = model.get_output_embeddings().weight
    embed = model.get_input_embeddings().weight
    shared = lm_head.data_ptr() == embed.data_ptr()
    if shared != tied:
        raise SystemExit(f"{where}: lm_head shares embed_tokens storage: {shared}, wanted {tied}")


def save_checkpoint(model, spec, out_dir):
    model.generation_config = GenerationConfig(
        bos_token_id=BOS_ID, eos_token_id=EOS_ID, pad_token_id=PAD_ID)
    stored = model.to(spec["storage"])
    if spec["shards"] == 1:
        stored.save_pretrained(out_dir)
    else:
        # The shard size limit is in bytes; 60% of the total gives two shards with
        # a greedy packer, but try a few limits and keep the first that gives
        # exactly the wanted count so a different packing order cannot break it.
        total = sum(p.numel() * p.element_size() for p in stored.state_dict().values())
        for fraction in (0.6, 0.55, 0.65, 0.5, 0.7, 0.75, 0.8):
            shutil.rmtree(out_dir, ignore_errors=True)
            stored.save_pretrained(out_dir, max_shard_size=int(total * fraction))
            if len(glob.glob(os.path.join(out_dir, "*.safetensors"))) == spec["shards"]:
                break
    if not os.path.exists(os.path.join(out_dir, "generation_config.json")):
        model.generation_config.save_pretrained(out_dir)

    files = sorted(os.path.basename(p) for p in glob.glob(os.path.join(out_dir, "*.safetensors")))
    if spec["shards"] == 1:
        expected = ["model.safetensors"]
    else:
        n = spec["shards"]
        expected = [f"model-{i:05d}-of-{n:05d}.safetensors" for i in range(1, n + 1)]
        if not os.path.exists(os.path.join(out_dir, "model.safetensors.index.json")):
            raise SystemExit(f"{spec['name']}: model.safetensors.index.json missing")
    if files != expected:
        raise SystemExit(f"{spec['name']}: wrote {files}, wanted {expected}")
    return files


def stored_tensors(out_dir, files):
    tensors = {}
    for name in files:
        tensors.update(load_file(os.path.join(out_dir, name)))
    return tensors


def check_loaded_matches_files(model, tensors, spec):
    """The reference must come from exactly the stored weights (upcast)."""
    tied = spec["config"]["tie_word_embeddings"]
    if tied and "lm_head.weight" in tensors:
        raise SystemExit(f"{spec['name']}: tied model stored lm_head.weight")
    if not tied and "lm_head.weight" not in tensors:
        raise SystemExit(f"{spec['name']}: untied model lacks lm_head.weight")
    dtypes = {t.dtype for t in tensors.values()}
    if dtypes != {spec["storage"]}:
        raise SystemExit(f"{spec['name']}: stored dtypes {dtypes}, wanted {spec['storage']}")
    state = model.state_dict()
    for name, stored in tensors.items():
        if name not in state:
            raise SystemExit(f"{spec['name']}: stored tensor {name} is not a model parameter")
        if not torch.equal(state[name], stored.to(torch.float32)):
            raise SystemExit(f"{spec['name']}: loaded {name} differs from the stored tensor")
    missing = [n for n in state if n not in tensors and not (tied and n == "lm_head.weight")]
    if missing:
        raise SystemExit(f"{spec['name']}: parameters not in the files: {missing}")


def greedy(model, prompt):
    """Greedy decode with the KV cache; returns (tokens, raw logits per step)."""
    # transformers 5 fills every generation setting left at None from
    # model.generation_config, so EOS is switched off there as well as in the call.
    model.generation_config = GenerationConfig(pad_token_id=PAD_ID)
    input_ids = torch.tensor([prompt], dtype=torch.long)
    with torch.no_grad():
        out = model.generate(
            input_ids=input_ids,
            attention_mask=torch.ones_like(input_ids),
            do_sample=False,
            num_beams=1,
            use_cache=True,
            max_new_tokens=NEW_TOKENS,
            min_new_tokens=NEW_TOKENS,
            eos_token_id=None,
            pad_token_id=PAD_ID,
            output_logits=True,
            return_dict_in_generate=True,
        )
    tokens = out.sequences[0, len(prompt):].tolist()
    logits = [step[0].to(torch.float32) for step in out.logits]
    if len(tokens) != NEW_TOKENS or len(logits) != NEW_TOKENS:
        raise SystemExit(f"generate returned {len(tokens)} tokens / {len(logits)} logits, "
                         f"wanted {NEW_TOKENS} (did EOS stop it?)")
    return tokens, torch.stack(logits)


def no_cache_logits(model, prompt, tokens):
    """Logits of the same positions from one full forward pass without a cache."""
    ids = torch.tensor([prompt + tokens[:-1]], dtype=torch.long)
    with torch.no_grad():
        logits = model(input_ids=ids, use_cache=False).logits[0].to(torch.float32)
    return logits[len(prompt) - 1:]


def round7(x):
    return float(f"{x:.7g}")


def make_reference(model, spec):
    """Tries seeded prompts until every step's greedy choice has a clear margin."""
    for attempt in range(MAX_PROMPT_TRIES):
        gen = torch.Generator().manual_seed(spec["seed"] * 1000 + attempt)
        # ids 0..2 are pad/BOS/EOS in generation_config; keep prompts to plain ids
        prompt = torch.randint(3, VOCAB, (PROMPT_LEN,), generator=gen).tolist()
        tokens, logits = greedy(model, prompt)

        if logits.argmax(dim=-1).tolist() != tokens:
            raise SystemExit(f"{spec['name']}: greedy token is not the argmax of its logits")
        top2 = logits.topk(2, dim=-1).values
        gaps = top2[:, 0] - top2[:, 1]
        if gaps.min().item() <= MIN_GAP:
            print(f"  prompt attempt {attempt}: min top-2 gap {gaps.min().item():.2e}, retrying")
            continue

        # The cached path must agree with a plain forward pass; a large difference
        # would mean the reference itself is suspect.
        diff = (no_cache_logits(model, prompt, tokens) - logits).abs().max().item()
        if diff > 1e-3:
            raise SystemExit(f"{spec['name']}: KV-cache and no-cache logits differ by {diff}")

        step_logits = [[round7(v) for v in row] for row in logits.tolist()]
        rounded = torch.tensor(step_logits)
        if rounded.argmax(dim=-1).tolist() != tokens:
            raise SystemExit(f"{spec['name']}: rounding changed an argmax")
        stats = {"attempt": attempt, "min_gap": gaps.min().item(), "cache_diff": diff,
                 "logit_std": logits.std().item()}
        return {"prompt_ids": prompt, "greedy_ids": tokens, "step_logits": step_logits}, stats
    raise SystemExit(f"{spec['name']}: no prompt with all top-2 gaps > {MIN_GAP} "
                     f"in {MAX_PROMPT_TRIES} tries")


def make_fixture(spec, out_root):
    name = spec["name"]
    out_dir = os.path.join(out_root, name)
    shutil.rmtree(out_dir, ignore_errors=True)
    print(f"== {name}")

    torch.manual_seed(spec["seed"])
    config = build_config(spec)
    model = spec["model_class"](config).to(torch.float32).eval()
    counts = randomize_(model, spec["seed"])
    check_tying(model, spec["config"]["tie_word_embeddings"], name)
    print(f"  parameters randomized: {counts}")
    if spec["model_class"] is Qwen2ForCausalLM and counts["bias"] != 3 * spec["config"]["num_hidden_layers"]:
        raise SystemExit(f"{name}: expected q/k/v biases in every layer, found {counts['bias']} biases")

    files = save_checkpoint(model, spec, out_dir)
    del model

    # Reload what was written, upcast to float32, and compute the reference from it.
    model = spec["model_class"].from_pretrained(
        out_dir, dtype=torch.float32, attn_implementation="eager").eval()
    check_tying(model, spec["config"]["tie_word_embeddings"], name + " (reloaded)")
    tensors = stored_tensors(out_dir, files)
    check_loaded_matches_files(model, tensors, spec)

    reference, stats = make_reference(model, spec)
    if sorted(reference) != ["greedy_ids", "prompt_ids", "step_logits"]:
        raise SystemExit("reference.json keys changed")
    with open(os.path.join(out_dir, "reference.json"), "w") as f:
        json.dump(reference, f, separators=(",", ":"))
        f.write("\n")
    print(f"  files {files}, {len(tensors)} tensors, prompt {reference['prompt_ids']}")
    print(f"  greedy {reference['greedy_ids']}")
    print(f"  prompt attempt {stats['attempt']}, min top-2 gap {stats['min_gap']:.4f}, "
          f"logit std {stats['logit_std']:.3f}, max |cache - no cache| {stats['cache_diff']:.2e}")
    stats.update(files=files, tensors=len(tensors), params=sum(t.numel() for t in tensors.values()))
    return stats


def dir_size(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def write_readme(out_root, all_stats):
    lines = [
        "# Reference checkpoints (generated)",
        "",
        "Tiny random-weight Hugging Face checkpoints with greedy references computed by",
        "HF transformers. Do not edit by hand; regenerate on a machine with torch and",
        "transformers:",
        "",
        "    python3 scripts/reference/make_fixtures.py --out tests/fixtures",
        "",
        f"Generated with torch {torch.__version__}, transformers {transformers.__version__}, "
        f"Python {platform.python_version()}.",
        "",
        "Each directory holds `config.json`, safetensors weights, `generation_config.json`",
        "and `reference.json` with exactly three keys:",
        "",
        f"- `prompt_ids`: {PROMPT_LEN} seeded random token ids (3..{VOCAB - 1}).",
        f"- `greedy_ids`: {NEW_TOKENS} tokens from `model.generate(do_sample=False, use_cache=True)`",
        "  with EOS disabled, so always exactly that many.",
        "- `step_logits`: the raw (unprocessed) logits each greedy token was chosen from,",
        "  one list of vocab_size floats per token, rounded to 7 significant digits.",
        "  Entry 0 is the prefill's last position; entry i is the decode step whose input",
        "  is greedy_ids[i-1] at position len(prompt_ids)+i-1.",
        "",
        "The reference runs in float32 on CPU with eager attention, from the checkpoint",
        "loaded back from disk (bf16/fp16 weights upcast exactly). A prompt is kept only",
        f"if every step's top-2 logit gap exceeds {MIN_GAP:g}, so greedy tokens are robust to",
        "float32 rounding differences; the KV-cache logits were also checked against a",
        "full no-cache forward pass. All weights are random (std "
        f"{WEIGHT_STD:g}, RMSNorm scales 1 + {NORM_STD:g}*randn, biases {BIAS_STD:g}*randn).",
        "",
        "| fixture | what it exercises | files | params | min top-2 gap | cache vs no-cache |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for spec in FIXTURES:
        s = all_stats[spec["name"]]
        lines.append(f"| `{spec['name']}` | {spec['about']} | {', '.join(s['files'])} | "
                     f"{s['params']} | {s['min_gap']:.4f} | {s['cache_diff']:.1e} |")
    lines += [
        "",
        f"All fixtures share vocab_size {VOCAB}, bos_token_id {BOS_ID}, eos_token_id {EOS_ID}.",
        "RoPE settings are stored the way this transformers version writes them (in 5.x a",
        "single `rope_parameters` object that also holds `rope_theta`; in 4.x top-level",
        "`rope_theta` plus `rope_scaling`); a loader should accept both.",
        "",
        "On the GPU machine `bash scripts/gpu/make_reference_data.sh CORPUS_FILE OUTDIR`",
        "runs this script and packs its output as `OUTDIR/fixtures.tar.gz`; unpack it",
        "here with `tar xzf OUTDIR/fixtures.tar.gz -C tests/fixtures`.",
        "",
    ]
    with open(os.path.join(out_root, "README.md"), "w") as f:
        f.write("\n".join(lines))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--only", nargs="*", help="fixture names to build (default all)")
    args = parser.parse_args()

    print(f"python {platform.python_version()}, torch {torch.__version__}, "
          f"transformers {transformers.__version__}")
    torch.set_num_threads(max(1, min(8, os.cpu_count() or 1)))
    os.makedirs(args.out, exist_ok=True)

    specs = [s for s in FIXTURES if not args.only or s["name"] in args.only]
    all_stats = {spec["name"]: make_fixture(spec, args.out) for spec in specs}
    if len(specs) == len(FIXTURES):
        write_readme(args.out, all_stats)

    total = sum(dir_size(os.path.join(args.out, s["name"])) for s in specs)
    print(f"\ntotal fixture size {total} bytes")
    if total > SIZE_LIMIT:
        raise SystemExit(f"fixtures are {total} bytes, over the {SIZE_LIMIT} byte limit")

    # The C++ loader must read what transformers really wrote: show it.
    for spec in specs:
        d = os.path.join(args.out, spec["name"])
        for fname in ("config.json", "generation_config.json"):
            print(f"\n--- {spec['name']}/{fname}")
            with open(os.path.join(d, fname)) as f:
                print(f.read().rstrip())
        index = os.path.join(d, "model.safetensors.index.json")
        if os.path.exists(index):
            with open(index) as f:
                print(f"\n--- {spec['name']}/model.safetensors.index.json\n{f.read().rstrip()}")
    print("\nall fixtures OK")


if __name__ == "__main__":
    sys.exit(main())
