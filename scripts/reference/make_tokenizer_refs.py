#!/usr/bin/env python3
"""Trains two small tokenizers and records HF `tokenizers` encodings as references.

    python3 scripts/reference/make_tokenizer_refs.py --corpus corpus.txt --out DIR

Writes DIR/<kind>/tokenizer.json and DIR/<kind>/cases.json for two kinds:

  byte_bpe           GPT-2 / Llama 3 / Qwen style: Split(Llama 3 regex, isolated) +
                     ByteLevel pre-tokenizer, ByteLevel decoder, BOS template,
                     specials <|begin_of_text|> <|end_of_text|>, added token <tool>.
  sentencepiece_bpe  Llama 2 / TinyLlama style: BPE with byte_fallback and fuse_unk,
                     <unk> <s> </s> and <0x00>..<0xFF> in the vocab, normalizer
                     Prepend("▁") + Replace(" ", "▁"), no pre-tokenizer, decoder
                     Replace/ByteFallback/Fuse/Strip, <s> template.

cases.json is a list of {"text", "ids", "ids_with_special", "decoded"}: ids without
and with the post-processor's special tokens, and decode(ids) with specials kept.
kvrt's C++ tokenizer must reproduce every entry. Only the `tokenizers` package is
needed (no torch). Everything is seeded, so reruns give the same files.
"""

import argparse
import json
import os
import random
import sys

import tokenizers
from tokenizers import (
    AddedToken,
    Regex,
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    processors,
    trainers,
)

SEED = 1234
VOCAB_SIZE = 1500

# Llama 3's pre-tokenizer split pattern (tiktoken cl100k style).
LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
    r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
BOT, EOT, TOOL = "<|begin_of_text|>", "<|end_of_text|>", "<tool>"
UNK, SP_BOS, SP_EOS = "<unk>", "<s>", "</s>"
SPIECE = "\u2581"  # "▁", SentencePiece's visible space


def read_fortunes(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    paragraphs = [p.strip("\n") for p in text.split("\n\n")]
    return [p for p in paragraphs if p.strip()]


# ---------------------------------------------------------------- byte-level BPE

def train_byte_bpe(fortunes):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        min_frequency=2,
        special_tokens=[BOT, EOT],
        # all 256 byte symbols, so any input is encodable without an unknown token
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(fortunes, trainer=trainer, length=len(fortunes))
    tok.add_special_tokens([AddedToken(BOT, special=True, normalized=False),
                            AddedToken(EOT, special=True, normalized=False)])
    # A non-special added token: matched in raw text, but kept by
    # decode(skip_special_tokens=True).
    tok.add_tokens([AddedToken(TOOL, special=False, normalized=False)])
    bos = tok.token_to_id(BOT)
    # Llama 3's post-processor: ByteLevel (offsets only) then the BOS template.
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(
            single=f"{BOT}:0 $A:0",
            pair=f"{BOT}:0 $A:0 {BOT}:1 $B:1",
            special_tokens=[(BOT, bos)],
        ),
    ])
    return tok


# ------------------------------------------------------- SentencePiece-style BPE

