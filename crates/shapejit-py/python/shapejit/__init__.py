"""shapejit: a CPU runtime for neural networks whose shapes change at run time.

The API follows onnxruntime's ``InferenceSession`` for the common subset, so
``import shapejit as ort`` runs typical onnxruntime inference code unchanged::

    import shapejit as ort
    sess = ort.InferenceSession("model.onnx", providers=["CPUExecutionProvider"])
    (y,) = sess.run(None, {"x": x})

shapejit's own extras: ``InferenceSession(..., tier="jit"|"interp",
compile="background"|"sync"|"off")``, ``InferenceSession.stats()``,
``shapejit.compile(model, path)`` for ``.sjb`` images, ``shapejit.__version__``.
"""

from ._shapejit import (
    Error,
    Fail,
    InvalidArgument,
    InvalidGraph,
    NoSuchFile,
    __version__,
    compile,
)
from ._session import (
    GraphOptimizationLevel,
    InferenceSession,
    ModelMetadata,
    NodeArg,
    RunOptions,
    SessionOptions,
    get_available_providers,
    get_device,
)

__all__ = [
    "Error",
    "Fail",
    "GraphOptimizationLevel",
    "InferenceSession",
    "InvalidArgument",
    "InvalidGraph",
    "ModelMetadata",
    "NoSuchFile",
    "NodeArg",
    "RunOptions",
    "SessionOptions",
    "__version__",
    "compile",
    "get_available_providers",
    "get_device",
]
