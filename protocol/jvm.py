"""Iteration orders of the JVM collections Kafka's output inherits.

Kafka serialises Scala and Java maps and sets as it iterates them (ZooKeeper JSON through
Jackson, admin error messages and ``kafka-topics`` output through ``toString``), so
byte-for-byte fidelity needs those orders: ``String.hashCode``, ``java.util.HashMap``,
``ConcurrentHashMap``-backed ``Properties`` (JDK 9+), ``Hashtable`` (JDK 8), and Scala
2.13's ``mutable.HashMap`` and CHAMP ``immutable`` maps and sets. One implementation here,
used by ``protocol.zkdata``, ``actors.admin`` and the CLI.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import TypeVar

T = TypeVar("T")


def signed32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


@lru_cache(maxsize=1 << 16)
def java_string_hash(text: str) -> int:
    """``java.lang.String.hashCode``: over UTF-16 code units, as a signed 32-bit int
    (memoised: the same keys and names are hashed over and over)."""
    units = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return signed32(h)


def scala_mutable_map_order(keys: Sequence[str], *, initial_capacity: int = 16) -> list[str]:
    """Iteration order of a Scala 2.13 ``mutable.HashMap`` after inserting ``keys``.

    Buckets are walked in index order; a bucket is kept sorted by improved hash
    (``h ^ (h >>> 16)``, signed), ties in insertion order; growing splits buckets without
    reordering. So the order is a sort by (bucket at the final size, hash, insertion).
    ``mutable.Map(kv*)`` sizes its table from its argument count, ``mutable.Map()`` from 16.
    """
    table = min(highest_one_bit(max(initial_capacity - 1, 4)) * 2, 1 << 30)  # tableSizeFor
    threshold = int(table * 0.75)
    for size in range(len(keys)):
        if size + 1 >= threshold:  # put0: grow before inserting
            table *= 2
            threshold = int(table * 0.75)
    hashes = [signed32(h ^ ((h & 0xFFFFFFFF) >> 16)) for h in map(java_string_hash, keys)]
    ranked = sorted(range(len(keys)), key=lambda i: (hashes[i] & (table - 1), hashes[i], i))
    return [keys[i] for i in ranked]


def highest_one_bit(value: int) -> int:
    return 1 << (value.bit_length() - 1) if value > 0 else 0


def scala_improve(h: int) -> int:
    """``scala.collection.Hashing.improve`` (Scala 2.13), the CHAMP map's hash mixer."""
    h = signed32(h + ~signed32(h << 9))
    h = signed32(h ^ ((h & 0xFFFFFFFF) >> 14))
    h = signed32(h + signed32(h << 4))
    return signed32(h ^ ((h & 0xFFFFFFFF) >> 10))


def scala_immutable_map_order(keys: Sequence[str]) -> list[str]:
    """Iteration order of the Scala 2.13 ``immutable.Map`` built from ``keys``.

    Up to four entries it is a ``Map1``..``Map4``: insertion order. From five it is a CHAMP
    trie keyed by 5-bit slices of the improved hash: a node yields its own entries (by
    slice) before descending into its sub-nodes (by slice). Equal hashes keep insertion
    order (a collision node appends).
    """
    if len(keys) <= 4:
        return list(keys)
    return list(_champ_order(tuple(keys)))


@lru_cache(maxsize=1024)
def _champ_order(keys: tuple[str, ...]) -> tuple[str, ...]:
    """``scala_immutable_map_order`` from five keys, memoised (a znode's keys recur)."""
    return tuple(scala_champ_order(keys, [java_string_hash(key) for key in keys]))


def scala_champ_order(items: Sequence[T], hash_codes: Sequence[int]) -> list[T]:
    """Iteration order of a Scala 2.13 CHAMP ``immutable.HashSet``/``HashMap`` whose
    elements (keys) are ``items``, distinct and in insertion order, with the JVM
    ``hashCode``s ``hash_codes``. The trie is canonical: a node yields its own entries by
    5-bit slice of the improved hash, then descends into its sub-nodes by slice; elements
    whose hashes are equal keep their insertion order (a collision node appends)."""
    improved = [scala_improve(h) & 0xFFFFFFFF for h in hash_codes]

    def walk(group: list[int], shift: int) -> list[int]:
        if shift >= 35:
            return group
        slices: dict[int, list[int]] = {}
        for i in group:
            slices.setdefault((improved[i] >> shift) & 31, []).append(i)
        ordered = sorted(slices.items())
        out = [members[0] for _, members in ordered if len(members) == 1]
        for _, members in ordered:
            if len(members) > 1:
                out.extend(walk(members, shift + 5))
        return out

    return [items[i] for i in walk(list(range(len(items))), 0)]


def java_topic_partition_hash(topic: str, partition: int) -> int:
    """``org.apache.kafka.common.TopicPartition.hashCode``: ``31 * (31 + partition) +
    topic.hashCode()``, as a signed 32-bit int."""
    return signed32(31 * (31 + partition) + java_string_hash(topic))


