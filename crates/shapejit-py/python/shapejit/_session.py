"""onnxruntime-shaped session classes over the native ``_shapejit.Session``.

Only the run itself, loading and the numpy conversions are native; this
module maps onnxruntime's options and introspection objects onto them.
"""

import enum
import json

from . import _shapejit

_CPU = "CPUExecutionProvider"
# onnxruntime keyword arguments that have no meaning here and are ignored.
_ORT_KWARGS = {"provider_options", "disabled_optimizers", "read_config_from_model"}


class GraphOptimizationLevel(enum.IntEnum):
    """Accepted for compatibility; shapejit always runs its own pipeline."""

    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_LAYOUT = 3
    ORT_ENABLE_ALL = 99


class SessionOptions:
    """Session options; ``intra_op_num_threads`` is the intra-op thread count
    (0 = shapejit's default), the others are accepted for compatibility."""

    def __init__(self):
        self.intra_op_num_threads = 0
        self.inter_op_num_threads = 0
        self.graph_optimization_level = GraphOptimizationLevel.ORT_ENABLE_ALL
        self.log_severity_level = 2
        self.enable_profiling = False


class RunOptions:
    """Accepted by ``run`` for compatibility; it has no effect."""

    def __init__(self):
        self.log_severity_level = 2
        self.tag = ""


class NodeArg:
    """An input or output: ``name``, ``shape`` (ints, and strings for symbolic
    dims) and ``type`` (``'tensor(float)'``, ...)."""

    __slots__ = ("name", "shape", "type")

    def __init__(self, name, shape, type):
        self.name = name
        self.shape = shape
        self.type = type

    def __repr__(self):
        return f"NodeArg(name={self.name!r}, type={self.type!r}, shape={self.shape!r})"


class ModelMetadata:
    """What the model file says about itself."""

    def __init__(self, d):
        self.producer_name = d["producer_name"]
        self.producer_version = d["producer_version"]
        self.graph_name = d["graph_name"]
        self.domain = d["domain"]
        self.description = d["description"]
        self.graph_description = ""
        self.version = d["version"]
        self.custom_metadata_map = d["custom_metadata_map"]


def get_available_providers():
    """The execution providers: shapejit runs on the CPU only."""
    return [_CPU]


def get_device():
    """The device kind, as onnxruntime reports it."""
    return "CPU"


def _check_providers(providers):
    for p in providers or ():
        name = p[0] if isinstance(p, tuple) else p
        if name != _CPU:
            raise _shapejit.InvalidArgument(
                f"provider {name!r} is not available: shapejit runs on the CPU only "
                f"(providers: {[_CPU]!r})"
            )


class InferenceSession:
    """A loaded model, runnable from any number of threads at once."""

    def __init__(
        self,
        path_or_bytes,
        sess_options=None,
        providers=None,
        tier="jit",
        compile="background",
        **kwargs,
    ):
        unknown = sorted(set(kwargs) - _ORT_KWARGS)
        if unknown:
            raise _shapejit.InvalidArgument(
                f"unknown keyword argument(s) {', '.join(unknown)} "
                "(shapejit's own are tier= and compile=)"
            )
        _check_providers(providers)
        self._options = sess_options if sess_options is not None else SessionOptions()
        threads = getattr(self._options, "intra_op_num_threads", 0)
        if not isinstance(threads, int) or threads < 0:
            raise _shapejit.InvalidArgument(
                f"intra_op_num_threads must be an int >= 0, got {threads!r}"
            )
        self._sess = _shapejit.Session(path_or_bytes, tier, compile, threads)
        self._inputs = [NodeArg(*a) for a in self._sess.inputs_info()]
        self._outputs = [NodeArg(*a) for a in self._sess.outputs_info()]

    def run(self, output_names, input_feed, run_options=None):
        """Runs the model; returns the outputs named by ``output_names``
        (``None``: all) as numpy arrays. Releases the GIL while computing."""
        return self._sess.run(output_names, input_feed, run_options)

    def get_inputs(self):
        return list(self._inputs)

    def get_outputs(self):
        return list(self._outputs)

    def get_overridable_initializers(self):
        return []

    def get_modelmeta(self):
        return ModelMetadata(self._sess.meta())

    def get_providers(self):
        return [_CPU]

    def get_provider_options(self):
        return {_CPU: {}}

    def get_session_options(self):
        return self._options

    def set_providers(self, providers=None, provider_options=None):
        _check_providers(providers)

    def stats(self):
        """Per-slot and global statistics, as a dict with the fields of the
        ``stats`` object of ``shapejit run --stats --json``."""
        return json.loads(self._sess.stats_json())
