"""``python -m hookinbox.cli``."""

from hookinbox.cli.main import main

main()
