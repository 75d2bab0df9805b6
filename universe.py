"""The xDSL universe of plmr: registers its dialects and passes with `xdsl-opt`."""

from xdsl.universe import Universe

from plmr.dialects import get_all_dialects
from plmr.passes import get_all_passes

PLMR_UNIVERSE = Universe(all_dialects=get_all_dialects(), all_passes=get_all_passes())
