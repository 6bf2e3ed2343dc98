"""``python -m voxlane.config``: the README's table of settings; ``--expert``: docs/engine-config.md's."""

from __future__ import annotations

import sys

from voxlane.config import expert_table, settings_table

print(expert_table() if "--expert" in sys.argv[1:] else settings_table(), end="")
