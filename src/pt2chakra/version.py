"""The package's version, on the ground floor: the facade, the CLI and the
HTML report print it, and the facade sits above them all (pyproject.toml
holds the same number; the wheel test checks they agree)."""

__version__ = "0.1.0"
