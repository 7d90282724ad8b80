"""``register_memory(..., persistent=...)``: where a memory keeps its state, declared on its
registration (``MemoryFactory.keeps_state``), checked against its parameters when registered."""

from __future__ import annotations

import typing

import pytest

from memory_lab.memories.registry import (
    memory_factories,
    parse_memory_spec,
    register_memory,
    unregister_memory,
)

# every built-in memory's declaration: the parameter values that keep its state on a server
DECLARED = {
    "thread": (("saver", ("postgres",)),),
    "store": (("backend", ("postgres",)),),
    "langmem": (("store", ("postgres",)),),
    "mem0": (("store", ("postgres",)),),
}


def test_the_built_in_memories_declare_where_they_keep_state():
    factories = memory_factories()
    assert {n: f.persistent for n, f in factories.items() if f.persistent} == DECLARED
    for text, kept in [
        ("thread:saver=postgres", True),
        ("thread:saver=sqlite", False),  # a file of the cell's, gone with it
        ("thread", False),
        ("store:backend=postgres", True),
        ("store", False),
        ("langmem:store=postgres", True),
        ("langmem", False),
        ("mem0:store=postgres", True),
        ("mem0", False),
        ("entity:store=sqlite", False),
        ("graphiti:keep=true", False),  # its database is in the cell's folder
        ("hindsight:keep=true", False),  # an embedded server in the cell's folder
        ("combined:parts=window+vector", False),
    ]:
        spec = parse_memory_spec(text)
        assert spec.factory.keeps_state(spec.params) is kept, text


def test_every_parameter_that_puts_state_on_a_server_is_declared():
    """A choice naming a server (``postgres``) is declared: a memory gaining one must say so,
    or ``memory-lab serve`` would lose its users' memories at every restart."""
    for name, factory in memory_factories().items():
        declared = dict(factory.persistent)
        for param in factory.params:
            choices = typing.get_args(param.type) if typing.get_origin(param.type) else ()
            if "postgres" in choices:
                assert "postgres" in declared.get(param.name, ()), (name, param.name)


def test_a_declaration_is_checked_against_the_parameters():
    def notes(res, place: typing.Literal["here", "there"] = "here"):  # never built
        raise AssertionError

    try:
        register_memory("notes_kept", "notes", persistent={"place": ("there",)})(notes)
        factory = memory_factories()["notes_kept"]
        assert factory.persistent == (("place", ("there",)),)
        assert factory.keeps_state({"place": "there"})
        assert not factory.keeps_state({"place": "here"})
        spec = parse_memory_spec("notes_kept:place=there")
        assert spec.factory.keeps_state(spec.params)
        for bad, message in [
            ({"where": ("there",)}, "names no parameter 'where'"),
            ({"place": ("elsewhere",)}, "must be one of here, there"),
            ({"place": "there"}, "must be a tuple of the parameter's values"),
            ({"place": ()}, "must be a tuple of the parameter's values"),
        ]:
            with pytest.raises(TypeError, match=message):
                register_memory("notes_bad", "notes", persistent=bad)(notes)
    finally:
        unregister_memory("notes_kept")
        unregister_memory("notes_bad")
