#!/usr/bin/env python3
"""The house rules of ../shared/DESIGN.md ("Folders"), checked on the tree:

  * a file includes only the project folders its component may include
    (the table below mirrors DESIGN.md's; the generated proto/ headers,
    Abseil, gRPC and the standard library are open to all);
  * no source file outside tests is over 500 lines, and no function over 80
    (functions as universal-ctags finds them);
  * every header opens with a comment saying what it is, and in it its
    thread-safety.

  check_layout.py SOURCE_DIR     prints every breach; exit 1 if there is
                                 any, 77 (skipped) without universal-ctags
"""

import json
import os
import re
import shutil
import subprocess
import sys

# component folder -> the project folders it may include (besides itself).
RULES = {
    "ps/base": [],
    "ps/coord": ["ps/base"],
    "ps/wire": ["ps/base"],
    "ps/table": ["ps/base", "ps/wire"],
    "ps/server": ["ps/base", "ps/wire", "ps/table", "ps/obs", "ps/coord"],
    "ps/client": ["ps/base", "ps/wire", "ps/obs", "ps/coord"],
    "ps/obs": ["ps/base"],
    "ps/bench": ["ps/base", "ps/wire", "ps/obs", "ps/client", "ps/server",
                 "ps/coord"],
    "model": [],
    "loader": ["ps/base"],
    "worker/train": ["ps/base", "ps/wire", "ps/client", "ps/obs", "loader",
                     "model"],
    "worker/launch": ["ps/base", "ps/wire", "ps/client", "ps/obs", "ps/coord"],
    "worker/python": ["ps/base", "ps/wire", "ps/client", "ps/obs"],
    "experiments": [],
}
CHECKED_ROOTS = ("ps/", "loader/", "model/", "worker/", "experiments/")
SOURCE = re.compile(r".*\.(cc|h)$")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 80


def component(path):
    """The RULES folder `path` (relative) belongs to, longest match first."""
    for folder in sorted(RULES, key=len, reverse=True):
        if path == folder or path.startswith(folder + "/"):
            return folder
    return None


def sources(root):
    out = []
    for top in CHECKED_ROOTS:
        for d, dirs, files in os.walk(os.path.join(root, top)):
            dirs[:] = [x for x in dirs if x not in ("node_modules", "results")]
            for f in files:
                if SOURCE.match(f):
                    out.append(os.path.relpath(os.path.join(d, f), root))
    return sorted(out)


def include_breaches(root, path):
    mine = component(path)
    if mine is None:
        return [f"{path}: in no component of the layout"]
    allowed = [mine] + RULES[mine]
    text = open(os.path.join(root, path), encoding="utf-8").read()
    breaches = []
    for included in INCLUDE.findall(text):
        if included.startswith("proto/"):
            continue  # the wire contract's generated code
        theirs = component(included)
        if theirs is None:
            if os.path.exists(os.path.join(root, included)):
                breaches.append(f"{path}: includes {included}, outside "
                                "every component")
            continue  # a third-party header with quotes
        if theirs not in allowed:
            breaches.append(f"{path}: {mine} may not include {included} "
                            f"({theirs}); it may include "
                            f"{', '.join(allowed)}")
    return breaches


def length_breaches(root, path):
    full = os.path.join(root, path)
    breaches = []
    lines = sum(1 for _ in open(full, encoding="utf-8"))
    if lines > MAX_FILE_LINES:
        breaches.append(f"{path}: {lines} lines (at most {MAX_FILE_LINES})")
    tags = subprocess.run(
        ["ctags", "--output-format=json", "--fields=+ne", "--kinds-C++=f",
         "--language-force=C++", "-o", "-", full],
        capture_output=True, text=True, check=True).stdout
    for line in tags.splitlines():
        tag = json.loads(line)
        if "end" not in tag:
            continue
        n = tag["end"] - tag["line"] + 1
        if n > MAX_FUNCTION_LINES:
            breaches.append(f"{path}:{tag['line']}: {tag['name']} has {n} "
                            f"lines (at most {MAX_FUNCTION_LINES})")
    return breaches


def header_breaches(root, path):
    if not path.endswith(".h"):
        return []
    text = open(os.path.join(root, path), encoding="utf-8").read()
    opening = re.match(r"((?://[^\n]*\n)+)", text)
    if opening is None:
        return [f"{path}: does not open with a comment saying what it is"]
    if "Thread-safety" not in opening.group(1):
        return [f"{path}: its opening comment does not state its "
                "thread-safety"]
    return []


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    if shutil.which("ctags") is None:
        print("universal-ctags not found: function lengths cannot be "
              "checked (deploy/install-deps.sh installs it)")
        sys.exit(77)  # ctest: skipped
    root = sys.argv[1]
    breaches = []
    for path in sources(root):
        breaches += include_breaches(root, path)
        breaches += length_breaches(root, path)
        breaches += header_breaches(root, path)
    for b in breaches:
        print(b)
    if breaches:
        print(f"{len(breaches)} breaches of the layout (DESIGN.md, Folders)")
        sys.exit(1)
    print(f"layout: {len(sources(root))} files keep the house rules")


if __name__ == "__main__":
    main()
