#!/usr/bin/env python3
"""Writes the small tokenizer.json files of kvrt's differential tokenizer test.

Each file exercises some normalizers, pre-tokenizers, a model, a decoder and a
post-processor of Hugging Face tokenizers; the expected ids and texts do not come from
here but from @huggingface/transformers (tests/node/encode_tokenizers.mjs). Vocabularies,
merges and scores are learned from TRAINING_TEXT by a plain BPE / frequency count, so
they are valid but made up. The Precompiled normalizer gets a charsmap built here in
SentencePiece's binary format (a darts-clone double array) from Python's unicodedata:
NFKC per character, NFC of base + combining mark pairs, control characters removed and
unusual spaces mapped to " " (the nmt_nfkc rules).

    python3 scripts/reference/make_differential_tokenizers.py tests/fixtures/tokenizers/differential

Deterministic: the same Python version writes the same files.
"""
import base64
import collections
import json
import math
import os
import struct
import sys
import unicodedata

TRAINING_TEXT = """
The quick brown fox jumps over the lazy dog. Pack my box with five dozen liquor jugs!
It's 10:45 on 2024-03-15; the price was $1,299.99 (tax incl.) and they'll pay 50%.
Don't stop believing -- hold on to that feeling. I'm sure we've seen this before, haven't we?
"Hello, world," said the program; 'hello' replied the user... 42 times, 7 days, 365 nights.
Café, naïve, résumé, Ångström, façade, jalapeño, Straße, Ærøskøbing, Łódź, Čeština.
Привет мир, как дела? Спасибо, хорошо. Γειά σου κόσμε. שלום עולם. مرحبا بالعالم.
你好世界，今天天气很好。日本語のテキストです。한국어 문장입니다.
New lines\nand\ttabs   and    spaces. numbers 0123456789 and more 1000000.
Python def main(): return x + y * 2 # comment; if (a == b) { print("ok"); }
"""

SPECIALS = ["<unk>", "<s>", "</s>"]
BYTE_TOKENS = ["<0x%02X>" % b for b in range(256)]


def words_of(text, transform):
    return [transform(w) for w in text.split()]


def train_bpe(words, alphabet_extra, num_merges, prefix="", suffix=""):
    """Plain BPE over words (lists of symbols); ties broken by the pair itself."""
    counts = collections.Counter(words)
    seqs = {}
    alphabet = set(alphabet_extra)
    for word in counts:
        chars = list(word)
        symbols = [chars[0]] + [prefix + c for c in chars[1:]]
        if suffix:
            symbols[-1] += suffix
        seqs[word] = symbols
        alphabet.update(symbols)
    merges = []
    vocab_new = []
    for _ in range(num_merges):
        pairs = collections.Counter()
        for word, symbols in seqs.items():
            for a, b in zip(symbols, symbols[1:]):
                pairs[(a, b)] += counts[word]
        if not pairs:
            break
        best = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))[0]
        if pairs[best] < 2:
            break
        a, b = best
        merged = a + b[len(prefix):] if prefix and b.startswith(prefix) else a + b
        merges.append([a, b])
        if merged not in alphabet and merged not in vocab_new:
            vocab_new.append(merged)
        for word, symbols in seqs.items():
            out, i = [], 0
            while i < len(symbols):
                if i + 1 < len(symbols) and symbols[i] == a and symbols[i + 1] == b:
                    out.append(merged)
                    i += 2
                else:
                    out.append(symbols[i])
                    i += 1
            seqs[word] = out
    return sorted(alphabet), vocab_new, merges


def bpe_model(words, num_merges, specials, extra_alphabet=(), byte_fallback=False, prefix="",
              suffix="", unk="<unk>", fuse_unk=False, ignore_merges=False):
    alphabet, new, merges = train_bpe(words, extra_alphabet, num_merges, prefix, suffix)
    vocab = {}
    for token in specials + (BYTE_TOKENS if byte_fallback else []) + alphabet + new:
        vocab.setdefault(token, len(vocab))
    return {
        "type": "BPE", "dropout": None, "unk_token": unk,
        "continuing_subword_prefix": prefix or None, "end_of_word_suffix": suffix or None,
        "fuse_unk": fuse_unk, "byte_fallback": byte_fallback, "ignore_merges": ignore_merges,
        "vocab": vocab, "merges": merges,
    }


ASCII_PRINTABLE = [chr(c) for c in range(0x21, 0x7F)]


