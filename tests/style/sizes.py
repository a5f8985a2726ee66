#!/usr/bin/env python3
"""Keeps files and classes from regrowing (docs/TESTING.md): an actors/ file over 400 lines, a
runtime/ file over 500, or a class or struct with more than 30 data members fails, naming it.
A class already over the limit may not grow past the ceiling written below (to be cut down,
not raised).

    tests/style/sizes.py SOURCE_DIR
"""
import pathlib
import re
import sys

LINES = {"actors": 400, "runtime": 500}
MEMBERS = 30
# Over the limit today; each number is a ceiling until the class is cut (none: issue 47 cut the
# driver from 47 members to 30).
CEILINGS = {}


def strip(text):
    """The code without comments, string and character literals."""
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r'"(\\.|[^"\\\n])*"', '""', text)
    return re.sub(r"'(\\.|[^'\\\n])*'", "''", text)


def without_templates(s):
    """Angle-bracket arguments removed (std::function<void(int)> has no call in it)."""
    prev = None
    while prev != s:
        prev = s
        s = re.sub(r"<[^<>;{}]*>", "", s)
    return s


def data_members(body):
    """Statements at the class body's own level that declare data, not functions or types."""
    count, depth, stmt = 0, 0, ""
    for ch in body:
        if ch == "{":
            if depth == 0 and "=" in stmt and "(" not in stmt.split("=")[0]:
                stmt += "{"  # a brace initializer: still the member's statement
            depth += 1
            continue
        if ch == "}":
            depth -= 1
            if depth == 0 and stmt.rstrip().endswith("{"):
                continue
            if depth == 0:
                stmt = ""  # a nested type's or function's body ended
            continue
        if depth > 0:
            continue
        if ch == ";":
            s = without_templates(stmt.strip().rstrip("{"))
            s = re.sub(r"^(public|private|protected)\s*:", "", s).strip()
            head = s.split("=")[0]
            if s and not re.match(r"(using|typedef|friend|template|static_assert|enum|struct|class)\b", s) \
                    and "(" not in head and "operator" not in head:
                count += 1
            stmt = ""
            continue
        stmt += ch
        if ch == ":" and re.search(r"\b(public|private|protected)\s*:$", stmt):
            stmt = ""
    return count


def classes(text):
    for m in re.finditer(r"\b(class|struct)\s+(\w+)\s*(final\s*)?(:[^{;]*)?\{", text):
        depth, i = 1, m.end()
        while depth and i < len(text):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        yield m.group(2), text[m.end():i - 1]


def main(root):
    root = pathlib.Path(root)
    problems, checked = [], 0
    for folder, limit in LINES.items():
        for f in sorted((root / folder).rglob("*")):
            if f.suffix not in (".cpp", ".hpp"):
                continue
            checked += 1
            text = f.read_text()
            n = text.count("\n")
            if n > limit:
                problems.append(f"{f.relative_to(root)}: {n} lines, over {limit}")
            for name, body in classes(strip(text)):
                members = data_members(body)
                ceiling = CEILINGS.get(name, MEMBERS)
                if members > ceiling:
                    problems.append(f"{f.relative_to(root)}: {name} has {members} data members, over {ceiling}")
    if checked < 50:
        problems.append(f"only {checked} files found under {root}: wrong directory?")
    for p in problems:
        print(p)
    print(f"{checked} files checked; {len(problems)} over their limits")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
