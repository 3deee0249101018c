"""``python -m schemas validate identity FILE...``: the ``ragu schemas`` command without the ragu CLI."""

from schemas.cli import main

raise SystemExit(main())