def unigram_model(words, specials, byte_fallback=False, max_len=6, size=600, extra_chars=()):
    counts = collections.Counter()
    for word in words:
        for i in range(len(word)):
            for n in range(1, max_len + 1):
                if i + n <= len(word):
                    counts[word[i:i + n]] += 1
    chars = sorted({c for w in words for c in w} | set(extra_chars))
    longer = sorted((p for p in counts if len(p) > 1 and counts[p] > 1),
                    key=lambda p: (-counts[p] * len(p), p))[:size]
    total = sum(counts.values())
    vocab = [[s, 0.0] for s in specials]
    if byte_fallback:
        vocab += [[b, 0.0] for b in BYTE_TOKENS]
    for piece in chars + longer:
        # Scores are log-frequencies, with a small per-piece offset so no two paths tie.
        score = math.log(max(counts[piece], 1) / total) + 0.5 * (len(piece) - 1) - 1e-4 * len(vocab)
        vocab.append([piece, round(score, 6)])
    return {"type": "Unigram", "unk_id": 0, "vocab": vocab, "byte_fallback": byte_fallback}


def added(content, id_, special=True, normalized=False, lstrip=False, rstrip=False):
    return {"id": id_, "content": content, "single_word": False, "lstrip": lstrip,
            "rstrip": rstrip, "normalized": normalized, "special": special}


def specials_of(model, names, **kwargs):
    if model["type"] == "Unigram":
        ids = {piece: i for i, (piece, _) in enumerate(model["vocab"])}
    else:
        ids = model["vocab"]
    return [added(n, ids[n], **kwargs) for n in names]


def template(bos=None, eos=None, ids=None):
    single, special = [], {}
    if bos:
        single.append({"SpecialToken": {"id": bos, "type_id": 0}})
        special[bos] = {"id": bos, "ids": [ids[bos]], "tokens": [bos]}
    single.append({"Sequence": {"id": "A", "type_id": 0}})
    if eos:
        single.append({"SpecialToken": {"id": eos, "type_id": 0}})
        special[eos] = {"id": eos, "ids": [ids[eos]], "tokens": [eos]}
    return {"type": "TemplateProcessing", "single": single,
            "pair": single + [{"Sequence": {"id": "B", "type_id": 1}}], "special_tokens": special}


def tokenizer(model, normalizer, pre_tokenizer, decoder, post_processor, added_tokens):
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added_tokens,
            "normalizer": normalizer, "pre_tokenizer": pre_tokenizer,
            "post_processor": post_processor, "decoder": decoder, "model": model}


# ---- SentencePiece's precompiled charsmap -------------------------------------------

CONTROL_REMOVED = [*range(0x1, 0x9), 0xB, *range(0xE, 0x20), 0x7F, 0x8F, 0x9F]
SPACES = [0x9, 0xA, 0xC, 0xD, 0xA0, 0x1680, *range(0x2000, 0x2010), 0x2028, 0x2029, 0x202F,
          0x205F, 0x2581, 0x3000, 0xFEFF, 0xFFFD]


def nmt_nfkc_rules():
    rules = {}
    for cp in range(0x1, 0x110000):
        if 0xD800 <= cp <= 0xDFFF or cp == 0xFF5E:  # SentencePiece keeps U+FF5E as is
            continue
        c = chr(cp)
        if cp in CONTROL_REMOVED:
            rules[c] = ""
        elif cp in SPACES:
            rules[c] = " "
        else:
            n = unicodedata.normalize("NFKC", c)
            if n != c:
                rules[c] = n
    for cp in range(0xC0, 0x30000):
        c = chr(cp)
        d = unicodedata.normalize("NFD", c)
        if len(d) == 2 and unicodedata.normalize("NFC", d) == c and len(d.encode()) < 6:
            rules.setdefault(d, unicodedata.normalize("NFKC", d))
    return rules


def build_double_array(keys_values):
    """darts-clone layout: unit = label | has_leaf << 8 | offset << 10; leaves hold
    value | 1 << 31 at the node's base (label 0)."""
    root = {}
    for key, value in keys_values:
        node = root
        for byte in key:
            node = node.setdefault(byte, {})
        node[None] = value
    units = [0] * 1024
    used = bytearray(1024)
    used[0] = 1
    used_bases = set()
    first_free = 1
    queue = collections.deque([(0, root)])
    while queue:
        pos, node = queue.popleft()
        labels = sorted((0 if k is None else k) for k in node)
        base = None
        slot = first_free
        while base is None:
            while slot < len(used) and used[slot]:
                slot += 1
            candidate = slot ^ labels[0]
            if candidate not in used_bases and all(
                    (candidate ^ l) >= len(used) or not used[candidate ^ l] for l in labels):
                base = candidate
            slot += 1
        need = max(base ^ l for l in labels) + 1
        if need > len(used):
            grow = need + 1024 - len(used)
            units.extend([0] * grow)
            used.extend(bytearray(grow))
        offset = pos ^ base
        assert offset < (1 << 21), "offset does not fit"
        units[pos] |= offset << 10
        used_bases.add(base)
        for l in labels:
            used[base ^ l] = 1
        while first_free < len(used) and used[first_free]:
            first_free += 1
        for key, child in node.items():
            if key is None:
                units[base] = child | (1 << 31)
            else:
                units[base ^ key] = key | ((1 << 8) if None in child else 0)
                queue.append((base ^ key, child))
    return units


