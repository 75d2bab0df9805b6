"""
Schedules as data (after Matmap): transforms that only record their parameters, compose
into a `Compound`, round-trip through JSON, and turn into the pipeline `plmr compile` runs.

A parameter is a plain JSON value or a `Knob` — a domain (choices, an integer range, a
power-of-two range) and a default — that a tuner searches. Transforms address the program
by stable names, never by position: `Tile` overrides the blocking of the nests computing
named tensors (the names the importer and the passes keep: `%attn`, `%logits`, ...), and
each transform is identified in a compound by its kind, so editing or swapping one (say,
a different `Partition`) leaves the others valid. A name that no longer exists after the
transforms before it (e.g. a nest merged away by `Fuse`) makes the schedule infeasible
with that reason, it does not silently apply elsewhere.

```python
s = Compound([EliminateTransposes(), Substitute(budget=50), Fuse("auto"),
              Tile(parallel=pow2(2, 32, 8), reduction=16, nests={"o": [16, 8]}),
              Partition(grid=[4, 4], gemm=choice("meshgemm", "cannon"))])
s2 = s.replace(Partition(grid=[8, 8]))          # new partition, same tiling
Compound.from_json(s.to_json()) == s
```
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, cast

from plmr.dialects.float_text import option_literal
from plmr.errors import PlmrError

SCHEMA = 1
"""The version of the schedule JSON format (`"plmr_schedule": 1`)."""

Json = Any


# ---------------------------------------------------------------------------------------
# Knobs
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Knob:
    """
    A tunable parameter: `choice` over `values`, an integer range `int` [lo, hi] or a
    power-of-two range `pow2` [lo, hi], with a default taken when it is not tuned.
    """

    kind: str
    values: tuple[Json, ...] = ()
    lo: int = 0
    hi: int = 0
    default: Json = None

    def __post_init__(self) -> None:
        if self.kind not in ("choice", "int", "pow2"):
            raise PlmrError(f"unknown knob kind '{self.kind}' (choice, int, pow2)")
        if self.kind == "choice" and not self.values:
            raise PlmrError("a choice knob needs at least one value")
        if self.kind in ("int", "pow2") and not 0 < self.lo <= self.hi:
            if self.kind == "pow2" or self.lo > self.hi:
                raise PlmrError(
                    f"a {self.kind} knob needs 0 < lo <= hi, got [{self.lo}, {self.hi}]"
                )
        if self.kind == "pow2" and (self.lo & (self.lo - 1) or self.hi & (self.hi - 1)):
            raise PlmrError(
                f"a pow2 knob's bounds must be powers of two, got [{self.lo}, {self.hi}]"
            )
        if self.kind == "choice":
            keys = [json.dumps(v, sort_keys=True) for v in self.values]
            if len(set(keys)) != len(keys):
                raise PlmrError(
                    f"a choice knob's values must differ, got {list(self.values)}"
                )
        if self.default is not None and self.default not in self.domain():
            raise PlmrError(f"knob default {self.default!r} is not in its domain")

    def domain(self) -> list[Json]:
        """Every value of the knob, in order."""
        if self.kind == "choice":
            return list(self.values)
        if self.kind == "int":
            return list(range(self.lo, self.hi + 1))
        out: list[Json] = []
        v = self.lo
        while v <= self.hi:
            out.append(v)
            v *= 2
        return out

    @property
    def initial(self) -> Json:
        """The value used when the knob is not tuned: its default, else its first value."""
        return self.default if self.default is not None else self.domain()[0]

    def to_json(self) -> dict[str, Json]:
        out: dict[str, Json] = {"knob": self.kind}
        if self.kind == "choice":
            out["values"] = list(self.values)
        else:
            out["lo"], out["hi"] = self.lo, self.hi
        if self.default is not None:
            out["default"] = self.default
        return out

    @staticmethod
    def from_json(data: Mapping[str, Json]) -> Knob:
        kind = data.get("knob")
        known = {"knob", "values", "lo", "hi", "default"}
        extra = set(data) - known
        if extra:
            raise PlmrError(f"unknown knob field(s) {sorted(extra)} in {dict(data)}")
        if kind == "choice":
            values = data.get("values")
            if not isinstance(values, list):
                raise PlmrError(f"a choice knob needs a list of values, got {values!r}")
            return Knob(
                "choice", tuple(cast(list[Json], values)), default=data.get("default")
            )
        lo, hi = data.get("lo"), data.get("hi")
        if not isinstance(lo, int) or not isinstance(hi, int):
            raise PlmrError(f"a {kind} knob needs integer lo and hi, got {dict(data)}")
        return Knob(str(kind), lo=lo, hi=hi, default=data.get("default"))


def choice(*values: Json, default: Json = None) -> Knob:
    """A knob over the given values."""
    return Knob("choice", tuple(values), default=default)


def int_range(lo: int, hi: int, default: int | None = None) -> Knob:
    """A knob over the integers lo..hi."""
    return Knob("int", lo=lo, hi=hi, default=default)


def pow2(lo: int, hi: int, default: int | None = None) -> Knob:
    """A knob over the powers of two lo..hi."""
    return Knob("pow2", lo=lo, hi=hi, default=default)


def _param_to_json(value: Json) -> Json:
    if isinstance(value, Knob):
        return value.to_json()
    if isinstance(value, dict):
        return {k: _param_to_json(v) for k, v in cast(dict[str, Json], value).items()}
    if isinstance(value, list | tuple):
        return [_param_to_json(v) for v in cast(Sequence[Json], value)]
    return value


def _param_from_json(value: Json) -> Json:
    if isinstance(value, dict):
        d = cast(dict[str, Json], value)
        if "knob" in d:
            return Knob.from_json(d)
        return {k: _param_from_json(v) for k, v in d.items()}
    if isinstance(value, list):
        return [_param_from_json(v) for v in cast(list[Json], value)]
    return value


def _walk_knobs(value: Json, path: str) -> Iterator[tuple[str, Knob]]:
    if isinstance(value, Knob):
        yield path, value
    elif isinstance(value, dict):
        for k, v in cast(dict[str, Json], value).items():
            yield from _walk_knobs(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(cast(list[Json], value)):
            yield from _walk_knobs(v, f"{path}.{i}")


def _bind(value: Json, path: str, values: Mapping[str, Json]) -> Json:
    if isinstance(value, Knob):
        chosen = values.get(path, value.initial)
        if chosen not in value.domain():
            raise PlmrError(f"value {chosen!r} for knob {path} is outside its domain")
        return chosen
    if isinstance(value, dict):
        return {
            k: _bind(v, f"{path}.{k}", values)
            for k, v in cast(dict[str, Json], value).items()
        }
    if isinstance(value, list):
        return [
            _bind(v, f"{path}.{i}", values) for i, v in enumerate(cast(list[Json], value))
        ]
    return value


# ---------------------------------------------------------------------------------------
# Transforms
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProgramInfo:
    """What constraints look at: the loop nests (by result name) after fusion."""

    nests: Mapping[str, tuple[tuple[int, ...], tuple[int, ...]]]
    """Result name -> (parallel extents, reduction extents)."""


class Transform:
    """
    A recorded transformation: its kind and parameters (plain values or knobs). It never
    applies itself; `configure` writes its settings into the compile options.
    """

    kind: ClassVar[str] = ""
    PARAMS: ClassVar[dict[str, Json]] = {}

    def __init__(self, **params: Json) -> None:
        unknown = set(params) - set(self.PARAMS)
        if unknown:
            raise PlmrError(
                f"{self.kind}: unknown parameter(s) {sorted(unknown)} "
                f"(known: {', '.join(self.PARAMS)})"
            )
        self.params: dict[str, Json] = {
            name: params.get(name, default) for name, default in self.PARAMS.items()
        }

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Transform)
            and other.kind == self.kind
            and json.dumps(other.to_json(), sort_keys=True)
            == json.dumps(self.to_json(), sort_keys=True)
        )

    def __hash__(self) -> int:
        return hash(json.dumps(self.to_json(), sort_keys=True))

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"{type(self).__name__}({args})"

    def to_json(self) -> dict[str, Json]:
        return {
            "transform": self.kind,
            **{k: _param_to_json(v) for k, v in self.params.items()},
        }

    def knobs(self, prefix: str = "") -> dict[str, Knob]:
        """The knobs by path, e.g. `tile.parallel`, `tile.nests.o.0`."""
        base = prefix or self.kind
        out: dict[str, Knob] = {}
        for name, value in self.params.items():
            out.update(_walk_knobs(value, f"{base}.{name}"))
        return out

    def bind(self, values: Mapping[str, Json], prefix: str = "") -> Transform:
        """A copy with every knob replaced by its value in `values` (else its initial)."""
        base = prefix or self.kind
        params = {k: _bind(v, f"{base}.{k}", values) for k, v in self.params.items()}
        return type(self)(**params)

    def value(self, name: str) -> Json:
        """A parameter's value, taking a knob's initial value."""
        v = self.params[name]
        return v.initial if isinstance(v, Knob) else v

    def check(self, info: ProgramInfo) -> str | None:
        """Why the (bound) transform cannot apply to the program, or None."""
        del info
        return None

    def integer(self, name: str, minimum: int = 0) -> int:
        """A parameter that must be an integer >= `minimum` (else a one-line error)."""
        v = self.value(name)
        if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
            raise PlmrError(
                f"{self.kind}: parameter '{name}' must be an integer >= {minimum}, got {v!r}"
            )
        return v

    def number(self, name: str) -> float:
        v = self.value(name)
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise PlmrError(f"{self.kind}: parameter '{name}' must be a number, got {v!r}")
        return float(v)

    def flag(self, name: str) -> bool:
        v = self.value(name)
        if not isinstance(v, bool):
            raise PlmrError(
                f"{self.kind}: parameter '{name}' must be true or false, got {v!r}"
            )
        return v

    def text(self, name: str) -> str:
        v = self.value(name)
        if not isinstance(v, str):
            raise PlmrError(f"{self.kind}: parameter '{name}' must be a string, got {v!r}")
        return v

    def configure(self, options: dict[str, Json]) -> None:
        """Writes this transform's settings into `CompileOptions` keyword arguments."""
        raise NotImplementedError


