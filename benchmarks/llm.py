"""
LLaMA-style inference on the modelled wafer, next to WaferLLM's figures on a real WSE-2.

    .venv/bin/python benchmarks/llm.py            # print the table
    .venv/bin/python benchmarks/llm.py --readme   # also rewrite benchmarks/README.md's
                                                  # "LLM inference" section
    .venv/bin/python benchmarks/llm.py --quick    # the tiny model only (seconds)
    .venv/bin/python benchmarks/llm.py --steps    # llama3-8b's k-token decode steps only
    .venv/bin/python benchmarks/llm.py --reference  # the hand-composed layers only, at
                                                    # WaferLLM's grids (about a minute)

Every row is what `plmr bench decode|prefill --json` prints (`plmr.models.bench`): one
layer and the LM head compiled by `plmr compile` and simulated in timing mode, the KV
append of WaferLLM's shift cache, and the pipeline stages of the capacity model placed on
the wafers of the system (`plmr.models.wafers`: regions per wafer, wafers used, the hops
and the links between wafers); next to it the hand-composed layer (`models/reference_layer.py`: the layer's kernels from the
kernel library, simulated and summed), the compute floor and the layer's floor under the
device model (`models/floor.py`: the compute floor plus each collective's hops out and
back over half its axis and the calibrated overheads). The decode steps of k = 2, 4, 8
new tokens (speculative decoding's verification) follow in a table of their own.
Independent runs go to `--jobs` processes.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

from plmr.errors import PlmrError
from plmr.models.bench import WAFERLLM, bench_llm
from plmr.models.llama import get_config
from plmr.models.reference_layer import hand_composed_layer
from plmr.target.device import get_device


@dataclass(frozen=True)
class Job:
    kind: str
    model: str
    grid: int
    device: str = "wse2"
    tokens: int | None = None
    # How the program is written (`ProgramBuilder`'s forms): "heads" keeps the heads a
    # tensor dimension; "per-head" writes every head's products apart (llama3-8b
    # prefill at 480² in both: the per-head form is the baseline).
    form: str = "heads"
    # New tokens per decode step (k > 1: the verification step of speculative decoding).
    step: int = 1


WAFERLLM_SCALING: dict[str, dict[int, float]] = {
    # LLaMA3-8B tokens/s on a real WSE-2 by grid side: decode (Table 4 of the OSDI'25
    # paper, one request) and prefill of a 4K prompt (Table 3).
    "decode": {420: 2699.9, 540: 2501.5, 660: 2243.3},
    "prefill": {480: 20321.0, 600: 25037.0, 720: 27687.0},
}

REFERENCE_JOBS = (
    Job("decode", "llama3-8b", 420, tokens=4096),
    Job("decode", "llama3-8b", 540, tokens=4096),
    Job("decode", "llama3-8b", 660, tokens=4096),
    Job("prefill", "llama3-8b", 480, tokens=4096),
)

JOBS = (
    Job("decode", "tiny", 4),
    Job("prefill", "tiny", 4),
    Job("decode", "llama3-8b", 420, tokens=4096),
    Job("decode", "llama3-8b", 540, tokens=4096),
    Job("decode", "llama3-8b", 660, tokens=4096),
    Job("prefill", "llama3-8b", 480, tokens=4096),
    Job("prefill", "llama3-8b", 480, tokens=4096, form="per-head"),
    Job("decode", "llama3.1-70b", 512, device="wse3", tokens=4096),
    Job("decode", "llama3.1-405b", 576, device="wse3", tokens=4096),
)

STEP_TOKENS = (1, 2, 4, 8)
"""The k-token decode steps of llama3-8b at 420² (k = 1 is the decode row of JOBS)."""

STEP_JOBS = tuple(
    Job("decode", "llama3-8b", 420, tokens=4096, step=k) for k in STEP_TOKENS if k > 1
)

CEREBRAS: dict[str, tuple[float, str]] = {
    # Cerebras Inference's public single-user decode figures (16-bit weights, CS-3s).
    "llama3.1-70b": (
        450.0,
        "Cerebras Inference at its launch (August 2024); 2,100 tokens/s in October 2024, "
        "which Cerebras attributes partly to speculative decoding",
    ),
    "llama3.1-405b": (969.0, "Cerebras Inference (November 2024)"),
}


def measure(job: Job) -> tuple[Job, dict[str, Any] | None, str | None, float]:
    start = time.perf_counter()
    try:
        result = bench_llm(
            job.kind,
            job.model,
            (job.grid, job.grid),
            job.device,
            job.tokens,
            form=job.form,
            step_tokens=job.step,
        )
    except PlmrError as e:
        return job, None, str(e), time.perf_counter() - start
    return job, result.to_json(), None, time.perf_counter() - start


def _verdict(ratio: float) -> str:
    """WaferLLM's tokens/s over ours: `1.6× slower`, or `1.5 % faster` within 10 %."""
    if abs(ratio - 1) < 0.1:
        pct = abs(ratio - 1) * 100
        return f"{pct:.1f} % {'slower' if ratio >= 1 else 'faster'}"
    return f"{ratio:,.1f}× slower" if ratio >= 1 else f"{1 / ratio:,.1f}× faster"


