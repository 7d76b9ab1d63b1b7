"""The one place recprep's version is written."""

__version__ = "0.1.0"
