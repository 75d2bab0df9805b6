"""
Equality saturation for `taso-substitute` (`engine=eqsat`), on egglog.

- `encode`: search graphs and both directions of every rule as an egglog program;
- `egraph`: the saturated e-graph read back, its nodes priced by the wafer cost model;
- `extract`: greedy (tree cost) and exact ILP (DAG cost) extraction;
- `engine`: saturation under limits on work (e-nodes, iterations, stages), and the choice of graph.
"""
