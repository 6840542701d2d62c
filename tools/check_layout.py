#!/usr/bin/env python3
"""check_layout.py: checks the layout rules of docs/DEVELOPING.md; prints
every violation and exits 1 when there is one (2 when ctags or nm fails).

  size          a non-test source file (.c .h .cu .cuh .cc .py) over 700 lines;
  function      a function over 120 lines, by ctags' end lines (C, C++, CUDA
                read as C++, Python);
  call-loop     files that call each other in a loop: a strongly connected
                component of "file A uses a global symbol that file B
                defines", from nm on the objects Bazel built (static symbols
                make no edge; symbols no object of ours defines are left out);
  folder-cycle  a cycle of `#include "folder/file.h"` between top-level folders.
It also lists, as information, each header included from another folder and
what its opening comment says about who it is for. tests/, fuzz/,
third_party/ and Python tests are exempt.

  tools/check_layout.py [--bin BAZEL_BIN] [--no-calls] [--json]
"""
import argparse
import collections
import json
import os
import re
import subprocess
import sys

MAX_FILE_LINES = 700
MAX_FUNCTION_LINES = 120
SOURCE_EXTS = (".c", ".h", ".cu", ".cuh", ".cc", ".py")
COMPILED_EXTS = (".c", ".cc", ".cu")
EXEMPT_DIRS = ("tests/", "fuzz/", "third_party/")
DEFINED_TYPES = set("TDBR")  # nm's global text, data, bss and read-only data
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
SAYS_PRIVATE = re.compile(r"not for other modules|internal to \w+/|not a public header", re.I)
SAYS_SHARED = re.compile(r"\b(share[sd]?|interface|public|other modules|used by|needs from)\b",
                         re.I)

Violation = collections.namedtuple("Violation", "check folder where detail")


def exempt(path):
    """Tests and vendored code, which the rules leave alone."""
    name = os.path.basename(path)
    python_test = path.endswith(".py") and (name.startswith("test_") or name == "conftest.py")
    return path.startswith(EXEMPT_DIRS) or "/tests/" in path or python_test


def folder_of(path):
    return path.split("/", 1)[0] if "/" in path else "(root)"


def source_files(root):
    """The checked sources: files git tracks or would track (not ignored)."""
    out = subprocess.run(["git", "-C", root, "ls-files", "-co", "--exclude-standard"],
                         capture_output=True, text=True, check=True).stdout.split("\n")
    return sorted(p for p in set(out) if p.endswith(SOURCE_EXTS) and not exempt(p)
                  and os.path.isfile(os.path.join(root, p)))


def read(root, path):
    with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
        return f.read()


def check_sizes(root, files):
    for path in files:
        n = read(root, path).count("\n")
        if n > MAX_FILE_LINES:
            yield Violation("size", folder_of(path), path, f"{n} lines > {MAX_FILE_LINES}")


def check_functions(root, files):
    # Functions only (Python methods too: with classes off they are functions).
    cmd = ["ctags", "--langmap=c++:+.cu.cuh", "--output-format=json", "--fields=+ne",
           "--sort=no", "--kinds-C=f", "--kinds-C++=f", "--kinds-Python=f", "-f", "-"] + files
    out = subprocess.run(cmd, cwd=root, capture_output=True, text=True, check=True).stdout
    for tag in map(json.loads, out.splitlines()):
        if "end" not in tag:
            continue
        n = tag["end"] - tag["line"] + 1
        if n > MAX_FUNCTION_LINES:
            where = f"{tag['path']}:{tag['line']}"
            yield Violation("function", folder_of(tag["path"]), where,
                            f"{tag['name']}: {n} lines > {MAX_FUNCTION_LINES}")


def object_source(root, rel):
    """The source file an object under bazel-bin compiled, or None:
    PKG/_objs/TARGET/[N/]STEM(.pic).o came from PKG/STEM.{c,cc,cu}; a
    cuda_library's object is PKG/_objs/TARGET/FILE.cu.o (bazel/cuda.bzl)."""
    pkg, _, rest = rel.partition("/_objs/")
    parts = rest.split("/")[1:]
    if parts and parts[0].isdigit():  # Bazel's prefix for two sources of one name
        parts = parts[1:]
    stem = os.path.join(pkg, *parts)
    stem = re.sub(r"(\.pic)?\.o$", "", stem)
    for cand in [stem] + [stem + ext for ext in COMPILED_EXTS]:
        if cand.endswith(COMPILED_EXTS) and os.path.isfile(os.path.join(root, cand)):
            return cand
    return None


def built_objects(root, bin_dir):
    """{object path: source path} for our checked sources' objects, the newest
    per source: an older one is left from a build of an earlier tree."""
    newest = {}
    for dirpath, _, names in os.walk(bin_dir):
        rel_dir = os.path.relpath(dirpath, bin_dir)
        if "/_objs/" not in rel_dir + "/" or rel_dir.startswith("external"):
            continue
        for name in (n for n in names if n.endswith(".o")):
            src, obj = object_source(root, os.path.join(rel_dir, name)), os.path.join(dirpath, name)
            if not src or exempt(src):
                continue
            if src not in newest or os.path.getmtime(obj) > os.path.getmtime(newest[src]):
                newest[src] = obj
    return {obj: src for src, obj in newest.items()}


