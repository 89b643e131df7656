"""tilec: a compiler for GPU tile programs."""

__version__ = "0.1.0"
