"""`privacy-ci kb ...`: the Privacy Checklist knowledge base of every registered regulation
(built in: HIPAA, GDPR, EU AI Act; see `privacy_ci.regulations.register_regulation`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from privacy_ci.cli._common import console, escape, print_json, user_errors

if TYPE_CHECKING:
    from privacy_ci.knowledge import KnowledgeBase

app = typer.Typer(
    help="Privacy Checklist knowledge base: trees, norms, graphs, definitions.",
    no_args_is_help=True,
)

# Help text names the built-in regulations without importing the registry (a fast
# --help); the commands accept every regulation registered when they run.
RegOpt = typer.Option(
    "hipaa",
    "--regulation",
    "-r",
    help="A registered regulation: hipaa | gdpr | ai_act, or one added to the registry "
    "(`privacy-ci kb regulations` lists them).",
)
JsonOpt = typer.Option(False, "--json", help="Print JSON.")


TreeOpt = typer.Option(
    "ecfr",
    "--tree",
    help="HIPAA tree: ecfr (ours, from the official pages) | published (GoldCoin).",
)


KbDirOpt = typer.Option(
    None,
    "--kb",
    help="A knowledge base folder built by `privacy-ci kb build` (default: the published KB).",
)


def _kb(regulation: str, tree: str = "ecfr", kb_dir: Path | None = None) -> KnowledgeBase:
    from privacy_ci.errors import PrivacyCIError
    from privacy_ci.knowledge import load_kb_folder, load_knowledge_base
    from privacy_ci.regulations import get_regulation

    if kb_dir is not None:  # the folder names its regulation and tree
        return load_kb_folder(kb_dir)
    spec = get_regulation(regulation)  # an unknown key raises UnknownRegulation
    if tree not in ("ecfr", "published"):
        raise PrivacyCIError(f"--tree must be ecfr or published, not {tree!r}")
    return load_knowledge_base(spec.key, hipaa_tree=tree)


def _resolve_node(kb: KnowledgeBase, node_id: str) -> str:
    from privacy_ci.errors import PrivacyCIError
    from privacy_ci.knowledge import alias_resolver

    if node_id in kb.tree:
        return node_id
    resolved = alias_resolver(kb.tree)(node_id)
    if resolved is None:
        raise PrivacyCIError(f"{kb.regulation}: no node {node_id!r} in the regulation tree")
    return resolved


@app.command("regulations")
def list_regulations(as_json: bool = JsonOpt) -> None:
    """The registered regulations: key, name, id syntax, files and datasets."""
    with user_errors():
        from privacy_ci.regulations import regulations

        rows: dict[str, Any] = {
            spec.key: {
                "name": spec.name,
                "root": spec.root,
                "ids": spec.ids.value,
                "trees": list(spec.tree_variants),
                "files": spec.kb_files(),
                "datasets": list(spec.eval_datasets),
            }
            for spec in regulations()
        }
        if as_json:
            print_json(rows)
            return
        from rich.table import Table

        t = Table(title="Registered regulations", title_justify="left")
        for col in ("key", "name", "ids", "tree", "norms", "datasets"):
            t.add_column(col)
        for key, row in rows.items():
            t.add_row(
                *(
                    escape(cell)
                    for cell in (
                        key,
                        row["name"],
                        row["ids"],
                        row["files"]["tree"],
                        row["files"]["norms"],
                        ", ".join(row["datasets"]) or "-",
                    )
                )
            )
        console.print(t)


@app.command()
def stats(
    regulation: str | None = typer.Option(
        None, "--regulation", "-r", help="One regulation (default: every registered one)."
    ),
    tree: str = TreeOpt,
    kb_dir: Path | None = KbDirOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Counts of each knowledge base beside the paper's section 3.4 figures."""
    with user_errors():
        from privacy_ci.knowledge import PAPER_STATS, PAPER_STATS_NOTES
        from privacy_ci.regulations import regulation_keys

        regs = [regulation] if regulation else list(regulation_keys())
        if kb_dir is not None:
            regs = [_kb("hipaa", tree, kb_dir).regulation]
        out: dict[str, Any] = {}
        for reg in regs:
            kb = _kb(reg, tree, kb_dir)
            entry: dict[str, Any] = {"ours": kb.stats(), "tree_source": kb.sources.get("tree")}
            if kb_dir is not None:
                entry["kb_folder"] = str(kb_dir)
            if reg == "hipaa":
                entry["paper"] = PAPER_STATS
                entry["notes"] = PAPER_STATS_NOTES
            report = kb.norms_report
            if report is not None:
                entry["skipped_entries"] = len(getattr(report, "skipped", []) or [])
                entry["dropped_references"] = len(getattr(report, "dropped_references", []) or [])
            out[reg] = entry
        if as_json:
            print_json(out)
            return
        from rich.table import Table

        keys = list(next(iter(out.values()))["ours"])
        t = Table(
            title="Knowledge base statistics (paper: Privacy Checklist section 3.4)",
            title_justify="left",
        )
        t.add_column("figure")
        if "hipaa" in out:
            t.add_column("paper (HIPAA)", justify="right")
        for reg in out:
            t.add_column(reg, justify="right")
        for key in keys:
            row = [key]
            if "hipaa" in out:
                paper = PAPER_STATS.get(key)
                row.append("" if paper is None else f"{paper:,}")
            for reg in out:
                row.append(f"{out[reg]['ours'].get(key, 0):,}")
            t.add_row(*row)
        console.print(t)
        if "hipaa" in out:
            console.print("[bold]Where HIPAA differs from the paper:[/]")
            for key, note in PAPER_STATS_NOTES.items():
                console.print(f"  {key}: {note}", highlight=False)
        for reg, entry in out.items():
            if entry.get("skipped_entries") or entry.get("dropped_references"):
                console.print(
                    f"{reg}: {entry['skipped_entries']} defective KB entries skipped,"
                    f" {entry['dropped_references']} references to missing nodes dropped"
                    " (see the load report)"
                )


