#!/usr/bin/env python3
"""Mutation campaign over every file kvrt reads: program files, checkpoints
(config.json, generation_config.json, the safetensors header) and tokenizers.

Each mutant is made from a real file of the repository (a fixture checkpoint, the
bundled model's tokenizer, a program exported from a fixture) by one of:
  - structural byte flips and truncations of the binary or text;
  - JSON-level edits (a key removed or added, a value replaced by an edge value, an
    array element duplicated or dropped) re-packed with valid offsets, so that the
    mutant gets past the framing and reaches the semantic checks.
Each mutant is run through `kvrt` (inspect / run / export / tokenize) with a timeout
and classified:
  refused  exit 1 or 2 with a one-line message naming the file or the field;
  unnamed  refused, but the message names neither (counted as a finding);
  ran      exit 0 (the mutation kept the input valid, or did not matter);
  crash    killed by a signal, or a sanitizer report on stderr;
  hang     the timeout expired.
Crashes, hangs and unnamed refusals are kept under --out for a regression test.

    scripts/mutate/campaign.py --kvrt build-fuzz/all/kvrt --per-kind 40 --timeout 30

Use a sanitizer build of kvrt (fuzz/run_fuzzers.sh builds one at build-fuzz/all/kvrt)
to catch memory errors that do not crash. Exit status 1 when any mutant crashed, hung
or was refused without naming what it refused.
"""
import argparse
import concurrent.futures
import copy
import json
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
EDGE_VALUES = [None, True, -1, 0, 1, 2**31, 2**32 + 1, 2**63 - 1, 2**64 - 1, 1e308, -1e308,
               1e-320, 0.5, "", "x" * 300, "\u00e9\ud7ff", [], {}, [1, 2], {"a": 1}]
SANITIZER = re.compile(r"ERROR: (Address|Leak|Thread|Memory)Sanitizer|runtime error:|"
                       r"terminate called|Assertion .* failed")


# --- JSON edits -------------------------------------------------------------------------

def json_paths(value, path=(), limit=4000):
    """Every (path, value) in the document, breadth-limited for huge vocabularies."""
    out = [(path, value)]
    if isinstance(value, dict):
        items = list(value.items())
    elif isinstance(value, list):
        items = list(enumerate(value))
    else:
        return out
    if len(items) > 64:  # a vocabulary or weight table: a sample of it
        items = random.sample(items, 64)
    for key, child in items:
        if len(out) >= limit:
            break
        out.extend(json_paths(child, path + (key,), limit - len(out)))
    return out


def json_edit(document, rng):
    """One random edit of a copy of `document`, and a description of it."""
    doc = copy.deepcopy(document)
    paths = json_paths(doc)
    path, value = rng.choice(paths[1:] if len(paths) > 1 else paths)
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    key = path[-1] if path else None
    where = "/".join(str(p) for p in path) or "(root)"
    choice = rng.random()
    if key is not None and choice < 0.25:
        if isinstance(parent, dict):
            del parent[key]
        else:
            parent.pop(key)
        return doc, f"remove {where}"
    if isinstance(value, dict) and choice < 0.35:
        value["unknown_" + str(rng.randrange(100))] = rng.choice(EDGE_VALUES)
        return doc, f"add a key to {where}"
    if isinstance(value, list) and value and choice < 0.45:
        if rng.random() < 0.5:
            value.append(copy.deepcopy(rng.choice(value)))
            return doc, f"duplicate an element of {where}"
        value.pop(rng.randrange(len(value)))
        return doc, f"drop an element of {where}"
    if key is None:
        return doc, "unchanged"
    new = rng.choice(EDGE_VALUES)
    if isinstance(value, int) and not isinstance(value, bool) and rng.random() < 0.5:
        new = rng.choice([value + 1, value - 1, value * 2, -value, value + 2**32])
    parent[key] = new
    return doc, f"set {where} = {json.dumps(new)[:40]}"


# --- containers -------------------------------------------------------------------------

