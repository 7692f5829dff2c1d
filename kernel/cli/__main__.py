"""`python -m kernel.cli`: the `session-kernel` command."""

import sys

from kernel.cli import main

if __name__ == "__main__":  # not when a `verify --jobs` worker process re-imports this module
    sys.exit(main())
