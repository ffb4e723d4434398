"""Entry point of `python -m console.bench.loadgen`."""

from __future__ import annotations

import sys

from console.bench.loadgen.cli import main

if __name__ == "__main__":
    sys.exit(main())
