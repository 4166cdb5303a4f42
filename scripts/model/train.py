#!/usr/bin/env python3
"""Trains kvrt's bundled demo model, fortune-llama, from scratch on fortune cookies.

    bash scripts/model/build_corpus.sh corpus.txt
    python3 scripts/model/train.py --corpus corpus.txt --out models/fortune-llama

1. A byte-level BPE tokenizer (Llama 3 style, vocab 4096) with <|begin_of_text|> as
   BOS and <|end_of_text|> as EOS.
2. A small LlamaForCausalLM (6 layers, hidden 256, 8 heads / 4 KV heads, tied
   embeddings), trained on CUDA with AdamW, bf16 autocast and a cosine learning
   rate over --epochs passes (capped by a wall-clock budget, --minutes). Every
   fortune is wrapped as BOS text EOS so the model learns to stop. 2% of the
   fortunes are held out; the weights with the best validation loss are kept.
3. Writes, in HF format: config.json, model.safetensors (bfloat16),
   generation_config.json, tokenizer.json, plus reference.json (prompt_ids,
   greedy_ids, step_logits: 32 greedy tokens computed in float32 on CPU with eager
   attention from the checkpoint as saved), sample.txt and train_log.json.

Needs torch (CUDA), transformers, tokenizers, safetensors.
"""

import argparse
import json
import math
import os
import platform
import random
import sys
import time

import torch
import torch.nn.functional as F
import tokenizers
import transformers
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

BOT, EOT = "<|begin_of_text|>", "<|end_of_text|>"
LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
    r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
REFERENCE_PROMPTS = ["The meaning of life is", "The meaning of life is not",
                     "The secret of life is", "The meaning of love is"]
SAMPLE_PROMPTS = ["The meaning of life is", "A computer", "Q:", "Never"]
REFERENCE_TOKENS = 32
MIN_GAP = 1e-2           # wanted top-2 logit margin at every reference step
MAX_MODEL_BYTES = 16 * 1024 * 1024


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--corpus", required=True, help="fortunes, paragraphs separated by blank lines")
    p.add_argument("--out", required=True, help="output model directory")
    p.add_argument("--minutes", type=float, default=4.0, help="wall-clock training budget")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--vocab", type=int, default=4096)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--kv-heads", type=int, default=4)
    p.add_argument("--intermediate", type=int, default=688)
    p.add_argument("--context", type=int, default=256, help="training sequence length")
    p.add_argument("--batch", type=int, default=32, help="sequences per step")
    p.add_argument("--epochs", type=float, default=20.0,
                   help="passes over the training tokens; the corpus is small, so this, "
                        "not --minutes, usually ends training")
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--min-lr-ratio", type=float, default=0.1)
    p.add_argument("--warmup", type=int, default=100, help="warm-up steps")
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--dropout", type=float, default=0.2,
                   help="training-only dropout on embedding, attention and MLP outputs")
    p.add_argument("--eval-every", type=int, default=100, help="steps between validations")
    return p.parse_args()


# ------------------------------------------------------------------ data