def _norm_payload(kb: KnowledgeBase, node_id: str) -> dict[str, Any]:
    node = kb.tree[node_id]
    payload: dict[str, Any] = {
        "regulation": kb.regulation,
        "id": node_id,
        "kind": node.kind.value,
        "text": node.text,
        "full_specification": kb.full_specification(node_id),
        "parent": node.parent,
        "children": list(node.children),
        "tree_references": list(kb.tree.refs(node_id)),
        "tree_referenced_by": list(kb.tree.referenced_by(node_id)),
        "norm": None,
    }
    if node_id in kb:
        norm = kb.norm(node_id)
        payload["norm"] = {
            "norm_type": norm.norm_type.value,
            "sender": list(norm.sender),
            "sender_role": norm.sender_role,
            "recipient": list(norm.recipient),
            "recipient_role": norm.recipient_role,
            "subject": list(norm.subject),
            "subject_role": norm.subject_role,
            "information_type": norm.information_type,
            "purpose": norm.purpose,
            "consent_form": norm.consent_form,
            "sender_is_subject": norm.sender_is_subject.value,
            "recipient_is_subject": norm.recipient_is_subject.value,
            "references": [{"target": r.target_id, "kind": r.kind.value} for r in norm.references],
        }
        if "provenance" in norm.raw:  # a built knowledge base: who annotated it
            payload["norm"]["provenance"] = norm.raw["provenance"]
    payload["referenced_by_norms"] = [
        {"id": n.id, "kind": next(r.kind.value for r in n.references if r.target_id == node_id)}
        for n in kb.referenced_by(node_id)
    ]
    return payload


@app.command()
def show(
    node_id: str = typer.Argument(..., help="A node id, e.g. 164.502(a)(1)(iv)."),
    regulation: str = RegOpt,
    kb_dir: Path | None = KbDirOpt,
    as_json: bool = JsonOpt,
) -> None:
    """A node: text, full specification, CI annotation, references, referenced-by."""
    with user_errors():
        kb = _kb(regulation, kb_dir=kb_dir)
        p = _norm_payload(kb, _resolve_node(kb, node_id))
        if as_json:
            print_json(p)
            return
        console.print(
            f"[bold]{escape(p['id'])}[/] ({p['kind']}, {p['regulation']})", highlight=False
        )
        console.print("[bold]Full specification[/]")
        console.print(p["full_specification"], markup=False, highlight=False)
        norm = p["norm"]
        if norm is None:
            console.print("[dim]no CI annotation on this node[/]")
        else:
            from privacy_ci.ci import FIELDS

            console.print("[bold]CI annotation[/]")
            for key in (
                "norm_type",
                *FIELDS,
                "sender_is_subject",
                "recipient_is_subject",
            ):
                console.print(f"  {key:22} {norm[key]}", markup=False, highlight=False)
            for ref in norm["references"]:
                console.print(f"  reference {ref['target']} ({ref['kind']})", markup=False)
            if "provenance" in norm:
                prov = norm["provenance"]
                console.print(
                    f"  annotated by {prov.get('model')} (run {prov.get('run')},"
                    f" draw {prov.get('draw')})",
                    markup=False,
                    highlight=False,
                )
        if p["tree_references"]:
            console.print("cites: " + ", ".join(p["tree_references"]), markup=False)
        if p["tree_referenced_by"]:
            console.print("cited by: " + ", ".join(p["tree_referenced_by"]), markup=False)
        for ref in p["referenced_by_norms"]:
            console.print(f"annotated as {ref['kind']} by norm {ref['id']}", markup=False)


