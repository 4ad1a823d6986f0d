"""Merge keys (``<<``) flattened by the installed pyyaml's own ``SafeConstructor.flatten_mapping``, each merged
mapping counted against a budget before its pairs are copied (docs/yaml.md, "Anchors, aliases and merge keys").

pyyaml's rule changes between releases: 6.0.3 copies every merged pair (of ``<<: [*a, *b]`` the first listed
wins), 6.0.4 keeps a merged pair only if no pair merged before it has the very same key object (a key reached
through an alias, or a one-character key, which Python shares), so otherwise the last listed wins, and a merge
inside a merged mapping reads otherwise. evalcli never restates the rule: ``CountedMerges`` calls the installed
pyyaml's method and only counts, so a dataset loads as ``yaml.safe_load`` of the pyyaml installed reads it.

``flatten_all`` applies it to ``yamlnodes``' light nodes: they are made pyyaml nodes (``pyyaml_nodes``; a scalar
keeps the very string its parser made, which is what 6.0.4 compares), flattened in safe_load's order, and each
flattened mapping's pairs written back.
"""

from __future__ import annotations

import yaml
from yaml.constructor import SafeConstructor

from . import yamlnodes as nodes
from .yamlnodes import MAPPING, SCALAR, SEQUENCE, Node, TooManyMerged, mark, place


class CountedMerges(SafeConstructor):
    """pyyaml's ``SafeConstructor`` whose ``flatten_mapping`` is pyyaml's own, with the pairs of every mapping it
    merges in counted against ``budget`` before they are copied: pyyaml flattens a merged mapping (calling this
    method again) right before it reads that mapping's pairs into the one being flattened, which is where
    ``TooManyMerged`` is raised, at the mapping doing the merging. A mapping merged again is counted again (its
    pairs are read again) but not flattened again: pyyaml would walk its pairs to find no merge key left, as a
    flattened mapping has none (their keys were deleted, and the pairs merged into it come from flattened
    mappings), so skipping that walk changes nothing but the time a merge-key bomb takes."""

    def __init__(self, budget: int) -> None:
        super().__init__()
        self.left = budget
        """How many merged pairs may still be read."""
        self.flattened: list[yaml.MappingNode] = []
        """Every mapping flattened, in order."""
        self._open: list[yaml.MappingNode] = []
        self._done: set[int] = set()

    def flatten_mapping(self, node: yaml.MappingNode) -> None:
        if id(node) not in self._done:
            self._open.append(node)
            try:
                super().flatten_mapping(node)
            finally:
                self._open.pop()
            self._done.add(id(node))
            self.flattened.append(node)
        if self._open:  # merged into the mapping being flattened: pyyaml reads its pairs next
            self.left -= len(node.value)
            if self.left < 0:
                merging = self._open[-1].start_mark
                raise TooManyMerged(merging.line, merging.column)


def flatten_all(root: Node, budget: int) -> dict[int, int]:
    """Every mapping's merge keys flattened by ``CountedMerges``, in the order ``yaml.safe_load`` constructs them
    (breadth first: a collection's content after its siblings'), at most ``budget`` merged pairs read. The light
    mappings are changed in place; returns, per mapping (by id), how many of its pairs were merged in (they come
    first)."""
    twins = _Twins()
    merger = CountedMerges(budget)
    seen = {id(root)}
    level = [root]
    while level:
        following: list[Node] = []
        for node in level:
            kind, tag = node[0], node[4] if node[0] != SCALAR else None
            if kind == MAPPING and (tag is None or tag == nodes.SET_TAG):
                if any((key[1] if key[0] == SCALAR else key[4]) in _FLATTENED for key, _ in node[1]):
                    # (else pyyaml's method does nothing)
                    merger.flatten_mapping(twins.of(node))
                children = [part for pair in node[1] for part in pair]
            elif kind == SEQUENCE and tag is None:
                children = node[1]
            elif kind == SEQUENCE and (tag == nodes.OMAP_TAG or tag == nodes.PAIRS_TAG):  # their one-pair mappings
                children = [part for sub in node[1] if sub[0] == MAPPING for pair in sub[1][:1] for part in pair]
            else:  # read by pyyaml's constructor alone, unflattened
                continue
            for child in children:
                if child[0] != SCALAR and id(child) not in seen:
                    seen.add(id(child))
                    following.append(child)
        level = following
    return twins.write_back(merger.flattened)


_FLATTENED = frozenset({nodes.MERGE_TAG, nodes.VALUE_TAG})
"""The keys pyyaml's ``flatten_mapping`` acts on: a merge key (``<<``) and a value key (``=``)."""