def train_sentencepiece_bpe(fortunes):
    """BPE over "▁"-joined words, then the Llama 2 layout: <unk> <s> </s> at ids
    0..2, the 256 byte tokens at 3..258, learned pieces after them."""
    lines = [line for f in fortunes for line in f.split("\n") if line.strip()]

    tok = Tokenizer(models.BPE(unk_token=UNK, byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Sequence([
        normalizers.Prepend(SPIECE),
        normalizers.Replace(" ", SPIECE),
    ])
    # Training only: split after normalization at each "▁" so that, as in
    # SentencePiece, pieces never span a word boundary. The final tokenizer has no
    # pre-tokenizer (Llama 2 layout); the learned merges behave the same on it.
    tok.pre_tokenizer = pre_tokenizers.Metaspace(
        replacement=SPIECE, prepend_scheme="never", split=True)
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE - 256,
        min_frequency=2,
        special_tokens=[UNK, SP_BOS, SP_EOS],
        show_progress=False,
    )
    # Lines, not whole fortunes: "\n" then never enters the vocab and is encoded
    # through byte fallback (<0x0A>), as in Llama 2.
    tok.train_from_iterator(lines, trainer=trainer, length=len(lines))

    data = json.loads(tok.to_str())
    old_vocab = data["model"]["vocab"]
    for i, special in enumerate([UNK, SP_BOS, SP_EOS]):
        if old_vocab.get(special) != i:
            raise SystemExit(f"sentencepiece_bpe: {special} trained at id {old_vocab.get(special)}, wanted {i}")
    vocab = {UNK: 0, SP_BOS: 1, SP_EOS: 2}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for piece, _ in sorted(old_vocab.items(), key=lambda kv: kv[1]):
        if piece not in vocab:
            vocab[piece] = len(vocab)
    data["model"]["vocab"] = vocab
    data["model"]["unk_token"] = UNK
    data["model"]["byte_fallback"] = True
    data["model"]["fuse_unk"] = True
    data["pre_tokenizer"] = None
    for added in data.get("added_tokens", []):
        added["id"] = vocab[added["content"]]
    tok = Tokenizer.from_str(json.dumps(data))

    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in (UNK, SP_BOS, SP_EOS)])
    tok.decoder = decoders.Sequence([
        decoders.Replace(SPIECE, " "),
        decoders.ByteFallback(),
        decoders.Fuse(),
        decoders.Strip(" ", 1, 0),
    ])
    bos = tok.token_to_id(SP_BOS)
    tok.post_processor = processors.TemplateProcessing(
        single=f"{SP_BOS}:0 $A:0",
        pair=f"{SP_BOS}:0 $A:0 {SP_BOS}:1 $B:1",
        special_tokens=[(SP_BOS, bos)],
    )
    return tok


# ----------------------------------------------------------------------- cases

