"""Load-time rewrites that make the packaged MiniLM graph faster, all but one without changing what it computes.

The packaged ``model.onnx`` is torch's export, written in patterns onnxruntime's own optimiser does not fuse:

- :func:`drop_nan_guards`: attention wraps the softmax in ``Where(IsNaN(p), 0, p)`` for rows whose keys are all
  masked. Ours never are (``[CLS]`` and ``[SEP]`` are always attended), yet the guard costs two passes over a
  (batch, heads, length, length) tensor in each of the six layers: about 15% of inference on one core.
- :func:`fuse_gelu`: the erf GELU spelled as five element-wise nodes becomes onnxruntime's single ``Gelu``
  kernel (same formula).

One rewrite trades a little precision for speed, the same way in every call:

- :func:`quantize_activations`: the feed-forward products (:func:`feed_forward_matmuls`, two thirds of the
  arithmetic) multiply int8 activations by the int8 weights the package stores, instead of float32 by their
  dequantised copies: ~1.3x (uint8 weights) to ~1.9x (int8 weights) faster per product on AVX2. The few
  outlier input channels :func:`widest_channels` finds stay in float.

onnxruntime cannot edit a graph itself, hence the ``onnx`` package. Each rewrite is a no-op if its pattern is
absent, so a re-export of the model can only lose speed, never correctness.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

MS_DOMAIN = "com.microsoft"


def drop_nan_guards(graph: onnx.GraphProto) -> int:
    """Replace every ``Where(IsNaN(p), _, p)`` by ``p``; returns how many guards were removed (0 if none)."""
    producers = {output: node for node in graph.node for output in node.output}
    graph_outputs = {output.name for output in graph.output}
    dead: list[onnx.NodeProto] = []
    for node in graph.node:
        if node.op_type != "Where" or node.output[0] in graph_outputs:
            continue
        condition = producers.get(node.input[0])
        if condition is None or condition.op_type != "IsNaN" or condition.input[0] != node.input[2]:
            continue
        for consumer in graph.node:
            for position, name in enumerate(consumer.input):
                if name == node.output[0]:
                    consumer.input[position] = node.input[2]
        dead += [node, condition]
    for node in dead:
        graph.node.remove(node)
    return len(dead) // 2


GELU_CHAIN = (("Erf", None), ("Add", 1.0), ("Mul", 0.5), ("Mul", None))
"""What follows ``Div(x, sqrt 2)`` in torch's erf GELU; the last ``Mul`` multiplies by ``x``."""


def fuse_gelu(model: onnx.ModelProto) -> int:
    """Replace torch's five-node erf GELU on ``x`` by ``com.microsoft.Gelu(x)``; returns how many were fused."""
    graph = model.graph
    floats = [t for t in graph.initializer if not t.dims and t.data_type == onnx.TensorProto.FLOAT]
    scalars = {t.name: float(numpy_helper.to_array(t)) for t in floats}
    consumers: dict[str, list[onnx.NodeProto]] = defaultdict(list)
    for node in graph.node:
        for name in node.input:
            consumers[name].append(node)
    fused = 0
    for divide in [node for node in graph.node if node.op_type == "Div"]:
        nodes = _gelu_chain(divide, scalars, consumers)
        if nodes is None:
            continue
        *intermediate, times_x = nodes
        gelu = helper.make_node(
            "Gelu", [divide.input[0]], list(times_x.output), name=f"{times_x.name}_gelu", domain=MS_DOMAIN
        )
        times_x.CopyFrom(gelu)
        for node in intermediate:
            graph.node.remove(node)
        fused += 1
    if fused:
        used = {name for node in graph.node for name in node.input}
        for constant in [t for t in graph.initializer if t.name in scalars and t.name not in used]:
            graph.initializer.remove(constant)
        if all(opset.domain != MS_DOMAIN for opset in model.opset_import):
            model.opset_import.append(helper.make_opsetid(MS_DOMAIN, 1))
    return fused


def _gelu_chain(
    divide: onnx.NodeProto, scalars: dict[str, float], consumers: dict[str, list[onnx.NodeProto]]
) -> list[onnx.NodeProto] | None:
    """``Div(x, sqrt 2)`` and the nodes of :data:`GELU_CHAIN` after it, when they form a GELU of ``x``."""
    if not math.isclose(scalars.get(divide.input[1], 0), math.sqrt(2), rel_tol=1e-6):
        return None
    nodes = [divide]
    for op_type, scalar in GELU_CHAIN:
        users = consumers[nodes[-1].output[0]]
        if len(users) != 1 or users[0].op_type != op_type:
            return None
        others = [name for name in users[0].input if name != nodes[-1].output[0]]
        if scalar is not None and not (len(others) == 1 and math.isclose(scalars.get(others[0], 0), scalar)):
            return None
        nodes.append(users[0])
    return nodes if divide.input[0] in nodes[-1].input else None


