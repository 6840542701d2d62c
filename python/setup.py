"""Builds libfleche.so with Bazel and bundles it into the fleche package,
with the extension module fleche._fast (fleche/_fast.c, Cache.query's
per-table work).

`pip install ./python` (from the repository root) runs this: build_py calls
`../bazelw build --define=fl_malloc=system //:fleche_shared` and copies
bazel-bin/python/libfleche.so into the package; build_ext compiles _fast.c
against this Python's headers and include/fleche.h. The extension does not
link libfleche: it calls the fl_query of the library the package loaded
(fleche/_cache.py hands it the address), so FLECHE_LIBRARY applies to it too.

Environment:
  FLECHE_LIBRARY=/path/libfleche.so  bundle this prebuilt library, skip Bazel.
  FLECHE_BAZEL_ARGS="-c opt ..."      extra arguments for the Bazel build.
  FLECHE_TORCH=1                      also build fleche._torch_view, which reads
                                      torch tensors for _fast in C++ (about 0.5 us
                                      a tensor less): against the torch this Python
                                      imports, so with `pip install
                                      --no-build-isolation` (docs/PYTHON.md).

Why --define=fl_malloc=system: the store's default allocator is a static
jemalloc (libjemalloc_pic.a), whose thread-local state uses the initial-exec
TLS model; a shared object carrying it cannot be dlopen'ed ("cannot allocate
memory in static TLS block"). The system allocator is the one the ASan and
TSan builds use. python/BUILD refuses to build the target without it.
"""

import os
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import List

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
LIB = "libfleche.so"


def _build_library() -> Path:
    prebuilt = os.environ.get("FLECHE_LIBRARY")
    if prebuilt:
        return Path(prebuilt)
    bazelw = ROOT / "bazelw"
    if not bazelw.exists():
        raise SystemExit(
            f"fleche: {bazelw} not found. Install from the repository checkout "
            "(pip install ./python builds in place), or set FLECHE_LIBRARY to a "
            "prebuilt libfleche.so."
        )
    args = ["--define=fl_malloc=system"] + shlex.split(os.environ.get("FLECHE_BAZEL_ARGS", ""))
    subprocess.run([str(bazelw), "build", *args, "//:fleche_shared"], cwd=ROOT, check=True)
    bin_dir = subprocess.run(
        [str(bazelw), "info", *args, "bazel-bin"],
        cwd=ROOT, check=True, stdout=subprocess.PIPE, text=True,
    ).stdout.strip()
    return Path(bin_dir) / "python" / LIB


class BuildWithBazel(build_py):
    """build_py that first builds and copies libfleche.so into the package."""

    def run(self) -> None:
        lib = _build_library()
        if not lib.is_file():
            raise SystemExit(f"fleche: the build did not produce {lib}")
        super().run()
        dest = Path(self.build_lib) / "fleche" / LIB
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(lib, dest)
        os.chmod(dest, 0o755)


FAST = Extension("fleche._fast", ["fleche/_fast.c"], include_dirs=[str(ROOT / "include")],
                 extra_compile_args=["-O2", "-std=gnu11", "-Wall", "-Werror"])


def _torch_extensions() -> List[Extension]:
    """fleche._torch_view (fleche/_torch_view.cc) with FLECHE_TORCH=1,
    compiled against the torch this Python imports, with torch's C++ ABI
    and standard; none otherwise. Its headers are torch's (python3-torch's
    come in libtorch-dev and pybind11-dev), included as system headers so
    that their warnings stay theirs."""
    if os.environ.get("FLECHE_TORCH", "0") != "1":
        return []
    import torch  # noqa: PLC0415 (only for this extension)
    from torch.utils import cpp_extension  # noqa: PLC0415

    std = "c++20" if int(torch.__version__.split(".")[0]) >= 2 else "c++17"
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    headers = [arg for path in cpp_extension.include_paths() for arg in ("-isystem", path)]
    libs = cpp_extension.library_paths()
    return [Extension("fleche._torch_view", ["fleche/_torch_view.cc"], language="c++",
                      extra_compile_args=[f"-std={std}", "-O2", "-Wall", "-Werror",
                                          f"-D_GLIBCXX_USE_CXX11_ABI={abi}", *headers],
                      library_dirs=libs, runtime_library_dirs=libs,
                      libraries=["c10", "torch_cpu", "torch_python"])]


setup(cmdclass={"build_py": BuildWithBazel}, ext_modules=[FAST, *_torch_extensions()])
