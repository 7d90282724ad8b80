"""The field's memory systems, one sub-package each: its adapter, its worker where it runs in an
environment of its own, its offline rule script and its declaration (``SYSTEM``, see
``memories/system.py``). Found by ``memories/discover.py``; nothing here lists them."""
