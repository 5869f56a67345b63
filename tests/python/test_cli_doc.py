#!/usr/bin/env python3
"""docs/CLI.md against the binary's --help (issue 43).

For every subcommand `tinyllama --help` lists (and their own subcommands,
such as `tokenizer train`), every long flag `tinyllama CMD --help` prints must
appear in docs/CLI.md's section for CMD (its "## `tinyllama CMD`" heading up
to the next "## " heading), and every flag named in the first column of a
table in that section must exist in that --help. Every command needs a
section, and every section must name a command.

    tests/python/test_cli_doc.py BINARY [DOC]

DOC defaults to docs/CLI.md beside this script's repository. Exit 0 when they
match, 1 with one line per mismatch otherwise.
"""

import os
import re
import subprocess
import sys

OPTION_LINE = re.compile(r"^  (?:-[A-Za-z0-9],)*(--[A-Za-z0-9][A-Za-z0-9-]*)")
FLAG = re.compile(r"--[A-Za-z0-9][A-Za-z0-9-]*")
SECTION = re.compile(r"^## `tinyllama ([a-z0-9 -]+)`\s*$")
IGNORED = {"--help"}


def run_help(binary, words):
    out = subprocess.run([binary, *words, "--help"], capture_output=True,
                         text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join([binary, *words])} --help exited {out.returncode}:\n{out.stderr}")
    return out.stdout


def subcommands(help_text):
    """Names listed under the help's "Subcommands:" heading."""
    names, inside = [], False
    for line in help_text.splitlines():
        if line.startswith("Subcommands:"):
            inside = True
            continue
        if inside:
            if not line.strip():
                break
            if line.startswith("  ") and not line.startswith("   "):
                names.append(line.split()[0])
    return names


def help_flags(help_text):
    flags = set()
    for line in help_text.splitlines():
        m = OPTION_LINE.match(line)
        if m and m.group(1) not in IGNORED:
            flags.add(m.group(1))
    return flags


def commands(binary):
    """{"train": help_text, "tokenizer train": help_text, ...}"""
    found = {}
    pending = [[name] for name in subcommands(run_help(binary, []))]
    while pending:
        words = pending.pop(0)
        text = run_help(binary, words)
        found[" ".join(words)] = text
        pending.extend([*words, name] for name in subcommands(text))
    return found


def doc_sections(doc_text):
    """{"train": section text, ...} from the "## `tinyllama CMD`" headings."""
    sections, current = {}, None
    for line in doc_text.splitlines():
        if line.startswith("## "):
            m = SECTION.match(line)
            current = m.group(1).strip() if m else None
            if current is not None:
                sections[current] = []
            continue
        if current is not None:
            sections[current].append(line)
    return {name: "\n".join(lines) for name, lines in sections.items()}


def table_flags(section):
    """Flags named in the first cell of the section's table rows."""
    flags = set()
    for line in section.splitlines():
        if line.startswith("|"):
            cells = re.split(r"(?<!\\)\|", line)
            if len(cells) > 2:
                flags.update(FLAG.findall(cells[1]))
    return flags - IGNORED


def mentions(section, flag):
    return re.search(re.escape(flag) + r"(?![A-Za-z0-9-])", section) is not None


def main(argv):
    if len(argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    binary = argv[1]
    doc = argv[2] if len(argv) == 3 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "CLI.md")
    with open(doc, encoding="utf-8") as f:
        sections = doc_sections(f.read())
    cmds = commands(binary)
    problems = []
    for name, text in cmds.items():
        if name not in sections:
            problems.append(f"`tinyllama {name}` has no '## `tinyllama {name}`' section in {doc}")
            continue
        flags = help_flags(text)
        for flag in sorted(flags):
            if not mentions(sections[name], flag):
                problems.append(f"tinyllama {name}: {flag} is in --help but not in its CLI.md section")
        for flag in sorted(table_flags(sections[name]) - flags):
            problems.append(f"tinyllama {name}: CLI.md lists {flag}, which --help does not have")
    for name in sorted(set(sections) - set(cmds)):
        problems.append(f"CLI.md has a section for `tinyllama {name}`, which --help does not list")
    for p in problems:
        print(p)
    checked = sum(len(help_flags(t)) for t in cmds.values())
    print(f"test_cli_doc: {len(cmds)} commands, {checked} flags, "
          f"{'OK' if not problems else f'{len(problems)} mismatches'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
