"""Text for speech: read SSML (ssml.py), normalise (typography, then numbers, dates, money, units, addresses
and abbreviations written out as words: verbalise.py), split into units (sentences, clauses of long ones),
phonemise to Piper ids.

All of it runs on the API process's ``text`` executor, one worker process (espeak is not thread-safe, and
Piper's package loads onnxruntime, which the API process itself never imports).
"""
