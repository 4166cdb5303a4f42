#!/usr/bin/env python3
"""Chat-template references from HF transformers (the GPU machine's python3 has it).

Renders every template in tests/fixtures/chat_templates for every message set there,
with and without the generation prompt (and, for templates that read it, with
enable_thinking false), with the Jinja environment transformers' apply_chat_template
uses (trim_blocks, lstrip_blocks, raise_exception, strftime_now, its tojson), and
writes one JSON file of cases that src/kvrt/jinja/test/differential_test.cpp compares
kvrt's rendering with, byte for byte (or both refusing):

    python3 scripts/reference/make_chat_template_refs.py \
        > tests/fixtures/chat_templates/transformers_reference.json

The context matches the test's: bos_token "<s>", eos_token "</s>", date_string
"15 Mar 2025", tools from the message file (null without).
"""
import glob
import json
import os
import sys

import transformers
from transformers.utils import chat_template_utils

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "chat_templates")


def compile_template(source):
    # The environment apply_chat_template renders with (transformers' own function).
    return chat_template_utils._compile_jinja_template(source)


def main():
    cases = []
    for template_path in sorted(glob.glob(os.path.join(FIXTURES, "*.jinja"))):
        name = os.path.splitext(os.path.basename(template_path))[0]
        with open(template_path, encoding="utf-8") as f:
            source = f.read()
        try:
            compiled = compile_template(source)
        except Exception as error:  # a template transformers cannot even compile
            print(f"{name}: does not compile: {error}", file=sys.stderr)
            continue
        extras = [{"date_string": "15 Mar 2025"}]
        if "enable_thinking" in source:
            extras.append({"date_string": "15 Mar 2025", "enable_thinking": False})
        for messages_path in sorted(glob.glob(os.path.join(FIXTURES, "messages", "*.json"))):
            with open(messages_path, encoding="utf-8") as f:
                data = json.load(f)
            messages_name = os.path.splitext(os.path.basename(messages_path))[0]
            for extra in extras:
                for add_generation_prompt in (False, True):
                    case = {
                        "template": name,
                        "messages": messages_name,
                        "add_generation_prompt": add_generation_prompt,
                        "extra": extra,
                    }
                    try:
                        case["text"] = compiled.render(
                            messages=data["messages"], tools=data.get("tools"),
                            add_generation_prompt=add_generation_prompt, bos_token="<s>",
                            eos_token="</s>", **extra)
                        case["ok"] = True
                    except Exception as error:
                        case["ok"] = False
                        case["error"] = f"{type(error).__name__}: {error}"
                    cases.append(case)
    json.dump({"transformers": transformers.__version__, "cases": cases}, sys.stdout,
              ensure_ascii=False, indent=1)
    sys.stdout.write("\n")
    print(f"{len(cases)} cases, {sum(c['ok'] for c in cases)} rendered", file=sys.stderr)


if __name__ == "__main__":
    main()
