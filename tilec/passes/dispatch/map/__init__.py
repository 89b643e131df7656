"""Variants of `map`: computing a register tile element by element, with broadcasting."""