@app.command()
def refs(
    node_id: str = typer.Argument(..., help="A node id."),
    regulation: str = RegOpt,
    kb_dir: Path | None = KbDirOpt,
    as_json: bool = JsonOpt,
) -> None:
    """What a node cites (annotated support/exception, and the tree's cross-references)
    and what cites it."""
    with user_errors():
        kb = _kb(regulation, kb_dir=kb_dir)
        nid = _resolve_node(kb, node_id)
        p = _norm_payload(kb, nid)
        annotated = p["norm"]["references"] if p["norm"] else []
        data = {
            "id": nid,
            "annotated_references": annotated,
            "tree_references": p["tree_references"],
            "tree_referenced_by": p["tree_referenced_by"],
            "referenced_by_norms": p["referenced_by_norms"],
        }
        if as_json:
            print_json(data)
            return
        console.print(f"[bold]{escape(nid)}[/]", highlight=False)
        for label, items in (
            ("annotated references", [f"{r['target']} ({r['kind']})" for r in annotated]),
            ("cites (tree)", p["tree_references"]),
            ("cited by (tree)", p["tree_referenced_by"]),
            ("annotated by", [f"{r['id']} ({r['kind']})" for r in p["referenced_by_norms"]]),
        ):
            console.print(f"{label}: " + (", ".join(items) if items else "-"), markup=False)


SemanticOpt = typer.Option(
    False,
    "--semantic",
    help="Match unknown terms by meaning (sentence embeddings, packaged MiniLM) not spelling.",
)


def _taxonomy(
    kind: str,
    term: str,
    as_json: bool,
    semantic: bool = False,
    regulation: str = "hipaa",
    kb_dir: Path | None = None,
) -> None:
    from privacy_ci.errors import PrivacyCIError

    kb = _kb(regulation, kb_dir=kb_dir)
    graph = kb.role_graph if kind == "roles" else kb.attribute_graph
    if graph is None:
        raise PrivacyCIError(f"the {kb.regulation} knowledge base has no {kind} graph")
    scorer = None
    if semantic:
        from privacy_ci.retrieval import embedding_similarity

        scorer = embedding_similarity()
    classes = graph.classify(term, scorer=scorer)
    data: dict[str, Any] = {
        "query": term,
        "matching": "embedding" if semantic else "spelling",
        "graph": "role" if kind == "roles" else "attribute",
        "matches": [
            {
                "term": c.match.term,
                "score": round(c.match.score, 3),
                "method": c.match.method,
                "ancestors": list(c.ancestors),
            }
            for c in classes
        ],
    }
    if kind == "roles":
        data["regulation_roles"] = {
            c.match.term: graph.regulation_roles_of(c.match.term)  # type: ignore[union-attr]
            for c in classes
        }
    if classes and classes[0].match.score == 1.0:
        data["descendants"] = graph.descendants(classes[0].match.term)
    if as_json:
        print_json(data)
        return
    for m in data["matches"]:
        exact = "exact" if m["score"] == 1.0 else f"nearest, score {m['score']:.2f} ({m['method']})"
        console.print(f"[bold]{escape(m['term'])}[/] \\[{exact}]", highlight=False)
        console.print("  falls under: " + (" -> ".join(m["ancestors"]) or "(a root)"), markup=False)
        if kind == "roles" and data["regulation_roles"].get(m["term"]):
            console.print(
                "  regulation roles: " + ", ".join(data["regulation_roles"][m["term"]]),
                markup=False,
            )
    if not data["matches"]:
        console.print(f"no term in the graph resembles {term!r}", markup=False, highlight=False)


