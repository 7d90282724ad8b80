"""Scores of one probe: matching, evidence recall, the field's answer and rank scores, the LLM
judge, and the statistics over them."""
