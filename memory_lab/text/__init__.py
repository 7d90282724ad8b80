"""Text in and out: answer normalisation, tokenising and stop words, input bounds, and
redaction of secrets."""
