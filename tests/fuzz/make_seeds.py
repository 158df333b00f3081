#!/usr/bin/python3
"""Writes the generated seed files of the fuzz corpora (tests/fuzz/corpus/<target>/): .pb values the
ONNX backend tests do not have (maps, a sparse tensor, nested sequences), genai_config.json variants
and small tokenizer.json files. The other seeds are copies of backend-test files and templates.

  make_seeds.py [CORPUS_DIR]   (default: the corpus folder beside this script)
"""
import json
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def value_seeds(d):
    f = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "t")
    keys = np.array([1, 5, 9], dtype=np.int64)
    vals = helper.make_sequence("v", 1, [numpy_helper.from_array(np.array([x], dtype=np.float32)) for x in (0.5, 1.5, 2.5)])
    write(f"{d}/map_int64_float.pb", helper.make_map("m", TensorProto.INT64, keys, vals).SerializeToString())
    skeys = [b"a", b"bc"]
    svals = helper.make_sequence("v", 1, [helper.make_tensor("", TensorProto.STRING, [1], [s]) for s in (b"x", b"yz")])
    write(f"{d}/map_string_string.pb", helper.make_map("ms", TensorProto.STRING, skeys, svals).SerializeToString())
    seq = helper.make_sequence("s", 1, [f, numpy_helper.from_array(np.zeros((0, 3), np.float32))])
    write(f"{d}/sequence_of_sequences.pb",
          helper.make_sequence("ss", 3, [seq, helper.make_sequence("e", 1, [])]).SerializeToString())
    vals_t = numpy_helper.from_array(np.array([1.0, 2.0], dtype=np.float32), "sp")
    idx = numpy_helper.from_array(np.array([1, 4], dtype=np.int64))
    write(f"{d}/sparse_linear.pb", helper.make_sparse_tensor(vals_t, idx, [2, 3]).SerializeToString())
    idx2 = numpy_helper.from_array(np.array([[0, 1], [1, 2]], dtype=np.int64))
    write(f"{d}/sparse_coords.pb", helper.make_sparse_tensor(vals_t, idx2, [2, 3]).SerializeToString())
    typed = helper.make_tensor("typed", TensorProto.FLOAT16, [3], np.array([1, 2, 3], np.float16).view(np.uint16))
    write(f"{d}/float16_int32_data.pb", typed.SerializeToString())
    write(f"{d}/double_data.pb", helper.make_tensor("d", TensorProto.DOUBLE, [2], [1.5, -2.0]).SerializeToString())
    write(f"{d}/uint64_data.pb", helper.make_tensor("u", TensorProto.UINT64, [2], [7, 2**63]).SerializeToString())
    write(f"{d}/bool_data.pb", helper.make_tensor("b", TensorProto.BOOL, [3], [1, 0, 1]).SerializeToString())
    write(f"{d}/complex64.pb", helper.make_tensor("c", TensorProto.COMPLEX64, [1], [complex(1.0, 2.0)]).SerializeToString())


def genai_config(style="genai", layers=2, **extra):
    dec = {
        "filename": "model.onnx", "head_size": 16, "hidden_size": 64, "num_attention_heads": 4,
        "num_hidden_layers": layers, "num_key_value_heads": 2,
        "inputs": {"input_ids": "input_ids", "attention_mask": "attention_mask",
                   "past_key_names": "past_key_values.%d.key", "past_value_names": "past_key_values.%d.value"},
        "outputs": {"logits": "logits", "present_key_names": "present.%d.key",
                    "present_value_names": "present.%d.value"},
    }
    if style == "onnx":
        dec["inputs"]["position_ids"] = "position_ids"
    cfg = {"model": {"bos_token_id": 1, "context_length": 128, "decoder": dec, "eos_token_id": [2, 3],
                     "pad_token_id": 0, "type": "qwen2", "vocab_size": 300},
           "search": {"do_sample": False, "max_length": 64, "past_present_share_buffer": True, "temperature": 0.7,
                      "top_k": 40, "top_p": 0.9, "repetition_penalty": 1.1}}
    cfg["model"].update(extra)
    return json.dumps(cfg, indent=2)


def config_seeds(d):
    write(f"{d}/genai_style.json", genai_config())
    write(f"{d}/onnx_style.json", genai_config("onnx", layers=3, eos_token_id=2))
    minimal = {"model": {"decoder": {"filename": "m.onnx", "num_hidden_layers": 1, "num_attention_heads": 1,
                                     "hidden_size": 8}}}
    write(f"{d}/minimal.json", json.dumps(minimal))


def byte_char(b):
    # GPT-2's byte -> printable code point.
    printable = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    if b in printable:
        return chr(b)
    return chr(256 + sorted(set(range(256)) - set(printable)).index(b))


def bytelevel_tokenizer(merges, added, pattern, normalizer=None, post=None):
    vocab = {byte_char(b): b for b in range(256)}
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    added_tokens = [{"id": len(vocab) + i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
                     "normalized": False, "special": True} for i, c in enumerate(added)]
    return json.dumps({
        "version": "1.0", "added_tokens": added_tokens, "normalizer": normalizer,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]},
        "post_processor": post,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": [f"{a} {b}" for a, b in merges]},
    }, ensure_ascii=False)


QWEN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
        r"|\s+(?!\S)|\s+")


def tokenizer_seeds(d):
    g = byte_char(ord(" "))
    merges = [("h", "e"), ("l", "l"), ("he", "ll"), ("hell", "o"), (g, "w"), ("o", "r"), (g + "w", "or")]
    text = "\0hello world <|im_start|>user\nhéllo 123 🙂"
    write(f"{d}/bytelevel_qwen_regex.json", bytelevel_tokenizer(merges, ["<|im_start|>", "<|im_end|>"], QWEN) + text)
    post = {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                                     {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [258], "tokens": ["<s>"]}}}
    norm = {"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Lowercase"},
                                                {"type": "Replace", "pattern": {"String": "  "}, "content": " "}]}
    write(f"{d}/bytelevel_normalized_template.json",
          bytelevel_tokenizer(merges, ["<pad>", "</s>", "<s>"], r"\s+|\w+|[^\w\s]+", norm, post) + "\0Hello  WORLD")
    # Llama-2 style: Metaspace pre-tokenizer, byte_fallback, <0xNN> byte tokens.
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for piece in ["▁", "h", "e", "l", "o", "▁h", "ll", "▁he", "▁hell", "▁hello", "w", "r", "d", "▁w", "or"]:
        vocab.setdefault(piece, len(vocab))
    spm = {
        "version": "1.0",
        "added_tokens": [{"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for i, c in enumerate(["<unk>", "<s>", "</s>"])],
        "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"},
                                                           {"type": "Replace", "pattern": {"String": " "},
                                                            "content": "▁"}]},
        "pre_tokenizer": None,
        "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                                                    {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"},
            {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": vocab, "merges": [["▁", "h"], ["l", "l"], ["▁h", "e"], ["▁he", "ll"], ["▁hell", "o"],
                                              ["▁", "w"], ["o", "r"]]},
    }
    write(f"{d}/metaspace_byte_fallback.json", json.dumps(spm, ensure_ascii=False) + "\0hello world ñ")


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
    value_seeds(os.path.join(root, "value_pb"))
    config_seeds(os.path.join(root, "genai_config"))
    tokenizer_seeds(os.path.join(root, "tokenizer"))


if __name__ == "__main__":
    main()
