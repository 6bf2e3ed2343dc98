"""The engine process: owns the models, batches windows across requests, never blocks on I/O."""
