"""A BERT-style encoder (post-LayerNorm, GELU, mean pooling) as an ONNX graph on onnxruntime.

The bundled embedding models are both such encoders (multilingual-e5-small: 12 layers;
all-MiniLM-L6-v2: 6), and both run here from weights read in numpy: ``encoder_graph`` builds the
graph in memory from ``Weights`` (any naming, through a lookup), ``encoder_session`` runs it in
float32 or in int8 (onnxruntime's dynamic quantisation, weights per output channel). The graph
takes one text's summed token embeddings, (tokens, hidden), and returns the mean of the last
layer's states, (hidden,): one text per call, no padding, so a vector never depends on its batch.
"""

from __future__ import annotations

import ctypes
import logging
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from memory_lab.errors import ConfigError

PRECISIONS = ("int8", "fp32")
DEVICES = ("cpu", "cuda")


@dataclass(frozen=True)
class Shape:
    hidden: int
    heads: int
    layers: int
    ffn: int
    eps: float


# weight(name) -> array, with names "emb.ln.w", "emb.ln.b" and, per layer i, "l{i}.q.w" (out, in)
# and "l{i}.q.b" for q, k, v, ao (attention output), fi, fo (feed-forward in, out), and "l{i}.aln.w"
# / "l{i}.oln.w" (+ ".b") for the attention and output LayerNorms.
Weights = Callable[[str], np.ndarray]