HANDWRITTEN = [
    # empty and whitespace only
    "", " ", "  ", "   ", "\t", "\n", "\r\n", "\r", "\n\n", "\n\n\n", " \n", "\n ",
    " \t \n ", "\t\t", "\u00a0", "\u3000",
    # spaces around words
    "a", "Hello world", " Hello world", "Hello world ", "Hello  world",
    "Hello   world   ", "  leading spaces", "trailing spaces  ", "   ", "a b  c   d    e",
    "word\n", "\nword", "two\n\nparagraphs", "tab\tseparated\tvalues",
    "line one\nline two\nline three", "windows\r\nline\r\nendings\r\n",
    "mixed \t \n  whitespace \r\n end", "  \n  indented\n    more\n",
    "    def f(x):\n        return x * 2\n",
    # digits and numbers
    "0", "1", "12", "123", "1234", "12345", "1234567", "12345678901234567890",
    "3.14159", "1,000,000", "-42", "+7", "0x1F", "1e-5", "2024-01-01", "10:30pm",
    "a1b2c3", "v2.0.1", "$100", "50%", "\u0661\u0662\u0663", "\u00bd", "x\u00b2",
    # punctuation runs
    "!", "!!!", "...", "?!?!", "---", "((()))", "a+b=c", "@#$%^&*",
    "\"quoted\"", "'single'", "`code`", "<html>", "a.b.c", "end.\n", "wait...\n\n",
    "{\"key\": [1, 2, 3]}", "https://example.com/path?q=1&r=2", "user@example.com",
    "C:\\path\\to\\file", "#!/bin/sh", "// comment", "/* block */", ":-)", "<3",
    # contractions, both cases
    "it's", "IT'S", "It'S", "we're", "WE'RE", "you've", "YOU'VE", "I'm", "I'M",
    "she'll", "SHE'LL", "he'd", "HE'D", "don't", "DON'T", "can't", "'s", "'S", "'t",
    "the cat's hat", "THE CAT'S HAT", "rock 'n' roll", "'quoted 's'", "o'clock",
    # Unicode
    "caf\u00e9", "na\u00efve", "r\u00e9sum\u00e9", "e\u0301", "Zo\u00eb",
    "\u00f1and\u00fa", "Stra\u00dfe", "\u65e5\u672c\u8a9e", "\u4e2d\u6587\u6d4b\u8bd5",
    "\ud55c\uad6d\uc5b4", "\u041f\u0440\u0438\u0432\u0435\u0442 \u043c\u0438\u0440",
    "\u0393\u03b5\u03b9\u03ac \u03c3\u03bf\u03c5", "\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd",
    "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645",
    "\u0928\u092e\u0938\u094d\u0924\u0947", "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35",
    "\U0001f642", "\U0001f44d\U0001f3fd", "\U0001f468\u200d\U0001f469\u200d\U0001f467",
    "\U0001f1fa\U0001f1f3", "hello \U0001f30d world", "\u2764\ufe0f", "\u200b", "\u2028",
    "\ufb01", "\u216b", "\u2019", "\u201cquoted\u201d", "\u2014dash\u2014", "\u2026",
    "a\u0300\u0301\u0302", "\U0001d400\U0001d401", "\ufeffBOM", "mixed \u65e5\u672c and English",
    # single characters and control bytes
    "\x00", "\x01", "\x07", "\x1b", "\x7f", "\u0080", "\u00ff", "~", "A", "z", "_", "\\",
    "".join(chr(c) for c in range(32, 127)),
    # special and added tokens inside text
    BOT, BOT + "hi", "hi" + EOT, BOT + BOT, "a " + EOT + " b", BOT + " Hello" + EOT,
    "<|begin_of_text", "<|end_of_text|", SP_BOS, SP_BOS + "x", "x" + SP_EOS,
    SP_BOS + " hi " + SP_EOS, UNK, "a" + UNK + "b", "<s", "s>",
    TOOL, TOOL + "call", "use " + TOOL + " now", TOOL + TOOL, " " + TOOL + " ", "<tool",
    "<0x41>", "<0x0A>",
    # long repetitive strings
    "a" * 50, "ab" * 40, " " * 40, "\n" * 12, "!" * 30, "9" * 40, "\u00e9" * 20,
]

# Pieces for seeded random strings that stress the split regex and whitespace rules.
FUZZ_PIECES = [
    " ", "  ", "\t", "\n", "\r\n", "\r", "a", "Z", "the", "The", "THE", "word", "x",
    "'s", "'S", "'t", "'re", "'LL", "'", "\"", "1", "12", "1234", "3.5", ".", ",", "!",
    "?", "-", "--", "...", "(", ")", "_", "#", "$", "%", "&", "/", "\\", "\u00e9",
    "\u00fc", "\u00df", "\u65e5", "\u672c", "\U0001f642", "\u200d", "\u0301", "\u00a0",
    "\u0416", "\u03a9", "\u05d0", BOT, EOT, TOOL, SP_BOS, SP_EOS, "<", ">", "|",
]


def corpus_cases(fortunes, rng, count):
    cases = []
    text = "\n\n".join(fortunes)
    for i in range(count):
        kind = i % 4
        if kind == 0:    # a whole fortune, line breaks and indentation included
            cases.append(rng.choice(fortunes))
        elif kind == 1:  # one line
            lines = [l for l in rng.choice(fortunes).split("\n") if l.strip()]
            cases.append(rng.choice(lines))
        elif kind == 2:  # an arbitrary slice: starts and ends mid-word or mid-space
            start = rng.randrange(0, max(1, len(text) - 200))
            cases.append(text[start:start + rng.randint(1, 120)])
        else:            # two fortunes joined, as in a longer prompt
            cases.append(rng.choice(fortunes) + "\n\n" + rng.choice(fortunes))
    return cases


