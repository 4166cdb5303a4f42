#!/usr/bin/env bash
# Makes all HF-derived reference data on the GPU machine (torch, transformers,
# tokenizers, safetensors installed; no network needed). Run at the repo root:
#
#   bash scripts/gpu/make_reference_data.sh CORPUS_FILE OUTDIR [TRAIN_MINUTES]
#
# CORPUS_FILE comes from `bash scripts/model/build_corpus.sh corpus.txt` (run it
# where the fortunes packages are installed and copy the file over).
#
# Steps, each independent (one failing does not stop the others):
#   1 fixtures    scripts/reference/make_fixtures.py      -> OUTDIR/fixtures.tar.gz
#   2 tokenizers  scripts/reference/make_tokenizer_refs.py -> OUTDIR/tokenizers.tar.gz
#   3 model       scripts/model/train.py (4 minutes)       -> OUTDIR/model.tar.gz
# Logs go to OUTDIR/logs/. Unpack with:
#   tar xzf fixtures.tar.gz -C tests/fixtures      (llama_gqa/ ... README.md)
#   tar xzf tokenizers.tar.gz -C <tokenizer fixture dir>   (byte_bpe/ sentencepiece_bpe/ README.md)
#   tar xzf model.tar.gz -C models                 (fortune-llama/)
# Exit status: 0 only if every step succeeded.
set -u

if [ $# -lt 2 ]; then
    echo "usage: $0 CORPUS_FILE OUTDIR [TRAIN_MINUTES]" >&2
    exit 2
fi
corpus=$1
outdir=$2
minutes=${3:-4}
if [ ! -f scripts/reference/make_fixtures.py ]; then
    echo "error: run this at the repository root" >&2
    exit 2
fi
if [ ! -s "$corpus" ]; then
    echo "error: corpus file '$corpus' is missing or empty" >&2
    exit 2
fi

mkdir -p "$outdir/logs" "$outdir/work"
outdir=$(cd "$outdir" && pwd)
work=$outdir/work
logs=$outdir/logs
export PYTHONUNBUFFERED=1
# Run the scripts from fresh output directories so stale files never get packed.
rm -rf "$work/fixtures" "$work/tokenizers" "$work/model"

echo "=== versions" | tee "$logs/versions.log"
{
    date -u
    python3 --version
    python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())'
    python3 -c 'import transformers; print("transformers", transformers.__version__)'
    python3 -c 'import tokenizers; print("tokenizers", tokenizers.__version__)'
    python3 -c 'import safetensors; print("safetensors", safetensors.__version__)'
    python3 -c 'import numpy; print("numpy", numpy.__version__)'
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
} 2>&1 | tee -a "$logs/versions.log"

declare -A status

run_step() {  # name, log file, command...
    local name=$1 log=$2
    shift 2
    echo
    echo "=== step $name: $*"
    local t0=$SECONDS
    "$@" 2>&1 | tee "$log"
    local rc=${PIPESTATUS[0]}
    if [ "$rc" -eq 0 ]; then
        status[$name]="ok ($((SECONDS - t0)) s)"
    else
        status[$name]="FAILED (exit $rc, see $log)"
    fi
    echo "=== step $name: ${status[$name]}"
    return "$rc"
}

pack() {  # name, tarball, directory to pack the contents of
    if tar czf "$2" -C "$3" . ; then
        echo "packed $2 ($(du -h "$2" | cut -f1))"
    else
        status[$1]="FAILED (tar)"
    fi
}

if run_step fixtures "$logs/fixtures.log" \
    python3 scripts/reference/make_fixtures.py --out "$work/fixtures"; then
    pack fixtures "$outdir/fixtures.tar.gz" "$work/fixtures"
fi

if run_step tokenizers "$logs/tokenizers.log" \
    python3 scripts/reference/make_tokenizer_refs.py --corpus "$corpus" --out "$work/tokenizers"; then
    pack tokenizers "$outdir/tokenizers.tar.gz" "$work/tokenizers"
fi

mkdir -p "$work/model"
if run_step model "$logs/model.log" \
    python3 scripts/model/train.py --corpus "$corpus" --out "$work/model/fortune-llama" --minutes "$minutes"; then
    pack model "$outdir/model.tar.gz" "$work/model"
fi

echo
echo "=== summary"
failed=0
for name in fixtures tokenizers model; do
    echo "  $name: ${status[$name]}"
    case ${status[$name]} in ok*) ;; *) failed=1 ;; esac
done
ls -l "$outdir"/*.tar.gz 2>/dev/null
exit $failed
