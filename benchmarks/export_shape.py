"""
The shape of a LLaMA ONNX export (`plmr.models.llama_onnx`) as command-line options,
shared by the benchmarks that write one: `--hidden`, `--heads`, `--kv-heads`, `--ffn`,
`--vocab` and `--seq`.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from plmr.models.llama_onnx import LlamaOnnxConfig


@dataclass(frozen=True)
class Shape:
    """The defaults of one benchmark."""

    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    seq: int = 8


def add_shape_arguments(parser: argparse.ArgumentParser, defaults: Shape) -> None:
    """The export's width options, with `defaults`."""
    parser.add_argument("--hidden", type=int, default=defaults.hidden)
    parser.add_argument("--heads", type=int, default=defaults.heads)
    parser.add_argument("--kv-heads", type=int, default=defaults.kv_heads)
    parser.add_argument("--ffn", type=int, default=defaults.ffn)
    parser.add_argument("--vocab", type=int, default=defaults.vocab)
    parser.add_argument(
        "--seq", type=int, default=defaults.seq, help="Prompt length (tokens)."
    )


def export_config(args: argparse.Namespace, layers: int) -> LlamaOnnxConfig:
    """The export of `layers` layers at the width `args` give."""
    return LlamaOnnxConfig(
        hidden=args.hidden,
        heads=args.heads,
        kv_heads=args.kv_heads,
        ffn=args.ffn,
        vocab=args.vocab,
        seq=args.seq,
        layers=layers,
    )