class _Twins:
    """pyyaml nodes for the light nodes ``flatten_mapping`` reads, made when first needed: a mapping, its keys (a
    scalar key keeps the very string object of its light node, which is what 6.0.4 compares), and what a merge key
    names; any other value stays the light node (pyyaml's method never looks at it)."""

    def __init__(self) -> None:
        self.made: dict[int, yaml.Node] = {}
        self.light: dict[int, Node] = {}
        """Each twin's light node, by the twin's id."""
        self.own: dict[int, int] = {}
        """Per light mapping (by id), its pairs that are no merge key: they stay, after the merged ones."""

    def of(self, root: Node) -> yaml.MappingNode:
        """``root``'s twin, with every twin it leads to filled in (without recursion)."""
        pending: list[Node] = []
        made = self._twin(root, pending)
        while pending:
            node = pending.pop()
            twin = self.made[id(node)]
            if node[0] == SEQUENCE:
                twin.value = [self._twin(child, pending) for child in node[1]]
                continue
            pairs = []
            for key, value in node[1]:
                merge = (key[1] if key[0] == SCALAR else key[4]) == nodes.MERGE_TAG
                pairs.append((self.made.get(id(key)) or self._twin(key, pending, marked=False),
                              self._twin(value, pending) if merge else value))
            twin.value = pairs
            self.own[id(node)] = sum(1 for _, value in pairs if type(value) is tuple)
        assert isinstance(made, yaml.MappingNode)
        return made

    def _twin(self, node: Node, pending: list[Node], marked: bool = True) -> yaml.Node:
        made = self.made.get(id(node))
        if made is None:
            if node[0] == SCALAR:
                start = mark(node[3], node[4]) if marked else None
                made = yaml.ScalarNode(node[1], node[2], start, start, style=node[5])
            else:
                start = mark(node[2], node[3])
                made = (yaml.SequenceNode if node[0] == SEQUENCE else yaml.MappingNode)(_tag(node), [], start, start)
                pending.append(node)
            self.made[id(node)] = made
            self.light[id(made)] = node
        return made

    def write_back(self, flattened: list[yaml.MappingNode]) -> dict[int, int]:
        """The flattened mappings' pairs back into their light mappings; a key pyyaml retagged (``=``, the value
        key, becomes a string) gets a light node of its new tag. Returns how many pairs each merged in."""
        retagged: dict[int, Node] = {}

        def key_of(made_key: yaml.Node) -> Node:
            node = self.light[id(made_key)]
            if (node[1] if node[0] == SCALAR else _tag(node)) == made_key.tag:
                return node
            if id(made_key) not in retagged:
                retagged[id(made_key)] = ((SCALAR, made_key.tag, *node[2:]) if node[0] == SCALAR
                                          else (*node[:4], made_key.tag))
            return retagged[id(made_key)]

        counts: dict[int, int] = {}
        for made_node in flattened:
            node = self.light[id(made_node)]
            node[1][:] = [(key_of(key), value) for key, value in made_node.value]
            counts[id(node)] = len(node[1]) - self.own[id(node)]
        return counts


def _tag(node: Node) -> str:
    """A light node's tag as pyyaml's node has it (a collection's default tag written out)."""
    if node[0] == SCALAR:
        return str(node[1])
    return str(node[4] or (nodes.SEQ_TAG if node[0] == SEQUENCE else nodes.MAP_TAG))


def to_pyyaml(root: Node) -> yaml.Node:
    """Light nodes as pyyaml nodes (shared where they are shared), without recursion."""
    every: dict[int, Node] = {}
    pending = [root]
    while pending:
        node = pending.pop()
        if id(node) not in every:
            every[id(node)] = node
            if node[0] == SEQUENCE:
                pending.extend(node[1])
            elif node[0] == MAPPING:
                pending.extend(part for pair in node[1] for part in pair)
    made: dict[int, yaml.Node] = {}
    for key, node in every.items():
        start = mark(*place(node))
        made[key] = (yaml.ScalarNode(node[1], node[2], start, start, style=node[5]) if node[0] == SCALAR
                     else yaml.SequenceNode(_tag(node), [], start, start) if node[0] == SEQUENCE
                     else yaml.MappingNode(_tag(node), [], start, start))
    for key, node in every.items():
        if node[0] == SEQUENCE:
            made[key].value = [made[id(child)] for child in node[1]]
        elif node[0] == MAPPING:
            made[key].value = [(made[id(k)], made[id(v)]) for k, v in node[1]]
    return made[id(root)]