def read_fortunes(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    fortunes = [p.strip("\n") for p in text.split("\n\n")]
    return [p for p in fortunes if p.strip()]


def train_tokenizer(fortunes, vocab_size):
    """Same style as scripts/reference/make_tokenizer_refs.py's byte_bpe."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=[BOT, EOT],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(fortunes, trainer=trainer, length=len(fortunes))
    tok.add_special_tokens([AddedToken(BOT, special=True, normalized=False),
                            AddedToken(EOT, special=True, normalized=False)])
    bos = tok.token_to_id(BOT)
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single=f"{BOT}:0 $A:0",
                                      pair=f"{BOT}:0 $A:0 {BOT}:1 $B:1",
                                      special_tokens=[(BOT, bos)]),
    ])
    return tok


def token_stream(tok, texts, eos):
    """BOS fortune EOS, concatenated (the post-processor adds the BOS)."""
    ids = []
    for enc in tok.encode_batch(texts, add_special_tokens=True):
        ids.extend(enc.ids)
        ids.append(eos)
    return torch.tensor(ids, dtype=torch.long)


# ------------------------------------------------------------------ model

def build_config(args, tok):
    kwargs = dict(
        vocab_size=tok.get_vocab_size(with_added_tokens=True),
        hidden_size=args.hidden,
        intermediate_size=args.intermediate,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        num_key_value_heads=args.kv_heads,
        hidden_act="silu",
        max_position_embeddings=512,
        rms_norm_eps=1e-5,
        initializer_range=0.02,
        tie_word_embeddings=True,
        bos_token_id=tok.token_to_id(BOT),
        eos_token_id=tok.token_to_id(EOT),
    )
    # transformers 5 keeps RoPE settings (theta included) in `rope_parameters`;
    # 4.x had a top-level `rope_theta`.
    if hasattr(LlamaConfig(), "rope_parameters"):
        kwargs["rope_parameters"] = {"rope_type": "default", "rope_theta": 10000.0}
    else:
        kwargs["rope_theta"] = 10000.0
    return LlamaConfig(**kwargs)


def add_dropout(model, p):
    """Residual dropout for training. Llama has none of its own (only attention
    dropout), and the corpus is small enough to overfit in a minute. Forward hooks
    act only in train mode and are not part of the saved checkpoint."""
    if p <= 0:
        return

    def hook(module, inputs, output):
        if not module.training:
            return None
        if isinstance(output, tuple):  # attention returns (output, weights)
            return (F.dropout(output[0], p, True),) + tuple(output[1:])
        return F.dropout(output, p, True)

    model.model.embed_tokens.register_forward_hook(hook)
    for layer in model.model.layers:
        layer.self_attn.register_forward_hook(hook)
        layer.mlp.register_forward_hook(hook)


def lr_at(step, total_steps, elapsed, args):
    """Linear warm-up, then cosine decay to the floor. Progress is the larger of
    the step share and the time-budget share, so the LR is annealed whichever
    limit ends training."""
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    progress = min(1.0, max(step / total_steps, elapsed / (args.minutes * 60.0)))
    floor = args.lr * args.min_lr_ratio
    return floor + (args.lr - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))


@torch.no_grad()
def evaluate(model, windows, batch):
    """Mean next-token loss (nats/token) over fixed validation windows."""
    model.eval()
    total, count = 0.0, 0
    for i in range(0, windows.shape[0], batch):
        w = windows[i:i + batch]
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(input_ids=w[:, :-1]).logits
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]),
                               w[:, 1:].reshape(-1), reduction="sum")
        total += loss.item()
        count += w[:, 1:].numel()
    model.train()
    return total / count


def train(args, model, train_ids, val_windows, device):
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        (decay if param.ndim >= 2 else no_decay).append(param)
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": args.weight_decay},
         {"params": no_decay, "weight_decay": 0.0}],
        lr=args.lr, betas=(0.9, 0.95), eps=1e-8, fused=True)

    gen = torch.Generator(device=device).manual_seed(args.seed)
    span = args.context + 1
    offsets = torch.arange(span, device=device)
    high = train_ids.numel() - span

    budget = args.minutes * 60.0
    total_steps = max(args.warmup + 1,
                      math.ceil(args.epochs * train_ids.numel() / (args.batch * args.context)))
    print(f"training for {total_steps} steps ({args.epochs:g} epochs) or {args.minutes:g} minutes, "
          f"whichever ends first", flush=True)
    start = time.time()
    step, tokens_seen = 0, 0
    best = {"val_loss": float("inf"), "step": 0, "state": None}
    history, stop_reason = [], f"{args.epochs:g} epochs done"
    # summed on the GPU so the loop never waits for a loss value between evaluations
    loss_sum, loss_count = torch.zeros((), device=device), 0
    model.train()
    while True:
        elapsed = time.time() - start
        if step >= total_steps:
            break
        if elapsed >= budget:
            stop_reason = f"time budget of {args.minutes:g} minutes"
            break
        lr = lr_at(step, total_steps, elapsed, args)
        for group in optimizer.param_groups:
            group["lr"] = lr

        # random windows of the packed training stream
        starts = torch.randint(0, high, (args.batch, 1), device=device, generator=gen)
        w = train_ids[starts + offsets]
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(input_ids=w[:, :-1]).logits
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), w[:, 1:].reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        step += 1
        tokens_seen += args.batch * args.context

        loss_sum += loss.detach()
        loss_count += 1
        if step % args.eval_every == 0:
            running = (loss_sum / loss_count).item()
            loss_sum.zero_()
            loss_count = 0
            val = evaluate(model, val_windows, 64)
            elapsed = time.time() - start
            history.append({"step": step, "minutes": round(elapsed / 60, 3),
                            "train_loss": round(running, 4), "val_loss": round(val, 4), "lr": lr})
            marker = ""
            if val < best["val_loss"]:
                best = {"val_loss": val, "step": step,
                        "state": {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}}
                marker = "  *best"
            print(f"step {step:6d}  {elapsed:6.1f}s  lr {lr:.2e}  train {running:.4f}  "
                  f"val {val:.4f}  {tokens_seen / max(elapsed, 1e-9) / 1e3:8.0f}k tok/s{marker}",
                  flush=True)

    final_val = evaluate(model, val_windows, 64)
    if final_val < best["val_loss"]:
        best = {"val_loss": final_val, "step": step,
                "state": {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}}
    minutes = (time.time() - start) / 60
    print(f"stopped after {step} steps, {minutes:.2f} min: {stop_reason}; "
          f"final val {final_val:.4f}, best val {best['val_loss']:.4f} at step {best['step']}", flush=True)
    model.load_state_dict(best["state"])
    return {"steps": step, "planned_steps": total_steps, "tokens_seen": tokens_seen, "minutes": round(minutes, 3),
            "stop_reason": stop_reason, "final_val_loss": round(final_val, 4),
            "best_val_loss": round(best["val_loss"], 4), "best_step": best["step"],
            "history": history}


# ------------------------------------------------------------- reference

def greedy(model, prompt, n, pad_id):
    """Greedy decode with the KV cache and EOS disabled; raw logits per step."""
    # transformers 5 fills generation settings left at None from
    # model.generation_config, so EOS is cleared there too.
    saved = model.generation_config
    model.generation_config = GenerationConfig(pad_token_id=pad_id)
    ids = torch.tensor([prompt], dtype=torch.long)
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                             do_sample=False, num_beams=1, use_cache=True,
                             max_new_tokens=n, min_new_tokens=n, eos_token_id=None,
                             pad_token_id=pad_id, output_logits=True, return_dict_in_generate=True)
    model.generation_config = saved
    tokens = out.sequences[0, len(prompt):].tolist()
    logits = torch.stack([s[0].float() for s in out.logits])
    if len(tokens) != n or logits.shape[0] != n:
        raise SystemExit(f"generate returned {len(tokens)} tokens, wanted {n}")
    if logits.argmax(-1).tolist() != tokens:
        raise SystemExit("greedy token is not the argmax of its logits")
    # cross-check the cached path against one plain forward pass
    with torch.no_grad():
        full = model(input_ids=torch.tensor([prompt + tokens[:-1]]), use_cache=False).logits[0].float()
    diff = (full[len(prompt) - 1:] - logits).abs().max().item()
    if diff > 1e-3:
        raise SystemExit(f"KV-cache and no-cache logits differ by {diff}")
    top2 = logits.topk(2, dim=-1).values
    return tokens, logits, (top2[:, 0] - top2[:, 1]).min().item(), diff


def make_reference(out_dir, tok, log):
    model = LlamaForCausalLM.from_pretrained(out_dir, dtype=torch.float32,
                                             attn_implementation="eager").eval()
    eos = tok.token_to_id(EOT)
    bos = tok.token_to_id(BOT)
    chosen = None
    for text in REFERENCE_PROMPTS:
        prompt = tok.encode(text, add_special_tokens=True).ids
        if prompt[0] != bos:
            raise SystemExit(f"prompt {prompt} does not start with BOS {bos}")
        tokens, logits, gap, diff = greedy(model, prompt, REFERENCE_TOKENS, eos)
        print(f"reference prompt {text!r}: min top-2 gap {gap:.4f}, max |cache - no cache| {diff:.1e}")
        if chosen is None or (gap > MIN_GAP and chosen[4] <= MIN_GAP):
            chosen = (text, prompt, tokens, logits, gap, diff)
        if gap > MIN_GAP:
            break
    text, prompt, tokens, logits, gap, diff = chosen
    if gap <= MIN_GAP:
        print(f"WARNING: no reference prompt has all top-2 gaps > {MIN_GAP}; using {text!r}")
    step_logits = [[float(f"{v:.7g}") for v in row] for row in logits.tolist()]
    if torch.tensor(step_logits).argmax(-1).tolist() != tokens:
        raise SystemExit("rounding changed an argmax")
    with open(os.path.join(out_dir, "reference.json"), "w") as f:
        json.dump({"prompt_ids": prompt, "greedy_ids": tokens, "step_logits": step_logits},
                  f, separators=(",", ":"))
        f.write("\n")
    log["reference"] = {"prompt": text, "prompt_ids": prompt, "greedy_ids": tokens,
                        "greedy_text": tok.decode(tokens, skip_special_tokens=False),
                        "min_top2_gap": round(gap, 6), "cache_vs_no_cache": diff}

    # samples, stopping at EOS as a user would see them
    lines = [f"greedy, {REFERENCE_TOKENS} tokens, EOS ignored (reference.json):",
             f"  {text!r} -> {tok.decode(tokens, skip_special_tokens=False)!r}", ""]
    torch.manual_seed(1)
    for p in SAMPLE_PROMPTS:
        ids = torch.tensor([tok.encode(p, add_special_tokens=True).ids])
        for _ in range(2):
            with torch.no_grad():
                out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                                     do_sample=True, temperature=0.8, top_k=50, top_p=1.0,
                                     max_new_tokens=80, eos_token_id=eos, pad_token_id=eos)
            cont = tok.decode(out[0, ids.shape[1]:].tolist(), skip_special_tokens=True)
            lines.append(f"sample (T=0.8, top-k 50): {p}{cont}")
            lines.append("")
    with open(os.path.join(out_dir, "sample.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


# ------------------------------------------------------------------ main

def main():
    args = parse_args()
    print(f"python {platform.python_version()}, torch {torch.__version__}, "
          f"transformers {transformers.__version__}, tokenizers {tokenizers.__version__}", flush=True)
    if not torch.cuda.is_available():
        raise SystemExit("CUDA is required for training")
    device = torch.device("cuda")
    random.seed(args.seed)
    torch.manual_seed(args.seed)

    fortunes = read_fortunes(args.corpus)
    if len(fortunes) < 1000:
        raise SystemExit(f"corpus has only {len(fortunes)} fortunes; is it the right file?")
    order = list(range(len(fortunes)))
    random.Random(args.seed).shuffle(order)
    n_val = max(1, round(0.02 * len(fortunes)))
    val_texts = [fortunes[i] for i in order[:n_val]]
    train_texts = [fortunes[i] for i in order[n_val:]]

    t0 = time.time()
    # The tokenizer sees only training fortunes, so validation is fully held out.
    tok = train_tokenizer(train_texts, args.vocab)
    bos, eos = tok.token_to_id(BOT), tok.token_to_id(EOT)
    train_ids = token_stream(tok, train_texts, eos).to(device)
    val_ids = token_stream(tok, val_texts, eos)
    span = args.context + 1
    n_windows = max(1, (val_ids.numel() - 1) // args.context)
    val_windows = torch.stack([val_ids[i * args.context:i * args.context + span]
                               for i in range(n_windows) if i * args.context + span <= val_ids.numel()]).to(device)
    print(f"{len(train_texts)} train / {len(val_texts)} val fortunes; vocab {tok.get_vocab_size()}; "
          f"{train_ids.numel()} train / {val_ids.numel()} val tokens ({val_windows.shape[0]} windows); "
          f"tokenizer {time.time() - t0:.1f}s", flush=True)

    config = build_config(args, tok)
    model = LlamaForCausalLM(config).to(device)
    add_dropout(model, args.dropout)
    n_params = sum(p.numel() for p in model.parameters())  # tied embedding counted once
    print(f"model: {n_params / 1e6:.2f}M parameters, {n_params * 2 / 2**20:.1f} MiB in bf16", flush=True)

    log = {"versions": {"python": platform.python_version(), "torch": torch.__version__,
                        "transformers": transformers.__version__, "tokenizers": tokenizers.__version__},
           "device": torch.cuda.get_device_name(0), "params": n_params,
           "train_fortunes": len(train_texts), "val_fortunes": len(val_texts),
           "train_tokens": train_ids.numel(), "val_tokens": val_ids.numel(),
           # file names only: the log is committed next to the model
           "args": dict(vars(args), corpus=os.path.basename(args.corpus),
                        out=os.path.basename(os.path.normpath(args.out)))}
    log.update(train(args, model, train_ids, val_windows, device))
    log["val_loss"] = log["best_val_loss"]
    log["val_perplexity"] = round(math.exp(log["best_val_loss"]), 2)

    # Save: bfloat16 weights, tokenizer, generation defaults.
    os.makedirs(args.out, exist_ok=True)
    for name in ("model.safetensors", "model.safetensors.index.json"):
        if os.path.exists(os.path.join(args.out, name)):
            os.remove(os.path.join(args.out, name))
    model = model.to("cpu", dtype=torch.bfloat16).eval()
    model.generation_config = GenerationConfig(bos_token_id=bos, eos_token_id=eos)
    model.save_pretrained(args.out)
    if not os.path.exists(os.path.join(args.out, "generation_config.json")):
        model.generation_config.save_pretrained(args.out)
    tok.save(os.path.join(args.out, "tokenizer.json"))
    size = os.path.getsize(os.path.join(args.out, "model.safetensors"))
    print(f"saved {args.out}: model.safetensors {size / 2**20:.2f} MiB", flush=True)
    if size > MAX_MODEL_BYTES:
        raise SystemExit(f"model.safetensors is {size} bytes, over {MAX_MODEL_BYTES}")
    log["model_bytes"] = size

    make_reference(args.out, tok, log)
    with open(os.path.join(args.out, "train_log.json"), "w") as f:
        json.dump(log, f, indent=1)
        f.write("\n")
    with open(os.path.join(args.out, "config.json")) as f:
        print("--- config.json\n" + f.read().rstrip())
    with open(os.path.join(args.out, "generation_config.json")) as f:
        print("--- generation_config.json\n" + f.read().rstrip())
    print(f"validation loss {log['val_loss']:.4f} nats/token (perplexity {log['val_perplexity']})")


if __name__ == "__main__":
    sys.exit(main())
