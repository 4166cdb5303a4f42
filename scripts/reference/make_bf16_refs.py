#!/usr/bin/env python3
"""HF transformers' own bf16 error on each fixture's reference tokens (the G2 bound).

    python3 scripts/reference/make_bf16_refs.py DIR [DIR ...]     (on the GPU machine)

For each checkpoint DIR with a reference.json (fp32, made by make_fixtures.py), loads the
model in bfloat16 on CUDA (eager attention), teacher-forces prompt_ids + greedy_ids[:-1]
in one forward pass, and writes DIR/reference_bf16.json: max_abs_diff (the largest
|bf16 logit - fp32 reference logit| over every step), bound = 1.5 x that (what `kvrt
check --device cuda` accepts), the per-step errors and the reference's top-2 margins.
Exit status 1 if any DIR failed (the others are still written).
"""
import json, sys, os
import torch, transformers
from transformers import AutoModelForCausalLM

failed = 0
for d in sys.argv[1:]:
    try:
        ref = json.load(open(os.path.join(d, "reference.json")))
        prompt, greedy, steps = ref["prompt_ids"], ref["greedy_ids"], ref["step_logits"]
        model = AutoModelForCausalLM.from_pretrained(d, torch_dtype=torch.bfloat16,
                                                     attn_implementation="eager").cuda().eval()
        ids = torch.tensor([prompt + greedy[:-1]], device="cuda")
        with torch.inference_mode():
            logits = model(ids).logits[0].float().cpu()
        per_step, margins = [], []
        for i, row in enumerate(steps):
            r = torch.tensor(row)
            got = logits[len(prompt) - 1 + i]
            per_step.append(float((got - r).abs().max()))
            top = torch.topk(r, 2).values
            margins.append(float(top[0] - top[1]))
        worst = max(per_step)
        out = {"source": "HF transformers %s bf16 eager, teacher-forced on reference.json's tokens"
                         % transformers.__version__,
               "torch": torch.__version__, "device": torch.cuda.get_device_name(0),
               "max_abs_diff": worst, "bound": 1.5 * worst,
               "step_max_abs_diff": per_step, "top2_margin": margins}
        json.dump(out, open(os.path.join(d, "reference_bf16.json"), "w"), indent=1)
        print("%s: HF bf16 max |logit error| %.4g over %d steps" % (d, worst, len(steps)), flush=True)
    except Exception as e:  # report and go on with the others
        failed += 1
        print("%s: FAILED %r" % (d, e), flush=True)
sys.exit(1 if failed else 0)