class Substitute(Transform):
    """TASO graph substitutions (`taso-substitute{alpha, budget}`), or none."""

    kind = "substitute"
    PARAMS: ClassVar[dict[str, Json]] = {"enabled": True, "alpha": 1.05, "budget": 100}

    def configure(self, options: dict[str, Json]) -> None:
        options["substitute"] = self.flag("enabled")
        options["alpha"] = self.number("alpha")
        options["budget"] = self.integer("budget")


class EliminateTransposes(Transform):
    """`transpose-elim`, or none."""

    kind = "eliminate-transposes"
    PARAMS: ClassVar[dict[str, Json]] = {"enabled": True}

    def configure(self, options: dict[str, Json]) -> None:
        options["eliminate_transposes"] = self.flag("enabled")


class Fuse(Transform):
    """`neptune-fuse{strategy, chunks}`: rolling (prefill) or split-K (decode) update."""

    kind = "fuse"
    PARAMS: ClassVar[dict[str, Json]] = {"strategy": "auto", "chunks": 4}

    def __init__(self, strategy: Json = "auto", **params: Json) -> None:
        super().__init__(strategy=strategy, **params)

    def check(self, info: ProgramInfo) -> str | None:
        if self.value("strategy") not in ("auto", "rolling", "split-k"):
            return f"fuse: unknown strategy {self.value('strategy')!r}"
        return None

    def configure(self, options: dict[str, Json]) -> None:
        strategy = self.value("strategy")
        if strategy not in ("auto", "rolling", "split-k"):
            raise PlmrError(f"fuse: unknown strategy {strategy!r} (auto, rolling, split-k)")
        options["fuse"] = strategy
        options["chunks"] = self.integer("chunks", 1)


