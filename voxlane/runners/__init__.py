"""Model runners: turn a batch of windows into exactly one result per window."""
