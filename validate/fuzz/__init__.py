"""
`plmr fuzz`: random valid programs (graph DAGs, loop nests) with random compile
configurations, compiled with every pass checked (`plmr.validate.check_each`), and the
failures minimised by delta debugging.
"""