class Tile(Transform):
    """
    `convert-loop-to-tile`: the block of parallel and reduction loops (`"auto"`: chosen
    for the grid by `plmr compile`), and per-nest blocks `nests = {name: [P, R]}`
    addressed by the name of the tensor the nest computes.
    """

    kind = "tile"
    PARAMS: ClassVar[dict[str, Json]] = {
        "parallel": "auto",
        "reduction": "auto",
        "nests": {},
    }

    def _sizes(self) -> tuple[int, int] | None:
        p, r = self.value("parallel"), self.value("reduction")
        if p == "auto" and r == "auto":
            return None
        if p == "auto" or r == "auto":
            raise PlmrError("tile: parallel and reduction must both be sizes or both auto")
        return (self.integer("parallel", 1), self.integer("reduction", 1))

    def _nests(self) -> dict[str, tuple[int, int]]:
        nests = self.params["nests"]
        if not isinstance(nests, dict):
            raise PlmrError(f"tile: nests must be an object name -> [P, R], got {nests!r}")
        out: dict[str, tuple[int, int]] = {}
        for name, sizes in cast(dict[str, Json], nests).items():
            if not isinstance(sizes, list):
                raise PlmrError(
                    f"tile: nest '{name}' needs [P, R] positive sizes, got {sizes!r}"
                )
            values = [
                v.initial if isinstance(v, Knob) else v for v in cast(list[Json], sizes)
            ]
            if len(values) != 2 or not all(
                isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values
            ):
                raise PlmrError(
                    f"tile: nest '{name}' needs [P, R] positive sizes, got {sizes}"
                )
            out[name] = (int(values[0]), int(values[1]))
        return out

    def check(self, info: ProgramInfo) -> str | None:
        sizes = self._sizes()
        for name, (p, r) in self._nests().items():
            if name not in info.nests:
                known = ", ".join(sorted(info.nests)) or "none"
                return f"tile: no nest computes %{name} here (nests: {known})"
            reason = _divides(name, info.nests[name], p, r)
            if reason:
                return reason
        if sizes is None:
            return None
        for name, extents in info.nests.items():
            if name in self._nests():
                continue
            reason = _divides(name, extents, *sizes)
            if reason:
                return reason
        return None

    def configure(self, options: dict[str, Json]) -> None:
        options["tile_sizes"] = self._sizes()
        options["nest_tile_sizes"] = tuple((n, p, r) for n, (p, r) in self._nests().items())


