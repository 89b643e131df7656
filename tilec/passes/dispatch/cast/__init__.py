"""Variants of `cast`: converting register tiles between dtypes."""
