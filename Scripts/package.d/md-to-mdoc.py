#!/usr/bin/env python3
"""Renders docs/output.md (from its first '## ' heading on) as mdoc lines for
a man page section, so the JSON reference is written once, in docs/:
'## X' and '### X' become subsections, a table a tag list (first column the
tag, the others joined by ' -- '; field names with '_' not hyphenated), an
indented block a literal display, other lines text; HTML comments (the
generated tables' markers) are left out. Inline code loses its backquotes; a
link keeps its text, and a link to another doc becomes its installed path
(DOC_DIR/beacons.md), which the package installs. The page is ASCII: '…'
becomes '...', dashes and arrows their ASCII forms (what man shows in any
locale).
usage: md-to-mdoc.py [--doc-dir DOC_DIR] FILE.md"""
import re
import sys

DOC_DIR = "/usr/share/doc/bluectl"
ASCII = {"…": "...", "—": "--", "–": "-", "→": "->", "−": "-", "×": "x", "·": "."}


def link(match):
    text, target = match.group(1), match.group(2)
    doc = re.fullmatch(r"([A-Za-z0-9_-]+\.md)(#.*)?", target)
    return f"{DOC_DIR}/{doc.group(1)}" if doc else text


def inline(text):
    text = re.sub(r"\[([^\]]*)\]\(([^)]*)\)", link, text)
    for char, plain in ASCII.items():
        text = text.replace(char, plain)
    text = text.replace("\\|", "|").replace("`", "").replace("\\", "\\e")
    text = re.sub(r"\b(\w+_\w+)", r"\\%\1", text)  # a field name is never hyphenated
    return "\\&" + text if text.startswith((".", "'")) else text


def cells(row):
    return [c.strip() for c in re.split(r"(?<!\\)\|", row.strip().strip("|"))]


def render(lines):
    out, in_table, in_code = [], False, False
    for line in lines:
        if in_code and not line.startswith("    "):
            out.append(".Ed")
            in_code = False
        if in_table and not line.startswith("|"):
            out.append(".El")
            in_table = False
        if line.startswith("<!--"):
            continue
        heading = re.match(r"#{2,} ", line)
        if heading:
            out.append(".Ss " + '"' + inline(line[heading.end():]).replace('"', "") + '"')
        elif line.startswith("    "):
            if not in_code:
                out.append(".Bd -literal -offset indent")
                in_code = True
            out.append(inline(line[4:]))
        elif line.startswith("|"):
            if not in_table:  # the header row
                out.append(".Bl -tag -width Ds")
                in_table = True
            elif not re.fullmatch(r"\|[-| :]*\|?", line.strip()):
                first, *rest = cells(line)
                out.append(".It " + inline(first))
                out.append(inline(" -- ".join(c for c in rest if c)))
        elif line.strip():
            out.append(inline(line))
        else:
            out.append(".Pp")
    if in_code:
        out.append(".Ed")
    if in_table:
        out.append(".El")
    # a paragraph break only between two runs of text
    keep = [l for i, l in enumerate(out) if l != ".Pp"
            or (0 < i < len(out) - 1 and not out[i - 1].startswith(".") and not out[i + 1].startswith("."))]
    return "\n".join(keep)


args = sys.argv[1:]
if args[:1] == ["--doc-dir"]:
    DOC_DIR, args = args[1], args[2:]
lines = open(args[0], encoding="utf-8").read().splitlines()
start = next(i for i, l in enumerate(lines) if l.startswith("## "))
print(render(lines[start:]))
