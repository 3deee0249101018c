"""The load-time rewrites of the packaged MiniLM graph must find their patterns and keep the outputs."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from common.embedders.local import MINILM_L6_V2
from common.embedders.onnx_graph import drop_nan_guards, fuse_gelu


@pytest.fixture(scope="module")
def packaged() -> bytes:
    return MINILM_L6_V2.onnx.read_verified()


def run(model: onnx.ModelProto, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    feeds = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": np.zeros_like(input_ids)}
    hidden: np.ndarray = session.run(None, feeds)[0]
    return hidden


@pytest.fixture(scope="module")
def padded_batch() -> tuple[np.ndarray, np.ndarray]:
    ids = np.array([[101, 7592, 2088, 102, 0, 0], [101, 2023, 2003, 1037, 3231, 102]], dtype=np.int64)
    return ids, (ids != 0).astype(np.int64)


def test_dropping_nan_guards_changes_no_output(packaged: bytes, padded_batch: tuple[np.ndarray, np.ndarray]) -> None:
    original = onnx.load_from_string(packaged)
    rewritten = onnx.load_from_string(packaged)
    assert drop_nan_guards(rewritten.graph) == 6  # one per attention layer
    assert drop_nan_guards(rewritten.graph) == 0
    assert not any(node.op_type == "IsNaN" for node in rewritten.graph.node)
    np.testing.assert_array_equal(run(rewritten, *padded_batch), run(original, *padded_batch))


def test_fused_gelu_computes_the_same_function(packaged: bytes, padded_batch: tuple[np.ndarray, np.ndarray]) -> None:
    original = onnx.load_from_string(packaged)
    rewritten = onnx.load_from_string(packaged)
    assert fuse_gelu(rewritten) == 6  # one per feed-forward block
    assert fuse_gelu(rewritten) == 0
    assert not any(node.op_type == "Erf" for node in rewritten.graph.node)
    onnx.checker.check_model(rewritten)
    np.testing.assert_allclose(run(rewritten, *padded_batch), run(original, *padded_batch), atol=1e-5)