def _taxonomy_command(kind: str, doc: str) -> None:
    """Register ``kb roles`` / ``kb attributes``: the same options over the two graphs."""

    def command(
        term: str = typer.Argument(...),
        semantic: bool = SemanticOpt,
        regulation: str = RegOpt,
        kb_dir: Path | None = KbDirOpt,
        as_json: bool = JsonOpt,
    ) -> None:
        with user_errors():
            _taxonomy(kind, term, as_json, semantic, regulation, kb_dir)

    command.__doc__ = doc
    app.command(kind)(command)


_taxonomy_command(
    "roles", "Which regulation roles a case role (e.g. surgeon) falls under (the role graph)."
)
_taxonomy_command(
    "attributes", "Which attribute classes an information type (e.g. HIV status) belongs to."
)


@app.command()
def define(
    term: str = typer.Argument(...),
    regulation: str = RegOpt,
    kb_dir: Path | None = KbDirOpt,
    as_json: bool = JsonOpt,
) -> None:
    """A term's definition (exact, else the nearest defined terms with scores)."""
    with user_errors():
        from privacy_ci.errors import PrivacyCIError

        kb = _kb(regulation, kb_dir=kb_dir)
        if kb.definitions is None:
            raise PrivacyCIError(f"{regulation}: no definitions loaded")
        matches = kb.definitions.lookup(term, min_score=0.4)
        data: dict[str, Any] = {
            "query": term,
            "regulation": regulation,
            "matches": [
                {
                    "term": m.term,
                    "score": round(m.score, 3),
                    "method": m.method,
                    "definition": m.definition.text,
                    "source": m.definition.source,
                }
                for m in matches
            ],
        }
        if as_json:
            print_json(data)
            return
        if not matches:
            console.print(
                f"{regulation}: no definition resembles {term!r}", markup=False, highlight=False
            )
            raise typer.Exit(1)
        for m in data["matches"][:3]:
            console.print(
                f"[bold]{escape(m['term'])}[/] (score {m['score']:.2f}, {m['method']})",
                highlight=False,
            )
            console.print(m["definition"], markup=False, highlight=False)
            if m["source"]:
                console.print(f"[dim]{escape(m['source'])}[/]", highlight=False)


@app.command()
def agreement(
    against: str = typer.Option(
        "goldcoin", help="goldcoin (regulation_tree_goldcoin) | checklist (regulation_tree)."
    ),
    as_json: bool = JsonOpt,
) -> None:
    """How our eCFR-parsed HIPAA tree agrees with a published tree: ids, text, parents,
    references, and every residual difference explained."""
    with user_errors():
        from privacy_ci.data import data_dir
        from privacy_ci.errors import PrivacyCIError
        from privacy_ci.regulations import (
            compare_with_published,
            load_ecfr_tree,
            load_hipaa_graphml,
        )

        files = {
            "goldcoin": "hipaa/regulation_tree_goldcoin.graphml",
            "checklist": "hipaa/regulation_tree.graphml",
        }
        if against not in files:
            raise PrivacyCIError(f"--against must be one of {list(files)}")
        root = data_dir()
        theirs, _ = load_hipaa_graphml(root / files[against])
        report = compare_with_published(load_ecfr_tree(root), theirs)
        if as_json:
            print_json(report.as_dict())
            return
        from rich.table import Table

        t = Table(title=f"Our eCFR tree vs {files[against]}", title_justify="left")
        for col in ("aspect", "measure", "value"):
            t.add_column(col)
        for row in report.rows():
            t.add_row(*(escape(cell) for cell in row))
        console.print(t)
        console.print("[bold]Differences, explained[/]")
        for diff in report.explained:
            example = f" e.g. {diff.examples[0]}" if diff.examples else ""
            console.print(
                f"  {diff.count:5} {diff.category}: {diff.note}{example}",
                markup=False,
                highlight=False,
            )


