"""The one compiled part of tilec: the fast launch path's C launcher
(tilec/runtime/_launcher.c).  It is optional: where it cannot be built (no
C compiler), the install still succeeds and tilec uses the pure-Python
launcher in tilec/runtime/launcher.py, which behaves the same, only slower.
Everything else is declared in pyproject.toml."""
from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("tilec.runtime._launcher", ["tilec/runtime/_launcher.c"], optional=True),
    ]
)
