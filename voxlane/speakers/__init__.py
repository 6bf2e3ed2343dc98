"""Speaker diarization below the engine: the encoder's weights (fetched at install time, read without torch),
its input features, known speakers' clips, and the pure functions that cluster and assign words."""
