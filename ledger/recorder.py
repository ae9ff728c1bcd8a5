"""The recorder's public import path (``from ledger.recorder import Budget, open_session``),
kept for code written against it; the recorder itself is :mod:`ledger.live.recorder`."""

from ledger.core.budget import Budget
from ledger.live.recorder import BudgetExceeded, Recorder, new_session_id, open_session

__all__ = ["Budget", "BudgetExceeded", "Recorder", "new_session_id", "open_session"]
