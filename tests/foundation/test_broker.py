from __future__ import annotations

import threading
from pathlib import Path

from kombu import Connection, Queue

from console.core.broker import Transport

N_PRODUCERS = 3
PER_PRODUCER = 100


def _conn(folder: Path) -> Connection:
    queue = folder / "queue"
    queue.mkdir(parents=True, exist_ok=True)
    return Connection(
        transport=Transport,
        transport_options={"data_folder_in": str(queue), "data_folder_out": str(queue)},
    )


def test_a_consumer_reading_while_producers_write_gets_every_message_whole(tmp_path: Path) -> None:
    """The race of kombu's own transport: a reader picking up a file its writer has created but
    not yet filled (the worker then crashed on an empty JSON document)."""
    total = N_PRODUCERS * PER_PRODUCER
    received: list[int] = []

    def produce(offset: int) -> None:
        # Publish only, as the web process does (a SimpleQueue would also start a consumer).
        with _conn(tmp_path) as conn:
            producer = conn.Producer()
            for i in range(PER_PRODUCER):
                producer.publish(
                    {"n": offset + i, "pad": "x" * 20000},
                    routing_key="work",
                    declare=[Queue("work")],
                    serializer="json",
                )

    def consume() -> None:
        with _conn(tmp_path) as conn:
            q = conn.SimpleQueue("work")
            misses = 0
            while len(received) < total and misses < 120:
                try:
                    msg = q.get(timeout=0.5)
                except q.Empty:
                    misses += 1
                    continue
                assert len(msg.payload["pad"]) == 20000
                received.append(msg.payload["n"])
                msg.ack()

    consumer = threading.Thread(target=consume)
    consumer.start()
    producers = [
        threading.Thread(target=produce, args=(k * PER_PRODUCER,)) for k in range(N_PRODUCERS)
    ]
    for t in producers:
        t.start()
    for t in producers:
        t.join(60)
    consumer.join(90)
    assert sorted(received) == list(range(total))
    assert not list((tmp_path / "staging").iterdir())


def test_the_embedded_scheme_uses_the_atomic_transport() -> None:
    from console.celery import app

    with app.connection_for_write() as conn:
        if conn.transport_cls == "filesystem":
            assert isinstance(conn.transport, Transport)
