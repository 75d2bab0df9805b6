"""
The shape of a LLaMA ONNX export (`plmr.models.llama_onnx`) as command-line options,
shared by the benchmarks that write one: `--hidden`, `--heads`, `--kv-heads`, `--ffn`,
`--vocab` and `--seq`.
"""

from __future__ import annotations

import argparse
from dataclasses import replace

from plmr.models.llama_onnx import LlamaOnnxConfig

FIELDS = ("hidden", "heads", "kv_heads", "ffn", "vocab", "seq")


def add_shape_arguments(parser: argparse.ArgumentParser, defaults: LlamaOnnxConfig) -> None:
    """The export's width options (`FIELDS`), their defaults those of `defaults`."""
    for field in FIELDS:
        help = "Prompt length (tokens)." if field == "seq" else None
        parser.add_argument(
            "--" + field.replace("_", "-"),
            type=int,
            default=getattr(defaults, field),
            help=help,
        )


def export_config(
    args: argparse.Namespace, defaults: LlamaOnnxConfig, layers: int
) -> LlamaOnnxConfig:
    """`defaults` at the width `args` give, with `layers` layers."""
    shape = {field: int(getattr(args, field)) for field in FIELDS}
    return replace(defaults, layers=layers, **shape)
