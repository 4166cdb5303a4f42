#!/usr/bin/env python3
"""HF transformers' own bf16 error on each fixture's reference tokens (the G2 bound).

    python3 scripts/reference/make_bf16_refs.py DIR [DIR ...] [--out-suffix SUFFIX]
                                                                   (on the GPU machine)

For every checkpoint directory DIR (an HF checkpoint with config.json, *.safetensors
and reference.json, as written by make_fixtures.py or scripts/model/train.py):

  1. load the model with HF transformers in torch.bfloat16 on CUDA, eager attention;
  2. teacher-force reference.json's token sequence (prompt_ids + greedy_ids[:-1]) in
     ONE forward pass without a cache; the logits at position len(prompt_ids)-1+i are
     the bf16 counterpart of step_logits[i];
  3. compare them (cast to float32) with the float32 reference: max |bf16 - fp32| per
     step and overall, and the fp32 reference's top-2 margin per step;
  4. write DIR/reference_bf16.json (DIR/reference<SUFFIX> with --out-suffix):

     {"source": "HF transformers <version> bf16 eager, teacher-forced on reference.json's tokens",
      "torch": ..., "transformers": ..., "device": GPU name,
      "max_abs_diff": overall max, "step_max_abs_diff": [...], "bound": 1.5 * max_abs_diff,
      "top2_margin": [...], "steps": N, "argmax_mismatches": M}

`kvrt check --device cuda` reads max_abs_diff from it: a bf16 engine passes G2 when its
logits are within 1.5x HF bf16's own error (tools/kvrt/cmd_check.cpp).

If DIR has no reference.json, the float32 one is made first, the way the existing ones
were (float32, eager attention, CPU, greedy with the KV cache, EOS ignored, checked
against a no-cache forward pass): 20 greedy tokens after a prompt that is the
tokenizer's encoding of "The meaning of life is" (AutoTokenizer, else the `tokenizers`
package on DIR/tokenizer.json, else ids [1, 2, 3]). An existing reference.json is never
overwritten.

Every DIR is processed even if an earlier one fails; exit status 1 if any failed.
Needs torch, transformers (5.x; 4.4x should also work), safetensors.
"""

import argparse
import json
import os
import platform
import sys
import time
import traceback

try:
    import torch
except Exception as e:  # pragma: no cover - reported to the user
    print(f"make_bf16_refs: cannot import torch: {e!r}", flush=True)
    sys.exit(2)
try:
    import transformers
    from transformers import AutoModelForCausalLM
except Exception as e:  # pragma: no cover
    print(f"make_bf16_refs: cannot import transformers: {e!r}", flush=True)
    sys.exit(2)

REFERENCE_PROMPT = "The meaning of life is"
FALLBACK_PROMPT_IDS = [1, 2, 3]
NEW_TOKENS = 20
MAX_PROMPT_IDS = 64
DEFAULT_OUT_NAME = "reference_bf16.json"


def log(msg):
    print(msg, flush=True)


def quiet_transformers():
    try:
        transformers.logging.set_verbosity_error()
    except Exception:
        pass
    try:  # the "Loading weights" progress bars
        transformers.utils.logging.disable_progress_bar()
    except Exception:
        pass


def load_model(path, dtype, device):
    """from_pretrained with eager attention; `dtype` is 5.x's name, `torch_dtype` 4.x's."""
    errors = []
    for dtype_key in ("dtype", "torch_dtype"):
        for attn in (True, False):
            kwargs = {dtype_key: dtype}
            if attn:
                kwargs["attn_implementation"] = "eager"
            try:
                model = AutoModelForCausalLM.from_pretrained(path, **kwargs)
            except TypeError as e:  # unknown keyword in this version
                errors.append(f"{kwargs}: {e}")
                continue
            except ValueError as e:
                # e.g. an attn_implementation this version does not know
                if attn:
                    errors.append(f"{kwargs}: {e}")
                    continue
                raise
            if not attn:
                log(f"  warning: loaded without attn_implementation='eager' ({errors[-1] if errors else ''})")
            model = model.to(device).eval()
            # Parameters only, and only if the dtype keyword was ignored: a blanket
            # .to(dtype) would also cast buffers HF keeps in float32 (RoPE inv_freq).
            if any(p.is_floating_point() and p.dtype != dtype for p in model.parameters()):
                log(f"  note: parameters were not loaded as {dtype}; casting them")
                model = model.to(dtype=dtype)
            impl = getattr(model.config, "_attn_implementation", None)
            if impl not in (None, "eager"):
                try:
                    model.config._attn_implementation = "eager"
                except Exception:
                    pass
                log(f"  warning: attention implementation was {impl!r}, asked for eager")
            return model
    raise RuntimeError("from_pretrained failed: " + " | ".join(errors))


