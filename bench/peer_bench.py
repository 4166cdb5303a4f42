#!/usr/bin/env python3
"""The PyTorch speed peers for `kvrt bench`: the same tests, at batch 1, in PyTorch.

    python3 bench/peer_bench.py CHECKPOINT_DIR [-p 512] [-n 128] [-d 0,4096] [-r 3]
                                [--json OUT.json] [--peers hf,compile]
                                [--compile-mode max-autotune-no-cudagraphs]

CHECKPOINT_DIR is a Hugging Face checkpoint (e.g. the random-weight TinyLlama-1.1B /
Llama-3.2-1B shapes from kvrt_make_random_checkpoint); it is loaded in bfloat16 on
CUDA. At each cache depth d (the cache already holds d tokens of random ids):

  pp  prefill of p random tokens at positions d..d+p-1 (logits of the last position
      only, as generation does); CUDA events, median of -r repetitions after a warm-up;
  tg  n greedy decode steps at positions d..d+n-1 (argmax on the GPU, fed back as the
      next input; no host sync inside the loop); CUDA events around the n steps, median
      of -r repetitions after a warm-up; tokens/s = n / median.

This is what `kvrt bench` measures (tools/kvrt/cmd_bench.cpp), including the tg
bandwidth figure: bytes one step must read = every parameter once + the live K and V
rows of every layer at the mean live length d + (n+1)/2, divided by the step time, and
its share of a device-to-device copy (1 GiB, read + write counted, median of 10)
measured in the same process.

Peers:
  hf                   transformers' own loop: model(ids, past_key_values=DynamicCache,
                       use_cache=True) per step, argmax, eager PyTorch (default sdpa).
  torch-compile-graph  the strongest plain-PyTorch loop: a transformers StaticCache sized
                       for the test (d + max(p, n), rounded up to 64), one decode step
                       (forward + argmax) compiled with torch.compile(mode=
                       "max-autotune-no-cudagraphs") and captured by hand in one CUDA graph
                       together with the feedback (next token -> input, position + 1), so a
                       step is one graph replay. If the manual capture fails it falls back
                       to torch.compile(mode="reduce-overhead") (CUDA graphs by inductor);
                       the path used is printed. Its prefill is the eager model on the
                       static cache. Caveat: HF's static-cache attention reads all L cache
                       rows every step (masked), not just the live ones; the GB/s figure
                       still counts only live rows, like kvrt's.

If a peer fails it is reported and the others go on. On SIGTERM (e.g. `timeout`), the
results so far are printed (and written with --json) before exiting.
"""

import argparse
import inspect
import json
import os
import signal
import sys
import time
import traceback

T_START = time.time()


def log(msg):
    print(f"[{time.time() - T_START:7.1f}s] {msg}", flush=True)


try:
    import torch
except Exception as e:  # pragma: no cover
    print(f"peer_bench: cannot import torch: {e!r}", flush=True)
    sys.exit(2)
try:
    import transformers
    from transformers import AutoModelForCausalLM
except Exception as e:  # pragma: no cover
    print(f"peer_bench: cannot import transformers: {e!r}", flush=True)
    sys.exit(2)

DEVICE = "cuda"
DTYPE = torch.bfloat16

# Results so far (printed on SIGTERM too).
STATE = {"rows": [], "errors": [], "notes": [], "copy_gbs": 0.0, "args": None, "info": {},
         "printed": False}


# ------------------------------------------------------------------ helpers

def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if xs else 0.0


def event():
    return torch.cuda.Event(enable_timing=True)


def short(e, limit=400):
    text = f"{type(e).__name__}: {e}"
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + " ..."


