"""Variants of `gemm`: a synchronous matrix multiply-accumulate on register
operands (D = alpha A @ B + beta C)."""
