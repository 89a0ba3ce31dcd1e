"""Device benchmark of the grouped MoE kernels (kernels/grouped/grouped.py) beside their peers and the read limit (issue
33).

    PYTHONPATH=. python3 bench/bench_moe.py [--models mixtral-8x7b,qwen3-30b-a3b,deepseek-v3,olmoe-1b-7b]
        [--batches 1,2,4,8,16,32,64,128,256] [--schemes bf16,w4a16,fp8] [--layers gate_up,down] [--routing uniform]
        [--budget 0.08] [--no-peers | --peers loop,grouped_mm,scaled_mm] [--kernels grouped_bf16_tc,grouped_w4a16_tc]
        [--silu] [--fp8-mma]

Per model, expert layer (gate_up: the tokens' rows gathered in the kernel; down: activations in routed order) and
batch B: one routing drawn with seed 0 (models.moe.draw), then
  grouped_<scheme>_tc our one-launch grouped GEMV on the tensor cores (grouped_tc.cu, grouped_w4_tc.cu,
                     grouped_q8_tc.cu);
  grouped_<scheme>   the same on CUDA cores (grouped_gemv.cu; bf16 and W4A16 only);
  torch_loop         bf16: a loop of torch.matmul over the touched experts (x already gathered, out= slices of y);
  torch_grouped_mm   bf16: torch._grouped_mm(x_routed, W.transpose(1, 2), offs) where the installed torch has it (x
                     already gathered; each expert's rows padded to a multiple of 8 only if torch refuses them bare);
  --silu             bf16 gate+up also as grouped_bf16_tc_silu (SiLU·mul in the epilogue, N / 2 out) and
                     grouped_bf16_tc+silu_mul (the GEMM, then the elementwise silu_mul_bf16 kernel);
  grouped_bf16_wg    bf16, sm_90 only: the wgmma grouped GEMM (grouped_wg.cu; --no-wg leaves it out);
  --fp8-mma          fp8 also as grouped_fp8_tc_e4m3mma: the e4m3 mma.sync m16n8k32 itself (config f16=False), not
                     the fragments converted to fp16 once for the f16 mma (the default, as fp8_tc_gemv);
  torch_scaled_mm    fp8: a loop of torch._scaled_mm over the touched experts on the same e4m3 codes (unpacked to
                     row-major once per layer) with row-wise scales (the tokens' scales x the expert's), bf16 out
                     (torch 2.11 on an H100 refused every expert shape: CUBLAS_STATUS_NOT_SUPPORTED, in the notes);
each float64-checked (ours) and timed by the profiler's loop (workbench.measure.timing.measure: CUDA-graph replays,
input sets rotating over >= 3x the L2: the same routing relabelled onto other experts, or the whole expert set when
that is larger), and the L2-cold read time of the touched experts' weight bytes (bench/anchors.py ReadLimit; above
its 2 GB pool: the bytes at the bandwidth of the 1 GB read). Every launch configuration compiles first, in parallel
(kernels.toolchain.build.prewarm). Prints one table per scheme and, last, ours per scheme side by side; every row goes
to $OUT/moe_bench.csv.
"""

from __future__ import annotations

import argparse
import csv
import functools
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


