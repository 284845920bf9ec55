"""shapejit: a CPU runtime for neural networks whose shapes change at run time.

Its API follows onnxruntime's ``InferenceSession`` for the common subset, so
``import shapejit as ort`` runs typical onnxruntime inference code unchanged.
"""

import enum
import os
from typing import Any, Dict, List, Literal, Optional, Sequence, Tuple, Union

import numpy as np

__version__: str
"""The package version (the shapejit crate's)."""

class Error(Exception):
    """Base class of every shapejit error."""

class InvalidArgument(Error):
    """A bad call: an unknown or missing input name, a wrong dtype, rank or
    shape (the message names the input, expected vs got), an unknown output
    name, provider, option or keyword argument."""

class NoSuchFile(Error):
    """A model file (or its external data, or an image's directory) that
    cannot be read or written."""

class InvalidGraph(Error):
    """A model that does not parse, import, type-check, lower or verify."""

class Fail(Error):
    """A run that failed: shapes that disagree between nodes, memory, or an
    internal error."""

class GraphOptimizationLevel(enum.IntEnum):
    """Accepted for compatibility; shapejit always runs its own pipeline."""

    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_LAYOUT = 3
    ORT_ENABLE_ALL = 99

class SessionOptions:
    """Session options, as onnxruntime's."""

    intra_op_num_threads: int
    """Threads inside one op (0 = shapejit's default)."""
    inter_op_num_threads: int
    """Accepted; shapejit runs one op at a time per call."""
    graph_optimization_level: GraphOptimizationLevel
    """Accepted; has no effect."""
    log_severity_level: int
    enable_profiling: bool
    def __init__(self) -> None: ...

class RunOptions:
    """Accepted by ``InferenceSession.run``; has no effect."""

    log_severity_level: int
    tag: str
    def __init__(self) -> None: ...

class NodeArg:
    """A model input or output."""

    name: str
    """The value's name in the graph."""
    shape: List[Union[int, str]]
    """Each dim: an int when fixed, else the symbol (``'batch'``) or the
    expression (``'batch*32'``) that sizes it."""
    type: str
    """``'tensor(float)'``, ``'tensor(int32)'``, ``'tensor(int64)'``, ``'tensor(bool)'``."""

class ModelMetadata:
    """What the model file says about itself (empty strings for sources
    other than ONNX, except ``graph_name``)."""

    producer_name: str
    producer_version: str
    graph_name: str
    domain: str
    description: str
    graph_description: str
    version: int
    custom_metadata_map: Dict[str, str]

ModelSource = Union[str, os.PathLike, bytes]

class InferenceSession:
    """A loaded model. One session may be used from many Python threads at
    once: each call runs on a runtime of its own (from a pool), with the GIL
    released while the model runs."""

    def __init__(
        self,
        path_or_bytes: ModelSource,
        sess_options: Optional[SessionOptions] = None,
        providers: Optional[Sequence[Union[str, Tuple[str, Dict[str, Any]]]]] = None,
        tier: Literal["jit", "interp"] = "jit",
        compile: Literal["background", "sync", "off"] = "background",
        **kwargs: Any,
    ) -> None:
        """Loads a model: a ``.onnx``, ``.sjir`` or ``.sjb`` path,
        ``'builtin:NAME'``, or the bytes of an ONNX model.

        ``providers``: only ``'CPUExecutionProvider'`` (anything else is an
        ``InvalidArgument``). ``tier``: ``'jit'`` compiles hot regions for the
        shapes seen, ``'interp'`` only interprets. ``compile``: when kernels are
        compiled (``'background'`` thread, ``'sync'`` on the calling thread,
        ``'off'``). onnxruntime's ``provider_options``,
        ``disabled_optimizers`` and ``read_config_from_model`` are accepted and
        ignored; other keywords are an ``InvalidArgument``.

        Raises ``NoSuchFile``, ``InvalidGraph`` or ``InvalidArgument``."""
    def run(
        self,
        output_names: Optional[Sequence[str]],
        input_feed: Dict[str, Any],
        run_options: Optional[RunOptions] = None,
    ) -> List[np.ndarray]:
        """Runs the model on ``input_feed`` (input name → array) and returns
        the outputs named by ``output_names`` (``None``: all, in order).

        An array of the input's dtype that is C-contiguous is read in place;
        other layouts (Fortran order, strided views, byte-swapped) are
        converted once; other values go through ``numpy.asarray``; an array
        of another dtype is an ``InvalidArgument``, as in onnxruntime. Each
        output is a writeable array that owns the runtime's buffer (no copy).
        Do not write to an input array from another thread during a run.

        Raises ``InvalidArgument`` (bad inputs or names) or ``Fail``."""
    def get_inputs(self) -> List[NodeArg]:
        """The inputs, in order."""
    def get_outputs(self) -> List[NodeArg]:
        """The outputs, in order."""
    def get_overridable_initializers(self) -> List[NodeArg]:
        """Always empty: initializers are constants of the lowered program."""
    def get_modelmeta(self) -> ModelMetadata:
        """The model's metadata (``producer_name``, ``graph_name``, ...)."""
    def get_providers(self) -> List[str]:
        """``['CPUExecutionProvider']``."""
    def get_provider_options(self) -> Dict[str, Dict[str, str]]:
        """``{'CPUExecutionProvider': {}}``."""
    def get_session_options(self) -> SessionOptions:
        """The options the session was made with."""
    def set_providers(
        self,
        providers: Optional[Sequence[Union[str, Tuple[str, Dict[str, Any]]]]] = None,
        provider_options: Optional[Sequence[Dict[str, Any]]] = None,
    ) -> None:
        """Accepts only the CPU provider."""
    def stats(self) -> Dict[str, Any]:
        """Per-slot and global statistics: a dict with the fields of the
        ``stats`` object of ``shapejit run --stats --json`` (``slots``: kind,
        node, executions, interpreter time, kernel hits, guard misses,
        compiles, evictions, shape keys; ``global``: compile queue, dropped
        requests, live code and packed-weight bytes)."""

def compile(model: ModelSource, path: Union[str, os.PathLike]) -> None:
    """Lowers ``model`` once and writes its memory-mappable ``.sjb`` bytecode
    image to ``path``; ``InferenceSession(path)`` loads it without parsing or
    lowering. Raises ``NoSuchFile`` when ``path`` cannot be written."""

def get_available_providers() -> List[str]:
    """``['CPUExecutionProvider']``."""

def get_device() -> str:
    """``'CPU'``."""
