"""walk(): every agent reachable from the root, each once, whatever the graph (cycles, shared sub-agents)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from evalcli.targets.graph import walk


class Node:
    def __init__(self, name: int) -> None:
        self.name = name
        self.children: list[Node | None] = []


@given(st.integers(1, 12).flatmap(
    lambda n: st.tuples(st.just(n), st.lists(st.tuples(st.integers(0, n - 1), st.integers(-1, n - 1)), max_size=40))))
def test_walk_reaches_each_reachable_agent_once(graph: tuple[int, list[tuple[int, int]]]) -> None:
    size, edges = graph
    nodes = [Node(i) for i in range(size)]
    for parent, child in edges:
        nodes[parent].children.append(nodes[child] if child >= 0 else None)  # None: a handoff to nothing
    reachable, stack = set(), [0]
    while stack:
        at = stack.pop()
        if at not in reachable:
            reachable.add(at)
            stack.extend(c.name for c in nodes[at].children if c is not None)
    walked = [node.name for node in walk(nodes[0], lambda node: node.children)]
    assert walked[0] == 0
    assert sorted(walked) == sorted(reachable)