@app.command("fetch-cfr")
def fetch_cfr(
    part: int = typer.Option(..., "--part", help="CFR part, e.g. 164."),
    title: int = typer.Option(45, "--title", help="CFR title."),
    base_url: str | None = typer.Option(None, "--base-url", help="eCFR service URL."),
    parse: bool = typer.Option(True, help="Parse the page and print its tree statistics."),
    as_json: bool = JsonOpt,
) -> None:
    """Download a CFR part's page from the eCFR service into the cache directory."""
    with user_errors():
        from privacy_ci.regulations import fetch_cfr_part, parse_ecfr_html

        kwargs: dict[str, Any] = {} if base_url is None else {"base_url": base_url}
        path = fetch_cfr_part(title, part, **kwargs)
        data: dict[str, Any] = {"title": title, "part": part, "path": str(path)}
        if parse:
            data["tree"] = parse_ecfr_html([path]).stats()
        if as_json:
            print_json(data)
        else:
            console.print(f"saved {path}", markup=False, highlight=False)
            if parse:
                console.print(f"tree: {data['tree']}", markup=False, highlight=False)


def _paragraph_under(paragraph: str, prefix: str) -> bool:
    """Whether `paragraph` is `prefix` or a node below it (``164.512`` -> ``164.512(e)(1)``)."""
    return paragraph == prefix or (paragraph.startswith(prefix) and paragraph[len(prefix)] == "(")


def _rule_dict(rule: Any, schema: Any) -> dict[str, Any]:
    return {
        **rule.as_dict(),
        "order": rule.order,
        "when": rule.when.describe(schema) if rule.when.parts or rule.when.kind == "fact" else "",
        "unless": None if rule.unless is None else rule.unless.describe(schema),
        "facts": list(rule.facts()),
    }


@app.command("conditions")
def conditions(
    item: str | None = typer.Argument(
        None,
        help="A rule id, or a paragraph prefix, e.g. 164.512(e). Without it: every rule, in"
        " the order the law applies them.",
    ),
    regulation: str = RegOpt,
    as_json: bool = JsonOpt,
) -> None:
    """The law the model-free ci-reasoner applies: the regulation's rules over the facts
    of a disclosure, in precedence order (not applicable, prohibitions, required
    disclosures, permissions, then the default), each with the facts it needs and what
    lifts it. The facts themselves: privacy-ci facts schema."""
    with user_errors():
        from privacy_ci.errors import PrivacyCIError
        from privacy_ci.reasoning import load_law

        book = load_law(regulation)
        rules = [*book.rules, book.default]
        if item is not None:
            wanted = item.strip()
            rules = [r for r in rules if r.id.casefold() == wanted.casefold()] or [
                r for r in rules if _paragraph_under(r.paragraph, wanted)
            ]
            if not rules:
                raise PrivacyCIError(
                    f"{book.regulation}: no rule or paragraph matches {item!r}"
                    " (`privacy-ci kb conditions` lists them)"
                )
        if as_json:
            print_json(
                {
                    "regulation": book.regulation,
                    "law": book.version_id,
                    "facts": book.schema.version_id,
                    "rules": [_rule_dict(r, book.schema) for r in rules],
                }
            )
            return
        if item is None:
            from rich.table import Table

            t = Table(
                title=f"{book.regulation} law ({book.version_id}): {len(book.rules)} rules and"
                " the default, in the order they are applied",
                title_justify="left",
            )
            # ids and paragraphs are what a reader copies into the next command: never cut
            t.add_column("id", no_wrap=True, overflow="fold")
            t.add_column("effect")
            t.add_column("paragraph", no_wrap=True, overflow="fold")
            t.add_column("title", ratio=1)
            for r in rules:
                t.add_row(escape(r.id), r.effect.value, escape(r.paragraph), escape(r.title))
            console.print(t)
            return
        for r in rules:
            d = _rule_dict(r, book.schema)
            total = len(book.rules) + 1
            head = f"{r.effect.value}, {r.paragraph}, tried {r.order + 1} of {total}"
            console.print(f"[bold]{escape(r.id)}[/] ({escape(head)})", highlight=False)
            console.print(f"  {r.title}", markup=False, highlight=False)
            console.print(f"  when: {d['when'] or 'no permission applies'}", markup=False)
            if d["unless"]:
                console.print(f"  unless: {d['unless']}", markup=False)


# `kb build` and `kb compare` live in their own module, registered on this app
from privacy_ci.cli import kb_build as _kb_build  # noqa: E402,F401
