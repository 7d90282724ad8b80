"""Dialogues: the format and its validation, where dialogues come from (files, built-in
suites) and the importers of foreign datasets."""