def program_parts(data):
    meta_at, meta_size, blobs_at, blobs_size, weights_at, weights_size = struct.unpack_from(
        "<6Q", data, 16)
    metadata = json.loads(data[meta_at:meta_at + meta_size])
    return metadata, data[blobs_at:blobs_at + blobs_size], data[weights_at:weights_at + weights_size]


def program_pack(header, metadata, blobs, weights):
    """A program file with `metadata`, the segments moved to keep their alignment."""
    text = json.dumps(metadata).encode()
    blobs_at = (64 + len(text) + 63) // 64 * 64
    weights_at = (blobs_at + len(blobs) + 4095) // 4096 * 4096
    out = bytearray(weights_at + len(weights))
    out[:64] = header[:64]
    out[64:64 + len(text)] = text
    out[blobs_at:blobs_at + len(blobs)] = blobs
    out[weights_at:] = weights
    struct.pack_into("<6Q", out, 16, 64, len(text), blobs_at, len(blobs), weights_at,
                     len(weights))
    return bytes(out)


def safetensors_parts(data):
    (length,) = struct.unpack_from("<Q", data, 0)
    return json.loads(data[8:8 + length]), data[8 + length:]


def safetensors_pack(header, body):
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + body


def flip_bytes(data, rng, region=None):
    out = bytearray(data)
    lo, hi = region or (0, len(out))
    hi = min(hi, len(out))
    for _ in range(rng.randint(1, 4)):
        if hi <= lo:
            break
        at = rng.randrange(lo, hi)
        out[at] ^= 1 << rng.randrange(8) if rng.random() < 0.7 else rng.randrange(1, 256)
    return bytes(out)


def truncate(data, rng):
    return data[:rng.randrange(0, max(1, len(data)))]


# --- the kinds of mutants -----------------------------------------------------------------

class Kind:
    """Makes mutants of one kind into a directory and says how to run them."""

    def __init__(self, name, make, commands):
        self.name, self.make, self.commands = name, make, commands


def program_kinds(seed_program):
    data = seed_program.read_bytes()
    metadata, blobs, weights = program_parts(data)
    (meta_size,) = struct.unpack_from("<Q", data, 24)

    def write(dir_, content):
        path = dir_ / "m.kvrt"
        path.write_bytes(content)
        return path

    def flip(dir_, rng):
        return write(dir_, flip_bytes(data, rng, (0, 64 + meta_size))), "byte flips"

    def cut(dir_, rng):
        return write(dir_, truncate(data, rng)), "truncation"

    def header(dir_, rng):
        out = bytearray(data)
        at = rng.choice([8, 10, 12]) if rng.random() < 0.3 else rng.randrange(16, 64, 8)
        width = 2 if at in (8, 10) else 4 if at == 12 else 8
        value = rng.choice([0, 1, 63, 64, 4096, len(data), 2**(8 * width) - 1,
                            2**(8 * width - 1), rng.randrange(2**(8 * width))])
        value %= 2**(8 * width)  # len(data) does not fit a u16 field
        out[at:at + width] = value.to_bytes(width, "little")
        return write(dir_, bytes(out)), f"header field at {at} = {value}"

    def edit(dir_, rng):
        doc, what = json_edit(metadata, rng)
        return write(dir_, program_pack(data, doc, blobs, weights)), what

    def run(path):
        return [["inspect", str(path)],
                ["run", str(path), "--device", "cpu", "--prompt-ids", "1,2,3", "-n", "2",
                 "--threads", "1"]]

    return [Kind("program/byte-flip", flip, run), Kind("program/truncate", cut, run),
            Kind("program/header", header, run), Kind("program/json-edit", edit, run)]


