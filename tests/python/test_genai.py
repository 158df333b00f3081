"""nxrt.genai against onnxruntime_genai's API, on the tiny LLM folders tools/make_genai_model.py writes,
checked against tools/genai_reference.py (a float64 numpy forward of the same weights)."""
import json
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import nxrt
import nxrt.genai as og

PROMPT = [5, 17, 300, 42, 7]
NEW_TOKENS = 6


@pytest.fixture(scope="module", params=["genai", "onnx"])
def folder(request, repo_root, tmp_path_factory):
    """A tiny model folder of each graph style. The genai style (MatMulNBits) is built at accuracy_level 0,
    so its float arithmetic compares with the float64 reference (as tests/cli/genai_test.sh does)."""
    out = str(tmp_path_factory.mktemp("genai") / request.param)
    extra = ["--accuracy-level", "0"] if request.param == "genai" else []
    subprocess.run([sys.executable, os.path.join(repo_root, "tools", "make_genai_model.py"), out, "--style", request.param,
                    "--size", "tiny"] + extra, check=True, stdout=subprocess.DEVNULL)
    return out


@pytest.fixture(scope="module")
def reference(folder, repo_root, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("reference"))
    subprocess.run([sys.executable, os.path.join(repo_root, "tools", "genai_reference.py"), folder, out, "--prompt-ids",
                    ",".join(map(str, PROMPT)), "--max-new-tokens", str(NEW_TOKENS)], check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(out, "tokens.json")) as f:
        tokens = json.load(f)["tokens"]
    return tokens, np.load(os.path.join(out, "step_logits.npy"))


def close_to(got, want):
    """The tools/compare_logits.py rule: within 1e-3 of the row's max |logit| (absolute floor 1e-3)."""
    return np.abs(got - want).max() <= max(1e-3, 1e-3 * np.abs(want).max())


def test_greedy_generation_matches_the_reference(folder, reference):
    ref_tokens, ref_logits = reference
    model = og.Model(folder)
    assert model.type == "qwen2" and model.device_type == "cpu"
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=len(PROMPT) + NEW_TOKENS, do_sample=False)
    generator = og.Generator(model, params)
    generator.append_tokens(np.array(PROMPT, np.int32))
    logits = generator.get_logits()
    assert logits.dtype == np.float32 and logits.shape == (1, 1, ref_logits.shape[1])
    assert close_to(logits[0, 0], ref_logits[0])
    step = 0
    while not generator.is_done():
        generator.generate_next_token()
        step += 1
        next_tokens = generator.get_next_tokens()
        assert next_tokens.dtype == np.int32 and next_tokens.shape == (1,)
        if step < NEW_TOKENS and not generator.is_done():
            assert close_to(generator.get_logits()[0, 0], ref_logits[step])
    sequence = generator.get_sequence(0)
    assert sequence.dtype == np.int32
    assert sequence.tolist()[: len(PROMPT)] == PROMPT
    assert sequence.tolist()[len(PROMPT):] == ref_tokens[: len(sequence) - len(PROMPT)]
    assert generator.token_count() == len(sequence)


def greedy_within(model, reference, tolerance):
    """Greedy decoding of PROMPT: each step's logits within tolerance * the row's largest reference logit
    of the float64 reference, and the reference's tokens."""
    ref_tokens, ref_logits = reference
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=len(PROMPT) + NEW_TOKENS, do_sample=False)
    generator = og.Generator(model, params)
    generator.append_tokens(np.array(PROMPT, np.int32))
    for step in range(NEW_TOKENS):
        got, want = generator.get_logits()[0, 0], ref_logits[step]
        assert np.abs(got - want).max() <= tolerance * np.abs(want).max(), step
        generator.generate_next_token()
        if generator.is_done():
            break
    assert generator.get_sequence(0).tolist()[len(PROMPT):] == ref_tokens[:NEW_TOKENS]


def test_float16_kv_cache(folder, reference):
    """kv_dtype="float16" (nxrt's own option): the genai style's GroupQueryAttention cache is float16, its
    logits stay within float16 rounding of the float64 reference and the greedy tokens are the same;
    the onnx style (Attention + TensorScatter) keeps its float32 cache and its exact results."""
    tolerance = 3e-3 if folder.endswith("genai") else 1e-3  # float16 cache: measured 4-6e-4 of the row's max
    greedy_within(og.Model(folder, kv_dtype="float16"), reference, tolerance)
    with pytest.raises(ValueError, match="kv_dtype"):
        og.Model(folder, kv_dtype="int8")


