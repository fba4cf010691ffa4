"""`data_dir`, `cache_dir` and `require`."""

from __future__ import annotations

from pathlib import Path

import platformdirs
import pytest

from privacy_ci.data import SOURCES, cache_dir, data_dir, require
from privacy_ci.errors import DataMissingError, PrivacyCIError


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PRIVACY_CI_DATA", raising=False)
    monkeypatch.delenv("PRIVACY_CI_CACHE", raising=False)


def test_defaults_are_in_the_user_cache() -> None:
    root = Path(platformdirs.user_cache_dir("privacy-ci"))
    assert data_dir() == root / "data"
    assert cache_dir() == root / "cache"


def test_environment_overrides(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PRIVACY_CI_DATA", str(tmp_path / "ro-data"))
    monkeypatch.setenv("PRIVACY_CI_CACHE", str(tmp_path / "cache"))
    assert data_dir() == tmp_path / "ro-data"
    assert cache_dir() == tmp_path / "cache"


def test_cache_does_not_follow_the_data_dir(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PRIVACY_CI_DATA", str(tmp_path / "ro-data"))
    assert not cache_dir().is_relative_to(data_dir())


def test_home_is_expanded_and_blank_is_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRIVACY_CI_DATA", "~/pci-data")
    assert data_dir() == Path.home() / "pci-data"
    monkeypatch.setenv("PRIVACY_CI_CACHE", "  ")
    assert cache_dir() == Path(platformdirs.user_cache_dir("privacy-ci")) / "cache"


def test_require_on_empty_dir_says_how_to_fetch(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PRIVACY_CI_DATA", str(tmp_path))
    with pytest.raises(DataMissingError) as info:
        require()
    message = str(info.value)
    assert isinstance(info.value, PrivacyCIError)
    assert str(tmp_path) in message
    assert "`privacy-ci data fetch`" in message
    assert "PRIVACY_CI_DATA" in message
    assert f"{len(SOURCES)} data files are missing" in message
    assert SOURCES[0].path in message
    assert f"and {len(SOURCES) - 5} more" in message
    assert SOURCES[-1].path not in message
    assert "\n" not in message


def test_require_names_only_the_missing_files(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PRIVACY_CI_DATA", str(tmp_path))
    (tmp_path / "hipaa").mkdir()
    (tmp_path / "hipaa" / "kb_annotated.json").write_text("{}")
    assert require("hipaa/kb_annotated.json") == tmp_path
    with pytest.raises(DataMissingError, match=r"1 data file is missing") as info:
        require("hipaa/kb_annotated.json", "cases/goldcoin/real.json")
    assert "cases/goldcoin/real.json" in str(info.value)
    assert "hipaa/kb_annotated.json" not in str(info.value)
    assert "more" not in str(info.value)


def test_require_all_present(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for s in SOURCES:
        (tmp_path / s.path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / s.path).write_bytes(b"")
    monkeypatch.setenv("PRIVACY_CI_DATA", str(tmp_path))
    assert require() == tmp_path
