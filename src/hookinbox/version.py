"""The version of hookinbox, written once, here.

The build reads it without importing the package (``[tool.setuptools.dynamic]`` in
pyproject.toml), so a wheel, ``hookinbox --version``, ``hookinbox.__version__`` and the
``hookinbox_build_info`` metric always agree, installed or run from a checkout. (Reading
``importlib.metadata`` at run time instead would show a stale version in an editable
install until it is reinstalled.)
"""

__version__ = "0.1.0"