def _divides(
    name: str, extents: tuple[tuple[int, ...], tuple[int, ...]], p: int, r: int
) -> str | None:
    par, red = extents
    for e in par:
        if e > p and e % p:
            return f"tile: {p} does not divide the extent {e} of a parallel loop of %{name}"
    if red and red[-1] > r and red[-1] % r:
        return f"tile: {r} does not divide the reduction extent {red[-1]} of %{name}"
    return None


class Partition(Transform):
    """`convert-tile-to-mesh`: grid, device, GEMM / GEMV algorithms, K-tree k and groups."""

    kind = "partition"
    PARAMS: ClassVar[dict[str, Json]] = {
        "grid": [4, 4],
        "device": "wse2",
        "gemm": "meshgemm",
        "gemv": "ktree",
        "k": 2,
        "groups": 0,
    }

    def grid(self) -> tuple[int, int]:
        g = self.value("grid")
        if (
            not isinstance(g, list | tuple)
            or len(cast(Sequence[Json], g)) != 2
            or not all(isinstance(v, int) and v > 0 for v in cast(Sequence[Json], g))
        ):
            raise PlmrError(f"partition: grid must be [rows, cols], got {g!r}")
        rows, cols = cast(Sequence[int], g)
        return (rows, cols)

    def check(self, info: ProgramInfo) -> str | None:
        from plmr.lowering.tile_to_mesh import parse_options

        try:
            parse_options(
                self.grid(),
                self.text("device"),
                self.text("gemm"),
                self.text("gemv"),
                self.integer("k", 1),
                self.integer("groups"),
            )
        except PlmrError as e:
            return str(e)
        return None

    def configure(self, options: dict[str, Json]) -> None:
        options["grid"] = self.grid()
        options["device"] = self.text("device")
        options["gemm"] = self.text("gemm")
        options["gemv"] = self.text("gemv")
        options["k"] = self.integer("k", 1)
        options["groups"] = self.integer("groups")


TRANSFORMS: dict[str, type[Transform]] = {
    t.kind: t for t in (Substitute, EliminateTransposes, Fuse, Tile, Partition)
}


