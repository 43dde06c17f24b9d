"""Studies: built-in experiment designs that materialise into ordinary stored instances.

A study turns its own data file into test instances (like an imported dataset), so the runner,
the decisions table, exports and Explore handle it unchanged; its analysis lives next to it.
"""