class ScaledMmPeer:
    """fp8 peer: torch._scaled_mm per touched expert on the grouped fp8 runner's own codes and scales."""

    def __init__(self, ours: grouped.GroupedRunner) -> None:
        self.ours, self.name = ours, "torch_scaled_mm"
        self._codes: dict[tuple[int, int], Any] = {}

    def check(self, M: int, N: int, K: int) -> None:
        self.ours.check(M, N, K)

    def codes(self, N: int, K: int) -> Any:
        """Every expert's e4m3 codes row-major [E * N, K] (unpacked from the kernel's fragment order once)."""
        import cupy as cp

        from kernels.quant import pack_q8

        if (N, K) not in self._codes:
            w = self.ours.weights(N, K)[0]
            out = cp.empty((self.ours.experts * N, K), dtype=cp.uint8)
            for e in range(self.ours.experts):
                sl = slice(e * N, (e + 1) * N)
                out[sl] = pack_q8.unpack_q8_tc(w[sl].reshape(N // 16, K // 64, 2, 32, 4), N, cp)
            self._codes = {(N, K): out}
        return self._codes[(N, K)]

    def make(self, M: int, N: int, K: int, *, seed: int, reference: bool) -> Any:
        import torch

        from kernels.peers import _on_cupy_stream

        p = self.ours.make(M, N, K, seed=seed, reference=False)
        r, E = p.arrays["routed"], self.ours.experts
        codes = self.codes(N, K)
        with _on_cupy_stream():
            f8 = torch.float8_e4m3fn
            W = torch.as_tensor(codes, device="cuda").view(f8).view(E, N, K)
            x = torch.as_tensor(p.arrays["x"], device="cuda")  # uint8 codes: gathered as bytes, then viewed as e4m3
            sa = torch.as_tensor(p.arrays["sa"], device="cuda")
            sw = torch.as_tensor(p.arrays["w"][1], device="cuda")
            rows = torch.as_tensor(p.arrays["rows"], device="cuda").long()
            xr, sar = (x[rows], sa[rows]) if self.ours.gather else (x, sa)
            xr = xr.view(f8)
            spans = [(e, int(r.offsets[e]), int(r.offsets[e + 1])) for e in range(E) if r.counts[e]]
            scales = [(sar[a:b].reshape(-1, 1).contiguous(), sw[e].reshape(1, 1).expand(1, N).contiguous())
                      for e, a, b in spans]
            Wt = W.transpose(1, 2)

            def launch() -> None:
                with _on_cupy_stream():
                    for (e, a, b), (s_a, s_b) in zip(spans, scales, strict=True):
                        torch._scaled_mm(xr[a:b], Wt[e], scale_a=s_a, scale_b=s_b, out_dtype=torch.bfloat16)
        torch.cuda.synchronize()
        p.arrays.update({"launch": launch, "torch": (W, x, xr, sar, scales)})
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


def read_time(limit: Any, nbytes: float, bw_1gb: float) -> tuple[float, str]:
    """(seconds, source) of the L2-cold read of `nbytes`: the read kernel's fastest where they fit its 2 GB pool,
    else the bytes at the 1 GB read's bandwidth `bw_1gb`."""
    if nbytes <= (2 << 30) - (16 << 20):
        return limit(nbytes)[0], "read curve"
    return nbytes / bw_1gb, "1 GB bandwidth"


def expert_layers(model: str) -> list[tuple[str, int, int, int, int]]:
    """(layer, N, K, E, k) of the model's expert layers."""
    return [(layer.name.removeprefix("expert_"), layer.N, layer.K, layer.experts, layer.top_k)
            for layer in get_model(model).layers if layer.experts > 1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--batches", default=",".join(map(str, BATCHES)))
    ap.add_argument("--schemes", default="bf16,w4a16,fp8")
    ap.add_argument("--layers", default="gate_up,down")
    ap.add_argument("--routing", default="uniform")
    ap.add_argument("--budget", type=float, default=0.08)
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--peers", default="loop,grouped_mm,scaled_mm", help="torch peers to run (comma list)")
    ap.add_argument("--kernels", default="", help="only these of ours (comma list; default: all)")
    ap.add_argument("--silu", action="store_true", help="bf16 gate+up: the fused SiLU·mul kernel and the unfused pair")
    ap.add_argument("--fp8-mma", action="store_true", help="fp8: also the e4m3 mma.sync variant (f16=False)")
    ap.add_argument("--no-wg", dest="wg", action="store_false",
                    help="bf16: leave out grouped_bf16_wg (the wgmma kernel; sm_90 only, else left out anyway)")
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
    peers = set() if args.no_peers else set(filter(None, args.peers.split(",")))
    args.wg = args.wg and int(dev.compute_capability) == 90
    plan = _plan(args, peers, torch, has_grouped_mm)
    _prewarm(plan, args)
    rows: list[dict[str, Any]] = []
    fields = ["model", "layer", "scheme", "kernel", "B", "N", "K", "E", "top_k", "routing", "touched", "busiest",
              "touched_bytes", "time_s", "p10_s", "p90_s", "ref_err", "rotate_sets", "method", "config", "read_s",
              "read_src", "over_read", "note"]
    with open(out_path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        for model, layer, N, K, E, k, scheme, ours, tc, runners in plan:
            for B in map(int, args.batches.split(",")) if runners else ():
                first = runners[0].make(B, N, K, seed=0, reference=False)
                r = first.arrays["routed"]
                tb = r.touched * grouped.expert_bytes(scheme, N, K)
                read_s, src = read_time(limit, tb, bw_1gb)
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
            for run in (tc, ours, *runners):
                if run is not None:
                    getattr(run, "_weights", {}).clear()
                    getattr(run, "_codes", {}).clear()
            cp.get_default_memory_pool().free_all_blocks()
    _print(rows)
    _print_silu(rows)
    _print_schemes(rows)
    print(f"rows: {out_path}")


def _plan(args: Any, peers: set[str], torch: Any, has_grouped_mm: bool) -> list[tuple[Any, ...]]:
    """(model, layer, N, K, E, k, scheme, CUDA-core runner or None, tensor-core runner, runners to time) per layer and
    scheme asked for."""
    wanted = set(filter(None, args.kernels.split(",")))
    out = []
    for model in args.models.split(","):
        for layer, N, K, E, k in expert_layers(model):
            if layer not in args.layers.split(","):
                continue
            for scheme in args.schemes.split(","):
                gather = layer == "gate_up"
                make = functools.partial(grouped.GroupedRunner, experts=E, top_k=k, routing=args.routing,
                                         routing_seed=0, gather=gather)
                ours = make(f"grouped_{scheme}") if f"grouped_{scheme}" in grouped.KERNELS else None
                tc = make(f"grouped_{scheme}_tc")
                silu = ([make("grouped_bf16_tc_silu"), make("grouped_bf16_tc", separate_silu=True)]
                        if args.silu and scheme == "bf16" and gather else [])
                if args.fp8_mma and scheme == "fp8":
                    silu.append(make("grouped_fp8_tc", f16=False))
                    silu[-1].name = "grouped_fp8_tc_e4m3mma"
                for r in silu:
                    r._weights = tc._weights  # the same random tiles: one copy of the experts
                if scheme == "bf16" and ours is not None and args.wg:
                    silu.append(make("grouped_bf16_wg"))
                    silu[-1]._weights = ours._weights  # plain rows, as the CUDA-core kernel's
                runners: list[Any] = [r for r in (tc, ours, *silu)
                                      if r is not None and (not wanted or r.name in wanted)]
                if torch is not None and scheme == "bf16" and ours is not None:
                    # on the CUDA-core kernel's row-major weights (generated even when that kernel is not timed)
                    runners += [TorchPeer(ours, kind) for kind in ("loop", "grouped_mm")
                                if kind in peers and (kind == "loop" or has_grouped_mm)]
                if torch is not None and scheme == "fp8" and "scaled_mm" in peers:
                    runners.append(ScaledMmPeer(tc))
                out.append((model, layer, N, K, E, k, scheme, ours, tc, runners))
    return out


def _prewarm(plan: list[tuple[Any, ...]], args: Any) -> None:
    """Compile every launch configuration of our kernels the run needs, in parallel processes, before timing."""
    from kernels.toolchain import build

    jobs = {r.compile_job(B, N, K) for _, _, N, K, _, _, _, _, _, runners in plan for r in runners
            if isinstance(r, grouped.GroupedRunner) for B in map(int, args.batches.split(","))}
    t0 = time.perf_counter()
    n, errors = build.prewarm(sorted(jobs))
    print(f"prewarm: {n} of {len(jobs)} configurations compiled in {time.perf_counter() - t0:.1f} s", *errors,
          sep="\n")


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
    print("ours: the fastest of our grouped kernels of the scheme (tensor-core tc, CUDA-core cc, wgmma wg); loop: "
          "torch_loop (bf16) or torch_scaled_mm (fp8)")
    print(f"{'model':14} {'layer':7} {'sch':5} {'B':>3} {'tch':>4} {'max':>3} {'read us':>8} {'tc us':>8} "
          f"{'cc us':>8} {'wg us':>8} {'/read':>5} {'loop us':>8} {'gmm us':>8} {'loop/o':>6} {'gmm/o':>6}")
    for (model, layer, scheme, B), v in table.items():
        tc, cc, wg = (v.get(f"grouped_{scheme}{s}", math.nan) for s in ("_tc", "", "_wg"))
        o = min((t for t in (tc, cc, wg) if math.isfinite(t)), default=math.nan)
        lp, gm = v.get("torch_loop", v.get("torch_scaled_mm", math.nan)), v.get("torch_grouped_mm", math.nan)
        print(f"{model:14} {layer:7} {scheme:5} {B:>3} {v['touched']:>4} {v['busiest']:>3} {v['read'] * 1e6:>8.1f} "
              f"{tc * 1e6:>8.1f} {cc * 1e6:>8.1f} {wg * 1e6:>8.1f} {o / v['read']:>5.2f} {lp * 1e6:>8.1f} "
              f"{gm * 1e6:>8.1f} {lp / o:>6.2f} {gm / o:>6.2f}")



def _print_schemes(rows: list[dict[str, Any]]) -> None:
    """Ours per scheme side by side (us) and the ratios against bf16, with each scheme's time over its read limit."""
    t: dict[tuple, dict[str, float]] = {}
    for r in rows:
        if r["kernel"].startswith("grouped_") and r["kernel"].endswith("_tc"):
            t.setdefault((r["model"], r["layer"], r["B"]), {})[r["scheme"]] = r.get("time_s", math.nan)
            t[(r["model"], r["layer"], r["B"])][r["scheme"] + "/read"] = r.get("over_read", math.nan)
    print(f"{'model':14} {'layer':7} {'B':>3} {'bf16 us':>8} {'w4a16 us':>8} {'fp8 us':>8} {'bf16/fp8':>8} "
          f"{'w4/fp8':>6} {'fp8/read':>8}")
    for (model, layer, B), v in t.items():
        bf, w4, f8 = (v.get(s, math.nan) for s in ("bf16", "w4a16", "fp8"))
        print(f"{model:14} {layer:7} {B:>3} {bf * 1e6:>8.1f} {w4 * 1e6:>8.1f} {f8 * 1e6:>8.1f} {bf / f8:>8.2f} "
              f"{w4 / f8:>6.2f} {v.get('fp8/read', math.nan):>8.2f}")


def _print_silu(rows: list[dict[str, Any]]) -> None:
    """bf16 gate+up with SiLU·mul: fused against the GEMM plus the separate elementwise kernel (us)."""
    t: dict[tuple, dict[str, float]] = {}
    for r in rows:
        if r["scheme"] == "bf16" and r["layer"] == "gate_up" and r["kernel"].startswith("grouped_bf16_tc"):
            t.setdefault((r["model"], r["B"]), {})[r["kernel"]] = r.get("time_s", math.nan)
    if not any("grouped_bf16_tc_silu" in v for v in t.values()):
        return
    print(f"{'model':14} {'B':>3} {'gemm us':>8} {'+silu us':>8} {'fused us':>8} {'unfused/fused':>13}")
    for (model, B), v in t.items():
        g, u, f = (v.get(k, math.nan) for k in ("grouped_bf16_tc", "grouped_bf16_tc+silu_mul", "grouped_bf16_tc_silu"))
        print(f"{model:14} {B:>3} {g * 1e6:>8.1f} {u * 1e6:>8.1f} {f * 1e6:>8.1f} {u / f:>13.2f}")


if __name__ == "__main__":
    main()
