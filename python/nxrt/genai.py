"""nxrt.genai: onnxruntime_genai's Python API over nxrt's generator (include/nxrt/genai.h).

    import nxrt.genai as og
    model = og.Model("qwen2.5-0.5b-int4")          # folder with genai_config.json
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=64)
    generator = og.Generator(model, params)
    generator.append_tokens(prompt_ids)
    while not generator.is_done():
        generator.generate_next_token()
    ids = generator.get_sequence(0)

Batches (batch_size rows, shorter prompts left-padded with pad_token_id) and beam search (num_beams,
num_return_sequences, length_penalty, early_stopping) as in onnxruntime_genai; get_logits / set_logits
between steps. Tokenizer(model): encode / encode_batch / decode / decode_batch, apply_chat_template
(the folder's chat template, or template_str) and create_stream() for streaming detokenization.
"""
from __future__ import annotations

import json
import os
import warnings
from typing import Any, Dict, List, Optional, Union

from nxrt import _nxrt
from nxrt._nxrt import genai as _core

GeneratorParams = _core.GeneratorParams
Generator = _core.Generator
TokenizerStream = _core.TokenizerStream


class Tokenizer(_core.Tokenizer):
    """The model folder's tokenizer (tokenizer.json, tokenizer_config.json, chat template)."""

    def apply_chat_template(self, messages: Union[str, List[Dict[str, Any]]], *, template_str: Optional[str] = None,
                            tools: Union[str, List[Dict[str, Any]], None] = None,
                            add_generation_prompt: bool = True) -> str:
        """Renders the chat template over messages and tools: JSON strings as onnxruntime_genai takes them
        (nxrt also takes lists of dicts). Encode the result with add_special_tokens=False."""
        if not isinstance(messages, str):
            messages = json.dumps(messages)
        if tools is not None and not isinstance(tools, str):
            tools = json.dumps(tools)
        return super().apply_chat_template(messages, template_str=template_str, tools=tools,
                                           add_generation_prompt=add_generation_prompt)

# onnxruntime_genai names that nxrt.genai does not have yet, with what is missing underneath.
_NOT_YET = {
    "MultiModalProcessor": "nxrt runs decoder-only text models",
    "Images": "nxrt runs decoder-only text models",
    "Audios": "nxrt runs decoder-only text models",
    "NamedTensors": "extra model inputs are not supported",
    "Tensor": "extra model inputs are not supported",
    "Adapters": "LoRA adapters are not supported",
}


def __getattr__(name: str) -> Any:
    if name in _NOT_YET:
        raise AttributeError(f"nxrt.genai.{name} is not available yet: {_NOT_YET[name]} (see docs/python.md)")
    raise AttributeError(f"module 'nxrt.genai' has no attribute '{name}'")


def _config_file(path: str) -> str:
    return os.path.join(path, "genai_config.json") if os.path.isdir(path) else path


class Config:
    """A model folder's genai_config.json, with the provider list onnxruntime_genai lets you edit.
    nxrt runs on the CPU: providers other than "cpu" give a RuntimeWarning and are ignored."""

    def __init__(self, config_path: Union[str, "os.PathLike[str]"]) -> None:
        self._path = os.fspath(config_path)
        file = _config_file(self._path)
        try:
            with open(file, encoding="utf-8") as f:
                self._json: Dict[str, Any] = json.load(f)
        except FileNotFoundError:
            raise _nxrt.NoSuchFile(f"cannot open '{file}'") from None
        except (OSError, ValueError) as e:
            raise _nxrt.InvalidGraph(f"reading '{file}': {e}") from None
        self._providers: List[str] = []
        self._provider_options: Dict[str, Dict[str, str]] = {}

    def clear_providers(self) -> None:
        self._providers.clear()

    def append_provider(self, provider: str) -> None:
        if provider.lower() not in ("cpu", "cpuexecutionprovider"):
            warnings.warn(f"nxrt.genai runs on the CPU: provider '{provider}' is ignored", RuntimeWarning, stacklevel=2)
        self._providers.append(provider)

    def set_provider_option(self, *args: str) -> None:
        """(provider, key, value) or (key, value) for the last appended provider; kept, without effect."""
        if len(args) == 3:
            provider, key, value = args
        elif len(args) == 2:
            provider = self._providers[-1] if self._providers else "cpu"
            key, value = args
        else:
            raise TypeError("set_provider_option takes (provider, key, value) or (key, value)")
        self._provider_options.setdefault(provider, {})[str(key)] = str(value)

    def _decoder_threads(self) -> int:
        options = self._json.get("model", {}).get("decoder", {}).get("session_options", {})
        return int(options.get("intra_op_num_threads", 0) or 0)


class Model(_core.Model):
    """An LLM folder (genai_config.json and the decoder .onnx it names), from its path or a Config.
    The decoder runs with genai_config.json's session_options.intra_op_num_threads, else every core.
    kv_dtype (nxrt's own, not in onnxruntime_genai): "float16" keeps a float32 model's
    GroupQueryAttention KV cache in float16 (half its memory and decode reads); "float32" (default): the
    model's own cache type. weight_scales (nxrt's own): "float16" rounds a model's float32 MatMulNBits
    block scales to float16 values, so its int4 weights are packed with 2-byte scales (fewer bytes per
    decode step; outputs move by that rounding); "model" (default): the scales as they are."""

    def __init__(self, config_or_path: Union[Config, str, "os.PathLike[str]"], kv_dtype: str = "float32",
                 weight_scales: str = "model") -> None:
        config = config_or_path if isinstance(config_or_path, Config) else Config(config_or_path)
        if kv_dtype not in ("float16", "float32"):
            raise ValueError(f"kv_dtype must be 'float16' or 'float32', got {kv_dtype!r}")
        if weight_scales not in ("float16", "model"):
            raise ValueError(f"weight_scales must be 'float16' or 'model', got {weight_scales!r}")
        super().__init__(config._path, threads=config._decoder_threads(), kv_float16=kv_dtype == "float16",
                         weight_scales_float16=weight_scales == "float16")
        self._config = config

    @property
    def type(self) -> str:
        """model.type from genai_config.json (e.g. "qwen2")."""
        return str(self._config._json.get("model", {}).get("type", ""))

    @property
    def device_type(self) -> str:
        return "cpu"


def is_cuda_available() -> bool:
    return False


def is_dml_available() -> bool:
    return False


def is_rocm_available() -> bool:
    return False


def is_webgpu_available() -> bool:
    return False


def is_qnn_available() -> bool:
    return False


def is_openvino_available() -> bool:
    return False


def set_log_options(**options: Any) -> None:
    """Accepted for compatibility; nxrt.genai logs nothing."""


__all__ = [
    "Config",
    "Generator",
    "GeneratorParams",
    "Model",
    "Tokenizer",
    "TokenizerStream",
    "is_cuda_available",
    "is_dml_available",
    "is_openvino_available",
    "is_qnn_available",
    "is_rocm_available",
    "is_webgpu_available",
    "set_log_options",
]