@dataclass(frozen=True, slots=True)
class StoredInt8MatMul:
    """``MatMul(x, Cast(q) * scale)``: a weight the export stores as int8 with one scale per output column."""

    matmul: onnx.NodeProto
    weights: npt.NDArray[np.int8]
    """``(K, N)``: the stored integers, symmetric (zero is 0)."""
    scales: npt.NDArray[np.float32]
    """``(N,)``: the weight is ``weights * scales``."""
    bias_add: onnx.NodeProto | None
    """The ``Add(MatMul, bias)`` that follows, folded into the quantised node when present."""

    @property
    def activations(self) -> str:
        return str(self.matmul.input[0])

    @property
    def output(self) -> str:
        return str((self.bias_add or self.matmul).output[0])


def feed_forward_matmuls(graph: onnx.GraphProto) -> list[StoredInt8MatMul]:
    """The int8-stored MatMuls on either side of each ``Gelu``: the feed-forward blocks, 2/3 of the arithmetic."""
    producers = {output: node for node in graph.node for output in node.output}
    consumers: dict[str, list[onnx.NodeProto]] = defaultdict(list)
    for node in graph.node:
        for name in node.input:
            consumers[name].append(node)
    initializers = {t.name: t for t in graph.initializer}
    found = []
    for node in graph.node:
        stored = _stored_int8(node, producers, consumers, initializers)
        if stored is None:
            continue
        before = producers.get(stored.activations)
        after = [user.op_type for user in consumers[stored.output]]
        if (before is not None and before.op_type == "Gelu") or after == ["Gelu"]:
            found.append(stored)
    return found


def _stored_int8(
    node: onnx.NodeProto,
    producers: dict[str, onnx.NodeProto],
    consumers: dict[str, list[onnx.NodeProto]],
    initializers: dict[str, onnx.TensorProto],
) -> StoredInt8MatMul | None:
    if node.op_type != "MatMul":
        return None
    scale_mul = producers.get(node.input[1])
    if scale_mul is None or scale_mul.op_type != "Mul":
        return None
    cast = producers.get(scale_mul.input[0])
    if cast is None or cast.op_type != "Cast" or cast.input[0] not in initializers:
        return None
    weights = numpy_helper.to_array(initializers[cast.input[0]])
    if weights.dtype != np.int8 or weights.ndim != 2 or scale_mul.input[1] not in initializers:
        return None
    scales = numpy_helper.to_array(initializers[scale_mul.input[1]]).astype(np.float32)
    if scales.size != weights.shape[1]:
        return None
    users = consumers[node.output[0]]
    bias_add = None
    if len(users) == 1 and users[0].op_type == "Add" and users[0].input[0] == node.output[0]:
        bias = initializers.get(users[0].input[1])
        if bias is not None and list(bias.dims) == [weights.shape[1]]:
            bias_add = users[0]
    return StoredInt8MatMul(node, weights, scales.reshape(-1), bias_add)


def widest_channels(
    model: onnx.ModelProto, tensors: Sequence[str], feeds: Mapping[str, npt.NDArray[Any]], count: int
) -> dict[str, npt.NDArray[np.int64]]:
    """The ``count`` channels (last axis) of largest magnitude in each named tensor, in one float run on ``feeds``.

    Transformer activations carry a few "massive" channels (here up to 30 where the rest stay within 6), the
    same ones whatever the text; computing those few in float is what keeps int8 activations precise.
    """
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    tensors = list(dict.fromkeys(tensors))
    probe.graph.output.extend(helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None) for name in tensors)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 3
    session = ort.InferenceSession(probe.SerializeToString(), options, providers=["CPUExecutionProvider"])
    outputs = session.run(tensors, dict(feeds))
    widest = {}
    for name, values in zip(tensors, outputs, strict=True):
        magnitude = np.abs(values).reshape(-1, values.shape[-1]).max(axis=0)
        widest[name] = np.sort(np.argsort(-magnitude, kind="stable")[:count]).astype(np.int64)
    return widest


