#!/usr/bin/env python3
"""tests/fake_agent.py, reporting usage the way `pi --mode json` does. Standalone, stdlib only.

Runs the fake agent with the same stdin and environment, then prints one pi `message_end`
event (an assistant message with `usage`) on stdout and exits with the fake agent's code. The
cost of each invocation is $USAGE_AGENT_COST dollars (default 0.01), its tokens 1000 in and
100 out. With `executor.preset: "pi"`, tf_fsm reads them as it reads pi's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

FAKE_AGENT = Path(__file__).resolve().parent.parent / "fake_agent.py"


def main() -> int:
    prompt = sys.stdin.buffer.read()
    done = subprocess.run([sys.executable, str(FAKE_AGENT)], input=prompt, check=False)
    cost = float(os.environ.get("USAGE_AGENT_COST", "0.01"))
    usage = {"input": 1000, "output": 100, "cacheRead": 0, "cacheWrite": 0, "cost": {"total": cost}}
    message = {"role": "assistant", "content": [], "usage": usage, "stopReason": "stop"}
    print(json.dumps({"type": "message_end", "message": message}), flush=True)
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
