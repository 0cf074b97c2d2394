"""The last JSON object a benchmark printed, for the scripts that run them.

Programs print one JSON line last, sometimes behind a prefix (cadre_launch's "[chief:0] ").
"""
import json


def last_json(text):
    """The last line's JSON object from its first "{", or None when no line holds one."""
    for line in reversed(text.splitlines()):
        start = line.find("{")
        if start >= 0:
            try:
                return json.loads(line[start:])
            except json.JSONDecodeError:
                continue
    return None
