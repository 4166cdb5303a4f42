#!/usr/bin/env bash
# Builds the English training corpus for the bundled fortune-llama model from the
# fortune cookie files of Debian's `fortunes` and `fortunes-min` packages.
#
#   usage: bash scripts/model/build_corpus.sh OUT_FILE
#
# Output format: one fortune per paragraph, paragraphs separated by exactly one
# blank line, UTF-8, trailing newline. Blank lines *inside* a fortune are dropped so
# that "split on blank lines" gives back exactly the fortunes (train.py relies on it).
#
# Only the plain text cookie files are read: the `.dat` files are strfile indexes and
# the `.u8` entries are links to the same text. The offensive set (`off/`, from the
# separate fortunes-off package) is skipped, as is any other subdirectory.
# Set FORTUNE_DIR to read another directory (default /usr/share/games/fortunes).
set -euo pipefail

out=${1:?usage: build_corpus.sh OUT_FILE}
src=${FORTUNE_DIR:-/usr/share/games/fortunes}

if [ ! -d "$src" ]; then
    echo "error: $src does not exist; install the data with: apt-get install fortunes fortunes-min" >&2
    exit 1
fi

python3 - "$src" "$out" <<'PY'
import os
import re
import sys

src, out = sys.argv[1], sys.argv[2]

# A backspace overstrikes the character before it (old terminal underlining and
# "strike-out" jokes such as "____^H^H^H^Hdoes"): keep what ends up visible.
OVERSTRIKE = re.compile(r"[^\n]\x08")
# Other control characters (bell, escape, form feed...) carry no text.
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def clean(text):
    while "\x08" in text:
        stripped = OVERSTRIKE.sub("", text)
        if stripped == text:  # a backspace at the start of a line: just drop it
            stripped = text.replace("\x08", "")
        text = stripped
    return CONTROL.sub("", text.replace("\r\n", "\n"))


def unmojibake(line):
    # A few cookies were UTF-8 encoded two or three times ("donÃ¢Â€Â™t"); undo
    # that while it decodes cleanly. Genuine Latin-1 text ("café") fails to decode
    # as UTF-8 and is kept as it is.
    for _ in range(4):
        if not re.search("[\u0080-\u00ff]", line):
            break
        try:
            fixed = line.encode("latin-1").decode("utf-8")
        except (UnicodeEncodeError, UnicodeDecodeError):
            break
        line = fixed
    return line


def fortunes_of(path):
    with open(path, "rb") as f:
        raw = f.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")  # very old files; every byte maps to a char
    text = clean(text)
    # strfile format: fortunes are separated by lines holding just "%".
    for block in re.split(r"^%[ \t]*$", text, flags=re.M):
        lines = [unmojibake(line.rstrip()) for line in block.split("\n")]
        lines = [line for line in lines if line.strip()]
        if lines:
            yield "\n".join(lines)


names = sorted(
    name for name in os.listdir(src)
    if not name.endswith((".dat", ".u8", ".sh"))
    and os.path.isfile(os.path.join(src, name))
    and not os.path.islink(os.path.join(src, name))
)
if not names:
    sys.exit(f"error: no fortune files in {src}")

seen = set()
fortunes = []
for name in names:
    count = 0
    for fortune in fortunes_of(os.path.join(src, name)):
        if fortune not in seen:  # both packages may ship the same cookie
            seen.add(fortune)
            fortunes.append(fortune)
            count += 1
    print(f"  {name:16s} {count:6d} fortunes", file=sys.stderr)

text = "\n\n".join(fortunes) + "\n"
with open(out, "w", encoding="utf-8", newline="\n") as f:
    f.write(text)
print(f"wrote {out}: {len(names)} files, {len(fortunes)} fortunes, "
      f"{len(text.encode('utf-8'))} bytes, {len(text.split())} words", file=sys.stderr)
PY
