"""The package's version, on the ground floor: the facade, the CLI and the
HTML report all print it (pyproject.toml holds the same number)."""

__version__ = "0.1.0"