def _cycles(v: float) -> str:
    return f"{v:,.0f}"


def reference(job: Job) -> tuple[Job, dict[str, Any], float]:
    """The hand-composed layer of a job (no compile)."""
    start = time.perf_counter()
    config = get_config(job.model)
    layer = hand_composed_layer(
        job.kind, config, (job.grid, job.grid), job.device, job.tokens or 4096
    )
    return job, layer.to_json(), time.perf_counter() - start


def reference_section(results: Sequence[tuple[Job, dict[str, Any], float]]) -> list[str]:
    """The hand-composed layers next to WaferLLM's measured figures at the same grids."""
    out = [
        "| run | grid | tokens | hand-composed cycles / layer | compute floor | "
        "layers × hand-composed → tokens/s | WaferLLM tokens/s | WaferLLM cycles / layer "
        "| time |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for job, r, took in results:
        n_layers = get_config(job.model).n_layers
        clock = get_device(job.device).clock_hz
        per_step = 1 if job.kind == "decode" else r["tokens"]
        tps = per_step * clock / (r["cycles"] * n_layers)
        ref = WAFERLLM_SCALING[job.kind].get(job.grid)
        ref_cycles = per_step * clock / (ref * n_layers) if ref else None
        out.append(
            f"| {job.model} {job.kind} | {job.grid}² | {r['tokens']} | "
            f"{_cycles(r['cycles'])} | {_cycles(r['compute_floor_cycles'])} | "
            f"{tps:,.0f} | {f'{ref:,.0f}' if ref else '—'} | "
            f"{_cycles(ref_cycles) if ref_cycles else '—'} | {took:.0f} s |"
        )
    return out


def section(
    results: Sequence[tuple[Job, dict[str, Any] | None, str | None, float]],
) -> list[str]:
    out = [
        "| run | form | grid | tokens | cycles / layer | step cycles | TPOT / TTFT | tokens/s "
        "| WaferLLM tokens/s | hand-composed cycles / layer | compute floor "
        "| compiled / hand-composed | floor / layer | compiled / floor "
        "| nests / allreduces per layer "
        "| device | stages | placement | wafers | SRAM / core (layer; stage) | routes | time |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---|---:|---:|---:|---:|",
    ]
    notes: list[str] = []
    for job, r, error, took in results:
        run = f"{job.model} {job.kind}"
        grid = f"{job.grid}²"
        if r is None:
            out.append(
                f"| {run} | {job.form} | {grid} | {job.tokens or ''} | — | — | — | — | — | — | — | — | "
                f"— | — | — | {job.device} | — | — | — | — | — | {took:.0f} s |"
            )
            notes.append(f"- {run} on {grid}: does not compile: {error}")
            continue
        ref = dict(WAFERLLM[job.kind])
        scaling = WAFERLLM_SCALING[job.kind].get(job.grid)
        if (
            scaling is not None
            and ref["model"] == job.model
            and tuple(ref["grid"]) != (job.grid, job.grid)
        ):
            # WaferLLM's figure at this grid; its cycles per layer are known at one only.
            ref["grid"] = (job.grid, job.grid)
            ref.pop("cycles_per_layer", None)
            ref["tokens_per_second"] = scaling
        ref_tps = float(ref["tokens_per_second"])
        same = ref["model"] == job.model and tuple(ref["grid"]) == (job.grid, job.grid)
        step = r["tpot_ms"] if job.kind == "decode" else r["ttft_ms"]
        hand = r.get("hand_composed_cycles")
        floor = r.get("compute_floor_cycles")
        ratio_hand = r.get("compiled_over_hand_composed")
        floor_info: dict[str, Any] = r.get("floor") or {}
        floor_layer = floor_info.get("cycles")
        over_floor = r.get("compiled_over_floor")
        out.append(
            f"| {run} | {job.form} | {grid} | {r['tokens']} | "
            f"{_cycles(r['layer_cycles'])} | "
            f"{_cycles(r['step_cycles'])} | {step:.3f} ms | {r['tokens_per_second']:,.0f} | "
            f"{f'{ref_tps:,.0f}' if same else '—'} | "
            f"{_cycles(hand) if hand else '—'} | {_cycles(floor) if floor else '—'} | "
            f"{f'{ratio_hand:,.2f}×' if ratio_hand else '—'} | "
            f"{_cycles(floor_layer) if floor_layer else '—'} | "
            f"{f'{over_floor:,.2f}×' if over_floor else '—'} | "
            f"{r.get('spmds_per_layer', '—')} / {r.get('allreduces_per_layer', '—')} | "
            f"{job.device} | {r['stages']} | {_placement(r)} | {r['wafers']} | "
            f"{r['sram_bytes_per_core']:,} B; "
            f"{r['model_sram_bytes_per_core']:,} B | {r['routes_per_router']} | "
            f"{took:.0f} s |"
        )
        if same:
            ratio = ref["tokens_per_second"] / r["tokens_per_second"]
            verdict = _verdict(ratio)
            form = "" if job.form == "heads" else f" ({job.form} form)"
            line = (
                f"- {run}{form} on {grid}: {r['tokens_per_second']:,.0f} tokens/s against "
                f"WaferLLM's {ref['tokens_per_second']:,.0f} ({verdict})"
            )
            if "cycles_per_layer" in ref:
                line += (
                    f"; {r['layer_cycles']:,.0f} cycles per layer against "
                    f"≈{ref['cycles_per_layer']:,.0f}"
                )
            line += (
                f"; layer compute {r['layer_compute_fraction']:.0%}, exposed "
                f"communication {r['layer_comm_fraction']:.0%}; compile "
                f"{r['compile_seconds']:.0f} s, simulation {r['simulate_seconds']:.0f} s."
            )
            notes.append(line)
        floor = r.get("floor")
        if job.kind == "decode" and job.model != "tiny" and floor:
            parts = ", ".join(
                f"{c['kind']} {c['combine']} {c['axis']} over {c['pes']} "
                f"({c['elems']} values) {c['floor_cycles']:,.0f}".replace("  ", " ")
                + (
                    f" (compiled {c['compiled_cycles']:,.0f}, "
                    f"{c['compiled_over_floor']:,.2f}×)"
                    if c.get("compiled_over_floor")
                    else ""
                )
                for c in floor["collectives"]
            )
            notes.append(
                f"- {run} on {grid}: the layer's floor under the device model "
                f"{floor['cycles']:,.0f} cycles = compute {floor['compute_cycles']:,.0f} + "
                f"{len(floor['collectives'])} collectives {floor['collective_cycles']:,.0f} "
                f"({parts}); the compiled layer is {r['compiled_over_floor']:,.2f}× it."
            )
        split = r.get("wafer_step")
        if job.model in CEREBRAS and split is not None:
            figure, source = CEREBRAS[job.model]
            total = split["total_cycles"]
            layers, fabric = sum(split["layers_cycles"]), sum(split["fabric_hop_cycles"])
            links, head = sum(split["link_cycles"]), split["head_cycles"]
            notes.append(
                f"- {run} on {r['wafers']} wafers of {job.device} ({_placement(r)}): "
                f"{r['tokens_per_second']:,.0f} tokens/s against {figure:,.0f} ({source}); "
                f"the step's {total:,.0f} cycles: layers and KV appends "
                f"{layers / total:.1%}, hops on the wafers {fabric / total:.1%}, links "
                f"between wafers {links / total:.1%} ({len(split['link_cycles'])} links), "
                f"first layer's input and LM head {head / total:.1%}; compile "
                f"{r['compile_seconds']:.0f} s, simulation {r['simulate_seconds']:.0f} s."
            )
    return [*out, "", *notes]


def step_section(
    results: Sequence[tuple[Job, dict[str, Any] | None, str | None, float]],
) -> list[str]:
    """The k-token decode steps (speculative decoding's verification) against k = 1."""
    out = [
        "| k new tokens | grid | cycles / layer | step cycles | step / k | "
        "step / (k × one-token step) | tokens/s if all accepted | floor / layer "
        "| compiled / floor | time |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    one = next((r for j, r, _, _ in results if j.step == 1 and r is not None), None)
    for job, r, error, took in results:
        if r is None:
            out.append(
                f"| {job.step} | {job.grid}² | — | — | — | — | — | — | — | {took:.0f} s |"
            )
            out.append(f"|  | does not compile: {error} | | | | | | | | |")
            continue
        step = r["step_cycles"]
        ratio = f"{step / (job.step * one['step_cycles']):.2f}" if one else "—"
        floor: dict[str, Any] = r.get("floor") or {}
        out.append(
            f"| {job.step} | {job.grid}² | {_cycles(r['layer_cycles'])} | "
            f"{_cycles(step)} | {_cycles(step / job.step)} | {ratio} | "
            f"{r['tokens_per_second']:,.0f} | "
            f"{_cycles(floor['cycles']) if floor else '—'} | "
            f"{r['compiled_over_floor']:,.2f}× | {took:.0f} s |"
        )
    return out


def _placement(r: dict[str, Any]) -> str:
    """`12 × 512² (2×1 per wafer)`: the stages' regions and how a wafer holds them."""
    placement = r.get("placement")
    if placement is None:
        return "—"
    p, q = placement["grid"]
    rows, cols = placement["regions_per_wafer"]
    shape = f"{p}²" if p == q else f"{p}×{q}"
    return f"{len(placement['stages'])} × {shape} ({rows}×{cols} per wafer)"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0] if __doc__ else ""
    )
    parser.add_argument("--quick", action="store_true", help="The tiny model only.")
    parser.add_argument(
        "--steps",
        action="store_true",
        help="Only llama3-8b's decode steps of k = 1, 2, 4, 8 tokens at 420².",
    )
    parser.add_argument("--jobs", type=int, default=2, help="Worker processes.")
    parser.add_argument(
        "--readme", action="store_true", help="Rewrite the section of benchmarks/README.md."
    )
    parser.add_argument(
        "--reference",
        action="store_true",
        help="Only the hand-composed layers at WaferLLM's grids (no compile).",
    )
    args = parser.parse_args(argv)
    if args.reference:
        start = time.perf_counter()
        done_ref = [reference(j) for j in REFERENCE_JOBS]
        lines = reference_section(done_ref)
        lines += ["", f"Wall time: {time.perf_counter() - start:.0f} s."]
        sys.stdout.write("\n".join(lines) + "\n")
        return 0
    jobs = [*JOBS, *STEP_JOBS]
    if args.quick:
        jobs = [j for j in JOBS if j.model == "tiny"]
    elif args.steps:
        jobs = [j for j in jobs if j.model == "llama3-8b" and j.grid == 420]
    start = time.perf_counter()
    # The largest runs first, so that two workers finish together.
    ordered = sorted(jobs, key=lambda j: -j.grid)
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as pool:
            done = {j: r for j, *r in pool.map(measure, ordered)}
    else:
        done = {j: r for j, *r in map(measure, ordered)}
    results = [(j, *done[j]) for j in jobs]
    wall = time.perf_counter() - start
    lines = section([r for r in results if r[0].step == 1])  # type: ignore[arg-type]
    steps = [
        r
        for r in results
        if r[0].model == "llama3-8b" and r[0].kind == "decode" and r[0].grid == 420
    ]
    if len(steps) > 1:
        lines += [
            "",
            "Several tokens per decode step (llama3-8b, 420², a 4,096-token cache): "
            "`plmr bench decode --step-tokens k`, the verification step of speculative "
            "decoding, k new tokens against the cache with the logits of each.",
            "",
            *step_section(steps),  # type: ignore[arg-type]
        ]
    lines += ["", f"Wall time of the whole run: {wall:.0f} s with {args.jobs} worker(s)."]
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if args.readme:
        from readme_section import write_section

        if not write_section("llm", "llm.py", text):
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
