"""Money for reading: amounts are kept exact (JSON, the tables) and rounded only when shown."""

from __future__ import annotations

CURRENCY = "USD"  # the currency every price and cost is in (see docs/cost.md)


def usd(amount: float) -> str:
    """US dollars for reading: to the cent from a dollar up; under a dollar to four places,
    less the trailing zeros past the cents (a round of a small model costs a fraction of a
    cent: ``$0.0123``, but ``$0.50``); ``<$0.0001`` for a spend too small to show, so that no
    spend reads as nothing."""
    if amount == 0 or abs(amount) >= 1:
        return f"${amount:,.2f}"
    if abs(amount) < 0.00005:
        return "<$0.0001" if amount > 0 else "-<$0.0001"
    text = f"{amount:.4f}"
    while text.endswith("0") and len(text.split(".")[1]) > 2:
        text = text[:-1]
    return f"${text}"
