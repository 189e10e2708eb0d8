"""``python -m agent_template``: same as the ``agent-template`` console script."""

from agent_template.cli import main

raise SystemExit(main())
