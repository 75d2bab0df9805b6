"""
`plmr rules`: generate, list and verify graph substitution rules.

- `plmr rules generate [--max-ops 3] [--ops matmul,add,...] [-o FILE]` runs TASO's
  generator and reports the count after each pruning step and the time taken;
- `plmr rules list [--rules FILE]` prints one rule per line;
- `plmr rules verify [--rules FILE] [--no-z3] [--mutants]` random-tests every rule, tries a
  Z3 proof, and says per rule how it was verified.

Heavy modules are imported inside the commands so that `plmr` starts fast.
"""

from __future__ import annotations

import time
from pathlib import Path

import click

from plmr.errors import PlmrError
from plmr.tools.options import COUNT, SEED

RULES_OPTION = click.option(
    "--rules",
    "rules_path",
    default="default",
    show_default=True,
    help="Rule file (.mlir); `default` is the set shipped with plmr.",
)


def parse_ops(text: str | None) -> list[str]:
    """The op names of `--ops` (comma-separated), checked against the substitution op set."""
    from plmr.passes.taso.ops import SUBSTITUTION_KINDS

    if text is None:
        return list(SUBSTITUTION_KINDS)
    ops = [t.strip() for t in text.split(",") if t.strip()]
    if not ops:
        raise PlmrError("--ops needs at least one op, e.g. --ops matmul,add,concat,split")
    unknown = [o for o in ops if o not in SUBSTITUTION_KINDS]
    if unknown:
        raise PlmrError(
            f"--ops: unknown op(s) {', '.join(unknown)}; choose from "
            f"{', '.join(SUBSTITUTION_KINDS)}"
        )
    return ops


@click.group("rules")
def rules() -> None:
    """Generate, list and verify graph substitution rules (TASO)."""


@rules.command("generate")
@click.option(
    "--max-ops",
    type=COUNT,
    default=3,
    show_default=True,
    help="Largest graph (ops per side).",
)
@click.option("--ops", default=None, help="Comma-separated op subset (default: all).")
@click.option("--seed", type=SEED, default=0, show_default=True, help="Random seed.")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the rules here (default: standard output, report on standard error).",
)
def generate_cmd(max_ops: int, ops: str | None, seed: int, output: Path | None) -> None:
    """Enumerate graphs, fingerprint them, prune the candidate rules, and write the rest."""
    from plmr.files import check_output_path, write_text_atomically
    from plmr.passes.taso.generator import generate_rules
    from plmr.passes.taso.rules import RULES_HEADER, rules_text

    kinds = parse_ops(ops)
    if output is not None:
        check_output_path(output)
    report = generate_rules(max_ops, kinds, seed)
    provenance = "".join(f"// {line}\n" for line in report.lines())
    text = rules_text(report.rules, f"{RULES_HEADER}//\n{provenance}")
    to_stderr = output is None
    for line in report.lines():
        click.echo(line, err=to_stderr)
    if output is None:
        click.echo(text, nl=False)
        return
    write_text_atomically(output, text)
    click.echo(f"wrote {len(report.rules)} rules to {output}")


@rules.command("list")
@RULES_OPTION
def list_cmd(rules_path: str) -> None:
    """Print the rules, one per line: `name: src => dst  [shapes]`."""
    from plmr.passes.taso.rules import describe_rule, load_rules

    for rule in load_rules(rules_path):
        click.echo(describe_rule(rule))


@rules.command("verify")
@RULES_OPTION
@click.option(
    "--trials", type=COUNT, default=3, show_default=True, help="Random sizes per rule."
)
@click.option("--z3/--no-z3", "use_z3", default=True, help="Also try Z3 proofs.")
@click.option(
    "--timeout-ms", type=COUNT, default=2000, show_default=True, help="Z3 timeout per rule."
)
@click.option(
    "--mutants",
    is_flag=True,
    help="Also check that every mutant of every rule is rejected.",
)
def verify_cmd(
    rules_path: str, trials: int, use_z3: bool, timeout_ms: int, mutants: bool
) -> None:
    """Random-test every rule on exact integers and prove it with Z3 where that finishes."""
    from plmr.passes.taso.rules import load_rules
    from plmr.passes.taso.verifier import (
        check_rules,
        prove,
        random_test,
    )
    from plmr.passes.taso.verifier import (
        mutants as make_mutants,
    )

    rule_list = load_rules(rules_path)
    start = time.perf_counter()
    checks = check_rules(
        rule_list, trials, use_z3, timeout_ms, progress=lambda c: click.echo(c.line())
    )
    seconds = time.perf_counter() - start
    failed = [c for c in checks if not c.ok]
    counts: dict[str, int] = {}
    for c in checks:
        counts[c.proof.status] = counts.get(c.proof.status, 0) + 1
    click.echo(
        f"{len(checks) - len(failed)}/{len(checks)} rules pass random tests "
        f"({trials} sizes each); z3: "
        + ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
        + f"; {seconds:.1f} s"
    )
    survivors: list[str] = []
    if mutants:
        start = time.perf_counter()
        total = killed_random = killed_z3 = equivalent = 0
        for rule in rule_list:
            for what, mutant in make_mutants(rule):
                total += 1
                by_random = not random_test(mutant, trials).ok
                status = prove(mutant, timeout_ms).status if use_z3 else "skipped"
                killed_random += by_random
                killed_z3 += status == "refuted"
                if not by_random and status == "proved":
                    equivalent += 1  # e.g. swapping two equal factors: not a wrong rule
                elif not by_random:
                    survivors.append(f"{rule.name}: {what}")
        click.echo(
            f"mutants: {total}; rejected by random tests {killed_random}"
            + (
                f", refuted by z3 {killed_z3}, equivalent (z3 proof) {equivalent}"
                if use_z3
                else ""
            )
            + f"; {time.perf_counter() - start:.1f} s"
        )
        for s in survivors:
            click.echo(f"  not rejected: {s}")
    if failed or survivors:
        raise PlmrError(
            f"{len(failed)} rule(s) failed verification"
            + (f" and {len(survivors)} mutant(s) were not rejected" if survivors else "")
        )