def table_size_for(capacity: int) -> int:
    """``HashMap.tableSizeFor``: the least power of two >= ``capacity`` (at least 1)."""
    return 1 if capacity <= 1 else 1 << (capacity - 1).bit_length()


def java_hash_map_order(keys: Sequence[str], *, initial_capacity: int = 16) -> list[str]:
    """Iteration order of a ``java.util.HashMap<String, _>`` after putting ``keys``
    (distinct, in order) into ``new HashMap<>(initial_capacity)``.

    Bins in index order (``(h ^ (h >>> 16)) & (n - 1)``), each in insertion order; a resize
    (size over 0.75 n, or a bin of a table under 64 reaching 9 nodes) splits bins without
    reordering them. Tree bins (9+ colliding nodes in a table of 64+) are not modelled.
    """
    n = table_size_for(initial_capacity)
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
        h = java_string_hash(key) & 0xFFFFFFFF
        h ^= h >> 16
        nodes = bins[h & (n - 1)]
        nodes.append((h, key))
        if len(nodes) > 8 and n < 64:  # treeifyBin on a small table resizes instead
            resize()
        if size > threshold:
            resize()
    return [key for nodes in bins for _, key in nodes]


def java_concurrent_hash_map_order(keys: Sequence[str]) -> list[str]:
    """Iteration order of ``java.util.Properties`` on JDK 9+, whose entries live in a
    ``ConcurrentHashMap(8)``: a 16-bin table, appends at a bin's tail, a resize when the
    count reaches 0.75 n. A resize moves each bin's trailing run of same-side nodes as is
    and *prepends* the nodes before it one by one, reversing them; a bin reaching 9 nodes
    grows a small table (``tryPresize``) or becomes a tree bin, where new nodes go first.
    """
    n, size_ctl = 16, 12
    bins: list[list[tuple[int, str]]] = [[] for _ in range(n)]
    trees = [False] * n

    def transfer() -> None:
        nonlocal n, size_ctl, bins, trees
        new_bins: list[list[tuple[int, str]]] = [[] for _ in range(2 * n)]
        new_trees = [False] * (2 * n)
        for i, nodes in enumerate(bins):
            if not nodes:
                continue
            if trees[i]:
                low = [node for node in nodes if not node[0] & n]
                high = [node for node in nodes if node[0] & n]
                new_trees[i], new_trees[i + n] = len(low) > 6, len(high) > 6
            else:
                run_bit, last_run = nodes[0][0] & n, 0
                for j in range(1, len(nodes)):
                    if (nodes[j][0] & n) != run_bit:
                        run_bit, last_run = nodes[j][0] & n, j
                low = [] if run_bit else nodes[last_run:]
                high = nodes[last_run:] if run_bit else []
                for node in nodes[:last_run]:
                    if node[0] & n:
                        high = [node, *high]
                    else:
                        low = [node, *low]
            new_bins[i], new_bins[i + n] = low, high
        size_ctl = 2 * n - n // 2
        n, bins, trees = 2 * n, new_bins, new_trees

    for count, key in enumerate(keys, start=1):
        h = java_string_hash(key)
        h = (h ^ ((h & 0xFFFFFFFF) >> 16)) & 0x7FFFFFFF
        i = h & (n - 1)
        if trees[i]:
            bins[i].insert(0, (h, key))
        else:
            already = len(bins[i])
            bins[i].append((h, key))
            if already >= 8:  # treeifyBin
                if n < 64:
                    wanted = 2 * n + n + 1  # tryPresize(n << 1): tableSizeFor(s + s/2 + 1)
                    wanted = 1 << (wanted - 1).bit_length()
                    while wanted > size_ctl:
                        transfer()
                else:
                    trees[i] = True
        while count >= size_ctl:
            transfer()
    return [key for nodes in bins for _, key in nodes]


def java_hashtable_order(keys: Sequence[str]) -> list[str]:
    """Iteration order of ``java.util.Properties`` on JDK 8, a ``Hashtable(11)``: new
    entries go to the head of bin ``(h & 0x7FFFFFFF) % n``; a rehash (when the count has
    reached 0.75 n) to ``2n + 1`` walks old bins from the top, re-inserting at heads; the
    iterator walks bins from the top down."""
    capacity, threshold = 11, 8
    bins: list[list[str]] = [[] for _ in range(capacity)]
    for count, key in enumerate(keys):
        if count >= threshold:
            new_capacity = 2 * capacity + 1
            new_bins: list[list[str]] = [[] for _ in range(new_capacity)]
            for nodes in reversed(bins):
                for old in nodes:
                    new_bins[(java_string_hash(old) & 0x7FFFFFFF) % new_capacity].insert(0, old)
            capacity, bins, threshold = new_capacity, new_bins, int(new_capacity * 0.75)
        bins[(java_string_hash(key) & 0x7FFFFFFF) % capacity].insert(0, key)
    return [key for nodes in reversed(bins) for key in nodes]