def encoder_graph(shape: Shape, weight: Weights, name: str):
    """The encoder as an ONNX model: (L, hidden) summed embeddings -> (hidden,) mean of tokens."""
    from onnx import TensorProto, helper, numpy_helper

    h, heads = shape.hidden, shape.heads
    nodes, weights = [], []

    def const(name: str, value: np.ndarray) -> str:
        value = np.ascontiguousarray(
            value, dtype=value.dtype if value.dtype == np.int64 else np.float32
        )
        weights.append(numpy_helper.from_array(value, name))
        return name

    def node(op: str, inputs: list[str], output: str, **attrs) -> str:
        nodes.append(helper.make_node(op, inputs, [output], name=output, **attrs))
        return output

    def linear(x: str, prefix: str) -> str:
        w = const(f"{prefix}.w", weight(f"{prefix}.w").T)
        b = const(f"{prefix}.b", weight(f"{prefix}.b"))
        return node("Add", [node("MatMul", [x, w], f"{prefix}.mm"), b], f"{prefix}.out")

    def norm(x: str, prefix: str, out: str) -> str:
        w = const(f"{prefix}.w", weight(f"{prefix}.w"))
        b = const(f"{prefix}.b", weight(f"{prefix}.b"))
        return node("LayerNormalization", [x, w, b], out, axis=-1, epsilon=shape.eps)

    split_heads = const("split_heads", np.array([0, heads, h // heads], dtype=np.int64))
    merge_heads = const("merge_heads", np.array([0, h], dtype=np.int64))
    scale = const("scale", np.array(1.0 / np.sqrt(h // heads), dtype=np.float32))
    half, one = const("half", np.array(0.5, np.float32)), const("one", np.array(1.0, np.float32))
    root2 = const("root2", np.array(np.sqrt(2.0), np.float32))
    x = norm("embeddings", "emb.ln", "x0")
    for i in range(shape.layers):
        p = f"l{i}"
        q, k, v = (
            node(
                "Transpose",
                [node("Reshape", [linear(x, f"{p}.{n}"), split_heads], f"{p}.{n}.heads")],
                f"{p}.{n}.t",
                perm=[1, 0, 2],
            )
            for n in ("q", "k", "v")
        )
        kt = node("Transpose", [k], f"{p}.kt", perm=[0, 2, 1])
        scores = node("Mul", [node("MatMul", [q, kt], f"{p}.qk"), scale], f"{p}.scores")
        attn = node("MatMul", [node("Softmax", [scores], f"{p}.p", axis=-1), v], f"{p}.ctx")
        attn = node(
            "Reshape",
            [node("Transpose", [attn], f"{p}.ctx.t", perm=[1, 0, 2]), merge_heads],
            f"{p}.ctx.m",
        )
        x = norm(node("Add", [x, linear(attn, f"{p}.ao")], f"{p}.res1"), f"{p}.aln", f"{p}.x1")
        up = linear(x, f"{p}.fi")
        erf = node("Erf", [node("Div", [up, root2], f"{p}.scaled")], f"{p}.erf")
        gelu = node(
            "Mul",
            [node("Mul", [up, half], f"{p}.half"), node("Add", [erf, one], f"{p}.erf1")],
            f"{p}.gelu",
        )
        x = norm(
            node("Add", [x, linear(gelu, f"{p}.fo")], f"{p}.res2"),
            f"{p}.oln",
            f"{p}.x2",
        )
    node("ReduceMean", [x], "vector", axes=[0], keepdims=0)
    graph = helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info("embeddings", TensorProto.FLOAT, ["tokens", h])],
        [helper.make_tensor_value_info("vector", TensorProto.FLOAT, [h])],
        initializer=weights,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


_threads: int | None = None  # set by limit_threads (a --jobs worker's share of the cores)


def limit_threads(threads: int) -> None:
    """Sessions created from now on use at most ``threads`` threads (default 1, or
    ``OMP_NUM_THREADS``): on a busy 2-core machine a second thread spun instead of helping, and
    runs parallelise across cells instead."""
    global _threads
    _threads = threads


def encoder_session(
    graph, precision: str = "fp32", device: str = "cpu", keep_float: tuple[str, ...] = ()
):
    """An onnxruntime session of ``graph`` at ``precision`` on ``device``; in int8, the nodes
    whose names end with one of ``keep_float`` stay in float32."""
    import onnxruntime as ort

    if precision not in PRECISIONS:
        raise ConfigError(f"unknown precision {precision!r}; choose one of {PRECISIONS}")
    options = ort.SessionOptions()
    threads = _threads or int(os.environ.get("OMP_NUM_THREADS", "1") or 1)
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    providers = ["CPUExecutionProvider"]
    if device == "cuda":
        if "CUDAExecutionProvider" not in ort.get_available_providers():
            raise ConfigError(
                "--device cuda: onnxruntime has no CUDA provider here (install onnxruntime-gpu)"
            )
        providers.insert(0, "CUDAExecutionProvider")
    elif device not in DEVICES:
        raise ConfigError(f"unknown device {device!r}; choose one of {DEVICES}")
    if precision == "fp32":
        return ort.InferenceSession(graph.SerializeToString(), options, providers=providers)
    from onnxruntime.quantization import QuantType, quantize_dynamic

    root = logging.getLogger()
    root.addFilter(_quiet_quantizer)  # it logs advice to "pre-process" the model on the root logger
    try:
        with tempfile.TemporaryDirectory(prefix="memory-lab-encoder-") as folder:
            out = os.path.join(folder, "int8.onnx")
            quantize_dynamic(
                graph,
                out,
                per_channel=True,
                reduce_range=True,  # 7-bit weights: no int16 overflow in AVX2's u8 x s8 kernels,
                weight_type=QuantType.QInt8,  # so every CPU computes the same integers
                nodes_to_exclude=[n.name for n in graph.graph.node if n.name.endswith(keep_float)],
                extra_options={"MatMulConstBOnly": True},  # products of weights only
            )
            return ort.InferenceSession(out, options, providers=providers)
    finally:
        root.removeFilter(_quiet_quantizer)


def return_freed_memory() -> None:
    """Give the heap freed after building a session back to the system (glibc's malloc_trim):
    building one leaves a few hundred MB of freed temporaries that the process would otherwise
    keep for its whole life (measured: e5's int8 session, 572 MiB resident before, 292 after)."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to do
        pass


def _quiet_quantizer(record: logging.LogRecord) -> bool:
    return "quantization" not in record.pathname
