"""An engine that dies mid-stream: the client gets an SSE error event and [DONE], never a hang;
the gateway stays up and says 503 while the engine is gone."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from aiohttp import web

from gpu_agent.sim.testing import free_port
from tests.agent.agent_helpers import (
    ALL_KEY,
    MODEL,
    standalone_args,
    start_agent,
    tier_config,
)


def test_an_engine_killed_mid_stream_ends_the_stream_with_an_error_event(tmp_path: Path) -> None:
    port = free_port()
    engine = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gpu_agent.sim",
            "serve",
            MODEL,
            "--port",
            str(port),
            "--sim-preset",
            "tiny-test",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        engine_url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 20
        while True:
            try:
                if httpx.get(engine_url + "/health").status_code == 200:
                    break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "simulator did not start"
                time.sleep(0.05)
        args = standalone_args(tmp_path, engine_url, tier_config())
        with start_agent(args, tmp_path / "agent.log") as agent:
            body = {
                "model": MODEL,
                "messages": [{"role": "user", "content": "go"}],
                "max_tokens": 5000,
                "stream": True,
                "ignore_eos": True,
            }
            headers = {"Authorization": f"Bearer {ALL_KEY}"}
            lines: list[str] = []
            with httpx.stream(
                "POST", agent.url + "/v1/chat/completions", json=body, headers=headers, timeout=10
            ) as response:
                assert response.status_code == 200
                for line in response.iter_lines():
                    if not line:
                        continue
                    lines.append(line)
                    if len(lines) == 3:
                        os.kill(engine.pid, signal.SIGKILL)
            assert lines[-1] == "data: [DONE]"
            error = json.loads(lines[-2][len("data: ") :])["error"]
            assert error["code"] == "engine_error" and error["message"]
            engine.wait()
            assert httpx.get(agent.url + "/health").status_code == 200
            response = httpx.post(
                agent.url + "/v1/chat/completions",
                json={**body, "stream": False, "max_tokens": 2},
                headers=headers,
            )
            assert response.status_code == 503
            assert response.json()["error"]["code"] == "engine_down"
            assert agent.status()["in_flight"] == 0
    finally:
        if engine.poll() is None:
            engine.kill()
            engine.wait()


async def test_an_engine_that_refuses_priority_is_retried_without_it(tmp_path: Path) -> None:
    """vLLM under fcfs answers 400 to a non-zero `priority`: the gateway learns it once."""
    seen: list[Any] = []

    async def completions(request: web.Request) -> web.Response:
        body = await request.json()
        seen.append(body.get("priority"))
        if body.get("priority"):
            message = f"Got priority {body['priority']} but Priority scheduling is not enabled."
            return web.json_response(
                {"error": {"message": message, "type": "BadRequestError", "code": 400}}, status=400
            )
        return web.json_response({"choices": [{"message": {"content": "hi"}}], "usage": None})

    async def health(request: web.Request) -> web.Response:
        return web.Response(text="")

    app = web.Application()
    app.router.add_post("/v1/chat/completions", completions)
    app.router.add_get("/health", health)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        args = standalone_args(tmp_path, f"http://127.0.0.1:{port}", tier_config())
        agent = await asyncio.to_thread(start_agent, args, tmp_path / "agent.log")
        try:
            headers = {"Authorization": f"Bearer {ALL_KEY}", "X-Tiergate-Tier": "batch"}
            # The client's own priority never reaches the engine, before or after the refusal.
            body = {"model": MODEL, "messages": [{"role": "user", "content": "x"}], "priority": -9}
            async with httpx.AsyncClient(timeout=10) as client:
                for _ in range(2):
                    response = await client.post(
                        agent.url + "/v1/chat/completions", json=body, headers=headers
                    )
                    assert response.status_code == 200, response.text
        finally:
            await asyncio.to_thread(agent.stop)
    finally:
        await runner.cleanup()
    assert seen == [2, None, None]
