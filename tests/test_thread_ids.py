"""Thread ids are unique per conversation, in a forked child too (a child that repeated its parent's ids would give
a service that keeps threads one run's conversation history as another's)."""

from __future__ import annotations

import os

from evalcli.targets.session import new_thread_id


def test_a_forked_child_does_not_repeat_its_parents_thread_ids() -> None:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ten ids, then out without pytest's teardown
        os.write(write, " ".join(new_thread_id() for _ in range(10)).encode())
        os._exit(0)
    os.close(write)
    parent = {new_thread_id() for _ in range(10)}
    with os.fdopen(read) as pipe:
        child = set(pipe.read().split())
    os.waitpid(pid, 0)
    assert len(child) == 10 and len(parent) == 10
    assert not parent & child


def test_thread_ids_are_version_4_uuids_and_distinct() -> None:
    ids = [new_thread_id() for _ in range(1000)]
    assert len(set(ids)) == 1000
    assert all(len(i) == 36 and i[14] == "4" and i[19] in "89ab" for i in ids)
