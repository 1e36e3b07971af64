"""GPU preflight: proves on the node itself that the delivered stack runs on its cards.

Run as ``python -m provisioning.preflight --device {cuda,cpu} --world-size N --json PATH``.
This package runs ON the GPU node, where only the Python standard library and PyTorch are installed:
it must never import Django nor any other part of the project. ``tests/provisioning/preflight/test_isolation.py``
keeps it that way.
"""
