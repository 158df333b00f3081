"""InferenceSession, SessionOptions and RunOptions: ONNX Runtime's Python API over nxrt's C++ session."""
from __future__ import annotations

import datetime
import enum
import os
import warnings
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from nxrt import _nxrt
from nxrt._nxrt import IOBinding, ModelMetadata, NodeArg, OrtValue

_CPU = "CPUExecutionProvider"


class GraphOptimizationLevel(enum.IntEnum):
    """How much the graph is rewritten at session creation (nxrt has three levels)."""

    ORT_DISABLE_ALL = 0  #: nxrt "disabled": the graph runs as written
    ORT_ENABLE_BASIC = 1  #: nxrt "basic": constant folding, Identity/Dropout removal, dead code
    ORT_ENABLE_EXTENDED = 2  #: nxrt "all" (nxrt has no separate extended level)
    ORT_ENABLE_ALL = 99  #: nxrt "all": basic plus fusions (Conv+BN, attention, norms, GELU, ...)


class ExecutionMode(enum.IntEnum):
    """Accepted for compatibility; nxrt runs the graph's nodes in order (sequential)."""

    ORT_SEQUENTIAL = 0
    ORT_PARALLEL = 1


# nxrt::OptLevel: 0 disabled, 1 basic, 2 all.
_NXRT_OPT_LEVEL = {
    GraphOptimizationLevel.ORT_DISABLE_ALL: 0,
    GraphOptimizationLevel.ORT_ENABLE_BASIC: 1,
    GraphOptimizationLevel.ORT_ENABLE_EXTENDED: 2,
    GraphOptimizationLevel.ORT_ENABLE_ALL: 2,
}

_default_logger_severity = 2
_default_logger_verbosity = 0


def get_available_providers() -> List[str]:
    """The execution providers this build has: nxrt runs on the CPU only."""
    return [_CPU]


def get_device() -> str:
    """The device nxrt runs on: "CPU"."""
    return "CPU"


def set_default_logger_severity(severity: int) -> None:
    """Accepted for compatibility (0 verbose .. 4 fatal). nxrt prints nothing but errors, which it raises."""
    global _default_logger_severity
    if not 0 <= int(severity) <= 4:
        raise ValueError(f"logger severity {severity} is not in 0..4")
    _default_logger_severity = int(severity)


def set_default_logger_verbosity(verbosity: int) -> None:
    """Accepted for compatibility; has no effect."""
    global _default_logger_verbosity
    _default_logger_verbosity = int(verbosity)


def _usable_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


class SessionOptions:
    """Options for InferenceSession, with ONNX Runtime's names.

    Used by nxrt: intra_op_num_threads (0 = every core this process may use), graph_optimization_level,
    enable_profiling / profile_file_prefix (a Chrome-trace JSON, see InferenceSession.end_profiling),
    optimized_model_filepath (the optimized graph as ONNX; fused nodes are in nxrt's own domain) and
    log_severity_level. Accepted and kept, without effect: inter_op_num_threads, execution_mode,
    enable_cpu_mem_arena, enable_mem_pattern, enable_mem_reuse, use_deterministic_compute (nxrt's CPU
    kernels are deterministic), log_verbosity_level, logid, and session config entries.
    """

    def __init__(self) -> None:
        self.intra_op_num_threads: int = 0
        self.inter_op_num_threads: int = 0
        self.graph_optimization_level: GraphOptimizationLevel = GraphOptimizationLevel.ORT_ENABLE_ALL
        self.execution_mode: ExecutionMode = ExecutionMode.ORT_SEQUENTIAL
        self.enable_profiling: bool = False
        self.profile_file_prefix: str = "onnxruntime_profile_"
        self.optimized_model_filepath: str = ""
        self.log_severity_level: int = 2
        self.log_verbosity_level: int = 0
        self.logid: str = ""
        self.enable_cpu_mem_arena: bool = True
        self.enable_mem_pattern: bool = True
        self.enable_mem_reuse: bool = True
        self.use_deterministic_compute: bool = False
        self._config_entries: Dict[str, str] = {}

    def add_session_config_entry(self, config_key: str, config_value: str) -> None:
        """Stores a key/value entry (ONNX Runtime's session.* keys); nxrt does not act on any of them."""
        if not isinstance(config_key, str) or not isinstance(config_value, str):
            raise _nxrt.InvalidArgument("session config entries are str -> str")
        self._config_entries[config_key] = config_value

    def get_session_config_entry(self, config_key: str) -> str:
        """The value stored for config_key; InvalidArgument when there is none."""
        if config_key not in self._config_entries:
            raise _nxrt.InvalidArgument(f"SessionOptions has no config entry '{config_key}'")
        return self._config_entries[config_key]

    def _threads(self) -> int:
        n = int(self.intra_op_num_threads)
        if n < 0:
            raise _nxrt.InvalidArgument(f"intra_op_num_threads {n} is negative")
        return n if n > 0 else _usable_cores()

    def _opt_level(self) -> int:
        try:
            level = GraphOptimizationLevel(int(self.graph_optimization_level))
        except ValueError:
            raise _nxrt.InvalidArgument(
                f"graph_optimization_level {self.graph_optimization_level!r} is not a GraphOptimizationLevel"
            ) from None
        return _NXRT_OPT_LEVEL[level]

    def _nxrt_log_level(self) -> int:
        # ONNX Runtime: 0 verbose, 1 info, 2 warning, 3 error, 4 fatal; nxrt: 0 error .. 3 debug.
        return max(0, 3 - int(self.log_severity_level))


