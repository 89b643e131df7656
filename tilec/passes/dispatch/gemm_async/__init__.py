"""Variants of `gemm_async`: a tensor-core matrix multiply that runs
asynchronously (wgmma on Hopper, tcgen05 on Blackwell); the caller commits
and waits for it."""
