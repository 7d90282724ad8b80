"""``memory-lab serve``: a chat service over any memory, with a browser playground.

``command`` (the CLI's options and entry) imports nothing heavy; ``app`` builds the FastAPI app;
``chat`` keeps one memory per user (the run's ``Cell``, answering live); ``guard`` bounds and
validates what a request may carry. FastAPI and uvicorn come with ``pip install
'memory-lab[serve]'`` (``make setup`` installs them).
"""
