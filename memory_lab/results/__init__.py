"""Results: reading a finished run's folder, summaries and comparisons, export, and the
dataset scorers that work on finished runs."""
