"""Variants of `reduce`: in-thread folding, a lane butterfly, and shared memory across warps."""
