"""olc-ml: the ai.onnx.ml operators for olc-core: tree ensembles on a forest
compiled once into a flat breadth-first node array, and the other operators
of scikit-learn pipelines."""

from .manifest import ML_OPS, kernel_name

__all__ = ["ML_OPS", "kernel_name"]
__version__ = "0.1.0"
