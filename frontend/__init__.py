"""
Front ends: importers that turn models from other frameworks into `graph` programs
(`plmr.frontend.onnx`).
"""