def quantize_activations(
    model: onnx.ModelProto, matmuls: Sequence[StoredInt8MatMul], float_channels: Mapping[str, npt.NDArray[np.int64]]
) -> int:
    """Run each of ``matmuls`` in int8 arithmetic on its exact stored weights; returns how many were rewritten.

    ``com.microsoft.DynamicQuantizeMatMul`` quantises the activations to uint8 (asymmetric, one scale per
    tensor) at run time and multiplies them by the stored integers. On AVX2 without VNNI, uint8 x int8 products
    are summed in pairs into 16 bits with saturation (``vpmaddubsw``, onnxruntime's documented accuracy
    problem), which is harmless only for non-negative inputs: a ``Gelu`` output (>= -0.17) has its zero point
    near 0, so its codes stay small. Other inputs (LayerNorm outputs centred on 0, codes near 128) get the
    weights shifted by 128 to uint8 with a zero point of 128 instead, lossless but ~1.3x slower. The input
    channels listed in ``float_channels[matmul.activations]`` are zeroed before quantising and their product is
    added back in float, so a few outlier channels do not stretch every other channel's quantisation step.
    """
    graph = model.graph
    gelu_outputs = {output for node in graph.node if node.op_type == "Gelu" for output in node.output}
    for matmul in matmuls:
        outliers = float_channels.get(matmul.activations, np.empty(0, np.int64))
        nodes, initializers = _int8_nodes(matmul, outliers, signed=matmul.activations in gelu_outputs)
        graph.initializer.extend(initializers)
        position = list(graph.node).index(matmul.matmul)
        for offset, node in enumerate(nodes):
            graph.node.insert(position + offset, node)
        graph.node.remove(matmul.matmul)
        if matmul.bias_add is not None:
            graph.node.remove(matmul.bias_add)
    if matmuls:
        _drop_unused(graph)
        if all(opset.domain != MS_DOMAIN for opset in model.opset_import):
            model.opset_import.append(helper.make_opsetid(MS_DOMAIN, 1))
    return len(matmuls)


def _int8_nodes(
    matmul: StoredInt8MatMul, float_channels: npt.NDArray[np.int64], *, signed: bool
) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
    name = f"{matmul.matmul.name or matmul.output}_int8"
    weights, x = matmul.weights, matmul.activations
    zero_points = np.zeros(weights.shape[1], dtype=np.int8 if signed else np.uint8)
    initializers = [
        numpy_helper.from_array(
            weights if signed else (weights.astype(np.int16) + 128).astype(np.uint8), f"{name}_weights"
        ),
        numpy_helper.from_array(matmul.scales, f"{name}_scales"),
        numpy_helper.from_array(zero_points if signed else zero_points + 128, f"{name}_zero_points"),
    ]
    quantized = [name + suffix for suffix in ("_weights", "_scales", "_zero_points")]
    if matmul.bias_add is not None:
        quantized.append(matmul.bias_add.input[1])
    if not float_channels.size:
        whole = helper.make_node("DynamicQuantizeMatMul", [x, *quantized], [matmul.output], name, domain=MS_DOMAIN)
        return [whole], initializers
    mask = np.ones(weights.shape[0], dtype=np.float32)
    mask[float_channels] = 0
    initializers += [
        numpy_helper.from_array(mask, f"{name}_mask"),
        numpy_helper.from_array(float_channels, f"{name}_float_channels"),
        numpy_helper.from_array(weights[float_channels].astype(np.float32) * matmul.scales, f"{name}_float_weights"),
    ]
    nodes = [
        helper.make_node("Mul", [x, f"{name}_mask"], [f"{name}_in"], f"{name}_zero_outliers"),
        helper.make_node("DynamicQuantizeMatMul", [f"{name}_in", *quantized], [f"{name}_out"], name, domain=MS_DOMAIN),
        helper.make_node("Gather", [x, f"{name}_float_channels"], [f"{name}_float_in"], f"{name}_gather", axis=-1),
        helper.make_node(
            "MatMul", [f"{name}_float_in", f"{name}_float_weights"], [f"{name}_float_out"], f"{name}_float"
        ),
        helper.make_node("Add", [f"{name}_out", f"{name}_float_out"], [matmul.output], f"{name}_sum"),
    ]
    return nodes, initializers


def _drop_unused(graph: onnx.GraphProto) -> None:
    """Remove nodes and initializers nothing reads any more (the float weights a rewrite replaced)."""
    while True:
        used = {name for node in graph.node for name in node.input} | {output.name for output in graph.output}
        dead = [node for node in graph.node if not any(output in used for output in node.output)]
        if not dead:
            break
        for node in dead:
            graph.node.remove(node)
    used = {name for node in graph.node for name in node.input} | {tensor.name for tensor in graph.input}
    for tensor in [t for t in graph.initializer if t.name not in used]:
        graph.initializer.remove(tensor)
