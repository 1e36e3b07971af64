"""A stand-in for an extension whose op never returns on one card (a hung kernel), on the last rank only.

The other ranks finish the check and wait for it; the preflight's hard timeout must end the run and fail
`extensions` naming the stuck rank.
"""

from __future__ import annotations

import os
import time


def stall(x):
    if int(os.environ["RANK"]) == int(os.environ["WORLD_SIZE"]) - 1:
        time.sleep(3600)
    return x
