"""``python -m fll.cli``: the ``fll`` command."""
from .root import main

main()