class RunOptions:
    """Per-run options, with ONNX Runtime's names. `terminate` set before a run makes it fail at once
    (nxrt cannot stop a run that has started); the others are kept without effect."""

    def __init__(self) -> None:
        self.log_severity_level: int = 2
        self.log_verbosity_level: int = 0
        self.logid: str = ""
        self.run_tag: str = ""
        self.terminate: bool = False
        self.only_execute_path_to_fetches: bool = False
        self._config_entries: Dict[str, str] = {}

    def add_run_config_entry(self, config_key: str, config_value: str) -> None:
        self._config_entries[str(config_key)] = str(config_value)

    def get_run_config_entry(self, config_key: str) -> str:
        if config_key not in self._config_entries:
            raise _nxrt.InvalidArgument(f"RunOptions has no config entry '{config_key}'")
        return self._config_entries[config_key]


def _check_run_options(run_options: Optional[RunOptions]) -> None:
    if run_options is not None and run_options.terminate:
        raise _nxrt.Fail("run not started: RunOptions.terminate is set")


ProviderSpec = Union[str, Tuple[str, Dict[str, Any]]]


def _resolve_providers(
    providers: Optional[Sequence[ProviderSpec]], provider_options: Optional[Sequence[Dict[str, Any]]]
) -> Dict[str, str]:
    """The CPU provider's options. Other providers are reported and dropped, as ONNX Runtime does when
    a requested provider is not in the build; the session runs on the CPU either way."""
    if providers is None:
        return {}
    if provider_options is not None and len(provider_options) != len(providers):
        raise ValueError("'providers' and 'provider_options' should be the same length if both are given.")
    cpu_options: Dict[str, str] = {}
    for i, spec in enumerate(providers):
        if isinstance(spec, tuple):
            if len(spec) != 2 or not isinstance(spec[0], str) or not isinstance(spec[1], dict):
                raise ValueError(f"provider {spec!r} is not a name or a (name, options dict) pair")
            name, options = spec
        elif isinstance(spec, str):
            name, options = spec, {}
        else:
            raise ValueError(f"provider {spec!r} is not a name or a (name, options dict) pair")
        if provider_options is not None:
            options = dict(options, **provider_options[i])
        if name == _CPU:
            cpu_options.update({str(k): str(v) for k, v in options.items()})
        else:
            warnings.warn(
                f"Specified provider '{name}' is not in available provider names. "
                f"Available providers: '{_CPU}'. nxrt runs this session on the CPU.",
                RuntimeWarning,
                stacklevel=3,
            )
    return cpu_options


def _nxrt_passes(names: Optional[Sequence[str]]) -> List[str]:
    """disabled_optimizers: the names that are nxrt's passes (nxrt.optimizer_pass_names()). ONNX Runtime
    ignores a name it does not know; its passes have other names than nxrt's, so such a name (say
    'EliminateDropout') is skipped here with a RuntimeWarning instead of failing the session."""
    if names is None:
        return []
    if isinstance(names, str):
        names = [names]
    known = set(_nxrt.optimizer_pass_names())
    mine = [str(n) for n in names if str(n) in known]
    others = [str(n) for n in names if str(n) not in known]
    if others:
        warnings.warn(
            f"disabled_optimizers {others} are not nxrt optimizer passes and are ignored "
            f"(nxrt's passes: {', '.join(_nxrt.optimizer_pass_names())})",
            RuntimeWarning,
            stacklevel=3,
        )
    return mine