def logits_of(model, ids):
    """Full-sequence logits [seq, vocab] in float32, one forward pass, no cache."""
    with torch.inference_mode():
        try:
            out = model(input_ids=ids, use_cache=False)
        except TypeError:
            out = model(input_ids=ids)
    logits = out.logits if hasattr(out, "logits") else out[0]
    return logits[0].to(torch.float32)


def top2_margin(row):
    top = torch.topk(row, 2).values
    return float(top[0] - top[1])


# ------------------------------------------------------------ fp32 reference

def prompt_ids_for(path):
    """Tokenizer encoding of REFERENCE_PROMPT (with the post-processor's specials)."""
    try:
        from transformers import AutoTokenizer
        tok = AutoTokenizer.from_pretrained(path)
        ids = tok(REFERENCE_PROMPT)["input_ids"]
        if ids and isinstance(ids[0], list):
            ids = ids[0]
        ids = [int(i) for i in ids]
        if ids:
            return ids[:MAX_PROMPT_IDS], "AutoTokenizer"
    except Exception as e:
        log(f"  AutoTokenizer failed ({type(e).__name__}: {str(e)[:200]}), trying tokenizers")
    tok_file = os.path.join(path, "tokenizer.json")
    if os.path.exists(tok_file):
        try:
            from tokenizers import Tokenizer
            ids = Tokenizer.from_file(tok_file).encode(REFERENCE_PROMPT, add_special_tokens=True).ids
            if ids:
                return [int(i) for i in ids][:MAX_PROMPT_IDS], "tokenizers"
        except Exception as e:
            log(f"  tokenizers failed ({type(e).__name__}: {str(e)[:200]})")
    return list(FALLBACK_PROMPT_IDS), "fallback ids"


def make_fp32_reference(path, ref_path):
    """Greedy float32 reference on the CPU, in reference.json's format."""
    log(f"  {ref_path} missing: making the float32 reference (CPU, eager, {NEW_TOKENS} greedy tokens)")
    prompt, how = prompt_ids_for(path)
    model = load_model(path, torch.float32, "cpu")
    vocab = int(model.config.vocab_size)
    prompt = [i for i in prompt if 0 <= i < vocab] or [i % vocab for i in FALLBACK_PROMPT_IDS]
    log(f"  prompt ids ({how}): {prompt}")

    tokens, rows = [], []
    with torch.inference_mode():
        out = model(input_ids=torch.tensor([prompt], dtype=torch.long), use_cache=True)
        past = out.past_key_values
        row = out.logits[0, -1].to(torch.float32)
        for step in range(NEW_TOKENS):
            rows.append(row.clone())
            token = int(torch.argmax(row))
            tokens.append(token)
            if step + 1 == NEW_TOKENS:
                break
            out = model(input_ids=torch.tensor([[token]], dtype=torch.long),
                        past_key_values=past, use_cache=True)
            past = out.past_key_values
            row = out.logits[0, -1].to(torch.float32)
    logits = torch.stack(rows)

    full = logits_of(model, torch.tensor([prompt + tokens[:-1]], dtype=torch.long))
    diff = float((full[len(prompt) - 1:] - logits).abs().max())
    if diff > 1e-3:
        raise RuntimeError(f"KV-cache and no-cache float32 logits differ by {diff}")
    step_logits = [[float(f"{v:.7g}") for v in r] for r in logits.tolist()]
    if torch.tensor(step_logits).argmax(-1).tolist() != tokens:
        raise RuntimeError("rounding to 7 digits changed an argmax")
    gap = min(top2_margin(r) for r in logits)
    with open(ref_path, "w") as f:
        json.dump({"prompt_ids": prompt, "greedy_ids": tokens, "step_logits": step_logits},
                  f, separators=(",", ":"))
        f.write("\n")
    log(f"  wrote {ref_path}: greedy {tokens}, min top-2 gap {gap:.4f}, "
        f"max |cache - no cache| {diff:.1e}")
    del model


# ------------------------------------------------------------ bf16 error