def checkpoint_kinds(seed_dir):
    config = json.loads((seed_dir / "config.json").read_text())
    generation = json.loads((seed_dir / "generation_config.json").read_text())
    tensors = (seed_dir / "model.safetensors").read_bytes()
    st_header, st_body = safetensors_parts(tensors)
    (st_len,) = struct.unpack_from("<Q", tensors, 0)

    def copy_dir(dir_):
        target = dir_ / "ckpt"
        shutil.copytree(seed_dir, target)
        return target

    def config_edit(dir_, rng):
        target = copy_dir(dir_)
        doc, what = json_edit(config, rng)
        (target / "config.json").write_text(json.dumps(doc))
        return target, "config.json: " + what

    def generation_edit(dir_, rng):
        target = copy_dir(dir_)
        doc, what = json_edit(generation, rng)
        (target / "generation_config.json").write_text(json.dumps(doc))
        return target, "generation_config.json: " + what

    def header_edit(dir_, rng):
        target = copy_dir(dir_)
        doc, what = json_edit(st_header, rng)
        (target / "model.safetensors").write_bytes(safetensors_pack(doc, st_body))
        return target, "safetensors header: " + what

    def st_flip(dir_, rng):
        target = copy_dir(dir_)
        (target / "model.safetensors").write_bytes(flip_bytes(tensors, rng, (0, 8 + st_len)))
        return target, "safetensors byte flips"

    def st_cut(dir_, rng):
        target = copy_dir(dir_)
        (target / "model.safetensors").write_bytes(truncate(tensors, rng))
        return target, "safetensors truncation"

    def config_flip(dir_, rng):
        target = copy_dir(dir_)
        text = (seed_dir / "config.json").read_bytes()
        (target / "config.json").write_bytes(
            flip_bytes(text, rng) if rng.random() < 0.7 else truncate(text, rng))
        return target, "config.json bytes"

    def run(path):
        out = path.parent / "out.kvrt"
        return [["export", str(path), "-o", str(out), "--max-seq", "16", "-q"],
                ["run", str(out), "--device", "cpu", "--prompt-ids", "1,2,3", "-n", "2",
                 "--threads", "1", "--if-exists"]]

    return [Kind("checkpoint/config-edit", config_edit, run),
            Kind("checkpoint/generation-edit", generation_edit, run),
            Kind("checkpoint/config-bytes", config_flip, run),
            Kind("checkpoint/safetensors-header-edit", header_edit, run),
            Kind("checkpoint/safetensors-byte-flip", st_flip, run),
            Kind("checkpoint/safetensors-truncate", st_cut, run)]


def tokenizer_kinds(seed_file):
    text = seed_file.read_bytes()
    document = json.loads(text)

    def write(dir_, content):
        target = dir_ / "tok"
        target.mkdir()
        (target / "tokenizer.json").write_bytes(content)
        return target

    def edit(dir_, rng):
        doc, what = json_edit(document, rng)
        return write(dir_, json.dumps(doc).encode()), what

    def flip(dir_, rng):
        return write(dir_, flip_bytes(text, rng)), "byte flips"

    def cut(dir_, rng):
        return write(dir_, truncate(text, rng)), "truncation"

    def run(path):
        return [["tokenize", str(path), "--text", "Hello world, 12 <s> \u00fcn\u00ef \U0001F600\n"],
                ["tokenize", str(path), "--decode", "0,1,2,3,100,250"]]

    return [Kind("tokenizer/json-edit", edit, run), Kind("tokenizer/byte-flip", flip, run),
            Kind("tokenizer/truncate", cut, run)]


# --- running --------------------------------------------------------------------------------

def named(message, path):
    """Whether a refusal names the file or a field."""
    return (path.name in message or str(path) in message or "field" in message
            or re.search(r"[A-Za-z_]+(\[\d+\])?[.:][ A-Za-z_\[]", message) is not None
            or re.search(r"'[^']+'", message) is not None)


def classify(kvrt, commands, path, timeout):
    """Runs the commands in order (stopping at the first refusal) and classifies."""
    ran = False
    for args in commands:
        if "--if-exists" in args:
            args = [a for a in args if a != "--if-exists"]
            if not Path(args[1]).exists():
                continue
        try:
            proc = subprocess.run([kvrt] + args, capture_output=True, timeout=timeout,
                                  env=dict(os.environ, ASAN_OPTIONS="detect_leaks=1",
                                           UBSAN_OPTIONS="halt_on_error=1"))
        except subprocess.TimeoutExpired:
            return "hang", " ".join(args[:1])
        err = proc.stderr.decode(errors="replace")
        if proc.returncode < 0 or proc.returncode > 128 or SANITIZER.search(err):
            return "crash", (f"{args[0]}: rc {proc.returncode}: " + err[-800:]).strip()
        if proc.returncode != 0:
            # Progress and the device choice are information, not the refusal.
            lines = [line for line in err.strip().splitlines()
                     if line and not line.startswith(("device: ", "exporting weights"))]
            message = lines[-1] if lines else ""
            if len(lines) != 1 or not named(message, path):
                return "unnamed", f"{args[0]}: {err.strip()[:300]}"
            return "refused", message[:200]
        ran = True
    return ("ran" if ran else "refused"), ""


