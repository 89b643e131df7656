"""Variants of `copy` (synchronous: the calling threads move the data and
it is in place when they continue)."""
