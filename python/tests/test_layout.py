"""The check of the ctypes struct mirrors (fleche._lib) against the layouts
libfleche.so reports (fl_python_layout in python/exports.c): every mirror is
checked, the real ones pass, and wrong ones raise ImportError naming the
struct and both values, at `import fleche` too."""

import ctypes
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import fleche
from fleche import _lib

HEADER = Path(__file__).resolve().parents[2] / "include" / "fleche.h"


def mirror(name, fields):
    """A ctypes Structure named `name` with `fields`, as _lib declares its mirrors."""
    return type(name, (ctypes.Structure,), {"_fields_": fields})


def header_fields(text, name):
    """The field names of `typedef struct name { ... } name;` in fleche.h, in order."""
    body = re.search(r"typedef struct %s \{(.*?)\} %s;" % (name, name), text, re.S)
    assert body, f"struct {name} not found in {HEADER}"
    names = []
    for decl in re.sub(r"/\*.*?\*/", "", body.group(1), flags=re.S).split(";"):
        if decl.strip():
            first, *more = decl.split(",")  # "uint64_t lookups, hits, ..."
            names += [re.findall(r"\w+", first)[-1]] + [m.strip(" *\n") for m in more]
    return names


def test_every_mirror_is_checked():
    structs = {v for v in vars(_lib).values() if isinstance(v, type)
               and issubclass(v, ctypes.Structure) and v is not ctypes.Structure}
    assert structs == set(_lib.MIRRORS)
    assert all(m.__name__.startswith("fl_") for m in structs)


def test_mirrors_match_the_library():
    layouts = _lib.c_layouts()
    for m in _lib.MIRRORS:
        _lib.check_layout(m, layouts)
        c = layouts[m.__name__]
        assert c[None][1] == ctypes.sizeof(m)
        assert sorted(c, key=lambda f: c[f][0] if f else -1)[1:] == [f for f, _ in m._fields_]


def test_mirror_fields_follow_the_header():
    """Catches what the library's rows cannot: a field added to fleche.h (in
    padding, say) that neither the mirror nor python/exports.c lists."""
    if not HEADER.exists():
        pytest.skip("not run from a checkout")
    text = HEADER.read_text()
    assert header_fields(text, "fl_cache_table_stats") == ["lookups", "hits", "dram_hits", "misses"]
    for m in _lib.MIRRORS:
        assert [f for f, _ in m._fields_] == header_fields(text, m.__name__), m.__name__


def test_a_removed_field_is_caught():
    good = _lib.fl_config
    bad = mirror("fl_config", [f for f in good._fields_ if f[0] != "seed"])
    c_size, bad_size = ctypes.sizeof(good), ctypes.sizeof(bad)
    assert c_size != bad_size
    with pytest.raises(ImportError, match=rf"struct fl_config is {c_size} bytes in libfleche.so "
                                          rf".* but {bad_size} bytes in its ctypes mirror"):
        _lib.check_layout(bad, _lib.c_layouts())


def test_a_moved_field_is_caught():
    fields = list(_lib.fl_cache_table_stats._fields_)
    fields[0], fields[1] = fields[1], fields[0]  # hits before lookups: the same size
    bad = mirror("fl_cache_table_stats", fields)
    with pytest.raises(ImportError, match=r"field fl_cache_table_stats.lookups is at offset 0 "
                                          r"\(8 bytes\) in libfleche.so .* but at offset 8 "
                                          r"\(8 bytes\) in its ctypes mirror"):
        _lib.check_layout(bad, _lib.c_layouts())


def test_a_renamed_or_resized_field_is_caught():
    fields = [("ns_index_typo" if f == "ns_index" else f, t)
              for f, t in _lib.fl_cache_stats._fields_]
    with pytest.raises(ImportError, match=r"fl_cache_stats.ns_index is at offset 112 \(8 bytes\) "
                                          r"in libfleche.so .* but absent in its ctypes mirror"):
        _lib.check_layout(mirror("fl_cache_stats", fields), _lib.c_layouts())
    fields = [(f, ctypes.c_uint64 if f == "prefix_len" else t)  # into the padding: the same size
              for f, t in _lib.fl_table_code_report._fields_]
    assert ctypes.sizeof(mirror("x", fields)) == ctypes.sizeof(_lib.fl_table_code_report)
    with pytest.raises(ImportError, match=r"fl_table_code_report.prefix_len is at offset 8 "
                                          r"\(4 bytes\) .* but at offset 8 \(8 bytes\)"):
        _lib.check_layout(mirror("fl_table_code_report", fields), _lib.c_layouts())


def test_an_unknown_struct_is_caught():
    with pytest.raises(ImportError, match=r"reports no layout of struct fl_nothing"):
        _lib.check_layout(mirror("fl_nothing", [("x", ctypes.c_int)]), _lib.c_layouts())


def test_import_fails_on_a_wrong_mirror(tmp_path):
    """A copy of the package whose fl_config mirror lacks a field does not import."""
    pkg = tmp_path / "fleche"
    shutil.copytree(Path(fleche.__file__).parent, pkg, ignore=shutil.ignore_patterns("*.so"))
    lib_py = pkg / "_lib.py"
    text = lib_py.read_text()
    assert text.count('        ("seed", c_uint64),\n') == 1
    lib_py.write_text(text.replace('        ("seed", c_uint64),\n', ""))
    env = dict(os.environ, PYTHONPATH=str(tmp_path), FLECHE_LIBRARY=str(fleche.library_path()))
    run = subprocess.run([sys.executable, "-c", "import fleche"], cwd=tmp_path, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert run.returncode != 0
    assert re.search(r"ImportError: fleche: struct fl_config is \d+ bytes in libfleche.so .* "
                     r"but \d+ bytes in its ctypes mirror \(fleche._lib.fl_config\)",
                     run.stdout), run.stdout
