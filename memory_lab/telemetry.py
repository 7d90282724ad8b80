"""Every library's telemetry off, in the environment of every process memory-lab runs.

``import memory_lab`` (which every process of a run does before anything else of ours: the
command, ``--jobs`` and Ray workers as they unpickle a cell, ``serve``, ``view``, a notebook)
calls ``switch_off``, so the variables are set before any of these libraries loads, and the
processes they start inherit them. The hindsight worker, which gets an environment of its own,
is given ``OFF`` explicitly.

What each library would send, and the setting that stops it (audited in the pinned versions):

- onnxruntime 1.32 (the bundled embedding engines): on its first initialisation its POSIX
  telemetry resolves ``mobile.events.data.microsoft.com`` and queues events (the OS, the
  Python path, a persistent device id) under ``~/.cache/Microsoft/DeveloperTools/``:
  ``ORT_DISABLE_TELEMETRY``.
- chromadb (``vector``'s store): PostHog events on client creation: ``ANONYMIZED_TELEMETRY``
  (the client is also built with ``anonymized_telemetry=False``).
- Ray: usage statistics sent from the head node of a cluster ``ray.init`` starts:
  ``RAY_USAGE_STATS_ENABLED``.
- huggingface_hub (tokenizers' loading): telemetry on downloads, which never happen here
  (``HF_HUB_OFFLINE``): ``HF_HUB_DISABLE_TELEMETRY``.
- each field system: the switches its declaration names (``SYSTEM.telemetry`` in
  ``memories/systems/<name>/__init__.py``): mem0ai's PostHog events on every call
  (``MEM0_TELEMETRY``), graphiti-core's on initialisation (``GRAPHITI_TELEMETRY_ENABLED``),
  Hindsight's OpenTelemetry traces (``HINDSIGHT_API_OTEL_TRACES_ENABLED``; its environment's
  sentry_sdk is never initialised), Cognee's event per operation with a machine id kept under
  ``~/.cognee`` (``TELEMETRY_DISABLED``). A system an installed package declares has its
  switches set when its memory registers.
- ``DO_NOT_TRACK=1``, the cross-tool convention, for any library that honours it.

Not telemetry, and left to the user: LangSmith tracing (LangChain) sends traces only when the
user sets ``LANGSMITH_TRACING=true`` with a LangSmith key; OpenTelemetry exporters (chromadb,
Ray, Hindsight) send only to an endpoint the user configures.

The opt-outs are set unconditionally: a user's environment that turns telemetry on is
overridden, because a run promises that nothing leaves the machine but the calls to the
providers the user names.
"""

from __future__ import annotations

import os
import sys
import warnings

OFF: dict[str, str] = {
    "ORT_DISABLE_TELEMETRY": "1",
    "ANONYMIZED_TELEMETRY": "False",
    "RAY_USAGE_STATS_ENABLED": "0",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "DO_NOT_TRACK": "1",
}
_ACTIVE: dict[str, str] = {}  # every opt-out this process set: OFF and the systems' own


def switch_off(systems: dict[str, str] | None = None) -> None:
    """Set every opt-out of ``OFF``, and the field systems' ``systems`` (read from their
    declarations by ``import memory_lab``; an installed system's when its memory registers), in
    this process's environment (inherited by the processes it starts), and switch off the
    libraries already loaded (``switch_off_loaded``)."""
    late = "onnxruntime" in sys.modules and os.environ.get("ORT_DISABLE_TELEMETRY") != "1"
    _ACTIVE.update(OFF)
    _ACTIVE.update(systems or {})
    os.environ.update(_ACTIVE)
    switch_off_loaded()
    if late:
        warnings.warn(ORT_LOADED_FIRST, RuntimeWarning, stacklevel=3)


def active() -> dict[str, str]:
    """Every opt-out this process set (what a worker in an environment of its own is given)."""
    return dict(_ACTIVE or OFF)


# onnxruntime reads its switch when it loads, and its collector's uploader, started then, may
# still resolve mobile.events.data.microsoft.com after ``disable_telemetry_events``.
ORT_LOADED_FIRST = (
    "onnxruntime was imported before memory_lab with its telemetry on: it has written a device "
    "id under ~/.cache/Microsoft and may still contact Microsoft's collector; set "
    "ORT_DISABLE_TELEMETRY=1 before importing it, or import memory_lab first"
)


def switch_off_loaded() -> None:
    """Telemetry off in the libraries a process loaded before ``import memory_lab`` set the
    variables (a notebook that imported onnxruntime or mem0 first), which read them at their
    own import: onnxruntime's events (``disable_telemetry_events``: no collector is resolved
    when a session starts), mem0's PostHog clients (closed, its switch turned off where its
    modules read it) and PostHog's module switch. What such a library did at its own import is
    done: onnxruntime, imported first without ``ORT_DISABLE_TELEMETRY``, has already written
    its device id under ``~/.cache/Microsoft``."""
    ort = sys.modules.get("onnxruntime")
    if ort is not None and callable(getattr(ort, "disable_telemetry_events", None)):
        ort.disable_telemetry_events()
    mem0_telemetry = sys.modules.get("mem0.memory.telemetry")
    if mem0_telemetry is not None:
        mem0_telemetry.MEM0_TELEMETRY = False
        client = getattr(mem0_telemetry, "client_telemetry", None)
        if client is not None and callable(getattr(client, "close", None)):
            client.close()
        shutdown = getattr(mem0_telemetry, "_shutdown_oss_telemetry", None)
        if callable(shutdown):
            shutdown()
    for name in ("mem0.memory.main", "mem0.memory.async_main"):
        module = sys.modules.get(name)
        if module is not None and hasattr(module, "MEM0_TELEMETRY"):
            module.MEM0_TELEMETRY = False
    posthog = sys.modules.get("posthog")
    if posthog is not None:
        posthog.disabled = True