class InferenceSession:
    """Loads an ONNX model and runs it, like onnxruntime.InferenceSession.

    path_or_bytes: a file path (str or os.PathLike) or the model's bytes. sess_options: SessionOptions.
    providers / provider_options: as ONNX Runtime takes them; "CPUExecutionProvider" is the one nxrt
    has, others give a RuntimeWarning and the session runs on the CPU.

    Inputs are read in place when they are C-contiguous numpy arrays of the declared dtype; outputs are
    numpy arrays over nxrt's own buffers (no copy). The GIL is released while the model runs; several
    threads may call run() on one session (their runs take turns).
    """

    def __init__(
        self,
        path_or_bytes: Union[str, bytes, "os.PathLike[str]"],
        sess_options: Optional[SessionOptions] = None,
        providers: Optional[Sequence[ProviderSpec]] = None,
        provider_options: Optional[Sequence[Dict[str, Any]]] = None,
        **kwargs: Any,
    ) -> None:
        if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
            self._model_path: Optional[str] = None
            model: Union[str, bytes] = bytes(path_or_bytes)
        elif isinstance(path_or_bytes, (str, os.PathLike)):
            self._model_path = os.fspath(path_or_bytes)
            model = self._model_path
        else:
            raise TypeError(f"Unable to load from type '{type(path_or_bytes)}': pass a path or the model's bytes")
        unknown = set(kwargs) - {"disabled_optimizers"}
        if unknown:
            raise TypeError(f"InferenceSession got unexpected keyword arguments {sorted(unknown)}")
        self._sess_options = sess_options if sess_options is not None else SessionOptions()
        self._provider_options = {_CPU: _resolve_providers(providers, provider_options)}
        opts = self._sess_options
        trace_path = ""
        if opts.enable_profiling:
            stamp = datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
            trace_path = f"{opts.profile_file_prefix}_{stamp}.json"
        self._sess = _nxrt.Session(
            model,
            threads=opts._threads(),
            opt_level=opts._opt_level(),
            trace_path=trace_path,
            optimized_model_path=os.fspath(opts.optimized_model_filepath or ""),
            log_level=opts._nxrt_log_level(),
            disabled_optimizers=_nxrt_passes(kwargs.get("disabled_optimizers")),
        )
        self._inputs = self._sess.inputs
        self._outputs = self._sess.outputs
        self._overridable = self._sess.overridable_initializers

    def run(
        self,
        output_names: Optional[Sequence[str]],
        input_feed: Dict[str, Any],
        run_options: Optional[RunOptions] = None,
    ) -> List[Any]:
        """Runs the model. output_names: the outputs wanted, in order (None: all). input_feed: {name:
        value}: numpy arrays (or what np.asarray takes) for tensors, lists for sequences, dicts for maps,
        None for an empty optional. Returns one entry per output: numpy arrays, lists, dicts, or None."""
        if run_options is not None:
            _check_run_options(run_options)
        return self._sess.run(output_names, input_feed)

    def run_with_ort_values(
        self,
        output_names: Optional[Sequence[str]],
        input_dict_ort_values: Dict[str, OrtValue],
        run_options: Optional[RunOptions] = None,
    ) -> List[OrtValue]:
        """Like run(), with OrtValues in and out (no numpy conversion either way)."""
        _check_run_options(run_options)
        return self._sess.run_with_ort_values(output_names, input_dict_ort_values)

    def io_binding(self) -> IOBinding:
        """A new IOBinding for this session (see run_with_iobinding)."""
        return IOBinding(self)

    def run_with_iobinding(self, iobinding: IOBinding, run_options: Optional[RunOptions] = None) -> None:
        """Runs with the inputs and outputs bound in iobinding; read them with iobinding.get_outputs()."""
        _check_run_options(run_options)
        self._sess.run_with_iobinding(iobinding)

    def get_inputs(self) -> List[NodeArg]:
        """Graph inputs that need feeding (initializer-backed inputs are get_overridable_initializers())."""
        return list(self._inputs)

    def get_outputs(self) -> List[NodeArg]:
        return list(self._outputs)

    def get_overridable_initializers(self) -> List[NodeArg]:
        """Graph inputs with an initializer as default: feeding one replaces the initializer for that run."""
        return list(self._overridable)

    def get_modelmeta(self) -> ModelMetadata:
        return self._sess.metadata

    def get_providers(self) -> List[str]:
        return [_CPU]

    def get_provider_options(self) -> Dict[str, Dict[str, str]]:
        return {k: dict(v) for k, v in self._provider_options.items()}

    def set_providers(
        self, providers: Optional[Sequence[ProviderSpec]] = None, provider_options: Optional[Sequence[Dict[str, Any]]] = None
    ) -> None:
        """Accepted for compatibility: the session stays on the CPU (other providers warn)."""
        self._provider_options = {_CPU: _resolve_providers(providers, provider_options)}

    def disable_fallback(self) -> None:
        """No-op: there is nothing to fall back from."""

    def enable_fallback(self) -> None:
        """No-op: there is nothing to fall back from."""

    def get_session_options(self) -> SessionOptions:
        return self._sess_options

    def end_profiling(self) -> str:
        """Writes the profile (Chrome-trace JSON: one span per session phase, run and executed node) and
        stops profiling. Returns the file's path, or "" when profiling was off."""
        return self._sess.end_profiling()

    def read_value_file(self, path: str, name: str) -> Tuple[str, Any]:
        """nxrt extension: reads an ONNX test-data .pb file (TensorProto, SequenceProto, MapProto or
        OptionalProto) as the graph input or output `name` declares it. Returns (the proto's name, the
        value as run() would return it)."""
        return self._sess.read_value_file(os.fspath(path), name)
