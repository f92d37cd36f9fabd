"""The tests' shared entries (kernel_entries.py) importable by name under importlib mode;
the verifiers on (PSK-Kernel's after lowering, fusion and layout, PSK-Core's after its
passes)."""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
os.environ.setdefault("PRESK_VERIFY", "1")