def one_mutant(kind, index, seed, kvrt, timeout, out_dir):
    rng = random.Random(f"{seed}/{kind.name}/{index}")
    work = Path(tempfile.mkdtemp(prefix="kvrt_mutant_"))
    try:
        path, what = kind.make(work, rng)
        verdict, detail = classify(kvrt, kind.commands(path), path, timeout)
        if verdict in ("crash", "hang", "unnamed") and out_dir is not None:
            keep = out_dir / f"{kind.name.replace('/', '_')}_{index}"
            shutil.rmtree(keep, ignore_errors=True)
            shutil.copytree(work, keep, symlinks=True)
            (keep / "WHAT").write_text(f"{kind.name}: {what}\n{detail}\n")
        return kind.name, verdict, what, detail
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kvrt", default=str(ROOT / "build" / "kvrt"))
    parser.add_argument("--per-kind", type=int, default=20, help="mutants of each kind")
    parser.add_argument("--timeout", type=float, default=30)
    parser.add_argument("--seed", default="1")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", default="mutate-findings", help="where findings are kept")
    parser.add_argument("--kinds", default="", help="only kinds whose name contains this")
    args = parser.parse_args()
    kvrt = str(Path(args.kvrt).resolve())
    if not os.access(kvrt, os.X_OK):
        sys.exit(f"campaign: no kvrt binary at {kvrt} (build it, or pass --kvrt)")
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)

    seeds = Path(tempfile.mkdtemp(prefix="kvrt_mutate_seeds_"))
    try:
        program = seeds / "seed.kvrt"
        subprocess.run([kvrt, "export", str(FIXTURES / "llama_gqa"), "-o", str(program),
                        "--max-seq", "16", "-q"], check=True, capture_output=True)
        kinds = (program_kinds(program) + checkpoint_kinds(FIXTURES / "llama_gqa")
                 + tokenizer_kinds(ROOT / "models" / "fortune-llama" / "tokenizer.json")
                 + tokenizer_kinds(FIXTURES / "tokenizers" / "byte_bpe" / "tokenizer.json"))
        kinds = [k for k in kinds if args.kinds in k.name]
        counts = {}
        findings = []
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            futures = [pool.submit(one_mutant, kind, i, args.seed, kvrt, args.timeout, out_dir)
                       for kind in kinds for i in range(args.per_kind)]
            for future in concurrent.futures.as_completed(futures):
                name, verdict, what, detail = future.result()
                counts.setdefault(name, {}).setdefault(verdict, 0)
                counts[name][verdict] += 1
                if verdict in ("crash", "hang", "unnamed"):
                    findings.append((name, verdict, what, detail))
    finally:
        shutil.rmtree(seeds, ignore_errors=True)

    verdicts = ["refused", "ran", "unnamed", "crash", "hang"]
    print(f"{'kind':40} {'mutants':>8} " + " ".join(f"{v:>8}" for v in verdicts))
    totals = {v: 0 for v in verdicts}
    for name in sorted(counts):
        row = counts[name]
        print(f"{name:40} {sum(row.values()):8} " + " ".join(f"{row.get(v, 0):8}" for v in verdicts))
        for v in verdicts:
            totals[v] += row.get(v, 0)
    print(f"{'total':40} {sum(totals.values()):8} " + " ".join(f"{totals[v]:8}" for v in verdicts))
    for name, verdict, what, detail in findings:
        print(f"\n{verdict}: {name}: {what}\n  {detail[:400]}")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
