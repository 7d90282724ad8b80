"""``python -m memory_lab.cli``: the ``memory-lab`` command."""

from memory_lab.cli.entry import command

if __name__ == "__main__":
    command()