def test_float16_weight_scales(folder, reference):
    """weight_scales="float16" (nxrt's own option): float32 MatMulNBits scales rounded to float16 values
    (a relative change of at most 2^-11 per scale); the logits stay within that of the float64 reference
    and the greedy tokens are the same."""
    greedy_within(og.Model(folder, weight_scales="float16"), reference, 3e-3)
    with pytest.raises(ValueError, match="weight_scales"):
        og.Model(folder, weight_scales="int8")


def test_rewind_and_regenerate(folder):
    model = og.Model(og.Config(folder))
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=16)
    generator = og.Generator(model, params)
    generator.append_tokens(PROMPT)  # a list works too
    for _ in range(3):
        generator.generate_next_token()
    first = generator.get_sequence(0).tolist()
    generator.rewind_to(len(PROMPT))
    assert generator.token_count() == len(PROMPT)
    for _ in range(3):
        generator.generate_next_token()
    assert generator.get_sequence(0).tolist() == first
    generator.rewind_to(2)
    generator.append_tokens(np.array([PROMPT[2:]], np.int64))  # [1, n] works too
    generator.generate_next_token()
    assert generator.get_sequence(0).tolist()[: len(PROMPT) + 1] == first[: len(PROMPT) + 1]


def test_search_options(folder):
    model = og.Model(folder)
    params = og.GeneratorParams(model)
    defaults = params.get_search_options()
    assert defaults["stop_at_eos"] is True and defaults["num_beams"] == 1 and defaults["batch_size"] == 1
    params.set_search_options(do_sample=True, top_k=5, top_p=0.9, temperature=0.7, random_seed=7, max_length=12,
                              repetition_penalty=1.1, num_beams=1, batch_size=1)
    opts = params.get_search_options()
    assert (opts["do_sample"], opts["top_k"], opts["top_p"], opts["temperature"], opts["random_seed"],
            opts["max_length"]) == (True, 5, 0.9, 0.7, 7, 12)

    def sample():
        g = og.Generator(model, params)
        g.append_tokens(PROMPT)
        while not g.is_done():
            g.generate_next_token()
        return g.get_sequence(0).tolist()

    assert sample() == sample()  # same seed, same tokens
    params.set_search_options(num_beams=4, num_return_sequences=2, length_penalty=0.8, early_stopping=False,
                              batch_size=2, min_length=3, no_repeat_ngram_size=2)
    opts = params.get_search_options()
    assert (opts["num_beams"], opts["num_return_sequences"], opts["length_penalty"], opts["early_stopping"],
            opts["batch_size"], opts["min_length"], opts["no_repeat_ngram_size"]) == (4, 2, 0.8, False, 2, 3, 2)
    with pytest.raises(nxrt.capi.NotImplemented, match="diversity_penalty"):
        params.set_search_options(diversity_penalty=0.5)
    with pytest.raises(nxrt.capi.InvalidArgument, match="unknown search option 'top_q'"):
        params.set_search_options(top_q=1)
    with pytest.raises(nxrt.capi.InvalidArgument, match="'top_k' takes an int"):
        params.set_search_options(top_k=1.5)
    assert params.get_search_options()["top_k"] == 5  # a failed call changes nothing


def test_errors_and_limits(folder):
    model = og.Model(folder)
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=len(PROMPT) + 1)
    g = og.Generator(model, params)
    g.append_tokens(PROMPT)
    g.generate_next_token()
    assert g.is_done()
    with pytest.raises(nxrt.capi.InvalidArgument, match="generation is done"):
        g.generate_next_token()
    with pytest.raises(nxrt.capi.InvalidArgument, match="the generator has 1"):
        g.get_sequence(1)
    with pytest.raises(nxrt.capi.InvalidArgument, match=r"expected \[batch_size 1, n\]"):
        g.append_tokens(np.zeros((2, 3), np.int32))
    other = og.Model(folder)
    with pytest.raises(nxrt.capi.InvalidArgument, match="another Model"):
        og.Generator(other, params)
    with pytest.raises(nxrt.capi.NoSuchFile):
        og.Model(os.path.join(folder, "no-such-folder"))


