"""The package version (one place; ``pyproject.toml`` repeats it and a test compares the two). Its own
module, at the bottom of the layers, so that the cache keys (:mod:`itemsampling.data.cache`) and the
runner's provenance (:mod:`itemsampling.run`) read it without importing the package's top."""

__version__ = "1.0.0"