def process(path, out_name, device):
    ref_path = os.path.join(path, "reference.json")
    if not os.path.isdir(path):
        raise RuntimeError(f"{path} is not a directory")
    if not os.path.exists(os.path.join(path, "config.json")):
        raise RuntimeError(f"{path} has no config.json")
    if not os.path.exists(ref_path):
        make_fp32_reference(path, ref_path)

    with open(ref_path) as f:
        ref = json.load(f)
    for key in ("prompt_ids", "greedy_ids", "step_logits"):
        if key not in ref:
            raise RuntimeError(f"{ref_path} lacks {key}")
    prompt = [int(i) for i in ref["prompt_ids"]]
    greedy = [int(i) for i in ref["greedy_ids"]]
    steps = ref["step_logits"]
    if not prompt or not steps:
        raise RuntimeError(f"{ref_path}: empty prompt_ids or step_logits")
    if len(greedy) < len(steps):
        raise RuntimeError(f"{ref_path}: {len(greedy)} greedy_ids for {len(steps)} steps")
    # step i's logits predict greedy[i]; its input is greedy[i-1] at len(prompt)+i-1
    tokens = prompt + greedy[:len(steps) - 1]

    model = load_model(path, torch.bfloat16, device)
    vocab = int(model.config.vocab_size)
    ids = torch.tensor([tokens], dtype=torch.long, device=device)
    logits = logits_of(model, ids).cpu()
    if logits.shape[0] != len(tokens):
        raise RuntimeError(f"model returned {logits.shape[0]} positions for {len(tokens)} tokens")

    per_step, margins, mismatches = [], [], 0
    for i, row in enumerate(steps):
        expected = torch.tensor(row, dtype=torch.float32)
        got = logits[len(prompt) - 1 + i]
        if expected.shape[0] != got.shape[0]:
            raise RuntimeError(f"step {i}: reference has {expected.shape[0]} logits, model "
                               f"{got.shape[0]} (vocab_size {vocab})")
        per_step.append(float((got - expected).abs().max()))
        margins.append(top2_margin(expected))
        mismatches += int(torch.argmax(got)) != int(torch.argmax(expected))
    worst = max(per_step)
    if not worst == worst or worst == float("inf"):  # NaN or inf
        raise RuntimeError(f"bf16 logits are not finite (max diff {worst})")

    is_cuda = str(device).startswith("cuda")
    out = {
        "source": f"HF transformers {transformers.__version__} bf16 eager, "
                  "teacher-forced on reference.json's tokens",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "device": torch.cuda.get_device_name(torch.device(device)) if is_cuda else str(device),
        "max_abs_diff": worst,
        "step_max_abs_diff": per_step,
        "bound": 1.5 * worst,
        "top2_margin": margins,
        "steps": len(steps),
        "argmax_mismatches": mismatches,
    }
    out_path = os.path.join(path, out_name)
    tmp = out_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    os.replace(tmp, out_path)
    del model
    if is_cuda:
        torch.cuda.empty_cache()
    return out_path, worst, len(steps), mismatches, min(margins)


def main():
    parser = argparse.ArgumentParser(
        description="HF bf16 logit error against each checkpoint's float32 reference.json")
    parser.add_argument("dirs", nargs="+", metavar="DIR", help="checkpoint directories")
    parser.add_argument("--out-suffix", default=None,
                        help="write DIR/reference<SUFFIX> (e.g. .bf16.json) instead of "
                             f"DIR/{DEFAULT_OUT_NAME}")
    parser.add_argument("--device", default="cuda", help="torch device (default cuda)")
    args = parser.parse_args()

    out_name = DEFAULT_OUT_NAME if not args.out_suffix else "reference" + args.out_suffix
    if os.sep in out_name or out_name == "reference.json":
        parser.error("--out-suffix must not contain a path separator or name reference.json")
    quiet_transformers()
    log(f"python {platform.python_version()}, torch {torch.__version__}, "
        f"transformers {transformers.__version__}")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        log("make_bf16_refs: FAILED: CUDA is not available to torch")
        return 1
    if args.device.startswith("cuda"):
        log(f"device {torch.cuda.get_device_name(torch.device(args.device))}")
    torch.set_num_threads(max(1, min(8, os.cpu_count() or 1)))

    failed = 0
    for d in args.dirs:
        d = d.rstrip("/") or d
        t0 = time.time()
        try:
            out_path, worst, n, mismatches, min_margin = process(d, out_name, args.device)
            log(f"{d}: HF bf16 max |logit error| {worst:.4g} over {n} steps "
                f"(bound {1.5 * worst:.4g}, argmax mismatches {mismatches}, "
                f"min fp32 top-2 margin {min_margin:.4g}) -> {out_path} [{time.time() - t0:.1f} s]")
        except Exception as e:  # report, go on with the others
            failed += 1
            log(f"{d}: FAILED {type(e).__name__}: {e}")
            traceback.print_exc(file=sys.stdout)
            sys.stdout.flush()
    if failed:
        log(f"{failed} of {len(args.dirs)} directories FAILED")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