class Compound(Transform):
    """
    A sequence of transforms, applied in order; nested compounds are flattened. Each kind
    appears at most once, so a transform is addressed by its kind (`get`, `replace`).
    """

    kind = "compound"

    def __init__(self, steps: Sequence[Transform] = ()) -> None:
        flat: list[Transform] = []
        for step in steps:
            flat.extend(step.steps if isinstance(step, Compound) else [step])
        kinds = [s.kind for s in flat]
        dup = {k for k in kinds if kinds.count(k) > 1}
        if dup:
            raise PlmrError(
                f"a schedule holds each transform once; repeated: {', '.join(sorted(dup))}"
            )
        self.steps: list[Transform] = flat
        self.params = {}

    def __repr__(self) -> str:
        return f"Compound({self.steps!r})"

    def get(self, kind: str) -> Transform | None:
        return next((s for s in self.steps if s.kind == kind), None)

    def replace(self, step: Transform) -> Compound:
        """A copy with `step` instead of the transform of its kind (appended if absent)."""
        if self.get(step.kind) is None:
            return Compound([*self.steps, step])
        return Compound([step if s.kind == step.kind else s for s in self.steps])

    def without(self, kind: str) -> Compound:
        return Compound([s for s in self.steps if s.kind != kind])

    def to_json(self) -> dict[str, Json]:
        return {"plmr_schedule": SCHEMA, "steps": [s.to_json() for s in self.steps]}

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2) + "\n"

    @staticmethod
    def from_json(data: Json) -> Compound:
        if not isinstance(data, dict) or "steps" not in data:
            raise PlmrError(
                'a schedule is a JSON object {"plmr_schedule": 1, "steps": [...]}'
            )
        d = cast(dict[str, Json], data)
        if d.get("plmr_schedule", SCHEMA) != SCHEMA:
            raise PlmrError(
                f"schedule format {d.get('plmr_schedule')!r} is not supported (expected {SCHEMA})"
            )
        steps = d["steps"]
        if not isinstance(steps, list):
            raise PlmrError("a schedule's steps must be a list")
        return Compound([_step_from_json(s) for s in cast(list[Json], steps)])

    @staticmethod
    def loads(text: str, source: str = "schedule") -> Compound:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise PlmrError(f"{source}: not valid JSON: {e}") from e
        return Compound.from_json(data)

    def knobs(self, prefix: str = "") -> dict[str, Knob]:
        out: dict[str, Knob] = {}
        for s in self.steps:
            out.update(s.knobs())
        return out

    def bind(self, values: Mapping[str, Json], prefix: str = "") -> Compound:
        unknown = set(values) - set(self.knobs())
        if unknown:
            raise PlmrError(f"no knob(s) {sorted(unknown)} in the schedule")
        return Compound([s.bind(values) for s in self.steps])

    def check(self, info: ProgramInfo) -> str | None:
        for s in self.steps:
            reason = s.check(info)
            if reason:
                return reason
        return None

    def configure(self, options: dict[str, Json]) -> None:
        for s in self.steps:
            s.configure(options)

    def compile_options(self) -> Any:
        """The `CompileOptions` of the bound schedule (knobs take their initial values)."""
        from plmr.passes.pipeline import CompileOptions

        options: dict[str, Json] = {}
        # A schedule without a transform does not run it.
        if self.get("substitute") is None:
            options["substitute"] = False
        if self.get("eliminate-transposes") is None:
            options["eliminate_transposes"] = False
        self.bind({}).configure(options)
        return CompileOptions(**options)

    def to_pipeline(self) -> str:
        """The pass pipeline `plmr compile` runs for this schedule (xDSL spec syntax)."""
        o = self.compile_options()
        nests = ";".join(f"{n}={p},{r}" for n, p, r in o.nest_tile_sizes)
        if o.tile_sizes is None:
            # The blocking is searched for the grid: that search is the plmr-compile pass.
            extra = f' nest-tile-sizes="{nests}"' if nests else ""
            return (
                f'plmr-compile{{grid={o.grid[0]},{o.grid[1]} device="{o.device}" '
                f'gemm="{o.gemm}" gemv="{o.gemv}" k={o.k} groups={o.groups} '
                f"substitute={str(o.substitute).lower()} alpha={option_literal(o.alpha)} budget={o.budget} "
                f"eliminate-transposes={str(o.eliminate_transposes).lower()} "
                f'fuse="{o.fuse}" chunks={o.chunks}{extra}}}'
            )
        passes: list[str] = []
        if o.eliminate_transposes:
            passes.append("transpose-elim")
        if o.defer_norm_scale:
            passes.append("graph-defer-norm-scale")
        if o.substitute:
            passes.append(
                f'taso-substitute{{alpha={option_literal(o.alpha)} budget={o.budget} device="{o.device}"}}'
            )
        passes.append("convert-graph-to-loop")
        passes.append(f'neptune-fuse{{strategy="{o.fuse}" chunks={o.chunks}}}')
        tile = f"tile-sizes={o.tile_sizes[0]},{o.tile_sizes[1]}"
        if nests:
            tile += f' nest-tile-sizes="{nests}"'
        passes.append(f"convert-loop-to-tile{{{tile}}}")
        passes.append(
            f'convert-tile-to-mesh{{grid={o.grid[0]},{o.grid[1]} device="{o.device}" '
            f'gemm="{o.gemm}" gemv="{o.gemv}" k={o.k} groups={o.groups}}}'
        )
        if o.pack_allreduces:
            passes.append("mesh-pack-allreduces")
        passes += ["mesh-route", "mesh-check-limits"]
        return ",".join(passes)

    def assignments(self) -> Iterator[dict[str, Json]]:
        """Every combination of knob values (grid search order)."""
        knobs = self.knobs()
        names = list(knobs)
        for combo in itertools.product(*(knobs[n].domain() for n in names)):
            yield dict(zip(names, combo, strict=True))


