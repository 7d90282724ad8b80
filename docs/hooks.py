"""MkDocs hook: pages generated from the code at build time, so they cannot go stale.

``<!-- cli-reference -->`` becomes the help of ``memory_lab.cli.build_parser()`` and of each of
its subcommands; ``<!-- memory-parameters NAME -->`` becomes the parameter table of the
registered memory NAME (what ``memory-lab list`` prints); ``<!-- field-systems -->`` becomes the
table of the field's systems from their declarations (``SYSTEM`` of each package of
``memory_lab/memories/systems/``), and each system's page joins the Memories section of the
navigation (``on_config``): adding a system adds no line to ``mkdocs.yml``.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # the repository's memory_lab, whatever is installed

_PARAMS = re.compile(r"<!-- memory-parameters ([a-z0-9_]+) -->")


def cli_reference() -> str:
    """Markdown: the top-level help, then one section per subcommand with its help."""
    os.environ["COLUMNS"] = "100"  # argparse wraps to the terminal: fix it for a stable page
    from memory_lab.cli import build_parser

    parser = build_parser()
    parts = ["```text", parser.format_help().rstrip(), "```"]
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in subs.choices.items():
        parts += ["", f"## memory-lab {name}", "", "```text", sub.format_help().rstrip(), "```"]
    return "\n".join(parts)


def memory_parameters(name: str) -> str:
    """Markdown table of a registered memory's parameters, defaults, bounds and model roles."""
    from memory_lab.memories import memory_factories

    factories = memory_factories()
    if name not in factories:
        raise ValueError(f"docs: no registered memory {name!r} (memory-parameters marker)")
    factory = factories[name]
    lines = [f"*Registered as* `{name}`: {factory.description}", ""]
    if factory.params:
        lines += ["| parameter | type | default | bounds | meaning |", "|---|---|---|---|---|"]
        for p in factory.params:
            bounds = ", ".join(
                f"{word} {v:g}" for word, v in (("min", p.min), ("max", p.max)) if v is not None
            )
            meaning = p.help.replace("|", "\\|")
            kind = p.type_name.replace("|", "\\|")
            lines.append(f"| `{p.name}` | `{kind}` | `{p.default!r}` | {bounds} | {meaning} |")
    else:
        lines.append("No parameters.")
    if factory.roles:
        lines += ["", "Model roles: " + ", ".join(f"`{r}`" for r in factory.roles) + "."]
    return "\n".join(lines)


def field_systems() -> str:
    """Markdown table of the field's systems, from their declarations."""
    from memory_lab.memories.discover import builtin_systems

    lines = [
        "| system | memories | upstream | licence | install |",
        "|---|---|---|---|---|",
    ]
    for s in builtin_systems():
        page = f"[{s.title}]({Path(s.docs).name})" if s.docs else s.title
        names = ", ".join(f"`{m}`" for m in s.memories)
        install = (
            f"an environment of its own (`{s.environment.folder}`, `make setup`)"
            if s.environment
            else f"`{s.install_command()}`"
        )
        lines.append(
            f"| {page} | {names} | `{s.upstream}` {s.version} | {s.licence} | {install} |"
        )
    return "\n".join(lines)


def on_config(config):  # noqa: ANN001, ANN201 (MkDocs API)
    """Each system's page in the Memories section, before "Write your own" (its declaration's
    ``docs``), unless the navigation lists it already."""
    from memory_lab.memories.discover import builtin_systems

    section = next(
        (e["Memories"] for e in config["nav"] if isinstance(e, dict) and "Memories" in e), None
    )
    if section is None:
        return config
    listed = {v for e in section if isinstance(e, dict) for v in e.values()}
    at = next((i for i, e in enumerate(section) if "Write your own" in e), len(section))
    for s in builtin_systems():
        if s.docs and s.docs not in listed:
            section.insert(at, {s.name: s.docs})
            at += 1
    return config


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ANN001 (MkDocs API)
    if "<!-- cli-reference -->" in markdown:
        markdown = markdown.replace("<!-- cli-reference -->", cli_reference())
    if "<!-- field-systems -->" in markdown:
        markdown = markdown.replace("<!-- field-systems -->", field_systems())
    return _PARAMS.sub(lambda m: memory_parameters(m.group(1)), markdown)
