from __future__ import annotations

import threading
from pathlib import Path

from kombu import Connection

from console.core.broker import Transport


def _conn(folder: Path) -> Connection:
    queue = folder / "queue"
    queue.mkdir(parents=True, exist_ok=True)
    return Connection(transport=Transport, transport_options={
        "data_folder_in": str(queue), "data_folder_out": str(queue)})


def test_messages_are_handed_over_complete_and_once(tmp_path: Path) -> None:
    sent = [{"n": i, "pad": "x" * 5000} for i in range(300)]
    received: list[int] = []
    lock = threading.Lock()

    def consume() -> None:
        with _conn(tmp_path) as conn:
            q = conn.SimpleQueue("work")
            while True:
                with lock:
                    if len(received) == len(sent):
                        return
                try:
                    msg = q.get(timeout=0.5)
                except q.Empty:
                    continue
                with lock:
                    received.append(msg.payload["n"])
                assert len(msg.payload["pad"]) == 5000
                msg.ack()

    consumers = [threading.Thread(target=consume) for _ in range(3)]
    for t in consumers:
        t.start()
    with _conn(tmp_path) as conn:
        q = conn.SimpleQueue("work")
        for body in sent:
            q.put(body)
    for t in consumers:
        t.join(60)
    assert not any(t.is_alive() for t in consumers), f"only {len(received)} of 300 arrived"
    assert sorted(received) == list(range(300))
    assert not list((tmp_path / "staging").iterdir())


def test_the_embedded_scheme_uses_the_atomic_transport() -> None:
    from console.celery import app

    with app.connection_for_write() as conn:
        if conn.transport_cls == "filesystem":
            assert isinstance(conn.transport, Transport)
