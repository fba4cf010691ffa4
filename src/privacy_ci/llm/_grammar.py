"""GBNF grammars for constrained decoding (llama.cpp, in-process or as a server).

A small local model cannot follow long output formats; a grammar makes the only
sentences it can produce the allowed answers. Used by the judging pipelines (the
verdict line, the law filter's yes/no, Agent-ID's id list) and usable by anyone
whose backend declares `privacy_ci.llm.Capability.GRAMMAR`.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["choice_grammar", "gbnf_literal"]


def gbnf_literal(text: str) -> str:
    """A GBNF string literal for `text` (escapes backslash, quote and control chars)."""
    out = []
    for ch in text:
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def choice_grammar(options: Sequence[str], *, prefix: str = "", suffix: str = "") -> str:
    """A GBNF grammar whose only sentences are ``prefix + option + suffix``.

    Example: ``choice_grammar(["A. Prohibited", "B. Permitted", "C. Not related"],
    prefix="Choice: ")`` forces a Privacy Checklist DP answer line.

    Args:
        options: the allowed answers (non-empty, distinct, non-empty strings).
        prefix: text forced before the answer.
        suffix: text forced after the answer.

    Raises:
        ValueError: when `options` is empty, has duplicates or an empty option.
    """
    opts = list(options)
    # ValueError: the options come from code (a method's answer set), not from users
    if not opts:
        raise ValueError("choice_grammar needs at least one option")
    if any(not o for o in opts):
        raise ValueError("choice_grammar options must be non-empty strings")
    if len(set(opts)) != len(opts):
        raise ValueError("choice_grammar options must be distinct")
    parts = []
    if prefix:
        parts.append(gbnf_literal(prefix))
    parts.append("answer")
    if suffix:
        parts.append(gbnf_literal(suffix))
    alternatives = " | ".join(gbnf_literal(o) for o in opts)
    return f"root ::= {' '.join(parts)}\nanswer ::= {alternatives}\n"
