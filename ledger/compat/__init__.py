"""Drop-in replacements for the seeds' code, built on agent-ledger's machine.

Code written against the articles switches by changing one import:

* ``from agent_budget import ...`` -> ``from ledger.compat.agent_budget import ...`` (seed 002)
* ``from loop_budget import ...`` -> ``from ledger.compat.loop_budget import ...`` (seed 000)
"""
