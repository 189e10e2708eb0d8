"""``python -m pycore``: same as the ``pycore`` console script."""

from pycore.cli import main

raise SystemExit(main())
