"""Device benchmark of the grouped MoE kernels (kernels/grouped/grouped.py) beside their peers and the read limit (issue
33).

    PYTHONPATH=. python3 bench/bench_moe.py [--models mixtral-8x7b,qwen3-30b-a3b,deepseek-v3,olmoe-1b-7b]
        [--batches 1,2,4,8,16,32,64,128,256] [--schemes bf16,w4a16] [--layers gate_up,down] [--routing uniform]
        [--budget 0.08] [--no-peers] [--kernels grouped_bf16_tc,grouped_w4a16_tc]

Per model, expert layer (gate_up: the tokens' rows gathered in the kernel; down: activations in routed order) and
batch B: one routing drawn with seed 0 (models.moe.draw), then
  grouped_<scheme>_tc our one-launch grouped GEMV on the tensor cores (grouped_tc.cu, grouped_w4_tc.cu);
  grouped_<scheme>   the same on CUDA cores (grouped_gemv.cu);
  torch_loop         bf16: a loop of torch.matmul over the touched experts (x already gathered, out= slices of y);
  torch_grouped_mm   bf16: torch._grouped_mm(x_routed, W.transpose(1, 2), offs) where the installed torch has it (x
                     already gathered; each expert's rows padded to a multiple of 8 only if torch refuses them bare);
each float64-checked (ours) and timed by the profiler's loop (workbench.measure.timing.measure: CUDA-graph replays,
input sets rotating over >= 3x the L2: the same routing relabelled onto other experts, or the whole expert set when
that is larger), and the L2-cold read time of the touched experts' weight bytes (bench/anchors.py ReadLimit; above
its 2 GB pool: the bytes at the bandwidth of the 1 GB read). Prints one table; every row goes to $OUT/moe_bench.csv.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernels.grouped import grouped  # noqa: E402
from models.workloads import get_model  # noqa: E402

MODELS = ("mixtral-8x7b", "qwen3-30b-a3b", "deepseek-v3", "olmoe-1b-7b")
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)


class TorchPeer:
    """A bf16 peer on the grouped runner's own weights and routing (shared through DLPack, no copy)."""

    def __init__(self, ours: grouped.GroupedRunner, kind: str) -> None:
        self.ours, self.kind, self.name = ours, kind, f"torch_{kind}"
        self.pad = 0  # rows per expert padded to a multiple of this for _grouped_mm (0: bare)

    def check(self, M: int, N: int, K: int) -> None:
        self.ours.check(M, N, K)

    def make(self, M: int, N: int, K: int, *, seed: int, reference: bool) -> Any:
        import torch

        from kernels.peers import _on_cupy_stream

        p = self.ours.make(M, N, K, seed=seed, reference=False)
        r = p.arrays["routed"]
        E = self.ours.experts
        with _on_cupy_stream():
            W = torch.as_tensor(p.arrays["w"][0].view("int16"), device="cuda").view(torch.bfloat16).view(E, N, K)
            x = torch.as_tensor(p.arrays["x"].view("int16"), device="cuda").view(torch.bfloat16)
            rows = torch.as_tensor(p.arrays["rows"], device="cuda").long()
            xr = x[rows] if self.ours.gather else x
            counts = r.counts.tolist()
            if self.kind == "grouped_mm" and self.pad:
                padded = [-(-c // self.pad) * self.pad for c in counts]
                xp = torch.zeros(sum(padded), K, dtype=torch.bfloat16, device="cuda")
                src, dst = 0, 0
                for c, pc in zip(counts, padded, strict=True):
                    xp[dst:dst + c] = xr[src:src + c]
                    src, dst = src + c, dst + pc
                xr, counts = xp, padded
            offs = torch.tensor(list(_cumsum(counts)), dtype=torch.int32, device="cuda")
            y = torch.empty(xr.shape[0], N, dtype=torch.bfloat16, device="cuda")
            Wt = W.transpose(1, 2)
            spans = [(e, a, b) for e, (a, b) in enumerate(zip([0, *_cumsum(counts)][:-1], _cumsum(counts),
                                                              strict=True)) if b > a]

            if self.kind == "loop":
                def launch() -> None:
                    with _on_cupy_stream():
                        for e, a, b in spans:
                            torch.matmul(xr[a:b], Wt[e], out=y[a:b])
            else:
                def launch() -> None:
                    with _on_cupy_stream():
                        torch._grouped_mm(xr, Wt, offs=offs, out_dtype=torch.bfloat16)
        torch.cuda.synchronize()
        p.arrays.update({"launch": launch, "torch": (W, x, xr, offs, y)})
        p.out = y
        return p

    def launch(self, problem: Any) -> None:
        problem.arrays["launch"]()

    def output(self, problem: Any) -> Any:
        return None


def _cumsum(xs: list[int]) -> list[int]:
    out, s = [], 0
    for x in xs:
        s += x
        out.append(s)
    return out


def expert_layers(model: str) -> list[tuple[str, int, int, int, int]]:
    """(layer, N, K, E, k) of the model's expert layers."""
    return [(layer.name.removeprefix("expert_"), layer.N, layer.K, layer.experts, layer.top_k)
            for layer in get_model(model).layers if layer.experts > 1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--batches", default=",".join(map(str, BATCHES)))
    ap.add_argument("--schemes", default="bf16,w4a16")
    ap.add_argument("--layers", default="gate_up,down")
    ap.add_argument("--routing", default="uniform")
    ap.add_argument("--budget", type=float, default=0.08)
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--kernels", default="", help="only these of ours (comma list; default: all)")
    args = ap.parse_args()

    import cupy as cp

    from bench.anchors import ReadLimit
    from workbench.measure.timing import CudaTimer, TimingConfig, measure

    out_dir = Path(os.environ.get("OUT") or tempfile.mkdtemp())
    out_path = out_dir / "moe_bench.csv"
    dev = cp.cuda.Device()
    l2 = int(cp.cuda.runtime.getDeviceProperties(dev.id)["l2CacheSize"])
    sms = int(dev.attributes["MultiProcessorCount"])
    limit = ReadLimit(l2, sms)
    gb = 1 << 30
    bw_1gb = gb / limit(gb)[0]
    cfg = TimingConfig(budget_s=args.budget)
    try:
        import torch

        has_grouped_mm = hasattr(torch, "_grouped_mm")
    except ImportError:
        torch, has_grouped_mm = None, False
    rows: list[dict[str, Any]] = []
    fields = ["model", "layer", "scheme", "kernel", "B", "N", "K", "E", "top_k", "routing", "touched", "busiest",
              "touched_bytes", "time_s", "p10_s", "p90_s", "ref_err", "rotate_sets", "method", "config", "read_s",
              "read_src", "over_read", "note"]
    with open(out_path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        for model in args.models.split(","):
            for layer, N, K, E, k in expert_layers(model):
                if layer not in args.layers.split(","):
                    continue
                for scheme in args.schemes.split(","):
                    gather = layer == "gate_up"
                    ours = grouped.GroupedRunner(f"grouped_{scheme}", E, k, args.routing, routing_seed=0,
                                                 gather=gather)
                    tc = grouped.GroupedRunner(f"grouped_{scheme}_tc", E, k, args.routing, routing_seed=0,
                                               gather=gather)
                    wanted = set(filter(None, args.kernels.split(",")))
                    runners: list[Any] = [r for r in (tc, ours) if not wanted or r.name in wanted]
                    if scheme == "bf16" and not args.no_peers and torch is not None:
                        # on the CUDA-core kernel's row-major weights (generated even when that kernel is not timed)
                        runners.append(TorchPeer(ours, "loop"))
                        if has_grouped_mm:
                            runners.append(TorchPeer(ours, "grouped_mm"))
                    for B in map(int, args.batches.split(",")):
                        first = runners[0].make(B, N, K, seed=0, reference=False)
                        r = first.arrays["routed"]
                        tb = r.touched * grouped.expert_bytes(scheme, N, K)
                        read_s, _ = limit(tb) if tb <= 2 * gb - 16 * 1024 * 1024 else (math.nan, 0)
                        src = "read curve"
                        if not math.isfinite(read_s):
                            read_s, src = tb / bw_1gb, "1 GB bandwidth"
                        del first
                        for run in runners:
                            row = {"model": model, "layer": layer, "scheme": scheme, "kernel": run.name, "B": B,
                                   "config": str(getattr(run, "launch_config", lambda m, n, k: "")(B, N, K)),
                                   "N": N, "K": K, "E": E, "top_k": k, "routing": args.routing,
                                   "touched": r.touched, "busiest": int(r.counts.max()), "touched_bytes": tb,
                                   "read_s": read_s, "read_src": src, "note": ""}
                            t0 = time.perf_counter()
                            try:
                                res = _measure(run, B, N, K, l2, cfg, measure, CudaTimer)
                                row.update({"time_s": res.stats.median, "p10_s": res.stats.p10,
                                            "p90_s": res.stats.p90, "ref_err": res.ref_error_rel,
                                            "rotate_sets": res.rotate_sets, "method": res.method,
                                            "over_read": res.stats.median / read_s,
                                            "note": f"pad {run.pad}" if getattr(run, "pad", 0) else ""})
                            except Exception as exc:  # a peer that refuses a shape: recorded, the bench goes on
                                row["note"] = f"{type(exc).__name__}: {exc}".splitlines()[0][:160]
                                traceback.print_exc(limit=2)
                            row["note"] += f" ({time.perf_counter() - t0:.1f} s)"
                            rows.append(row)
                            w.writerow(row)
                            fh.flush()
                    for run in (tc, ours):
                        run._weights.clear()
                    cp.get_default_memory_pool().free_all_blocks()
    _print(rows)
    print(f"rows: {out_path}")


def _measure(run: Any, B: int, N: int, K: int, l2: int, cfg: Any, measure: Any, timer_cls: Any) -> Any:
    try:
        return measure(run, B, N, K, l2, timer_cls(), cfg)
    except RuntimeError:
        if isinstance(run, TorchPeer) and run.kind == "grouped_mm" and not run.pad:
            run.pad = 8  # torch refused unaligned groups: pad each expert's rows to 16 bytes
            return measure(run, B, N, K, l2, timer_cls(), cfg)
        raise


def _print(rows: list[dict[str, Any]]) -> None:
    key = lambda r: (r["model"], r["layer"], r["scheme"], r["B"])  # noqa: E731
    table: dict[tuple, dict[str, Any]] = {}
    for r in rows:
        table.setdefault(key(r), {"touched": r["touched"], "busiest": r["busiest"], "read": r["read_s"]})[
            r["kernel"]] = r.get("time_s", math.nan)
    print("ours: the faster of our grouped kernels of the scheme (tensor-core tc or CUDA-core cc)")
    print(f"{'model':14} {'layer':7} {'sch':5} {'B':>3} {'tch':>4} {'max':>3} {'read us':>8} {'tc us':>8} "
          f"{'cc us':>8} {'/read':>5} {'loop us':>8} {'gmm us':>8} {'loop/o':>6} {'gmm/o':>6}")
    for (model, layer, scheme, B), v in table.items():
        tc, cc = v.get(f"grouped_{scheme}_tc", math.nan), v.get(f"grouped_{scheme}", math.nan)
        o = min(tc, cc) if math.isfinite(tc) and math.isfinite(cc) else cc if math.isfinite(cc) else tc
        lp, gm = v.get("torch_loop", math.nan), v.get("torch_grouped_mm", math.nan)
        print(f"{model:14} {layer:7} {scheme:5} {B:>3} {v['touched']:>4} {v['busiest']:>3} {v['read'] * 1e6:>8.1f} "
              f"{tc * 1e6:>8.1f} {cc * 1e6:>8.1f} {o / v['read']:>5.2f} {lp * 1e6:>8.1f} {gm * 1e6:>8.1f} "
              f"{lp / o:>6.2f} {gm / o:>6.2f}")


if __name__ == "__main__":
    main()
