"""The tests' shared entries (kernel_entries.py) importable by name under importlib mode."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
