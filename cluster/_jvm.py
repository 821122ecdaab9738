"""The JVM iteration orders ``kafka-topics``' output depends on.

``TopicCommand`` prints a topic's configs from a ``java.util.HashMap`` (the admin client's
``Config``), the topics of ``--describe --bootstrap-server`` from another ``HashMap``, and
reports the first of several clashing options in the iteration order of a Scala 2.13
``HashSet`` of jopt-simple option specs. For kemu's output to match byte for byte, these
orders are reproduced here. (``protocol.zkdata`` and ``actors.admin._jvm`` do the same for
the collections of ZooKeeper payloads and admin error messages.)
"""

from __future__ import annotations

from collections.abc import Sequence

_MASK32 = 0xFFFFFFFF


def _signed32(value: int) -> int:
    value &= _MASK32
    return value - (1 << 32) if value & 0x80000000 else value


def java_string_hash(text: str) -> int:
    """``String.hashCode``: over UTF-16 code units, as a signed 32-bit int."""
    units = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & _MASK32
    return _signed32(h)


def _table_size_for(capacity: int) -> int:
    """``HashMap.tableSizeFor``: the least power of two >= ``capacity`` (at least 1)."""
    return 1 if capacity <= 1 else 1 << (capacity - 1).bit_length()


def java_hash_map_order(keys: Sequence[str], *, initial_capacity: int = 16) -> list[str]:
    """Iteration order of a ``java.util.HashMap<String, _>`` after putting ``keys``
    (distinct, in order) into ``new HashMap<>(initial_capacity)``.

    Bins in index order (``(h ^ (h >>> 16)) & (n - 1)``), each in insertion order; a resize
    (size over 0.75 n, or a bin of a table under 64 reaching 9 nodes) splits bins without
    reordering them. Tree bins (9+ colliding nodes in a table of 64+) are not modelled.
    """
    n = _table_size_for(initial_capacity)
    threshold = int(n * 0.75)
    bins: list[list[tuple[int, str]]] = [[] for _ in range(n)]

    def resize() -> None:
        nonlocal n, threshold, bins
        grown: list[list[tuple[int, str]]] = [[] for _ in range(2 * n)]
        for nodes in bins:
            for node in nodes:
                grown[node[0] & (2 * n - 1)].append(node)
        n, threshold, bins = 2 * n, int(2 * n * 0.75), grown

    for size, key in enumerate(keys, start=1):
        h = java_string_hash(key) & _MASK32
        h ^= h >> 16
        nodes = bins[h & (n - 1)]
        nodes.append((h, key))
        if len(nodes) > 8 and n < 64:  # treeifyBin on a small table resizes instead
            resize()
        if size > threshold:
            resize()
    return [key for nodes in bins for _, key in nodes]


def java_list_hash(items: Sequence[str]) -> int:
    """``List.hashCode`` of a list of strings."""
    h = 1
    for item in items:
        h = (31 * h + java_string_hash(item)) & _MASK32
    return _signed32(h)


def _improve(h: int) -> int:
    """``scala.collection.Hashing.improve`` (Scala 2.13)."""
    h = _signed32(h + ~_signed32(h << 9))
    h = _signed32(h ^ ((h & _MASK32) >> 14))
    h = _signed32(h + _signed32(h << 4))
    return _signed32(h ^ ((h & _MASK32) >> 10))


def scala_hash_set_order(hashes: Sequence[int]) -> list[int]:
    """Iteration order of a Scala 2.13 ``immutable.HashSet`` (CHAMP) of elements whose
    ``hashCode``s are ``hashes`` (distinct). The trie is canonical: a node yields its own
    entries by 5-bit slice of the improved hash, then descends into sub-nodes by slice.
    (A set built by ``Set(a, b)`` with up to four elements is a ``Set1``..``Set4`` instead,
    iterated in insertion order; one derived from a ``HashSet`` stays a ``HashSet``.)"""
    improved = {h: _improve(h) & _MASK32 for h in hashes}

    def walk(group: list[int], shift: int) -> list[int]:
        if shift >= 35:
            return group
        slices: dict[int, list[int]] = {}
        for h in group:
            slices.setdefault((improved[h] >> shift) & 31, []).append(h)
        ordered = sorted(slices.items())
        out = [members[0] for _, members in ordered if len(members) == 1]
        for _, members in ordered:
            if len(members) > 1:
                out.extend(walk(members, shift + 5))
        return out

    return walk(list(hashes), 0)
