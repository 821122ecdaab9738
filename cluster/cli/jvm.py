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

from protocol.jvm import java_hash_map_order, java_string_hash, scala_champ_order, signed32

__all__ = ["java_hash_map_order", "java_list_hash", "java_string_hash", "scala_hash_set_order"]

_MASK32 = 0xFFFFFFFF


def java_list_hash(items: Sequence[str]) -> int:
    """``List.hashCode`` of a list of strings."""
    h = 1
    for item in items:
        h = (31 * h + java_string_hash(item)) & _MASK32
    return signed32(h)


def scala_hash_set_order(hashes: Sequence[int]) -> list[int]:
    """Iteration order of a Scala 2.13 ``immutable.HashSet`` (CHAMP) of elements whose
    ``hashCode``s are ``hashes`` (distinct). The trie is canonical: a node yields its own
    entries by 5-bit slice of the improved hash, then descends into sub-nodes by slice.
    (A set built by ``Set(a, b)`` with up to four elements is a ``Set1``..``Set4`` instead,
    iterated in insertion order; one derived from a ``HashSet`` stays a ``HashSet``.)"""
    return scala_champ_order(hashes, hashes)
