"""The cross-stage tests' shared helpers importable by name under --import-mode=importlib:
tests/helpers.py, and presk-kernel's kernel_entries.py (the entries every executor after the
interpreter is tested on, and the hand-built GEMM)."""

import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent / "packages" / "presk-kernel" / "tests"))
sys.path.insert(0, str(HERE))
