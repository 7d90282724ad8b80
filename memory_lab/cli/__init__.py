"""``memory-lab`` command line: run | import | export | beam-scores | judge-cognitive | list |
validate | report | inspect | serve | view, thin layers over the stages.

``parser`` builds the options, ``entry`` runs a command (exit codes, the one-line errors,
Ctrl-C and SIGTERM), and the commands are grouped by subject: ``run_commands`` (running and
resuming), ``result_commands`` (report, export, inspect) and ``dataset_commands`` (list,
validate, import and the dataset scorers).
"""

from memory_lab.cli.entry import command, main
from memory_lab.cli.parser import build_parser

__all__ = ["build_parser", "command", "main"]
