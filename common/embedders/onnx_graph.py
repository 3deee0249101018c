"""Load-time rewrites that make the packaged MiniLM graph faster without changing what it computes.

The packaged ``model.onnx`` is torch's export, written in patterns onnxruntime's own optimiser does not fuse:

- :func:`drop_nan_guards`: attention wraps the softmax in ``Where(IsNaN(p), 0, p)`` for rows whose keys are all
  masked. Ours never are (``[CLS]`` and ``[SEP]`` are always attended), yet the guard costs two passes over a
  (batch, heads, length, length) tensor in each of the six layers: about 15% of inference on one core.
- :func:`fuse_gelu`: the erf GELU spelled as five element-wise nodes becomes onnxruntime's single ``Gelu``
  kernel (same formula), which its optimiser then merges with the preceding bias ``Add``.

onnxruntime cannot edit a graph itself, hence the ``onnx`` package. Each rewrite is a no-op if its pattern is
absent, so a re-export of the model can only lose speed, never correctness.
"""

from __future__ import annotations

import math
from collections import defaultdict

import onnx
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

    def chain(start: onnx.NodeProto) -> list[onnx.NodeProto] | None:
        nodes = [start]
        for op_type, scalar in GELU_CHAIN:
            users = consumers[nodes[-1].output[0]]
            if len(users) != 1 or users[0].op_type != op_type:
                return None
            others = [name for name in users[0].input if name != nodes[-1].output[0]]
            if scalar is not None and not (len(others) == 1 and math.isclose(scalars.get(others[0], 0), scalar)):
                return None
            nodes.append(users[0])
        return nodes

    fused = 0
    for divide in [node for node in graph.node if node.op_type == "Div"]:
        x = divide.input[0]
        if not math.isclose(scalars.get(divide.input[1], 0), math.sqrt(2), rel_tol=1e-6):
            continue
        nodes = chain(divide)
        if nodes is None or x not in nodes[-1].input:
            continue
        *intermediate, times_x = nodes
        gelu = helper.make_node("Gelu", [x], list(times_x.output), name=f"{times_x.name}_gelu", domain=MS_DOMAIN)
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
