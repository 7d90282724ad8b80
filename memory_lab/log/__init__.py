"""What a run is and writes: its configuration, run.json (the run spec), the typed records,
records.jsonl written exactly once, the folder lock and the fault-injection points."""
