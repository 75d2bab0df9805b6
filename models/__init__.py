"""Model builders (LLaMA-style decoders) for examples and benchmarks."""
