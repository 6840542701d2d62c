#!/usr/bin/env python3
"""Per-query overhead of Cache.query over the raw fl_query call.

Same cache, same all-hit batch, six ways, each followed by a synchronize of
the query's stream (timed too):
  c          fl_query through ctypes with argument structs built once (the "C call")
  prepared   PreparedQuery.run() of cache.prepare(ids, out=preallocated outputs):
             the serving loop's path, buffers checked and bound once
  query_out  Cache.query(ids, out=preallocated outputs)
  query_new  Cache.query(ids), whose outputs fleche._fast makes (at::empty, np.empty)
  packed_out Cache.query_packed(tables, ids, counts, out): the same ids in one
             array, the vectors into one preallocated (tables * ids, dim) output
  packed_new Cache.query_packed(tables, ids, counts), which allocates that output
The overhead of a variant is its p50 minus the C call's p50, the floor
measured in the same run. Rounds alternate the variants so that drift hits
them alike; the garbage collector is off while timing. The whole measurement
is repeated --runs times (default 5) on one cache; the summary gives each
figure's min/median/max over the runs.

    python3 python/bench/bench_overhead.py --json OUT.json
    python3 python/bench/bench_overhead.py --backend host --array numpy   # no GPU
    python3 python/bench/bench_overhead.py --backend host --array torch --host-threads 1
    python3 python/bench/bench_overhead.py --torch-reader off   # torch's accessors, for comparison

Defaults: the CUDA backend with torch CUDA tensors when torch sees a GPU,
else the host backend with NumPy arrays. Sizes are TABLESxIDS: 1x256 (the
fixed cost), 26x256 (Criteo's 26 tables, launch-bound) and 26x4096.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

import numpy as np

try:
    import fleche
except ImportError:  # run from the checkout: the package source, with FLECHE_LIBRARY
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import fleche
from fleche import _lib

VARIANTS = ("c", "prepared", "query_out", "query_new", "packed_out", "packed_new")
DIM = 16
CORPUS = 50_000


class Arrays:
    """Makes ids and outputs of one framework and synchronizes its current stream."""

    def __init__(self, kind: str, device: str) -> None:
        self.kind = kind
        if kind == "torch":
            import torch

            self.mod = torch
            self.device = torch.device(device)
            self.sync: Callable[[], None] = (torch.cuda.current_stream(self.device).synchronize
                                             if self.device.type == "cuda" else (lambda: None))
            self.stream = (torch.cuda.current_stream(self.device).cuda_stream
                           if self.device.type == "cuda" else 0)
        elif kind == "cupy":
            import cupy

            self.mod = cupy
            s = cupy.cuda.get_current_stream()
            self.sync, self.stream = s.synchronize, s.ptr
        else:
            self.mod = np
            self.sync, self.stream = (lambda: None), 0

    def ids(self, a: np.ndarray) -> Any:
        if self.kind == "torch":
            return self.mod.from_numpy(a.view(np.int64).copy()).to(self.device)
        return self.mod.asarray(a)

    def empty(self, n: int, dim: int) -> Any:
        if self.kind == "torch":
            return self.mod.empty((n, dim), dtype=self.mod.float32, device=self.device)
        return self.mod.empty((n, dim), dtype=np.float32)

    def zero(self, x: Any) -> None:
        if self.kind == "torch":
            x.zero_()
        else:
            x.fill(0)

    def pointer(self, x: Any) -> int:
        if self.kind == "torch":
            return x.data_ptr()
        return x.data.ptr if self.kind == "cupy" else x.ctypes.data

    def host(self, x: Any) -> np.ndarray:
        if self.kind == "torch":
            return x.cpu().numpy()
        return x.get() if self.kind == "cupy" else x


def percentile_us(ns: List[int], q: float) -> float:
    return float(np.percentile(np.asarray(ns, dtype=np.float64), q)) / 1e3


def bench_size(cache: fleche.Cache, arr: Arrays, tables: int, n: int, iters: int, warmup: int,
               rounds: int, seed: int) -> Dict[str, Any]:
    """Times the variants on an all-hit batch of `tables` tables of n ids."""
    rng = np.random.default_rng(seed)
    names = [f"t{j}" for j in range(tables)]
    ids_np = {name: rng.integers(0, CORPUS, n).astype(np.uint64) for name in names}
    ids = {name: arr.ids(a) for name, a in ids_np.items()}
    outs = {name: arr.empty(n, DIM) for name in names}
    qs = (_lib.fl_table_query * tables)()
    for q, name in zip(qs, names):
        q.table, q.ids, q.n, q.out = int(name[1:]), arr.pointer(ids[name]), n, arr.pointer(outs[name])
    raw, ptr, handle = _lib.lib.fl_query, cache._h.ptr, arr.stream

    def c_call() -> None:
        if raw(ptr, qs, tables, handle) != 0:
            raise fleche.Error(_lib.lib.fl_cache_last_error(ptr).decode())

    packed_ids = arr.ids(np.concatenate([ids_np[name] for name in names]))
    packed_out, counts = arr.empty(tables * n, DIM), [n] * tables
    prepared = cache.prepare(ids, out=outs)
    calls: Dict[str, Callable[[], Any]] = {
        "c": c_call,
        "prepared": prepared.run,
        "query_out": lambda: cache.query(ids, out=outs),
        "query_new": lambda: cache.query(ids),
        "packed_out": lambda: cache.query_packed(names, packed_ids, counts, packed_out),
        "packed_new": lambda: cache.query_packed(names, packed_ids, counts),
    }
    for _ in range(3):  # admit every row, then check that the batch is all hits
        cache.query(ids, out=outs)
        arr.sync()
        cache.sync()
    before = cache.stats()
    new = cache.query(ids)
    arr.sync()
    after = cache.stats()
    if after.misses != before.misses:
        raise SystemExit(f"{tables}x{n}: the batch is not all hits "
                         f"({after.misses - before.misses} misses); raise the budget")
    for check in (c_call, prepared.run):  # every variant gives the same answer
        for o in outs.values():
            arr.zero(o)
        check()
        arr.zero(packed_out)
        calls["packed_out"]()
        packed_new = calls["packed_new"]()
        arr.sync()
        for j, name in enumerate(names):
            want = cache.store.gather(name, ids_np[name])
            if not (np.array_equal(arr.host(outs[name]), want)
                    and np.array_equal(arr.host(new[name]), want)
                    and np.array_equal(arr.host(packed_out)[j * n:(j + 1) * n], want)
                    and np.array_equal(arr.host(packed_new)[j * n:(j + 1) * n], want)):
                raise SystemExit(f"{tables}x{n}: wrong answer for {name}")
    total: Dict[str, List[int]] = {v: [] for v in VARIANTS}
    ret: Dict[str, List[int]] = {v: [] for v in VARIANTS}
    sync, clock = arr.sync, time.perf_counter_ns
    for v in VARIANTS:
        for _ in range(warmup):
            calls[v]()
            sync()
    per_round = max(1, iters // rounds)
    gc.collect()
    gc.disable()
    try:
        for r in range(rounds):
            k = r % len(VARIANTS)
            order = VARIANTS[k:] + VARIANTS[:k]
            for v in order:
                call, tt, rr = calls[v], total[v], ret[v]
                for _ in range(per_round):
                    t0 = clock()
                    call()
                    t1 = clock()
                    sync()
                    t2 = clock()
                    tt.append(t2 - t0)
                    rr.append(t1 - t0)
    finally:
        gc.enable()
    stats = {v: {"p50_us": percentile_us(total[v], 50), "p90_us": percentile_us(total[v], 90),
                 "return_p50_us": percentile_us(ret[v], 50), "samples": len(total[v])}
             for v in VARIANTS}
    c = stats["c"]
    return {
        "tables": tables, "ids_per_table": n, "variants": stats,
        "overhead_p50_us": {v: stats[v]["p50_us"] - c["p50_us"] for v in VARIANTS[1:]},
        "overhead_p90_us": {v: stats[v]["p90_us"] - c["p90_us"] for v in VARIANTS[1:]},
        "overhead_per_table_p50_us": {v: (stats[v]["p50_us"] - c["p50_us"]) / tables
                                      for v in VARIANTS[1:]},
    }


def summarize(runs: List[List[Dict[str, Any]]]) -> List[Dict[str, Any]]:
    """Per size, min/median/max over the runs of each variant's p50 and of
    each overhead p50."""
    out = []
    for per_size in zip(*runs):
        first = per_size[0]

        def spread(values: List[float]) -> Dict[str, float]:
            return {"min": min(values), "median": float(np.median(values)), "max": max(values)}

        out.append({
            "tables": first["tables"], "ids_per_table": first["ids_per_table"],
            "p50_us": {v: spread([r["variants"][v]["p50_us"] for r in per_size])
                       for v in VARIANTS},
            "overhead_p50_us": {v: spread([r["overhead_p50_us"][v] for r in per_size])
                                for v in VARIANTS[1:]},
        })
    return out


def parse_sizes(text: str) -> List[Tuple[int, int]]:
    sizes = []
    for part in text.split(","):
        t, n = part.lower().split("x")
        sizes.append((int(t), int(n)))
    return sizes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", choices=["auto", "host", "cuda"], default="auto")
    ap.add_argument("--array", choices=["auto", "numpy", "torch", "cupy"], default="auto")
    ap.add_argument("--sizes", default="1x256,26x256,26x4096", help="TABLESxIDS,... (max 26 tables)")
    ap.add_argument("--iters", type=int, default=3000, help="timed calls per variant and size")
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--runs", type=int, default=5, help="repeats of the whole measurement")
    ap.add_argument("--host-threads", type=int, default=None,
                    help="the cache's host_threads (host backend; default: the library's)")
    ap.add_argument("--torch-reader", choices=["on", "off"], default="on",
                    help="off: fleche._fast reads torch tensors through their accessors, as "
                         "without fleche._torch_view (default: the package's choice)")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()

    gpu = fleche.cuda_device_count() > 0
    backend = args.backend if args.backend != "auto" else ("cuda" if gpu else "host")
    kind = args.array
    if kind == "auto":
        kind = "numpy"
        if backend == "cuda":
            try:
                import torch

                kind = "torch" if torch.cuda.is_available() else "numpy"
            except ImportError:
                pass
    arr = Arrays(kind, "cuda:0" if backend == "cuda" else "cpu")
    reader = "accessors"
    if kind == "torch":
        if args.torch_reader == "off":
            fleche._fast.use_torch_reader(None)
        elif fleche._buffers.torch_reader(arr.mod) is not None:
            reader = "fleche._torch_view"
    sizes = parse_sizes(args.sizes)
    n_tables = max(t for t, _ in sizes)
    if n_tables > 26:
        raise SystemExit("--sizes: at most 26 tables")

    tables = [fleche.Table(f"t{j}", CORPUS, DIM) for j in range(n_tables)]
    device = platform.processor() or platform.machine()
    if backend == "cuda" and kind == "torch":
        device = arr.mod.cuda.get_device_name(arr.device)
    runs: List[List[Dict[str, Any]]] = []
    with fleche.Store(tables) as store:
        for j in range(n_tables):
            store.fill_synthetic(j, 42)
        with fleche.Cache(store, backend=backend, budget_bytes=256 << 20, admit_policy="coin",
                          admit_probability=1.0, host_threads=args.host_threads) as cache:
            cache.reserve(max(t * n for t, n in sizes), n_tables)
            for _ in range(args.runs):
                runs.append([bench_size(cache, arr, t, n, args.iters, args.warmup, args.rounds,
                                        seed=i) for i, (t, n) in enumerate(sizes)])
    summary = summarize(runs)
    print(f"fleche {fleche.version()}: {backend} backend, {kind} arrays"
          f"{f' (read by {reader})' if kind == 'torch' else ''}, {device}, "
          f"python {platform.python_version()}; {args.runs} runs of {args.iters} timed calls "
          "per variant (call + stream synchronize); p50 us, min/median/max over the runs")
    print(f"{'size':>9} {'variant':>10} {'p50 min':>9} {'median':>9} {'max':>9} "
          f"{'overhead min':>13} {'median':>9} {'max':>9}")
    for r in summary:
        for v in VARIANTS:
            p = r["p50_us"][v]
            o = r["overhead_p50_us"].get(v)
            extra = "" if o is None else f"{o['min']:13.2f} {o['median']:9.2f} {o['max']:9.2f}"
            print(f"{r['tables']:>4}x{r['ids_per_table']:<4} {v:>10} {p['min']:9.2f} "
                  f"{p['median']:9.2f} {p['max']:9.2f} {extra}")
    if args.json:
        versions = {"python": platform.python_version(), "numpy": np.__version__}
        if kind in ("torch", "cupy"):
            versions[kind] = arr.mod.__version__
        doc = {"backend": backend, "array": kind, "torch_reader": reader if kind == "torch" else None,
               "device": device, "fleche": fleche.version(),
               "library": str(fleche.library_path()), "versions": versions,
               "iters": args.iters, "warmup": args.warmup, "rounds": args.rounds,
               "runs": args.runs, "host_threads": args.host_threads,
               "host": platform.node(), "cpu_count": os.cpu_count(), "summary": summary,
               "sizes_by_run": runs}
        Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
