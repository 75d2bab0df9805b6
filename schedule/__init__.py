"""Schedules as data (after Matmap): composable, tunable transforms, a tuner, a perf DB."""
