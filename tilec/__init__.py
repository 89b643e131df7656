"""tilec: a compiler for GPU tile programs.

`tilec.compile(path_or_source, target=..., defines=...)` returns a
`CompiledModule`; `module.kernel(name)` is a launchable callable."""

__version__ = "0.1.0"


def compile(path_or_source, target=None, defines=None, options=None):
    """See `tilec.api.compile` (imported on first use, so that importing
    tilec stays cheap for the command-line driver)."""
    from tilec.api import compile as _compile

    return _compile(path_or_source, target=target, defines=defines, options=options)