def test_generator_threads_take_turns(folder):
    model = og.Model(folder)
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=32)
    g = og.Generator(model, params)
    g.append_tokens(PROMPT)
    errors = []

    def step():
        try:
            for _ in range(5):
                g.generate_next_token()
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=step) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and g.token_count() == len(PROMPT) + 15


def test_availability_config_and_not_yet():
    for check in (og.is_cuda_available, og.is_dml_available, og.is_rocm_available, og.is_webgpu_available,
                  og.is_qnn_available, og.is_openvino_available):
        assert check() is False
    og.set_log_options(enabled=True)
    with pytest.raises(AttributeError, match="Adapters is not available yet: LoRA"):
        og.Adapters  # noqa: B018
    assert not hasattr(og, "MultiModalProcessor")
    assert hasattr(og, "Tokenizer") and hasattr(og, "TokenizerStream")
    with pytest.raises(AttributeError, match="has no attribute 'Nope'"):
        og.Nope  # noqa: B018


def test_config_providers(folder):
    config = og.Config(folder)
    config.clear_providers()
    config.append_provider("cpu")
    with pytest.warns(RuntimeWarning, match="provider 'cuda' is ignored"):
        config.append_provider("cuda")
    config.set_provider_option("cuda", "device_id", "0")
    config.set_provider_option("enable_cuda_graph", "0")
    model = og.Model(config)
    assert model.vocab_size > 0
    with pytest.raises(nxrt.capi.NoSuchFile):
        og.Config(os.path.join(folder, "missing"))


def reference_batch(folder, repo_root, tmp_path, prompts, new_tokens, beams=1, returns=1):
    out = str(tmp_path / f"batch_{beams}")
    args = [sys.executable, os.path.join(repo_root, "tools", "genai_reference.py"), folder, out,
            "--batch", ";".join(",".join(map(str, p)) for p in prompts), "--max-new-tokens", str(new_tokens)]
    if beams > 1:
        args += ["--num-beams", str(beams), "--num-return-sequences", str(returns)]
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(out, "batch.json")) as f:
        return json.load(f)["sequences"]


def test_batch_and_beam_search_match_the_reference(folder, repo_root, tmp_path):
    """Two prompts of different lengths, left-padded with pad_token_id: greedy rows and 4-beam hypotheses
    equal the float64 reference (onnxruntime_genai's semantics)."""
    model = og.Model(folder)
    prompts = [PROMPT, [9, 8, 7]]
    pad = 0  # the tiny folders' pad_token_id
    width = max(map(len, prompts))
    ids = np.array([[pad] * (width - len(p)) + p for p in prompts], np.int32)
    for beams, returns in ((1, 1), (4, 4)):
        want = reference_batch(folder, repo_root, tmp_path, prompts, NEW_TOKENS, beams, returns)
        params = og.GeneratorParams(model)
        params.set_search_options(max_length=width + NEW_TOKENS, batch_size=2, num_beams=beams,
                                  num_return_sequences=returns, stop_at_eos=False)
        g = og.Generator(model, params)
        g.append_tokens(ids)
        assert g.get_logits().shape == (2 * beams, 1, model.vocab_size)
        while not g.is_done():
            g.generate_next_token()
            assert g.get_next_tokens().shape == (2 * beams,)
        got = [g.get_sequence(i).tolist() for i in range(2 * returns)]
        assert got == want, f"num_beams {beams}"
        assert g.get_search_options()["num_beams"] == beams


def test_set_logits_steers_the_next_tokens(folder):
    model = og.Model(folder)
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=16, batch_size=2)
    g = og.Generator(model, params)
    g.append_tokens(np.array([[5, 17, 300], [0, 4, 9]], np.int64))
    logits = g.get_logits()
    assert logits.shape == (2, 1, model.vocab_size)
    edited = np.full((2, model.vocab_size), -10.0, np.float32)
    edited[0, 123] = edited[1, 45] = 10.0
    g.set_logits(edited)
    g.generate_next_token()
    assert g.get_next_tokens().tolist() == [123, 45]
    with pytest.raises(nxrt.capi.InvalidArgument, match="set_logits"):
        g.set_logits(np.zeros(3, np.float32))