def _step_from_json(data: Json) -> Transform:
    if not isinstance(data, dict):
        raise PlmrError(f"a schedule step must be an object, got {data!r}")
    d = dict(cast(dict[str, Json], data))
    kind = d.pop("transform", None)
    if kind == "compound":
        return Compound.from_json(d)
    cls = TRANSFORMS.get(str(kind))
    if cls is None:
        raise PlmrError(
            f"unknown transform {kind!r} (known: {', '.join([*TRANSFORMS, 'compound'])})"
        )
    return cls(**{k: _param_from_json(v) for k, v in d.items()})


def default_schedule(grid: tuple[int, int] = (4, 4), device: str = "wse2") -> Compound:
    """`plmr compile`'s defaults as a schedule (no knobs)."""
    return Compound(
        [
            EliminateTransposes(),
            Substitute(),
            Fuse("auto"),
            Tile(),
            Partition(grid=list(grid), device=device),
        ]
    )


def tunable_schedule(
    grid: tuple[int, int] = (4, 4), device: str = "wse2", nests: Sequence[str] = ()
) -> Compound:
    """
    The defaults with the usual knobs: the fusion strategy, the GEMM/GEMV algorithms and
    K-tree k, and the blocking — global sizes, or with `nests` (names of loop nests) the
    blocking searched for the grid plus a knob per named nest.
    """
    if nests:
        tile = Tile(
            nests={n: [choice(2, 4, 8, 16), choice(16, 4, 8)] for n in nests},
        )
    else:
        tile = Tile(parallel=choice(16, 2, 4, 8, 32), reduction=choice(16, 4, 8, 32))
    return Compound(
        [
            EliminateTransposes(),
            Substitute(enabled=choice(True, False)),
            Fuse(choice("auto", "rolling", default="auto")),
            tile,
            Partition(
                grid=list(grid),
                device=device,
                gemm=choice("meshgemm", "cannon", "summa"),
                gemv=choice("ktree", "pipeline", "ring"),
                k=int_range(2, 4),
            ),
        ]
    )


__all__ = [
    "SCHEMA",
    "TRANSFORMS",
    "Compound",
    "EliminateTransposes",
    "Fuse",
    "Knob",
    "Partition",
    "ProgramInfo",
    "Substitute",
    "Tile",
    "Transform",
    "choice",
    "default_schedule",
    "int_range",
    "pow2",
    "tunable_schedule",
]
