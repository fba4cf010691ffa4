"""`privacy-ci serve` and `privacy-ci token` on bad input: one error line, exit 2."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from privacy_ci.cli.main import app
from privacy_ci.service import generate_key

runner = CliRunner()


def _key(tmp_path: Path) -> Path:
    path = tmp_path / "jwt.key"
    path.write_text(generate_key())
    return path


def _error_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.strip()]


def test_serve_on_a_busy_port_is_one_error_line(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        # a real process: uvicorn must never start, print its log or exit 3
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "privacy_ci.cli.main",
                "serve",
                "--db",
                str(tmp_path / "s.db"),
                "--jwt-key-file",
                str(_key(tmp_path)),
                "--port",
                str(port),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 2, result.stderr
    lines = _error_lines(result.stderr)
    assert len(lines) == 1 and lines[0].startswith("error: cannot listen on 127.0.0.1:")
    assert "in use" in lines[0]
    assert not (tmp_path / "s.db").exists()  # nothing was created before the port failed


def test_serve_refuses_explaining_the_model_without_explain_denials(tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        [
            "serve",
            "--db",
            str(tmp_path / "s.db"),
            "--jwt-key-file",
            str(_key(tmp_path)),
            "--denial-mode",
            "explain",
        ],
    )
    assert result.exit_code == 2 and "--explain-denials" in result.output


def test_serve_with_an_unresolvable_host(tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        [
            "serve",
            "--db",
            str(tmp_path / "s.db"),
            "--jwt-key-file",
            str(_key(tmp_path)),
            "--host",
            "no-such-host.invalid",
        ],
    )
    assert result.exit_code == 2 and "cannot listen on no-such-host.invalid" in result.output


def test_keygen_into_a_missing_folder(tmp_path: Path) -> None:
    target = tmp_path / "nonexistent" / "dir" / "k"
    result = runner.invoke(app, ["token", "keygen", "--out", str(target)])
    assert result.exit_code == 2, result.output
    assert "cannot write the key to" in result.output and "No such file" in result.output
    assert "Traceback" not in result.output


def test_mint_refuses_a_token_longer_than_a_day(tmp_path: Path) -> None:
    args = ["token", "mint", "D01", "--key-file", str(_key(tmp_path))]
    args += ["--role", "Doctor", "--context", "Medical", "--ttl", "90000"]
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and "86400" in result.output


def test_mint_reads_a_store_without_creating_one(tmp_path: Path) -> None:
    missing = tmp_path / "typo.db"
    args = ["token", "mint", "PA1", "--key-file", str(_key(tmp_path)), "--db", str(missing)]
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and "no store at" in result.output
    assert not missing.exists()


def test_mint_for_the_policy_authority_reads_its_role_from_the_store(
    riverside: object, tmp_path: Path
) -> None:
    import json

    from privacy_ci.service import verify_token

    key = _key(tmp_path)
    url = riverside.url  # type: ignore[attr-defined]
    result = runner.invoke(
        app, ["token", "mint", "PA1", "--key-file", str(key), "--db", url, "--authority", "--json"]
    )
    assert result.exit_code == 0, result.output
    claims = verify_token(json.loads(result.output)["token"], key.read_text().strip())
    assert (claims.role, claims.context, claims.authority) == (
        "Policy Authority",
        "Administrative",
        True,
    )


def test_audit_tail_summarises_a_batch_record(riverside: object) -> None:
    from privacy_ci.store import decide_batch_for

    store = riverside
    requester = store.snapshot().requester("N01")  # type: ignore[attr-defined]
    decide_batch_for(store, requester, ["RMC-LAB-001", "RMC-SAL-001"], compact=True)  # type: ignore[arg-type]
    result = runner.invoke(app, ["audit", "tail", "--db", store.url])  # type: ignore[attr-defined]
    assert result.exit_code == 0, result.output
    assert "N01/Nurse@Medical decide_batch (batch) batch 2 decisions (1 permit)" in result.output
