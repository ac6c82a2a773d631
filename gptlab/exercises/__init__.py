"""Exercises: write a backward yourself and check it, as in CS231n's assignments. `python -m gptlab.exercises` lists
them (catalog.py, in the reading route's order; exercise.py says what one is, gpt.py holds the last), `start NAME`
writes a stub into your folder, `check NAME` runs your Function against the engine's and against finite differences
and names the mistake (check.py). docs/exercises.md.
"""
