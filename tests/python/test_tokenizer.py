"""nxrt.genai.Tokenizer (onnxruntime_genai's Tokenizer API) on a tiny model folder with a real byte-level
BPE tokenizer and a ChatML template (tools/make_genai_model.py --tokenizer bytelevel)."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import nxrt
import nxrt.genai as og


@pytest.fixture(scope="module")
def folder(repo_root, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("genai_tok") / "m")
    subprocess.run([sys.executable, os.path.join(repo_root, "tools", "make_genai_model.py"), out, "--style", "genai",
                    "--size", "tiny", "--tokenizer", "bytelevel"], check=True, stdout=subprocess.DEVNULL)
    return out


@pytest.fixture(scope="module")
def model(folder):
    return og.Model(folder)


@pytest.fixture(scope="module")
def tokenizer(model):
    return og.Tokenizer(model)


def test_encode_decode_round_trip(tokenizer):
    text = "Hello, world!\n\tTabs and  spaces."
    ids = tokenizer.encode(text)
    assert ids.dtype == np.int32 and ids.ndim == 1 and len(ids) > 0
    assert tokenizer.decode(ids) == text
    assert tokenizer.decode(list(map(int, ids))) == text  # a list works too


def test_special_tokens_in_text_become_their_ids(tokenizer):
    im_start = tokenizer.to_token_id("<|im_start|>")
    assert im_start >= 0
    ids = tokenizer.encode("<|im_start|>hi")
    assert ids[0] == im_start and len(ids) == 3
    assert tokenizer.decode(ids, skip_special_tokens=True) == "hi"
    assert tokenizer.to_token_id("no such token") == -1
    assert tokenizer.get_eos_token_ids() == [tokenizer.to_token_id("<|im_end|>")]


def test_encode_batch_left_pads_with_pad_token_id(tokenizer):
    texts = ["a", "three words here", "xy"]
    batch = tokenizer.encode_batch(texts)
    pad = tokenizer.get_pad_token_id()
    assert pad >= 0
    rows = [tokenizer.encode(t) for t in texts]
    width = max(len(r) for r in rows)
    assert batch.dtype == np.int32 and batch.shape == (3, width)
    for got, want in zip(batch, rows):
        assert list(got) == [pad] * (width - len(want)) + list(want)
    assert tokenizer.decode_batch(batch) == texts


def test_stream_pieces_add_up_to_decode(tokenizer):
    ids = tokenizer.encode("streamed text, piece by piece")
    stream = tokenizer.create_stream()
    assert "".join(stream.decode(int(t)) for t in ids) == tokenizer.decode(ids)


def test_apply_chat_template_folder_and_explicit(tokenizer):
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    rendered = tokenizer.apply_chat_template(json.dumps(messages), add_generation_prompt=True)
    expected = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    assert rendered == expected + "<|im_start|>assistant\n"
    assert tokenizer.apply_chat_template(messages, add_generation_prompt=False) == expected  # list of dicts
    own = "{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}{% if add_generation_prompt %}>{% endif %}"
    assert tokenizer.apply_chat_template(json.dumps(messages), template_str=own) == "[system:Be brief.][user:Hi]>"


def test_chat_template_errors_name_line_and_column(tokenizer):
    with pytest.raises(nxrt.NxrtError, match=r"template_str:1:\d+"):
        tokenizer.apply_chat_template("[]", template_str="{% for %}")
    with pytest.raises(nxrt.NxrtError):
        tokenizer.apply_chat_template("not json")


def test_bad_token_ids_raise(tokenizer):
    with pytest.raises(nxrt.capi.InvalidArgument):
        tokenizer.decode(np.array([[1, 2]], np.int32))
    with pytest.raises(nxrt.capi.InvalidArgument):
        tokenizer.decode(np.array([1.5]))
    with pytest.raises(nxrt.NxrtError):
        tokenizer.decode([10 ** 6])


def test_text_in_text_out_round_trips(model, tokenizer):
    """Prompt text -> ids -> greedy generation -> text, whose re-encoding equals the generated ids."""
    prompt = tokenizer.encode(tokenizer.apply_chat_template([{"role": "user", "content": "Hi"}]),
                              add_special_tokens=False)
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=len(prompt) + 8, do_sample=False, stop_at_eos=False)
    generator = og.Generator(model, params)
    generator.append_tokens(prompt)
    stream = tokenizer.create_stream()
    pieces = []
    while not generator.is_done():
        generator.generate_next_token()
        pieces.append(stream.decode(int(generator.get_next_tokens()[0])))
    new_ids = generator.get_sequence(0)[len(prompt):]
    text = "".join(pieces)
    assert text == tokenizer.decode(new_ids)
    assert list(tokenizer.encode(text, add_special_tokens=False)) == list(new_ids)
