"""The store, audit, token and serve commands (cli/store.py, audit.py, tokens.py, serve.py)."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from typer.testing import CliRunner

from privacy_ci.cli.audit import app as audit_app
from privacy_ci.cli.serve import serve
from privacy_ci.cli.store import app as store_app
from privacy_ci.cli.tokens import app as token_app
from privacy_ci.service import verify_token
from privacy_ci.store import DocumentStore

app = typer.Typer()
app.add_typer(store_app, name="store")
app.add_typer(audit_app, name="audit")
app.add_typer(token_app, name="token")
app.command(name="serve")(serve)
runner = CliRunner()


def _ok(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def _flat(text: str) -> str:
    """Output with rich's line wrapping undone."""
    return " ".join(text.split())


def test_store_commands(empty_store: DocumentStore) -> None:
    db = empty_store.url
    assert "store ready" in _ok("store", "init", "--db", db)
    assert "loaded 105 documents (proposed labels)" in _ok(
        "store", "load-riverside", "--db", db, "--state", "proposed"
    )
    proposed = json.loads(_ok("store", "labels", "--db", db, "--state", "proposed", "--json"))
    assert len(proposed) == 105 and proposed[0]["state"] == "proposed"
    review = json.loads(_ok("store", "review", "RMC-LAB-003", "--db", db, "--json"))
    assert review["version"] == 1 and review["in_force"] is None and review["widens"]
    assert {p["agent_id"] for p in review["gained"]} == {"D01", "N03"}
    assert "--accept-widening" in _ok("store", "review", "RMC-LAB-003", "--db", db)
    approve = ["store", "approve", "RMC-LAB-003", "--db", db, "--by", "privacy-officer"]
    # a new label widens access: refused unless the widening is accepted
    refused = runner.invoke(app, [*approve, "--version", "1"])
    assert refused.exit_code == 2 and "widens access" in _flat(refused.output)
    stale = runner.invoke(app, [*approve, "--version", "7", "--accept-widening"])
    assert stale.exit_code == 2 and "changed since version 7" in _flat(stale.output)
    out = _ok(*approve, "--version", "1", "--accept-widening", "--note", "checked")
    assert "RMC-LAB-003: approved (label version 2, by privacy-officer)" in out
    assert "gained access: D01:Doctor, N03:Nurse" in _flat(out)
    assert "RMC-LAB-003" in _ok("store", "labels", "--db", db, "--state", "approved")
    assert "revoked" in _ok("store", "revoke", "RMC-LAB-003", "--db", db, "--by", "po")
    assert "no longer assigned" in _ok("store", "unassign", "D01", "P03", "--db", db, "--by", "md")
    assert "assigned to" in _ok("store", "assign", "D01", "P03", "--db", db, "--by", "md")
    history = json.loads(_ok("store", "history", "--db", db, "--target", "RMC-LAB-003", "--json"))
    assert [h["action"] for h in history][-2:] == ["approve", "revoke"]
    assert "privacy-officer: approve label RMC-LAB-003" in _ok(
        "store", "history", "--db", db, "--target", "RMC-LAB-003"
    )
    # every verdict of the CLI is an audit record too
    reviews = [r for r in empty_store.audit.records() if r.action == "review"]
    assert [(r.doc_id, r.decision, r.requester) for r in reviews] == [
        ("RMC-LAB-003", "approve", "privacy-officer"),
        ("RMC-LAB-003", "revoke", "po"),
    ]
    rejected = _ok("store", "reject", "RMC-LAB-004", "--db", db, "--by", "po", "--version", "1")
    assert "RMC-LAB-004: revoked" in rejected
    bad = runner.invoke(
        app, ["store", "approve", "NOPE-1", "--db", db, "--by", "po", "--version", "1"]
    )
    assert bad.exit_code == 2 and "unknown document 'NOPE-1'" in _flat(bad.output)
    bad = runner.invoke(app, ["store", "labels", "--db", db, "--state", "maybe"])
    assert bad.exit_code == 2 and "--state must be" in _flat(bad.output)


def test_propose_from_a_label_file(empty_store: DocumentStore, tmp_path: Path) -> None:
    db = empty_store.url
    _ok("store", "load-riverside", "--db", db)
    from privacy_ci.conductor import load_corpus

    label = load_corpus().label("RMC-LAB-001").model_dump(mode="json")
    label["permitted_receiver_roles"] = ["Doctor"]
    path = tmp_path / "draft.json"
    path.write_text(json.dumps([label]))
    out = _flat(_ok("store", "propose", str(path), "--db", db, "--by", "model:x"))
    assert "proposed 1 labels; they change no access until approved" in out
    assert "(1 approved labels stay in force meanwhile)" in out
    record = empty_store.label("RMC-LAB-001")
    assert record.state.value == "proposed" and record.in_force_version == 2


def test_token_commands(tmp_path: Path, empty_store: DocumentStore) -> None:
    key_file = tmp_path / "jwt.key"
    assert "wrote a 256-bit key" in _ok("token", "keygen", "--out", str(key_file))
    assert key_file.stat().st_mode & 0o777 == 0o600
    again = runner.invoke(app, ["token", "keygen", "--out", str(key_file)])
    assert again.exit_code == 2 and "exists" in _flat(again.output)
    key = key_file.read_text().strip()
    token = _ok(
        "token",
        "mint",
        "N01",
        "--key-file",
        str(key_file),
        "--role",
        "Nurse",
        "--context",
        "Medical",
        "--ttl",
        "60",
    ).strip()
    claims = verify_token(token, key)
    assert (claims.sub, claims.role, claims.context) == ("N01", "Nurse", "Medical")
    _ok("store", "load-riverside", "--db", empty_store.url)
    data = json.loads(
        _ok(
            "token",
            "mint",
            "B02",
            "--key-file",
            str(key_file),
            "--db",
            empty_store.url,
            "--authority",
            "--json",
        )
    )
    claims = verify_token(data["token"], key)
    assert (claims.role, claims.context, claims.authority) == (
        "Billing Specialist",
        "Administrative",
        True,
    )
    missing = runner.invoke(app, ["token", "mint", "N01", "--key-file", str(key_file)])
    assert missing.exit_code == 2 and "--role and --context" in _flat(missing.output)


def test_serve_refuses_a_bad_key_before_starting(tmp_path: Path) -> None:
    weak = tmp_path / "weak.key"
    weak.write_text("abc")
    result = runner.invoke(
        app, ["serve", "--db", str(tmp_path / "x.db"), "--jwt-key-file", str(weak)]
    )
    assert result.exit_code == 2 and "at least 32" in _flat(result.output)
    result = runner.invoke(
        app, ["serve", "--db", str(tmp_path / "x.db"), "--jwt-key-file", str(tmp_path / "none.key")]
    )
    assert result.exit_code == 2 and "not found" in _flat(result.output)
    result = runner.invoke(
        app, ["serve", "--db", "x.db", "--jwt-key-file", str(weak), "--denial-mode", "shout"]
    )
    assert result.exit_code == 2 and "withhold or explain" in _flat(result.output)