def fuzz_cases(rng, count):
    return ["".join(rng.choice(FUZZ_PIECES) for _ in range(rng.randint(1, 14)))
            for _ in range(count)]


def make_cases(tok, texts):
    cases = []
    for text in texts:
        ids = tok.encode(text, add_special_tokens=False).ids
        cases.append({
            "text": text,
            "ids": ids,
            "ids_with_special": tok.encode(text, add_special_tokens=True).ids,
            "decoded": tok.decode(ids, skip_special_tokens=False),
        })
    return cases


def check_byte_bpe(tok, cases):
    bos = tok.token_to_id(BOT)
    for c in cases:
        if c["ids_with_special"] != [bos] + c["ids"]:
            raise SystemExit(f"byte_bpe: BOS template not applied to {c['text']!r}")
        # byte-level BPE is lossless
        if c["decoded"] != c["text"]:
            raise SystemExit(f"byte_bpe: decode does not round-trip {c['text']!r} -> {c['decoded']!r}")
    if tok.encode(BOT + "hi", add_special_tokens=False).ids[0] != bos:
        raise SystemExit("byte_bpe: special token in text is not matched")
    tool = tok.token_to_id(TOOL)
    if tool is None or tok.encode("use " + TOOL, add_special_tokens=False).ids[-1] != tool:
        raise SystemExit("byte_bpe: added token <tool> is not matched")


def check_sentencepiece_bpe(tok, cases):
    bos = tok.token_to_id(SP_BOS)
    for c in cases:
        if c["ids_with_special"] != [bos] + c["ids"]:
            raise SystemExit(f"sentencepiece_bpe: <s> template not applied to {c['text']!r}")
    for i, t in enumerate([UNK, SP_BOS, SP_EOS] + [f"<0x{b:02X}>" for b in range(256)]):
        if tok.token_to_id(t) != i:
            raise SystemExit(f"sentencepiece_bpe: {t} is not id {i}")
    # characters unseen in training must fall back to their UTF-8 bytes
    for text in ("\u65e5\u672c\u8a9e", "\U0001f642", "\n"):
        enc = tok.encode(text, add_special_tokens=False)
        wanted = [f"<0x{b:02X}>" for b in text.encode("utf-8")]
        if enc.tokens[-len(wanted):] != wanted or tok.token_to_id(UNK) in enc.ids:
            raise SystemExit(f"sentencepiece_bpe: {text!r} is not byte-encoded: {enc.tokens}")
    if tok.decode(tok.encode("Hello world\u65e5", add_special_tokens=False).ids) != "Hello world\u65e5":
        raise SystemExit("sentencepiece_bpe: decode does not round-trip plain text")


def write_kind(out_root, kind, tok, texts, check):
    out_dir = os.path.join(out_root, kind)
    os.makedirs(out_dir, exist_ok=True)
    tok.save(os.path.join(out_dir, "tokenizer.json"))
    # Encode with the tokenizer as *reloaded from the file*: that file is what the
    # C++ side reads, so the references must describe it and nothing else.
    tok = Tokenizer.from_file(os.path.join(out_dir, "tokenizer.json"))
    cases = make_cases(tok, texts)
    check(tok, cases)
    with open(os.path.join(out_dir, "cases.json"), "w", encoding="utf-8") as f:
        json.dump(cases, f, ensure_ascii=False, indent=1)
        f.write("\n")
    n_tokens = sum(len(c["ids"]) for c in cases)
    print(f"{kind}: vocab {tok.get_vocab_size(with_added_tokens=True)}, {len(cases)} cases, "
          f"{n_tokens} tokens")
    return tok.get_vocab_size(with_added_tokens=True), len(cases)