def symbol_uses(objects):
    """({symbol: files defining it}, {file: symbols it uses}) from nm."""
    defined, used = collections.defaultdict(set), collections.defaultdict(set)
    out = subprocess.run(["nm", "-A", "-P"] + sorted(objects), capture_output=True,
                         text=True, check=True).stdout
    for line in out.splitlines():
        path, _, rest = line.partition(": ")
        fields = rest.split()
        if len(fields) < 2:
            continue
        src = objects[path]
        if fields[1] in DEFINED_TYPES:
            defined[fields[0]].add(src)
        elif fields[1] == "U":
            used[src].add(fields[0])
    return defined, used


def reachable(graph, start):
    seen, todo = set(), [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def components(graph):
    """The strongly connected components of more than one node, each sorted:
    the nodes on a cycle, grouped by mutual reach."""
    reach = {node: reachable(graph, node) for node in graph}
    comps = {frozenset(m for m in reach[n] if n in reach.get(m, ()))
             for n in graph if n in reach[n]}
    return sorted(sorted(c) for c in comps if len(c) > 1)


def loops(edges, check, folder_of_node):
    """A violation per cycle of edges {(a, b): [why, ...]}, listing its edges."""
    graph = collections.defaultdict(set)
    for a, b in edges:
        graph[a].add(b)
    for comp in components(graph):
        inside = [f"{a} -> {b}: {', '.join(sorted(edges[a, b]))}" for a, b in sorted(edges)
                  if a in comp and b in comp]
        folders = sorted({folder_of_node(n) for n in comp})
        yield Violation(check, ",".join(folders), " ".join(comp), inside)


def check_calls(root, bin_dir):
    objects = built_objects(root, bin_dir)
    if not objects:
        raise OSError(f"{bin_dir}: no objects under */_objs/ (build //... first)")
    defined, used = symbol_uses(objects)
    edges = collections.defaultdict(set)
    for src, symbols in used.items():
        for sym in symbols:
            for owner in defined.get(sym, ()):
                if owner != src:
                    edges[src, owner].add(sym)
    return loops(edges, "call-loop", folder_of)


def header_comment(text):
    """The opening comment of a header (a /* */ block or // lines)."""
    m = re.match(r"\s*(/\*.*?\*/|(?://[^\n]*\n\s*)+)", text, re.S)
    return m.group(1) if m else ""


def who_for(root, header, includers):
    """What the header's opening comment says about who it is for: the
    including folders it names, else whether it says shared or internal."""
    comment = header_comment(read(root, header))
    named = [f"{f}/" for f in includers if re.search(rf"\b{re.escape(f)}/", comment)]
    if named:
        return "names " + ", ".join(named)
    if SAYS_PRIVATE.search(comment):
        return "says internal"
    return "says shared" if SAYS_SHARED.search(comment) else "silent"


def header_notes(root, includes):
    """(header, what it says, including folders) per header included across folders."""
    froms = collections.defaultdict(set)
    for folder, header in includes:
        froms[header].add(folder)
    return [(h, who_for(root, h, sorted(froms[h])), ",".join(sorted(froms[h])))
            for h in sorted(froms)]


def cross_includes(root, files):
    """{(includer folder, header): [including files]} for includes that cross
    top-level folders, resolved from the root as Bazel does."""
    found = collections.defaultdict(list)
    for path in files:
        for inc in INCLUDE.findall(read(root, path)):
            if os.path.isfile(os.path.join(root, inc)) and folder_of(inc) != folder_of(path):
                found[folder_of(path), inc].append(path)
    return found


def check_folders(includes):
    edges = collections.defaultdict(set)
    for (src_folder, header), files in includes.items():
        edges[src_folder, folder_of(header)].update(f"{f} includes {header}" for f in files)
    return loops(edges, "folder-cycle", lambda n: n)


def bazel_bin(root):
    return subprocess.run(["./bazelw", "info", "bazel-bin"], cwd=root, capture_output=True,
                          text=True, check=True).stdout.strip()


def print_table(violations, includes_info):
    print(f"{len(violations)} violation(s)")
    for v in violations:
        if isinstance(v.detail, list):  # a loop: its members, then its edges below
            print(f"  {v.check:<12} {v.where}")
            for edge in v.detail:
                print(f"  {'':<12}   {edge}")
        else:
            print(f"  {v.check:<12} {v.where:<40} {v.detail}")
    by_folder = collections.Counter(v.folder for v in violations)
    print("by folder: " + (", ".join(f"{f} {n}" for f, n in sorted(by_folder.items())) or "none"))
    print("cross-folder headers (information): header, what its comment says, included from")
    for header, says, froms in includes_info:
        print(f"  {header:<36} {says:<24} {froms}")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                    help="the repository (default: the one holding this script)")
    ap.add_argument("--bin", help="bazel-bin of a build of //... "
                    "(default: ./bazelw info bazel-bin)")
    ap.add_argument("--no-calls", action="store_true", help="skip the call-loop check")
    ap.add_argument("--json", action="store_true", help="print JSON instead of the table")
    args = ap.parse_args()
    try:
        files = source_files(args.root)
        includes = cross_includes(args.root, files)
        violations = list(check_sizes(args.root, files)) + list(check_functions(args.root, files))
        if not args.no_calls:
            violations += check_calls(args.root, args.bin or bazel_bin(args.root))
        violations += check_folders(includes)
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"check_layout: {e}", file=sys.stderr)
        return 2
    info = header_notes(args.root, includes)
    if args.json:
        notes = [dict(zip(("header", "says", "from"), i)) for i in info]
        json.dump({"violations": [v._asdict() for v in violations], "cross_folder_headers": notes},
                  sys.stdout, indent=1)
        print()
    else:
        print_table(violations, info)
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
