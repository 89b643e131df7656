"""Variants of `fill`: setting every element of a tile to one value."""
