__version__ = "0.0.1"

# The high-level API (nbs/09_api.ipynb), loaded on first use so `import ddtree_nb` needs no torch (PEP 562).
_API = ('Engine', 'GenerationConfig', 'GenerationOutput', 'TextStream')

def __getattr__(name):
    if name in _API:
        from ddtree_nb import api
        return getattr(api, name)
    raise AttributeError(f"module 'ddtree_nb' has no attribute {name!r}")

def __dir__(): return sorted(list(globals()) + list(_API))
