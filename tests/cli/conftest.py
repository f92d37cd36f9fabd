"""The verifier of PSK-Core after every pass these tests run (`PRESK_VERIFY=1`,
presk_core.passes.verified): a pass that makes an ill-typed program fails the test that
runs it, the instruction named. `PRESK_VERIFY=0` in the environment turns it off."""

import os

os.environ.setdefault("PRESK_VERIFY", "1")
