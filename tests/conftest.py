"""The cross-stage tests' shared helpers (tests/helpers.py) importable by name under
--import-mode=importlib."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
