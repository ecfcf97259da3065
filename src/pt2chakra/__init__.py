"""pt2chakra: PyTorch host + Kineto traces -> Chakra execution traces."""

__version__ = "0.1.0"
