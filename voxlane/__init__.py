"""voxlane: an OpenAI-compatible speech server whose front end never stalls."""

__version__ = "0.1.0"
