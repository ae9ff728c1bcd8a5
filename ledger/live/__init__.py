"""Recording a session as it runs: native events appended, the budget enforced at each call."""
