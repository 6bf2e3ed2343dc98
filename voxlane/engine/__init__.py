"""The engine: its process (proc.py, core.py, the schedulers: owns the models, batches windows across
requests, never blocks on I/O) and, in ``client/``, the API process's side of its socket."""
