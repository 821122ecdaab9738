"""How the JVM collections and types Kafka uses order and print themselves.

Kafka serialises Scala and Java maps and sets as it iterates them (ZooKeeper JSON through
Jackson, admin error messages and ``kafka-topics`` output through ``toString``), so
byte-for-byte fidelity needs those orders: ``String.hashCode``, ``java.util.HashMap``,
``ConcurrentHashMap``-backed ``Properties`` (JDK 9+), ``Hashtable`` (JDK 8), and Scala
2.13's ``mutable.HashMap`` and CHAMP ``immutable`` maps and sets, of ``String`` or ``Int``
elements. Some of its messages also embed a ``java.lang.Double``, or depend on ``String``'s
length, trimming and case rules. One implementation here, in the lowest layer that needs
it (``protocol.zkdata``), used by the admin actors, the controller and the CLI too.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
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


def java_hash_code(value: int | str) -> int:
    """``hashCode`` of a JVM ``String`` or ``Int`` (an ``Int``'s is itself)."""
    return java_string_hash(value) if isinstance(value, str) else signed32(value)


K = TypeVar("K", bound=int | str)


def scala_mutable_map_order(keys: Sequence[K], *, initial_capacity: int = 16) -> list[K]:
    """Iteration order of a Scala 2.13 ``mutable.HashMap`` after inserting ``keys``
    (distinct ``String``s or ``Int``s).

    Buckets are walked in index order; a bucket is kept sorted by improved hash
    (``h ^ (h >>> 16)``, signed), ties in insertion order; growing splits buckets without
    reordering. So the order is a sort by (bucket at the final size, hash, insertion).
    ``mutable.Map(kv*)`` sizes its table from its argument count, ``mutable.Map()`` from 16.
    """
    return scala_mutable_order(
        keys, [java_hash_code(k) for k in keys], initial_capacity=initial_capacity
    )


def scala_mutable_order(
    items: Sequence[T], hash_codes: Sequence[int], *, initial_capacity: int = 16
) -> list[T]:
    """``scala_mutable_map_order`` for distinct items of any type, given their
    ``hashCode``s: a Scala 2.13 ``mutable.HashMap``'s keys or ``mutable.HashSet``'s
    elements (the two share the table, its growth and its bucket order)."""
    table = min(highest_one_bit(max(initial_capacity - 1, 4)) * 2, 1 << 30)  # tableSizeFor
    threshold = int(table * 0.75)
    for size in range(len(items)):
        if size + 1 >= threshold:  # put0: grow before inserting
            table *= 2
            threshold = int(table * 0.75)
    hashes = [signed32(h ^ ((h & 0xFFFFFFFF) >> 16)) for h in hash_codes]
    ranked = sorted(range(len(items)), key=lambda i: (hashes[i] & (table - 1), hashes[i], i))
    return [items[i] for i in ranked]


def highest_one_bit(value: int) -> int:
    return 1 << (value.bit_length() - 1) if value > 0 else 0


def scala_improve(h: int) -> int:
    """``scala.collection.Hashing.improve`` (Scala 2.13), the CHAMP map's hash mixer."""
    h = signed32(h + ~signed32(h << 9))
    h = signed32(h ^ ((h & 0xFFFFFFFF) >> 14))
    h = signed32(h + signed32(h << 4))
    return signed32(h ^ ((h & 0xFFFFFFFF) >> 10))


def scala_immutable_order(keys: Sequence[K]) -> list[K]:
    """Iteration order of the Scala 2.13 ``immutable.Map`` or ``Set`` built from ``keys``
    (distinct ``String``s or ``Int``s, in insertion order).

    Up to four entries it is a ``Map1``..``Map4`` (``Set1``..``Set4``): insertion order.
    From five it is a CHAMP trie (``scala_hash_set_order``).
    """
    return list(keys) if len(keys) <= 4 else scala_hash_set_order(keys)


def scala_hash_set_order(keys: Sequence[K]) -> list[K]:
    """Iteration order of a Scala 2.13 CHAMP ``immutable.HashSet``/``HashMap`` of ``keys``
    (distinct ``String``s or ``Int``s), whatever its size: a ``Set`` derived from a
    ``HashSet`` stays one, so even a small one is not insertion-ordered."""
    return list(_champ_order(tuple(keys)))


@lru_cache(maxsize=1024)
def _champ_order(keys: tuple[K, ...]) -> tuple[K, ...]:
    """``scala_hash_set_order``, memoised (a znode's keys recur)."""
    return tuple(scala_champ_order(keys, [java_hash_code(key) for key in keys]))


def scala_set_after_removal(items: Sequence[int], removed: Iterable[int]) -> list[int]:
    """Order of ``items.toSet -- removed`` (``items`` distinct, in insertion order).

    A ``Set4`` or smaller stays insertion-ordered when elements are removed; a ``HashSet``
    (five or more before the removal) stays a ``HashSet`` and so is CHAMP-ordered.
    """
    gone = set(removed)
    kept = [item for item in items if item not in gone]
    return kept if len(items) <= 4 else scala_hash_set_order(kept)


def scala_hash_map_string(assignment: Mapping[int, Sequence[int]]) -> str:
    """``toString`` of the ``mutable.HashMap[Int, ArrayBuffer[Int]]`` that Kafka's
    CreateTopics handler builds from a manual assignment."""
    entries = (
        f"{p} -> ArrayBuffer({', '.join(map(str, assignment[p]))})"
        for p in scala_mutable_map_order(list(assignment))
    )
    return f"HashMap({', '.join(entries)})"


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


def java_list_hash(items: Sequence[str]) -> int:
    """``List.hashCode`` of a list of strings."""
    h = 1
    for item in items:
        h = (31 * h + java_string_hash(item)) & 0xFFFFFFFF
    return signed32(h)


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


# -- how JVM values print and compare


def java_double(value: float) -> str:
    """``java.lang.Double.toString``: plain notation for 1e-3 <= |x| < 1e7 (always with a
    fractional digit), else ``d.dddE±n``, with the shortest digits that round-trip. The
    JDKs Kafka 2.7 runs on print a few values with more digits (1e23 as
    ``9.999999999999999E22``); values a config holds are not among them."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign = "-" if value < 0 else ""
    digits_tuple = Decimal(repr(abs(value))).normalize().as_tuple()
    digits = "".join(map(str, digits_tuple.digits))
    exponent = int(digits_tuple.exponent) + len(digits) - 1  # of the first digit
    if -3 <= exponent < 7:
        if exponent >= 0:
            whole = digits[: exponent + 1].ljust(exponent + 1, "0")
            fraction = digits[exponent + 1 :] or "0"
        else:
            whole, fraction = "0", "0" * (-exponent - 1) + digits
        return f"{sign}{whole}.{fraction}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exponent}"


def java_bool(value: bool) -> str:
    return "true" if value else "false"


def java_length(text: str) -> int:
    """``String.length()``: UTF-16 code units, so characters outside the BMP count twice."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


_JAVA_TRIMMED = "".join(chr(c) for c in range(0x21))


def java_trim(text: str) -> str:
    """``String.trim()``: strips every character up to U+0020 from both ends (control
    characters included, Unicode spaces not)."""
    return text.strip(_JAVA_TRIMMED)


def java_equals_ignore_case(a: str, b: str) -> bool:
    """``String.equalsIgnoreCase``: equal length, and each pair of chars equal, or equal
    after ``toUpperCase``, or after ``toLowerCase`` (per character, so U+017F, the long s,
    matches 's')."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        ux, uy = _char_upper(x), _char_upper(y)
        if ux != uy and _char_lower(ux) != _char_lower(uy):
            return False
    return True


def _char_upper(char: str) -> str:
    """``Character.toUpperCase(char)``: only one-character mappings apply."""
    upper = char.upper()
    return upper if len(upper) == 1 else char


def _char_lower(char: str) -> str:
    lower = char.lower()
    return lower if len(lower) == 1 else char


def utf16_sort_key(text: str) -> bytes:
    """Sort key that orders strings as ``String.compareTo`` does (by UTF-16 code unit)."""
    return text.encode("utf-16-be", "surrogatepass")
