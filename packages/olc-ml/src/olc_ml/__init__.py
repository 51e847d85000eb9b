"""olc-ml: ai.onnx.ml TreeEnsembleRegressor and TreeEnsembleClassifier for
olc-core, on a forest compiled once into a flat breadth-first node array."""

from .manifest import ML_OPS, kernel_name

__all__ = ["ML_OPS", "kernel_name"]
__version__ = "0.1.0"
