"""One shard of a sharded run: the child process that `shards.run_sharded` starts.

Protocol (`python -m loadgen.shard_child`): one JSON object on stdin
(`{"spec": {...}, "start_at": unix}`), JSON lines on stdout (`{"progress": {...}}` ...,
then `{"result": {...}}`); SIGTERM cancels.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import signal
import sys
import threading
import time

from loadgen.loops import new_runner
from loadgen.runner import run_workload
from loadgen.spec import WorkloadSpec
from loadgen.types import Progress


async def run_child() -> None:
    payload = json.loads(sys.stdin.readline())
    spec = WorkloadSpec.from_dict(payload["spec"])
    cancel = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, cancel.set)
    await asyncio.sleep(max(payload["start_at"] - time.time(), 0))

    lock = threading.Lock()  # progress comes from worker threads, the result from here

    def report(progress: Progress) -> None:
        line = json.dumps({"progress": dataclasses.asdict(progress)})
        with lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    result = await run_workload(spec, on_progress=report, cancel_event=cancel)
    with lock:
        sys.stdout.write(json.dumps({"result": result.to_json_dict()}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    with new_runner() as runner:
        runner.run(run_child())