def load_model(path, attn):
    errors = []
    for dtype_key in ("dtype", "torch_dtype"):
        for use_attn in ((True, False) if attn else (False,)):
            kwargs = {dtype_key: DTYPE}
            if use_attn:
                kwargs["attn_implementation"] = attn
            try:
                model = AutoModelForCausalLM.from_pretrained(path, **kwargs)
            except (TypeError, ValueError, ImportError) as e:
                errors.append(f"{kwargs}: {short(e, 200)}")
                continue
            if attn and not use_attn:
                log(f"warning: could not ask for attn_implementation={attn!r}: {errors[-1]}")
            model = model.to(DEVICE).eval()
            # Only if the dtype keyword was ignored (a blanket .to(dtype) would also cast
            # buffers HF keeps in float32, such as RoPE's inv_freq).
            if any(p.is_floating_point() and p.dtype != DTYPE for p in model.parameters()):
                log(f"note: parameters were not loaded as {DTYPE}; casting them")
                model = model.to(dtype=DTYPE)
            return model
    raise RuntimeError("from_pretrained failed: " + " | ".join(errors))


def model_info(model):
    cfg = model.config
    try:
        cfg = cfg.get_text_config()
    except Exception:
        pass
    layers = int(cfg.num_hidden_layers)
    heads = int(cfg.num_attention_heads)
    kv_heads = int(getattr(cfg, "num_key_value_heads", None) or heads)
    head_dim = getattr(cfg, "head_dim", None) or (int(cfg.hidden_size) // heads)
    seen, param_bytes, params = set(), 0, 0
    for p in model.parameters():  # a tied embedding is listed once
        if p.data_ptr() in seen:
            continue
        seen.add(p.data_ptr())
        param_bytes += p.numel() * p.element_size()
        params += p.numel()
    kv_elem = torch.tensor([], dtype=DTYPE).element_size()
    return {
        "layers": layers, "heads": heads, "kv_heads": kv_heads, "head_dim": int(head_dim),
        "vocab": int(cfg.vocab_size), "params": params, "param_bytes": param_bytes,
        "kv_bytes_per_token": 2 * layers * kv_heads * int(head_dim) * kv_elem,
        "max_positions": int(getattr(cfg, "max_position_embeddings", 0) or 0),
    }


def forward_kwargs(model):
    """Keyword arguments this version's forward takes for "last logits only"."""
    try:
        params = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return {}
    if "logits_to_keep" in params:
        return {"logits_to_keep": 1}
    if "num_logits_to_keep" in params:
        return {"num_logits_to_keep": 1}
    return {}


def copy_bandwidth():
    """Device-to-device copy of 1 GiB, read + write counted, GB/s, median of 10."""
    n = 1 << 30
    a = torch.empty(n, dtype=torch.uint8, device=DEVICE)
    b = torch.empty(n, dtype=torch.uint8, device=DEVICE)
    a.random_(0, 255)
    gbs = []
    for i in range(11):
        s, e = event(), event()
        s.record()
        b.copy_(a)
        e.record()
        e.synchronize()
        if i > 0:
            gbs.append(2.0 * n / (s.elapsed_time(e) * 1e-3) / 1e9)
    del a, b
    torch.cuda.empty_cache()
    return median(gbs)


def random_ids(gen, vocab, n):
    return torch.randint(0, vocab, (1, n), generator=gen, device="cpu").to(DEVICE)


def add_row(name, depth, pp_ms, tg_ms_total, args, info, extra=""):
    p, n = args.prompt, args.generate
    pp_tok_s = p / (pp_ms * 1e-3) if pp_ms and p > 0 else 0.0
    tg_tok_s = n / (tg_ms_total * 1e-3) if tg_ms_total and n > 0 else 0.0
    tg_ms = tg_ms_total / n if tg_ms_total and n > 0 else 0.0
    mean_live = depth + (n + 1) / 2.0
    step_bytes = info["param_bytes"] + info["kv_bytes_per_token"] * mean_live
    tg_gbs = step_bytes * tg_tok_s / 1e9
    copy = STATE["copy_gbs"]
    share = tg_gbs / copy if copy > 0 else 0.0
    row = {"name": name, "depth": depth, "pp_tok_s": pp_tok_s, "tg_tok_s": tg_tok_s,
           "tg_ms": tg_ms, "tg_gbs": tg_gbs, "tg_share_of_copy": share}
    STATE["rows"].append(row)
    log(f"peer {name} depth {depth}: pp{p} {pp_tok_s:.1f} t/s ({pp_ms:.3f} ms), "
        f"tg{n} {tg_tok_s:.1f} t/s ({tg_ms:.3f} ms/token), {tg_gbs:.0f} GB/s "
        f"({100 * share:.0f}% of copy){extra}")


# ------------------------------------------------------------------ peer: hf

def new_dynamic_cache(model):
    from transformers import DynamicCache
    try:
        return DynamicCache(config=model.config)
    except TypeError:
        return DynamicCache()


def cache_len(cache):
    try:
        n = cache.get_seq_length()
        return int(n)
    except Exception:
        return -1


def hf_fill(model, gen, info, depth, keep):
    cache = new_dynamic_cache(model)
    chunk = 2048
    for s in range(0, depth, chunk):
        ids = random_ids(gen, info["vocab"], min(chunk, depth - s))
        model(input_ids=ids, past_key_values=cache, use_cache=True, **keep)
    return cache


def hf_at_depth(model, gen, info, depth, keep, cache):
    """A DynamicCache holding exactly `depth` tokens: `cache` cropped, else refilled."""
    if cache is not None and depth > 0 and hasattr(cache, "crop"):
        try:
            cache.crop(depth)
            if cache_len(cache) == depth:
                return cache
        except Exception as e:
            log(f"hf: DynamicCache.crop failed ({short(e, 200)}); refilling instead")
    return hf_fill(model, gen, info, depth, keep)


def run_hf(model, args, info, depth):
    gen = torch.Generator().manual_seed(1234 + depth)
    keep = forward_kwargs(model)
    cache = hf_fill(model, gen, info, depth, keep)
    torch.cuda.synchronize()
    prompt = random_ids(gen, info["vocab"], args.prompt) if args.prompt > 0 else None
    tok0 = random_ids(gen, info["vocab"], 1)
    pp_ms, tg_ms = [], []
    for rep in range(args.reps + 1):  # rep 0 warms up
        if prompt is not None:
            cache = hf_at_depth(model, gen, info, depth, keep, cache)
            torch.cuda.synchronize()
            s, e = event(), event()
            s.record()
            out = model(input_ids=prompt, past_key_values=cache, use_cache=True, **keep)
            out.logits[:, -1:].argmax(-1)
            e.record()
            e.synchronize()
            cache = out.past_key_values if out.past_key_values is not None else cache
            if rep > 0:
                pp_ms.append(s.elapsed_time(e))
        if args.generate > 0:
            cache = hf_at_depth(model, gen, info, depth, keep, cache)
            torch.cuda.synchronize()
            tok = tok0.clone()
            s, e = event(), event()
            s.record()
            for _ in range(args.generate):
                out = model(input_ids=tok, past_key_values=cache, use_cache=True)
                cache = out.past_key_values if out.past_key_values is not None else cache
                tok = out.logits[:, -1:].argmax(-1)
            e.record()
            e.synchronize()
            if rep > 0:
                tg_ms.append(s.elapsed_time(e))
    del cache
    torch.cuda.empty_cache()
    add_row("hf", depth, median(pp_ms), median(tg_ms), args, info)


# ------------------------------------------------------ peer: torch-compile-graph

def new_static_cache(model, max_len, info):
    from transformers import StaticCache
    attempts = [
        ("StaticCache(config=, max_cache_len=)",
         lambda: StaticCache(config=model.config, max_cache_len=max_len)),
        ("StaticCache(config=, max_batch_size=1, max_cache_len=, device=, dtype=)",
         lambda: StaticCache(config=model.config, max_batch_size=1, max_cache_len=max_len,
                             device=DEVICE, dtype=DTYPE)),
        ("StaticCache(config=, batch_size=1, max_cache_len=, device=, dtype=)",
         lambda: StaticCache(config=model.config, batch_size=1, max_cache_len=max_len,
                             device=DEVICE, dtype=DTYPE)),
        ("StaticCache(config, 1, max_cache_len, device, dtype)",
         lambda: StaticCache(model.config, 1, max_len, DEVICE, DTYPE)),
    ]
    errors = []
    for what, make in attempts:
        try:
            cache = make()
            break
        except Exception as e:
            errors.append(f"{what}: {short(e, 200)}")
    else:
        raise RuntimeError("cannot build a StaticCache: " + " | ".join(errors))
    # Allocate the cache tensors now (5.x allocates lazily on the first update).
    if hasattr(cache, "early_initialization"):
        try:
            cache.early_initialization(batch_size=1, num_heads=info["kv_heads"],
                                       head_dim=info["head_dim"], dtype=DTYPE,
                                       device=torch.device(DEVICE))
        except Exception as e:
            log(f"compile: StaticCache.early_initialization failed ({short(e, 200)}); "
                "relying on lazy initialization")
    return cache


def takes_cache_position(model):
    """Whether forward still takes `cache_position` (transformers 5.x dropped it: the
    StaticCache then keeps its own write position, `cumulative_length`)."""
    try:
        return "cache_position" in inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return True


def set_cache_position(cache, pos):
    """Points a StaticCache's own write position (5.x: a per-layer `cumulative_length`,
    a device tensor updated in place) at `pos`, keeping tensors' addresses."""
    objs = [cache] + list(getattr(cache, "layers", None) or [])
    for obj in objs:
        for name, value in list(vars(obj).items()):
            if "cumulative_length" not in name and name != "_seen_tokens":
                continue
            if torch.is_tensor(value):
                value.fill_(pos)
            elif isinstance(value, int) and not isinstance(value, bool):
                setattr(obj, name, pos)


def static_forward(model, cache, ids, start, keep):
    """Eager forward of `ids` at positions start.. on a StaticCache."""
    set_cache_position(cache, start)
    pos = torch.arange(start, start + ids.shape[1], device=DEVICE)
    extra = {"cache_position": pos} if takes_cache_position(model) else {}
    return model(input_ids=ids, position_ids=pos.unsqueeze(0), past_key_values=cache,
                 use_cache=True, **keep, **extra)


def set_dynamo_limits():
    try:
        import torch._dynamo as dynamo
        for name in ("recompile_limit", "cache_size_limit"):
            if hasattr(dynamo.config, name):
                setattr(dynamo.config, name, max(64, getattr(dynamo.config, name)))
        for name in ("accumulated_recompile_limit", "accumulated_cache_size_limit"):
            if hasattr(dynamo.config, name):
                setattr(dynamo.config, name, max(1024, getattr(dynamo.config, name)))
    except Exception as e:
        log(f"compile: could not raise dynamo's recompile limit: {short(e, 200)}")


class CompilePeer:
    """One compiled decode step per cache, replayed from a CUDA graph."""

    def __init__(self, model, args, info):
        self.model, self.args, self.info = model, args, info
        self.holder = {"cache": None}
        self.path = None           # "manual" or "reduce-overhead", once one has worked
        self.compiled = None       # mode=args.compile_mode
        self.compiled_ro = None    # mode="reduce-overhead"
        self.failed = False
        model_ = model
        holder = self.holder
        with_cache_position = takes_cache_position(model)
        log(f"compile: forward takes cache_position: {with_cache_position}")

        def decode_one(input_ids, cache_position):
            extra = {"cache_position": cache_position} if with_cache_position else {}
            out = model_(input_ids=input_ids, position_ids=cache_position.unsqueeze(0),
                         past_key_values=holder["cache"], use_cache=True, **extra)
            return out.logits[:, -1, :].argmax(dim=-1, keepdim=True)

        self.decode_one = decode_one

    def compiled_fn(self, mode):
        if mode == "reduce-overhead":
            if self.compiled_ro is None:
                self.compiled_ro = torch.compile(self.decode_one, mode="reduce-overhead",
                                                 fullgraph=False, dynamic=False)
            return self.compiled_ro
        if self.compiled is None:
            self.compiled = torch.compile(self.decode_one, mode=mode, fullgraph=False,
                                          dynamic=False)
        return self.compiled

    # -- manual capture of the max-autotune-no-cudagraphs step --------------------
    def setup_manual(self, depth, tok0):
        fn = self.compiled_fn(self.args.compile_mode)
        ids = tok0.clone()
        pos = torch.tensor([depth], dtype=torch.long, device=DEVICE)

        def step():
            nxt = fn(ids, pos)
            ids.copy_(nxt)
            pos.add_(1)

        def reset(token):
            ids.copy_(token)
            pos.fill_(depth)
            set_cache_position(self.holder["cache"], depth)

        t0 = time.time()
        reset(tok0)
        for _ in range(3):  # compiles (autotunes) on the first call
            step()
        torch.cuda.synchronize()
        log(f"compile: {self.args.compile_mode} step ready in {time.time() - t0:.1f} s")
        reset(tok0)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                step()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        reset(tok0)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            step()
        torch.cuda.synchronize()

        def run(steps):
            for _ in range(steps):
                graph.replay()

        return {"graph": graph, "reset": reset, "run": run, "ids": ids}

    # -- torch.compile(mode="reduce-overhead") ------------------------------------
    def setup_reduce_overhead(self, depth, tok0):
        fn = self.compiled_fn("reduce-overhead")
        ids = tok0.clone()
        pos = torch.tensor([depth], dtype=torch.long, device=DEVICE)
        for t in (ids, pos):
            try:
                torch._dynamo.mark_static_address(t)
            except Exception:
                pass
        mark = getattr(getattr(torch, "compiler", None), "cudagraph_mark_step_begin", None)

        def step():
            if mark is not None:
                mark()
            nxt = fn(ids, pos)
            ids.copy_(nxt)
            pos.add_(1)

        def reset(token):
            ids.copy_(token)
            pos.fill_(depth)
            set_cache_position(self.holder["cache"], depth)

        t0 = time.time()
        reset(tok0)
        for _ in range(4):  # compile, warm-up, record, replay
            step()
        torch.cuda.synchronize()
        log(f"compile: reduce-overhead step ready in {time.time() - t0:.1f} s")

        def run(steps):
            for _ in range(steps):
                step()

        return {"graph": None, "reset": reset, "run": run, "ids": ids}

    def check(self, runner, depth, tok0, keep):
        """One graph step against one eager step on the same token and position."""
        try:
            runner["reset"](tok0)
            runner["run"](1)
            graph_tok = int(runner["ids"].view(-1)[0])
            out = static_forward(self.model, self.holder["cache"], tok0, depth, keep)
            logits = out.logits[0, -1].float()
            eager_tok = int(logits.argmax())
            finite = bool(torch.isfinite(logits).all())
            note = "agree" if graph_tok == eager_tok else f"differ ({graph_tok} vs {eager_tok})"
            log(f"compile: check at depth {depth}: graph and eager next tokens {note}"
                f"{'' if finite else '; logits are not finite (random weights?)'}")
        except Exception as e:
            log(f"compile: check at depth {depth} failed: {short(e, 200)}")

    def run(self, depth):
        args, info, model = self.args, self.info, self.model
        keep = forward_kwargs(model)
        gen = torch.Generator().manual_seed(4321 + depth)
        max_len = depth + max(args.prompt, args.generate, 1)
        max_len = (max_len + 63) // 64 * 64
        if info["max_positions"] and depth + max(args.prompt, args.generate) > info["max_positions"]:
            log(f"compile: warning: depth {depth} + {max(args.prompt, args.generate)} exceeds "
                f"max_position_embeddings {info['max_positions']}")
        self.holder["cache"] = None
        torch.cuda.empty_cache()
        cache = new_static_cache(model, max_len, info)
        self.holder["cache"] = cache
        for s in range(0, depth, 512):  # fill the first `depth` positions
            ids = random_ids(gen, info["vocab"], min(512, depth - s))
            static_forward(model, cache, ids, s, keep)
        torch.cuda.synchronize()

        pp_ms = []
        if args.prompt > 0:
            prompt = random_ids(gen, info["vocab"], args.prompt)
            for rep in range(args.reps + 1):
                s, e = event(), event()
                s.record()
                out = static_forward(model, cache, prompt, depth, keep)
                out.logits[:, -1:].argmax(-1)
                e.record()
                e.synchronize()
                if rep > 0:
                    pp_ms.append(s.elapsed_time(e))
            del out

        tg_ms, used = [], None
        if args.generate > 0:
            tok0 = random_ids(gen, info["vocab"], 1)
            runner, errors, used = None, [], None
            paths = ["reduce-overhead"] if self.path == "reduce-overhead" else ["manual", "reduce-overhead"]
            for path in paths:
                try:
                    if path == "manual":
                        runner = self.setup_manual(depth, tok0)
                    else:
                        runner = self.setup_reduce_overhead(depth, tok0)
                    used = path
                    if self.path != path:
                        self.path = path
                        what = (f"torch.compile(mode={args.compile_mode!r}) step captured by "
                                "hand in one torch.cuda.CUDAGraph (feedback inside the graph)"
                                if path == "manual" else
                                "torch.compile(mode='reduce-overhead') (inductor's CUDA graphs)"
                                " - the manual capture failed")
                        log(f"compile: depth {depth}: using {what}")
                        STATE["notes"].append(f"torch-compile-graph from depth {depth}: {what}")
                    break
                except Exception as e:
                    errors.append(f"{path}: {short(e)}")
                    log(f"compile: {path} path failed at depth {depth}: {short(e)}")
                    if os.environ.get("PEER_BENCH_TRACEBACK"):
                        traceback.print_exc(file=sys.stdout)
                    runner = None
                    try:
                        torch.cuda.synchronize()
                    except Exception:
                        pass
                    if path == "manual":
                        try:
                            torch._dynamo.reset()
                        except Exception:
                            pass
                        self.compiled = None
            if runner is None:
                raise RuntimeError("no compiled decode path worked: " + " | ".join(errors))
            self.check(runner, depth, tok0, keep)
            for rep in range(args.reps + 1):
                runner["reset"](tok0)
                torch.cuda.synchronize()
                s, e = event(), event()
                s.record()
                runner["run"](args.generate)
                e.record()
                e.synchronize()
                if rep > 0:
                    tg_ms.append(s.elapsed_time(e))
            runner = None
        self.holder["cache"] = None
        del cache
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        add_row("torch-compile-graph", depth, median(pp_ms), median(tg_ms), args, info,
                f" [{used or 'no decode'}]")


# ------------------------------------------------------------------ report

def report():
    if STATE["printed"]:
        return
    STATE["printed"] = True
    args, info = STATE["args"], STATE["info"]
    if args is None:
        return
    print(flush=True)
    for note in STATE["notes"]:
        print(f"note: {note}", flush=True)
    for err in STATE["errors"]:
        print(f"error: {err}", flush=True)
    p, n = args.prompt, args.generate
    print(f"model {args.checkpoint} ({info.get('params', 0) / 1e9:.3f} B params, "
          f"{info.get('param_bytes', 0) / 1e9:.3f} GB), {info.get('device', '?')}, "
          f"torch {torch.__version__}, transformers {transformers.__version__}, "
          f"copy {STATE['copy_gbs']:.0f} GB/s", flush=True)
    print(f"| peer | depth | pp{p} t/s | tg{n} t/s | tg ms/token | tg GB/s | share of copy |",
          flush=True)
    print("|---|---|---|---|---|---|---|", flush=True)
    for r in STATE["rows"]:
        print(f"| {r['name']} | {r['depth']} | {r['pp_tok_s']:.1f} | {r['tg_tok_s']:.1f} | "
              f"{r['tg_ms']:.3f} | {r['tg_gbs']:.0f} | {100 * r['tg_share_of_copy']:.0f}% |",
              flush=True)
    if args.json:
        out = {"peers": STATE["rows"], "copy_gbs": STATE["copy_gbs"],
               "model": args.checkpoint, "device": info.get("device"),
               "torch": torch.__version__, "transformers": transformers.__version__,
               "prompt": p, "generate": n, "repetitions": args.reps,
               "param_bytes": info.get("param_bytes"),
               "kv_bytes_per_token": info.get("kv_bytes_per_token"),
               "notes": STATE["notes"], "errors": STATE["errors"]}
        try:
            tmp = args.json + ".tmp"
            with open(tmp, "w") as f:
                json.dump(out, f, indent=2)
                f.write("\n")
            os.replace(tmp, args.json)
            print(f"wrote {args.json}", flush=True)
        except Exception as e:
            print(f"error: cannot write {args.json}: {short(e)}", flush=True)


def cuda_ok():
    """False once the CUDA context is unusable (e.g. after a device-side assert)."""
    try:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        return True
    except Exception as e:
        log(f"CUDA is unusable now: {short(e, 200)}")
        return False


def on_sigterm(signum, frame):
    STATE["errors"].append(f"stopped by signal {signum} after {time.time() - T_START:.0f} s; "
                           "partial results")
    report()
    os._exit(124)


def main():
    parser = argparse.ArgumentParser(
        description="PyTorch peers (HF eager, torch.compile + CUDA graph) for kvrt bench")
    parser.add_argument("checkpoint", help="HF checkpoint directory")
    parser.add_argument("-p", "--n-prompt", dest="prompt", type=int, default=512)
    parser.add_argument("-n", "--n-gen", dest="generate", type=int, default=128)
    parser.add_argument("-d", "--n-depth", dest="depths", default="0,4096")
    parser.add_argument("-r", "--repetitions", dest="reps", type=int, default=3)
    parser.add_argument("--json", default=None, help="write the results here")
    parser.add_argument("--peers", default="hf,compile",
                        help="comma-separated: hf, compile (default both)")
    parser.add_argument("--compile-mode", default="max-autotune-no-cudagraphs",
                        help="torch.compile mode of the manually captured step")
    parser.add_argument("--attn", default="sdpa",
                        help="attn_implementation for from_pretrained ('' for the default)")
    args = parser.parse_args()
    try:
        depths = [int(x) for x in args.depths.split(",") if x.strip() != ""]
    except ValueError:
        parser.error(f"-d: {args.depths!r} is not a comma-separated list of depths")
    if any(d < 0 for d in depths) or args.prompt < 0 or args.generate < 0 or args.reps < 1:
        parser.error("depths, -p and -n must be >= 0 and -r >= 1")
    peers = [x.strip() for x in args.peers.split(",") if x.strip()]
    for x in peers:
        if x not in ("hf", "compile"):
            parser.error(f"--peers: unknown peer {x!r}")
    STATE["args"] = args
    signal.signal(signal.SIGTERM, on_sigterm)

    try:
        transformers.logging.set_verbosity_error()
        transformers.utils.logging.disable_progress_bar()
    except Exception:
        pass
    if not torch.cuda.is_available():
        print("peer_bench: FAILED: CUDA is not available to torch", flush=True)
        return 1
    torch.manual_seed(0)
    set_dynamo_limits()
    name = torch.cuda.get_device_name(0)
    log(f"torch {torch.__version__}, transformers {transformers.__version__}, {name}")

    t0 = time.time()
    try:
        model = load_model(args.checkpoint, args.attn)
    except Exception as e:
        print(f"peer_bench: FAILED to load {args.checkpoint}: {short(e, 2000)}", flush=True)
        traceback.print_exc(file=sys.stdout)
        return 1
    info = model_info(model)
    info["device"] = name
    STATE["info"] = info
    impl = getattr(model.config, "_attn_implementation", None)
    log(f"loaded {args.checkpoint} in {time.time() - t0:.1f} s: {info['params'] / 1e9:.3f} B "
        f"params ({info['param_bytes'] / 1e9:.3f} GB), {info['layers']} layers, "
        f"{info['kv_heads']} KV heads x {info['head_dim']}, vocab {info['vocab']}, "
        f"attention {impl}")

    STATE["copy_gbs"] = copy_bandwidth()
    log(f"device-to-device copy: {STATE['copy_gbs']:.0f} GB/s (read + write)")

    failed = False
    with torch.inference_mode():
        if "hf" in peers:
            for d in depths:
                log(f"hf: depth {d}")
                try:
                    run_hf(model, args, info, d)
                except Exception as e:
                    failed = True
                    STATE["errors"].append(f"hf depth {d}: {short(e)}")
                    log(f"hf: depth {d} FAILED: {short(e)}")
                    traceback.print_exc(file=sys.stdout)
                    sys.stdout.flush()
                    if not cuda_ok():
                        STATE["errors"].append("CUDA context lost; stopping")
                        return 1
        if "compile" in peers:
            try:
                peer = CompilePeer(model, args, info)
            except Exception as e:
                peer = None
                failed = True
                STATE["errors"].append(f"torch-compile-graph: {short(e)}")
                log(f"compile: FAILED: {short(e)}")
            # inference_mode first; if nothing compiles under it, once more under no_grad
            # (what transformers' generate uses) before giving up on this peer.
            grad_mode = "inference_mode"
            for d in depths if peer is not None else []:
                while True:
                    log(f"compile: depth {d} ({grad_mode})")
                    try:
                        if grad_mode == "inference_mode":
                            peer.run(d)
                        else:
                            with torch.inference_mode(False), torch.no_grad():
                                peer.run(d)
                        break
                    except Exception as e:
                        log(f"compile: depth {d} FAILED ({grad_mode}): {short(e)}")
                        traceback.print_exc(file=sys.stdout)
                        sys.stdout.flush()
                        peer.holder["cache"] = None
                        if not cuda_ok():
                            STATE["errors"].append(f"torch-compile-graph depth {d}: {short(e)} "
                                                   "(CUDA context lost; stopping)")
                            return 1
                        if peer.path is None and grad_mode == "inference_mode":
                            grad_mode = "no_grad"
                            try:
                                torch._dynamo.reset()
                            except Exception:
                                pass
                            peer.compiled = peer.compiled_ro = None
                            STATE["notes"].append("torch-compile-graph: retried under "
                                                  "torch.no_grad() after failing under "
                                                  "torch.inference_mode()")
                            continue
                        failed = True
                        STATE["errors"].append(f"torch-compile-graph depth {d}: {short(e)}")
                        break
                if peer.path is None and args.generate > 0:
                    log("compile: no decode path has worked; skipping its other depths")
                    break
    log("done")
    report()
    return 1 if failed and not STATE["rows"] else 0


if __name__ == "__main__":
    try:
        rc = main()
    except BaseException as e:  # still show what was measured
        if not isinstance(e, SystemExit):
            STATE["errors"].append(f"aborted: {short(e)}")
            traceback.print_exc(file=sys.stdout)
        rc = e.code if isinstance(e, SystemExit) else 1
    finally:
        try:
            report()
        except Exception:
            pass
    sys.exit(rc)
