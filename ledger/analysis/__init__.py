"""Analyses over stored sessions: migration verdicts, what-if budgets, proposals, leftovers."""
