"""The ``hookinbox`` command line (``hookinbox.cli:main``)."""

from hookinbox.cli.main import main

__all__ = ["main"]
