"""The gradient checks: finite_differences.py (mg.gradcheck and mg.gradgradcheck: a backward against central
differences) and gradcheck_cases.py (the table of every primitive they run over, and
`python -m minigrad.check.gradcheck_cases`). Above the whole engine, which they check; docs/layout.md maps the
packages.
"""
