#!/usr/bin/env python3
"""kvrt and its PyTorch peers side by side, in one run on the GPU machine.

    python3 bench/side_by_side.py CHECKPOINT_DIR [--kvrt build/kvrt] [-p 512] [-n 128]
                                  [-d 0,4096] [-r 3] [--peers hf,compile]

Runs `kvrt bench CHECKPOINT_DIR --json` and `bench/peer_bench.py CHECKPOINT_DIR --json`
with the same -p/-n/-d/-r, then prints one markdown table: per depth, pp and tg tokens/s
of kvrt and of each peer, kvrt's ratio to each, and each one's tg share of the
device-to-device copy that it measured in its own process. With --kvrt-json/--peer-json
it only merges files written earlier (no GPU needed).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile


def run_json(cmd, path):
    print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
    with open(path, "w") as out:
        done = subprocess.run(cmd, stdout=out)
    if done.returncode != 0:
        print(f"side_by_side: {cmd[0]} exited {done.returncode}", file=sys.stderr)
    with open(path) as f:
        text = f.read()
    # kvrt bench prints the JSON object alone; peer_bench writes it with --json.
    return json.loads(text[text.index("{"):]) if "{" in text else {}


def table(kvrt, peers, prompt, generate):
    rows = {}
    for r in kvrt.get("rows", []):
        rows.setdefault(r["depth"], {})["kvrt_" + r["test"][:2]] = r
    names = sorted({p["name"] for p in peers.get("peers", [])})
    for p in peers.get("peers", []):
        rows.setdefault(p["depth"], {})[p["name"]] = p
    head = ["depth", f"kvrt pp{prompt} t/s", f"kvrt tg{generate} t/s", "kvrt tg share of copy"]
    for n in names:
        head += [f"{n} pp t/s", f"{n} tg t/s", f"{n} tg share", f"kvrt/{n} pp", f"kvrt/{n} tg"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for depth in sorted(rows):
        row = rows[depth]
        pp = row.get("kvrt_pp", {}).get("tokens_per_second", 0)
        tg = row.get("kvrt_tg", {}).get("tokens_per_second", 0)
        share = row.get("kvrt_tg", {}).get("share_of_copy", 0)
        cells = [str(depth), f"{pp:.1f}", f"{tg:.1f}", f"{100 * share:.0f}%"]
        for n in names:
            p = row.get(n, {})
            ppp, ptg = p.get("pp_tok_s", 0), p.get("tg_tok_s", 0)
            cells += [f"{ppp:.1f}", f"{ptg:.1f}", f"{100 * p.get('tg_share_of_copy', 0):.0f}%",
                      f"{pp / ppp:.2f}x" if ppp else "-", f"{tg / ptg:.2f}x" if ptg else "-"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoint")
    ap.add_argument("--kvrt", default="build/kvrt")
    ap.add_argument("-p", type=int, default=512)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("-d", default="0,4096")
    ap.add_argument("-r", type=int, default=3)
    ap.add_argument("--peers", default="hf,compile")
    ap.add_argument("--kvrt-json")
    ap.add_argument("--peer-json")
    a = ap.parse_args()
    common = ["-p", str(a.p), "-n", str(a.n), "-d", a.d, "-r", str(a.r)]
    work = tempfile.mkdtemp(prefix="kvrt_side_")
    if a.kvrt_json:
        kvrt = json.load(open(a.kvrt_json))
    else:
        kvrt = run_json([a.kvrt, "bench", a.checkpoint, *common, "--json"],
                        os.path.join(work, "kvrt.json"))
    if a.peer_json:
        peers = json.load(open(a.peer_json))
    else:
        peer_json = os.path.join(work, "peers.json")
        here = os.path.dirname(os.path.abspath(__file__))
        subprocess.run([sys.executable, os.path.join(here, "peer_bench.py"), a.checkpoint, *common,
                        "--peers", a.peers, "--json", peer_json])
        peers = json.load(open(peer_json)) if os.path.exists(peer_json) else {}
    print(f"{a.checkpoint}: kvrt on {kvrt.get('device', '?')}, copy {kvrt.get('copy_gbs', 0):.0f} "
          f"GB/s (kvrt) / {peers.get('copy_gbs', 0):.0f} GB/s (peers)\n")
    print(table(kvrt, peers, a.p, a.n))
    return 0 if kvrt.get("rows") else 1


if __name__ == "__main__":
    sys.exit(main())
