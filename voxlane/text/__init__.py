"""Text for speech: normalise, split into units (sentences, clauses of long ones), phonemise to Piper ids.

All of it runs in the API process's single-worker ``text`` executor (espeak is not thread-safe).
"""