def precompiled_charsmap():
    rules = nmt_nfkc_rules()
    normalized = bytearray()
    offsets = {}
    keys_values = []
    for key in sorted(rules, key=lambda k: k.encode()):
        value = rules[key]
        if value not in offsets:
            offsets[value] = len(normalized)
            normalized += value.encode() + b"\0"
        keys_values.append((key.encode(), offsets[value]))
    units = build_double_array(keys_values)
    blob = struct.pack("<I", 4 * len(units)) + struct.pack("<%dI" % len(units), *units)
    return base64.b64encode(blob + bytes(normalized)).decode()


# ---- the tokenizers -----------------------------------------------------------------

def metaspace(scheme="always", split=True):
    return {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": scheme,
            "split": split}


def build_all():
    text = TRAINING_TEXT.replace("\\n", "\n").replace("\\t", "\t")
    out = {}

    # SentencePieceBPETokenizer of tokenizers: NFKC, Metaspace, BPE with unk.
    words = words_of(unicodedata.normalize("NFKC", text), lambda w: "\u2581" + w)
    model = bpe_model(words, 300, ["<unk>", "<s>", "</s>"], extra_alphabet=["\u2581"])
    out["bpe_nfkc_metaspace"] = tokenizer(
        model, {"type": "NFKC"}, metaspace("always"), metaspace("always"),
        template("<s>", None, model["vocab"]), specials_of(model, ["<unk>", "<s>", "</s>"]))

    # The same with prepend_scheme "first", a fused unk, NFKD + Lowercase.
    words = words_of(unicodedata.normalize("NFKD", text).lower(), lambda w: "\u2581" + w)
    model = bpe_model(words, 250, ["<unk>", "<s>", "</s>"], extra_alphabet=["\u2581"],
                      fuse_unk=True)
    out["bpe_nfkd_lowercase_metaspace_first"] = tokenizer(
        model, {"type": "Sequence", "normalizers": [{"type": "NFKD"}, {"type": "Lowercase"}]},
        metaspace("first"), metaspace("first"), template("<s>", "</s>", model["vocab"]),
        specials_of(model, ["<unk>", "<s>", "</s>"]))

    # BERT-like words with end_of_word_suffix: NFD, Lowercase, StripAccents, Whitespace.
    plain = "".join(c for c in unicodedata.normalize("NFD", text.lower())
                    if not unicodedata.category(c).startswith("M"))
    words = [w for w in plain.replace(".", " . ").replace(",", " , ").split()]
    model = bpe_model(words, 300, ["[UNK]", "[CLS]", "[SEP]"], suffix="</w>", unk="[UNK]")
    out["bpe_nfd_strip_accents_whitespace_suffix"] = tokenizer(
        model, {"type": "Sequence", "normalizers": [
            {"type": "NFD"}, {"type": "Lowercase"}, {"type": "StripAccents"}]},
        {"type": "Whitespace"}, {"type": "BPEDecoder", "suffix": "</w>"},
        {"type": "BertProcessing", "sep": ["[SEP]", model["vocab"]["[SEP]"]],
         "cls": ["[CLS]", model["vocab"]["[CLS]"]]},
        specials_of(model, ["[UNK]", "[CLS]", "[SEP]"]))

    # Byte fallback with Strip, NFC, WhitespaceSplit, Punctuation, Digits (individual).
    words = text.split()
    model = bpe_model(words, 300, ["<unk>", "<s>", "</s>"], byte_fallback=True)
    out["bpe_byte_fallback_punctuation_digits"] = tokenizer(
        model, {"type": "Sequence", "normalizers": [
            {"type": "Strip", "strip_left": True, "strip_right": True}, {"type": "NFC"}]},
        {"type": "Sequence", "pretokenizers": [
            {"type": "WhitespaceSplit"}, {"type": "Punctuation", "behavior": "Contiguous"},
            {"type": "Digits", "individual_digits": True}]},
        {"type": "Sequence", "decoders": [{"type": "ByteFallback"}, {"type": "Fuse"}]},
        template("<s>", "</s>", model["vocab"]), specials_of(model, ["<unk>", "<s>", "</s>"]))

    # BertNormalizer + BertPreTokenizer + Digits (grouped), WordPiece decoder, Roberta.
    model = bpe_model(plain.split(), 300, ["[UNK]", "[CLS]", "[SEP]", "[MASK]"], unk="[UNK]")
    out["bpe_bert_normalizer_wordpiece_decoder"] = tokenizer(
        model, {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                "strip_accents": None, "lowercase": True},
        {"type": "Sequence", "pretokenizers": [
            {"type": "BertPreTokenizer"}, {"type": "Digits", "individual_digits": False}]},
        {"type": "WordPiece", "prefix": "##", "cleanup": True},
        {"type": "RobertaProcessing", "sep": ["[SEP]", model["vocab"]["[SEP]"]],
         "cls": ["[CLS]", model["vocab"]["[CLS]"]], "trim_offsets": True,
         "add_prefix_space": False},
        specials_of(model, ["[UNK]", "[CLS]", "[SEP]"]) +
        specials_of(model, ["[MASK]"], lstrip=True, rstrip=False))

    # GPT-2 style: Replace + Split(digits) + ByteLevel with its own regex and prefix space;
    # added tokens normalized / lstrip / rstrip; ignore_merges.
    from_bytes = bytes_to_unicode()
    words = [("".join(from_bytes[b] for b in (" " + w).encode())) for w in text.split()]
    model = bpe_model(words, 400, ["<|endoftext|>"], extra_alphabet=list(from_bytes.values()),
                      unk=None, ignore_merges=True)
    n = len(model["vocab"])
    model_added = [added("<|endoftext|>", 0),
                   added("<tool>", n, special=False, normalized=True),
                   added("<mask>", n + 1, special=True, lstrip=True, rstrip=True)]
    out["bpe_byte_level_split_replace"] = tokenizer(
        model, {"type": "Sequence", "normalizers": [
            {"type": "Replace", "pattern": {"Regex": "\\s*--\\s*"}, "content": " - "},
            {"type": "Replace", "pattern": {"String": "``"}, "content": "\""}]},
        {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "\\p{N}{1,3}"}, "behavior": "Isolated",
             "invert": False},
            {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
             "use_regex": True}]},
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        {"type": "Sequence", "processors": [
            {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False,
             "use_regex": True},
            template(None, "<|endoftext|>", {"<|endoftext|>": 0})]},
        model_added)

    # ByteLevel without its regex behind Split(Removed) and Split(String, Isolated).
    # (A String pattern with Removed is not used: transformers.js keeps the delimiters.)
    out["bpe_byte_level_split_removed"] = tokenizer(
        model, None,
        {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "\n"}, "behavior": "Removed",
             "invert": False},
            {"type": "Split", "pattern": {"String": "..."}, "behavior": "Isolated",
             "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
             "use_regex": False}]},
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        None, [added("<|endoftext|>", 0)])

    # Unigram with a precompiled nmt_nfkc charsmap and Metaspace (T5 / ALBERT layout).
    norm_words = words_of(unicodedata.normalize("NFKC", text), lambda w: "\u2581" + w)
    model = unigram_model(norm_words, ["<unk>", "<s>", "</s>"])
    charsmap = precompiled_charsmap()
    out["unigram_precompiled_metaspace"] = tokenizer(
        model, {"type": "Sequence", "normalizers": [
            {"type": "Precompiled", "precompiled_charsmap": charsmap},
            {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": "\u2581"}]},
        {"type": "Sequence", "pretokenizers": [
            {"type": "WhitespaceSplit"}, metaspace("always")]},
        metaspace("always"), template(None, "</s>", {"</s>": 2}),
        specials_of(model, ["<unk>", "<s>", "</s>"]))

    # Unigram with byte fallback, SentencePiece-style normalizer (Prepend + Replace).
    sp_words = ["\u2581" + w for w in text.split()]
    model = unigram_model(sp_words, ["<unk>", "<s>", "</s>"], byte_fallback=True,
                          extra_chars=ASCII_PRINTABLE)
    out["unigram_byte_fallback_prepend"] = tokenizer(
        model, {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
        None,
        {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        template("<s>", None, {"<s>": 1}), specials_of(model, ["<unk>", "<s>", "</s>"]))

    # Unigram, Metaspace never + no split, NFKC + Lowercase.
    model = unigram_model(words_of(unicodedata.normalize("NFKC", text).lower(),
                                   lambda w: "\u2581" + w), ["<unk>", "<pad>", "</s>"])
    out["unigram_metaspace_never_nosplit"] = tokenizer(
        model, {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}]},
        metaspace("never", split=False), metaspace("never", split=False),
        template(None, "</s>", {"</s>": 2}), specials_of(model, ["<unk>", "<pad>", "</s>"]))
    return out


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


# Strings added to the texts of tests/fixtures/tokenizers/byte_bpe/cases.json.
EXTRA_TEXTS = [
    "Hello world", " Hello world", "Hello  world ", "hello\tworld\nagain\r\n",
    "naïve café résumé", "nai\u0308ve cafe\u0301", "e\u0301\u0323 a\u0300\u0301",
    "Ångström Å Å", "ﬁ ﬂ ﬃ ㎏ ℃ ½ ² ⁴ Ⅻ", "ＦＵＬＬ　ｗｉｄｔｈ　１２３！？",
    "ｶﾀｶﾅ ﾊﾟﾊﾞ", "你好，世界！", "東京は晴れ。", "한국어 문장", "\u1100\u1161\u11a8",
    "مرحبا بالعالم ١٢٣", "שלום עולם", "Привет, Мир!", "ΣΊΣΥΦΟΣ σοφός Σ",
    "İstanbul ıi İ", "STRASSE straße ẞ", "Ǆ ǅ ǆ", "😀 😃 👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈",
    "❤️ ✈︎ ☺", "a\u200db\u200cc", "x\u00ady", "\ufeffBOM", "tab\tsep\u000bvt\u000cff",
    "\u0085next line", "\u2028line sep\u2029", "  leading and trailing  ", "\u3000ideo\u3000",
    "1234567890", "3.14159 2,718 1e-10", "٣٤٥ ۴۵۶ १२३", "①②③ ⑴ ⒈", "0x1F 0b1010 007",
    "!!! ??? ... --- ***", "(a) [b] {c} <d>", "«quotes» “curly” ‘single’ „low“",
    "it's don't I'm we've they're you'll he'd", "IT'S DON'T", "e-mail: foo@bar.com",
    "https://example.com/path?q=1&r=2#frag", "snake_case camelCase kebab-case",
    "def f(x):\n    return x ** 2\n", "if (a && b || !c) { x += 1; }",
    "<s>Hello</s>", "<unk> <s> </s>", "[CLS] a [SEP] [MASK] b", "x [MASK]y", "x  [MASK]  y",
    "<|endoftext|>one<|endoftext|>", "a <tool> b", "<tool><tool>", " <mask> ", "a<mask>b",
    "▁already▁marked", "▁", "▁▁", "~ ～ 〜", "caf\u00e9\u0301", "Ａ\u0301",
    "\u0000nul", "\ufffdrepl", "\u00a0nbsp\u00a0", "\u2009thin\u200a",
    "x" * 300, "ab" * 120, "日本" * 50, "ÀÁÂÃÄÅ àáâãäå ÇÈÉÊË çèéêë",
    "Ωmega Ω Ω K K", "ﬀ ﬅ ﬆ", "a\u0301\u0301\u0301", "ก้ำ ภาษาไทย", "नमस्ते दुनिया",
    "ሰላም", "Ｈｅｌｌｏ，Ｗｏｒｌｄ", "\U0001d400\U0001d401 𝒜𝒷", "⁰¹²³⁴⁵⁶⁷⁸⁹",
]


def write_corpus(root):
    here = os.path.dirname(os.path.abspath(__file__))
    cases = os.path.join(here, "..", "..", "tests", "fixtures", "tokenizers", "byte_bpe",
                         "cases.json")
    with open(cases, encoding="utf-8") as f:
        texts = [case["text"] for case in json.load(f)]
    for text in EXTRA_TEXTS:
        if text not in texts:
            texts.append(text)
    with open(os.path.join(root, "corpus.json"), "w", encoding="utf-8") as f:
        json.dump(texts, f, ensure_ascii=False, indent=0)
        f.write("\n")
    print("corpus.json:", len(texts), "strings")


def main():
    root = sys.argv[1]
    os.makedirs(root, exist_ok=True)
    write_corpus(root)
    for name, tok in build_all().items():
        os.makedirs(os.path.join(root, name), exist_ok=True)
        with open(os.path.join(root, name, "tokenizer.json"), "w", encoding="utf-8") as f:
            json.dump(tok, f, ensure_ascii=False, indent=1)
            f.write("\n")
        print(name)


if __name__ == "__main__":
    main()
