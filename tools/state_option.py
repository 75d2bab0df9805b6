"""The KV-cache state options of `plmr compile` and `plmr generate` (`graph-kv-state`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def state_options(f: F) -> F:
    """
    Adds `--state IN=OUT` (repeatable), `--position NAME` and `--mask NAME`: which
    input/output pairs of a decode step are one KV cache kept on the wafer, and the
    inputs the rewritten step computes its rows from.
    """
    for option in reversed(
        [
            click.option(
                "--state",
                "state",
                multiple=True,
                help="IN=OUT: an input/output pair that is one KV cache, kept on the "
                "wafer as state (repeatable; default: found by name, "
                "past_key_values.N.key -> present.N.key, past_key_N -> present_key_N).",
            ),
            click.option(
                "--position",
                default="position_ids",
                show_default=True,
                help="The decode step's position input (the row its cache receives).",
            ),
            click.option(
                "--mask",
                default="attention_mask",
                show_default=True,
                help="The attention mask input (computed on the wafer from the position).",
            ),
        ]
    ):
        f = option(f)
    return f


def state_text(state: tuple[str, ...]) -> str:
    """
    The `--state` values as `graph-kv-state`'s `IN=OUT,IN=OUT` ("" when none is given),
    checked: a malformed pair is one error before any work.
    """
    from plmr.passes.kv_state import parse_state_pairs

    text = ",".join(state)
    parse_state_pairs(text)
    return text
