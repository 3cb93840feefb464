"""``python -m benchmarks.report``: see the package's docstring."""

from benchmarks.report import main

main()
