"""Running: preparing a run, the cells (one memory x one dialogue), who executes them, and
inspecting one memory."""