def write_readme(out_root, corpus_name, n_fortunes, summary):
    lines = [
        "# Tokenizer references (generated)",
        "",
        "Two small tokenizers trained with Hugging Face `tokenizers` "
        f"{tokenizers.__version__} on the fortune corpus",
        f"(`{corpus_name}`, {n_fortunes} fortunes), with reference encodings. Regenerate with:",
        "",
        "    bash scripts/model/build_corpus.sh corpus.txt",
        "    python3 scripts/reference/make_tokenizer_refs.py --corpus corpus.txt --out DIR",
        "",
        f"Seeded (seed {SEED}); reruns with the same corpus and `tokenizers` version give",
        "the same files.",
        "",
        "| kind | style | vocab | cases |",
        "| --- | --- | --- | --- |",
        f"| `byte_bpe` | GPT-2 / Llama 3 / Qwen: Split(Llama 3 regex, isolated) + ByteLevel "
        f"pre-tokenizer, ByteLevel decoder, post-processor Sequence[ByteLevel, Template "
        f"`{BOT} $A`], specials `{BOT}` `{EOT}`, non-special added token `{TOOL}` "
        f"| {summary['byte_bpe'][0]} | {summary['byte_bpe'][1]} |",
        f"| `sentencepiece_bpe` | Llama 2 / TinyLlama: BPE byte_fallback + fuse_unk, `{UNK}` "
        f"`{SP_BOS}` `{SP_EOS}` at 0..2, `<0x00>`..`<0xFF>` at 3..258, normalizer "
        "Prepend(\u2581) + Replace(' ', \u2581), no pre-tokenizer, decoder Replace, "
        f"ByteFallback, Fuse, Strip(1, 0), template `{SP_BOS} $A` "
        f"| {summary['sentencepiece_bpe'][0]} | {summary['sentencepiece_bpe'][1]} |",
        "",
        "Each `cases.json` is a list of objects:",
        "",
        "- `text`: the input string.",
        "- `ids`: `encode(text, add_special_tokens=False)`; special and added tokens written",
        "  in the text are still matched as tokens.",
        "- `ids_with_special`: `encode(text, add_special_tokens=True)` (BOS prepended).",
        "- `decoded`: `decode(ids, skip_special_tokens=False)`.",
        "",
        "Texts: slices of the corpus (whole fortunes, single lines, arbitrary cuts, pairs),",
        "hand-written edge cases (whitespace runs, tabs, \\r\\n, numbers, punctuation runs,",
        "contractions in both cases, accents, CJK, emoji and ZWJ sequences, combining marks,",
        "RTL scripts, control characters, special and added tokens embedded in text, the",
        "empty string), and seeded random mixes of such pieces.",
        "",
    ]
    with open(os.path.join(out_root, "README.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", required=True, help="text corpus, paragraphs separated by blank lines")
    parser.add_argument("--out", required=True, help="output directory")
    args = parser.parse_args()

    print(f"tokenizers {tokenizers.__version__}")
    fortunes = read_fortunes(args.corpus)
    if len(fortunes) < 100:
        raise SystemExit(f"corpus has only {len(fortunes)} paragraphs; is it the right file?")

    rng = random.Random(SEED)
    texts = HANDWRITTEN + corpus_cases(fortunes, rng, 100) + fuzz_cases(rng, 60)
    # keep the first of any duplicates, in order
    texts = list(dict.fromkeys(texts))

    os.makedirs(args.out, exist_ok=True)
    summary = {
        "byte_bpe": write_kind(args.out, "byte_bpe", train_byte_bpe(fortunes), texts, check_byte_bpe),
        "sentencepiece_bpe": write_kind(args.out, "sentencepiece_bpe",
                                        train_sentencepiece_bpe(fortunes), texts,
                                        check_sentencepiece_bpe),
    }
    write_readme(args.out, os.path.basename(args.corpus), len(fortunes), summary)
    print("tokenizer references OK")


if __name__ == "__main__":
    sys.exit(main())
