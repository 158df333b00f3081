"""Exception classes, named like ONNX Runtime's (onnxruntime.capi.onnxruntime_pybind11_state).

Every error nxrt raises for a failed load or run is one of these; all derive from nxrt.NxrtError,
which derives from RuntimeError. The message is nxrt's own: it names the node, op, dtypes and shapes
involved where there are any.

- InvalidArgument: the caller passed something wrong (feeds, names, dtypes, options).
- Fail: a kernel or the runtime failed while running.
- NoSuchFile: a file could not be read or written.
- InvalidGraph: the model file or its graph is malformed.
- NotImplemented: an op, opset, dtype or option nxrt does not support (yet).
"""
from nxrt._nxrt import Fail, InvalidArgument, InvalidGraph, NoSuchFile, NotImplemented, NxrtError

__all__ = ["Fail", "InvalidArgument", "InvalidGraph", "NoSuchFile", "NotImplemented", "NxrtError"]
