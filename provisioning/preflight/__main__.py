"""``python -m provisioning.preflight``: see ``cli.py``.

The guard matters: spawned rank processes import this module again as ``__mp_main__``.
"""

from __future__ import annotations

if __name__ == "__main__":
    from provisioning.preflight.cli import main

    raise SystemExit(main())
